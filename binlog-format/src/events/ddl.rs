//! DDL events. Each carries the definition that results from it, so a consumer never has to
//! apply an ALTER itself.
//!
//! Layout: variant index, then the fields: 0 `CreateDatabase { name }`, 1 `DropDatabase { name }`,
//! 2 `CreateTable { table }`, 3 `AlterTable { table }`, 4 `DropTable { table_id, database, name }`,
//! 5 `TruncateTable { table_id }`.

use serde::{Deserialize, Serialize};

use crate::schema::TableDef;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub enum DdlEvent {
    CreateDatabase {
        name: String,
    },
    DropDatabase {
        name: String,
    },
    CreateTable {
        table: TableDef,
    },
    /// The full definition after the ALTER; the table id stays the same. A copying ALTER that
    /// rewrote rows also logs the rows it kept as writes in the same transaction.
    AlterTable {
        table: TableDef,
    },
    DropTable {
        table_id: u64,
        database: String,
        name: String,
    },
    /// All rows, meta rows included, are removed.
    TruncateTable {
        table_id: u64,
    },
}

impl DdlEvent {
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
