//! The spec's table rule on conflict functions: a ring buffer table cannot have one. A table
//! has a conflict function when `mysql.ndb_replication` (created by the user with RonDB's
//! definition, as RonDB's documentation says) holds a row for it naming one; CREATE TABLE of a
//! ring table then fails with the spec's error.
//!
//! Rows are matched as NDB matches them: `db` and `table_name` may hold the wildcards `%` and
//! `_`; `server_id` 0 stands for every server. Of the rows that match, the most specific one
//! decides (an exact database over a pattern, then an exact table name, then this server's
//! id over 0), so an exact row without a function overrides a pattern with one.

use binlog_format::schema::TableDef;
use binlog_format::Value;

use crate::expr::like;
use crate::SqlSession;
use ringrep_engine::error::{Error, Result};

/// The database and table of the conflict-function table.
pub(crate) const NDB_REPLICATION: (&str, &str) = ("mysql", "ndb_replication");

fn text(v: &Value) -> Option<String> {
    match v {
        Value::Text(s) => Some(s.clone()),
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

fn has_wildcard(s: &str) -> bool {
    s.contains(['%', '_'])
}

impl SqlSession {
    /// Fails when a view has `def`'s name (1050), or `def` is a ring table that
    /// `mysql.ndb_replication` gives a conflict function, or that a FOREIGN KEY names as its
    /// parent (1215).
    pub(crate) fn check_new_table(&self, def: &TableDef) -> Result<()> {
        if self.view(&def.database, &def.name)?.is_some() {
            return Err(Error::new(
                ringrep_engine::error::code::ER_TABLE_EXISTS_ERROR,
                format!("Table '{}' already exists", def.name),
            ));
        }
        // A replica (and the verifier's copy) takes the tables its primary created.
        if def.ring.is_none() || self.session.vars.applier {
            return Ok(());
        }
        self.refuse_ring_named_as_parent(&def.database, &def.name)?;
        match self.conflict_function(&def.database, &def.name)? {
            Some(_) => Err(Error::create_option(
                "Conflict functions are not supported on ring buffer tables",
            )),
            None => Ok(()),
        }
    }

    /// After RENAME TABLE: a ring table whose new name `mysql.ndb_replication` gives a
    /// conflict function keeps replicating without it (RonDB's rule: only CREATE TABLE is
    /// refused), and the node says so in its log, as RonDB's mysqld does.
    pub(crate) fn note_unused_conflict_function(&self, def: &TableDef) -> Result<()> {
        if def.ring.is_none() || self.session.vars.applier {
            return Ok(());
        }
        if let Some(function) = self.conflict_function(&def.database, &def.name)? {
            tracing::warn!(
                "Table {}.{} is a ring buffer table: not using conflict function {}",
                def.database,
                def.name,
                function
            );
        }
        Ok(())
    }

    /// The conflict function `mysql.ndb_replication` gives table `db`.`name` on this
    /// server, if any.
    fn conflict_function(&self, db_name: &str, name: &str) -> Result<Option<String>> {
        let (db, table) = NDB_REPLICATION;
        let Some(rep) = self.engine().table_def(db, table) else {
            return Ok(None);
        };
        let col = |name: &str| rep.column_index(name);
        let (Some(c_db), Some(c_table), Some(c_server), Some(c_fn)) = (
            col("db"),
            col("table_name"),
            col("server_id"),
            col("conflict_fn"),
        ) else {
            return Ok(None);
        };
        let own = u64::from(self.engine().config().server_id);
        let rows = self.session.scan(&rep, &[])?;
        let best = rows
            .iter()
            .filter_map(|r| {
                let (pdb, ptable) = (text(&r[c_db])?, text(&r[c_table])?);
                let server = match &r[c_server] {
                    Value::Int(i) => u64::try_from(*i).ok()?,
                    Value::UInt(u) => *u,
                    Value::Null => 0,
                    _ => return None,
                };
                let matches = like(db_name, &pdb, '\\')
                    && like(name, &ptable, '\\')
                    && (server == 0 || server == own);
                matches.then(|| {
                    // A pattern equal to the name is the name itself (`_` in `rb_events` is
                    // more often a letter than a wildcard).
                    let exact =
                        |p: &str, name: &str| p.eq_ignore_ascii_case(name) || !has_wildcard(p);
                    let rank = (exact(&pdb, db_name), exact(&ptable, name), server == own);
                    (rank, text(&r[c_fn]).unwrap_or_default())
                })
            })
            .max_by_key(|(rank, _)| *rank);
        Ok(best
            .map(|(_, function)| function.trim().to_string())
            .filter(|f| !f.is_empty()))
    }
}
