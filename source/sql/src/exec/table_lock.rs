//! LOCK TABLES and UNLOCK TABLES, and the check every statement passes against the table
//! locks in force (`ringrep_engine::table_locks`).
//!
//! As in MySQL: `LOCK TABLES t [[AS] alias] {READ [LOCAL] | [LOW_PRIORITY] WRITE}, ...` first
//! commits the session's transaction and gives back the locks it held, then takes them all at
//! once, waiting while another session's lock conflicts. While a session holds table locks it
//! may use only the tables it locked (1100 for another, 1099 for a write to a READ-locked
//! one; `information_schema` is always open). Other sessions wait for a WRITE-locked table,
//! and to write a READ-locked one, up to `innodb_lock_wait_timeout` or
//! `lock_wait_timeout`, the smaller (1205 after it). UNLOCK
//! TABLES, START TRANSACTION and the session's end give the locks back.
//!
//! Not as in MySQL: tables are matched by name, not by alias (one lock of a table covers
//! every alias of it); the SELECT privilege on each table is what LOCK TABLES needs (there is
//! no separate LOCK TABLES privilege); a view is locked by its name, not through its base
//! tables, so a session that locked a view's tables reads the view only once the view is
//! locked too, and others read a WRITE-locked table through a view; DDL and LOAD DATA are not
//! held back by other sessions' locks, nor checked against the holder's own; the replica's
//! applier never waits for them. LOCK TABLES waits, as MySQL's metadata locks make it, for
//! the open transactions that wrote its tables (holding no lock meanwhile, so their later
//! statements never wait for it), but not for transactions that only read them, nor for a
//! statement that passed its check before the lock and had not yet written. A trigger's
//! tables need no lock of their own (MySQL locks them with the trigger's table).
//! UNLOCK TABLES commits the transaction of a session that held table locks, as MySQL does;
//! LOCK TABLES and UNLOCK TABLES are 1314 in a stored procedure.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlparser::ast::{
    AssignmentTarget, FromTable, ObjectName, Statement, TableFactor, TableObject,
};

use crate::catalog::information_schema::INFORMATION_SCHEMA;
use crate::parse::lexer::split_top_level_commas;
use crate::parse::statement::split_name;
use crate::parse::tree::visit_stored_relations;
use crate::{Outcome, SqlSession};
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::table_locks::{LockMode, TableKey};

/// Owners of table locks are sessions, numbered in the process.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// A fresh owner number for a new session.
pub(crate) fn new_owner() -> u64 {
    NEXT_OWNER.fetch_add(1, Ordering::Relaxed)
}

/// Schemas every statement may read whatever the locks (MySQL's computed ones).
fn always_open(db: &str) -> bool {
    db.eq_ignore_ascii_case(INFORMATION_SCHEMA) || db.eq_ignore_ascii_case("performance_schema")
}

impl SqlSession {
    fn lock_key(&self, db: Option<&str>, table: &str) -> Result<TableKey> {
        let db = match db {
            Some(d) => d.to_string(),
            None => self.session.current_db()?,
        };
        Ok((db.to_lowercase(), table.to_lowercase()))
    }

    /// How long LOCK TABLES waits: `innodb_lock_wait_timeout`, or `lock_wait_timeout` when
    /// that is smaller (MySQL's metadata locks wait by the latter).
    fn table_lock_wait(&self) -> Option<std::time::Duration> {
        self.session.lock_wait.then(|| {
            self.session
                .vars
                .lock_wait_timeout
                .unwrap_or(self.engine().config().lock_wait_timeout)
                .min(std::time::Duration::from_secs(self.lock_wait_timeout))
        })
    }

    /// `LOCK TABLE[S] t [[AS] alias] lock_type [, ...]`.
    pub(crate) fn lock_tables(&mut self, text: &str) -> Result<Outcome> {
        let syntax = || {
            Error::syntax(format!(
                "You have an error in your SQL syntax; LOCK TABLES takes `table [[AS] alias] {{READ [LOCAL] | [LOW_PRIORITY] WRITE}}, ...`, in '{text}'"
            ))
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.get(1).map(|w| w.to_ascii_uppercase()) {
            Some(w) if w == "TABLES" || w == "TABLE" => {}
            _ => return Err(syntax()),
        }
        // What follows the two keywords, as written (a quoted name may hold spaces).
        let after_lock = text.trim_start()[words[0].len()..].trim_start();
        let rest = after_lock[words[1].len()..].trim().trim_end_matches(';');
        let mut wanted: Vec<(TableKey, LockMode)> = Vec::new();
        // The stored tables among them (a view has no rows to wait for).
        let mut ids: Vec<u64> = Vec::new();
        for item in split_top_level_commas(rest) {
            let tokens = unquoted_words(&item);
            let Some((name, rest)) = tokens.split_first() else {
                return Err(syntax());
            };
            let upper: Vec<String> = rest.iter().map(|t| t.to_ascii_uppercase()).collect();
            let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
            // `[[AS] alias] mode`, the alias being any word but the mode's.
            let (mode, before) = match upper.as_slice() {
                [before @ .., "READ", "LOCAL"] => (LockMode::Read, before),
                [before @ .., "READ"] => (LockMode::Read, before),
                [before @ .., "LOW_PRIORITY", "WRITE"] => (LockMode::Write, before),
                [before @ .., "WRITE"] => (LockMode::Write, before),
                _ => return Err(syntax()),
            };
            if !matches!(before, [] | [_] | ["AS", _]) {
                return Err(syntax());
            }
            let name = match crate::parse::statement::parse_one(&format!("SELECT 1 FROM {name}"))? {
                Statement::Query(q) => match &*q.body {
                    sqlparser::ast::SetExpr::Select(s) => match s.from.first().map(|f| &f.relation)
                    {
                        Some(TableFactor::Table { name, .. }) => name.clone(),
                        _ => return Err(syntax()),
                    },
                    _ => return Err(syntax()),
                },
                _ => return Err(syntax()),
            };
            let (db, table) = split_name(&name)?;
            // It must exist (a table or a view), and the account must be able to read it.
            if self.computed_table(db.as_deref(), &table).is_none() {
                ids.push(self.session.table_def(db.as_deref(), &table)?.id);
            }
            self.require_name(crate::Privs::SELECT, "SELECT", &name)?;
            let key = self.lock_key(db.as_deref(), &table)?;
            // The same table twice: the stronger lock.
            match wanted.iter_mut().find(|(k, _)| *k == key) {
                Some((_, m)) if mode == LockMode::Write => *m = LockMode::Write,
                Some(_) => {}
                None => wanted.push((key, mode)),
            }
        }
        if wanted.is_empty() {
            return Err(syntax());
        }
        // MySQL's implicit commit, then the locks held before go.
        if self.session.in_transaction() {
            self.session.commit()?;
        }
        self.release_table_locks();
        // The transactions that wrote these tables before they were locked must end first
        // (they hold row locks of them until then), as MySQL's metadata locks make it. It
        // waits for them holding no table lock, so that their next statements, on these
        // tables or others of the list, never wait for a lock that waits for them; once it
        // holds the locks, a writer that came in between sends it back to waiting.
        let wait = self.table_lock_wait();
        let deadline = wait.map(|w| std::time::Instant::now() + w);
        let left = || deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        loop {
            self.wait_for_writers(&ids, left())?;
            self.engine()
                .table_locks()
                .lock(self.lock_owner, &wanted, left())?;
            if !self.written_by_others(&ids) {
                break;
            }
            self.engine().table_locks().unlock_all(self.lock_owner);
        }
        self.table_locks = wanted;
        Ok(Outcome::Ok)
    }

    /// Waits (up to `wait`; `None`: not at all) until no other transaction holds row locks of
    /// the tables `ids`. It looks again every 10 ms: LOCK TABLES is rare, and the row locks'
    /// own wake-ups are for the rows' waiters.
    fn wait_for_writers(&self, ids: &[u64], wait: Option<std::time::Duration>) -> Result<()> {
        let Some(wait) = wait else {
            return if self.written_by_others(ids) {
                Err(Error::would_wait())
            } else {
                Ok(())
            };
        };
        let deadline = std::time::Instant::now() + wait;
        while self.written_by_others(ids) {
            if std::time::Instant::now() >= deadline {
                return Err(Error::lock_wait_timeout());
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Ok(())
    }

    /// Whether another session's open transaction has written one of the tables `ids`.
    fn written_by_others(&self, ids: &[u64]) -> bool {
        ids.iter().any(|&id| self.session.others_hold_rows_of(id))
    }

    /// UNLOCK TABLES: commits the session's transaction when it held table locks (as MySQL
    /// does, so that what it wrote under them is in), then gives them back.
    pub(crate) fn unlock_tables(&mut self) -> Result<Outcome> {
        if !self.table_locks.is_empty() && self.session.in_transaction() {
            self.session.commit()?;
        }
        self.release_table_locks();
        Ok(Outcome::Ok)
    }

    /// UNLOCK TABLES, BEGIN / START TRANSACTION and the session's end: gives back every table
    /// lock the session holds.
    pub(crate) fn release_table_locks(&mut self) {
        if !self.table_locks.is_empty() {
            self.table_locks.clear();
            self.engine().table_locks().unlock_all(self.lock_owner);
        }
    }

    /// Whether `stmt` may use its tables now: for a session holding table locks, whether it
    /// locked them (as it uses them); for another, waits while a lock keeps it out.
    pub(crate) fn check_table_locks(&self, stmt: &Statement) -> Result<()> {
        if self.table_locks.is_empty() && !self.engine().table_locks().any_held() {
            return Ok(());
        }
        let mut used: Vec<TableKey> = Vec::new();
        let mut failed = None;
        let _ = visit_stored_relations(stmt, |name| match split_name(name) {
            Ok((db, t)) => match self.lock_key(db.as_deref(), &t) {
                Ok(k) => {
                    if !always_open(&k.0) && !used.contains(&k) {
                        used.push(k);
                    }
                    ControlFlow::Continue(())
                }
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            },
            Err(e) => {
                failed = Some(e);
                ControlFlow::Break(())
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let mut writes: Vec<TableKey> = Vec::new();
        for name in written_tables(stmt) {
            let (db, t) = split_name(name)?;
            let k = self.lock_key(db.as_deref(), &t)?;
            if !writes.contains(&k) {
                writes.push(k);
            }
        }
        if !self.table_locks.is_empty() {
            // A trigger's tables are locked with its table, as MySQL locks them implicitly.
            if !self.trigger_tables.is_empty() {
                return Ok(());
            }
            for k in used.iter().chain(&writes) {
                match self.table_locks.iter().find(|(l, _)| l == k) {
                    None => {
                        return Err(Error::new(
                            code::ER_TABLE_NOT_LOCKED,
                            format!("Table '{}' was not locked with LOCK TABLES", k.1),
                        ))
                    }
                    Some((_, LockMode::Read)) if writes.contains(k) => {
                        return Err(Error::new(
                            code::ER_TABLE_NOT_LOCKED_FOR_WRITE,
                            format!(
                                "Table '{}' was locked with a READ lock and can't be updated",
                                k.1
                            ),
                        ))
                    }
                    Some(_) => {}
                }
            }
            return Ok(());
        }
        let reads: Vec<TableKey> = used.into_iter().filter(|k| !writes.contains(k)).collect();
        self.engine().table_locks().wait_for_access(
            self.lock_owner,
            &reads,
            &writes,
            self.table_lock_wait(),
        )
    }
}

/// The words of `item`, split at whitespace outside quotes and backquotes.
fn unquoted_words(item: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in item.chars() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c.is_whitespace() => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            None => {
                if matches!(c, '`' | '\'' | '"') {
                    quote = Some(c);
                }
                cur.push(c);
            }
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// The tables a data-changing statement writes (its targets).
fn written_tables(stmt: &Statement) -> Vec<&ObjectName> {
    fn relation(f: &TableFactor) -> Option<&ObjectName> {
        match f {
            TableFactor::Table { name, .. } => Some(name),
            _ => None,
        }
    }
    match stmt {
        Statement::Insert(ins) => match &ins.table {
            TableObject::TableName(name) => vec![name],
            _ => Vec::new(),
        },
        Statement::Update(u) => {
            let relations: Vec<&TableFactor> = std::iter::once(&u.table.relation)
                .chain(u.table.joins.iter().map(|j| &j.relation))
                .collect();
            // A multi-table UPDATE writes the tables its SET names; an unqualified column
            // could be any of them.
            let qualifiers: Option<Vec<String>> = u
                .assignments
                .iter()
                .map(|a| match &a.target {
                    AssignmentTarget::ColumnName(c) if c.0.len() >= 2 => Some(
                        c.0[c.0.len() - 2]
                            .to_string()
                            .trim_matches('`')
                            .to_lowercase(),
                    ),
                    _ => None,
                })
                .collect();
            relations
                .into_iter()
                .filter(|f| match (&qualifiers, f) {
                    (Some(q), TableFactor::Table { name, alias, .. }) => {
                        let own = alias.as_ref().map_or_else(
                            || name.0.last().map(|p| p.to_string()).unwrap_or_default(),
                            |a| a.name.value.clone(),
                        );
                        q.contains(&own.trim_matches('`').to_lowercase())
                    }
                    _ => true,
                })
                .filter_map(relation)
                .collect()
        }
        Statement::Delete(d) if !d.tables.is_empty() => d.tables.iter().collect(),
        Statement::Delete(d) => match &d.from {
            FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => {
                t.iter().filter_map(|t| relation(&t.relation)).collect()
            }
        },
        Statement::Truncate(t) => t.table_names.iter().map(|t| &t.name).collect(),
        _ => Vec::new(),
    }
}
