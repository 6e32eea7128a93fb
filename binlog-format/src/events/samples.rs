//! Sample events shared by the round-trip tests of each event kind, and (with the `samples`
//! feature) by other crates' tests of what they render of them.

use super::*;
use crate::schema::*;
use crate::value::{Date, DateTime, Value};

/// A table with a column of every type, and a secondary index.
pub fn table() -> TableDef {
    let col = |name: &str, ty: ColumnType, nullable: bool, default: ColumnDefault| ColumnDef {
        name: name.into(),
        ty,
        nullable,
        default,
        on_update_now: false,
        auto_increment: false,
        comment: String::new(),
    };
    TableDef {
        id: 7,
        database: "test".into(),
        name: "user_events".into(),
        columns: vec![
            col(
                "user_id",
                ColumnType::Integer {
                    width: IntWidth::Int,
                    unsigned: false,
                },
                false,
                ColumnDefault::None,
            ),
            col(
                "ring_idx",
                ColumnType::Integer {
                    width: IntWidth::Int,
                    unsigned: false,
                },
                false,
                ColumnDefault::Value(Value::Int(0)),
            ),
            col(
                "ring_meta",
                ColumnType::VarBinary { len: 64 },
                true,
                ColumnDefault::None,
            ),
            col(
                "created_at",
                ColumnType::Timestamp { fsp: 3 },
                false,
                ColumnDefault::CurrentTimestamp { fsp: 3 },
            ),
            col(
                "payload",
                ColumnType::VarChar { len: 256 },
                true,
                ColumnDefault::None,
            ),
        ],
        primary_key: vec![0, 1],
        indexes: vec![IndexDef {
            name: "ttl_index".into(),
            kind: IndexKind::Secondary,
            columns: vec![3],
        }],
        ring: Some(RingOptions {
            size: 100,
            slot_column: 1,
            meta_column: 2,
        }),
        ttl: Some(TtlOptions {
            seconds: 86400,
            column: 3,
        }),
        partitioning: Some(Partitioning {
            linear: false,
            columns: vec![0],
            partitions: None,
        }),
        comment: Some("NDB_TABLE=TTL=86400@created_at,MAX_ROWS_PER_PK=100".into()),
    }
}

/// One value of every kind, in the order of [`table`]'s columns.
pub fn all_values() -> Vec<Value> {
    vec![
        Value::Null,
        Value::Int(-42),
        Value::UInt(u64::MAX),
        Value::Float(1.5),
        Value::Double(-2.25),
        Value::Decimal("-123.4500".into()),
        Value::Bytes(vec![0, 1, 255]),
        Value::Text("héllo".into()),
        Value::Date(Date {
            year: 2024,
            month: 2,
            day: 29,
        }),
        Value::DateTime(DateTime {
            date: Date {
                year: 9999,
                month: 12,
                day: 31,
            },
            hour: 23,
            minute: 59,
            second: 59,
            micros: 999_999,
        }),
        Value::Timestamp(1_700_000_000_123_000),
        Value::Json("{\"a\":1}".into()),
        Value::Time(-3_020_399_000_000),
        Value::Bit(0b1_0110),
    ]
}

/// Row events of every change and cause.
pub fn row_events() -> Vec<RowEvent> {
    vec![
        RowEvent {
            table_id: 7,
            change: RowChange::Write { row: all_values() },
            cause: Cause::Overwrite,
        },
        RowEvent {
            table_id: 7,
            change: RowChange::Update {
                key: vec![Value::Int(1), Value::Int(3)],
                after: all_values(),
                before: Some(all_values()),
            },
            cause: Cause::Update,
        },
        RowEvent {
            table_id: 7,
            change: RowChange::Update {
                key: vec![Value::Int(1), Value::Int(3)],
                after: all_values(),
                before: None,
            },
            cause: Cause::Update,
        },
        RowEvent {
            table_id: u64::MAX,
            change: RowChange::Delete {
                key: vec![Value::Int(1), Value::Int(0)],
            },
            cause: Cause::PrefixDelete,
        },
    ]
}

/// DDL events of every kind.
pub fn ddl_events() -> Vec<DdlEvent> {
    vec![
        DdlEvent::CreateDatabase { name: "db1".into() },
        DdlEvent::DropDatabase { name: "db1".into() },
        DdlEvent::CreateTable { table: table() },
        DdlEvent::AlterTable { table: table() },
        DdlEvent::DropTable {
            table_id: 7,
            database: "test".into(),
            name: "user_events".into(),
        },
        DdlEvent::TruncateTable { table_id: 7 },
    ]
}

/// Transactions holding the events above.
pub fn transactions() -> Vec<Transaction> {
    let mut events: Vec<Event> = row_events().into_iter().map(Event::Row).collect();
    events.extend(ddl_events().into_iter().map(Event::Ddl));
    vec![
        Transaction {
            server_id: 1,
            seq: 1,
            commit_time_us: 1_700_000_000_000_000,
            origin: None,
            events,
        },
        Transaction {
            server_id: 2,
            seq: u64::MAX,
            commit_time_us: -5,
            origin: Some(Origin {
                server_id: 1,
                seq: 9,
            }),
            events: vec![],
        },
    ]
}

/// A segment header.
pub fn header() -> SegmentHeader {
    SegmentHeader {
        server_id: 1,
        first_seq: 1,
        created_us: 5,
        databases: vec!["test".into()],
        tables: vec![table()],
    }
}
