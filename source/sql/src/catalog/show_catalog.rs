//! The SHOW statements over the server's fixed catalog that tools send on connect and dump
//! tools send per database: SHOW CHARACTER SET, SHOW COLLATION, SHOW ENGINES, SHOW PLUGINS,
//! SHOW {PROCEDURE | FUNCTION} STATUS and SHOW CREATE DATABASE, each under MySQL 8.0's
//! headers and read from the same rows as `information_schema`.

use binlog_format::Value;

use crate::expr::like;
use crate::parse::show::{show_words, ShowFilter};
use crate::{Outcome, SqlSession};
use ringrep_engine::error::{code, Error, Result};

impl SqlSession {
    /// `SHOW {CHARACTER SET | CHARSET} [LIKE 'p' | WHERE e]`.
    pub(crate) fn show_character_sets(&self, text: &str, keywords: usize) -> Result<Outcome> {
        let w = show_words(text, keywords)?;
        let (_, rows) = self.information_schema("CHARACTER_SETS")?;
        // CHARACTER_SETS has the default collation second; SHOW puts the description there.
        let rows = rows
            .into_iter()
            .map(|r| vec![r[0].clone(), r[2].clone(), r[1].clone(), r[3].clone()])
            .collect();
        self.show_result(
            &["Charset", "Description", "Default collation", "Maxlen"],
            rows,
            w.filter.as_ref(),
        )
    }

    /// `SHOW COLLATION [LIKE 'p' | WHERE e]`.
    pub(crate) fn show_collations(&self, text: &str) -> Result<Outcome> {
        let w = show_words(text, 2)?;
        let (_, rows) = self.information_schema("COLLATIONS")?;
        self.show_result(
            &[
                "Collation",
                "Charset",
                "Id",
                "Default",
                "Compiled",
                "Sortlen",
                "Pad_attribute",
            ],
            rows,
            w.filter.as_ref(),
        )
    }

    /// `SHOW [STORAGE] ENGINES`.
    pub(crate) fn show_engines(&self) -> Result<Outcome> {
        let (_, rows) = self.information_schema("ENGINES")?;
        self.show_result(
            &[
                "Engine",
                "Support",
                "Comment",
                "Transactions",
                "XA",
                "Savepoints",
            ],
            rows,
            None,
        )
    }

    /// `SHOW PLUGINS`: the parts of ringrep a MySQL server would list as plugins (its engine
    /// names and its authentication methods).
    pub(crate) fn show_plugins(&self) -> Result<Outcome> {
        let text = |s: &str| Value::Text(s.to_string());
        let rows = [
            ("binlog", "STORAGE ENGINE"),
            ("mysql_native_password", "AUTHENTICATION"),
            ("caching_sha2_password", "AUTHENTICATION"),
            ("ndbcluster", "STORAGE ENGINE"),
            ("InnoDB", "STORAGE ENGINE"),
        ]
        .into_iter()
        .map(|(name, kind)| {
            vec![
                text(name),
                text("ACTIVE"),
                text(kind),
                Value::Null,
                text("Apache-2.0"),
            ]
        })
        .collect();
        self.show_result(
            &["Name", "Status", "Type", "Library", "License"],
            rows,
            None,
        )
    }

    /// `SHOW {PROCEDURE | FUNCTION} STATUS [LIKE 'p' | WHERE e]`: the routines the account
    /// may see, from `information_schema.ROUTINES` (no stored functions exist, so FUNCTION
    /// lists none).
    pub(crate) fn show_routine_status(&self, text: &str, kind: &str) -> Result<Outcome> {
        let w = show_words(text, 3)?;
        let (_, rows) = self.information_schema("ROUTINES")?;
        let rows: Vec<Vec<Value>> = rows
            .into_iter()
            .filter(|r| matches!(&r[4], Value::Text(t) if t.eq_ignore_ascii_case(kind)))
            .map(|r| {
                // ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, DEFINER, LAST_ALTERED, CREATED,
                // SECURITY_TYPE, ROUTINE_COMMENT and the three character set columns.
                [2, 3, 4, 27, 24, 23, 22, 26, 28, 29, 30]
                    .iter()
                    .map(|&i| r[i].clone())
                    .collect()
            })
            .collect();
        // LIKE matches the routine's name (the second column), as in MySQL.
        let (rows, filter) = match w.filter {
            Some(ShowFilter::Like(p)) => (
                rows.into_iter()
                    .filter(|r| matches!(&r[1], Value::Text(n) if like(n, &p, '\\')))
                    .collect(),
                None,
            ),
            other => (rows, other),
        };
        self.show_result(
            &[
                "Db",
                "Name",
                "Type",
                "Definer",
                "Modified",
                "Created",
                "Security_type",
                "Comment",
                "character_set_client",
                "collation_connection",
                "Database Collation",
            ],
            rows,
            filter.as_ref(),
        )
    }

    /// `SHOW CREATE {DATABASE | SCHEMA} [IF NOT EXISTS] db`, as MySQL 8.0 prints it.
    pub(crate) fn show_create_database(&self, text: &str) -> Result<Outcome> {
        let w = show_words(text, 3)?;
        let words: Vec<&str> = w.words.iter().map(String::as_str).collect();
        let (if_not_exists, name) = match words[..] {
            [name] => (false, name),
            [i, n, e, name]
                if i.eq_ignore_ascii_case("IF")
                    && n.eq_ignore_ascii_case("NOT")
                    && e.eq_ignore_ascii_case("EXISTS") =>
            {
                (true, name)
            }
            _ => {
                return Err(Error::syntax(format!(
                    "You have an error in your SQL syntax; SHOW CREATE DATABASE takes one database name, in '{text}'"
                )))
            }
        };
        let exists = self.engine().with_state(|st| st.has_database(name))
            || name.eq_ignore_ascii_case(crate::catalog::information_schema::INFORMATION_SCHEMA);
        if !exists || !self.may_see_database(name) || !self.may_show_create_database(name) {
            return Err(if exists {
                self.database_denied(name)
            } else {
                Error::new(code::ER_BAD_DB_ERROR, format!("Unknown database '{name}'"))
            });
        }
        let create = format!(
            "CREATE DATABASE {}`{}` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci */ /*!80016 DEFAULT ENCRYPTION='N' */",
            if if_not_exists { "/*!32312 IF NOT EXISTS*/ " } else { "" },
            name.replace('`', "``")
        );
        self.show_result(
            &["Database", "Create Database"],
            vec![vec![Value::Text(name.to_string()), Value::Text(create)]],
            None,
        )
    }
}
