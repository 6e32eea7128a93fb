//! Converting values to column types as MySQL does in strict mode, and column defaults.

use binlog_format::schema::{ColumnDef, ColumnDefault, ColumnType};
use binlog_format::value::{days_from_civil, Date, DateTime, Value, TIME_MAX_MICROS};

use crate::error::{code, Error, Result};

/// Session time zone as a fixed offset from UTC in seconds (`+00:00` by default).
pub(crate) type TzOffset = i64;

pub(crate) fn out_of_range(col: &str, row: usize) -> Error {
    Error::new(
        code::ER_WARN_DATA_OUT_OF_RANGE,
        format!("Out of range value for column '{col}' at row {row}"),
    )
}

fn incorrect(kind: &str, v: &str, col: &str, row: usize) -> Error {
    Error::new(
        code::ER_TRUNCATED_WRONG_VALUE_FOR_FIELD,
        format!("Incorrect {kind} value: '{v}' for column '{col}' at row {row}"),
    )
}

/// A string that is not a number for a numeric column: 1265 when a number starts it (`'12x'`,
/// MySQL's "Data truncated"), else 1366.
fn not_a_number(kind: &str, v: &str, col: &str, row: usize) -> Error {
    if number_prefix(v).is_empty() {
        incorrect(kind, v, col, row)
    } else {
        Error::new(code::WARN_DATA_TRUNCATED, truncated(col, row))
    }
}

fn wrong_datetime(v: &str, col: &str, row: usize) -> Error {
    Error::new(
        code::ER_TRUNCATED_WRONG_VALUE,
        format!("Incorrect datetime value: '{v}' for column '{col}' at row {row}"),
    )
}

/// Parses a decimal literal into (negative, integer digits, fraction digits).
/// An exponent's digits (`e+5`, `e-12`), one past i64's range taken as its bound.
fn exponent(e: &str) -> Option<i64> {
    let (negative, digits) = match e.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, e.strip_prefix('+').unwrap_or(e)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i64 = digits.parse().unwrap_or(i64::MAX);
    Some(if negative { -n } else { n })
}

fn parse_decimal(s: &str) -> Option<(bool, String, String)> {
    let s = s.trim();
    let (neg, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (mantissa, exp) = match rest.split_once(['e', 'E']) {
        Some((m, e)) => (m, exponent(e)?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let int = int.trim_start_matches('0');
    let mut digits = format!("{int}{frac}");
    // No type holds 100 digits on either side of the point: a larger exponent is out of
    // range (or rounds to zero) all the same, without a string of its size.
    let mut point = (int.len() as i64).saturating_add(exp).clamp(-100, 100) as i32;
    if point < 0 {
        digits = "0".repeat((-point) as usize) + &digits;
        point = 0;
    }
    while (digits.len() as i32) < point {
        digits.push('0');
    }
    let (i, f) = digits.split_at(point as usize);
    let i = i.trim_start_matches('0');
    Some((
        neg,
        if i.is_empty() { "0".into() } else { i.into() },
        f.into(),
    ))
}

/// Rounds a decimal (half away from zero) to `scale` fraction digits; returns canonical text.
fn round_decimal(neg: bool, int: &str, frac: &str, scale: usize) -> (String, usize) {
    let mut digits: Vec<u8> = int
        .bytes()
        .chain(frac.bytes().chain(std::iter::repeat(b'0')).take(scale))
        .map(|b| b - b'0')
        .collect();
    if frac.len() > scale && frac.as_bytes()[scale] >= b'5' {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, 1);
                break;
            }
            i -= 1;
            if digits[i] == 9 {
                digits[i] = 0;
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let split = digits.len() - scale;
    let int_part: String = digits[..split]
        .iter()
        .map(|d| char::from(b'0' + d))
        .collect();
    let int_part = int_part.trim_start_matches('0');
    let int_part = if int_part.is_empty() { "0" } else { int_part };
    let frac_part: String = digits[split..]
        .iter()
        .map(|d| char::from(b'0' + d))
        .collect();
    let zero = int_part == "0" && frac_part.bytes().all(|b| b == b'0');
    let sign = if neg && !zero { "-" } else { "" };
    let int_digits = if int_part == "0" { 0 } else { int_part.len() };
    if scale == 0 {
        (format!("{sign}{int_part}"), int_digits)
    } else {
        (format!("{sign}{int_part}.{frac_part}"), int_digits)
    }
}

/// The largest magnitude a `FLOAT(m, d)` or `DOUBLE(m, d)` holds: `m - d` nines before
/// the point and `d` after.
fn real_max(m: u8, d: u8) -> f64 {
    10f64.powi(i32::from(m) - i32::from(d)) - 10f64.powi(-i32::from(d))
}

/// `f` as a `FLOAT(m, d)` or `DOUBLE(m, d)` stores it, as MySQL's `Field_real::truncate`
/// does: the fraction rounded to `d` digits (ties to even, as C's `rint`), `None` when the
/// result does not fit in `m` digits.
fn fixed_real(f: f64, m: u8, d: u8) -> Option<f64> {
    let scale = 10f64.powi(i32::from(d));
    let r = f.floor() + ((f - f.floor()) * scale).round_ties_even() / scale;
    (r.abs() <= real_max(m, d)).then_some(r)
}

/// A TIME as MySQL's number of it, `[-]HHMMSS` (rounded to `fsp` fraction digits, which
/// the caller then drops or keeps): 12:34:56 is 123456.
pub fn time_hhmmss(us: i64, fsp: u8) -> i64 {
    let r = round_time(us, fsp);
    let a = r.unsigned_abs() / 1_000_000;
    let n = (a / 3600 * 10_000 + a % 3600 / 60 * 100 + a % 60) as i64;
    if r < 0 {
        -n
    } else {
        n
    }
}

/// A TIME's number with its fraction, as DECIMAL text: `-123456.500000` for
/// -12:34:56.5 (six digits; the caller trims them).
pub fn time_number_text(us: i64) -> String {
    let n = time_hhmmss(us - us % 1_000_000, 0);
    let frac = us.unsigned_abs() % 1_000_000;
    let sign = if us < 0 && n == 0 { "-" } else { "" };
    if frac == 0 {
        format!("{sign}{n}")
    } else {
        format!("{sign}{n}.{frac:06}")
    }
}

/// The text of a numeric value for decimal conversion.
fn numeric_text(v: &Value) -> Option<String> {
    match v {
        Value::Int(i) => Some(i.to_string()),
        Value::UInt(u) | Value::Bit(u) => Some(u.to_string()),
        Value::Time(us) => Some(time_number_text(*us)),
        Value::Float(f) => Some(format!("{f:e}")),
        Value::Double(f) => Some(format!("{f:e}")),
        Value::Decimal(s) | Value::Text(s) => Some(s.trim().to_string()),
        Value::Bytes(b) => std::str::from_utf8(b).ok().map(|s| s.trim().to_string()),
        _ => None,
    }
}

/// Parses `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` (also with `T`). Returns the wall-clock time.
pub fn parse_datetime_text(s: &str) -> Option<DateTime> {
    let s = s.trim();
    let (date, time) = match s.split_once([' ', 'T']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut dp = date.split('-');
    let year: u16 = dp.next()?.parse().ok()?;
    let month: u8 = dp.next()?.parse().ok()?;
    let day: u8 = dp.next()?.parse().ok()?;
    if dp.next().is_some()
        || !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
    {
        return None;
    }
    let (mut hour, mut minute, mut second, mut micros) = (0u8, 0u8, 0u8, 0u32);
    if let Some(t) = time {
        let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
        let mut tp = hms.split(':');
        hour = tp.next()?.parse().ok()?;
        minute = tp.next().unwrap_or("0").parse().ok()?;
        second = tp.next().unwrap_or("0").parse().ok()?;
        if tp.next().is_some()
            || hour > 23
            || minute > 59
            || second > 59
            || !frac.bytes().all(|b| b.is_ascii_digit())
            || frac.len() > 9
        {
            return None;
        }
        let mut f = frac.to_string();
        f.truncate(6);
        while f.len() < 6 {
            f.push('0');
        }
        micros = f.parse().ok()?;
    }
    Some(DateTime {
        date: Date { year, month, day },
        hour,
        minute,
        second,
        micros,
    })
}

fn days_in_month(y: u16, m: u8) -> u8 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400) => 29,
        _ => 28,
    }
}

/// Rounds microseconds to `fsp` digits (MySQL rounds on insert).
fn round_micros(us: i64, fsp: u8) -> i64 {
    let unit = 10i64.pow(6 - u32::from(fsp.min(6)));
    let half = unit / 2;
    (us + half).div_euclid(unit) * unit
}

/// The range of TIMESTAMP: 1970-01-01 00:00:01 to 2038-01-19 03:14:07.999999 UTC.
pub(crate) const TIMESTAMP_MAX_US: i64 = 2_147_483_647_999_999;
pub(crate) const TIMESTAMP_MIN_US: i64 = 1_000_000;

/// Converts `v` to the type of `col` (strict mode: anything lossy is an error naming the
/// column and the 1-based row number).
pub fn coerce(v: Value, col: &ColumnDef, row: usize, tz: TzOffset) -> Result<Value> {
    if v.is_null() {
        if !col.nullable {
            return Err(Error::new(
                code::ER_BAD_NULL_ERROR,
                format!("Column '{}' cannot be null", col.name),
            ));
        }
        return Ok(Value::Null);
    }
    let name = col.name.as_str();
    match &col.ty {
        ColumnType::Integer { width, unsigned } => {
            let n: i128 = match &v {
                Value::Int(i) => i128::from(*i),
                Value::UInt(u) | Value::Bit(u) => i128::from(*u),
                Value::Time(us) => i128::from(time_hhmmss(*us, 0)),
                Value::Float(_)
                | Value::Double(_)
                | Value::Decimal(_)
                | Value::Text(_)
                | Value::Bytes(_) => {
                    let text = numeric_text(&v).unwrap_or_default();
                    let (neg, int, frac) = parse_decimal(&text)
                        .ok_or_else(|| not_a_number("integer", &text, name, row))?;
                    let (rounded, _) = round_decimal(neg, &int, &frac, 0);
                    rounded
                        .parse::<i128>()
                        .map_err(|_| out_of_range(name, row))?
                }
                Value::Timestamp(_) | Value::Date(_) | Value::DateTime(_) | Value::Json(_) => {
                    return Err(incorrect("integer", &v.to_string(), name, row))
                }
                Value::Null => unreachable!("handled above"),
            };
            let (lo, hi) = width.range(*unsigned);
            if n < lo || n > hi {
                return Err(out_of_range(name, row));
            }
            Ok(if *unsigned {
                Value::UInt(n as u64)
            } else {
                Value::Int(n as i64)
            })
        }
        ColumnType::Decimal { precision, scale }
        | ColumnType::UnsignedDecimal { precision, scale } => {
            let text =
                numeric_text(&v).ok_or_else(|| incorrect("decimal", &v.to_string(), name, row))?;
            let (neg, int, frac) =
                parse_decimal(&text).ok_or_else(|| not_a_number("decimal", &text, name, row))?;
            // MySQL checks the sign before rounding: -0.001 is out of range, not 0.00.
            let nonzero = int.bytes().chain(frac.bytes()).any(|b| b != b'0');
            if neg && nonzero && col.ty.is_unsigned() {
                return Err(out_of_range(name, row));
            }
            let (s, int_digits) = round_decimal(neg, &int, &frac, usize::from(*scale));
            if int_digits > usize::from(precision.saturating_sub(*scale)) {
                return Err(out_of_range(name, row));
            }
            Ok(Value::Decimal(s))
        }
        ColumnType::Float | ColumnType::Double | ColumnType::Real { .. } => {
            let f: f64 = match &v {
                Value::Int(i) => *i as f64,
                Value::UInt(u) => *u as f64,
                Value::Float(f) => f64::from(*f),
                Value::Double(f) => *f,
                _ => {
                    let text = numeric_text(&v).unwrap_or_default();
                    text.trim()
                        .parse::<f64>()
                        .map_err(|_| not_a_number("double", &text, name, row))?
                }
            };
            let single = col.ty.is_single_float();
            if !f.is_finite() || (single && f.abs() > f64::from(f32::MAX)) {
                return Err(out_of_range(name, row));
            }
            let f = match col.ty {
                ColumnType::Real { unsigned: true, .. } if f < 0.0 => {
                    return Err(out_of_range(name, row))
                }
                ColumnType::Real {
                    digits: Some((m, d)),
                    ..
                } => fixed_real(f, m, d).ok_or_else(|| out_of_range(name, row))?,
                _ => f,
            };
            Ok(if single {
                Value::Float(f as f32)
            } else {
                Value::Double(f)
            })
        }
        ColumnType::Char { len } | ColumnType::VarChar { len } => {
            let mut s = into_text(v);
            check_utf8(&s, name, row)?;
            // A string no longer in bytes than the limit is no longer in characters.
            if s.len() > *len as usize && s.chars().count() > *len as usize {
                // Only spaces past the length are cut, as MySQL cuts them (`convert` notes it).
                let keep = s
                    .char_indices()
                    .nth(*len as usize)
                    .map_or(s.len(), |(i, _)| i);
                if !s[keep..].bytes().all(|b| b == b' ') {
                    return Err(too_long(name, row));
                }
                s.truncate(keep);
            }
            // CHAR drops trailing spaces on read, as MySQL does.
            if matches!(col.ty, ColumnType::Char { .. }) {
                s.truncate(s.trim_end_matches(' ').len());
            }
            Ok(Value::Text(s))
        }
        ColumnType::Text { size } => {
            let s = into_text(v);
            check_utf8(&s, name, row)?;
            if s.len() as u64 > size.max_len() {
                return Err(too_long(name, row));
            }
            Ok(Value::Text(s))
        }
        ColumnType::Binary { len } | ColumnType::VarBinary { len } => {
            let mut b = into_bytes(v);
            if b.len() > *len as usize {
                return Err(too_long(name, row));
            }
            if matches!(col.ty, ColumnType::Binary { .. }) {
                b.resize(*len as usize, 0);
            }
            Ok(Value::Bytes(b))
        }
        ColumnType::Blob { size } => {
            let b = into_bytes(v);
            if b.len() as u64 > size.max_len() {
                return Err(too_long(name, row));
            }
            Ok(Value::Bytes(b))
        }
        ColumnType::Json => {
            let s = text_of(&v);
            let parsed: serde_json::Value = serde_json::from_str(&s).map_err(|_| {
                Error::new(code::ER_INVALID_JSON_TEXT, format!("Invalid JSON text: \"Invalid value.\" at position 0 in value for column '{}.{}'.", "t", name))
            })?;
            Ok(Value::Json(parsed.to_string()))
        }
        ColumnType::Date => match v {
            Value::Date(d) => Ok(Value::Date(d)),
            Value::DateTime(dt) => Ok(Value::Date(dt.date)),
            Value::Timestamp(us) => Ok(Value::Date(
                DateTime::from_epoch_micros(us + tz * 1_000_000).date,
            )),
            other => {
                let t = text_of(&other);
                parse_datetime_text(&t)
                    .map(|dt| Value::Date(dt.date))
                    .ok_or_else(|| wrong_datetime(&t, name, row))
            }
        },
        ColumnType::DateTime { fsp } => {
            let dt = match v {
                Value::DateTime(dt) => dt,
                Value::Date(d) => DateTime {
                    date: d,
                    hour: 0,
                    minute: 0,
                    second: 0,
                    micros: 0,
                },
                Value::Timestamp(us) => DateTime::from_epoch_micros(us + tz * 1_000_000),
                other => {
                    let t = text_of(&other);
                    parse_datetime_text(&t).ok_or_else(|| wrong_datetime(&t, name, row))?
                }
            };
            let us = round_micros(dt.to_epoch_micros(), *fsp);
            Ok(Value::DateTime(DateTime::from_epoch_micros(us)))
        }
        ColumnType::Enum { values } => {
            // A member by its text, else a number (or a string of one) as its index, from 1;
            // anything else is "Data truncated", as MySQL says.
            let text = match &v {
                Value::Int(_) | Value::UInt(_) => None,
                other => Some(text_of(other)),
            };
            if let Some(m) = text.as_deref().and_then(|t| col.ty.enum_member(t)) {
                return Ok(Value::Text(m.to_string()));
            }
            let index = match (&v, text.as_deref()) {
                (Value::Int(i), _) => usize::try_from(*i).ok(),
                (Value::UInt(u), _) => usize::try_from(*u).ok(),
                (_, Some(t)) => t.trim().parse::<usize>().ok(),
                _ => None,
            };
            match index
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| values.get(i))
            {
                Some(m) => Ok(Value::Text(m.clone())),
                None => Err(Error::new(code::WARN_DATA_TRUNCATED, truncated(name, row))),
            }
        }
        ColumnType::Set { values } => set_value(&v, values, &col.ty, false)
            .ok_or_else(|| Error::new(code::WARN_DATA_TRUNCATED, truncated(name, row))),
        ColumnType::Year => year_value(&v, name, row, tz),
        ColumnType::Timestamp { fsp } => {
            let us = match v {
                Value::Timestamp(us) => us,
                Value::DateTime(dt) => dt.to_epoch_micros() - tz * 1_000_000,
                Value::Date(d) => {
                    days_from_civil(i64::from(d.year), u32::from(d.month), u32::from(d.day))
                        * 86_400_000_000
                        - tz * 1_000_000
                }
                other => {
                    let t = text_of(&other);
                    parse_datetime_text(&t)
                        .ok_or_else(|| wrong_datetime(&t, name, row))?
                        .to_epoch_micros()
                        - tz * 1_000_000
                }
            };
            let us = round_micros(us, *fsp);
            if !(TIMESTAMP_MIN_US..=TIMESTAMP_MAX_US).contains(&us) {
                return Err(wrong_datetime(
                    &binlog_format::value::format_timestamp(us + tz * 1_000_000, 6),
                    name,
                    row,
                ));
            }
            Ok(Value::Timestamp(us))
        }
        ColumnType::Time { fsp } => {
            // Anything that is no TIME or lies past its range is "Incorrect time value" in
            // strict mode, as MySQL says it (`convert` tells them apart when lenient).
            let wrong = || {
                Error::new(
                    code::ER_TRUNCATED_WRONG_VALUE,
                    format!(
                        "Incorrect time value: '{}' for column '{name}' at row {row}",
                        text_of(&v)
                    ),
                )
            };
            let us = round_time(time_of(&v, tz).map_err(|_| wrong())?, *fsp);
            if us.abs() > TIME_MAX_MICROS {
                return Err(wrong());
            }
            Ok(Value::Time(us))
        }
        ColumnType::Bit { width } => match bit_of(&v) {
            Some(b) if b & !bit_mask(*width) == 0 => Ok(Value::Bit(b)),
            _ => Err(too_long(name, row)),
        },
    }
}

/// All the bits of a BIT(width).
pub fn bit_mask(width: u8) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// The bits a BIT column takes from `v`, as MySQL's `Field_bit::store` reads it: a number as
/// its two's-complement 64 bits (a fraction rounded), a string or byte string as its bytes,
/// big endian; `None` past 8 bytes (leading zero bytes not counted).
pub fn bit_of(v: &Value) -> Option<u64> {
    match v {
        Value::Bit(b) | Value::UInt(b) => Some(*b),
        Value::Int(i) => Some(*i as u64),
        Value::Float(_) | Value::Double(_) | Value::Decimal(_) => {
            let text = numeric_text(v)?;
            let (neg, int, frac) = parse_decimal(&text)?;
            let (rounded, _) = round_decimal(neg, &int, &frac, 0);
            let n: i128 = rounded.parse().ok()?;
            if n < i128::from(i64::MIN) || n > i128::from(u64::MAX) {
                return None;
            }
            Some(n as u64)
        }
        Value::Bytes(b) => bytes_number(b),
        Value::Text(s) => bytes_number(&raw_bytes(s)),
        other => bytes_number(text_of(other).as_bytes()),
    }
}

/// A BIT value's bytes as a string takes them: big endian, as few as its bits need (one for
/// zero).
pub fn bit_min_bytes(b: u64) -> Vec<u8> {
    binlog_format::value::bit_bytes(b, (64 - b.leading_zeros()).max(1) as u8)
}

/// Bytes as a big-endian number; `None` past 8 significant bytes.
pub fn bytes_number(b: &[u8]) -> Option<u64> {
    let start = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    let b = &b[start..];
    (b.len() <= 8).then(|| b.iter().fold(0u64, |n, &x| (n << 8) | u64::from(x)))
}

/// Why a value is no TIME.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeError {
    /// Not a time at all (`'abc'`: "Data truncated" when stored leniently, as 00:00:00).
    Invalid,
    /// Minutes or seconds past 59 (`'12:60:00'`: out of range when stored leniently, as
    /// 00:00:00).
    BadField,
    /// A time past ±838:59:59: the nearest end of the range, signed (1264).
    OutOfRange(i64),
}

/// Rounds a TIME's microseconds to `fsp` digits, halves away from zero, as MySQL rounds them
/// on insert.
pub fn round_time(us: i64, fsp: u8) -> i64 {
    let unit = 10i64.pow(6 - u32::from(fsp.min(6)));
    let a = us.abs();
    let r = (a + unit / 2) / unit * unit;
    if us < 0 {
        -r
    } else {
        r
    }
}

fn clip_time(negative: bool) -> TimeError {
    TimeError::OutOfRange(if negative {
        -TIME_MAX_MICROS
    } else {
        TIME_MAX_MICROS
    })
}

/// A TIME in microseconds from any value, as MySQL converts one: a time as it is, a
/// DATETIME's or TIMESTAMP's time of day (the latter in the session's zone), a DATE's
/// midnight, a number as `[H..]HHMMSS[.ffffff]`, text as [`parse_time_text`] reads it.
pub fn time_of(v: &Value, tz: TzOffset) -> std::result::Result<i64, TimeError> {
    match v {
        Value::Time(us) => Ok(*us),
        Value::DateTime(dt) => Ok(dt.to_epoch_micros().rem_euclid(86_400_000_000)),
        Value::Timestamp(us) => Ok((us + tz * 1_000_000).rem_euclid(86_400_000_000)),
        Value::Date(_) => Ok(0),
        Value::Int(_) | Value::UInt(_) | Value::Bit(_) | Value::Decimal(_) => {
            let text = match v {
                Value::Bit(b) => b.to_string(),
                other => numeric_text(other).unwrap_or_default(),
            };
            time_number(&text)
        }
        Value::Float(_) | Value::Double(_) => {
            let f = match v {
                Value::Float(f) => f64::from(*f),
                Value::Double(f) => *f,
                _ => 0.0,
            };
            if !f.is_finite() {
                return Err(TimeError::Invalid);
            }
            time_number(&format!("{f:.6}"))
        }
        other => parse_time_text(&text_of(other)),
    }
}

/// A number's text (`-123456.5`, `1.5e3`) as `[H..]HHMMSS[.ffffff]`; fourteen digits and
/// more are a `YYYYMMDDHHMMSS` date and time, whose time is taken.
fn time_number(text: &str) -> std::result::Result<i64, TimeError> {
    let (neg, int, frac) = parse_decimal(text).ok_or(TimeError::Invalid)?;
    let int = int.trim_start_matches('0');
    let n: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| clip_time(neg))?
    };
    let n = if n >= 10_000_000_000 {
        // YYYYMMDDHHMMSS: the time of day.
        n % 1_000_000
    } else if n > 8_385_959 {
        return Err(clip_time(neg));
    } else {
        n
    };
    hms_micros(neg, n / 10_000, n / 100 % 100, n % 100, &frac)
}

/// `h:m:s.frac` as signed microseconds: minutes and seconds below 60 (else not a time),
/// the fraction's seventh digit rounding, past 838:59:59 out of range.
fn hms_micros(
    neg: bool,
    h: u64,
    m: u64,
    s: u64,
    frac: &str,
) -> std::result::Result<i64, TimeError> {
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TimeError::Invalid);
    }
    if m > 59 || s > 59 {
        return Err(TimeError::BadField);
    }
    let mut f: String = frac.chars().take(6).collect();
    while f.len() < 6 {
        f.push('0');
    }
    let mut micros: u64 = f.parse().map_err(|_| TimeError::Invalid)?;
    if frac.as_bytes().get(6).is_some_and(|&b| b >= b'5') {
        micros += 1;
    }
    if h > 838 {
        return Err(clip_time(neg));
    }
    let us = ((h * 3600 + m * 60 + s) * 1_000_000 + micros) as i64;
    if us > TIME_MAX_MICROS {
        return Err(clip_time(neg));
    }
    Ok(if neg { -us } else { us })
}

/// A TIME's text as MySQL reads it: `[-][D ]HH:MM[:SS][.ffffff]`, `[-]HHMMSS[.ffffff]` (or
/// `MMSS`, `SS`) without colons, or a date and time, whose time is taken.
pub fn parse_time_text(s: &str) -> std::result::Result<i64, TimeError> {
    let t = s.trim();
    if let Some(dt) = parse_datetime_text(t) {
        if t.contains('-') && !t.starts_with('-') {
            return Ok(dt.to_epoch_micros().rem_euclid(86_400_000_000));
        }
    }
    let (neg, rest) = match t.strip_prefix('-') {
        Some(r) => (true, r.trim_start()),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (main, frac) = rest.split_once('.').unwrap_or((rest, ""));
    if main.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TimeError::Invalid);
    }
    let number = |x: &str| -> std::result::Result<u64, TimeError> {
        if x.is_empty() || x.len() > 12 || !x.bytes().all(|b| b.is_ascii_digit()) {
            return Err(TimeError::Invalid);
        }
        x.parse().map_err(|_| TimeError::Invalid)
    };
    // `D HH[:MM[:SS]]`: days, then hours.
    let (days, clock) = match main.split_once(' ') {
        Some((d, c)) => (Some(number(d)?), c.trim_start()),
        None => (None, main),
    };
    if days.is_none() && !clock.contains(':') {
        // Digits only: [H..]HHMMSS.
        let n = number(clock)?;
        if n > 8_385_959 {
            return if n >= 10_000_000_000 {
                time_number(&format!("{n}.{frac}"))
            } else {
                Err(clip_time(neg))
            };
        }
        return hms_micros(neg, n / 10_000, n / 100 % 100, n % 100, frac);
    }
    let mut parts = clock.split(':');
    let h = number(parts.next().unwrap_or(""))?;
    let m = parts.next().map(number).transpose()?.unwrap_or(0);
    let sec = parts.next().map(number).transpose()?.unwrap_or(0);
    if parts.next().is_some() || (days.is_some() && h > 23) {
        return Err(TimeError::Invalid);
    }
    if days.is_some_and(|d| d > 34) {
        return Err(clip_time(neg));
    }
    hms_micros(neg, days.unwrap_or(0) * 24 + h, m, sec, frac)
}

/// A YEAR's value for `v` as MySQL reads it: 1901 to 2155 as they are, a number from 1 to 69
/// 2001 to 2069 and from 70 to 99 1970 to 1999 (a string likewise, and a string of zeros
/// 2000 unless it is `'0000'`), 0 (and `'0000'`) 0; a date or time its year; else 1264 out of
/// range, 1366 (1265 for a number followed by more) for text that is no number.
fn year_value(v: &Value, name: &str, row: usize, tz: TzOffset) -> Result<Value> {
    // `zero_text`: a string of zeros that is not four digits long, which is 2000.
    let (n, zero_text) = match v {
        Value::Int(i) => (i128::from(*i), false),
        Value::UInt(u) => (i128::from(*u), false),
        Value::Date(d) => (i128::from(d.year), false),
        Value::DateTime(dt) => (i128::from(dt.date.year), false),
        Value::Timestamp(us) => (
            i128::from(DateTime::from_epoch_micros(us + tz * 1_000_000).date.year),
            false,
        ),
        other => {
            let text = numeric_text(other).unwrap_or_else(|| text_of(other));
            let (neg, int, frac) =
                parse_decimal(&text).ok_or_else(|| not_a_number("integer", &text, name, row))?;
            let (rounded, _) = round_decimal(neg, &int, &frac, 0);
            let n = rounded
                .parse::<i128>()
                .map_err(|_| out_of_range(name, row))?;
            let digits = text.trim().len();
            (
                n,
                matches!(other, Value::Text(_) | Value::Bytes(_)) && digits != 4,
            )
        }
    };
    let year = match n {
        0 if zero_text => 2000,
        0 => 0,
        1..=69 => 2000 + n,
        70..=99 => 1900 + n,
        1901..=2155 => n,
        _ => return Err(out_of_range(name, row)),
    };
    Ok(Value::Int(year as i64))
}

/// A SET's value for `v` as MySQL makes it: text is members separated by commas, found as
/// ENUM's are, kept once each in the declared order and spelling; a number is a bitmap of
/// members. `None` when a name is no member or a bit past the members is set, unless
/// `dropping`, which leaves those out.
fn set_value(v: &Value, values: &[String], ty: &ColumnType, dropping: bool) -> Option<Value> {
    let mut bits: u64 = 0;
    let number = match v {
        Value::Int(i) => Some(*i as u64),
        Value::UInt(u) => Some(*u),
        _ => None,
    };
    match number {
        Some(n) => {
            let all = if values.len() >= 64 {
                u64::MAX
            } else {
                (1u64 << values.len()) - 1
            };
            if n & !all != 0 && !dropping {
                return None;
            }
            bits = n & all;
        }
        None => {
            let text = text_of(v);
            // A number in a string that names no member is a bitmap too, as in MySQL.
            if let (None, Ok(n)) = (ty.enum_member(&text), text.trim().parse::<u64>()) {
                if !text.contains(',') {
                    return set_value(&Value::UInt(n), values, ty, dropping);
                }
            }
            for part in text.split(',').filter(|p| !p.is_empty()) {
                match ty.enum_member(part) {
                    Some(m) => {
                        let i = values.iter().position(|x| x == m).unwrap_or(0);
                        bits |= 1 << i;
                    }
                    None if dropping => {}
                    None => return None,
                }
            }
        }
    }
    let members: Vec<&str> = values
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, m)| m.as_str())
        .collect();
    Some(Value::Text(members.join(",")))
}

/// A DECIMAL(precision, scale) as MySQL accepts one for `what` (a column's name, a CAST's
/// operand): precision at most 65 (1426), scale at most 30 (1425) and not above the
/// precision (1427).
pub fn decimal_size(precision: u64, scale: u64, what: &str) -> Result<(u8, u8)> {
    if precision > 65 {
        return Err(Error::new(
            code::ER_TOO_BIG_PRECISION,
            format!("Too-big precision {precision} specified for '{what}'. Maximum is 65."),
        ));
    }
    if scale > 30 {
        return Err(Error::new(
            code::ER_TOO_BIG_SCALE,
            format!("Too big scale {scale} specified for '{what}'. Maximum is 30."),
        ));
    }
    if scale > precision {
        return Err(Error::new(
            code::ER_M_BIGGER_THAN_D,
            format!(
                "For float(M,D), double(M,D) or decimal(M,D), M must be >= D (column '{what}')."
            ),
        ));
    }
    Ok((precision.max(1) as u8, scale as u8))
}

/// [`coerce`] for a value a table already held (ALTER TABLE's copy, a verifier reading a
/// server): an ENUM's empty string, MySQL's index 0 that a bad value left, stays one
/// (strict `coerce` refuses it as an INSERT's value).
pub fn restore(v: Value, col: &ColumnDef, row: usize, tz: TzOffset) -> Result<Value> {
    match (&col.ty, &v) {
        (ColumnType::Enum { .. }, Value::Text(t)) if t.is_empty() => Ok(v),
        _ => coerce(v, col, row, tz),
    }
}

/// The diagnostic a conversion gave besides its value (a warning or a note, as SHOW WARNINGS
/// lists it): code and message, the code marked with [`NOTE_LEVEL`] for a note.
pub type Diagnostic = (u16, String);

/// Marks a diagnostic's code as a note where MySQL raises the same code as a warning too
/// (1265 is a note for a rounded DECIMAL or cut trailing spaces, a warning for a string INSERT
/// IGNORE cut): no MySQL error code reaches this bit.
pub const NOTE_LEVEL: u16 = 0x8000;

fn truncated(col: &str, row: usize) -> String {
    format!("Data truncated for column '{col}' at row {row}")
}

/// [`coerce`] for a row an INSERT or UPDATE writes, with MySQL's diagnostics: trailing spaces
/// past a VARCHAR's length are cut (a note, 1265; a CHAR's silently), a DECIMAL rounded to its scale is a
/// note (1265). With `lenient` (INSERT IGNORE), a value its column cannot hold becomes the
/// nearest one it can, with strict mode's error as a warning: NULL in a NOT NULL column its
/// type's zero (1048), a string cut to the column (1265), a number clipped to its range (1264),
/// a number read from the front of a string (1265) or none at all, 0 (1366). Other errors
/// (a date that is not one, text that is not UTF-8, JSON that does not parse) stay errors.
pub fn convert(
    v: Value,
    col: &ColumnDef,
    row: usize,
    tz: TzOffset,
    lenient: bool,
) -> Result<(Value, Option<Diagnostic>)> {
    let name = col.name.as_str();
    let mut note = None;
    let v = match (&col.ty, v) {
        // A CHAR's are cut silently, as MySQL cuts them (CHAR drops them on read anyway).
        (ColumnType::VarChar { len }, Value::Text(mut s))
            if s.len() > *len as usize && s.chars().count() > *len as usize =>
        {
            let keep = s
                .char_indices()
                .nth(*len as usize)
                .map_or(s.len(), |(i, _)| i);
            if s[keep..].bytes().all(|b| b == b' ') {
                s.truncate(keep);
                note = Some((
                    code::WARN_DATA_TRUNCATED.number | NOTE_LEVEL,
                    truncated(name, row),
                ));
            }
            Value::Text(s)
        }
        (ColumnType::Decimal { scale, .. } | ColumnType::UnsignedDecimal { scale, .. }, v) => {
            let dropped = numeric_text(&v)
                .and_then(|t| parse_decimal(&t))
                .is_some_and(|(_, _, frac)| {
                    frac.bytes().skip(usize::from(*scale)).any(|b| b != b'0')
                });
            if dropped {
                note = Some((
                    code::WARN_DATA_TRUNCATED.number | NOTE_LEVEL,
                    truncated(name, row),
                ));
            }
            v
        }
        (_, v) => v,
    };
    if !lenient {
        return coerce(v, col, row, tz).map(|x| (x, note));
    }
    let e = match coerce(v.clone(), col, row, tz) {
        Ok(x) => return Ok((x, note)),
        Err(e) => e,
    };
    let warning = |c: u16, m: String| Some((c, m));
    let c_range = || code::ER_WARN_DATA_OUT_OF_RANGE.number;
    let c = e.code;
    let adjusted = if c == code::ER_BAD_NULL_ERROR {
        Some((zero_value(&col.ty), warning(c, e.message.clone())))
    } else if let (true, ColumnType::Time { .. }) = (c == code::ER_TRUNCATED_WRONG_VALUE, &col.ty) {
        // A TIME past its range is its nearest end, minutes or seconds past 59 00:00:00,
        // both "out of range"; text that is no time 00:00:00, "data truncated".
        let range = |us| {
            Some((
                Value::Time(us),
                warning(c_range(), out_of_range(name, row).message),
            ))
        };
        match time_of(&v, tz) {
            Err(TimeError::OutOfRange(us)) => range(us),
            Err(TimeError::BadField) => range(0),
            Err(TimeError::Invalid) => Some((
                Value::Time(0),
                warning(code::WARN_DATA_TRUNCATED.number, truncated(name, row)),
            )),
            Ok(us) => range(if us < 0 {
                -TIME_MAX_MICROS
            } else {
                TIME_MAX_MICROS
            }),
        }
    } else if let (true, ColumnType::Bit { width }) = (c == code::ER_DATA_TOO_LONG, &col.ty) {
        // A BIT too long for its column takes all its bits, as MySQL stores it.
        Some((Value::Bit(bit_mask(*width)), warning(c, e.message.clone())))
    } else if c == code::ER_DATA_TOO_LONG {
        cut_to_fit(v, &col.ty).map(|x| {
            let w = warning(code::WARN_DATA_TRUNCATED.number, truncated(name, row));
            (x, w)
        })
    } else if c == code::WARN_DATA_TRUNCATED && matches!(col.ty, ColumnType::Enum { .. }) {
        // MySQL's value for an ENUM member it could not find: the empty string, index 0.
        Some((Value::Text(String::new()), warning(c, e.message.clone())))
    } else if let (true, ColumnType::Set { values }) = (c == code::WARN_DATA_TRUNCATED, &col.ty) {
        // A SET keeps the members it found and drops the rest.
        set_value(&v, values, &col.ty, true).map(|x| (x, warning(c, e.message.clone())))
    } else if c == code::ER_WARN_DATA_OUT_OF_RANGE {
        clipped(&v, &col.ty).map(|x| (x, warning(c, e.message.clone())))
    } else if c == code::WARN_DATA_TRUNCATED || c == code::ER_TRUNCATED_WRONG_VALUE_FOR_FIELD {
        // A number column given a string: the number at its front, or 0 (either clipped to
        // the column's range).
        let numeric = col.ty.is_number() || col.ty == ColumnType::Year;
        let prefix = numeric_text(&v).map(|t| number_prefix(&t).to_string());
        let number = match prefix {
            Some(p) if !p.is_empty() => Value::Decimal(p),
            _ => Value::Int(0),
        };
        numeric
            .then(|| coerce(number.clone(), col, row, tz).ok())
            .flatten()
            .or_else(|| numeric.then(|| clipped(&number, &col.ty)).flatten())
            .map(|x| (x, warning(c, e.message.clone())))
    } else {
        None
    };
    adjusted.ok_or(e)
}

/// The longest number at the front of `s` (`'12x'` → `12`, `'1.5e3kg'` → `1.5e3`), empty
/// when there is none.
fn number_prefix(s: &str) -> &str {
    let s = s.trim_start();
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    let mut any = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        let mut j = i + 1;
        if digits(&mut j) || any {
            any = true;
            i = j;
        }
    }
    if !any {
        return "";
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if digits(&mut j) {
            i = j;
        }
    }
    &s[..i]
}

/// A string or bytes cut to what a column of `ty` holds (CHAR's trailing spaces dropped).
fn cut_to_fit(v: Value, ty: &ColumnType) -> Option<Value> {
    match ty {
        ColumnType::Char { len } | ColumnType::VarChar { len } => {
            let mut s = into_text(v);
            let keep = s
                .char_indices()
                .nth(*len as usize)
                .map_or(s.len(), |(i, _)| i);
            s.truncate(keep);
            if matches!(ty, ColumnType::Char { .. }) {
                s.truncate(s.trim_end_matches(' ').len());
            }
            Some(Value::Text(s))
        }
        ColumnType::Text { size } => {
            let mut s = into_text(v);
            let mut keep = (size.max_len() as usize).min(s.len());
            while !s.is_char_boundary(keep) {
                keep -= 1;
            }
            s.truncate(keep);
            Some(Value::Text(s))
        }
        ColumnType::Binary { len } | ColumnType::VarBinary { len } => {
            let mut b = into_bytes(v);
            b.truncate(*len as usize);
            if matches!(ty, ColumnType::Binary { .. }) {
                b.resize(*len as usize, 0);
            }
            Some(Value::Bytes(b))
        }
        ColumnType::Blob { size } => {
            let mut b = into_bytes(v);
            b.truncate(size.max_len() as usize);
            Some(Value::Bytes(b))
        }
        _ => None,
    }
}

/// The end of a numeric column's range nearest to `v` (a number outside it).
fn clipped(v: &Value, ty: &ColumnType) -> Option<Value> {
    let negative = match v {
        Value::Int(i) => *i < 0,
        Value::UInt(_) => false,
        other => numeric_text(other)?.trim_start().starts_with('-'),
    };
    match ty {
        ColumnType::Integer { width, unsigned } => {
            let (lo, hi) = width.range(*unsigned);
            let n = if negative { lo } else { hi };
            Some(if *unsigned {
                Value::UInt(n as u64)
            } else {
                Value::Int(n as i64)
            })
        }
        // An UNSIGNED number below zero is 0, as MySQL clips it.
        ColumnType::UnsignedDecimal { .. } | ColumnType::Real { unsigned: true, .. }
            if negative =>
        {
            Some(zero_value(ty))
        }
        ColumnType::Real {
            double,
            digits: Some((m, d)),
            ..
        } => {
            let max = if negative {
                -real_max(*m, *d)
            } else {
                real_max(*m, *d)
            };
            Some(if *double {
                Value::Double(max)
            } else {
                Value::Float(max as f32)
            })
        }
        ColumnType::Decimal { precision, scale }
        | ColumnType::UnsignedDecimal { precision, scale } => {
            // DECIMAL(2,2)'s largest is 0.99.
            let int = match precision.saturating_sub(*scale) {
                0 => "0".to_string(),
                n => "9".repeat(usize::from(n)),
            };
            let frac = "9".repeat(usize::from(*scale));
            let sign = if negative { "-" } else { "" };
            Some(Value::Decimal(if frac.is_empty() {
                format!("{sign}{int}")
            } else {
                format!("{sign}{int}.{frac}")
            }))
        }
        // A YEAR out of its range is 0, as MySQL stores it.
        ColumnType::Year => Some(Value::Int(0)),
        // A TIME out of its range is the nearest end of it.
        ColumnType::Time { .. } => Some(Value::Time(match time_of(v, 0) {
            Err(TimeError::OutOfRange(us)) => us,
            _ if negative => -TIME_MAX_MICROS,
            _ => TIME_MAX_MICROS,
        })),
        ColumnType::Float | ColumnType::Real { double: false, .. } => {
            Some(Value::Float(if negative { f32::MIN } else { f32::MAX }))
        }
        ColumnType::Double | ColumnType::Real { double: true, .. } => {
            Some(Value::Double(if negative { f64::MIN } else { f64::MAX }))
        }
        _ => None,
    }
}

fn too_long(col: &str, row: usize) -> Error {
    Error::new(
        code::ER_DATA_TOO_LONG,
        format!("Data too long for column '{col}' at row {row}"),
    )
}

/// [`text_of`] for a value that is not needed afterwards: text and bytes are moved, not
/// copied (every inserted string passes here).
fn into_text(v: Value) -> String {
    match v {
        Value::Text(s) => s,
        Value::Bit(b) => String::from_utf8_lossy(&bit_min_bytes(b)).into_owned(),
        Value::Bytes(b) => String::from_utf8(b)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        other => other.to_string(),
    }
}

/// A query's bytes that are not UTF-8 (a binary string literal, as mysqldump writes binary
/// columns) travel in its text as one of these characters per byte, U+10FF00 plus the byte
/// (the last private-use plane's end, which no client's text uses); [`raw_bytes`] turns them
/// back, so a binary column gets the very bytes the client sent.
pub const RAW_BYTE_BASE: u32 = 0x10_FF00;

/// The text of a query's bytes: UTF-8 as it is, any other byte as its raw-byte character
/// ([`RAW_BYTE_BASE`]).
pub fn query_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for &b in chunk.invalid() {
            out.push(char::from_u32(RAW_BYTE_BASE + u32::from(b)).unwrap_or('\u{fffd}'));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether `s` holds raw-byte characters ([`RAW_BYTE_BASE`]).
fn has_raw_bytes(s: &str) -> bool {
    // Each is encoded F4 8F BC..BF xx: no other text has 0xF4 followed by 0x8F 0xBC..0xBF.
    s.as_bytes().contains(&0xF4) && s.chars().any(|c| u32::from(c) >= RAW_BYTE_BASE)
}

/// A string's bytes, its raw-byte characters turned back into the bytes they stand for.
pub fn raw_bytes(s: &str) -> Vec<u8> {
    if !has_raw_bytes(s) {
        return s.as_bytes().to_vec();
    }
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        match u32::from(c).checked_sub(RAW_BYTE_BASE) {
            Some(b) => out.push(b as u8),
            None => out.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes()),
        }
    }
    out
}

/// Error 1366 for text that holds bytes that are not UTF-8, as MySQL refuses them for a
/// utf8mb4 column: `\xFF` for each, as its message shows them.
fn check_utf8(s: &str, col: &str, row: usize) -> Result<()> {
    if !has_raw_bytes(s) {
        return Ok(());
    }
    let shown: String = raw_bytes(s)
        .iter()
        .take(8)
        .map(|b| {
            if b.is_ascii_graphic() {
                (*b as char).to_string()
            } else {
                format!("\\x{b:02X}")
            }
        })
        .collect();
    Err(Error::new(
        code::ER_TRUNCATED_WRONG_VALUE_FOR_FIELD,
        format!("Incorrect string value: '{shown}' for column '{col}' at row {row}"),
    ))
}

/// A value as bytes: bytes as they are, anything else as its text.
fn into_bytes(v: Value) -> Vec<u8> {
    match v {
        Value::Bytes(b) => b,
        Value::Bit(b) => bit_min_bytes(b),
        Value::Text(s) => raw_bytes(&s),
        other => text_of(&other).into_bytes(),
    }
}

/// A value as text, as MySQL converts it to a string (bytes as UTF-8, lossily).
pub fn text_of(v: &Value) -> String {
    match v {
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.to_string(),
    }
}

/// The value a column gets when an INSERT leaves it out. `None` means the column has no
/// default (an error for NOT NULL columns in strict mode).
pub fn default_value(col: &ColumnDef, now_us: i64, tz: TzOffset) -> Option<Value> {
    match &col.default {
        ColumnDefault::Value(v) => Some(v.clone()),
        ColumnDefault::CurrentTimestamp { fsp } => {
            let unit = 10i64.pow(6 - u32::from((*fsp).min(6)));
            let us = now_us.div_euclid(unit) * unit;
            Some(match col.ty {
                ColumnType::DateTime { .. } => {
                    Value::DateTime(DateTime::from_epoch_micros(us + tz * 1_000_000))
                }
                _ => Value::Timestamp(us),
            })
        }
        ColumnDefault::None | ColumnDefault::Generated { .. } if col.nullable => Some(Value::Null),
        // An ENUM NOT NULL without a DEFAULT has its first member, as in MySQL.
        ColumnDefault::None if matches!(col.ty, ColumnType::Enum { .. }) => {
            Some(zero_value(&col.ty))
        }
        ColumnDefault::None | ColumnDefault::Generated { .. } => None,
    }
}

/// The "zero" of a type, for NOT NULL columns of meta rows.
pub fn zero_value(ty: &ColumnType) -> Value {
    match ty {
        ColumnType::Integer { unsigned: true, .. } => Value::UInt(0),
        ColumnType::Integer { .. } => Value::Int(0),
        ColumnType::Decimal { scale, .. } | ColumnType::UnsignedDecimal { scale, .. } => {
            Value::Decimal(if *scale == 0 {
                "0".into()
            } else {
                format!("0.{}", "0".repeat(usize::from(*scale)))
            })
        }
        ColumnType::Float | ColumnType::Real { double: false, .. } => Value::Float(0.0),
        ColumnType::Double | ColumnType::Real { double: true, .. } => Value::Double(0.0),
        ColumnType::Char { .. } | ColumnType::VarChar { .. } | ColumnType::Text { .. } => {
            Value::Text(String::new())
        }
        ColumnType::Binary { len } => Value::Bytes(vec![0; *len as usize]),
        ColumnType::VarBinary { .. } | ColumnType::Blob { .. } => Value::Bytes(vec![]),
        ColumnType::Json => Value::Json("null".into()),
        ColumnType::Date => Value::Date(Date {
            year: 0,
            month: 1,
            day: 1,
        }),
        ColumnType::DateTime { .. } => Value::DateTime(DateTime {
            date: Date {
                year: 0,
                month: 1,
                day: 1,
            },
            hour: 0,
            minute: 0,
            second: 0,
            micros: 0,
        }),
        ColumnType::Timestamp { .. } => Value::Timestamp(TIMESTAMP_MIN_US),
        // MySQL's implicit default of an ENUM: its first member.
        ColumnType::Enum { values } => Value::Text(values.first().cloned().unwrap_or_default()),
        ColumnType::Set { .. } => Value::Text(String::new()),
        ColumnType::Year => Value::Int(0),
        ColumnType::Time { .. } => Value::Time(0),
        ColumnType::Bit { .. } => Value::Bit(0),
    }
}

/// The largest value of a TTL column's type: what a meta row holds there, so it never expires.
pub(crate) fn ttl_max(ty: &ColumnType) -> Value {
    match ty {
        ColumnType::DateTime { .. } => Value::DateTime(DateTime {
            date: Date {
                year: 9999,
                month: 12,
                day: 31,
            },
            hour: 23,
            minute: 59,
            second: 59,
            micros: 0,
        }),
        _ => Value::Timestamp(2_147_483_647_000_000),
    }
}

/// When a row with TTL value `v` expires, in epoch microseconds (`None`: never).
pub fn expiry_us(v: &Value, seconds: u32) -> Option<i64> {
    let base = match v {
        Value::Timestamp(us) => *us,
        Value::DateTime(dt) => dt.to_epoch_micros(),
        Value::Date(d) => days_from_civil(i64::from(d.year), u32::from(d.month), u32::from(d.day))
            .saturating_mul(86_400_000_000),
        _ => return None,
    };
    // Saturating: a time past any real one (a value the row took in a lenient write) is
    // simply never reached, not an overflow.
    Some(base.saturating_add(i64::from(seconds) * 1_000_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TTL base past any real time saturates instead of overflowing.
    #[test]
    fn expiry_saturates() {
        assert_eq!(
            expiry_us(&Value::Timestamp(i64::MAX - 5), u32::MAX),
            Some(i64::MAX)
        );
        let far = Value::Date(Date {
            year: u16::MAX,
            month: 12,
            day: 31,
        });
        assert!(expiry_us(&far, u32::MAX).is_some());
        assert_eq!(expiry_us(&Value::Timestamp(0), 2), Some(2_000_000));
    }
    use binlog_format::schema::IntWidth;

    fn col(ty: ColumnType) -> ColumnDef {
        ColumnDef {
            name: "c".into(),
            ty,
            nullable: true,
            default: ColumnDefault::None,
            on_update_now: false,
            auto_increment: false,
            comment: String::new(),
        }
    }

    #[test]
    fn numbers_at_the_front_of_strings() {
        for (s, n) in [
            ("12x", "12"),
            (" -7.5kg", "-7.5"),
            ("1.5e3m", "1.5e3"),
            ("1e", "1"),
            (".5.", ".5"),
            ("5.", "5."),
            ("abc", ""),
            ("-", ""),
            ("", ""),
        ] {
            assert_eq!(number_prefix(s), n, "{s:?}");
        }
    }

    /// Strict conversions note what they cut quietly; INSERT IGNORE's (`lenient`) adjust
    /// what strict mode refuses and say so with strict mode's code.
    #[test]
    fn conversions_note_and_adjust_as_mysql() {
        let conv = |v: Value, ty: ColumnType, lenient: bool| {
            convert(v, &col(ty), 1, 0, lenient).map(|(v, d)| (v, d.map(|(c, _)| c)))
        };
        let note = code::WARN_DATA_TRUNCATED.number | NOTE_LEVEL;
        let vc3 = || ColumnType::VarChar { len: 3 };
        let text = |s: &str| Value::Text(s.into());
        assert_eq!(
            conv(text("ab   "), vc3(), false),
            Ok((text("ab "), Some(note)))
        );
        assert_eq!(
            conv(text("abcd"), vc3(), false).map_err(|e| e.code),
            Err(1406)
        );
        assert_eq!(
            conv(text("abcd"), vc3(), true),
            Ok((text("abc"), Some(1265)))
        );
        let dec = || ColumnType::Decimal {
            precision: 5,
            scale: 2,
        };
        let d = |s: &str| Value::Decimal(s.into());
        assert_eq!(conv(d("1.005"), dec(), false), Ok((d("1.01"), Some(note))));
        assert_eq!(conv(d("1.500"), dec(), false), Ok((d("1.50"), None)));
        assert_eq!(
            conv(d("-12345"), dec(), true),
            Ok((d("-999.99"), Some(1264)))
        );
        let tiny = || ColumnType::Integer {
            width: IntWidth::Tiny,
            unsigned: false,
        };
        assert_eq!(
            conv(Value::Int(300), tiny(), true),
            Ok((Value::Int(127), Some(1264)))
        );
        assert_eq!(
            conv(text("12x"), tiny(), false).map_err(|e| e.code),
            Err(1265)
        );
        assert_eq!(
            conv(text("12x"), tiny(), true),
            Ok((Value::Int(12), Some(1265)))
        );
        assert_eq!(
            conv(text("999x"), tiny(), true),
            Ok((Value::Int(127), Some(1265)))
        );
        assert_eq!(
            conv(text("abc"), tiny(), true),
            Ok((Value::Int(0), Some(1366)))
        );
        assert_eq!(
            conv(Value::Double(3.4e39), ColumnType::Float, false).map_err(|e| e.code),
            Err(1264)
        );
        let mut not_null = col(tiny());
        not_null.nullable = false;
        assert_eq!(
            convert(Value::Null, &not_null, 1, 0, true).map(|(v, d)| (v, d.map(|(c, _)| c))),
            Ok((Value::Int(0), Some(1048)))
        );
        // What no adjustment makes right stays an error.
        assert_eq!(
            conv(text("not a date"), ColumnType::Date, true).map_err(|e| e.code),
            Err(1292)
        );
    }

    /// Lengths count characters, not bytes; CHAR drops trailing spaces.
    #[test]
    fn query_bytes_that_are_not_utf8_round_trip_into_binary_columns() {
        let text = query_text(b"x'\xff\x00\xc3\xa9\x80'");
        assert_eq!(raw_bytes(&text), b"x'\xff\x00\xc3\xa9\x80'");
        assert!(matches!(
            query_text(b"plain \xc3\xa9"),
            std::borrow::Cow::Borrowed(_)
        ));
        // Text of other planes is left alone.
        assert_eq!(
            raw_bytes("\u{10FEFF}\u{1F600}"),
            "\u{10FEFF}\u{1F600}".as_bytes()
        );
        let blob = ColumnDef {
            name: "b".into(),
            ty: ColumnType::VarBinary { len: 8 },
            nullable: true,
            default: ColumnDefault::None,
            on_update_now: false,
            auto_increment: false,
            comment: String::new(),
        };
        let raw = Value::Text(query_text(b"\xfe\xff").into_owned());
        assert_eq!(
            coerce(raw.clone(), &blob, 1, 0),
            Ok(Value::Bytes(vec![0xfe, 0xff]))
        );
        let text = ColumnDef {
            ty: ColumnType::VarChar { len: 8 },
            ..blob
        };
        let e = coerce(raw, &text, 2, 0).expect_err("not UTF-8");
        assert_eq!(
            e.message,
            "Incorrect string value: '\\xFE\\xFF' for column 'b' at row 2"
        );
    }

    #[test]
    fn strings_are_length_checked_in_characters() {
        let text = |s: &str| Value::Text(s.into());
        let varchar = col(ColumnType::VarChar { len: 3 });
        assert_eq!(coerce(text("abc"), &varchar, 1, 0), Ok(text("abc")));
        assert_eq!(coerce(text("ééé"), &varchar, 1, 0), Ok(text("ééé")));
        assert_eq!(coerce(text("ab "), &varchar, 1, 0), Ok(text("ab ")));
        // Spaces past the length are cut in any mode (`convert` notes it), as in MySQL.
        assert_eq!(coerce(text("ab  "), &varchar, 1, 0), Ok(text("ab ")));
        for long in ["abcd", "éééé", "ab c"] {
            let e = coerce(text(long), &varchar, 2, 0).expect_err(long);
            assert_eq!(e.code, code::ER_DATA_TOO_LONG, "{long}");
            assert_eq!(e.message, "Data too long for column 'c' at row 2");
        }
        let char3 = col(ColumnType::Char { len: 3 });
        assert_eq!(coerce(text("ab "), &char3, 1, 0), Ok(text("ab")));
        assert_eq!(coerce(text("é  "), &char3, 1, 0), Ok(text("é")));
        assert_eq!(coerce(text("   "), &char3, 1, 0), Ok(text("")));
        assert!(coerce(text("abcd"), &char3, 1, 0).is_err());
    }

    #[test]
    fn integers_are_range_checked_and_rounded() {
        let tiny = col(ColumnType::Integer {
            width: IntWidth::Tiny,
            unsigned: false,
        });
        assert_eq!(coerce(Value::Int(127), &tiny, 1, 0), Ok(Value::Int(127)));
        assert_eq!(
            coerce(Value::Int(128), &tiny, 1, 0).map_err(|e| e.code),
            Err(code::ER_WARN_DATA_OUT_OF_RANGE.number)
        );
        assert_eq!(
            coerce(Value::Text("12".into()), &tiny, 1, 0),
            Ok(Value::Int(12))
        );
        assert_eq!(
            coerce(Value::Decimal("2.5".into()), &tiny, 1, 0),
            Ok(Value::Int(3))
        );
        let u = col(ColumnType::Integer {
            width: IntWidth::Int,
            unsigned: true,
        });
        assert_eq!(
            coerce(Value::Int(-1), &u, 1, 0).map_err(|e| e.code),
            Err(code::ER_WARN_DATA_OUT_OF_RANGE.number)
        );
    }

    #[test]
    fn decimals_are_rounded_to_scale() {
        let d = col(ColumnType::Decimal {
            precision: 5,
            scale: 2,
        });
        assert_eq!(
            coerce(Value::Decimal("1.005".into()), &d, 1, 0),
            Ok(Value::Decimal("1.01".into()))
        );
        assert_eq!(
            coerce(Value::Int(-3), &d, 1, 0),
            Ok(Value::Decimal("-3.00".into()))
        );
        assert!(coerce(Value::Int(1000), &d, 1, 0).is_err());
    }

    #[test]
    fn unsigned_decimals_refuse_negatives_before_rounding() {
        let d = col(ColumnType::UnsignedDecimal {
            precision: 5,
            scale: 2,
        });
        let out = Err(code::ER_WARN_DATA_OUT_OF_RANGE.number);
        assert_eq!(coerce(Value::Int(-3), &d, 1, 0).map_err(|e| e.code), out);
        assert_eq!(
            coerce(Value::Decimal("-0.001".into()), &d, 1, 0).map_err(|e| e.code),
            out
        );
        assert_eq!(
            coerce(Value::Decimal("-0.00".into()), &d, 1, 0),
            Ok(Value::Decimal("0.00".into()))
        );
        assert_eq!(
            coerce(Value::Decimal("999.994".into()), &d, 1, 0),
            Ok(Value::Decimal("999.99".into()))
        );
        // INSERT IGNORE clips a negative to 0, with strict mode's error as a warning.
        let (v, w) = convert(Value::Int(-3), &d, 1, 0, true).expect("lenient");
        assert_eq!(v, Value::Decimal("0.00".into()));
        assert_eq!(w.map(|w| w.0), Some(1264));
    }

    #[test]
    fn sized_floats_round_to_their_digits_and_check_their_range() {
        let f = col(ColumnType::Real {
            double: false,
            digits: Some((7, 4)),
            unsigned: false,
        });
        assert_eq!(
            coerce(Value::Double(12.34567), &f, 1, 0),
            Ok(Value::Float(12.3457))
        );
        assert_eq!(
            coerce(Value::Double(-999.99994), &f, 1, 0),
            Ok(Value::Float(-999.9999))
        );
        assert_eq!(
            coerce(Value::Int(1000), &f, 1, 0).map_err(|e| e.code),
            Err(1264)
        );
        let (v, _) = convert(Value::Int(1000), &f, 1, 0, true).expect("lenient");
        assert_eq!(v, Value::Float(999.9999));
        let d = col(ColumnType::Real {
            double: true,
            digits: Some((5, 2)),
            unsigned: true,
        });
        // Ties go to even, as C's rint: 2.125 is exact in binary and becomes 2.12.
        assert_eq!(
            coerce(Value::Double(2.125), &d, 1, 0),
            Ok(Value::Double(2.12))
        );
        assert_eq!(
            coerce(Value::Double(-0.5), &d, 1, 0).map_err(|e| e.code),
            Err(1264)
        );
        let (v, _) = convert(Value::Int(-7), &d, 1, 0, true).expect("lenient");
        assert_eq!(v, Value::Double(0.0));
    }

    #[test]
    fn timestamps_parse_and_round() {
        let t = col(ColumnType::Timestamp { fsp: 3 });
        assert_eq!(
            coerce(Value::Text("2024-01-02 03:04:05.1236".into()), &t, 1, 0),
            Ok(Value::Timestamp(1_704_164_645_124_000))
        );
        assert!(coerce(Value::Text("2024-02-30".into()), &t, 1, 0).is_err());
        assert!(coerce(Value::Text("2040-01-01".into()), &t, 1, 0).is_err());
    }

    /// TIME from strings and numbers as MySQL 8 reads them, with its errors.
    #[test]
    fn times_parse_round_and_check_their_range() {
        let t = col(ColumnType::Time { fsp: 0 });
        let t3 = col(ColumnType::Time { fsp: 3 });
        let us = |h: i64, m: i64, s: i64| ((h * 60 + m) * 60 + s) * 1_000_000;
        let ok = |c: &ColumnDef, v: Value| coerce(v, c, 1, 0).map_err(|e| e.code);
        let text = |s: &str| Value::Text(s.into());
        assert_eq!(ok(&t, text("12:34:56")), Ok(Value::Time(us(12, 34, 56))));
        assert_eq!(ok(&t, text("-1 02:03:04")), Ok(Value::Time(-us(26, 3, 4))));
        assert_eq!(ok(&t, text("123456")), Ok(Value::Time(us(12, 34, 56))));
        assert_eq!(ok(&t, text("1234")), Ok(Value::Time(us(0, 12, 34))));
        assert_eq!(ok(&t, text("12:34")), Ok(Value::Time(us(12, 34, 0))));
        assert_eq!(ok(&t, text("838:59:59")), Ok(Value::Time(us(838, 59, 59))));
        assert_eq!(
            ok(&t, text("-838:59:59")),
            Ok(Value::Time(-us(838, 59, 59)))
        );
        assert_eq!(
            ok(&t, text("2024-01-02 03:04:05")),
            Ok(Value::Time(us(3, 4, 5)))
        );
        assert_eq!(ok(&t, Value::Int(123456)), Ok(Value::Time(us(12, 34, 56))));
        assert_eq!(ok(&t, Value::Int(-5)), Ok(Value::Time(-us(0, 0, 5))));
        assert_eq!(
            ok(&t3, Value::Decimal("123456.7891".into())),
            Ok(Value::Time(us(12, 34, 56) + 789_000))
        );
        // Rounded to the column's digits.
        assert_eq!(ok(&t, text("12:34:56.5")), Ok(Value::Time(us(12, 34, 57))));
        assert_eq!(ok(&t3, text("00:00:00.0005")), Ok(Value::Time(1000)));
        // Past the range or not a time: 1292 in strict mode, as MySQL 8 says both.
        for bad in [
            text("839:00:00"),
            text("35 00:00:00"),
            Value::Int(8_400_000),
            text("838:59:59.5"),
            text("12:60:00"),
            text("abc"),
            Value::Int(1270),
        ] {
            assert_eq!(ok(&t, bad.clone()), Err(1292), "{bad:?}");
        }
        let e = coerce(text("839:00:00"), &t, 1, 0).expect_err("range");
        assert_eq!(
            e.message,
            "Incorrect time value: '839:00:00' for column 'c' at row 1"
        );
        // INSERT IGNORE: the range's end, or 00:00:00, with MySQL's warnings.
        for (v, stored, warned) in [
            (text("-900:00:00"), -us(838, 59, 59), 1264),
            (text("12:60:00"), 0, 1264),
            (text("bad"), 0, 1265),
        ] {
            let (got, w) = convert(v, &t, 1, 0, true).expect("lenient");
            assert_eq!(got, Value::Time(stored));
            assert_eq!(w.map(|w| w.0), Some(warned));
        }
        // As a number: HHMMSS.
        assert_eq!(
            coerce(
                Value::Time(-us(12, 34, 56)),
                &col(ColumnType::Integer {
                    width: binlog_format::schema::IntWidth::Int,
                    unsigned: false
                }),
                1,
                0
            ),
            Ok(Value::Int(-123456))
        );
    }

    /// BIT takes numbers as their bits and strings as their bytes; too many bits is 1406
    /// (all ones, with the warning, under INSERT IGNORE).
    #[test]
    fn bits_take_numbers_and_bytes() {
        let b5 = col(ColumnType::Bit { width: 5 });
        let b64 = col(ColumnType::Bit { width: 64 });
        let ok = |c: &ColumnDef, v: Value| coerce(v, c, 1, 0).map_err(|e| e.code);
        assert_eq!(ok(&b5, Value::Int(31)), Ok(Value::Bit(31)));
        assert_eq!(ok(&b5, Value::Bytes(vec![0, 5])), Ok(Value::Bit(5)));
        assert_eq!(ok(&b5, Value::Text("\u{1}".into())), Ok(Value::Bit(1)));
        assert_eq!(ok(&b5, Value::Decimal("2.5".into())), Ok(Value::Bit(3)));
        assert_eq!(ok(&b5, Value::Int(32)), Err(1406));
        assert_eq!(ok(&b5, Value::Int(-1)), Err(1406));
        assert_eq!(ok(&b64, Value::Int(-1)), Ok(Value::Bit(u64::MAX)));
        assert_eq!(ok(&b64, Value::Bytes(vec![1; 9])), Err(1406));
        let (v, w) = convert(Value::Int(99), &b5, 1, 0, true).expect("lenient");
        assert_eq!(v, Value::Bit(31));
        assert_eq!(w.map(|w| w.0), Some(1406));
    }
}
