//! Values and rows as JSON, as ringrep's envelope, record keys and partition keys write them.

use serde_json::{json, Value as Json};

use binlog_format::schema::TableDef;
use binlog_format::value::{format_datetime, DateTime, Value};

/// A value as JSON: integers as numbers, DECIMAL as a string (no precision lost), bytes as
/// lowercase hex, DATE `YYYY-MM-DD`, DATETIME `YYYY-MM-DD HH:MM:SS.ffffff`, TIMESTAMP as UTC
/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, TIME `[-]HH:MM:SS.ffffff`, BIT as its number, JSON
/// embedded as JSON, non-finite floats as strings.
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
        Value::Time(us) => json!(binlog_format::value::format_time(*us, 6)),
        Value::Bit(b) => json!(b),
    }
}

/// The columns at `positions` with `values`, as a JSON object (names sorted): the reference
/// [`write_columns`] is checked against.
#[cfg(test)]
pub(crate) fn columns_json(table: &TableDef, positions: &[usize], values: &[Value]) -> Json {
    let mut m = serde_json::Map::new();
    for (&pos, v) in positions.iter().zip(values) {
        if let Some(c) = table.columns.get(pos) {
            m.insert(c.name.clone(), value_json(v));
        }
    }
    Json::Object(m)
}

/// Appends `text` as a JSON string.
pub(crate) fn write_str(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(&mut *out, text).expect("JSON into memory cannot fail");
}

/// Appends `value_json(v)` as compact JSON text, byte for byte as `value_json(v).to_string()`
/// writes it; the common kinds (numbers, text, null) without building a JSON tree, since the
/// relay writes several for every change record.
pub(crate) fn write_value(out: &mut Vec<u8>, v: &Value) {
    use std::io::Write as _;
    let written = match v {
        Value::Null => out.write_all(b"null"),
        Value::Int(i) => write!(out, "{i}"),
        Value::UInt(u) => write!(out, "{u}"),
        Value::Decimal(s) | Value::Text(s) => {
            write_str(out, s);
            Ok(())
        }
        other => {
            serde_json::to_writer(&mut *out, &value_json(other)).expect("JSON into memory");
            Ok(())
        }
    };
    written.expect("writing into memory cannot fail");
}

/// Appends the JSON object of the columns at `positions` with `values`, byte for byte as
/// `columns_json(..).to_string()` writes it (names sorted): record keys and partitions are
/// made of these bytes, so they must not change with the way they are written.
pub(crate) fn write_columns(
    out: &mut Vec<u8>,
    table: &TableDef,
    positions: impl IntoIterator<Item = usize>,
    values: &[Value],
) {
    let mut named: Vec<(&str, &Value)> = positions
        .into_iter()
        .zip(values)
        .filter_map(|(pos, v)| table.columns.get(pos).map(|c| (c.name.as_str(), v)))
        .collect();
    // A name given twice keeps its last value, as a map insert would.
    named.reverse();
    named.sort_by(|a, b| a.0.cmp(b.0));
    named.dedup_by(|later, first| later.0 == first.0);
    out.push(b'{');
    for (i, (name, v)) in named.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, name);
        out.push(b':');
        write_value(out, v);
    }
    out.push(b'}');
}

/// A JSON object being appended to a buffer: each [`Object::field`] writes its name and
/// hands the buffer back for the value. The caller gives names in the order to write them
/// (sorted, where the bytes must equal a serde_json map's).
pub(crate) struct Object<'a> {
    out: &'a mut Vec<u8>,
    empty: bool,
}

impl<'a> Object<'a> {
    /// Opens an object.
    pub(crate) fn open(out: &'a mut Vec<u8>) -> Object<'a> {
        out.push(b'{');
        Object { out, empty: true }
    }

    /// Writes `name` and returns the buffer to write its value into.
    pub(crate) fn field(&mut self, name: &str) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        write_str(self.out, name);
        self.out.push(b':');
        self.out
    }

    /// A field holding a number.
    pub(crate) fn number(&mut self, name: &str, n: impl std::fmt::Display) {
        use std::io::Write as _;
        write!(self.field(name), "{n}").expect("writing into memory cannot fail");
    }

    /// A field holding a string.
    pub(crate) fn string(&mut self, name: &str, text: &str) {
        write_str(self.field(name), text);
    }

    /// Closes the object.
    pub(crate) fn close(self) {
        self.out.push(b'}');
    }
}
