//! Exact DECIMAL arithmetic with MySQL's result types.
//!
//! A DECIMAL is exact in MySQL: `balance + 0.01` on a DECIMAL(20,2) of 17 integer digits
//! must not go through a double (which holds about 16 significant digits), or an UPDATE
//! stores a different number than the one it computed. Integers and DECIMALs meeting in an
//! expression are therefore computed here, on a big integer and a scale, with the scales
//! MySQL gives the results: the larger operand scale for `+`, `-` and `%`, their sum for `*`,
//! the dividend's plus `div_precision_increment` (4) for `/`; at most 30 digits after the
//! point and 65 in all. A DOUBLE or a string on either side still makes the result a DOUBLE,
//! as in MySQL.

use std::cmp::Ordering;

use binlog_format::value::Value;
use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{Signed, ToPrimitive, Zero};
use ringrep_engine::error::{code, Error, Result};

/// Digits after the point a DECIMAL result keeps at most (MySQL's `DECIMAL_MAX_SCALE`).
pub(crate) const MAX_SCALE: u32 = 30;
/// Digits a DECIMAL holds at most (MySQL's `DECIMAL_MAX_PRECISION`).
const MAX_DIGITS: usize = 65;
/// Digits a division adds to its dividend's scale (MySQL's `div_precision_increment`).
pub(crate) const DIV_INCREMENT: u32 = 4;

/// An exact decimal number: `mantissa × 10^-scale`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dec {
    mantissa: BigInt,
    scale: u32,
}

impl Dec {
    /// The value of an integer or a DECIMAL; `None` for any other type (or a DECIMAL text
    /// that is not a plain decimal number).
    pub(crate) fn of(v: &Value) -> Option<Dec> {
        match v {
            Value::Int(i) => Some(Dec::of_int(BigInt::from(*i))),
            Value::UInt(u) | Value::Bit(u) => Some(Dec::of_int(BigInt::from(*u))),
            Value::Decimal(s) => Dec::parse(s),
            // A TIME in arithmetic is its number, HHMMSS[.ffffff], as in MySQL.
            Value::Time(us) => Dec::parse(&ringrep_engine::types::time_number_text(*us)),
            _ => None,
        }
    }

    /// An integer.
    pub(crate) fn int(i: i64) -> Dec {
        Dec::of_int(BigInt::from(i))
    }

    /// A big integer.
    pub(crate) fn of_int(mantissa: BigInt) -> Dec {
        Dec { mantissa, scale: 0 }
    }

    /// A decimal number's text: an optional sign, digits, an optional point and digits.
    pub(crate) fn parse(s: &str) -> Option<Dec> {
        let s = s.trim();
        let (negative, body) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
            return None;
        }
        let mut mantissa: BigInt = format!("0{int}{frac}").parse().ok()?;
        if negative {
            mantissa = -mantissa;
        }
        Some(Dec {
            mantissa,
            scale: u32::try_from(frac.len()).ok()?,
        })
    }

    /// Digits after the point.
    pub(crate) fn scale(&self) -> u32 {
        self.scale
    }

    /// This number with `scale` digits after the point, rounded half away from zero (as
    /// MySQL rounds a DECIMAL) when that drops digits.
    pub(crate) fn rescale(&self, scale: u32) -> Dec {
        let mantissa = match scale.cmp(&self.scale) {
            Ordering::Equal => self.mantissa.clone(),
            Ordering::Greater => &self.mantissa * pow10(scale - self.scale),
            Ordering::Less => div_round(&self.mantissa, &pow10(self.scale - scale)),
        };
        Dec { mantissa, scale }
    }

    /// `self + other`, at the larger of their scales.
    pub(crate) fn add(&self, other: &Dec) -> Dec {
        let s = self.scale.max(other.scale);
        Dec {
            mantissa: self.rescale(s).mantissa + other.rescale(s).mantissa,
            scale: s,
        }
    }

    /// `self - other`, at the larger of their scales.
    pub(crate) fn sub(&self, other: &Dec) -> Dec {
        let s = self.scale.max(other.scale);
        Dec {
            mantissa: self.rescale(s).mantissa - other.rescale(s).mantissa,
            scale: s,
        }
    }

    /// `self × other`, at the sum of their scales (at most [`MAX_SCALE`], rounded).
    pub(crate) fn mul(&self, other: &Dec) -> Dec {
        let exact = Dec {
            mantissa: &self.mantissa * &other.mantissa,
            scale: self.scale + other.scale,
        };
        if exact.scale > MAX_SCALE {
            exact.rescale(MAX_SCALE)
        } else {
            exact
        }
    }

    /// `self ÷ other` with `scale` digits after the point, rounded half away from zero;
    /// `None` for a division by zero.
    pub(crate) fn div(&self, other: &Dec, scale: u32) -> Option<Dec> {
        if other.mantissa.is_zero() {
            return None;
        }
        // self.m·10^-sa ÷ other.m·10^-sb = (self.m·10^(scale+sb)) ÷ (other.m·10^sa) · 10^-scale
        let num = &self.mantissa * pow10(scale + other.scale);
        let den = &other.mantissa * pow10(self.scale);
        Some(Dec {
            mantissa: div_round(&num, &den),
            scale,
        })
    }

    /// The quotient of a division as MySQL's `/` types it: the dividend's scale plus
    /// [`DIV_INCREMENT`].
    pub(crate) fn divide(&self, other: &Dec) -> Option<Dec> {
        self.div(other, (self.scale + DIV_INCREMENT).min(MAX_SCALE))
    }

    /// `self MOD other`: the remainder of a truncating division, with the dividend's sign, at
    /// the larger of the scales; `None` for a division by zero.
    pub(crate) fn rem(&self, other: &Dec) -> Option<Dec> {
        let s = self.scale.max(other.scale);
        let divisor = other.rescale(s).mantissa;
        if divisor.is_zero() {
            return None;
        }
        Some(Dec {
            mantissa: self.rescale(s).mantissa % divisor,
            scale: s,
        })
    }

    /// `self DIV other`: the quotient truncated toward zero; `None` for a division by zero.
    pub(crate) fn div_trunc(&self, other: &Dec) -> Option<BigInt> {
        if other.mantissa.is_zero() {
            return None;
        }
        let num = &self.mantissa * pow10(other.scale);
        let den = &other.mantissa * pow10(self.scale);
        Some(num / den)
    }

    /// The largest integer not above this number.
    pub(crate) fn floor(&self) -> BigInt {
        self.mantissa.div_floor(&pow10(self.scale))
    }

    /// The smallest integer not below this number.
    pub(crate) fn ceil(&self) -> BigInt {
        -((-&self.mantissa).div_floor(&pow10(self.scale)))
    }

    /// This number rounded to `digits` after the point (before it when negative), half away
    /// from zero, as MySQL's ROUND does a DECIMAL; the result keeps `max(digits, 0)` digits
    /// after the point.
    pub(crate) fn round(&self, digits: i64) -> Dec {
        if digits >= 0 {
            return self.rescale(u32::try_from(digits).unwrap_or(MAX_SCALE).min(MAX_SCALE));
        }
        let shift = u32::try_from(-digits)
            .unwrap_or(u32::MAX)
            .min(MAX_DIGITS as u32 + 1);
        let unit = pow10(self.scale + shift);
        Dec {
            mantissa: div_round(&self.mantissa, &unit) * pow10(shift),
            scale: 0,
        }
    }

    /// The number as a value: a BIGINT (or BIGINT UNSIGNED) when `integer` and it fits, else
    /// a DECIMAL; error 1690 past 65 digits (the caller names the expression).
    pub(crate) fn into_value(self, integer: bool) -> Result<Value> {
        if integer && self.scale == 0 {
            if let Some(i) = self.mantissa.to_i64() {
                return Ok(Value::Int(i));
            }
            if let Some(u) = self.mantissa.to_u64() {
                return Ok(Value::UInt(u));
            }
        }
        // Past 65 digits MySQL gives up digits after the point first, then fails.
        let digits = self.mantissa.abs().to_string().len();
        let int_digits = digits.saturating_sub(self.scale as usize);
        if int_digits > MAX_DIGITS {
            return Err(Error::new(
                code::ER_DATA_OUT_OF_RANGE,
                "DECIMAL value is out of range",
            ));
        }
        let fitted = if int_digits + self.scale as usize > MAX_DIGITS {
            self.rescale((MAX_DIGITS - int_digits) as u32)
        } else {
            self
        };
        Ok(Value::Decimal(fitted.to_string()))
    }

    /// The number as a DECIMAL value (see [`Dec::into_value`]).
    pub(crate) fn into_decimal(self) -> Result<Value> {
        self.into_value(false)
    }
}

impl std::fmt::Display for Dec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scale = self.scale as usize;
        let digits = self.mantissa.abs().to_string();
        // At least one digit before the point.
        let digits = if digits.len() <= scale {
            format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
        } else {
            digits
        };
        // MySQL prints no sign on a zero.
        if self.mantissa.is_negative() {
            f.write_str("-")?;
        }
        let (int, frac) = digits.split_at(digits.len() - scale);
        f.write_str(int)?;
        if scale > 0 {
            write!(f, ".{frac}")?;
        }
        Ok(())
    }
}

fn pow10(n: u32) -> BigInt {
    num_traits::pow(BigInt::from(10u8), n as usize)
}

/// `n ÷ d` rounded half away from zero.
fn div_round(n: &BigInt, d: &BigInt) -> BigInt {
    let (q, r) = n.div_rem(d);
    if r.abs() * 2u8 >= d.abs() {
        if n.is_negative() == d.is_negative() {
            q + 1u8
        } else {
            q - 1u8
        }
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(s: &str) -> Dec {
        Dec::parse(s).expect(s)
    }

    #[test]
    fn results_have_mysqls_scales_and_are_exact() {
        let big = d("12345678901234567.89");
        assert_eq!(big.add(&d("0.01")).to_string(), "12345678901234567.90");
        assert_eq!(big.mul(&d("2")).to_string(), "24691357802469135.78");
        assert_eq!(d("2.50").mul(&d("2")).to_string(), "5.00");
        assert_eq!(d("0.1").add(&d("0.2")).to_string(), "0.3");
        assert_eq!(
            d("1").divide(&d("3")).expect("a value").to_string(),
            "0.3333"
        );
        assert_eq!(
            d("2").divide(&d("3")).expect("a value").to_string(),
            "0.6667"
        );
        assert_eq!(
            d("-2").divide(&d("3")).expect("a value").to_string(),
            "-0.6667"
        );
        assert_eq!(
            d("10.50").divide(&d("4")).expect("a value").to_string(),
            "2.625000"
        );
        assert_eq!(d("1").divide(&d("0")), None);
        assert_eq!(d("10.5").rem(&d("3")).expect("a value").to_string(), "1.5");
        assert_eq!(d("-7").rem(&d("3")).expect("a value").to_string(), "-1");
        assert_eq!(
            d("7.5").div_trunc(&d("2")).expect("a value"),
            BigInt::from(3)
        );
        assert_eq!(
            d("-7.5").div_trunc(&d("2")).expect("a value"),
            BigInt::from(-3)
        );
        assert_eq!(d("0.10").sub(&d("0.1")).to_string(), "0.00");
        assert_eq!(d("-0.001").rescale(2).to_string(), "0.00");
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(d("2.5").round(0).to_string(), "3");
        assert_eq!(d("-2.5").round(0).to_string(), "-3");
        assert_eq!(d("1.245").round(2).to_string(), "1.25");
        assert_eq!(d("1.5").round(3).to_string(), "1.500");
        assert_eq!(d("1250").round(-2).to_string(), "1300");
        assert_eq!(d("-1249.99").round(-2).to_string(), "-1200");
        assert_eq!(d("-2.5").floor(), BigInt::from(-3));
        assert_eq!(d("-2.5").ceil(), BigInt::from(-2));
        assert_eq!(d("2.0").ceil(), BigInt::from(2));
    }

    #[test]
    fn past_65_digits_is_1690() {
        let nines = d(&"9".repeat(40));
        let e = nines.mul(&nines).into_decimal().expect_err("out of range");
        let wide = d(&format!("{}.{}", "1".repeat(60), "2".repeat(10)));
        assert_eq!(
            wide.into_decimal().expect("a value"),
            Value::Decimal(format!("{}.22222", "1".repeat(60)))
        );
        assert_eq!(e.code, code::ER_DATA_OUT_OF_RANGE);
        assert!(d(&"9".repeat(65)).into_decimal().is_ok());
        assert_eq!(
            Dec::of(&Value::UInt(u64::MAX))
                .expect("a value")
                .into_value(true)
                .expect("a value"),
            Value::UInt(u64::MAX)
        );
    }

    proptest! {
        /// Against i128 arithmetic on the mantissas at a common scale.
        #[test]
        fn matches_integer_arithmetic(a in -1_000_000_000i64..1_000_000_000, b in -1_000_000_000i64..1_000_000_000, sa in 0u32..6, sb in 0u32..6) {
            let x = Dec { mantissa: BigInt::from(a), scale: sa };
            let y = Dec { mantissa: BigInt::from(b), scale: sb };
            let s = sa.max(sb);
            let (ai, bi) = (i128::from(a) * 10i128.pow(s - sa), i128::from(b) * 10i128.pow(s - sb));
            prop_assert_eq!(x.add(&y).mantissa, BigInt::from(ai + bi));
            prop_assert_eq!(x.sub(&y).mantissa, BigInt::from(ai - bi));
            prop_assert_eq!(x.mul(&y), Dec { mantissa: BigInt::from(i128::from(a) * i128::from(b)), scale: sa + sb });
            prop_assert_eq!(Dec::parse(&x.to_string()).expect("a value"), x.clone());
            if b != 0 {
                prop_assert_eq!(x.rem(&y).expect("a value").mantissa, BigInt::from(ai % bi));
                prop_assert_eq!(x.div_trunc(&y).expect("a value"), BigInt::from(ai / bi));
                // The rounded quotient is within half a unit of its last digit.
                let q = x.divide(&y).expect("a value");
                let exact = (a as f64 / 10f64.powi(sa as i32)) / (b as f64 / 10f64.powi(sb as i32));
                let got: f64 = q.to_string().parse().expect("a value");
                prop_assert!((got - exact).abs() <= 0.5 * 10f64.powi(-(q.scale as i32)) * (1.0 + 1e-9) + exact.abs() * 1e-12);
            }
        }
    }
}
