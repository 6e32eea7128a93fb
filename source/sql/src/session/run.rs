//! Running statements in a session: [`SqlSession::execute`], [`SqlSession::execute_all`] and
//! the other entry points, which read the text, check it and hand each kind of statement to
//! the floor that runs it (`exec`, `catalog`, `objects`).

use std::collections::HashMap;
use std::sync::Arc;

use binlog_format::Value;
use sqlparser::ast::Statement;

use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::Engine;

use crate::accounts::Authority;
use crate::exec::{cte, ddl, select, table_lock};
use crate::expr::result::Outcome;
use crate::objects::triggers;
use crate::parse::lexer::{self, split_statements};
use crate::parse::statement::{normalized, parse_one, split_name};
use crate::table::rows::Rows;
use crate::{catalog, exec, expr, parse};
use crate::{warning_level, OwnedCtx, Privs, SqlSession};

/// Whether `q` asks for SQL_CALC_FOUND_ROWS (which FOUND_ROWS() then honours).
/// The modifier is on the first SELECT of a UNION, and counts the rows of the whole.
fn calcs_found_rows(q: &sqlparser::ast::Query) -> bool {
    fn first_select(body: &sqlparser::ast::SetExpr) -> bool {
        use sqlparser::ast::SetExpr;
        match body {
            SetExpr::Select(s) => s
                .select_modifiers
                .as_ref()
                .is_some_and(|m| m.sql_calc_found_rows),
            SetExpr::SetOperation { left, .. } => first_select(left),
            SetExpr::Query(q) => first_select(&q.body),
            _ => false,
        }
    }
    first_select(&q.body)
}

/// `db.name` or `name` into (db, name).
/// Whether `sql` is SHOW WARNINGS or SHOW ERRORS (also `SHOW COUNT(*) WARNINGS`), which show
/// the last statement's diagnostics instead of replacing them.
fn is_diagnostics(sql: &str) -> bool {
    // Asked for every statement: most do not start with SHOW, and most name no variable.
    let t = sql.trim_start();
    if !t.get(..4).is_some_and(|w| w.eq_ignore_ascii_case("SHOW")) {
        // `SELECT @@warning_count` reads them too.
        if !t.contains("@@") {
            return false;
        }
        return lexer::mentions(t, "@@warning_count")
            || lexer::mentions(t, "@@error_count")
            || lexer::mentions(t, "@@session.warning_count")
            || lexer::mentions(t, "@@session.error_count");
    }
    // `SHOW COUNT(*) WARNINGS` is four words here (the split is at parentheses).
    let words = lexer::first_words(t, 4);
    words.first().is_some_and(|w| w == "SHOW")
        && words[1..].iter().any(|w| {
            w == "WARNINGS" || w == "ERRORS" || w.starts_with("WARNINGS") || w.starts_with("ERRORS")
        })
}

impl SqlSession {
    /// The user variable `@name` (names compare case-insensitively), if set.
    pub fn user_variable(&self, name: &str) -> Option<Value> {
        self.user_vars.get(&name.to_lowercase()).cloned()
    }

    /// A session on `engine`: a new engine session (database `test`, autocommit on), no
    /// user variables, no prepared statements.
    pub fn new(engine: &Engine) -> SqlSession {
        SqlSession {
            session: engine.session(),
            user_vars: HashMap::new(),
            last_insert_id: 0,
            last: Default::default(),
            calc_found_rows: None,
            took_user_lock: Default::default(),
            load_dir: None,
            prepared: HashMap::new(),
            parsed: HashMap::new(),
            subqueries: Default::default(),
            correlated: Default::default(),
            outer: Default::default(),
            ctes: Default::default(),
            cte_max_recursion_depth: cte::DEFAULT_MAX_RECURSION_DEPTH,
            foreign_key_checks: true,
            lock_wait_timeout: crate::exec::vars::LOCK_WAIT_TIMEOUT_MAX,
            checksum_rows: false,
            authority: None,
            strict_write: false,
            sql_mode: expr::SQL_MODE.to_string(),
            zero_division_errors: true,
            expr_warnings: Default::default(),
            set_insert_id: Default::default(),
            client_found_rows: false,
            connection_id: 1,
            net_write_timeout: 60,
            port: 0,
            max_connections: 151,
            server_status: None,
            lock_owner: table_lock::new_owner(),
            table_locks: Vec::new(),
            last_error: None,
            call_depth: 0,
            trigger_tables: Vec::new(),
            view_depth: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Runs the session as `authority` from its next statement (`None`: every privilege),
    /// telling the engine whether it holds SUPER, which `SET GLOBAL read_only` lets write.
    pub fn set_authority(&mut self, authority: Option<Authority>) {
        self.session.vars.super_user = authority
            .as_ref()
            .and_then(|a| a.grants.as_deref())
            .is_none_or(|g| g.global_has(Privs::SUPER));
        self.authority = authority;
    }

    /// Drops the subquery results of the previous statement (each statement starts afresh).
    pub(crate) fn forget_subqueries(&mut self) {
        self.subqueries
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.correlated
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The engine the session runs on.
    pub fn engine(&self) -> &Engine {
        self.session.engine()
    }

    /// The evaluation context of the session as it is: subqueries run as they are met.
    pub(crate) fn ctx(&self) -> expr::Ctx<'_> {
        expr::Ctx {
            sql: Some(self),
            prefetched: None,
            now_us: self.session.now_us(),
            tz: self.session.vars.tz_offset,
            user_vars: &self.user_vars,
            database: self.session.vars.database.as_deref(),
            last_insert_id: self.last_insert_id,
            last: self.last,
            authority: self.authority.as_ref(),
            connection_id: self.connection_id,
            inserted: None,
            outer: self.outer.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            strict: self.strict_write,
            zero_division_errors: self.zero_division_errors,
            warnings: Some(&self.expr_warnings),
            set_insert_id: &self.set_insert_id,
        }
    }

    /// Runs `f` with [`expr::Ctx::strict`] as `strict` (an INSERT or UPDATE without IGNORE
    /// evaluating what it writes) when the session's sql_mode is strict, then as it was.
    pub(crate) fn writing<T>(&mut self, strict: bool, f: impl FnOnce(&mut SqlSession) -> T) -> T {
        let strict = strict && self.session.vars.strict;
        let was = std::mem::replace(&mut self.strict_write, strict);
        let r = f(self);
        self.strict_write = was;
        r
    }

    /// Runs an INSERT `f` telling the engine whether it is a one-row INSERT (one VALUES row,
    /// or SET): out of strict mode its NULL for a NOT NULL column stays error 1048, as in
    /// MySQL, where a multi-row INSERT or INSERT ... SELECT stores the type's zero.
    pub(crate) fn one_row_insert<T>(
        &mut self,
        one_row: bool,
        f: impl FnOnce(&mut SqlSession) -> T,
    ) -> T {
        let was = std::mem::replace(&mut self.session.one_row_insert, one_row);
        let r = f(self);
        self.session.one_row_insert = was;
        r
    }

    /// The inputs of evaluation as owned values, for closures that also borrow the session.
    pub(crate) fn owned_ctx(&self) -> OwnedCtx {
        OwnedCtx {
            now_us: self.session.now_us(),
            tz: self.session.vars.tz_offset,
            user_vars: self.user_vars.clone(),
            database: self.session.vars.database.clone(),
            last_insert_id: self.last_insert_id,
            last: self.last,
            authority: self.authority.clone(),
            connection_id: self.connection_id,
            subqueries: self
                .subqueries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            strict: self.strict_write,
            zero_division_errors: self.zero_division_errors,
            set_insert_id: Arc::clone(&self.set_insert_id),
            warnings: Arc::clone(&self.expr_warnings),
        }
    }

    /// Runs every statement of the script `sql` (split as [`split_statements`] splits it) in
    /// order, each with its own outcome: a failing statement does not stop the ones after it.
    pub fn execute_all(&mut self, sql: &str) -> Vec<Result<Outcome>> {
        split_statements(sql)
            .into_iter()
            .map(|s| self.execute(&s))
            .collect()
    }

    /// Runs one statement (surrounding blanks and a trailing `;` are ignored). A statement
    /// that changes rows and fails is undone (inside a transaction, that statement alone);
    /// with autocommit on (the default) and no transaction open, a change commits before this
    /// returns. Bad SQL is an error with MySQL's code and message.
    pub fn execute(&mut self, sql: &str) -> Result<Outcome> {
        self.with_diagnostics(sql, |s| s.retrying_taken_back(|s| s.execute_once(sql)))
    }

    /// Whether the statement that just ran may be run again from the start when what it read
    /// was taken back (it changed nothing): not once it took or gave back a user-level lock,
    /// which a second run would do twice.
    pub fn may_run_again(&self) -> bool {
        !self
            .took_user_lock
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs statement `sql` in MySQL's diagnostics area: each statement's warnings (and error)
    /// replace the last one's, except those of the statements that show them.
    pub(crate) fn with_diagnostics(
        &mut self,
        sql: &str,
        run: impl FnOnce(&mut SqlSession) -> Result<Outcome>,
    ) -> Result<Outcome> {
        self.took_user_lock
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let diagnostics = is_diagnostics(sql);
        if !diagnostics {
            let _ = self.session.take_warnings();
            self.last_error = None;
        }
        let taken = |s: &mut SqlSession| {
            std::mem::take(&mut *s.expr_warnings.lock().unwrap_or_else(|p| p.into_inner()))
        };
        let _ = taken(self);
        let r = run(self);
        let warnings = taken(self);
        for (c, m) in warnings.kept {
            self.session.warn(c, m);
        }
        self.session.count_dropped_warnings(warnings.dropped);
        if let (Err(e), false) = (&r, diagnostics) {
            self.last_error = Some((e.code, e.message.clone()));
        }
        r
    }

    /// Runs `run` again (twice at most) when it failed because it read what a failed commit
    /// took back ([`Error::read_taken_back`]) and no transaction was open: the statement
    /// changed nothing, and a client should not have to retry what ringrep itself undid.
    pub(crate) fn retrying_taken_back(
        &mut self,
        mut run: impl FnMut(&mut SqlSession) -> Result<Outcome>,
    ) -> Result<Outcome> {
        let outside = !self.session.in_transaction();
        let mut r = run(self);
        for _ in 0..2 {
            match &r {
                Err(e)
                    if outside
                        && e.is_read_taken_back()
                        && !self.session.in_transaction()
                        && self.may_run_again() =>
                {
                    r = run(self)
                }
                _ => break,
            }
        }
        r
    }

    /// A statement of a stored procedure: run as the caller's are, in the caller's
    /// diagnostics.
    pub(crate) fn execute_inner(&mut self, sql: &str) -> Result<Outcome> {
        if !self.trigger_tables.is_empty() {
            // Part of the statement that fired the trigger: that one is retried, or not.
            return self.execute_once(sql);
        }
        self.retrying_taken_back(|s| s.execute_once(sql))
    }

    pub(crate) fn execute_once(&mut self, sql: &str) -> Result<Outcome> {
        let text = normalized(sql);
        let first = lexer::first_words(&text, 3);
        // DDL commits implicitly, before and after, as in MySQL: the rows ringrep keeps for
        // it (a trigger, a view, a procedure, a declared engine) are committed with it, and
        // a ROLLBACK later cannot take them back while the DDL stays.
        let ddl = self.trigger_tables.is_empty()
            && matches!(
                first.first().map(String::as_str),
                Some("CREATE" | "DROP" | "ALTER" | "RENAME" | "TRUNCATE")
            );
        if ddl && self.session.in_transaction() {
            self.session.commit()?;
        }
        let r = self.execute_statement(text, first);
        self.note_generated_id(&r);
        if ddl && r.is_ok() && self.session.in_transaction() {
            self.session.commit()?;
        }
        r
    }

    /// After a statement that gave `r`: one that generated AUTO_INCREMENT values sets
    /// LAST_INSERT_ID() to its first; one that generated none leaves it. Every statement
    /// sets what ROW_COUNT() and FOUND_ROWS() return next.
    pub(crate) fn note_generated_id(&mut self, r: &Result<Outcome>) {
        if let Some(id) = self.session.take_generated_id() {
            if r.is_ok() {
                self.last_insert_id = id;
            }
        }
        let set = self
            .set_insert_id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let (Some(id), true) = (set, r.is_ok()) {
            self.last_insert_id = id;
        }
        // A statement the server runs again elsewhere has not run yet.
        if r.as_ref().is_err_and(Error::is_would_wait) {
            return;
        }
        self.last.row_count = match r {
            Ok(o @ Outcome::Affected { rows, .. }) => {
                let told = match o.rows_matched() {
                    Some(found) if self.client_found_rows => found,
                    _ => *rows,
                };
                i64::try_from(told).unwrap_or(i64::MAX)
            }
            Ok(Outcome::Ok) => 0,
            Ok(Outcome::Rows(_)) | Err(_) => -1,
        };
        if let Ok(Outcome::Rows(rs)) = r {
            self.last.found_rows = rs.rows.len() as u64;
        }
        if let (Some(n), true) = (self.calc_found_rows.take(), r.is_ok()) {
            self.last.found_rows = n;
        }
    }

    /// One statement, `text` normalized and `first` its first three words.
    pub(crate) fn execute_statement(
        &mut self,
        text: String,
        first: Vec<String>,
    ) -> Result<Outcome> {
        self.forget_subqueries();
        if text.is_empty() {
            return Err(Error::new(code::ER_EMPTY_QUERY, "Query was empty"));
        }
        let w = |i: usize| first.get(i).map(String::as_str).unwrap_or("");
        if !self.trigger_tables.is_empty() {
            // A statement of a procedure a trigger calls: no commit inside the statement that
            // fired it (the trigger's own were checked when it was created).
            triggers::check_in_trigger(&first, &text)?;
        }
        if exec::accounts::is_account_statement(&first) {
            return self.account_statement(&text);
        }
        self.authorize_text(&first, &text)?;
        match (w(0), w(1)) {
            ("ALTER", "TABLE") => {
                let words = lexer::first_words(&text, 5);
                if words.len() == 5
                    && matches!(words[3].as_str(), "DISABLE" | "ENABLE")
                    && words[4] == "KEYS"
                {
                    return self.disable_keys(&text);
                }
                return self.alter_table_text(&text);
            }
            ("LOAD", "DATA") => return self.load_data(&text),
            // MySQL 8.0.16's `DEFAULT ENCRYPTION='N'`, in every database SHOW CREATE DATABASE
            // and dump tools print: the default, so nothing to do.
            ("CREATE", "DATABASE" | "SCHEMA")
                if lexer::find_top_level(&text, "ENCRYPTION").is_some() =>
            {
                let plain = ddl::without_encryption_option(&text)?;
                return self.execute_statement(plain, first);
            }
            ("CREATE", "TABLE") if lexer::find_top_level(&text, "PARTITION BY").is_some() => {
                return self.create_table_text(&text)
            }
            ("CREATE", "TRIGGER" | "DEFINER") if triggers::is_create_trigger(&text) => {
                return self.create_trigger(&text)
            }
            ("CREATE", "VIEW" | "OR" | "ALGORITHM" | "DEFINER" | "SQL")
                if lexer::find_top_level(&text, "VIEW").is_some()
                    && lexer::find_top_level(&text, "PROCEDURE").is_none() =>
            {
                return self.create_view(&text)
            }
            ("DROP", "VIEW") => return self.drop_view(&text),
            ("SHOW", "CREATE") if w(2) == "VIEW" => {
                let name = text.split_whitespace().nth(3).unwrap_or_default();
                return self.show_create_view(name.trim_end_matches(';'));
            }
            ("CREATE", "PROCEDURE") => return self.create_procedure(&text),
            ("CREATE", "DEFINER") if lexer::find_top_level(&text, "PROCEDURE").is_some() => {
                return self.create_procedure(&text)
            }
            ("CALL", _) => return self.call(&text),
            ("DROP", "PROCEDURE") => return self.drop_procedure(&text),
            ("SHOW", "CREATE") if w(2) == "PROCEDURE" => {
                let name = text.split_whitespace().nth(3).unwrap_or_default();
                return self.show_create_procedure(name.trim_end_matches(';'));
            }
            ("DROP", "TRIGGER") => return self.drop_trigger(&text),
            ("SHOW", "TRIGGERS") => return self.show_triggers(&text),
            ("SHOW", "CREATE") if w(2) == "TRIGGER" => return self.show_create_trigger(&text),
            ("CREATE", "FUNCTION" | "TRIGGER" | "EVENT" | "DEFINER") | ("DROP", "FUNCTION") => {
                return Err(Error::unsupported(
                    "stored functions and events (stored procedures and triggers are supported)",
                ));
            }
            // FLUSH BINARY LOGS (and FLUSH LOGS, which includes it) starts a new binlog
            // file; the other FLUSH statements have nothing to flush in one engine.
            ("FLUSH", _) => {
                let what: Vec<String> = text
                    .split_whitespace()
                    .skip(1)
                    .map(|t| t.trim_end_matches(';').to_ascii_uppercase())
                    .filter(|t| t != "LOCAL" && t != "NO_WRITE_TO_BINLOG")
                    .collect();
                if matches!(
                    what.iter().map(String::as_str).collect::<Vec<_>>()[..],
                    ["BINARY", "LOGS"] | ["LOGS"]
                ) {
                    self.engine().flush_binary_logs()?;
                }
                return Ok(Outcome::Ok);
            }
            ("LOCK" | "UNLOCK", "TABLES" | "TABLE") if self.call_depth > 0 => {
                return Err(Error::new(
                    code::ER_SP_BADSTATEMENT,
                    format!("{} is not allowed in stored procedures", first[0]),
                ))
            }
            ("LOCK", "TABLES" | "TABLE") => return self.lock_tables(&text),
            // Dump tools also send it after starting their transaction, holding none.
            ("UNLOCK", "TABLES" | "TABLE") => return self.unlock_tables(),
            // DO expr, ...: evaluated as a SELECT would be, the values thrown away.
            ("DO", _) => {
                let t = text.trim_start();
                let body = match t.get(..2) {
                    Some(w) if w.eq_ignore_ascii_case("DO") => &t[2..],
                    _ => t,
                };
                let select = format!("SELECT {}", body.trim_start());
                self.dispatch(parse_one(&select)?, &select)?;
                return Ok(Outcome::Ok);
            }
            ("PREPARE", _) => return self.prepare(&text),
            ("EXECUTE", _) => return self.execute_prepared(&text),
            ("DEALLOCATE", "PREPARE") | ("DROP", "PREPARE") => {
                let name = w(2).to_lowercase();
                return match self.prepared.remove(&name) {
                    Some(_) => Ok(Outcome::Ok),
                    None => Err(Error::new(code::ER_UNKNOWN_STMT_HANDLER, format!("Unknown prepared statement handler ({name}) given to DEALLOCATE PREPARE"))),
                };
            }
            ("RENAME", "TABLE") => return self.rename_tables(&text),
            ("CHECKSUM", "TABLE") => return self.checksum_table(&text),
            ("OPTIMIZE", "TABLE") | ("ANALYZE", "TABLE") => {
                let op = w(0).to_lowercase();
                let names = text[text.to_ascii_uppercase().find("TABLE").map_or(0, |i| i + 5)..]
                    .to_string();
                let mut rows = Vec::new();
                for n in lexer::split_top_level_commas(&names) {
                    let n = n.replace('`', "");
                    let (db, t) = match n.split_once('.') {
                        Some((d, t)) => (Some(d.to_string()), t.to_string()),
                        None => (None, n.clone()),
                    };
                    let def = self.session.table_def(db.as_deref(), &t)?;
                    rows.push(vec![
                        Some(def.qualified_name()),
                        Some(op.clone()),
                        Some("status".into()),
                        Some("OK".into()),
                    ]);
                }
                return Ok(Outcome::text(
                    &["Table", "Op", "Msg_type", "Msg_text"],
                    rows,
                ));
            }
            ("SHOW", "CREATE") if matches!(w(2), "DATABASE" | "SCHEMA") => {
                return self.show_create_database(&text)
            }
            ("SHOW", "CHARACTER") if w(2) == "SET" => return self.show_character_sets(&text, 3),
            ("SHOW", "CHARSET") => return self.show_character_sets(&text, 2),
            ("SHOW", "COLLATION") => return self.show_collations(&text),
            ("SHOW", "ENGINES") => return self.show_engines(),
            ("SHOW", "STORAGE") if w(2) == "ENGINES" => return self.show_engines(),
            ("SHOW", "PLUGINS") => return self.show_plugins(),
            ("SHOW", "PROCEDURE" | "FUNCTION") if w(2) == "STATUS" => {
                return self.show_routine_status(&text, w(1))
            }
            ("SHOW", "COUNT") => return self.show_count(&text),
            ("SHOW", "WARNINGS") => return Ok(self.show_warnings(false)),
            ("SHOW", "ERRORS") => return Ok(self.show_warnings(true)),
            ("SHOW", "TABLE") if w(2) == "STATUS" => return self.show_table_status(&text),
            ("SHOW", "INDEX" | "INDEXES" | "KEYS") => return self.show_index(&text),
            ("CREATE", "INDEX" | "UNIQUE") | ("DROP", "INDEX") => {
                // INDEX on the table was checked on the statement as written.
                let alter = ddl::index_statement_as_alter(&text)?;
                return self.alter_table_text(&alter);
            }
            ("PURGE", "BINARY" | "MASTER") => return self.purge_binary_logs(&text),
            ("SHOW", "BINLOG") if w(2) == "EVENTS" => return self.show_binlog_events(&text),
            ("SHOW", "BINARY" | "MASTER") => {
                let words = lexer::first_words(&text, 4);
                let rest: Vec<&str> = words[2..].iter().map(String::as_str).collect();
                match (first[1].as_str(), rest.as_slice()) {
                    (_, ["LOGS"]) => return self.show_binary_logs(),
                    ("MASTER", ["STATUS"]) | ("BINARY", ["LOG", "STATUS"]) => {
                        return Ok(self.show_binlog_status())
                    }
                    _ => {}
                }
            }
            ("START", "TRANSACTION") if lexer::find_top_level(&text, "CONSISTENT").is_some() => {
                // As MySQL does for an engine without consistent snapshots: the transaction
                // starts, and a note says what it does not do.
                self.release_table_locks();
                self.session.begin()?;
                self.session.warn(
                    code::ER_UNKNOWN_ERROR.number,
                    "WITH CONSISTENT SNAPSHOT was ignored: ndbcluster tables are read committed, so reads under concurrent writes are not of one point in time (ringrep-source backup --from is)",
                );
                return Ok(Outcome::Ok);
            }
            ("BEGIN", _) if first.len() == 1 => {
                // A transaction gives back the session's table locks, as in MySQL.
                self.release_table_locks();
                self.session.begin()?;
                return Ok(Outcome::Ok);
            }
            _ => {}
        }
        let stmt = parse_one(&text)?;
        self.dispatch(stmt, &text)
    }

    /// Runs a parsed statement (`text` is its text, for result column names).
    pub(crate) fn dispatch(&mut self, stmt: Statement, text: &str) -> Result<Outcome> {
        self.authorize(&stmt)?;
        self.check_table_locks(&stmt)?;
        match stmt {
            // FOUND_ROWS() then counts the rows without the LIMIT: the query runs once
            // without it (MySQL reads them all too), and the LIMIT cuts what it gave.
            Statement::Query(q) if calcs_found_rows(&q) => {
                let (limit, offset) = select::limits(&q, &self.ctx())?;
                let mut all = (*q).clone();
                all.limit_clause = None;
                let mut rows = self.run_query(&all, text)?;
                self.calc_found_rows = Some(rows.rows.len() as u64);
                rows.rows = std::mem::take(&mut rows.rows)
                    .into_iter()
                    .skip(offset)
                    .take(limit.unwrap_or(usize::MAX))
                    .collect();
                Ok(self.rows_outcome(rows))
            }
            Statement::Query(q) => self.query(&q, text),
            Statement::Insert(ins) => {
                let one_row = ins.source.as_ref().is_none_or(|q| {
                    matches!(q.body.as_ref(), sqlparser::ast::SetExpr::Values(v) if v.rows.len() == 1)
                });
                self.writing(!ins.ignore, |s| {
                    s.one_row_insert(one_row, |s| s.insert(&ins))
                })
            }
            Statement::Update(u) => self.writing(true, |s| s.update(&u)),
            Statement::Delete(d) => self.delete(&d),
            Statement::CreateTable(ct) => self.create_table(&ct, None),
            Statement::CreateDatabase {
                db_name,
                if_not_exists,
                ..
            } => {
                let (_, name) = split_name(&db_name)?;
                self.session.create_database(&name, if_not_exists)?;
                Ok(Outcome::Affected {
                    rows: 1,
                    info: None,
                    found: None,
                })
            }
            Statement::Drop {
                object_type,
                if_exists,
                names,
                ..
            } => self.drop(object_type, if_exists, &names),
            Statement::Truncate(t) => {
                for target in &t.table_names {
                    let (db, name) = split_name(&target.name)?;
                    let def = self.session.table_def(db.as_deref(), &name)?;
                    self.check_truncate(&def)?;
                    self.session.truncate(&def)?;
                }
                Ok(Outcome::Affected {
                    rows: 0,
                    info: None,
                    found: None,
                })
            }
            Statement::Use(u) => {
                let name = match u {
                    sqlparser::ast::Use::Object(n)
                    | sqlparser::ast::Use::Database(n)
                    | sqlparser::ast::Use::Schema(n) => split_name(&n)?.1,
                    other => return Err(Error::unsupported(format!("{other}"))),
                };
                if !name.eq_ignore_ascii_case(catalog::information_schema::INFORMATION_SCHEMA)
                    && !self.engine().with_state(|st| st.has_database(&name))
                {
                    return Err(Error::new(
                        code::ER_BAD_DB_ERROR,
                        format!("Unknown database '{name}'"),
                    ));
                }
                self.session.vars.database = Some(name);
                Ok(Outcome::Ok)
            }
            Statement::StartTransaction { .. } => {
                // A transaction gives back the session's table locks, as in MySQL.
                self.release_table_locks();
                self.session.begin()?;
                Ok(Outcome::Ok)
            }
            Statement::Commit { .. } => {
                let r = self.session.commit();
                r?;
                Ok(Outcome::Ok)
            }
            Statement::Rollback {
                savepoint: Some(name),
                ..
            } => {
                self.session.rollback_to_savepoint(&name.value)?;
                Ok(Outcome::Ok)
            }
            Statement::Rollback { .. } => {
                self.session.rollback();
                Ok(Outcome::Ok)
            }
            Statement::Savepoint { name } => {
                self.session.savepoint(&name.value);
                Ok(Outcome::Ok)
            }
            Statement::ReleaseSavepoint { name } => {
                self.session.release_savepoint(&name.value)?;
                Ok(Outcome::Ok)
            }
            Statement::Set(set) => self.set(set),
            Statement::ShowCreate { obj_type, obj_name } => self.show_create(obj_type, &obj_name),
            Statement::ShowTables {
                full, show_options, ..
            } => {
                let db = match show_options
                    .show_in
                    .as_ref()
                    .and_then(|i| i.parent_name.as_ref())
                {
                    Some(n) => Some(split_name(n)?.1),
                    None => None,
                };
                let filter = parse::show::ShowFilter::of(&show_options);
                self.show_tables_in(full, db.as_deref(), filter.as_ref())
            }
            Statement::ExplainTable { table_name, .. } => {
                let (db, t) = split_name(&table_name)?;
                self.show_columns(false, db.as_deref(), &t, None)
            }
            Statement::ShowColumns {
                full, show_options, ..
            } => {
                let name = show_options
                    .show_in
                    .as_ref()
                    .and_then(|i| i.parent_name.as_ref())
                    .ok_or_else(|| Error::syntax("SHOW COLUMNS needs FROM table"))?;
                let (db, t) = split_name(name)?;
                let filter = parse::show::ShowFilter::of(&show_options);
                self.show_columns(full, db.as_deref(), &t, filter.as_ref())
            }
            Statement::ShowDatabases { show_options, .. } => {
                let rows = self
                    .visible_databases()
                    .into_iter()
                    .map(|d| vec![Value::Text(d)])
                    .collect();
                let filter = parse::show::ShowFilter::of(&show_options);
                self.show_result(&["Database"], rows, filter.as_ref())
            }
            Statement::ShowVariables { filter, .. } => self.show_variables(filter.as_ref()),
            Statement::ShowStatus { filter, .. } => self.show_status(filter.as_ref()),
            other => Err(Error::unsupported(first_keyword(&other.to_string()))),
        }
    }

    /// `ALTER TABLE t DISABLE KEYS` / `ENABLE KEYS` (dump files wrap their INSERTs in them):
    /// as MySQL does for an engine that keeps its indexes current, nothing changes and a note
    /// says the engine has no such option.
    pub(crate) fn disable_keys(&mut self, text: &str) -> Result<Outcome> {
        let after = text[text.to_ascii_uppercase().find("TABLE").map_or(0, |i| i + 5)..].trim();
        let name = after
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .replace('`', "");
        let (db, t) = match name.split_once('.') {
            Some((d, t)) => (Some(d.to_string()), t.to_string()),
            None => (None, name.clone()),
        };
        let def = self.session.table_def(db.as_deref(), &t)?;
        self.session.warn(
            code::ER_ILLEGAL_HA.number,
            format!(
                "Table storage engine for '{}' doesn't have this option",
                def.name
            ),
        );
        Ok(Outcome::Ok)
    }

    /// SHOW WARNINGS: the warnings and notes of the last statement and its error if it failed
    /// (Level `Error`, as MySQL lists it); SHOW ERRORS: the error only.
    pub(crate) fn show_warnings(&mut self, errors_only: bool) -> Outcome {
        // Shown, not cleared: the next statement replaces them.
        let warnings = self.session.warnings().to_vec();
        let error = self
            .last_error
            .clone()
            .map(|(c, m)| vec![Some("Error".to_string()), Some(c.to_string()), Some(m)]);
        let rows = warnings
            .into_iter()
            .filter(|_| !errors_only)
            .map(|(c, m)| {
                let number = c & !ringrep_engine::types::NOTE_LEVEL;
                vec![
                    Some(warning_level(c).into()),
                    Some(number.to_string()),
                    Some(m),
                ]
            })
            .chain(error)
            .collect();
        Outcome::text(&["Level", "Code", "Message"], rows)
    }

    /// The last statement's errors, warnings and notes (`@@warning_count`), or its errors
    /// (`@@error_count`), as MySQL counts them: its error is one of them.
    pub(crate) fn diagnostics_count(&self, errors_only: bool) -> usize {
        let warnings = if errors_only {
            0
        } else {
            self.session.warning_count()
        };
        warnings + usize::from(self.last_error.is_some())
    }

    /// `SHOW COUNT(*) WARNINGS` and `SHOW COUNT(*) ERRORS`.
    pub(crate) fn show_count(&mut self, text: &str) -> Result<Outcome> {
        let compact: String = text
            .split_whitespace()
            .collect::<String>()
            .to_ascii_uppercase();
        let errors_only = match compact.trim_end_matches(';') {
            "SHOWCOUNT(*)WARNINGS" => false,
            "SHOWCOUNT(*)ERRORS" => true,
            _ => {
                return Err(Error::syntax(format!(
                    "You have an error in your SQL syntax near '{text}'"
                )))
            }
        };
        let name = if errors_only {
            "@@session.error_count"
        } else {
            "@@session.warning_count"
        };
        Ok(Outcome::text_with_integers(
            &[name],
            vec![vec![Some(self.diagnostics_count(errors_only).to_string())]],
            &[name],
        ))
    }

    /// `PREPARE name FROM 'text'` (or `FROM @variable`).
    pub(crate) fn prepare(&mut self, text: &str) -> Result<Outcome> {
        let upper = text.to_ascii_uppercase();
        let from = lexer::find_top_level(text, "FROM")
            .ok_or_else(|| Error::syntax("PREPARE needs FROM"))?;
        let name = text[7..from].trim().trim_matches('`').to_lowercase();
        let source = text[from + 4..].trim();
        let body = if let Some(var) = source.strip_prefix('@') {
            ringrep_engine::types::text_of(
                self.user_vars
                    .get(&var.to_lowercase())
                    .unwrap_or(&Value::Null),
            )
        } else {
            lexer::take_string(source).map(|(s, _)| s).ok_or_else(|| {
                Error::syntax(format!(
                    "You have an error in your SQL syntax near '{}'",
                    &upper[from..]
                ))
            })?
        };
        // As in MySQL, PREPARE, EXECUTE and DEALLOCATE cannot themselves be prepared (an
        // EXECUTE of itself would never end).
        if lexer::first_words(&body, 1)
            .first()
            .is_some_and(|w| matches!(w.as_str(), "PREPARE" | "EXECUTE" | "DEALLOCATE"))
        {
            return Err(Error::new(
                code::ER_UNSUPPORTED_PS,
                "This command is not supported in the prepared statement protocol yet",
            ));
        }
        // Parse now, so a bad statement fails at PREPARE as in MySQL.
        let probe = lexer::normalize_quotes(&lexer::bind_placeholders(
            &body,
            &vec![Value::Null; body.matches('?').count()],
        ));
        let first = lexer::first_words(&probe, 2);
        if !(first.first().is_some_and(|w| w == "ALTER" || w == "LOAD")) {
            parse_one(&probe)?;
        }
        self.prepared.insert(name, body);
        Ok(Outcome::Ok)
    }

    /// `EXECUTE name [USING @a, @b, ...]`: binds the variables to the `?` placeholders.
    pub(crate) fn execute_prepared(&mut self, text: &str) -> Result<Outcome> {
        let rest = text[7..].trim();
        let (name, using) = match lexer::find_top_level(rest, "USING") {
            Some(i) => (rest[..i].trim(), Some(rest[i + 5..].trim())),
            None => (rest, None),
        };
        let name = name.trim_matches('`').to_lowercase();
        let body = self.prepared.get(&name).cloned().ok_or_else(|| {
            Error::new(
                code::ER_UNKNOWN_STMT_HANDLER,
                format!("Unknown prepared statement handler ({name}) given to EXECUTE"),
            )
        })?;
        let mut values = Vec::new();
        for v in using.map(lexer::split_top_level_commas).unwrap_or_default() {
            let var = v
                .trim()
                .strip_prefix('@')
                .ok_or_else(|| Error::syntax("EXECUTE ... USING takes user variables"))?;
            values.push(
                self.user_vars
                    .get(&var.to_lowercase())
                    .cloned()
                    .unwrap_or(Value::Null),
            );
        }
        if values.len() != lexer::count_placeholders(&body) {
            return Err(Error::new(
                code::ER_WRONG_ARGUMENTS,
                "Incorrect arguments to EXECUTE",
            ));
        }
        // As COM_STMT_EXECUTE runs it: parsed once, its columns named from the text.
        self.execute_bound_once(&body, &values)
    }

    /// `RENAME TABLE a TO b [, c TO d]`.
    pub(crate) fn rename_tables(&mut self, text: &str) -> Result<Outcome> {
        let list = &text[text.to_ascii_uppercase().find("TABLE").map_or(0, |i| i + 5)..];
        for pair in lexer::split_top_level_commas(list) {
            let upper = pair.to_ascii_uppercase();
            let to = lexer::find_top_level(&pair, "TO")
                .ok_or_else(|| Error::syntax("RENAME TABLE needs TO"))?;
            let _ = upper;
            let split = |s: &str| {
                let s = s.trim().replace('`', "");
                match s.split_once('.') {
                    Some((d, t)) => (Some(d.to_string()), t.to_string()),
                    None => (None, s),
                }
            };
            let (sdb, sname) = split(&pair[..to]);
            let (ddb, dname) = split(&pair[to + 2..]);
            let mut def = self.session.table_def(sdb.as_deref(), &sname)?;
            let target_db = match ddb {
                Some(d) => d,
                None => self.session.current_db()?,
            };
            // A table's triggers stay in its database: moving it to another with them is
            // MySQL's 1435.
            let (old_db, old_name) = (def.database.clone(), def.name.clone());
            if !target_db.eq_ignore_ascii_case(&old_db) && self.has_triggers(&old_db, &old_name)? {
                return Err(Error::new(
                    code::ER_TRG_IN_WRONG_SCHEMA,
                    "Trigger in wrong schema",
                ));
            }
            if self.engine().table_def(&target_db, &dname).is_some() {
                return Err(Error::new(
                    code::ER_TABLE_EXISTS_ERROR,
                    format!("Table '{dname}' already exists"),
                ));
            }
            if def.ring.is_some() && !self.session.vars.applier {
                self.refuse_ring_named_as_parent(&target_db, &dname)?;
            }
            def.database = target_db;
            def.name = dname.clone();
            let (new_db, engine) = (
                def.database.clone(),
                self.declared_engine(&old_db, &old_name),
            );
            let renamed = def.clone();
            self.session
                .alter_table(def, &mut |row, _| Ok(Some(row.to_vec())))?;
            self.note_unused_conflict_function(&renamed)?;
            self.rename_triggers_of_table(&old_db, &old_name, &dname)?;
            self.rename_in_foreign_keys(&old_db, &old_name, &new_db, &dname)?;
            if engine.is_some() {
                self.set_declared_engine(&old_db, &old_name, None)?;
                self.set_declared_engine(&new_db, &dname, engine.as_deref())?;
            }
        }
        Ok(Outcome::Affected {
            rows: 0,
            info: None,
            found: None,
        })
    }

    /// Runs `f` as one statement: undone on error, committed when autocommit is on.
    pub(crate) fn statement<T>(
        &mut self,
        f: impl FnOnce(&mut SqlSession) -> Result<T>,
    ) -> Result<T> {
        if !self.trigger_tables.is_empty() {
            // A statement of a trigger: part of the one that fired it, which undoes it with
            // its own on error and commits it with its own.
            return f(self);
        }
        self.session.begin_statement();
        // The foreign keys are checked and carried out once the statement has made its
        // changes, before it ends: a failure undoes it with them.
        let mark = self.session.staged_len();
        let r = f(self).and_then(|v| self.enforce_foreign_keys(mark).map(|()| v));
        self.session.end_statement(r)
    }
}

/// The first two words of a statement, to name it in an "unsupported" error.
fn first_keyword(s: &str) -> String {
    s.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

impl expr::EvalSession for SqlSession {
    fn system_variable(&self, name: &str) -> Result<Value> {
        SqlSession::system_variable(self, name)
    }

    fn run_subquery_in(
        &self,
        q: &sqlparser::ast::Query,
        scope: &expr::Scope<'_>,
        outer: Option<&Arc<expr::OuterRow>>,
    ) -> Result<Arc<Rows>> {
        SqlSession::run_subquery_in(self, q, scope, outer)
    }

    fn may_wait(&self) -> bool {
        SqlSession::may_wait(self)
    }

    fn user_lock_function(&self, name: &str, args: &[Value]) -> Result<Value> {
        SqlSession::user_lock_function(self, name, args)
    }
}
