//! What a result, an error and a parameter look like on the MySQL wire.
//!
//! Each result column gets the MySQL type of the table column behind it (or, for an
//! expression, the type all its values share), and each value is written in that type's text
//! or binary form. A column whose values do not all fit its declared type is sent as text, so
//! a result can always be written.

use std::io::{self, Write};

use binlog_format::schema::{ColumnType, IntWidth};
use binlog_format::value::DateTime;
use binlog_format::Value;
use opensrv_mysql::{Column, ColumnFlags, ColumnType as Wt, ErrorKind, ToMysqlValue, ValueInner};

use ringrep_engine::error::Error;
use ringrep_sql::ResultSet;

/// How one result column travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// An integer of `bytes` width (1, 2, 4 or 8) in the binary protocol.
    Int {
        bytes: u8,
        unsigned: bool,
    },
    Float,
    Double,
    Date,
    /// DATETIME, and TIMESTAMP shown in the session's time zone.
    DateTime,
    /// Everything else: text (or raw bytes) as a length-prefixed string.
    Text,
}

/// The wire columns of a result set and how each is encoded.
pub(crate) fn columns(rs: &ResultSet) -> (Vec<Column>, Vec<Encoding>) {
    let mut cols = Vec::with_capacity(rs.columns.len());
    let mut encs = Vec::with_capacity(rs.columns.len());
    for (i, name) in rs.columns.iter().enumerate() {
        let declared = rs.types.get(i).and_then(Option::as_ref);
        let (mut coltype, mut flags, mut enc) = match declared {
            Some(t) => declared_type(t),
            None => inferred_type(rs.rows.iter().map(|r| &r[i])),
        };
        if !rs.rows.iter().all(|r| fits(&r[i], enc)) {
            (coltype, flags, enc) = (
                Wt::MYSQL_TYPE_VAR_STRING,
                ColumnFlags::empty(),
                Encoding::Text,
            );
        }
        cols.push(Column {
            table: String::new(),
            column: name.clone(),
            coltype,
            colflags: flags,
        });
        encs.push(enc);
    }
    (cols, encs)
}

fn declared_type(t: &ColumnType) -> (Wt, ColumnFlags, Encoding) {
    let text = |wt| (wt, ColumnFlags::empty(), Encoding::Text);
    let binary = |wt| (wt, ColumnFlags::BINARY_FLAG, Encoding::Text);
    match t {
        ColumnType::Integer { width, unsigned } => {
            let (wt, bytes) = match width {
                IntWidth::Tiny => (Wt::MYSQL_TYPE_TINY, 1),
                IntWidth::Small => (Wt::MYSQL_TYPE_SHORT, 2),
                IntWidth::Medium => (Wt::MYSQL_TYPE_INT24, 4),
                IntWidth::Int => (Wt::MYSQL_TYPE_LONG, 4),
                IntWidth::Big => (Wt::MYSQL_TYPE_LONGLONG, 8),
            };
            let flags = if *unsigned {
                ColumnFlags::UNSIGNED_FLAG
            } else {
                ColumnFlags::empty()
            };
            (
                wt,
                flags,
                Encoding::Int {
                    bytes,
                    unsigned: *unsigned,
                },
            )
        }
        ColumnType::Decimal { .. } => text(Wt::MYSQL_TYPE_NEWDECIMAL),
        ColumnType::Float => (Wt::MYSQL_TYPE_FLOAT, ColumnFlags::empty(), Encoding::Float),
        ColumnType::Double => (
            Wt::MYSQL_TYPE_DOUBLE,
            ColumnFlags::empty(),
            Encoding::Double,
        ),
        ColumnType::Char { .. } => text(Wt::MYSQL_TYPE_STRING),
        ColumnType::VarChar { .. } => text(Wt::MYSQL_TYPE_VAR_STRING),
        ColumnType::Binary { .. } => binary(Wt::MYSQL_TYPE_STRING),
        ColumnType::VarBinary { .. } => binary(Wt::MYSQL_TYPE_VAR_STRING),
        ColumnType::Text { .. } => text(Wt::MYSQL_TYPE_BLOB),
        ColumnType::Blob { .. } => binary(Wt::MYSQL_TYPE_BLOB),
        ColumnType::Json => text(Wt::MYSQL_TYPE_JSON),
        ColumnType::Date => (Wt::MYSQL_TYPE_DATE, ColumnFlags::empty(), Encoding::Date),
        ColumnType::DateTime { .. } => (
            Wt::MYSQL_TYPE_DATETIME,
            ColumnFlags::empty(),
            Encoding::DateTime,
        ),
        ColumnType::Timestamp { .. } => (
            Wt::MYSQL_TYPE_TIMESTAMP,
            ColumnFlags::empty(),
            Encoding::DateTime,
        ),
    }
}

/// An expression column: the type every non-NULL value has, else text.
fn inferred_type<'a>(values: impl Iterator<Item = &'a Value>) -> (Wt, ColumnFlags, Encoding) {
    let mut kind: Option<std::mem::Discriminant<Value>> = None;
    let mut sample = &Value::Null;
    for v in values.filter(|v| !v.is_null()) {
        let d = std::mem::discriminant(v);
        if kind.is_some_and(|k| k != d) {
            return (
                Wt::MYSQL_TYPE_VAR_STRING,
                ColumnFlags::empty(),
                Encoding::Text,
            );
        }
        kind = Some(d);
        sample = v;
    }
    match sample {
        Value::Int(_) => (
            Wt::MYSQL_TYPE_LONGLONG,
            ColumnFlags::empty(),
            Encoding::Int {
                bytes: 8,
                unsigned: false,
            },
        ),
        Value::UInt(_) => (
            Wt::MYSQL_TYPE_LONGLONG,
            ColumnFlags::UNSIGNED_FLAG,
            Encoding::Int {
                bytes: 8,
                unsigned: true,
            },
        ),
        Value::Float(_) => (Wt::MYSQL_TYPE_FLOAT, ColumnFlags::empty(), Encoding::Float),
        Value::Double(_) => (
            Wt::MYSQL_TYPE_DOUBLE,
            ColumnFlags::empty(),
            Encoding::Double,
        ),
        Value::Decimal(_) => (
            Wt::MYSQL_TYPE_NEWDECIMAL,
            ColumnFlags::empty(),
            Encoding::Text,
        ),
        Value::Date(_) => (Wt::MYSQL_TYPE_DATE, ColumnFlags::empty(), Encoding::Date),
        Value::DateTime(_) => (
            Wt::MYSQL_TYPE_DATETIME,
            ColumnFlags::empty(),
            Encoding::DateTime,
        ),
        Value::Timestamp(_) => (
            Wt::MYSQL_TYPE_TIMESTAMP,
            ColumnFlags::empty(),
            Encoding::DateTime,
        ),
        Value::Bytes(_) => (
            Wt::MYSQL_TYPE_BLOB,
            ColumnFlags::BINARY_FLAG,
            Encoding::Text,
        ),
        Value::Json(_) => (Wt::MYSQL_TYPE_JSON, ColumnFlags::empty(), Encoding::Text),
        // All NULL (MySQL says VAR_STRING too) or text.
        Value::Null | Value::Text(_) => (
            Wt::MYSQL_TYPE_VAR_STRING,
            ColumnFlags::empty(),
            Encoding::Text,
        ),
    }
}

/// Whether a value can be written in an encoding's binary form.
fn fits(v: &Value, enc: Encoding) -> bool {
    match (v, enc) {
        (Value::Null, _) | (_, Encoding::Text) => true,
        (
            Value::Int(n),
            Encoding::Int {
                bytes,
                unsigned: false,
            },
        ) => match bytes {
            1 => i8::try_from(*n).is_ok(),
            2 => i16::try_from(*n).is_ok(),
            4 => i32::try_from(*n).is_ok(),
            _ => true,
        },
        (
            Value::UInt(n),
            Encoding::Int {
                bytes,
                unsigned: true,
            },
        ) => match bytes {
            1 => u8::try_from(*n).is_ok(),
            2 => u16::try_from(*n).is_ok(),
            4 => u32::try_from(*n).is_ok(),
            _ => true,
        },
        (Value::Float(_), Encoding::Float) | (Value::Double(_), Encoding::Double) => true,
        (Value::Date(_), Encoding::Date) => true,
        (Value::DateTime(_) | Value::Timestamp(_), Encoding::DateTime) => true,
        _ => false,
    }
}

/// One value on its way out, with what it needs to be written in either protocol.
pub(crate) struct Cell<'a> {
    pub value: &'a Value,
    pub encoding: Encoding,
    pub rs: &'a ResultSet,
    pub column: usize,
}

impl Cell<'_> {
    fn text_bytes(&self) -> Vec<u8> {
        match self.value {
            // Bytes go out as they are; the text form would replace invalid UTF-8.
            Value::Bytes(b) => b.clone(),
            v => self
                .rs
                .cell_text(v, self.column)
                .unwrap_or_default()
                .into_bytes(),
        }
    }

    fn datetime(&self) -> Option<DateTime> {
        match self.value {
            Value::DateTime(dt) => Some(*dt),
            Value::Timestamp(us) => Some(DateTime::from_epoch_micros(us + self.rs.tz * 1_000_000)),
            _ => None,
        }
    }
}

/// MySQL's length-encoded string.
fn write_lenenc<W: Write>(w: &mut W, b: &[u8]) -> io::Result<()> {
    let n = b.len() as u64;
    if n < 251 {
        w.write_all(&[n as u8])?;
    } else if n < 1 << 16 {
        w.write_all(&[0xfc])?;
        w.write_all(&(n as u16).to_le_bytes())?;
    } else if n < 1 << 24 {
        w.write_all(&[0xfd])?;
        w.write_all(&n.to_le_bytes()[..3])?;
    } else {
        w.write_all(&[0xfe])?;
        w.write_all(&n.to_le_bytes())?;
    }
    w.write_all(b)
}

impl ToMysqlValue for Cell<'_> {
    fn to_mysql_text<W: Write>(&self, w: &mut W) -> io::Result<()> {
        if self.value.is_null() {
            // NULL in a text row is the single byte 0xfb.
            return w.write_all(&[0xfb]);
        }
        write_lenenc(w, &self.text_bytes())
    }

    fn to_mysql_bin<W: Write>(&self, w: &mut W, _c: &Column) -> io::Result<()> {
        match (self.encoding, self.value) {
            (Encoding::Int { bytes, .. }, Value::Int(n)) => {
                w.write_all(&n.to_le_bytes()[..bytes as usize])
            }
            (Encoding::Int { bytes, .. }, Value::UInt(n)) => {
                w.write_all(&n.to_le_bytes()[..bytes as usize])
            }
            (Encoding::Float, Value::Float(f)) => w.write_all(&f.to_le_bytes()),
            (Encoding::Double, Value::Double(f)) => w.write_all(&f.to_le_bytes()),
            (Encoding::Date, Value::Date(d)) => {
                w.write_all(&[4])?;
                w.write_all(&d.year.to_le_bytes())?;
                w.write_all(&[d.month, d.day])
            }
            (Encoding::DateTime, _) => match self.datetime() {
                Some(dt) => {
                    w.write_all(&[11])?;
                    w.write_all(&dt.date.year.to_le_bytes())?;
                    w.write_all(&[dt.date.month, dt.date.day, dt.hour, dt.minute, dt.second])?;
                    w.write_all(&dt.micros.to_le_bytes())
                }
                None => write_lenenc(w, &self.text_bytes()),
            },
            _ => write_lenenc(w, &self.text_bytes()),
        }
    }

    fn is_null(&self) -> bool {
        self.value.is_null()
    }
}

/// Our error as MySQL sends it. MySQL's own codes go out unchanged; NDB's (940, 4xxx) arrive
/// wrapped as MySQL wraps them, in error 1296.
pub(crate) fn error(e: &Error) -> (ErrorKind, String) {
    if (1000..=1885).contains(&e.code) {
        (ErrorKind::from(e.code), e.message.clone())
    } else {
        (
            ErrorKind::ER_GET_ERRMSG,
            format!("Got error {} '{}' from NDBCLUSTER", e.code, e.message),
        )
    }
}

/// A prepared statement's parameter as a value for [`ringrep_sql::bind_placeholders`].
pub(crate) fn param(v: ValueInner<'_>) -> Value {
    match v {
        ValueInner::NULL => Value::Null,
        ValueInner::Int(n) => Value::Int(n),
        ValueInner::UInt(n) => Value::UInt(n),
        ValueInner::Double(f) => Value::Double(f),
        ValueInner::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => Value::Text(s.to_string()),
            Err(_) => Value::Bytes(b.to_vec()),
        },
        ValueInner::Date(b) | ValueInner::Datetime(b) => Value::Text(binary_datetime_text(b)),
        ValueInner::Time(b) => Value::Text(binary_time_text(b)),
    }
}

/// The binary protocol's DATE/DATETIME (0, 4, 7 or 11 bytes) as MySQL text.
fn binary_datetime_text(b: &[u8]) -> String {
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let year = u16::from_le_bytes([at(0), at(1)]);
    let mut s = format!("{year:04}-{:02}-{:02}", at(2), at(3));
    if b.len() >= 7 {
        s.push_str(&format!(" {:02}:{:02}:{:02}", at(4), at(5), at(6)));
    }
    if b.len() >= 11 {
        let us = u32::from_le_bytes([at(7), at(8), at(9), at(10)]);
        s.push_str(&format!(".{us:06}"));
    }
    s
}

/// The binary protocol's TIME (0, 8 or 12 bytes) as MySQL text.
fn binary_time_text(b: &[u8]) -> String {
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let neg = if at(0) == 1 { "-" } else { "" };
    let days = u32::from_le_bytes([at(1), at(2), at(3), at(4)]);
    let hours = days * 24 + u32::from(at(5));
    let mut s = format!("{neg}{hours:02}:{:02}:{:02}", at(6), at(7));
    if b.len() >= 12 {
        let us = u32::from_le_bytes([at(8), at(9), at(10), at(11)]);
        s.push_str(&format!(".{us:06}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(types: Vec<Option<ColumnType>>, rows: Vec<Vec<Value>>) -> ResultSet {
        ResultSet {
            columns: (0..types.len()).map(|i| format!("c{i}")).collect(),
            types,
            rows,
            tz: 0,
        }
    }

    #[test]
    fn declared_types_map_to_mysql_types() {
        let r = rs(
            vec![
                Some(ColumnType::Integer {
                    width: IntWidth::Int,
                    unsigned: true,
                }),
                Some(ColumnType::VarChar { len: 10 }),
                Some(ColumnType::DateTime { fsp: 6 }),
            ],
            vec![vec![Value::UInt(7), Value::Text("a".into()), Value::Null]],
        );
        let (cols, encs) = columns(&r);
        assert_eq!(cols[0].coltype, Wt::MYSQL_TYPE_LONG);
        assert!(cols[0].colflags.contains(ColumnFlags::UNSIGNED_FLAG));
        assert_eq!(
            encs[0],
            Encoding::Int {
                bytes: 4,
                unsigned: true
            }
        );
        assert_eq!(cols[1].coltype, Wt::MYSQL_TYPE_VAR_STRING);
        assert_eq!(cols[2].coltype, Wt::MYSQL_TYPE_DATETIME);
    }

    #[test]
    fn mixed_expression_columns_fall_back_to_text() {
        let r = rs(
            vec![None, None],
            vec![
                vec![Value::Int(1), Value::Int(1)],
                vec![Value::Text("x".into()), Value::Null],
            ],
        );
        let (cols, encs) = columns(&r);
        assert_eq!(
            (cols[0].coltype, encs[0]),
            (Wt::MYSQL_TYPE_VAR_STRING, Encoding::Text)
        );
        assert_eq!(cols[1].coltype, Wt::MYSQL_TYPE_LONGLONG);
    }

    #[test]
    fn a_value_outside_its_declared_type_sends_the_column_as_text() {
        let r = rs(
            vec![Some(ColumnType::Integer {
                width: IntWidth::Tiny,
                unsigned: false,
            })],
            vec![vec![Value::Int(1000)]],
        );
        assert_eq!(columns(&r).1[0], Encoding::Text);
    }

    #[test]
    fn binary_forms() {
        let r = rs(vec![None], vec![vec![Value::Null]]);
        let col = Column {
            table: String::new(),
            column: "c".into(),
            coltype: Wt::MYSQL_TYPE_LONG,
            colflags: ColumnFlags::empty(),
        };
        let mut out = Vec::new();
        let v = Value::Int(-2);
        Cell {
            value: &v,
            encoding: Encoding::Int {
                bytes: 4,
                unsigned: false,
            },
            rs: &r,
            column: 0,
        }
        .to_mysql_bin(&mut out, &col)
        .expect("write");
        assert_eq!(out, (-2i32).to_le_bytes());
        out.clear();
        let v = Value::Bytes(vec![0xff, 0]);
        Cell {
            value: &v,
            encoding: Encoding::Text,
            rs: &r,
            column: 0,
        }
        .to_mysql_text(&mut out)
        .expect("write");
        assert_eq!(out, [2, 0xff, 0]);
    }

    #[test]
    fn ndb_errors_are_wrapped_as_mysql_does() {
        let (kind, msg) = error(&Error::direct_write());
        assert_eq!(kind as u16, 1296);
        assert!(msg.starts_with("Got error 940 'Direct write"), "{msg}");
        let (kind, _) = error(&Error::deadlock());
        assert_eq!(kind as u16, 1213);
    }

    #[test]
    fn binary_dates_as_text() {
        assert_eq!(binary_datetime_text(&[0xe8, 0x07, 3, 9]), "2024-03-09");
        assert_eq!(
            binary_datetime_text(&[0xe8, 0x07, 3, 9, 1, 2, 3, 0x40, 0xe2, 0x01, 0]),
            "2024-03-09 01:02:03.123456"
        );
        assert_eq!(binary_time_text(&[1, 1, 0, 0, 0, 2, 3, 4]), "-26:03:04");
    }
}
