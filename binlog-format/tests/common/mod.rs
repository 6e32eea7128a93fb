//! Helpers shared by the binlog-format integration tests.
#![allow(dead_code)]

use binlog_format::{Cause, Event, Record, RowChange, RowEvent, Transaction, Value};

/// A typical ring insert: the data row and the meta row, about 150 bytes of user data.
pub(crate) fn ring_insert(seq: u64) -> Record {
    let payload = "x".repeat(140);
    let slot = (seq % 64 + 1) as i64;
    Record::Transaction(Transaction {
        server_id: 1,
        seq,
        commit_time_us: 1_700_000_000_000_000 + seq as i64,
        origin: None,
        events: vec![
            Event::Row(RowEvent {
                table_id: 1,
                change: RowChange::Write {
                    row: vec![
                        Value::Int((seq % 10_000) as i64),
                        Value::Int(slot),
                        Value::Null,
                        Value::Timestamp(1_700_000_000_000_000),
                        Value::Text(payload),
                    ],
                },
                cause: if seq > 64 {
                    Cause::Overwrite
                } else {
                    Cause::Insert
                },
            }),
            Event::Row(RowEvent {
                table_id: 1,
                change: RowChange::Write {
                    row: vec![
                        Value::Int((seq % 10_000) as i64),
                        Value::Int(0),
                        Value::Bytes(vec![1u8; 32]),
                        Value::Timestamp(i64::from(i32::MAX) * 1_000_000),
                        Value::Null,
                    ],
                },
                cause: Cause::MetaUpdate,
            }),
        ],
    })
}
