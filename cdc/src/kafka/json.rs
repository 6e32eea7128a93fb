//! Values and rows as JSON, as ringrep's envelope, record keys and partition keys write them.

use serde_json::{json, Map, Value as Json};

use binlog_format::schema::TableDef;
use binlog_format::value::{format_datetime, DateTime, Value};

/// A value as JSON: integers as numbers, DECIMAL as a string (no precision lost), bytes as
/// lowercase hex, DATE `YYYY-MM-DD`, DATETIME `YYYY-MM-DD HH:MM:SS.ffffff`, TIMESTAMP as UTC
/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, JSON embedded as JSON, non-finite floats as strings.
pub fn value_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Int(i) => json!(i),
        Value::UInt(u) => json!(u),
        Value::Float(f) if f.is_finite() => json!(f),
        Value::Double(f) if f.is_finite() => json!(f),
        Value::Float(f) => json!(f.to_string()),
        Value::Double(f) => json!(f.to_string()),
        Value::Decimal(s) | Value::Text(s) => json!(s),
        Value::Bytes(b) => json!(b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
        Value::Date(d) => json!(d.to_string()),
        Value::DateTime(dt) => json!(format_datetime(dt, 6)),
        Value::Timestamp(us) => {
            json!(format_datetime(&DateTime::from_epoch_micros(*us), 6).replace(' ', "T") + "Z")
        }
        Value::Json(s) => serde_json::from_str(s).unwrap_or_else(|_| json!(s)),
    }
}

/// The columns at `positions` with `values`, as a JSON object (names sorted).
pub(crate) fn columns_json(table: &TableDef, positions: &[usize], values: &[Value]) -> Json {
    let mut m = Map::new();
    for (&pos, v) in positions.iter().zip(values) {
        if let Some(c) = table.columns.get(pos) {
            m.insert(c.name.clone(), value_json(v));
        }
    }
    Json::Object(m)
}
