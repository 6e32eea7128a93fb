//! Privilege checks: what a statement needs, against the session's [`Grants`](crate::accounts::Grants), before it
//! runs. Sessions without grants (the node's own accounts, `ringrep-source sql`) skip this.
//!
//! As in MySQL: reading a table needs SELECT, INSERT/UPDATE/DELETE need their privilege on the
//! table they change (and SELECT where they read it: a WHERE clause, another table), REPLACE
//! needs INSERT and DELETE, DDL needs CREATE, ALTER or DROP, and a denied table is error 1142,
//! a denied database 1044, a missing global privilege 1227.

use std::ops::ControlFlow;

use sqlparser::ast::{
    visit_expressions, CreateTableLikeKind, Expr, FromTable, ObjectName, ObjectType, Statement,
    TableFactor, TableObject,
};

use ringrep_engine::error::{code, Error, Result};

use crate::accounts::visible::always_visible;
use crate::accounts::Privs;
use crate::parse::statement::split_name;
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
    pub(crate) fn require_reads(&self, stmt: &Statement, skip: Option<&ObjectName>) -> Result<()> {
        let mut failed = None;
        let _ = crate::parse::tree::visit_stored_relations(stmt, |name| {
            if skip == Some(name) {
                return ControlFlow::Continue(());
            }
            match self.require_name(Privs::SELECT, "SELECT", name) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            }
        });
        failed.map_or(Ok(()), Err)
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
                    self.require_name(Privs::INSERT, "INSERT", name)?;
                    if ins.replace_into {
                        self.require_name(Privs::DELETE, "DELETE", name)?;
                    }
                    if ins.on.is_some() {
                        self.require_name(Privs::UPDATE, "UPDATE", name)?;
                    }
                    self.require_reads(stmt, Some(name))
                } else {
                    Ok(())
                }
            }
            Statement::Update(u) => {
                if let TableFactor::Table { name, .. } = &u.table.relation {
                    self.require_name(Privs::UPDATE, "UPDATE", name)?;
                    // Reading columns (WHERE, or values computed from the row) needs SELECT,
                    // as in MySQL: else the changed-rows count tells what they hold.
                    let reads_row = u.assignments.iter().any(|a| reads_columns(&a.value));
                    if u.selection.is_some() || reads_row {
                        self.require_name(Privs::SELECT, "SELECT", name)?;
                    }
                    self.require_reads(stmt, Some(name))
                } else {
                    self.require_reads(stmt, None)
                }
            }
            Statement::Delete(d) => {
                let tables = match &d.from {
                    FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
                };
                if let Some(TableFactor::Table { name, .. }) = tables.first().map(|t| &t.relation) {
                    self.require_name(Privs::DELETE, "DELETE", name)?;
                    if d.selection.is_some() {
                        self.require_name(Privs::SELECT, "SELECT", name)?;
                    }
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

/// Whether `e` reads a column (or a subquery) rather than being a constant.
fn reads_columns(e: &Expr) -> bool {
    visit_expressions(e, |x| match x {
        Expr::Identifier(_)
        | Expr::CompoundIdentifier(_)
        | Expr::Subquery(_)
        | Expr::Exists { .. }
        | Expr::In { .. } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
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
