//! Column values as Debezium's MySQL connector puts them in a payload (its default
//! converters, with `decimal.handling.mode=string`), as Kafka Connect's JsonConverter then
//! writes them.

use serde_json::{json, Map, Number, Value as Json};

use binlog_format::schema::{ColumnDef, ColumnType, IntWidth, TableDef};
use binlog_format::value::{days_from_civil, Date, DateTime, Value};

/// One value of `col` as JSON of the Connect type [`super::schema`] gives the column.
pub(super) fn value_json(col: &ColumnDef, v: &Value) -> Json {
    match (&col.ty, v) {
        (_, Value::Null) => Json::Null,
        // Debezium's default `bigint.unsigned.handling.mode=long` reads the column's 64 bits
        // as a signed long, so values above i64::MAX arrive negative; consumers built for
        // Debezium expect exactly that.
        (
            ColumnType::Integer {
                width: IntWidth::Big,
                ..
            },
            Value::UInt(u),
        ) => json!(*u as i64),
        (_, Value::Int(i)) => json!(i),
        (_, Value::UInt(u)) => json!(u),
        (_, Value::Float(f)) => float32(*f),
        (_, Value::Double(d)) => Number::from_f64(*d).map_or(Json::Null, Json::Number),
        (_, Value::Decimal(s) | Value::Text(s) | Value::Json(s)) => json!(s),
        (_, Value::Bytes(b)) => json!(base64(b)),
        (_, Value::Date(d)) => match epoch_days(d) {
            Some(days) => json!(days),
            None => zero_date(col),
        },
        (_, Value::DateTime(dt)) if is_zero_date(&dt.date) => zero_date(col),
        (ColumnType::DateTime { fsp }, Value::DateTime(dt)) if *fsp <= 3 => {
            json!(dt.to_epoch_micros().div_euclid(1000))
        }
        (_, Value::DateTime(dt)) => json!(dt.to_epoch_micros()),
        (ColumnType::Timestamp { fsp }, Value::Timestamp(us)) => json!(zoned_timestamp(*us, *fsp)),
        (_, Value::Timestamp(us)) => json!(zoned_timestamp(*us, 6)),
        // io.debezium.time.MicroTime.
        (_, Value::Time(us)) => json!(us),
        // BIT(1) a boolean; io.debezium.data.Bits: ceil(M / 8) bytes, little endian, as
        // Debezium's converter pads a BitSet's bytes.
        (ColumnType::Bit { width: 1 }, Value::Bit(b)) => json!(*b != 0),
        (ColumnType::Bit { width }, Value::Bit(b)) => {
            let n = usize::from(*width).div_ceil(8).clamp(1, 8);
            json!(base64(&b.to_le_bytes()[..n]))
        }
        (_, Value::Bit(b)) => json!(b),
    }
}

/// A FLOAT as Java writes a `float`: its shortest decimal form (`1.1`, not the
/// `1.100000023841858` of the same bits widened to a double), which JsonConverter reads back
/// to the same float. Non-finite values cannot be stored by MySQL; they become null.
fn float32(f: f32) -> Json {
    format!("{f}")
        .parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map_or(Json::Null, Json::Number)
}

/// MySQL's zero dates (`0000-00-00`, or a zero month or day) have no day number.
fn is_zero_date(d: &Date) -> bool {
    d.month == 0 || d.day == 0
}

fn epoch_days(d: &Date) -> Option<i64> {
    (!is_zero_date(d))
        .then(|| days_from_civil(i64::from(d.year), u32::from(d.month), u32::from(d.day)))
}

/// A zero date as Debezium writes it: null where the column takes null, else the epoch.
fn zero_date(col: &ColumnDef) -> Json {
    if col.nullable {
        Json::Null
    } else {
        json!(0)
    }
}

/// A TIMESTAMP as Debezium's `io.debezium.time.ZonedTimestamp`: ISO-8601 in UTC with `Z`
/// and exactly `fsp` fraction digits (none for fsp 0 unless the value has a fraction, then
/// as few as it needs, as Java's ISO formatter does).
pub(super) fn zoned_timestamp(us: i64, fsp: u8) -> String {
    let dt = DateTime::from_epoch_micros(us);
    let micros = format!("{:06}", dt.micros);
    let fraction = match fsp {
        0 => micros.trim_end_matches('0'),
        n => &micros[..usize::from(n.min(6))],
    };
    let dot = if fraction.is_empty() { "" } else { "." };
    format!(
        "{}T{:02}:{:02}:{:02}{dot}{fraction}Z",
        dt.date, dt.hour, dt.minute, dt.second
    )
}

/// Standard base64 with padding, as JsonConverter writes a `bytes` value (Jackson's
/// default variant); by hand, to keep this crate's dependencies as they are.
pub(super) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The columns at `positions` with `values`, by column name.
pub(super) fn columns(table: &TableDef, positions: &[usize], values: &[Value]) -> Json {
    let mut m = Map::new();
    for (&pos, v) in positions.iter().zip(values) {
        if let Some(col) = table.columns.get(pos) {
            m.insert(col.name.clone(), value_json(col, v));
        }
    }
    Json::Object(m)
}

/// A full row (every column, in table order).
pub(super) fn row(table: &TableDef, row: &[Value]) -> Json {
    let all: Vec<usize> = (0..table.columns.len()).collect();
    columns(table, &all, row)
}

/// The row a delete removed, as far as the event tells it: the primary-key columns, every
/// other column null.
pub(super) fn key_only_row(table: &TableDef, key: &[Value]) -> Json {
    let mut full = vec![Value::Null; table.columns.len()];
    for (&pos, v) in table.primary_key.iter().zip(key) {
        if let Some(slot) = full.get_mut(pos) {
            *slot = v.clone();
        }
    }
    row(table, &full)
}
