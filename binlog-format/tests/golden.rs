//! Golden binlog files of format version 1: decoded and re-encoded byte for byte, so any change
//! to the byte layout fails here. Regenerate (only for a new format version) with
//! `RINGREP_BLESS=1 cargo test -p binlog-format --test golden`.

mod common;

use std::path::PathBuf;

use binlog_format::events::SegmentHeader;
use binlog_format::format::{Prelude, DEFAULT_MAX_FRAME};
use binlog_format::frame::write_frame;
use binlog_format::schema::*;
use binlog_format::segment::{Next, SegmentCursor};
use binlog_format::value::{Date, DateTime};
use binlog_format::*;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1")
}

fn table() -> TableDef {
    let col = |name: &str, ty, nullable, default| ColumnDef {
        name: String::from(name),
        ty,
        nullable,
        default,
        on_update_now: false,
        auto_increment: false,
        comment: String::new(),
    };
    TableDef {
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
        indexes: vec![],
        ring: Some(RingOptions {
            size: 3,
            slot_column: 1,
            meta_column: 2,
        }),
        ttl: None,
        partitioning: None,
        comment: Some("NDB_TABLE=MAX_ROWS_PER_PK=3".into()),
    }
}

/// The records of the golden segment: every event kind and value type.
fn records() -> Vec<Record> {
    let t = table();
    let meta = |next: u32, count: u32, total: u64| {
        let mut b = vec![0u8; 32];
        b[0] = 1;
        b[4..8].copy_from_slice(&next.to_le_bytes());
        b[8..12].copy_from_slice(&count.to_le_bytes());
        b[16..24].copy_from_slice(&total.to_le_bytes());
        Value::Bytes(b)
    };
    let row = |slot: i64, p: &str| {
        vec![
            Value::Int(1),
            Value::Int(slot),
            Value::Null,
            Value::Timestamp(1_700_000_000_000_000),
            Value::Text(p.into()),
        ]
    };
    let meta_row = |m| {
        vec![
            Value::Int(1),
            Value::Int(0),
            m,
            Value::Timestamp(2_147_483_647_000_000),
            Value::Null,
        ]
    };
    let tx = |seq, events| {
        Record::Transaction(Transaction {
            server_id: 1,
            seq,
            commit_time_us: 1_700_000_000_000_000 + seq as i64,
            origin: None,
            events,
        })
    };
    vec![
        tx(
            1,
            vec![Event::Ddl(DdlEvent::CreateTable { table: t.clone() })],
        ),
        tx(
            2,
            vec![
                Event::Row(RowEvent {
                    table_id: 1,
                    change: RowChange::Write { row: row(1, "A") },
                    cause: Cause::Insert,
                }),
                Event::Row(RowEvent {
                    table_id: 1,
                    change: RowChange::Write {
                        row: meta_row(meta(2, 1, 1)),
                    },
                    cause: Cause::MetaUpdate,
                }),
            ],
        ),
        tx(
            3,
            vec![Event::Row(RowEvent {
                table_id: 1,
                change: RowChange::Update {
                    key: vec![Value::Int(1), Value::Int(1)],
                    after: row(1, "B"),
                    before: Some(row(1, "A")),
                },
                cause: Cause::Update,
            })],
        ),
        Record::Heartbeat(Heartbeat {
            server_id: 1,
            time_us: 1_700_000_000_500_000,
            last_seq: 3,
        }),
        tx(
            4,
            vec![
                Event::Row(RowEvent {
                    table_id: 1,
                    change: RowChange::Delete {
                        key: vec![Value::Int(1), Value::Int(1)],
                    },
                    cause: Cause::PrefixDelete,
                }),
                Event::Row(RowEvent {
                    table_id: 1,
                    change: RowChange::Delete {
                        key: vec![Value::Int(1), Value::Int(0)],
                    },
                    cause: Cause::PrefixDelete,
                }),
            ],
        ),
        Record::Transaction(Transaction {
            server_id: 1,
            seq: 5,
            commit_time_us: 0,
            origin: Some(Origin {
                server_id: 9,
                seq: 77,
            }),
            events: vec![Event::Row(RowEvent {
                table_id: 2,
                change: RowChange::Write {
                    row: vec![
                        Value::Null,
                        Value::Int(-5),
                        Value::UInt(u64::MAX),
                        Value::Float(0.5),
                        Value::Double(-1.25),
                        Value::Decimal("123.450".into()),
                        Value::Bytes(vec![0, 255]),
                        Value::Text("ünïcode".into()),
                        Value::Date(Date {
                            year: 2024,
                            month: 2,
                            day: 29,
                        }),
                        Value::DateTime(DateTime {
                            date: Date {
                                year: 1999,
                                month: 12,
                                day: 31,
                            },
                            hour: 23,
                            minute: 59,
                            second: 58,
                            micros: 123_456,
                        }),
                        Value::Timestamp(-1),
                        Value::Json("{\"k\":[1,2]}".into()),
                    ],
                },
                cause: Cause::Insert,
            })],
        }),
        tx(
            6,
            vec![
                Event::Ddl(DdlEvent::TruncateTable { table_id: 1 }),
                Event::Ddl(DdlEvent::DropTable {
                    table_id: 1,
                    database: "test".into(),
                    name: "user_events".into(),
                }),
            ],
        ),
    ]
}

fn header() -> SegmentHeader {
    SegmentHeader {
        server_id: 1,
        first_seq: 1,
        created_us: 1_700_000_000_000_000,
        databases: vec!["test".into()],
        tables: vec![],
    }
}

fn encode_segment(header: &SegmentHeader, records: &[Record]) -> Vec<u8> {
    let mut out = Prelude {
        version: 1,
        server_id: header.server_id,
        first_seq: header.first_seq,
    }
    .encode()
    .to_vec();
    write_frame(&codec::encode(header).expect("encode header"), &mut out).expect("frame");
    for r in records {
        write_frame(&codec::encode(r).expect("encode record"), &mut out).expect("frame");
    }
    out
}

#[test]
fn golden_segment_decodes_and_reencodes_byte_for_byte() {
    let path = data_dir().join("binlog.000001");
    let expected = encode_segment(&header(), &records());
    if std::env::var_os("RINGREP_BLESS").is_some() {
        std::fs::create_dir_all(data_dir()).expect("mkdir");
        std::fs::write(&path, &expected).expect("write golden");
    }
    let golden = std::fs::read(&path).expect("golden file tests/data/v1/binlog.000001");
    let mut cursor = SegmentCursor::open(&data_dir(), 1, DEFAULT_MAX_FRAME).expect("open golden");
    let mut decoded = Vec::new();
    while let Next::Record { record, .. } = cursor.read_next().expect("next") {
        decoded.push(record);
    }
    assert_eq!(cursor.header, header());
    assert_eq!(
        decoded,
        records(),
        "the golden file decodes to the documented records"
    );
    assert_eq!(
        encode_segment(&cursor.header, &decoded),
        golden,
        "re-encoding gives the same bytes"
    );
    assert_eq!(expected, golden, "today's encoder writes the golden bytes");
}

#[test]
fn golden_header_bytes_are_as_documented() {
    let golden = std::fs::read(data_dir().join("binlog.000001")).expect("golden");
    assert_eq!(&golden[0..8], b"RRBINLOG");
    assert_eq!(
        u16::from_le_bytes([golden[8], golden[9]]),
        1,
        "format version"
    );
    assert_eq!(
        u32::from_le_bytes([golden[12], golden[13], golden[14], golden[15]]),
        1,
        "server id"
    );
    let len = u32::from_le_bytes([golden[24], golden[25], golden[26], golden[27]]) as usize;
    let crc = u32::from_le_bytes([golden[28], golden[29], golden[30], golden[31]]);
    assert_eq!(crc32c::crc32c(&golden[32..32 + len]), crc);
}
