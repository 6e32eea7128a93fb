//! Primary keys as order-preserving bytes: comparing two encodings bytewise gives the order of
//! [`Key`](binlog_format::Key) (that is, of [`Value::total_cmp`] column by column), and two
//! keys encode to the same bytes exactly when they are equal (`Int(5)` and `UInt(5)`
//! included). Stored rows are kept in key order under these bytes, so a lookup or a prefix
//! scan compares plain byte strings instead of walking `Value`s, and a key costs a few bytes
//! instead of a `Vec`.
//!
//! Every value's encoding is self-delimiting (nothing that follows can change how it compares),
//! so a key's encoding is its columns' encodings one after another, and the keys starting with
//! a prefix of columns are exactly those whose bytes start with the prefix's bytes.
//!
//! Text encodes as its collation weight (`binlog_format::collation`), not its bytes, so keys
//! that differ only in case or accents are one key, as `Key` says.
//!
//! This is an in-memory layout only: nothing here is written to the binlog or to snapshots.

use binlog_format::value::{decimal_parts, Date, DateTime};
use binlog_format::Value;

/// Appends the order-preserving encoding of one value.
pub(crate) fn push_value(v: &Value, out: &mut Vec<u8>) {
    // The first byte is the value's rank in `total_cmp`: values of different ranks compare
    // by rank alone.
    match v {
        Value::Null => out.push(0),
        Value::Int(i) => {
            out.push(1);
            push_int(i128::from(*i), out);
        }
        Value::UInt(u) => {
            out.push(1);
            push_int(i128::from(*u), out);
        }
        Value::Float(f) => {
            out.push(2);
            push_f64(f64::from(*f), out);
        }
        Value::Double(f) => {
            out.push(2);
            push_f64(*f, out);
        }
        Value::Decimal(d) => {
            out.push(3);
            push_decimal(d, out);
        }
        Value::Bytes(b) => {
            out.push(4);
            push_escaped(b, out);
        }
        Value::Text(s) => {
            out.push(5);
            push_text(s, out);
        }
        Value::Date(d) => {
            out.push(6);
            push_date(d, out);
        }
        Value::DateTime(DateTime {
            date,
            hour,
            minute,
            second,
            micros,
        }) => {
            out.push(7);
            push_date(date, out);
            out.extend_from_slice(&[*hour, *minute, *second]);
            out.extend_from_slice(&micros.to_be_bytes());
        }
        Value::Timestamp(t) => {
            out.push(8);
            out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::Json(s) => {
            out.push(9);
            push_escaped(s.as_bytes(), out);
        }
        Value::Time(t) => {
            out.push(10);
            out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::Bit(b) => {
            out.push(11);
            out.extend_from_slice(&b.to_be_bytes());
        }
    }
}

/// The encoding of a whole key (or of a key prefix).
pub(crate) fn encode(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 4);
    for v in values {
        push_value(v, &mut out);
    }
    out
}

/// Calls `f` with the encoding of a key given as its values, built in a buffer of this
/// thread's rather than a new allocation (every row lookup and write encodes a key). `f`
/// must not call `with_key` or `with_key_split` itself (they share the buffer).
pub(crate) fn with_key<'v, T>(
    values: impl Iterator<Item = &'v Value>,
    f: impl FnOnce(&[u8]) -> T,
) -> T {
    with_key_split(values, |k, _, _| f(k))
}

/// As [`with_key`], also telling `f` where the last value's encoding starts, and what that
/// value is: a ring files its rows by prefix (the bytes before the last value) and slot.
pub(crate) fn with_key_split<'v, T>(
    values: impl Iterator<Item = &'v Value>,
    f: impl FnOnce(&[u8], usize, Option<&'v Value>) -> T,
) -> T {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|cell| {
        let mut out = cell.borrow_mut();
        out.clear();
        let (mut start, mut last) = (0, None);
        for v in values {
            start = out.len();
            last = Some(v);
            push_value(v, &mut out);
        }
        f(&out, start, last)
    })
}

/// Integers of both signs by numeric value, in as few bytes as the value needs: a length class
/// byte, then the significant bytes big endian. Non-negative values have classes 0x80 + n
/// (more bytes, larger value); negative ones 0x7f - n, where n counts the significant bytes
/// of the magnitude minus one, followed by the low n bytes of the two's complement (which
/// order negative numbers of one length correctly).
fn push_int(i: i128, out: &mut Vec<u8>) {
    if i >= 0 {
        let n = significant(i as u128);
        out.push(0x80 + n as u8);
        out.extend_from_slice(&(i as u128).to_be_bytes()[16 - n..]);
    } else {
        let n = significant(!i as u128);
        out.push(0x7f - n as u8);
        out.extend_from_slice(&(i as u128).to_be_bytes()[16 - n..]);
    }
}

/// How many bytes `x` needs, big endian without its leading zero bytes (0 for 0).
fn significant(x: u128) -> usize {
    16 - x.leading_zeros() as usize / 8
}

/// IEEE 754 bits made to sort like `f64::total_cmp`: negative numbers have every bit flipped,
/// the others only the sign bit.
fn push_f64(f: f64, out: &mut Vec<u8>) {
    let bits = f.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    };
    out.extend_from_slice(&ordered.to_be_bytes());
}

/// Decimals by numeric value: a sign class (0 negative, 1 zero, 2 positive), then the
/// magnitude as the integer part's digit count, its digits and the fraction's digits (escaped
/// and terminated). Negative magnitudes have every byte flipped, so larger ones sort first.
fn push_decimal(d: &str, out: &mut Vec<u8>) {
    let (neg, int, frac) = decimal_parts(d);
    if int.is_empty() && frac.is_empty() {
        out.push(1);
        return;
    }
    out.push(if neg { 0 } else { 2 });
    let start = out.len();
    out.extend_from_slice(&u32::try_from(int.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(int.as_bytes());
    push_escaped(frac.as_bytes(), out);
    if neg {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
}

/// Byte strings: each 0x00 becomes 0x00 0xff and the end is 0x00 0x00, so a string sorts
/// before every longer string it is a prefix of and no encoding is a prefix of another.
fn push_escaped(b: &[u8], out: &mut Vec<u8>) {
    out.reserve(b.len() + 2);
    b.iter().for_each(|&x| push_escaped_byte(x, out));
    out.extend_from_slice(&[0, 0]);
}

/// Text by its collation weight (`binlog_format::collation`), escaped as `push_escaped`
/// escapes bytes: keys that differ only in case or accents share their bytes.
fn push_text(s: &str, out: &mut Vec<u8>) {
    out.reserve(s.len() + 2);
    binlog_format::collation::weight_bytes(s, |x| push_escaped_byte(x, out));
    out.extend_from_slice(&[0, 0]);
}

/// One byte of an escaped string (see [`push_escaped`]).
#[inline]
fn push_escaped_byte(x: u8, out: &mut Vec<u8>) {
    out.push(x);
    if x == 0 {
        out.push(0xff);
    }
}

fn push_date(d: &Date, out: &mut Vec<u8>) {
    out.extend_from_slice(&d.year.to_be_bytes());
    out.extend_from_slice(&[d.month, d.day]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::Key;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::Int),
            (-300i64..300).prop_map(Value::Int),
            any::<u64>().prop_map(Value::UInt),
            (0u64..300).prop_map(Value::UInt),
            any::<f32>()
                .prop_filter("not NaN", |f| !f.is_nan())
                .prop_map(Value::Float),
            any::<f64>()
                .prop_filter("not NaN", |f| !f.is_nan())
                .prop_map(Value::Double),
            ("-?[0-9]{0,4}", "[0-9]{0,3}").prop_map(|(i, f)| Value::Decimal(if f.is_empty() {
                format!("{i}0")
            } else {
                format!("{i}0.{f}")
            })),
            proptest::collection::vec(prop_oneof![Just(0u8), Just(255u8), any::<u8>()], 0..6)
                .prop_map(Value::Bytes),
            "[aAbBéE\\x00 ]{0,5}".prop_map(Value::Text),
            (1u16..3000, 1u8..13, 1u8..29).prop_map(|(year, month, day)| Value::Date(Date {
                year,
                month,
                day
            })),
            (1u16..3000, 0u8..24, 0u32..1_000_000).prop_map(|(year, hour, micros)| {
                Value::DateTime(DateTime {
                    date: Date {
                        year,
                        month: 1,
                        day: 1,
                    },
                    hour,
                    minute: 0,
                    second: 0,
                    micros,
                })
            }),
            (any::<i64>()).prop_map(Value::Timestamp),
            "[{}a]{0,3}".prop_map(Value::Json),
            any::<i64>().prop_map(Value::Time),
            (-5i64..5).prop_map(Value::Time),
            any::<u64>().prop_map(Value::Bit),
        ]
    }

    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::Int),
            (-70_000i64..70_000).prop_map(Value::Int),
            any::<u64>().prop_map(Value::UInt),
            (0u64..70_000).prop_map(Value::UInt),
            ("-?[0-9]{0,3}", "[0-9]{0,3}").prop_map(|(i, f)| Value::Decimal(format!("{i}.{f}"))),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Bytewise order of the encodings is the order of the keys, equality included.
        #[test]
        fn bytes_order_like_keys(a in proptest::collection::vec(value(), 0..3),
                                 b in proptest::collection::vec(value(), 0..3)) {
            let (ka, kb) = (Key(a.clone()), Key(b.clone()));
            prop_assert_eq!(encode(&a).cmp(&encode(&b)), ka.cmp(&kb), "{:?} vs {:?}", a, b);
        }

        /// The same within one kind of value, where the encodings do the real work.
        #[test]
        fn bytes_order_like_numbers(a in number(), b in number()) {
            prop_assert_eq!(
                encode(std::slice::from_ref(&a)).cmp(&encode(std::slice::from_ref(&b))),
                a.total_cmp(&b),
                "{:?} vs {:?}", a, b
            );
        }

        /// A key prefix's bytes start every key with those leading columns.
        #[test]
        fn prefixes_are_byte_prefixes(a in proptest::collection::vec(value(), 1..4), n in 0usize..4) {
            let n = n.min(a.len());
            prop_assert!(encode(&a).starts_with(&encode(&a[..n])));
        }
    }

    #[test]
    fn equal_numbers_of_either_sign_share_bytes() {
        assert_eq!(encode(&[Value::Int(5)]), encode(&[Value::UInt(5)]));
        assert_eq!(
            encode(&[Value::Decimal("1.50".into())]),
            encode(&[Value::Decimal("01.5".into())])
        );
        assert_eq!(
            encode(&[Value::Decimal("-0.00".into())]),
            encode(&[Value::Decimal("0".into())])
        );
        assert_eq!(
            encode(&[Value::Int(-1)]).cmp(&encode(&[Value::UInt(0)])),
            Ordering::Less
        );
        // Text keys by collation: case and accents do not count, trailing spaces do.
        let text = |s: &str| encode(&[Value::Text(s.into())]);
        assert_eq!(text("Bob"), text("bOB"));
        assert_eq!(text("Élan"), text("elan"));
        assert_ne!(text("bob"), text("bob "));
        assert_eq!(text("a").cmp(&text("B")), Ordering::Less);
        // A ring key (user id, slot) takes seven bytes.
        assert_eq!(encode(&[Value::Int(4711), Value::Int(17)]).len(), 7);
    }
}
