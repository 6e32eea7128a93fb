//! What a result, an error and a parameter look like on the MySQL wire.
//!
//! Each result column gets the MySQL type of the table column behind it (or, for an
//! expression, the type all its values share), and each value is written in that type's text
//! or binary form. A column whose values do not all fit its declared type is sent as text, so
//! a result can always be written.

use binlog_format::schema::{ColumnType, IntWidth};
use binlog_format::value::DateTime;
use binlog_format::Value;

use ringrep_engine::error::Error;
use ringrep_protocol::{self as protocol, put_lenenc_str, ColumnDef, Cursor};
use ringrep_sql::ResultSet;

/// `MYSQL_TYPE_*` numbers.
pub(crate) mod ty {
    pub(crate) const TINY: u8 = 1;
    pub(crate) const SHORT: u8 = 2;
    pub(crate) const LONG: u8 = 3;
    pub(crate) const FLOAT: u8 = 4;
    pub(crate) const DOUBLE: u8 = 5;
    pub(crate) const NULL: u8 = 6;
    pub(crate) const TIMESTAMP: u8 = 7;
    pub(crate) const LONGLONG: u8 = 8;
    pub(crate) const INT24: u8 = 9;
    pub(crate) const DATE: u8 = 10;
    pub(crate) const TIME: u8 = 11;
    pub(crate) const DATETIME: u8 = 12;
    pub(crate) const YEAR: u8 = 13;
    pub(crate) const NEWDATE: u8 = 14;
    pub(crate) const BIT: u8 = 16;
    pub(crate) const JSON: u8 = 245;
    pub(crate) const NEWDECIMAL: u8 = 246;
    pub(crate) const BLOB: u8 = 252;
    pub(crate) const VAR_STRING: u8 = 253;
    pub(crate) const STRING: u8 = 254;
}

/// Column flags (`*_FLAG`).
mod flag {
    pub(crate) const UNSIGNED: u16 = 32;
    pub(crate) const ZEROFILL: u16 = 64;
    pub(crate) const BINARY: u16 = 128;
    pub(crate) const ENUM: u16 = 256;
    pub(crate) const SET: u16 = 2048;
}

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
    /// TIME: 0, 8 or 12 bytes in the binary protocol.
    Time,
    /// BIT(width): its `ceil(width / 8)` bytes, big endian, in both protocols.
    Bit {
        width: u8,
    },
    /// Everything else: text (or raw bytes) as a length-prefixed string.
    Text,
}

/// The wire columns of a result set and how each is encoded.
pub(crate) fn columns(rs: &ResultSet) -> (Vec<ColumnDef>, Vec<Encoding>) {
    let mut cols = Vec::with_capacity(rs.columns.len());
    let mut encs = Vec::with_capacity(rs.columns.len());
    for (i, name) in rs.columns.iter().enumerate() {
        let declared = rs.types.get(i).and_then(Option::as_ref);
        let (mut coltype, mut flags, mut enc) = match declared {
            Some(t) => declared_type(t),
            None => inferred_type(rs.rows.iter().map(|r| &r[i])),
        };
        if !rs.rows.iter().all(|r| fits(&r[i], enc)) {
            (coltype, flags, enc) = (ty::VAR_STRING, 0, Encoding::Text);
        }
        let (length, decimals) = declared.map_or((1024, 0), display_size);
        let binary = flags & flag::BINARY != 0 || !matches!(enc, Encoding::Text);
        cols.push(ColumnDef {
            name: name.clone(),
            ty: coltype,
            flags,
            charset: if binary {
                protocol::BINARY
            } else {
                protocol::UTF8MB4_GENERAL_CI
            },
            length,
            decimals: match coltype {
                ty::FLOAT | ty::DOUBLE if declared.is_none() => 31,
                _ => decimals,
            },
        });
        encs.push(enc);
    }
    (cols, encs)
}

/// A declared column's display length and decimals, as MySQL describes them.
fn display_size(t: &ColumnType) -> (u32, u8) {
    match t {
        ColumnType::Integer { width, .. } => match width {
            IntWidth::Tiny => (4, 0),
            // Connector/J reads a TINYINT of length 1 as a boolean (tinyInt1isBit).
            IntWidth::Bool => (1, 0),
            IntWidth::Small => (6, 0),
            IntWidth::Medium => (9, 0),
            IntWidth::Int => (11, 0),
            IntWidth::Big => (20, 0),
        },
        ColumnType::Decimal { precision, scale } => (u32::from(*precision) + 2, *scale),
        // MySQL's length: the digits, the point when there is a fraction, no sign.
        ColumnType::UnsignedDecimal { precision, scale } => {
            (u32::from(*precision) + u32::from(*scale > 0), *scale)
        }
        ColumnType::Float => (12, 31),
        ColumnType::Double => (22, 31),
        ColumnType::Real {
            digits: Some((m, d)),
            ..
        } => (u32::from(*m), *d),
        ColumnType::Real { double, .. } => (if *double { 22 } else { 12 }, 31),
        ColumnType::Char { len } | ColumnType::VarChar { len } => (len.saturating_mul(4), 0),
        ColumnType::Binary { len } | ColumnType::VarBinary { len } => (*len, 0),
        ColumnType::Text { .. } | ColumnType::Blob { .. } => (65_535, 0),
        ColumnType::Json => (u32::MAX, 0),
        ColumnType::Enum { .. } | ColumnType::Set { .. } => (
            u32::try_from(t.member_chars().unwrap_or(0).saturating_mul(4)).unwrap_or(u32::MAX),
            0,
        ),
        ColumnType::Date => (10, 0),
        ColumnType::Year => (4, 0),
        ColumnType::DateTime { fsp } | ColumnType::Timestamp { fsp } => {
            (19 + if *fsp > 0 { u32::from(*fsp) + 1 } else { 0 }, *fsp)
        }
        // `-838:59:59` and the fraction with its point.
        ColumnType::Time { fsp } => (10 + if *fsp > 0 { u32::from(*fsp) + 1 } else { 0 }, *fsp),
        ColumnType::Bit { width } => (u32::from(*width), 0),
    }
}

fn declared_type(t: &ColumnType) -> (u8, u16, Encoding) {
    let text = |wt| (wt, 0, Encoding::Text);
    let binary = |wt| (wt, flag::BINARY, Encoding::Text);
    match t {
        ColumnType::Integer { width, unsigned } => {
            let (wt, bytes) = match width {
                IntWidth::Tiny | IntWidth::Bool => (ty::TINY, 1),
                IntWidth::Small => (ty::SHORT, 2),
                IntWidth::Medium => (ty::INT24, 4),
                IntWidth::Int => (ty::LONG, 4),
                IntWidth::Big => (ty::LONGLONG, 8),
            };
            let flags = if *unsigned { flag::UNSIGNED } else { 0 };
            (
                wt,
                flags,
                Encoding::Int {
                    bytes,
                    unsigned: *unsigned,
                },
            )
        }
        ColumnType::Decimal { .. } => text(ty::NEWDECIMAL),
        ColumnType::UnsignedDecimal { .. } => (ty::NEWDECIMAL, flag::UNSIGNED, Encoding::Text),
        ColumnType::Float => (ty::FLOAT, 0, Encoding::Float),
        ColumnType::Double => (ty::DOUBLE, 0, Encoding::Double),
        ColumnType::Real {
            double, unsigned, ..
        } => {
            let flags = if *unsigned { flag::UNSIGNED } else { 0 };
            if *double {
                (ty::DOUBLE, flags, Encoding::Double)
            } else {
                (ty::FLOAT, flags, Encoding::Float)
            }
        }
        ColumnType::Char { .. } => text(ty::STRING),
        ColumnType::VarChar { .. } => text(ty::VAR_STRING),
        ColumnType::Binary { .. } => binary(ty::STRING),
        ColumnType::VarBinary { .. } => binary(ty::VAR_STRING),
        ColumnType::Text { .. } => text(ty::BLOB),
        ColumnType::Blob { .. } => binary(ty::BLOB),
        ColumnType::Json => text(ty::JSON),
        // MySQL describes an ENUM as a CHAR with ENUM_FLAG.
        ColumnType::Enum { .. } => (ty::STRING, flag::ENUM, Encoding::Text),
        ColumnType::Set { .. } => (ty::STRING, flag::SET, Encoding::Text),
        // As MySQL describes a YEAR: unsigned and zero-filled, two bytes in the binary
        // protocol.
        ColumnType::Year => (
            ty::YEAR,
            flag::UNSIGNED | flag::ZEROFILL,
            Encoding::Int {
                bytes: 2,
                unsigned: false,
            },
        ),
        ColumnType::Date => (ty::DATE, 0, Encoding::Date),
        ColumnType::DateTime { .. } => (ty::DATETIME, 0, Encoding::DateTime),
        ColumnType::Timestamp { .. } => (ty::TIMESTAMP, 0, Encoding::DateTime),
        ColumnType::Time { .. } => (ty::TIME, 0, Encoding::Time),
        // As MySQL describes a BIT: unsigned, in the binary character set, without
        // BINARY_FLAG (Connector/J reads a BIT(1) with that flag as bytes, not a boolean).
        ColumnType::Bit { width } => (ty::BIT, flag::UNSIGNED, Encoding::Bit { width: *width }),
    }
}

/// An expression column: the type every non-NULL value has, else text.
fn inferred_type<'a>(values: impl Iterator<Item = &'a Value>) -> (u8, u16, Encoding) {
    let mut kind: Option<std::mem::Discriminant<Value>> = None;
    let mut sample = &Value::Null;
    for v in values.filter(|v| !v.is_null()) {
        let d = std::mem::discriminant(v);
        if kind.is_some_and(|k| k != d) {
            return (ty::VAR_STRING, 0, Encoding::Text);
        }
        kind = Some(d);
        sample = v;
    }
    match sample {
        Value::Int(_) => (
            ty::LONGLONG,
            0,
            Encoding::Int {
                bytes: 8,
                unsigned: false,
            },
        ),
        Value::UInt(_) => (
            ty::LONGLONG,
            flag::UNSIGNED,
            Encoding::Int {
                bytes: 8,
                unsigned: true,
            },
        ),
        Value::Float(_) => (ty::FLOAT, 0, Encoding::Float),
        Value::Double(_) => (ty::DOUBLE, 0, Encoding::Double),
        Value::Decimal(_) => (ty::NEWDECIMAL, 0, Encoding::Text),
        Value::Date(_) => (ty::DATE, 0, Encoding::Date),
        Value::DateTime(_) => (ty::DATETIME, 0, Encoding::DateTime),
        Value::Timestamp(_) => (ty::TIMESTAMP, 0, Encoding::DateTime),
        Value::Time(_) => (ty::TIME, 0, Encoding::Time),
        // An expression's BIT (IFNULL(b, b)): as wide as its values need.
        Value::Bit(_) => (ty::BIT, flag::UNSIGNED, Encoding::Bit { width: 64 }),
        Value::Bytes(_) => (ty::BLOB, flag::BINARY, Encoding::Text),
        Value::Json(_) => (ty::JSON, 0, Encoding::Text),
        // All NULL (MySQL says VAR_STRING too) or text.
        Value::Null | Value::Text(_) => (ty::VAR_STRING, 0, Encoding::Text),
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
        (Value::Time(_), Encoding::Time) | (Value::Bit(_), Encoding::Bit { .. }) => true,
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
            // A BIT's bytes, big endian, as many as its width needs.
            Value::Bit(b) => {
                let width = match self.encoding {
                    Encoding::Bit { width: 64 } | Encoding::Text => {
                        (64 - b.leading_zeros()).max(1) as u8
                    }
                    Encoding::Bit { width } => width,
                    _ => 64,
                };
                binlog_format::value::bit_bytes(*b, width)
            }
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

impl Cell<'_> {
    /// Appends the value in the text protocol: a length-encoded string, `0xfb` for NULL.
    pub(crate) fn put_text(&self, out: &mut Vec<u8>) {
        if self.value.is_null() {
            out.push(0xfb);
        } else {
            put_lenenc_str(out, &self.text_bytes());
        }
    }

    /// Appends a non-NULL value in the binary protocol (NULLs are in the row's bitmap).
    pub(crate) fn put_binary(&self, out: &mut Vec<u8>) {
        match (self.encoding, self.value) {
            (Encoding::Int { bytes, .. }, Value::Int(n)) => {
                out.extend_from_slice(&n.to_le_bytes()[..bytes as usize])
            }
            (Encoding::Int { bytes, .. }, Value::UInt(n)) => {
                out.extend_from_slice(&n.to_le_bytes()[..bytes as usize])
            }
            (Encoding::Float, Value::Float(f)) => out.extend_from_slice(&f.to_le_bytes()),
            (Encoding::Double, Value::Double(f)) => out.extend_from_slice(&f.to_le_bytes()),
            (Encoding::Date, Value::Date(d)) => {
                out.push(4);
                out.extend_from_slice(&d.year.to_le_bytes());
                out.extend_from_slice(&[d.month, d.day]);
            }
            (Encoding::DateTime, _) => match self.datetime() {
                Some(dt) => {
                    out.push(11);
                    out.extend_from_slice(&dt.date.year.to_le_bytes());
                    out.extend_from_slice(&[
                        dt.date.month,
                        dt.date.day,
                        dt.hour,
                        dt.minute,
                        dt.second,
                    ]);
                    out.extend_from_slice(&dt.micros.to_le_bytes());
                }
                None => put_lenenc_str(out, &self.text_bytes()),
            },
            // Length (0, 8 or 12), sign, days, hours, minutes, seconds, microseconds.
            (Encoding::Time, Value::Time(us)) => {
                let a = us.unsigned_abs();
                let (secs, micros) = (a / 1_000_000, (a % 1_000_000) as u32);
                if a == 0 {
                    out.push(0);
                    return;
                }
                out.push(if micros == 0 { 8 } else { 12 });
                out.push(u8::from(*us < 0));
                out.extend_from_slice(&((secs / 86_400) as u32).to_le_bytes());
                out.extend_from_slice(&[
                    (secs % 86_400 / 3600) as u8,
                    (secs % 3600 / 60) as u8,
                    (secs % 60) as u8,
                ]);
                if micros != 0 {
                    out.extend_from_slice(&micros.to_le_bytes());
                }
            }
            _ => put_lenenc_str(out, &self.text_bytes()),
        }
    }
}

/// Our error as MySQL sends it. MySQL's own codes go out unchanged; NDB's (940, 4xxx) arrive
/// wrapped as MySQL wraps them, in error 1296.
pub(crate) fn error(e: &Error) -> Vec<u8> {
    if e.code >= 1000 {
        protocol::err(e.code, e.sqlstate, &e.message)
    } else {
        protocol::err(
            1296,
            "HY000",
            &format!("Got error {} '{}' from NDBCLUSTER", e.code, e.message),
        )
    }
}

/// The parameters of a COM_STMT_EXECUTE after its statement id, flags and iteration count:
/// `null_bitmap [new_params_bound:1 (type:1 flags:1)*n] values`. `types` keeps the types a
/// client sent with an earlier execution (it may send them only once); `long_data` holds what
/// COM_STMT_SEND_LONG_DATA sent for each parameter.
pub(crate) fn params(
    c: &mut Cursor<'_>,
    count: usize,
    types: &mut Vec<(u8, bool)>,
    long_data: &mut std::collections::HashMap<u16, Vec<u8>>,
) -> std::io::Result<Vec<Value>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let bitmap = c.take(count.div_ceil(8))?;
    if c.u8()? == 1 {
        types.clear();
        for _ in 0..count {
            let t = c.u8()?;
            let f = c.u8()?;
            types.push((t, f & 0x80 != 0));
        }
    }
    if types.len() != count {
        return Err(protocol::malformed());
    }
    let mut out = Vec::with_capacity(count);
    for (i, &(t, unsigned)) in types.iter().enumerate() {
        if let Some(data) = long_data.remove(&(i as u16)) {
            out.push(bytes_value(data));
            continue;
        }
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            out.push(Value::Null);
            continue;
        }
        let int = |n: i64, u: u64| {
            if unsigned {
                Value::UInt(u)
            } else {
                Value::Int(n)
            }
        };
        out.push(match t {
            ty::NULL => Value::Null,
            ty::TINY => {
                let b = c.u8()?;
                int(i64::from(b as i8), u64::from(b))
            }
            ty::SHORT | ty::YEAR => {
                let v = c.u16()?;
                int(i64::from(v as i16), u64::from(v))
            }
            ty::LONG | ty::INT24 => {
                let v = c.u32()?;
                int(i64::from(v as i32), u64::from(v))
            }
            ty::LONGLONG => {
                let v = c.u64()?;
                int(v as i64, v)
            }
            ty::FLOAT => Value::Double(f64::from(f32::from_bits(c.u32()?))),
            ty::DOUBLE => Value::Double(f64::from_bits(c.u64()?)),
            ty::DATE | ty::DATETIME | ty::TIMESTAMP | ty::NEWDATE => {
                let n = c.u8()? as usize;
                Value::Text(binary_datetime_text(c.take(n)?))
            }
            ty::TIME => {
                let n = c.u8()? as usize;
                Value::Time(binary_time_us(c.take(n)?))
            }
            _ => bytes_value(c.lenenc_bytes()?.to_vec()),
        });
    }
    Ok(out)
}

/// A string parameter: text when it is UTF-8, bytes otherwise.
fn bytes_value(b: Vec<u8>) -> Value {
    match String::from_utf8(b) {
        Ok(s) => Value::Text(s),
        Err(e) => Value::Bytes(e.into_bytes()),
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

/// The binary protocol's TIME (0, 8 or 12 bytes) as signed microseconds (a time past
/// TIME's range is refused where it is stored, as any other value would be).
fn binary_time_us(b: &[u8]) -> i64 {
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let days = i64::from(u32::from_le_bytes([at(1), at(2), at(3), at(4)]));
    let secs = ((days * 24 + i64::from(at(5))) * 60 + i64::from(at(6))) * 60 + i64::from(at(7));
    let micros = if b.len() >= 12 {
        i64::from(u32::from_le_bytes([at(8), at(9), at(10), at(11)]))
    } else {
        0
    };
    let us = secs.saturating_mul(1_000_000).saturating_add(micros);
    if at(0) == 1 {
        -us
    } else {
        us
    }
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
        assert_eq!(cols[0].ty, ty::LONG);
        assert!(cols[0].flags & flag::UNSIGNED != 0);
        assert_eq!(
            encs[0],
            Encoding::Int {
                bytes: 4,
                unsigned: true
            }
        );
        assert_eq!(cols[1].ty, ty::VAR_STRING);
        assert_eq!(cols[1].charset, protocol::UTF8MB4_GENERAL_CI);
        assert_eq!(cols[2].ty, ty::DATETIME);
        assert_eq!((cols[2].length, cols[2].decimals), (26, 6));
    }

    /// As MySQL describes them: DECIMAL(10,2) UNSIGNED 11 long (no sign), FLOAT(7,4) 7 long
    /// with 4 decimals, both flagged UNSIGNED when declared so.
    #[test]
    fn unsigned_decimals_and_sized_floats_describe_as_mysql() {
        let r = rs(
            vec![
                Some(ColumnType::UnsignedDecimal {
                    precision: 10,
                    scale: 2,
                }),
                Some(ColumnType::Real {
                    double: false,
                    digits: Some((7, 4)),
                    unsigned: true,
                }),
                Some(ColumnType::Real {
                    double: true,
                    digits: None,
                    unsigned: false,
                }),
            ],
            vec![vec![
                Value::Decimal("1.50".into()),
                Value::Float(1.5),
                Value::Double(2.5),
            ]],
        );
        let (cols, encs) = columns(&r);
        let described: Vec<_> = cols
            .iter()
            .map(|c| (c.ty, c.flags & flag::UNSIGNED != 0, c.length, c.decimals))
            .collect();
        assert_eq!(
            described,
            [
                (ty::NEWDECIMAL, true, 11, 2),
                (ty::FLOAT, true, 7, 4),
                (ty::DOUBLE, false, 22, 31)
            ]
        );
        assert_eq!(encs, [Encoding::Text, Encoding::Float, Encoding::Double]);
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
        assert_eq!((cols[0].ty, encs[0]), (ty::VAR_STRING, Encoding::Text));
        assert_eq!(cols[1].ty, ty::LONGLONG);
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
        .put_binary(&mut out);
        assert_eq!(out, (-2i32).to_le_bytes());
        out.clear();
        let v = Value::Bytes(vec![0xff, 0]);
        Cell {
            value: &v,
            encoding: Encoding::Text,
            rs: &r,
            column: 0,
        }
        .put_text(&mut out);
        assert_eq!(out, [2, 0xff, 0]);
    }

    #[test]
    fn ndb_errors_are_wrapped_as_mysql_does() {
        let p = error(&Error::direct_write());
        assert_eq!(u16::from_le_bytes([p[1], p[2]]), 1296);
        let msg = String::from_utf8_lossy(&p[9..]).into_owned();
        assert!(msg.starts_with("Got error 940 'Direct write"), "{msg}");
        let p = error(&Error::deadlock());
        assert_eq!(u16::from_le_bytes([p[1], p[2]]), 1213);
        assert_eq!(&p[3..9], b"#40001");
    }

    #[test]
    fn binary_dates_as_text() {
        assert_eq!(binary_datetime_text(&[0xe8, 0x07, 3, 9]), "2024-03-09");
        assert_eq!(
            binary_datetime_text(&[0xe8, 0x07, 3, 9, 1, 2, 3, 0x40, 0xe2, 0x01, 0]),
            "2024-03-09 01:02:03.123456"
        );
        assert_eq!(
            binary_time_us(&[1, 1, 0, 0, 0, 2, 3, 4]),
            -((26 * 60 + 3) * 60 + 4) * 1_000_000
        );
        assert_eq!(
            binary_time_us(&[0, 0, 0, 0, 0, 0, 0, 1, 0x20, 0xa1, 0x07, 0]),
            1_500_000
        );
        assert_eq!(binary_time_us(&[]), 0);
    }

    /// TIME and BIT columns as MySQL 8 sends them: types 11 and 16, TIME's 8- or 12-byte
    /// binary form (0 bytes for zero), BIT's bytes, big endian, in both protocols.
    #[test]
    fn time_and_bit_columns() {
        let r = rs(
            vec![
                Some(ColumnType::Time { fsp: 3 }),
                Some(ColumnType::Bit { width: 10 }),
            ],
            vec![vec![Value::Time(-93_784_500_000), Value::Bit(0x201)]],
        );
        let (cols, encs) = columns(&r);
        assert_eq!(
            (cols[0].ty, cols[0].length, cols[0].decimals),
            (ty::TIME, 14, 3)
        );
        assert_eq!((cols[1].ty, cols[1].length), (ty::BIT, 10));
        assert_eq!(cols[1].flags, flag::UNSIGNED);
        assert_eq!(cols[1].charset, protocol::BINARY);
        let cell = |i: usize| Cell {
            value: &r.rows[0][i],
            encoding: encs[i],
            rs: &r,
            column: i,
        };
        let mut out = Vec::new();
        cell(0).put_binary(&mut out);
        // -1 day 02:03:04.5
        assert_eq!(out, [12, 1, 1, 0, 0, 0, 2, 3, 4, 0x20, 0xa1, 0x07, 0]);
        out.clear();
        cell(0).put_text(&mut out);
        assert_eq!(out, [&[13u8][..], b"-26:03:04.500"].concat());
        out.clear();
        cell(1).put_binary(&mut out);
        assert_eq!(out, [2, 0x02, 0x01]);
        out.clear();
        cell(1).put_text(&mut out);
        assert_eq!(out, [2, 0x02, 0x01]);
        let zero = Value::Time(0);
        out.clear();
        Cell {
            value: &zero,
            encoding: Encoding::Time,
            rs: &r,
            column: 0,
        }
        .put_binary(&mut out);
        assert_eq!(out, [0]);
    }

    /// COM_STMT_EXECUTE parameters: types sent once and kept, NULLs from the bitmap, signed
    /// and unsigned integers, doubles, strings and binary dates.
    #[test]
    fn execute_parameters() {
        let mut p = vec![0b0000_0010u8, 1];
        for (t, f) in [
            (ty::LONGLONG, 0u8),
            (ty::LONG, 0),
            (ty::TINY, 0x80),
            (ty::DOUBLE, 0),
            (ty::VAR_STRING, 0),
            (ty::DATE, 0),
        ] {
            p.extend_from_slice(&[t, f]);
        }
        p.extend_from_slice(&(-5i64).to_le_bytes());
        p.push(200);
        p.extend_from_slice(&1.5f64.to_le_bytes());
        p.extend_from_slice(&[2, b'h', b'i']);
        p.extend_from_slice(&[4, 0xe8, 0x07, 3, 9]);
        let mut types = Vec::new();
        let mut long = std::collections::HashMap::new();
        let v = params(&mut Cursor::new(&p), 6, &mut types, &mut long).expect("params");
        assert_eq!(
            v,
            vec![
                Value::Int(-5),
                Value::Null,
                Value::UInt(200),
                Value::Double(1.5),
                Value::Text("hi".into()),
                Value::Text("2024-03-09".into()),
            ]
        );
        // The next execution leaves the types out (new_params_bound = 0).
        let mut p = vec![0b0011_1110u8, 0];
        p.extend_from_slice(&7i64.to_le_bytes());
        let v = params(&mut Cursor::new(&p), 6, &mut types, &mut long).expect("params");
        assert_eq!(v[0], Value::Int(7));
        // A truncated packet is an error, not a panic.
        assert!(params(&mut Cursor::new(&[0, 1, 8]), 1, &mut types, &mut long).is_err());
    }
}
