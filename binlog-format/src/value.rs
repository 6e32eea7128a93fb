//! Column values as they travel in the binlog, and a total order over them for keys.
//!
//! Layout (bincode 2, see `docs/format.md`): a `Value` is its variant index as a varint
//! followed by the variant's fields. Variant indices are part of the format: new variants are
//! only ever appended.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A calendar date as MySQL's DATE stores it (no time zone).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    bincode::Encode,
    bincode::Decode,
)]
pub struct Date {
    /// The year, 0 to 9999.
    pub year: u16,
    /// The month, 1 to 12.
    pub month: u8,
    /// The day of the month, 1 to 31.
    pub day: u8,
}

/// A wall-clock date and time with microseconds, as MySQL's DATETIME(6) stores it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    bincode::Encode,
    bincode::Decode,
)]
pub struct DateTime {
    /// The calendar date.
    pub date: Date,
    /// Hour of the day, 0 to 23.
    pub hour: u8,
    /// Minute, 0 to 59.
    pub minute: u8,
    /// Second, 0 to 59.
    pub second: u8,
    /// Microseconds within the second, 0 to 999,999, whatever the column's fsp.
    pub micros: u32,
}

/// One column value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub enum Value {
    /// SQL NULL. Index 0.
    Null,
    /// Any signed integer column (TINYINT..BIGINT). Index 1.
    Int(i64),
    /// Any UNSIGNED integer column. Index 2.
    UInt(u64),
    /// FLOAT. Index 3.
    Float(f32),
    /// DOUBLE. Index 4.
    Double(f64),
    /// DECIMAL, as its canonical decimal text (`-12.50` for DECIMAL(p,2)), so that no precision
    /// is lost and every language can parse it. Index 5.
    Decimal(String),
    /// BINARY, VARBINARY, BLOB. Index 6. (Read and written as one byte string, not byte by
    /// byte; the bytes on disk are the same: length, then the bytes.)
    Bytes(#[serde(with = "serde_bytes")] Vec<u8>),
    /// CHAR, VARCHAR, TEXT (UTF-8). Index 7.
    Text(String),
    /// DATE. Index 8.
    Date(Date),
    /// DATETIME(p), microseconds always carried. Index 9.
    DateTime(DateTime),
    /// TIMESTAMP(p): microseconds since 1970-01-01 00:00:00 UTC. Index 10.
    Timestamp(i64),
    /// JSON, as its text. Index 11.
    Json(String),
    /// TIME(p): a signed duration in microseconds, -838:59:59.000000 to 838:59:59.000000
    /// (±3,020,399,000,000), microseconds always carried. Index 12.
    Time(i64),
    /// BIT(M): the column's bits as an unsigned number, M ≤ 64. Index 13.
    Bit(u64),
}

impl Value {
    /// Whether this is SQL NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Rank of the variant in the total order used for keys. Integers of both signs compare
    /// by numeric value, so they share a rank.
    fn rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Int(_) | Value::UInt(_) => 1,
            Value::Float(_) | Value::Double(_) => 2,
            Value::Decimal(_) => 3,
            Value::Bytes(_) => 4,
            Value::Text(_) => 5,
            Value::Date(_) => 6,
            Value::DateTime(_) => 7,
            Value::Timestamp(_) => 8,
            Value::Json(_) => 9,
            Value::Time(_) => 10,
            Value::Bit(_) => 11,
        }
    }

    /// A total order: NULL first, numbers by value, floats by `total_cmp`, decimals by value,
    /// bytes and JSON bytewise, text by the text collation ([`crate::collation`]: without case
    /// or accents, so `Text("Bob")` and `Text("bob")` are equal here although `==` tells them
    /// apart). Used for primary keys and for the verifier's key order.
    #[inline]
    pub fn total_cmp(&self, other: &Value) -> Ordering {
        use Value::*;
        match (self, other) {
            (Int(a), Int(b)) => a.cmp(b),
            (UInt(a), UInt(b)) => a.cmp(b),
            (Int(a), UInt(b)) => cmp_i64_u64(*a, *b),
            (UInt(a), Int(b)) => cmp_i64_u64(*b, *a).reverse(),
            (Float(a), Float(b)) => a.total_cmp(b),
            (Double(a), Double(b)) => a.total_cmp(b),
            (Float(a), Double(b)) => f64::from(*a).total_cmp(b),
            (Double(a), Float(b)) => a.total_cmp(&f64::from(*b)),
            (Decimal(a), Decimal(b)) => cmp_decimal_text(a, b),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            (Text(a), Text(b)) => crate::collation::cmp(a, b),
            (Date(a), Date(b)) => a.cmp(b),
            (DateTime(a), DateTime(b)) => a.cmp(b),
            (Timestamp(a), Timestamp(b)) => a.cmp(b),
            (Json(a), Json(b)) => a.cmp(b),
            (Time(a), Time(b)) => a.cmp(b),
            (Bit(a), Bit(b)) => a.cmp(b),
            (Null, Null) => Ordering::Equal,
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

fn cmp_i64_u64(a: i64, b: u64) -> Ordering {
    if a < 0 {
        Ordering::Less
    } else {
        (a as u64).cmp(&b)
    }
}

/// Compares two canonical decimal strings by numeric value without floating point.
fn cmp_decimal_text(a: &str, b: &str) -> Ordering {
    let (na, ia, fa) = decimal_parts(a);
    let (nb, ib, fb) = decimal_parts(b);
    let zero_a = ia.is_empty() && fa.is_empty();
    let zero_b = ib.is_empty() && fb.is_empty();
    let neg_a = na && !zero_a;
    let neg_b = nb && !zero_b;
    match (neg_a, neg_b) {
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    let magnitude = ia
        .len()
        .cmp(&ib.len())
        .then_with(|| ia.cmp(ib))
        .then_with(|| fa.cmp(fb));
    if neg_a {
        magnitude.reverse()
    } else {
        magnitude
    }
}

/// A canonical decimal text as (negative, integer digits without leading zeros, fraction
/// digits without trailing zeros). Zero has both parts empty, whatever its sign.
pub fn decimal_parts(s: &str) -> (bool, &str, &str) {
    let (neg, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
    (neg, int.trim_start_matches('0'), frac.trim_end_matches('0'))
}

/// A primary key (or any tuple of values) with the total order of [`Value::total_cmp`].
/// Equality and hashing follow that order, so `Int(5)` and `UInt(5)` are the same key, and so
/// are `Text("Bob")` and `Text("bob")`; the values keep what they were given.
#[derive(Debug, Clone, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct Key(
    /// The values, in key order.
    pub Vec<Value>,
);

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        Key::hash_values(&self.0, h);
    }
}

impl Key {
    /// Hashes key values as `Key`'s `Hash` does (keys that compare equal hash alike), for a
    /// caller that has the values but no `Key`.
    pub fn hash_values<H: std::hash::Hasher>(values: &[Value], h: &mut H) {
        Key::hash_iter(values.len(), values, h);
    }

    /// `hash_values` for the `len` values of a key that is not in one slice (a key being
    /// assembled from a row's columns): hashes as the `Key` of these values would.
    pub fn hash_iter<'v, H: std::hash::Hasher>(
        len: usize,
        values: impl IntoIterator<Item = &'v Value>,
        h: &mut H,
    ) {
        use std::hash::Hash;
        len.hash(h);
        for v in values {
            match v {
                Value::Null => 0u8.hash(h),
                // An unsigned value equal to a signed one hashes like it; one past the
                // signed range equals no signed value and may hash any way.
                Value::Int(i) => (1u8, *i).hash(h),
                Value::UInt(u) => match i64::try_from(*u) {
                    Ok(i) => (1u8, i).hash(h),
                    Err(_) => (10u8, *u).hash(h),
                },
                Value::Float(f) => (2u8, f64::from(*f).to_bits()).hash(h),
                Value::Double(f) => (2u8, f.to_bits()).hash(h),
                Value::Decimal(d) => {
                    let (neg, int, frac) = decimal_parts(d);
                    let zero = int.is_empty() && frac.is_empty();
                    (3u8, neg && !zero, int, frac).hash(h)
                }
                Value::Bytes(b) => (4u8, b).hash(h),
                Value::Text(s) => {
                    5u8.hash(h);
                    crate::collation::hash(s, h);
                }
                Value::Date(d) => (6u8, d).hash(h),
                Value::DateTime(d) => (7u8, d).hash(h),
                Value::Timestamp(t) => (8u8, t).hash(h),
                Value::Json(s) => (9u8, s).hash(h),
                Value::Time(t) => (11u8, t).hash(h),
                Value::Bit(b) => (12u8, b).hash(h),
            }
        }
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        for (a, b) in self.0.iter().zip(other.0.iter()) {
            let o = a.total_cmp(b);
            if o != Ordering::Equal {
                return o;
            }
        }
        self.0.len().cmp(&other.0.len())
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:02}:{:02}:{:02}",
            self.date, self.hour, self.minute, self.second
        )?;
        if self.micros != 0 {
            write!(f, ".{:06}", self.micros)?;
        }
        Ok(())
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// The date of a day number since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

impl DateTime {
    /// Microseconds since the epoch, reading this wall-clock time as UTC.
    pub fn to_epoch_micros(&self) -> i64 {
        let days = days_from_civil(
            i64::from(self.date.year),
            u32::from(self.date.month),
            u32::from(self.date.day),
        );
        let secs = days * 86400
            + i64::from(self.hour) * 3600
            + i64::from(self.minute) * 60
            + i64::from(self.second);
        secs * 1_000_000 + i64::from(self.micros)
    }

    /// The UTC wall-clock time of an epoch-microsecond instant.
    pub fn from_epoch_micros(us: i64) -> DateTime {
        let secs = us.div_euclid(1_000_000);
        let micros = us.rem_euclid(1_000_000) as u32;
        let days = secs.div_euclid(86400);
        let sod = secs.rem_euclid(86400);
        let (y, m, d) = civil_from_days(days);
        DateTime {
            date: Date {
                year: y.clamp(0, 9999) as u16,
                month: m as u8,
                day: d as u8,
            },
            hour: (sod / 3600) as u8,
            minute: (sod % 3600 / 60) as u8,
            second: (sod % 60) as u8,
            micros,
        }
    }
}

/// Formats a TIMESTAMP value (epoch microseconds) as UTC text with `fsp` fraction digits.
pub fn format_timestamp(us: i64, fsp: u8) -> String {
    format_datetime(&DateTime::from_epoch_micros(us), fsp)
}

/// Formats a DATETIME with exactly `fsp` fraction digits, as MySQL prints DATETIME(fsp).
pub fn format_datetime(dt: &DateTime, fsp: u8) -> String {
    let base = format!(
        "{} {:02}:{:02}:{:02}",
        dt.date, dt.hour, dt.minute, dt.second
    );
    if fsp == 0 {
        return base;
    }
    let frac = format!("{:06}", dt.micros);
    format!("{base}.{}", &frac[..usize::from(fsp.min(6))])
}

/// The largest TIME magnitude, 838:59:59, in microseconds (MySQL's TIME_MAX_VALUE; a
/// fraction past it is out of range too).
pub const TIME_MAX_MICROS: i64 = 3_020_399_000_000;

/// Formats a TIME value (signed microseconds) as MySQL prints TIME(fsp): `[-]HH:MM:SS`, the
/// hours at least two digits, then `fsp` fraction digits.
pub fn format_time(us: i64, fsp: u8) -> String {
    let sign = if us < 0 { "-" } else { "" };
    let a = us.unsigned_abs();
    let secs = a / 1_000_000;
    let base = format!(
        "{sign}{:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    );
    if fsp == 0 {
        return base;
    }
    let frac = format!("{:06}", a % 1_000_000);
    format!("{base}.{}", &frac[..usize::from(fsp.min(6))])
}

/// A BIT(M) value's bytes as MySQL sends and stores them: big endian, `ceil(M / 8)` of them
/// (at least one).
pub fn bit_bytes(v: u64, width: u8) -> Vec<u8> {
    let n = usize::from(width.clamp(1, 64)).div_ceil(8);
    v.to_be_bytes()[8 - n..].to_vec()
}

/// A DOUBLE's text as MySQL writes it (its `my_gcvt`): the shortest digits that read back
/// as the same number, written out in full from 1e-15 to below 1e15 (and wherever a
/// fraction is left, `1234567890123456.8`), with an exponent otherwise (`1e15`, `1.5e-16`).
pub fn double_text(x: f64) -> String {
    float_text(x, None)
}

/// A FLOAT's text as MySQL writes it: as [`double_text`] with at most six significant
/// digits (FLOAT's precision in decimal), so a stored 0.1 reads 0.1 and 123456789 reads
/// 123457000.
pub fn float_text(x: f64, digits: Option<usize>) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // `{:e}` is the shortest form that reads back (`1.2345e-7`); `{:.N$e}` rounds to N+1
    // significant digits, whose zeros at the end then go.
    let sci = match digits {
        None => format!("{:e}", x.abs()),
        Some(n) => format!("{:.*e}", n.saturating_sub(1), x.abs()),
    };
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    let len = digits.len() as i32;
    // The decimal point sits after `point` digits: 0.DIGITS x 10^point.
    let point = exp + 1;
    let mut out = String::with_capacity(24);
    if x < 0.0 {
        out.push('-');
    }
    // MySQL's MAX_DECPT_FOR_F_FORMAT (DBL_DIG, 15) bounds the plain form.
    if point >= -14 && (point <= 15 || len > point) {
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', point.unsigned_abs() as usize));
            out.push_str(&digits);
        } else if point < len {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        } else {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', (point - len) as usize));
        }
    } else {
        out.push_str(&digits[..1]);
        if len > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push_str(&exp.to_string());
    }
    out
}

impl fmt::Display for Value {
    /// Text as the `mysql` client prints it in batch mode (NULL for NULL, bytes raw when they
    /// are UTF-8, else hex with 0x).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::Int(v) => write!(f, "{v}"),
            Value::UInt(v) => write!(f, "{v}"),
            Value::Float(v) => f.write_str(&float_text(f64::from(*v), Some(6))),
            Value::Double(v) => f.write_str(&double_text(*v)),
            Value::Decimal(v) | Value::Text(v) | Value::Json(v) => f.write_str(v),
            Value::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => f.write_str(s),
                Err(_) => {
                    f.write_str("0x")?;
                    for x in b {
                        write!(f, "{x:02X}")?;
                    }
                    Ok(())
                }
            },
            Value::Date(d) => write!(f, "{d}"),
            Value::DateTime(d) => write!(f, "{d}"),
            Value::Timestamp(us) => f.write_str(&format_timestamp(
                *us,
                if us % 1_000_000 == 0 { 0 } else { 6 },
            )),
            Value::Time(us) => {
                f.write_str(&format_time(*us, if us % 1_000_000 == 0 { 0 } else { 6 }))
            }
            Value::Bit(b) => write!(f, "{b}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Floating-point text as MySQL 8 prints it.
    #[test]
    fn floating_point_text_is_mysqls() {
        for (x, text) in [
            (1e20, "1e20"),
            (1e15, "1e15"),
            (1e14, "100000000000000"),
            (123456789012345678.0, "1.2345678901234568e17"),
            (1234567890123456.7, "1234567890123456.8"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.0 / 3.0, "0.3333333333333333"),
            (1e-15, "0.000000000000001"),
            (1.5e-16, "1.5e-16"),
            (-2.5e-300, "-2.5e-300"),
            (-12.5, "-12.5"),
            (100.0, "100"),
            (f64::MAX, "1.7976931348623157e308"),
            (0.0, "0"),
        ] {
            assert_eq!(double_text(x), text, "{x:e}");
        }
        for (x, text) in [
            (0.1f32, "0.1"),
            (1.2345678f32, "1.23457"),
            (123456789f32, "123457000"),
            (1e20f32, "1e20"),
            (-1.5f32, "-1.5"),
            (999999.5f32, "1000000"),
        ] {
            assert_eq!(Value::Float(x).to_string(), text, "{x:e}");
        }
    }

    /// Keys that compare equal hash alike (maps of keys rely on it), however their
    /// integers are held.
    #[test]
    fn equal_keys_hash_alike() {
        use std::hash::BuildHasher;
        let h = std::collections::hash_map::RandomState::new();
        let pairs = [
            (Value::Int(5), Value::UInt(5)),
            (Value::Int(0), Value::UInt(0)),
            (Value::Int(i64::MAX), Value::UInt(i64::MAX as u64)),
            (Value::Decimal("1.50".into()), Value::Decimal("1.5".into())),
        ];
        for (a, b) in pairs {
            let (ka, kb) = (Key(vec![Value::Int(1), a]), Key(vec![Value::Int(1), b]));
            assert_eq!(ka, kb);
            assert_eq!(h.hash_one(&ka), h.hash_one(&kb), "{ka:?} and {kb:?}");
        }
    }

    #[test]
    fn integers_of_both_signs_order_by_value() {
        assert_eq!(Value::Int(-1).total_cmp(&Value::UInt(0)), Ordering::Less);
        assert_eq!(Value::Int(5).total_cmp(&Value::UInt(5)), Ordering::Equal);
        assert_eq!(
            Value::UInt(u64::MAX).total_cmp(&Value::Int(i64::MAX)),
            Ordering::Greater
        );
    }

    #[test]
    fn decimals_order_by_value() {
        let d = |s: &str| Value::Decimal(s.into());
        assert_eq!(d("10.5").total_cmp(&d("9.75")), Ordering::Greater);
        assert_eq!(d("-10.5").total_cmp(&d("-9.75")), Ordering::Less);
        assert_eq!(d("0.50").total_cmp(&d("0.5")), Ordering::Equal);
        assert_eq!(d("-0.00").total_cmp(&d("0")), Ordering::Equal);
    }

    #[test]
    fn null_sorts_first_in_keys() {
        let a = Key(vec![Value::Null]);
        let b = Key(vec![Value::Int(i64::MIN)]);
        assert!(a < b);
    }

    #[test]
    fn times_print_as_mysql_and_order_by_value() {
        assert_eq!(format_time(0, 0), "00:00:00");
        assert_eq!(format_time(-TIME_MAX_MICROS, 0), "-838:59:59");
        assert_eq!(format_time(45_296_123_456, 3), "12:34:56.123");
        assert_eq!(format_time(-500_000, 6), "-00:00:00.500000");
        assert_eq!(Value::Time(-1).total_cmp(&Value::Time(0)), Ordering::Less);
        assert_eq!(bit_bytes(5, 5), vec![5]);
        assert_eq!(bit_bytes(0x1ff, 9), vec![1, 0xff]);
        assert_eq!(bit_bytes(u64::MAX, 64), vec![0xff; 8]);
        assert_eq!(Value::Bit(3).total_cmp(&Value::Bit(10)), Ordering::Less);
    }

    #[test]
    fn epoch_micros_round_trip() {
        for us in [0i64, 1, -1, 1_700_000_000_123_456, 2_147_483_647_000_000] {
            assert_eq!(DateTime::from_epoch_micros(us).to_epoch_micros(), us);
        }
        assert_eq!(
            format_timestamp(2_147_483_647_000_000, 0),
            "2038-01-19 03:14:07"
        );
    }
}
