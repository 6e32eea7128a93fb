//! The storage engine a table was declared with. ringrep stores every table the same way (its
//! one engine, shown as `ndbcluster`); a table declared `ENGINE=InnoDB`, as dumps of MySQL
//! servers write them, keeps that name in SHOW CREATE TABLE, SHOW TABLE STATUS and
//! `information_schema.TABLES`, and the `NDB_TABLE=` options of its comment are not applied
//! (InnoDB ignores them, as RonDB's InnoDB tables do): it is a plain table. Other engine names
//! are MySQL's 1286.
//!
//! A declared InnoDB table is a row of `mysql.ringrep_table_engines` (database, table,
//! engine), so the name is durable and replicated like any row; `ALTER TABLE ... ENGINE=NDB`
//! makes it an NDB table, RENAME TABLE takes the name along, DROP TABLE and DROP DATABASE
//! remove it.

use binlog_format::schema::{ColumnType, TableDef};
use binlog_format::Value;
use sqlparser::ast::{CreateTableOptions, SqlOption};

use crate::table::computed::plain_column;
use crate::SqlSession;
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::SYSTEM_DB;

/// The table that holds the declared engines other than ringrep's own.
pub(crate) const ENGINES_TABLE: &str = "ringrep_table_engines";

/// What ringrep's own engine is called.
pub(crate) const NATIVE: &str = "ndbcluster";

fn engines_def() -> TableDef {
    let col = |name: &str, ty| plain_column(name, ty, false);
    ringrep_engine::ddl::system_table(
        ENGINES_TABLE,
        vec![
            col("db", ColumnType::VarChar { len: 64 }),
            col("name", ColumnType::VarChar { len: 64 }),
            col("engine", ColumnType::VarChar { len: 64 }),
        ],
        2,
    )
}

/// An `ENGINE=` name as a table keeps it: `None` for ringrep's own (NDB, NDBCLUSTER), `InnoDB`,
/// or 1286 for an engine ringrep does not have.
pub(crate) fn normalize(name: &str) -> Result<Option<&'static str>> {
    let n = name
        .trim()
        .trim_matches(|c| c == '`' || c == '\'' || c == '"');
    match n.to_ascii_lowercase().as_str() {
        "ndb" | "ndbcluster" => Ok(None),
        "innodb" => Ok(Some("InnoDB")),
        _ => Err(Error::new(
            code::ER_UNKNOWN_STORAGE_ENGINE,
            format!("Unknown storage engine '{n}'"),
        )),
    }
}

/// The `ENGINE=` of CREATE TABLE's options, normalized (`None`: ringrep's own or none given).
pub(crate) fn declared(options: &CreateTableOptions) -> Result<Option<&'static str>> {
    let (CreateTableOptions::Plain(opts) | CreateTableOptions::Options(opts)) = options else {
        return Ok(None);
    };
    for o in opts {
        if let SqlOption::NamedParenthesizedList(l) = o {
            if l.key.value.eq_ignore_ascii_case("ENGINE") {
                if let Some(name) = &l.name {
                    return normalize(&name.value);
                }
            }
        }
    }
    Ok(None)
}

impl SqlSession {
    /// The engine `db.name` was declared with, when it is not ringrep's own.
    pub(crate) fn declared_engine(&self, db: &str, name: &str) -> Option<String> {
        // Asked for every SHOW CREATE TABLE and catalog row: without the table, one lookup.
        let def = self.engine().table_def(SYSTEM_DB, ENGINES_TABLE)?;
        let text = ringrep_engine::types::text_of;
        self.session
            .scan(&def, &[])
            .ok()?
            .into_iter()
            .find_map(|r| {
                (text(&r[0]).eq_ignore_ascii_case(db) && text(&r[1]).eq_ignore_ascii_case(name))
                    .then(|| text(&r[2]))
            })
    }

    /// The engine name to show for `def`.
    pub(crate) fn engine_name(&self, def: &TableDef) -> String {
        self.declared_engine(&def.database, &def.name)
            .unwrap_or_else(|| NATIVE.to_string())
    }

    /// Records `engine` for `db.name` (`None`: ringrep's own, the row goes).
    pub(crate) fn set_declared_engine(
        &mut self,
        db: &str,
        name: &str,
        engine: Option<&str>,
    ) -> Result<()> {
        if engine.is_none() && self.engine().table_def(SYSTEM_DB, ENGINES_TABLE).is_none() {
            return Ok(());
        }
        if !self.engine().with_state(|st| st.has_database(SYSTEM_DB)) {
            self.session.create_database(SYSTEM_DB, true)?;
        }
        if self.engine().table_def(SYSTEM_DB, ENGINES_TABLE).is_none() {
            self.session.create_table(engines_def(), true)?;
        }
        let def = self.session.table_def(Some(SYSTEM_DB), ENGINES_TABLE)?;
        let text_of = ringrep_engine::types::text_of;
        self.statement(|s| {
            s.session.delete_where(
                &def,
                &mut |r| {
                    Ok(text_of(&r[0]).eq_ignore_ascii_case(db)
                        && text_of(&r[1]).eq_ignore_ascii_case(name))
                },
                None,
            )?;
            if let Some(e) = engine {
                let row = vec![
                    Value::Text(db.to_string()),
                    Value::Text(name.to_string()),
                    Value::Text(e.to_string()),
                ];
                s.session.insert(
                    &def,
                    &[0, 1, 2],
                    vec![row],
                    ringrep_engine::InsertMode::Insert,
                )?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names() {
        assert_eq!(normalize("NDB").expect("ndb"), None);
        assert_eq!(normalize("ndbcluster").expect("ndb"), None);
        assert_eq!(normalize("innodb").expect("innodb"), Some("InnoDB"));
        assert_eq!(normalize("MyISAM").map_err(|e| e.code), Err(1286));
    }
}
