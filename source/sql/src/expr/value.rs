//! Values alone: truth, numbers and times read from any value, comparison with MySQL's
//! conversions and collation, arithmetic, LIKE, and values rendered as text.

use std::cmp::Ordering;

use binlog_format::schema::ColumnType;
use binlog_format::value::{format_datetime, DateTime, Value};
use sqlparser::ast::{BinaryOperator, Value as SqlValue};

use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::types::parse_datetime_text;

use super::decimal::Dec;

/// What a collation's name (lower case) means to ringrep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Collated {
    /// The one text collation: a case- and accent-insensitive name (`utf8mb4_0900_ai_ci`,
    /// and `utf8mb4_general_ci` or any other `_ci` one, taken as it).
    Text,
    /// Exact bytes: `binary` and the `_bin` collations.
    Bytes,
    /// One ringrep does not have (case- or accent-sensitive).
    Other,
}

/// What `name` (a collation's name, lower case) means to ringrep.
pub(crate) fn collation_named(name: &str) -> Collated {
    if name == "binary" || name.ends_with("_bin") {
        Collated::Bytes
    } else if name.ends_with("_ci") && !name.contains("_as_") {
        Collated::Text
    } else {
        Collated::Other
    }
}

/// Whether `name` is an aggregate function (COUNT, SUM, MIN, MAX, AVG, GROUP_CONCAT), in any
/// case.
pub(crate) fn is_aggregate(name: &str) -> bool {
    matches!(
        name.to_ascii_uppercase().as_str(),
        "COUNT" | "SUM" | "MIN" | "MAX" | "AVG" | "GROUP_CONCAT"
    )
}

/// SQL truth: `None` for NULL.
pub(crate) fn truthy(v: &Value) -> Option<bool> {
    match v {
        Value::Null => None,
        Value::Int(i) => Some(*i != 0),
        Value::UInt(u) => Some(*u != 0),
        Value::Float(f) => Some(*f != 0.0),
        Value::Double(f) => Some(*f != 0.0),
        other => Some(to_f64(other).is_some_and(|f| f != 0.0)),
    }
}

pub(super) fn bool_value(b: Option<bool>) -> Value {
    match b {
        None => Value::Null,
        Some(b) => Value::Int(i64::from(b)),
    }
}

/// A number as f64 (strings by their numeric prefix, as MySQL converts them).
pub(crate) fn to_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Float(f) => Some(f64::from(*f)),
        Value::Double(f) => Some(*f),
        Value::Decimal(s) => s.parse().ok(),
        Value::Text(s) | Value::Json(s) => Some(numeric_prefix(s)),
        Value::Bytes(b) => Some(numeric_prefix(&String::from_utf8_lossy(b))),
        Value::Timestamp(us) => Some(*us as f64 / 1e6),
        Value::Bit(b) => Some(*b as f64),
        // A TIME as MySQL's number of it: HHMMSS.ffffff.
        Value::Time(us) => ringrep_engine::types::time_number_text(*us).parse().ok(),
        Value::Date(d) => {
            Some(f64::from(d.year) * 10000.0 + f64::from(d.month) * 100.0 + f64::from(d.day))
        }
        Value::DateTime(dt) => Some(
            (f64::from(dt.date.year) * 10000.0
                + f64::from(dt.date.month) * 100.0
                + f64::from(dt.date.day))
                * 1_000_000.0
                + f64::from(dt.hour) * 10000.0
                + f64::from(dt.minute) * 100.0
                + f64::from(dt.second),
        ),
        Value::Null => None,
    }
}

pub(super) fn numeric_prefix(s: &str) -> f64 {
    let s = s.trim();
    let mut end = 0;
    for (i, c) in s.char_indices() {
        let ok = c.is_ascii_digit()
            || ((c == '-' || c == '+') && i == 0)
            || c == '.'
            || ((c == 'e' || c == 'E') && i > 0);
        if !ok {
            break;
        }
        end = i + c.len_utf8();
    }
    let mut t = &s[..end];
    while !t.is_empty() && t.parse::<f64>().is_err() {
        t = &t[..t.len() - 1];
    }
    t.parse().unwrap_or(0.0)
}

/// A bit operation's operand as MySQL takes it: 64 bits, a negative number in two's
/// complement, a fraction rounded (1.9 | 0 is 2), past the range clipped; `None` for NULL.
pub(crate) fn bit_operand(v: &Value) -> Option<u64> {
    match v {
        Value::Null => None,
        Value::Int(i) => Some(*i as u64),
        Value::UInt(u) | Value::Bit(u) => Some(*u),
        other => {
            let f = to_f64(other)?.round();
            Some(if f < 0.0 { f as i64 as u64 } else { f as u64 })
        }
    }
}

pub(super) fn as_i128(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(i128::from(*i)),
        // A BIT is its number in arithmetic and comparisons (`b + 0`).
        Value::UInt(u) | Value::Bit(u) => Some(i128::from(*u)),
        _ => None,
    }
}

/// A time value as epoch microseconds (wall-clock values read in the session time zone).
pub(super) fn time_us(v: &Value, tz: i64) -> Option<i64> {
    match v {
        Value::Timestamp(us) => Some(*us),
        Value::DateTime(dt) => Some(dt.to_epoch_micros() - tz * 1_000_000),
        Value::Date(d) => Some(
            DateTime {
                date: *d,
                hour: 0,
                minute: 0,
                second: 0,
                micros: 0,
            }
            .to_epoch_micros()
                - tz * 1_000_000,
        ),
        Value::Text(s) => parse_datetime_text(s).map(|dt| dt.to_epoch_micros() - tz * 1_000_000),
        _ => None,
    }
}

pub(super) fn is_time(v: &Value) -> bool {
    matches!(v, Value::Timestamp(_) | Value::DateTime(_) | Value::Date(_))
}

pub(super) fn is_numeric(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_)
            | Value::UInt(_)
            | Value::Float(_)
            | Value::Double(_)
            | Value::Decimal(_)
            | Value::Bit(_)
    )
}

/// Bytes as a big-endian number, the first 16 significant bytes (a binary string beside a
/// BIT).
fn bytes_u128(b: &[u8]) -> u128 {
    let start = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    b[start..]
        .iter()
        .take(16)
        .fold(0u128, |n, &x| (n << 8) | u128::from(x))
}

/// MySQL comparison; `None` when either side is NULL.
pub(crate) fn compare(a: &Value, b: &Value, tz: i64) -> Option<Ordering> {
    if a.is_null() || b.is_null() {
        return None;
    }
    if let (Some(x), Some(y)) = (as_i128(a), as_i128(b)) {
        return Some(x.cmp(&y));
    }
    // A BIT beside a binary string (`b = b'101'`, `b = x'05'`): both as numbers.
    match (a, b) {
        (Value::Bit(x), Value::Bytes(y)) => {
            return Some(u128::from(*x).cmp(&bytes_u128(y)));
        }
        (Value::Bytes(x), Value::Bit(y)) => {
            return Some(bytes_u128(x).cmp(&u128::from(*y)));
        }
        _ => {}
    }
    // A TIME beside anything that reads as a time: by time (`t < '00:00:00'`).
    if let (Value::Time(_), _) | (_, Value::Time(_)) = (a, b) {
        let time = |v: &Value| ringrep_engine::types::time_of(v, tz).ok();
        if let (Some(x), Some(y)) = (time(a), time(b)) {
            return Some(x.cmp(&y));
        }
    }
    if is_time(a) || is_time(b) {
        if let (Some(x), Some(y)) = (time_us(a, tz), time_us(b, tz)) {
            return Some(x.cmp(&y));
        }
    }
    if is_numeric(a) || is_numeric(b) {
        let decimalish =
            |v: &Value| matches!(v, Value::Int(_) | Value::UInt(_) | Value::Decimal(_));
        if decimalish(a) && decimalish(b) {
            let d = |v: &Value| match v {
                Value::Decimal(s) => Value::Decimal(s.clone()),
                other => Value::Decimal(other.to_string()),
            };
            return Some(d(a).total_cmp(&d(b)));
        }
        return to_f64(a)?.partial_cmp(&to_f64(b)?);
    }
    match (a, b) {
        (Value::Bytes(x), Value::Bytes(y)) => Some(x.cmp(y)),
        (Value::Bytes(x), other) => Some(
            x.as_slice()
                .cmp(ringrep_engine::types::text_of(other).as_bytes()),
        ),
        (other, Value::Bytes(y)) => Some(
            ringrep_engine::types::text_of(other)
                .as_bytes()
                .cmp(y.as_slice()),
        ),
        (Value::Text(x), Value::Text(y)) => Some(binlog_format::collation::cmp(x, y)),
        _ => Some(binlog_format::collation::cmp(
            &ringrep_engine::types::text_of(a),
            &ringrep_engine::types::text_of(b),
        )),
    }
}

/// A literal of the SQL text as a value.
pub(super) fn literal(v: &SqlValue) -> Result<Value> {
    Ok(match v {
        SqlValue::Number(n, _) => {
            if let Ok(i) = n.parse::<i64>() {
                Value::Int(i)
            } else if let Ok(u) = n.parse::<u64>() {
                Value::UInt(u)
            } else if n.contains(['e', 'E']) {
                Value::Double(
                    n.parse()
                        .map_err(|_| Error::syntax(format!("bad number {n}")))?,
                )
            } else {
                Value::Decimal(n.clone())
            }
        }
        SqlValue::SingleQuotedString(s)
        | SqlValue::DoubleQuotedString(s)
        | SqlValue::NationalStringLiteral(s) => Value::Text(s.clone()),
        SqlValue::HexStringLiteral(h) => {
            Value::Bytes(unhex(h).ok_or_else(|| Error::syntax(format!("bad hex literal X'{h}'")))?)
        }
        // A bit-value literal `b'101'` (and `0b101`): its number, as MySQL reads one in a
        // number's place and a BIT column stores it (its bytes in a string's place); past 64
        // bits a binary string of its bits, right aligned in whole bytes.
        SqlValue::SingleQuotedByteStringLiteral(bits) => {
            let bytes =
                unbit(bits).ok_or_else(|| Error::syntax(format!("bad bit literal b'{bits}'")))?;
            match ringrep_engine::types::bytes_number(&bytes) {
                Some(n) => Value::Bit(n),
                None => Value::Bytes(bytes),
            }
        }
        SqlValue::Boolean(b) => Value::Int(i64::from(*b)),
        SqlValue::Null => Value::Null,
        other => return Err(Error::unsupported(format!("literal {other}"))),
    })
}

/// Binary digits as bytes, right aligned (`101` is one byte, 5; empty is no bytes); `None`
/// for a digit other than 0 and 1.
pub(super) fn unbit(bits: &str) -> Option<Vec<u8>> {
    if !bits.bytes().all(|b| b == b'0' || b == b'1') {
        return None;
    }
    let pad = (8 - bits.len() % 8) % 8;
    let padded: Vec<u8> = std::iter::repeat_n(b'0', pad).chain(bits.bytes()).collect();
    Some(
        padded
            .chunks(8)
            .map(|c| c.iter().fold(0u8, |n, &b| (n << 1) | (b - b'0')))
            .collect(),
    )
}

/// Hex digits as bytes (an odd count gets a leading 0); `None` for a non-hex digit.
pub(super) fn unhex(h: &str) -> Option<Vec<u8>> {
    let h = if h.len() % 2 == 1 {
        format!("0{h}")
    } else {
        h.to_string()
    };
    // Byte pairs, not string slices: a non-ASCII character is not a hex digit (and slicing
    // through it would panic).
    h.as_bytes()
        .chunks(2)
        .map(|pair| {
            let digit = |b: u8| (b as char).to_digit(16);
            Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8)
        })
        .collect()
}

pub(super) fn int_result(v: i128) -> Result<Value> {
    if let Ok(i) = i64::try_from(v) {
        Ok(Value::Int(i))
    } else if let Ok(u) = u64::try_from(v) {
        Ok(Value::UInt(u))
    } else {
        Err(Error::new(
            code::ER_DATA_OUT_OF_RANGE,
            "BIGINT value is out of range",
        ))
    }
}

/// An integer operation's result as MySQL types it: BIGINT UNSIGNED when either side is
/// unsigned, BIGINT otherwise; outside that type's range error 1690 (the caller names the
/// expression).
pub(super) fn typed_int(v: Option<i128>, unsigned: bool) -> Result<Value> {
    let value = if unsigned {
        v.and_then(|v| u64::try_from(v).ok()).map(Value::UInt)
    } else {
        v.and_then(|v| i64::try_from(v).ok()).map(Value::Int)
    };
    value.ok_or_else(|| {
        let ty = if unsigned {
            "BIGINT UNSIGNED"
        } else {
            "BIGINT"
        };
        Error::new(
            code::ER_DATA_OUT_OF_RANGE,
            format!("{ty} value is out of range"),
        )
    })
}

/// Error 1690 of `typed_int` naming the expression, as MySQL's message does.
pub(super) fn out_of_range_in(e: Error, expr: &impl std::fmt::Display) -> Error {
    if e.code == code::ER_DATA_OUT_OF_RANGE && e.message.ends_with("out of range") {
        return Error::new(
            code::ER_DATA_OUT_OF_RANGE,
            format!("{} in '{expr}'", e.message),
        );
    }
    e
}

pub(super) fn arith(op: &BinaryOperator, a: &Value, b: &Value) -> Result<Value> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    if let (Some(x), Some(y)) = (as_i128(a), as_i128(b)) {
        let unsigned = matches!(a, Value::UInt(_) | Value::Bit(_))
            || matches!(b, Value::UInt(_) | Value::Bit(_));
        return match op {
            BinaryOperator::Plus => typed_int(x.checked_add(y), unsigned),
            BinaryOperator::Minus => typed_int(x.checked_sub(y), unsigned),
            BinaryOperator::Multiply => typed_int(x.checked_mul(y), unsigned),
            BinaryOperator::Divide => match (Dec::of(a), Dec::of(b)) {
                (Some(x), Some(y)) => x.divide(&y).map_or(Ok(Value::Null), Dec::into_decimal),
                _ => Ok(Value::Null),
            },
            BinaryOperator::MyIntegerDivide => {
                if y == 0 {
                    Ok(Value::Null)
                } else {
                    typed_int(Some(x / y), unsigned)
                }
            }
            BinaryOperator::Modulo => {
                if y == 0 {
                    Ok(Value::Null)
                } else {
                    // MySQL's MOD keeps the dividend's sign and type.
                    typed_int(Some(x % y), matches!(a, Value::UInt(_)))
                }
            }
            _ => Err(Error::unsupported(format!("operator {op}"))),
        };
    }
    if let (Some(x), Some(y)) = (Dec::of(a), Dec::of(b)) {
        return decimal_arith(op, &x, &y);
    }
    // A DOUBLE or a string on either side: MySQL computes in DOUBLE.
    let (x, y) = (to_f64(a).unwrap_or(0.0), to_f64(b).unwrap_or(0.0));
    let r = match op {
        BinaryOperator::Plus => x + y,
        BinaryOperator::Minus => x - y,
        BinaryOperator::Multiply => x * y,
        BinaryOperator::Divide => {
            if y == 0.0 {
                return Ok(Value::Null);
            }
            x / y
        }
        BinaryOperator::MyIntegerDivide => {
            if y == 0.0 {
                return Ok(Value::Null);
            }
            return int_result((x / y).trunc() as i128);
        }
        BinaryOperator::Modulo => {
            if y == 0.0 {
                return Ok(Value::Null);
            }
            x % y
        }
        _ => return Err(Error::unsupported(format!("operator {op}"))),
    };
    if r.is_infinite() {
        // Past DOUBLE's range: MySQL's 1690 (the caller names the expression).
        return Err(Error::new(
            code::ER_DATA_OUT_OF_RANGE,
            "DOUBLE value is out of range",
        ));
    }
    Ok(Value::Double(r))
}

/// Arithmetic of two exact numbers, at least one a DECIMAL (see [`decimal`]); a division by
/// zero is NULL (its warning or error is `check_division`'s).
pub(super) fn decimal_arith(op: &BinaryOperator, x: &Dec, y: &Dec) -> Result<Value> {
    match op {
        BinaryOperator::Plus => x.add(y).into_decimal(),
        BinaryOperator::Minus => x.sub(y).into_decimal(),
        BinaryOperator::Multiply => x.mul(y).into_decimal(),
        BinaryOperator::Divide => x.divide(y).map_or(Ok(Value::Null), Dec::into_decimal),
        BinaryOperator::Modulo => x.rem(y).map_or(Ok(Value::Null), Dec::into_decimal),
        BinaryOperator::MyIntegerDivide => match x.div_trunc(y) {
            None => Ok(Value::Null),
            Some(q) => int_result(num_traits::ToPrimitive::to_i128(&q).ok_or_else(|| {
                Error::new(code::ER_DATA_OUT_OF_RANGE, "BIGINT value is out of range")
            })?),
        },
        _ => Err(Error::unsupported(format!("operator {op}"))),
    }
}

/// SQL LIKE with `%` and `_`, over the folded forms of the text collation (without case or
/// accents).
pub(crate) fn like(text: &str, pattern: &str, escape: char) -> bool {
    like_as(text, pattern, escape, false)
}

/// LIKE, character for character when `exact` (a binary string on either side, as
/// `BINARY x` or `x COLLATE utf8mb4_bin` make), else as [`like`].
pub(super) fn like_as(text: &str, pattern: &str, escape: char, exact: bool) -> bool {
    // LIKE matches character by character (`_` is one character), each compared by the
    // collation: a character is one unit, its folded form when that is one character, else a
    // code for the whole expansion, so 'ß' matches 'ẞ' but neither 's' nor `__`. Marks that
    // fold to nothing drop out, as they compare equal to nothing.
    let units = |s: &str| {
        s.chars()
            .filter_map(|c| {
                if exact {
                    Some(u64::from(c))
                } else {
                    collation_unit(c)
                }
            })
            .collect::<Vec<u64>>()
    };
    let t = units(text);
    let p = units(pattern);
    let escape = u64::from(if exact {
        escape
    } else {
        escape.to_ascii_lowercase()
    });
    const ANY: u64 = '%' as u64;
    const ONE: u64 = '_' as u64;
    fn go(t: &[u64], p: &[u64], esc: u64) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some(&ANY) => (0..=t.len()).any(|i| go(&t[i..], &p[1..], esc)),
            Some(&ONE) => !t.is_empty() && go(&t[1..], &p[1..], esc),
            Some(&c) if c == esc && p.len() > 1 => {
                !t.is_empty() && t[0] == p[1] && go(&t[1..], &p[2..], esc)
            }
            Some(&c) => !t.is_empty() && t[0] == c && go(&t[1..], &p[1..], esc),
        }
    }
    go(&t, &p, escape)
}

/// One character as the collation compares it character by character (LIKE, LOCATE): its
/// folded form when that is one character, else a code for the whole expansion ('ß' and 'ẞ'
/// share one, which neither 's' nor 'ss' has); `None` for a mark that folds to nothing.
pub(crate) fn collation_unit(c: char) -> Option<u64> {
    if c.is_ascii() {
        return Some(u64::from(c.to_ascii_lowercase()));
    }
    let mut buf = [0u8; 4];
    let mut folded: Vec<char> = Vec::new();
    binlog_format::collation::fold(c.encode_utf8(&mut buf), |f| folded.push(f));
    match folded.as_slice() {
        [] => None,
        [one] => Some(u64::from(*one)),
        many => {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            many.hash(&mut h);
            Some(h.finish() | (1 << 63))
        }
    }
}

/// The 64 bits CAST(... AS SIGNED) and CAST(... AS UNSIGNED) read from `v`, as MySQL takes
/// them: integers exactly (never through a double), other numbers rounded half away from zero
/// and held to the 64-bit range, text by its leading integer (`'12abc'` is 12, with warning
/// 1292 from `cast`, which refuses it in a value being written) or, failing that, as a
/// number.
pub(super) fn integer_bits(v: &Value) -> i128 {
    const LOW: i128 = i64::MIN as i128;
    const HIGH: i128 = u64::MAX as i128;
    let of_f64 = |f: f64| (f.round() as i128).clamp(LOW, HIGH);
    match v {
        Value::Int(i) => i128::from(*i),
        Value::UInt(u) | Value::Bit(u) => i128::from(*u),
        Value::Text(_) | Value::Bytes(_) => {
            let text = ringrep_engine::types::text_of(v);
            let t = text.trim_start();
            let digits_from = usize::from(t.starts_with(['-', '+']));
            let digits = t[digits_from..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            match t[..digits_from + digits].parse::<i128>() {
                Ok(n) if digits > 0 && digits < 30 => n.clamp(LOW, HIGH),
                _ => to_f64(v).map_or(0, of_f64),
            }
        }
        other => to_f64(other).map_or(0, of_f64),
    }
}

/// A value as the `mysql` client prints it; `None` for NULL. `ty` (the column's type, when the
/// value comes straight from a column) gives the fraction digits of times.
pub(crate) fn render(v: &Value, ty: Option<&ColumnType>, tz: i64) -> Option<String> {
    let fsp = match ty {
        Some(ColumnType::Timestamp { fsp })
        | Some(ColumnType::DateTime { fsp })
        | Some(ColumnType::Time { fsp }) => Some(*fsp),
        _ => None,
    };
    Some(match v {
        Value::Null => return None,
        Value::Timestamp(us) => {
            let dt = DateTime::from_epoch_micros(us + tz * 1_000_000);
            format_datetime(&dt, fsp.unwrap_or(if us % 1_000_000 == 0 { 0 } else { 6 }))
        }
        Value::DateTime(dt) => {
            format_datetime(dt, fsp.unwrap_or(if dt.micros == 0 { 0 } else { 6 }))
        }
        Value::Time(us) => binlog_format::value::format_time(
            *us,
            fsp.unwrap_or(if us % 1_000_000 == 0 { 0 } else { 6 }),
        ),
        // A BIT's bytes, as the client prints them (raw; `b + 0` or BIN(b) shows the number).
        Value::Bit(b) => {
            let width = match ty {
                Some(ColumnType::Bit { width }) => *width,
                _ => (64 - b.leading_zeros()).max(1) as u8,
            };
            String::from_utf8_lossy(&binlog_format::value::bit_bytes(*b, width)).into_owned()
        }
        // A YEAR is four digits: 0 is 0000.
        Value::Int(y) if matches!(ty, Some(ColumnType::Year)) => format!("{y:04}"),
        // A FLOAT(M, D) or DOUBLE(M, D) shows D fraction digits, as MySQL prints it.
        Value::Float(_) | Value::Double(_) if real_scale(ty).is_some() => {
            let d = usize::from(real_scale(ty).unwrap_or(0));
            let f = match v {
                Value::Float(f) => f64::from(*f),
                Value::Double(f) => *f,
                _ => unreachable!("matched above"),
            };
            format!("{f:.d$}")
        }
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.to_string(),
    })
}

/// The D of a FLOAT(M, D) or DOUBLE(M, D) column's type.
fn real_scale(ty: Option<&ColumnType>) -> Option<u8> {
    match ty {
        Some(ColumnType::Real {
            digits: Some((_, d)),
            ..
        }) => Some(*d),
        _ => None,
    }
}

/// Error 1582 unless `name` got `min` to `max` arguments (`n` of them), as MySQL checks
/// native functions.
pub(crate) fn arity(name: &str, n: usize, min: usize, max: usize) -> Result<()> {
    if n < min || n > max {
        return Err(Error::new(
            code::ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT,
            format!("Incorrect parameter count in the call to native function '{name}'"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_follow_mysql() {
        assert_eq!(
            compare(&Value::Text("abc".into()), &Value::Text("ABC".into()), 0),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&Value::Int(10), &Value::Text("9".into()), 0),
            Some(Ordering::Greater)
        );
        assert_eq!(
            compare(&Value::Decimal("1.50".into()), &Value::Int(1), 0),
            Some(Ordering::Greater)
        );
        assert_eq!(compare(&Value::Null, &Value::Int(1), 0), None);
        assert_eq!(
            compare(
                &Value::Timestamp(1_000_000),
                &Value::Text("1970-01-01 00:00:01".into()),
                0
            ),
            Some(Ordering::Equal)
        );
    }

    #[test]
    fn like_patterns() {
        assert!(like("Hello", "h%o", '\\'));
        assert!(like("abc", "a_c", '\\'));
        assert!(!like("abc", "a_", '\\'));
        assert!(like("50%", "50\\%", '\\'));
    }

    #[test]
    fn floats_print_as_mysql_does() {
        assert_eq!(render(&Value::Double(1.5), None, 0).as_deref(), Some("1.5"));
        assert_eq!(render(&Value::Double(3.0), None, 0).as_deref(), Some("3"));
        assert_eq!(render(&Value::Float(0.1), None, 0).as_deref(), Some("0.1"));
    }
}
