//! Columns and values as MySQL 8 writes them into row events: the type code and metadata a
//! TABLE_MAP event gives each column, and each value's bytes in a row image.

use binlog_format::schema::{ColumnType, IntWidth, LobSize};
use binlog_format::value::Value;

/// MySQL's column type codes (`enum_field_types`).
pub(crate) mod code {
    pub(crate) const TINY: u8 = 1;
    pub(crate) const SHORT: u8 = 2;
    pub(crate) const LONG: u8 = 3;
    pub(crate) const FLOAT: u8 = 4;
    pub(crate) const DOUBLE: u8 = 5;
    pub(crate) const LONGLONG: u8 = 8;
    pub(crate) const INT24: u8 = 9;
    pub(crate) const DATE: u8 = 10;
    pub(crate) const YEAR: u8 = 13;
    pub(crate) const BIT: u8 = 16;
    pub(crate) const VARCHAR: u8 = 15;
    pub(crate) const TIMESTAMP2: u8 = 17;
    pub(crate) const DATETIME2: u8 = 18;
    pub(crate) const TIME2: u8 = 19;
    pub(crate) const JSON: u8 = 245;
    pub(crate) const NEWDECIMAL: u8 = 246;
    pub(crate) const BLOB: u8 = 252;
    pub(crate) const ENUM: u8 = 247;
    pub(crate) const SET: u8 = 248;
    pub(crate) const STRING: u8 = 254;
}

/// utf8mb4_0900_ai_ci: the collation of every text column.
pub(crate) const UTF8MB4_0900_AI_CI: u64 = 255;
/// `binary`: the collation of BINARY, VARBINARY and BLOB columns.
pub(crate) const BINARY: u64 = 63;

/// Bytes per character of utf8mb4, by which MySQL sizes text columns in bytes.
const MB_MAX: u32 = 4;

/// The type code a TABLE_MAP event gives a column.
pub(crate) fn type_code(ty: &ColumnType) -> u8 {
    match ty {
        ColumnType::Integer { width, .. } => match width {
            IntWidth::Tiny | IntWidth::Bool => code::TINY,
            IntWidth::Small => code::SHORT,
            IntWidth::Medium => code::INT24,
            IntWidth::Int => code::LONG,
            IntWidth::Big => code::LONGLONG,
        },
        ColumnType::Decimal { .. } | ColumnType::UnsignedDecimal { .. } => code::NEWDECIMAL,
        ColumnType::Float | ColumnType::Real { double: false, .. } => code::FLOAT,
        ColumnType::Double | ColumnType::Real { double: true, .. } => code::DOUBLE,
        ColumnType::Char { .. }
        | ColumnType::Binary { .. }
        | ColumnType::Enum { .. }
        | ColumnType::Set { .. } => code::STRING,
        ColumnType::VarChar { .. } | ColumnType::VarBinary { .. } => code::VARCHAR,
        ColumnType::Text { .. } | ColumnType::Blob { .. } => code::BLOB,
        ColumnType::Json => code::JSON,
        ColumnType::Date => code::DATE,
        ColumnType::Year => code::YEAR,
        ColumnType::DateTime { .. } => code::DATETIME2,
        ColumnType::Timestamp { .. } => code::TIMESTAMP2,
        ColumnType::Time { .. } => code::TIME2,
        ColumnType::Bit { .. } => code::BIT,
    }
}

/// The longest value of a CHAR/BINARY or VARCHAR/VARBINARY column, in bytes.
fn byte_len(ty: &ColumnType) -> u32 {
    match ty {
        ColumnType::Char { len } | ColumnType::VarChar { len } => len.saturating_mul(MB_MAX),
        ColumnType::Binary { len } | ColumnType::VarBinary { len } => *len,
        _ => 0,
    }
}

fn lob_prefix(size: &LobSize) -> u8 {
    match size {
        LobSize::Tiny => 1,
        LobSize::Normal => 2,
        LobSize::Medium => 3,
        LobSize::Long => 4,
    }
}

/// The column's metadata bytes in a TABLE_MAP event.
pub(crate) fn metadata(ty: &ColumnType, out: &mut Vec<u8>) {
    match ty {
        ColumnType::Float | ColumnType::Real { double: false, .. } => out.push(4),
        ColumnType::Double | ColumnType::Real { double: true, .. } => out.push(8),
        ColumnType::Decimal { precision, scale }
        | ColumnType::UnsignedDecimal { precision, scale } => {
            out.extend_from_slice(&[*precision, *scale])
        }
        ColumnType::Char { .. } | ColumnType::Binary { .. } => {
            // The real type and the length, with the length's bits 8 and 9 folded into the
            // type byte (MySQL's encoding for lengths over 255).
            let len = byte_len(ty);
            out.push(code::STRING ^ (((len & 0x300) >> 4) as u8));
            out.push((len & 0xff) as u8);
        }
        ColumnType::VarChar { .. } | ColumnType::VarBinary { .. } => {
            out.extend_from_slice(&(byte_len(ty).min(u16::MAX as u32) as u16).to_le_bytes())
        }
        ColumnType::Text { size } | ColumnType::Blob { size } => out.push(lob_prefix(size)),
        ColumnType::Json => out.push(4),
        ColumnType::DateTime { fsp } | ColumnType::Timestamp { fsp } | ColumnType::Time { fsp } => {
            out.push(*fsp)
        }
        // The bits past the whole bytes, then the whole bytes (MySQL's Field_bit).
        ColumnType::Bit { width } => out.extend_from_slice(&[width % 8, width / 8]),
        // An ENUM is a STRING whose metadata names the real type and the index's bytes.
        ColumnType::Enum { values } => out.extend_from_slice(&[code::ENUM, enum_bytes(values)]),
        ColumnType::Set { values } => out.extend_from_slice(&[code::SET, set_bytes(values)]),
        ColumnType::Integer { .. } | ColumnType::Date | ColumnType::Year => {}
    }
}

/// The bytes of a SET's bitmap in a row image: 1, 2, 3, 4 or 8, as MySQL packs it.
fn set_bytes(values: &[String]) -> u8 {
    match values.len().div_ceil(8) {
        0 => 1,
        n @ 1..=4 => n as u8,
        _ => 8,
    }
}

/// The bytes of an ENUM's index in a row image: one up to 255 members, two beyond.
fn enum_bytes(values: &[String]) -> u8 {
    if values.len() > 255 {
        2
    } else {
        1
    }
}

/// The column's collation when it counts as a character column for the charset metadata
/// (strings and BLOB types, binary ones with `binary`).
pub(crate) fn collation(ty: &ColumnType) -> Option<u64> {
    match ty {
        ColumnType::Char { .. } | ColumnType::VarChar { .. } | ColumnType::Text { .. } => {
            Some(UTF8MB4_0900_AI_CI)
        }
        ColumnType::Binary { .. } | ColumnType::VarBinary { .. } | ColumnType::Blob { .. } => {
            Some(BINARY)
        }
        _ => None,
    }
}

fn int_of(v: &Value) -> i128 {
    match v {
        Value::Int(i) => *i as i128,
        Value::UInt(u) => *u as i128,
        Value::Float(f) => *f as i128,
        Value::Double(d) => *d as i128,
        Value::Decimal(s) | Value::Text(s) => s.trim().parse::<f64>().map_or(0, |f| f as i128),
        _ => 0,
    }
}

fn bytes_of(v: &Value) -> std::borrow::Cow<'_, [u8]> {
    match v {
        Value::Bytes(b) => std::borrow::Cow::Borrowed(b),
        Value::Text(s) | Value::Json(s) | Value::Decimal(s) => {
            std::borrow::Cow::Borrowed(s.as_bytes())
        }
        other => std::borrow::Cow::Owned(other.to_string().into_bytes()),
    }
}

fn length_prefix(len: usize, width: u8, out: &mut Vec<u8>) {
    out.extend_from_slice(&(len as u64).to_le_bytes()[..width as usize]);
}

/// Appends a non-NULL value of a column of type `ty` as a row image holds it.
pub(crate) fn value(ty: &ColumnType, v: &Value, out: &mut Vec<u8>) {
    match ty {
        ColumnType::Integer { width, .. } => {
            let n = int_of(v) as u64;
            let bytes = (width.bits() / 8) as usize;
            out.extend_from_slice(&n.to_le_bytes()[..bytes]);
        }
        ColumnType::Float | ColumnType::Real { double: false, .. } => {
            let f = match v {
                Value::Float(f) => *f,
                Value::Double(d) => *d as f32,
                other => int_of(other) as f32,
            };
            out.extend_from_slice(&f.to_le_bytes());
        }
        ColumnType::Double | ColumnType::Real { double: true, .. } => {
            let d = match v {
                Value::Double(d) => *d,
                Value::Float(f) => f64::from(*f),
                other => int_of(other) as f64,
            };
            out.extend_from_slice(&d.to_le_bytes());
        }
        ColumnType::Decimal { precision, scale }
        | ColumnType::UnsignedDecimal { precision, scale } => {
            let text = match v {
                Value::Decimal(s) | Value::Text(s) => s.clone(),
                other => other.to_string(),
            };
            decimal(&text, *precision, *scale, out);
        }
        ColumnType::Char { .. } | ColumnType::Binary { .. } => {
            let b = bytes_of(v);
            // CHAR values are stored without their trailing spaces, BINARY ones without
            // trailing zero bytes, as MySQL writes them.
            let pad = if matches!(ty, ColumnType::Char { .. }) {
                b' '
            } else {
                0
            };
            let end = b.iter().rposition(|&c| c != pad).map_or(0, |p| p + 1);
            let width = if byte_len(ty) > 255 { 2 } else { 1 };
            length_prefix(end, width, out);
            out.extend_from_slice(&b[..end]);
        }
        ColumnType::VarChar { .. } | ColumnType::VarBinary { .. } => {
            let b = bytes_of(v);
            let width = if byte_len(ty) > 255 { 2 } else { 1 };
            length_prefix(b.len(), width, out);
            out.extend_from_slice(&b);
        }
        ColumnType::Text { size } | ColumnType::Blob { size } => {
            let b = bytes_of(v);
            length_prefix(b.len(), lob_prefix(size), out);
            out.extend_from_slice(&b);
        }
        ColumnType::Json => {
            let text = match v {
                Value::Json(s) | Value::Text(s) => s.clone(),
                other => other.to_string(),
            };
            let parsed = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
            let mut body = Vec::new();
            json_value(&parsed, &mut body);
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(&body);
        }
        ColumnType::Date => {
            let (y, m, d) = match v {
                Value::Date(d) => (d.year, d.month, d.day),
                Value::DateTime(dt) => (dt.date.year, dt.date.month, dt.date.day),
                _ => (0, 0, 0),
            };
            let n = u32::from(d) | (u32::from(m) << 5) | (u32::from(y) << 9);
            out.extend_from_slice(&n.to_le_bytes()[..3]);
        }
        ColumnType::DateTime { fsp } => {
            let dt = match v {
                Value::DateTime(dt) => *dt,
                Value::Date(d) => binlog_format::value::DateTime {
                    date: *d,
                    hour: 0,
                    minute: 0,
                    second: 0,
                    micros: 0,
                },
                _ => binlog_format::value::DateTime::from_epoch_micros(0),
            };
            let ym = u64::from(dt.date.year) * 13 + u64::from(dt.date.month);
            let packed = (ym << 22)
                | (u64::from(dt.date.day) << 17)
                | (u64::from(dt.hour) << 12)
                | (u64::from(dt.minute) << 6)
                | u64::from(dt.second);
            let packed = packed + 0x80_0000_0000;
            out.extend_from_slice(&packed.to_be_bytes()[3..]);
            fraction(dt.micros, *fsp, out);
        }
        // An ENUM member's index from 1 (0 for the empty string MySQL stores for a bad
        // value), a SET's members' bits (bit i for the i-th member).
        ColumnType::Enum { values } | ColumnType::Set { values } => {
            let text = match v {
                Value::Text(s) => std::borrow::Cow::Borrowed(s.as_str()),
                other => std::borrow::Cow::Owned(other.to_string()),
            };
            let n = ty.member_number(&text).unwrap_or(0);
            let bytes = match ty {
                ColumnType::Enum { .. } => enum_bytes(values),
                _ => set_bytes(values),
            };
            out.extend_from_slice(&n.to_le_bytes()[..usize::from(bytes)]);
        }
        // One byte: the year less 1900, 0 for 0000.
        ColumnType::Year => {
            let y = int_of(v);
            out.push(if y == 0 {
                0
            } else {
                (y - 1900).clamp(0, 255) as u8
            });
        }
        ColumnType::Timestamp { fsp } => {
            let us = match v {
                Value::Timestamp(us) => *us,
                _ => 0,
            };
            let secs = us.div_euclid(1_000_000);
            let micros = us.rem_euclid(1_000_000) as u32;
            out.extend_from_slice(&(secs.clamp(0, u32::MAX as i64) as u32).to_be_bytes());
            fraction(micros, *fsp, out);
        }
        ColumnType::Time { fsp } => {
            let us = match v {
                Value::Time(us) => *us,
                _ => 0,
            };
            time2(us, *fsp, out);
        }
        // ceil(M / 8) bytes, big endian.
        ColumnType::Bit { width } => {
            let bits = match v {
                Value::Bit(b) | Value::UInt(b) => *b,
                other => int_of(other) as u64,
            };
            out.extend_from_slice(&binlog_format::value::bit_bytes(bits, *width));
        }
    }
}

/// MySQL's TIME2 (`my_time_packed_to_binary`): the packed time `±((h << 12 | m << 6 | s) <<
/// 24 | micros)` in 3 bytes plus 0 to 3 bytes of fraction, or 6 bytes at fsp 5 and 6, offset
/// so that the bytes sort as the times do. A negative time's fraction is stored as its
/// complement, with the integer part one lower, as MySQL does.
fn time2(us: i64, fsp: u8, out: &mut Vec<u8>) {
    let a = us.unsigned_abs();
    let secs = a / 1_000_000;
    let unit = 10u64.pow(6 - u32::from(fsp.min(6)));
    let micros = (a % 1_000_000) / unit * unit;
    let hms = ((secs / 3600) << 12) | ((secs % 3600 / 60) << 6) | (secs % 60);
    let packed = ((hms << 24) | micros) as i64;
    let nr = if us < 0 { -packed } else { packed };
    const INT_OFS: i64 = 0x80_0000;
    let int3 = |out: &mut Vec<u8>| {
        out.extend_from_slice(&((INT_OFS + (nr >> 24)) as u32).to_be_bytes()[1..])
    };
    // C's remainder: negative for a negative time with a fraction.
    let frac = nr % (1 << 24);
    match fsp {
        1 | 2 => {
            int3(out);
            out.push((frac / 10_000) as i8 as u8);
        }
        3 | 4 => {
            int3(out);
            out.extend_from_slice(&((frac / 100) as i16).to_be_bytes());
        }
        5 | 6 => out.extend_from_slice(&((nr + 0x8000_0000_0000) as u64).to_be_bytes()[2..]),
        _ => int3(out),
    }
}

/// The fractional seconds of DATETIME2/TIMESTAMP2: 0 to 3 bytes, big endian.
fn fraction(micros: u32, fsp: u8, out: &mut Vec<u8>) {
    match fsp {
        1 | 2 => out.push((micros / 10_000) as u8),
        3 | 4 => out.extend_from_slice(&((micros / 100) as u16).to_be_bytes()),
        5 | 6 => out.extend_from_slice(&micros.to_be_bytes()[1..]),
        _ => {}
    }
}

/// Bytes of a group of 0 to 9 decimal digits in MySQL's binary DECIMAL.
const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

/// MySQL's binary DECIMAL(precision, scale): groups of nine digits in four bytes, big
/// endian, a partial group first (integer part) and last (fraction); negative numbers have
/// every bit inverted; the first bit is then flipped.
pub(crate) fn decimal(text: &str, precision: u8, scale: u8, out: &mut Vec<u8>) {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    let scale = usize::from(scale);
    let intg = usize::from(precision).saturating_sub(scale);
    let int_digits: String = int_part.chars().filter(char::is_ascii_digit).collect();
    let int_digits = int_digits.trim_start_matches('0');
    // Left-pad the integer part and right-pad (or cut) the fraction to the column's sizes.
    let int_digits = format!("{int_digits:0>intg$}");
    let int_digits = &int_digits[int_digits.len().saturating_sub(intg)..];
    let mut frac: String = frac_part
        .chars()
        .filter(char::is_ascii_digit)
        .take(scale)
        .collect();
    while frac.len() < scale {
        frac.push('0');
    }
    let start = out.len();
    let group = |s: &str, out: &mut Vec<u8>| {
        let n: u32 = s.parse().unwrap_or(0);
        let bytes = DIG2BYTES[s.len()];
        out.extend_from_slice(&n.to_be_bytes()[4 - bytes..]);
    };
    let lead = intg % 9;
    if lead > 0 {
        group(&int_digits[..lead], out);
    }
    for chunk in int_digits.as_bytes()[lead..].chunks(9) {
        group(std::str::from_utf8(chunk).unwrap_or("0"), out);
    }
    let full = scale / 9 * 9;
    for chunk in frac.as_bytes()[..full].chunks(9) {
        group(std::str::from_utf8(chunk).unwrap_or("0"), out);
    }
    if scale % 9 > 0 {
        group(&frac[full..], out);
    }
    let zero = int_digits.bytes().all(|b| b == b'0') && frac.bytes().all(|b| b == b'0');
    if negative && !zero {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
    if let Some(first) = out.get_mut(start) {
        *first ^= 0x80;
    }
}

/// MySQL's binary JSON (the "large" layout throughout: 4-byte counts and offsets), the type
/// byte first.
fn json_value(v: &serde_json::Value, out: &mut Vec<u8>) {
    let (ty, body) = json_inner(v);
    out.push(ty);
    out.extend_from_slice(&body);
}

const JSONB_LARGE_OBJECT: u8 = 0x01;
const JSONB_LARGE_ARRAY: u8 = 0x03;
const JSONB_LITERAL: u8 = 0x04;
const JSONB_INT64: u8 = 0x09;
const JSONB_UINT64: u8 = 0x0a;
const JSONB_DOUBLE: u8 = 0x0b;
const JSONB_STRING: u8 = 0x0c;

/// Variable-length size of a JSON string: 7 bits per byte, low first.
fn json_len(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// The type byte and body of a JSON value.
fn json_inner(v: &serde_json::Value) -> (u8, Vec<u8>) {
    use serde_json::Value as J;
    match v {
        J::Null => (JSONB_LITERAL, vec![0x00]),
        J::Bool(true) => (JSONB_LITERAL, vec![0x01]),
        J::Bool(false) => (JSONB_LITERAL, vec![0x02]),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                (JSONB_INT64, i.to_le_bytes().to_vec())
            } else if let Some(u) = n.as_u64() {
                (JSONB_UINT64, u.to_le_bytes().to_vec())
            } else {
                (
                    JSONB_DOUBLE,
                    n.as_f64().unwrap_or(0.0).to_le_bytes().to_vec(),
                )
            }
        }
        J::String(s) => {
            let mut b = Vec::new();
            json_len(s.len(), &mut b);
            b.extend_from_slice(s.as_bytes());
            (JSONB_STRING, b)
        }
        J::Array(items) => (JSONB_LARGE_ARRAY, json_container(&[], items)),
        J::Object(map) => {
            // Keys sorted by length, then bytes, as MySQL stores them.
            let mut entries: Vec<(&String, &serde_json::Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then(a.0.cmp(b.0)));
            let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
            let values: Vec<serde_json::Value> =
                entries.iter().map(|(_, v)| (*v).clone()).collect();
            (JSONB_LARGE_OBJECT, json_container(&keys, &values))
        }
    }
}

/// A large object (with `keys`) or array: count, size, key entries, value entries, then keys
/// and the values that do not fit inline.
fn json_container(keys: &[&str], values: &[serde_json::Value]) -> Vec<u8> {
    let n = values.len();
    let header = 8 + keys.len() * 6 + n * 5;
    let mut tail = Vec::new();
    let mut key_entries = Vec::new();
    for k in keys {
        key_entries.extend_from_slice(&((header + tail.len()) as u32).to_le_bytes());
        key_entries.extend_from_slice(&(k.len() as u16).to_le_bytes());
        tail.extend_from_slice(k.as_bytes());
    }
    let mut value_entries = Vec::new();
    for v in values {
        let (ty, body) = json_inner(v);
        value_entries.push(ty);
        if ty == JSONB_LITERAL {
            // Literals are inlined in the entry.
            let mut inline = body.clone();
            inline.resize(4, 0);
            value_entries.extend_from_slice(&inline);
        } else {
            value_entries.extend_from_slice(&((header + tail.len()) as u32).to_le_bytes());
            tail.extend_from_slice(&body);
        }
    }
    let size = header + tail.len();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&(size as u32).to_le_bytes());
    out.extend_from_slice(&key_entries);
    out.extend_from_slice(&value_entries);
    out.extend_from_slice(&tail);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(text: &str, p: u8, s: u8) -> Vec<u8> {
        let mut out = Vec::new();
        decimal(text, p, s, &mut out);
        out
    }

    #[test]
    fn decimals_encode_as_mysql_writes_them() {
        // MySQL's documented example: 1234567890.1234 as DECIMAL(14,4).
        assert_eq!(
            dec("1234567890.1234", 14, 4),
            vec![0x81, 0x0D, 0xFB, 0x38, 0xD2, 0x04, 0xD2]
        );
        // Negative: every bit inverted, then the sign bit.
        assert_eq!(
            dec("-1234567890.1234", 14, 4),
            vec![0x7E, 0xF2, 0x04, 0xC7, 0x2D, 0xFB, 0x2D]
        );
        assert_eq!(dec("0.00", 4, 2), vec![0x80, 0x00]);
        assert_eq!(dec("12.50", 8, 2), vec![0x80, 0x00, 0x0C, 0x32]);
        assert_eq!(dec("-12.50", 8, 2), vec![0x7F, 0xFF, 0xF3, 0xCD]);
    }

    /// TIME2 bytes as MySQL 8 writes them (values from its `my_time_packed_to_binary`).
    #[test]
    fn times_encode_as_mysql_writes_them() {
        let t = |us: i64, fsp: u8| {
            let mut out = Vec::new();
            time2(us, fsp, &mut out);
            out
        };
        // 12:34:56: hms = 12 << 12 | 34 << 6 | 56 = 0xC8B8.
        assert_eq!(t(45_296_000_000, 0), vec![0x80, 0xC8, 0xB8]);
        assert_eq!(t(-45_296_000_000, 0), vec![0x7F, 0x37, 0x48]);
        assert_eq!(t(0, 0), vec![0x80, 0x00, 0x00]);
        // 838:59:59 = 0x346EFB.
        assert_eq!(t(3_020_399_000_000, 0), vec![0xB4, 0x6E, 0xFB]);
        // -00:00:01.5 at fsp 1: integer part -2, fraction 0x100 - 50.
        assert_eq!(t(-1_500_000, 1), vec![0x7F, 0xFF, 0xFE, 0xCE]);
        assert_eq!(t(1_500_000, 2), vec![0x80, 0x00, 0x01, 50]);
        assert_eq!(t(1_500_000, 3), vec![0x80, 0x00, 0x01, 0x13, 0x88]);
        assert_eq!(t(-1_500_000, 4), vec![0x7F, 0xFF, 0xFE, 0xEC, 0x78]);
        // fsp 6: the whole packed value in 6 bytes.
        assert_eq!(t(1_000_001, 6), vec![0x80, 0x00, 0x01, 0x00, 0x00, 0x01]);
        assert_eq!(t(-1_000_001, 6), vec![0x7F, 0xFF, 0xFE, 0xFF, 0xFF, 0xFF]);
    }

    #[test]
    fn bits_take_mysqls_metadata_and_bytes() {
        let mut m = Vec::new();
        metadata(&ColumnType::Bit { width: 10 }, &mut m);
        metadata(&ColumnType::Bit { width: 64 }, &mut m);
        assert_eq!(m, vec![2, 1, 0, 8]);
        let mut out = Vec::new();
        value(&ColumnType::Bit { width: 10 }, &Value::Bit(0x201), &mut out);
        assert_eq!(out, vec![0x02, 0x01]);
        assert_eq!(type_code(&ColumnType::Bit { width: 1 }), 16);
        assert_eq!(type_code(&ColumnType::Time { fsp: 0 }), 19);
    }

    #[test]
    fn char_metadata_folds_long_lengths_into_the_type_byte() {
        let mut m = Vec::new();
        metadata(&ColumnType::Char { len: 10 }, &mut m);
        assert_eq!(m, vec![0xFE, 40]);
        let mut m = Vec::new();
        metadata(&ColumnType::Char { len: 255 }, &mut m);
        // 1020 bytes = 0x3FC: bits 8-9 (0x300) fold in as 0x30.
        assert_eq!(m, vec![0xFE ^ 0x30, 0xFC]);
    }
}
