//! Each column type's Connect type, schema name and value.

use serde_json::{json, Value as Json};

use binlog_format::events::samples;
use binlog_format::events::{Cause, RowChange};
use binlog_format::schema::{ColumnDef, ColumnType, IntWidth, LobSize};
use binlog_format::value::{Date, DateTime, Value};

use super::super::payload::{base64, zoned_timestamp};
use super::{opts, parse, records};

fn column(name: &str, ty: ColumnType, nullable: bool) -> ColumnDef {
    ColumnDef::plain(name, ty, nullable)
}

fn int(width: IntWidth, unsigned: bool) -> ColumnType {
    ColumnType::Integer { width, unsigned }
}

/// Each type's Connect type (and schema name) and value, as Debezium 3.6.3's
/// `MySqlValueConverters` gave them for the same MySQL column and value.
#[test]
fn every_column_type_is_encoded_as_debezium_does() {
    use ColumnType as T;
    use IntWidth::*;
    let dt = |micros| {
        let date = Date {
            year: 2024,
            month: 2,
            day: 29,
        };
        Value::DateTime(DateTime {
            date,
            hour: 1,
            minute: 2,
            second: 3,
            micros,
        })
    };
    let date = |year, month, day| Value::Date(Date { year, month, day });
    let ab = || vec!["a".to_string(), "b".to_string()];
    let (i, u) = (Value::Int, Value::UInt);
    let (text, bytes) = (|s: &str| Value::Text(s.into()), Value::Bytes);
    let zoned = "string io.debezium.time.ZonedTimestamp";
    let cases: Vec<(ColumnType, Value, &str, Json)> = vec![
        (int(Tiny, false), i(-128), "int16", json!(-128)),
        (int(Tiny, true), u(255), "int16", json!(255)),
        (int(Bool, false), i(1), "int16", json!(1)),
        (int(Small, false), i(-32768), "int16", json!(-32768)),
        (int(Small, true), u(65535), "int32", json!(65535)),
        (
            int(Medium, false),
            i(-8_388_608),
            "int32",
            json!(-8_388_608),
        ),
        (int(Medium, true), u(16_777_215), "int32", json!(16_777_215)),
        (
            int(Int, false),
            i(i32::MIN.into()),
            "int32",
            json!(i32::MIN),
        ),
        (int(Int, true), u(u32::MAX.into()), "int64", json!(u32::MAX)),
        (int(Big, false), i(i64::MIN), "int64", json!(i64::MIN)),
        (int(Big, true), u(u64::MAX), "int64", json!(-1)),
        (int(Big, true), u(7), "int64", json!(7)),
        (
            T::Decimal {
                precision: 10,
                scale: 4,
            },
            Value::Decimal("-1.2300".into()),
            "string",
            json!("-1.2300"),
        ),
        (T::Float, Value::Float(1.1), "float", json!(1.1)),
        (T::Double, Value::Double(-2.25), "double", json!(-2.25)),
        (
            T::UnsignedDecimal {
                precision: 10,
                scale: 4,
            },
            Value::Decimal("1.2300".into()),
            "string",
            json!("1.2300"),
        ),
        (
            T::Real {
                double: false,
                digits: Some((7, 4)),
                unsigned: true,
            },
            Value::Float(12.3457),
            "float",
            json!(12.3457),
        ),
        (
            T::Real {
                double: true,
                digits: Some((12, 3)),
                unsigned: false,
            },
            Value::Double(-2.125),
            "double",
            json!(-2.125),
        ),
        (T::Char { len: 5 }, text("héllo"), "string", json!("héllo")),
        (T::VarChar { len: 9 }, text("x"), "string", json!("x")),
        (
            T::Text {
                size: LobSize::Long,
            },
            text("t"),
            "string",
            json!("t"),
        ),
        (
            T::Binary { len: 3 },
            bytes(vec![0, 1, 255]),
            "bytes",
            json!("AAH/"),
        ),
        (
            T::VarBinary { len: 9 },
            bytes(vec![0xfb, 0xff]),
            "bytes",
            json!("+/8="),
        ),
        (
            T::Blob {
                size: LobSize::Normal,
            },
            bytes(b"f".to_vec()),
            "bytes",
            json!("Zg=="),
        ),
        (
            T::Json,
            Value::Json("{\"a\": [1]}".into()),
            "string io.debezium.data.Json",
            json!("{\"a\": [1]}"),
        ),
        (
            T::Date,
            date(2024, 2, 29),
            "int32 io.debezium.time.Date",
            json!(19782),
        ),
        (
            T::Date,
            date(1969, 12, 31),
            "int32 io.debezium.time.Date",
            json!(-1),
        ),
        (
            T::DateTime { fsp: 0 },
            dt(0),
            "int64 io.debezium.time.Timestamp",
            json!(1_709_168_523_000i64),
        ),
        (
            T::DateTime { fsp: 3 },
            dt(123_000),
            "int64 io.debezium.time.Timestamp",
            json!(1_709_168_523_123i64),
        ),
        (
            T::DateTime { fsp: 4 },
            dt(123_400),
            "int64 io.debezium.time.MicroTimestamp",
            json!(1_709_168_523_123_400i64),
        ),
        (
            T::DateTime { fsp: 6 },
            dt(123_456),
            "int64 io.debezium.time.MicroTimestamp",
            json!(1_709_168_523_123_456i64),
        ),
        (
            T::Timestamp { fsp: 0 },
            Value::Timestamp(1_700_000_000_000_000),
            zoned,
            json!("2023-11-14T22:13:20Z"),
        ),
        (
            T::Timestamp { fsp: 3 },
            Value::Timestamp(1_700_000_000_120_000),
            zoned,
            json!("2023-11-14T22:13:20.120Z"),
        ),
        (
            T::Timestamp { fsp: 6 },
            Value::Timestamp(0),
            zoned,
            json!("1970-01-01T00:00:00.000000Z"),
        ),
        (
            T::Enum { values: ab() },
            text("b"),
            "string io.debezium.data.Enum",
            json!("b"),
        ),
        (
            T::Set { values: ab() },
            text("a,b"),
            "string io.debezium.data.EnumSet",
            json!("a,b"),
        ),
        (T::Year, i(2024), "int32 io.debezium.time.Year", json!(2024)),
        (
            T::Time { fsp: 3 },
            Value::Time(-93_784_500_000),
            "int64 io.debezium.time.MicroTime",
            json!(-93_784_500_000i64),
        ),
        (T::Bit { width: 1 }, Value::Bit(1), "boolean", json!(true)),
        (T::Bit { width: 1 }, Value::Bit(0), "boolean", json!(false)),
        // Little endian: 0x0A01 is 01 0A.
        (
            T::Bit { width: 12 },
            Value::Bit(0xA01),
            "bytes io.debezium.data.Bits",
            json!("AQo="),
        ),
        (
            T::Bit { width: 64 },
            Value::Bit(u64::MAX),
            "bytes io.debezium.data.Bits",
            json!("//////////8="),
        ),
    ];
    for (ty, value, want_type, want) in cases {
        let mut t = samples::table();
        (t.ring, t.ttl) = (None, None);
        t.indexes.clear();
        t.columns = vec![
            column("id", int(Int, false), false),
            column("c", ty.clone(), false),
        ];
        t.primary_key = vec![0];
        let row = RowChange::Write {
            row: vec![Value::Int(1), value],
        };
        let out = records(&t, row, Cause::Insert, &opts(false, true));
        let v = parse(out[0].value.as_deref().expect("value"));
        let field = &v["schema"]["fields"][1]["fields"][1];
        let got_type = match field["name"].as_str() {
            Some(name) => format!("{} {name}", field["type"].as_str().expect("type")),
            None => field["type"].as_str().expect("type").to_string(),
        };
        assert_eq!(got_type, want_type, "{ty:?}");
        assert_eq!(
            field["optional"], true,
            "{ty:?}: outside the key, so optional"
        );
        assert_eq!(v["payload"]["after"]["c"], want, "{ty:?}");
        let allowed = field["parameters"]["allowed"].as_str();
        let enumerated = matches!(ty, T::Enum { .. } | T::Set { .. });
        assert_eq!(allowed, enumerated.then_some("a,b"), "{ty:?}");
        let length = field["parameters"]["length"].as_str();
        let bits = match ty {
            T::Bit { width } if width > 1 => Some(width.to_string()),
            _ => None,
        };
        assert_eq!(length, bits.as_deref(), "{ty:?}");
        let versioned = field.get("name").map(|_| json!(1));
        assert_eq!(field.get("version").cloned(), versioned, "{ty:?}");
    }
}

#[test]
fn key_columns_are_required_and_zero_dates_follow_nullability() {
    let mut t = samples::table();
    t.columns[4] = column("d", ColumnType::Date, false);
    t.columns[2] = column("n", ColumnType::Date, true);
    let zero = Value::Date(Date {
        year: 0,
        month: 0,
        day: 0,
    });
    let row = vec![
        Value::Int(1),
        Value::Int(1),
        zero.clone(),
        Value::Timestamp(0),
        zero,
    ];
    let out = records(
        &t,
        RowChange::Write { row },
        Cause::Insert,
        &opts(false, true),
    );
    let v = parse(out[0].value.as_deref().expect("value"));
    let optional: Vec<bool> = v["schema"]["fields"][0]["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|f| f["optional"].as_bool().expect("bool"))
        .collect();
    assert_eq!(optional, vec![false, false, true, true, true]);
    assert_eq!(v["payload"]["after"]["d"], 0);
    assert!(v["payload"]["after"]["n"].is_null());
}

#[test]
fn base64_and_zoned_timestamps_match_their_references() {
    // RFC 4648's test vectors.
    let vectors = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ];
    for (plain, encoded) in vectors {
        assert_eq!(base64(plain.as_bytes()), encoded);
    }
    // As Debezium 3.6.3 formatted these instants for TIMESTAMP(0) and TIMESTAMP(3).
    assert_eq!(
        zoned_timestamp(1_700_000_000_120_000, 0),
        "2023-11-14T22:13:20.12Z"
    );
    assert_eq!(
        zoned_timestamp(1_700_000_000_123_456, 3),
        "2023-11-14T22:13:20.123Z"
    );
    assert_eq!(zoned_timestamp(0, 3), "1970-01-01T00:00:00.000Z");
    assert_eq!(zoned_timestamp(-1, 6), "1969-12-31T23:59:59.999999Z");
}
