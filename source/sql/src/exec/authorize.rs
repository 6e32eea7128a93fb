//! Privilege checks: what a statement needs, against the session's [`Grants`](crate::accounts::Grants), before it
//! runs. Sessions without grants (the node's own accounts, `ringrep-source sql`) skip this.
//!
//! As in MySQL: reading a table needs SELECT, INSERT/UPDATE/DELETE need their privilege on the
//! table they change (and SELECT on the columns they read: a WHERE clause, a value computed
//! from the row; SELECT on another table), REPLACE needs INSERT and DELETE, DDL needs CREATE,
//! ALTER or DROP, and a denied table is error 1142, a denied database 1044, a missing global
//! privilege 1227.
//!
//! Column privileges: an account holding SELECT, INSERT or UPDATE on some columns of a table
//! but not on the table may use those columns, checked one by one against the columns the
//! statement names (MySQL's `check_grant_column`): another column is error 1143, naming it; a
//! `*` (or an INSERT without a column list) needs every column. Which table a column belongs
//! to is read from the statement's text: a qualified name by its table or alias, an
//! unqualified one by the columns of the tables named (a name that is a column of several is
//! checked on each, where MySQL would resolve it to one).

use std::ops::ControlFlow;

use binlog_format::schema::TableDef;
use sqlparser::ast::{
    Assignment, AssignmentTarget, CreateTableLikeKind, FromTable, ObjectName, ObjectType, OnInsert,
    Statement, TableFactor, TableObject,
};

use ringrep_engine::error::{code, Error, Result};

use crate::accounts::visible::always_visible;
use crate::accounts::Privs;
use crate::parse::statement::split_name;
use crate::parse::tree::{column_refs, names_table, object_parts, table_uses, TableUse};
use crate::SqlSession;

impl SqlSession {
    /// The database a name falls in: its own, else the session's.
    fn database_of(&self, db: Option<&str>) -> Option<String> {
        db.map(str::to_string)
            .or_else(|| self.session.vars.database.clone())
    }

    /// `p` on table `db.table`; `verb` names the command in the error.
    pub(crate) fn require_table(
        &self,
        p: Privs,
        verb: &str,
        db: Option<&str>,
        table: &str,
    ) -> Result<()> {
        let Some(g) = self.restricted() else {
            return Ok(());
        };
        let Some(db) = self.database_of(db) else {
            // Unqualified with no database: the statement fails with 1046 when it runs.
            return Ok(());
        };
        if always_visible(&db) && p == Privs::SELECT {
            return Ok(());
        }
        if g.allows(p, &db, Some(table)) {
            return Ok(());
        }
        Err(self.table_denied(verb, table))
    }

    pub(crate) fn require_name(&self, p: Privs, verb: &str, name: &ObjectName) -> Result<()> {
        let (db, t) = split_name(name)?;
        self.require_table(p, verb, db.as_deref(), &t)
    }

    /// `p` (EXECUTE, ALTER ROUTINE) on stored procedure `db.name`: globally, on its database
    /// or on the procedure itself; else error 1370, `verb` naming the privilege as MySQL
    /// writes it there (`execute`, `alter routine`).
    pub(crate) fn require_routine(&self, p: Privs, verb: &str, db: &str, name: &str) -> Result<()> {
        match self.restricted() {
            Some(g) if !g.on_routine(db, name).contains(p) => {
                Err(self.routine_denied(verb, db, name))
            }
            _ => Ok(()),
        }
    }

    /// `p` on database `db` as a whole (CREATE DATABASE, DROP DATABASE, CREATE TABLE).
    pub(crate) fn require_database(&self, p: Privs, db: Option<&str>) -> Result<()> {
        let Some(g) = self.restricted() else {
            return Ok(());
        };
        let Some(db) = self.database_of(db) else {
            // Unqualified with no database: the statement fails with 1046 when it runs.
            return Ok(());
        };
        if g.allows(p, &db, None) {
            return Ok(());
        }
        Err(self.database_denied(&db))
    }

    /// SELECT on every table `stmt` reads (subqueries included), except `skip` (a
    /// statement's target). A common table expression's name is no table where it is in
    /// scope, and needs no privilege there; what the expression reads does.
    /// A table the account may not read as a whole but holds SELECT on some columns of is
    /// read column by column (`select_by_columns`).
    pub(crate) fn require_reads(&self, stmt: &Statement, skip: Option<&ObjectName>) -> Result<()> {
        let mut failed = None;
        let mut uses: Option<(Vec<TableUse>, Vec<Vec<String>>)> = None;
        let _ = crate::parse::tree::visit_stored_relations(stmt, |name| {
            if skip == Some(name) {
                return ControlFlow::Continue(());
            }
            let checked = match self.require_name(Privs::SELECT, "SELECT", name) {
                Ok(()) => Ok(()),
                Err(e) => {
                    let (tables, refs) =
                        uses.get_or_insert_with(|| (table_uses(stmt), column_refs(stmt)));
                    self.select_by_columns(name, tables, refs).unwrap_or(Err(e))
                }
            };
            match checked {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            }
        });
        failed.map_or(Ok(()), Err)
    }

    /// SELECT on the columns a statement reads of table `name`, every time it names the table
    /// (`tables`, with `refs` the columns it names); `None` when the account holds SELECT on
    /// none of the table's columns, so that the table's own error (1142) stands.
    fn select_by_columns(
        &self,
        name: &ObjectName,
        tables: &[TableUse],
        refs: &[Vec<String>],
    ) -> Option<Result<()>> {
        let g = self.restricted()?;
        let (db, t) = split_name(name).ok()?;
        let db = self.database_of(db.as_deref())?;
        if !g.has_column_grant(Privs::SELECT, &db, &t) {
            return None;
        }
        let def = self.engine().table_def(&db, &t);
        let same = object_parts(name);
        for u in tables.iter().filter(|u| {
            let parts = object_parts(&u.name);
            parts.len() == same.len()
                && parts
                    .iter()
                    .zip(&same)
                    .all(|(a, b)| a.eq_ignore_ascii_case(b))
        }) {
            let cols = columns_of(def.as_ref(), &u.name, u.alias.as_deref(), refs);
            if let Err(e) = self.require_columns(
                Privs::SELECT,
                "SELECT",
                &db,
                &t,
                def.as_ref(),
                &cols,
                u.all_columns,
            ) {
                return Some(Err(e));
            }
        }
        Some(Ok(()))
    }

    /// `p` on columns `cols` of table `name` (and on all of them with `all`), for a session
    /// that lacks `p` on the table itself; `None` when it holds `p` on none of the table's
    /// columns, so that the table's own error (1142) stands.
    fn by_columns(
        &self,
        p: Privs,
        verb: &str,
        name: &ObjectName,
        cols: &[String],
        all: bool,
    ) -> Option<Result<()>> {
        let g = self.restricted()?;
        let (db, t) = split_name(name).ok()?;
        let db = self.database_of(db.as_deref())?;
        if !g.has_column_grant(p, &db, &t) {
            return None;
        }
        let def = self.engine().table_def(&db, &t);
        Some(self.require_columns(p, verb, &db, &t, def.as_ref(), cols, all))
    }

    /// `p` on each of columns `cols` (as written) of `db.table`, and with `all` on every one
    /// of `def`'s, for a session that lacks `p` on the table as a whole. As MySQL: a column
    /// named is error 1143 naming it; for all columns, the first one lacking `p` is 1143 too
    /// unless a column with a grant of its own came before it (or is it), where MySQL answers
    /// 1142 for the table so as not to name columns the account may not see.
    #[allow(clippy::too_many_arguments)]
    fn require_columns(
        &self,
        p: Privs,
        verb: &str,
        db: &str,
        table: &str,
        def: Option<&TableDef>,
        cols: &[String],
        all: bool,
    ) -> Result<()> {
        let Some(g) = self.restricted() else {
            return Ok(());
        };
        if all {
            let Some(def) = def else {
                return Err(self.table_denied(verb, table));
            };
            let granted = g.column_grants(db, table);
            let mut using_column_grants = false;
            for c in def
                .columns
                .iter()
                .filter(|c| c.name != ringrep_engine::HIDDEN_ROW_ID)
            {
                using_column_grants |= granted.iter().any(|(n, _)| n.eq_ignore_ascii_case(&c.name));
                if !g.on_column(db, table, &c.name).contains(p) {
                    return Err(if using_column_grants {
                        self.table_denied(verb, table)
                    } else {
                        self.column_denied(verb, &c.name, table)
                    });
                }
            }
        }
        for c in cols {
            if !g.on_column(db, table, c).contains(p) {
                return Err(self.column_denied(verb, c, table));
            }
        }
        Ok(())
    }

    /// SELECT on the columns of the table an UPDATE or DELETE changes that it reads (`refs`):
    /// as MySQL, where the row is read (WHERE, a value computed from it) each column needs
    /// SELECT, 1143 naming the first that lacks it; one that reads no column needs none.
    fn require_target_reads(
        &self,
        name: &ObjectName,
        alias: Option<&str>,
        refs: &[Vec<String>],
    ) -> Result<()> {
        if self.require_name(Privs::SELECT, "SELECT", name).is_ok() {
            return Ok(());
        }
        let (db, t) = split_name(name)?;
        let Some(db) = self.database_of(db.as_deref()) else {
            return Ok(());
        };
        let def = self.engine().table_def(&db, &t);
        let cols = columns_of(def.as_ref(), name, alias, refs);
        self.require_columns(Privs::SELECT, "SELECT", &db, &t, def.as_ref(), &cols, false)
    }

    /// Checks a parsed statement against the session's grants.
    pub(crate) fn authorize(&self, stmt: &Statement) -> Result<()> {
        let Some(g) = self.restricted() else {
            return Ok(());
        };
        match stmt {
            Statement::Query(_) => self.require_reads(stmt, None),
            Statement::Insert(ins) => {
                if let TableObject::TableName(name) = &ins.table {
                    if let Err(e) = self.require_name(Privs::INSERT, "INSERT", name) {
                        // Without a column list every column is inserted.
                        let cols: Vec<String> = ins
                            .columns
                            .iter()
                            .filter_map(|c| object_parts(c).pop())
                            .collect();
                        let all = cols.is_empty();
                        self.by_columns(Privs::INSERT, "INSERT", name, &cols, all)
                            .unwrap_or(Err(e))?;
                    }
                    if ins.replace_into {
                        self.require_name(Privs::DELETE, "DELETE", name)?;
                    }
                    if let Some(on) = &ins.on {
                        if let Err(e) = self.require_name(Privs::UPDATE, "UPDATE", name) {
                            let cols = match on {
                                OnInsert::DuplicateKeyUpdate(a) => assigned_columns(a),
                                _ => Vec::new(),
                            };
                            self.by_columns(Privs::UPDATE, "UPDATE", name, &cols, false)
                                .unwrap_or(Err(e))?;
                        }
                    }
                    self.require_reads(stmt, Some(name))
                } else {
                    Ok(())
                }
            }
            Statement::Update(u) => {
                if let TableFactor::Table { name, alias, .. } = &u.table.relation {
                    if let Err(e) = self.require_name(Privs::UPDATE, "UPDATE", name) {
                        let cols = assigned_columns(&u.assignments);
                        self.by_columns(Privs::UPDATE, "UPDATE", name, &cols, false)
                            .unwrap_or(Err(e))?;
                    }
                    // Reading columns (WHERE, or values computed from the row) needs SELECT
                    // on them, as in MySQL: else the changed-rows count tells what they hold.
                    let mut refs = column_refs(&u.selection);
                    for a in &u.assignments {
                        refs.extend(column_refs(&a.value));
                    }
                    let alias = alias.as_ref().map(|a| a.name.value.as_str());
                    self.require_target_reads(name, alias, &refs)?;
                    self.require_reads(stmt, Some(name))
                } else {
                    self.require_reads(stmt, None)
                }
            }
            Statement::Delete(d) => {
                let tables = match &d.from {
                    FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
                };
                if let Some(TableFactor::Table { name, alias, .. }) =
                    tables.first().map(|t| &t.relation)
                {
                    self.require_name(Privs::DELETE, "DELETE", name)?;
                    let alias = alias.as_ref().map(|a| a.name.value.as_str());
                    self.require_target_reads(name, alias, &column_refs(&d.selection))?;
                    self.require_reads(stmt, Some(name))
                } else {
                    self.require_reads(stmt, None)
                }
            }
            Statement::CreateTable(ct) => {
                let (db, t) = split_name(&ct.name)?;
                self.require_table(Privs::CREATE, "CREATE", db.as_deref(), &t)?;
                if let Some(CreateTableLikeKind::Parenthesized(l) | CreateTableLikeKind::Plain(l)) =
                    &ct.like
                {
                    self.require_name(Privs::SELECT, "SELECT", &l.name)?;
                }
                self.require_reads(stmt, Some(&ct.name))
            }
            Statement::CreateDatabase { db_name, .. } => {
                let (_, name) = split_name(db_name)?;
                self.require_database(Privs::CREATE, Some(&name))
            }
            Statement::Drop {
                object_type, names, ..
            } => {
                for n in names {
                    match object_type {
                        ObjectType::Table => self.require_name(Privs::DROP, "DROP", n)?,
                        ObjectType::Database | ObjectType::Schema => {
                            self.require_database(Privs::DROP, Some(&split_name(n)?.1))?
                        }
                        _ => {}
                    }
                }
                Ok(())
            }
            Statement::Truncate(t) => {
                for target in &t.table_names {
                    self.require_name(Privs::DROP, "DROP", &target.name)?;
                }
                Ok(())
            }
            Statement::Use(u) => {
                let name = match u {
                    sqlparser::ast::Use::Object(n)
                    | sqlparser::ast::Use::Database(n)
                    | sqlparser::ast::Use::Schema(n) => split_name(n)?.1,
                    _ => return Ok(()),
                };
                if always_visible(&name) || g.can_use_database(&name) {
                    Ok(())
                } else {
                    Err(self.database_denied(&name))
                }
            }
            Statement::ShowCreate { obj_name, .. } => {
                let (db, t) = split_name(obj_name)?;
                match self.database_of(db.as_deref()) {
                    Some(db) if !always_visible(&db) && !g.can_show_create_table(&db, &t) => {
                        Err(self.table_denied("SHOW", &t))
                    }
                    _ => Ok(()),
                }
            }
            Statement::ExplainTable { table_name, .. } => {
                let (db, t) = split_name(table_name)?;
                self.require_describe_in(db.as_deref(), &t)
            }
            Statement::ShowColumns { show_options, .. } => {
                match show_options
                    .show_in
                    .as_ref()
                    .and_then(|i| i.parent_name.as_ref())
                {
                    Some(n) => {
                        let (db, t) = split_name(n)?;
                        self.require_describe_in(db.as_deref(), &t)
                    }
                    None => Ok(()),
                }
            }
            // The database SHOW TABLES looks into is checked where it is known (FROM db or
            // the current one), as SHOW TABLE STATUS's is.
            Statement::ShowTables { .. } => Ok(()),
            // SHOW DATABASES filters what it lists; transactions need nothing.
            Statement::ShowDatabases { .. }
            | Statement::ShowVariables { .. }
            | Statement::StartTransaction { .. }
            | Statement::Commit { .. }
            | Statement::Rollback { .. } => Ok(()),
            // Anything else (SET with a subquery, ...) needs SELECT on what it reads.
            _ => self.require_reads(stmt, None),
        }
    }

    /// Checks the statements `execute` runs from their text (without sqlparser): `first` are
    /// their first words, upper-cased.
    pub(crate) fn authorize_text(&self, first: &[String], text: &str) -> Result<()> {
        if self.restricted().is_none() {
            return Ok(());
        }
        let w = |i: usize| first.get(i).map(String::as_str).unwrap_or("");
        // The name after `after` (a keyword sequence found outside quotes).
        let name_after = |after: &str| -> Option<(Option<String>, String)> {
            let at = crate::parse::lexer::find_top_level(text, after)? + after.len();
            let rest = text[at..].trim_start();
            let rest = strip_if_not_exists(rest);
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '(' || c == ',' || c == ';')
                .unwrap_or(rest.len());
            Some(split_text_name(&rest[..end]))
        };
        match (w(0), w(1)) {
            ("ALTER", "TABLE") => match name_after("TABLE") {
                Some((db, t)) => self.require_table(Privs::ALTER, "ALTER", db.as_deref(), &t),
                None => Ok(()),
            },
            ("CREATE", "TABLE") => match name_after("TABLE") {
                Some((db, t)) => self.require_table(Privs::CREATE, "CREATE", db.as_deref(), &t),
                None => Ok(()),
            },
            ("LOAD", "DATA") => {
                // The server reads the file itself, LOCAL or not (it never asks the client
                // for it): that is FILE's business either way.
                self.require_global(Privs::FILE)?;
                match name_after("INTO TABLE") {
                    Some((db, t)) => self.require_table(Privs::INSERT, "INSERT", db.as_deref(), &t),
                    None => Ok(()),
                }
            }
            ("RENAME", "TABLE") => {
                let list = &text[text.to_ascii_uppercase().find("TABLE").map_or(0, |i| i + 5)..];
                for pair in crate::parse::lexer::split_top_level_commas(list) {
                    if let Some(to) = crate::parse::lexer::find_top_level(&pair, "TO") {
                        let (sdb, s) = split_text_name(pair[..to].trim());
                        let (ddb, d) = split_text_name(pair[to + 2..].trim());
                        self.require_table(Privs::ALTER, "ALTER", sdb.as_deref(), &s)?;
                        self.require_table(Privs::DROP, "DROP", sdb.as_deref(), &s)?;
                        self.require_table(Privs::CREATE, "CREATE", ddb.as_deref(), &d)?;
                        self.require_table(Privs::INSERT, "INSERT", ddb.as_deref(), &d)?;
                    }
                }
                Ok(())
            }
            ("CHECKSUM", "TABLE") => {
                for (db, t) in super::checksum::table_names(text)? {
                    self.require_table(Privs::SELECT, "SELECT", db.as_deref(), &t)?;
                }
                Ok(())
            }
            ("OPTIMIZE" | "ANALYZE", "TABLE") => {
                let list = &text[text.to_ascii_uppercase().find("TABLE").map_or(0, |i| i + 5)..];
                for n in crate::parse::lexer::split_top_level_commas(list) {
                    let (db, t) = split_text_name(n.trim());
                    self.require_table(Privs::SELECT, "SELECT", db.as_deref(), &t)?;
                    self.require_table(Privs::INSERT, "INSERT", db.as_deref(), &t)?;
                }
                Ok(())
            }
            ("SHOW", "BINARY" | "MASTER") => {
                self.require_any_global(&[Privs::REPLICATION_CLIENT, Privs::SUPER])
            }
            // MySQL 8 asks REPLICATION SLAVE for the events themselves.
            ("SHOW", "BINLOG") => {
                self.require_any_global(&[Privs::REPLICATION_SLAVE, Privs::SUPER])
            }
            ("FLUSH", _) => self.require_global(Privs::RELOAD),
            // MySQL asks INDEX (not ALTER) for CREATE INDEX and DROP INDEX.
            ("CREATE", "INDEX" | "UNIQUE") | ("DROP", "INDEX") => match name_after("ON") {
                Some((db, t)) => self.require_table(Privs::INDEX, "INDEX", db.as_deref(), &t),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// [`SqlSession::require_describe`] for a name as written (`db` absent: the current one).
    fn require_describe_in(&self, db: Option<&str>, table: &str) -> Result<()> {
        match self.database_of(db) {
            Some(db) => self.require_describe(&db, table),
            // Unqualified with no database: the statement fails with 1046 when it runs.
            None => Ok(()),
        }
    }

    /// One of the global privileges `any` (1227 naming them otherwise); a session without
    /// grants holds them all.
    pub fn require_any_global(&self, any: &[Privs]) -> Result<()> {
        let Some(g) = self.restricted() else {
            return Ok(());
        };
        if any.iter().any(|p| g.global_has(*p)) {
            return Ok(());
        }
        let names: Vec<&str> = any.iter().map(|p| p.first_name()).collect();
        Err(Error::new(
            code::ER_SPECIFIC_ACCESS_DENIED_ERROR,
            format!(
                "Access denied; you need (at least one of) the {} privilege(s) for this operation",
                names.join(", ")
            ),
        ))
    }
}

/// The columns `SET c = ...` assignments change (the last part of each name).
fn assigned_columns(assignments: &[Assignment]) -> Vec<String> {
    let mut cols = Vec::new();
    for a in assignments {
        match &a.target {
            AssignmentTarget::ColumnName(n) => cols.extend(object_parts(n).pop()),
            AssignmentTarget::Tuple(ns) => {
                cols.extend(ns.iter().filter_map(|n| object_parts(n).pop()));
            }
        }
    }
    cols
}

/// The columns of `refs` that are table `name`'s (going by `alias`): qualified with it, or
/// unqualified and one of its columns (`def`). A name that is no column of the table is left
/// to the statement, which fails with MySQL's 1054 as it does for every account.
fn columns_of(
    def: Option<&TableDef>,
    name: &ObjectName,
    alias: Option<&str>,
    refs: &[Vec<String>],
) -> Vec<String> {
    let has = |c: &str| {
        def.is_none_or(|d| {
            d.columns
                .iter()
                .any(|x| x.name.eq_ignore_ascii_case(c) && x.name != ringrep_engine::HIDDEN_ROW_ID)
        })
    };
    let mut cols: Vec<String> = Vec::new();
    for r in refs {
        let hit = match r.as_slice() {
            [c] => def.is_some() && has(c),
            [q @ .., c] if !q.is_empty() => names_table(q, name, alias) && has(c),
            _ => false,
        };
        if hit
            && !cols
                .iter()
                .any(|x| x.eq_ignore_ascii_case(r.last().expect("one part")))
        {
            cols.push(r.last().expect("one part").clone());
        }
    }
    cols
}

fn strip_if_not_exists(s: &str) -> &str {
    let upper = s.to_ascii_uppercase();
    for prefix in ["IF NOT EXISTS", "IF EXISTS"] {
        if upper.starts_with(prefix) {
            return s[prefix.len()..].trim_start();
        }
    }
    s
}

/// `db.t`, `` `db`.`t` `` or `t` as written in a statement's text.
fn split_text_name(s: &str) -> (Option<String>, String) {
    let s = s.replace('`', "");
    match s.split_once('.') {
        Some((d, t)) => (Some(d.to_string()), t.to_string()),
        None => (None, s),
    }
}
