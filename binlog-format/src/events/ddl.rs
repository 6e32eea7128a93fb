//! DDL events. Each carries the definition that results from it, so a consumer never has to
//! apply an ALTER itself.
//!
//! Layout: variant index, then the fields: 0 `CreateDatabase { name }`, 1 `DropDatabase { name }`,
//! 2 `CreateTable { table }`, 3 `AlterTable { table }`, 4 `DropTable { table_id, database, name }`,
//! 5 `TruncateTable { table_id }`.

use serde::{Deserialize, Serialize};

use crate::schema::{Schema, TableDef};

/// A schema change. Appliers replay it; [`Schema::apply`] folds it into a [`Schema`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub enum DdlEvent {
    /// `CREATE DATABASE`.
    CreateDatabase {
        /// The database's name, as given in the statement.
        name: String,
    },
    /// `DROP DATABASE`: the database and every table in it are gone.
    DropDatabase {
        /// The database's name.
        name: String,
    },
    /// `CREATE TABLE`, with the new table's full definition (its `id` is new).
    CreateTable {
        /// The definition of the created table.
        table: TableDef,
    },
    /// The full definition after the ALTER; the table id stays the same. A copying ALTER that
    /// rewrote rows also logs the rows it kept as writes in the same transaction and, when the
    /// primary key is unchanged, the expired rows it dropped as deletes (cause `TtlPurge`),
    /// which an applier that replaced the rows finds absent.
    AlterTable {
        /// The definition of the table after the change.
        table: TableDef,
    },
    /// `DROP TABLE`: the table and its rows are gone.
    DropTable {
        /// The dropped table's id ([`TableDef::id`]).
        table_id: u64,
        /// The database the table was in.
        database: String,
        /// The table's name.
        name: String,
    },
    /// All rows, meta rows included, are removed.
    TruncateTable {
        /// The truncated table's id ([`TableDef::id`]); the id and definition stay.
        table_id: u64,
    },
}

impl DdlEvent {
    /// The kind of change in snake case (`create_database`, `drop_database`,
    /// `create_table`, `alter_table`, `drop_table`, `truncate_table`), as `ringrep-binlog`
    /// prints it and as the `ddl` field of its JSON output.
    pub fn name(&self) -> &'static str {
        match self {
            DdlEvent::CreateDatabase { .. } => "create_database",
            DdlEvent::DropDatabase { .. } => "drop_database",
            DdlEvent::CreateTable { .. } => "create_table",
            DdlEvent::AlterTable { .. } => "alter_table",
            DdlEvent::DropTable { .. } => "drop_table",
            DdlEvent::TruncateTable { .. } => "truncate_table",
        }
    }
}

// `Schema::apply` is defined here rather than in `schema.rs` so that the dependency between
// the two modules runs one way: events carry table definitions, and the schema module knows
// nothing of events.
impl Schema {
    /// Applies one DDL event, so that the schema is what it was just after that event:
    /// databases created or dropped (dropping a database drops its tables), tables created,
    /// replaced by their new definition after an ALTER, or dropped. A TRUNCATE changes no
    /// definition. Dropping something that is not there is not an error.
    pub fn apply(&mut self, ddl: &DdlEvent) {
        match ddl {
            DdlEvent::CreateDatabase { name } => {
                self.databases.insert(name.clone());
            }
            DdlEvent::DropDatabase { name } => {
                self.databases.remove(name);
                self.tables.retain(|_, t| &t.database != name);
            }
            DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table } => {
                self.databases.insert(table.database.clone());
                self.tables.insert(table.id, table.clone());
            }
            DdlEvent::DropTable { table_id, .. } => {
                self.tables.remove(table_id);
            }
            DdlEvent::TruncateTable { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;

    #[test]
    fn every_ddl_event_round_trips() {
        for ev in crate::events::samples::ddl_events() {
            let bytes = codec::encode(&ev).expect("encode");
            assert_eq!(codec::encoded_len(&ev).expect("len"), bytes.len());
            assert_eq!(codec::decode::<DdlEvent>(&bytes).expect("decode"), ev);
        }
    }
}
