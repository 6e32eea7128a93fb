//! Debezium change records with embedded schemas encoded per second, the schemas made for each
//! record against kept per table definition (`ChangeOptions::debezium_schemas`), alternated in
//! one process: `cargo run --release -p ringrep-cdc --example debezium_encoding`.
use binlog_format::events::{Cause, RowChange, RowEvent};
use binlog_format::schema::{ColumnDef, ColumnType, IntWidth, TableDef};
use binlog_format::value::Value;
use binlog_format::Position;
use ringrep_cdc::kafka::{
    change_records, ChangeOptions, DebeziumSchemas, Format, Snapshot, SourceInfo, TxPlace,
};
use std::time::Instant;
fn main() {
    let col = |n: &str, t| ColumnDef::plain(n, t, false);
    let table = TableDef {
        id: 1,
        database: "test".into(),
        name: "user_events".into(),
        columns: vec![
            col(
                "user_id",
                ColumnType::Integer {
                    width: IntWidth::Int,
                    unsigned: false,
                },
            ),
            col(
                "ring_idx",
                ColumnType::Integer {
                    width: IntWidth::Int,
                    unsigned: false,
                },
            ),
            col("payload", ColumnType::VarChar { len: 200 }),
            col(
                "n",
                ColumnType::Integer {
                    width: IntWidth::Big,
                    unsigned: false,
                },
            ),
        ],
        primary_key: vec![0, 1],
        indexes: vec![],
        ring: None,
        ttl: None,
        partitioning: None,
        comment: None,
    };
    let src = SourceInfo {
        server_id: 1,
        seq: 5,
        position: Position {
            segment: 1,
            offset: 100,
        },
        commit_time_us: 1,
        index: 0,
        place: TxPlace::default(),
        snapshot: Snapshot::None,
    };
    let kept = DebeziumSchemas::of("ringrep", &table);
    let n = 200_000;
    for round in 0..3 {
        for keep in [false, true] {
            let opts = ChangeOptions {
                prefix: "ringrep",
                partitions: 6,
                tombstones: false,
                format: Format::Debezium { schemas: true },
                schema_version: "v1",
                debezium_schemas: keep.then_some(&kept),
            };
            let t = Instant::now();
            let mut bytes = 0;
            for i in 0..n {
                let ev = RowEvent {
                    table_id: 1,
                    change: RowChange::Write {
                        row: vec![
                            Value::Int(i % 1000),
                            Value::Int(i % 10),
                            Value::Text("x".repeat(100)),
                            Value::Int(i),
                        ],
                    },
                    cause: Cause::Insert,
                };
                for r in change_records(&table, &ev, &src, &opts) {
                    bytes += r.key.len() + r.value.map_or(0, |v| v.len());
                }
            }
            let s = t.elapsed().as_secs_f64();
            println!(
                "round {round} kept={keep}: {:.0} records/s ({} bytes)",
                n as f64 / s,
                bytes
            );
        }
    }
}
