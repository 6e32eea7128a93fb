//! Function calls. [`eval_function`] handles the calls that are not plain functions of their
//! argument values (aggregates, `VALUES(col)`, date arithmetic with its INTERVAL), evaluates
//! the arguments of the rest, and hands the call to the families in [`FAMILIES`] in turn:
//! hex and hashes, string building, string lengths and case, substrings, date and time,
//! numbers, choices among the arguments, and facts about the session.

use std::cmp::Ordering;

use binlog_format::value::{DateTime, Value};
use sqlparser::ast::{BinaryOperator, DateTimeField};

use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::types::text_of;

use super::context::Ctx;
use super::decimal::Dec;
use super::value::{arith, arity, compare, int_result, render, time_us, to_f64, truthy, unhex};

/// A family of functions: the value of a call by its upper-case name and evaluated
/// arguments, or `None` when the name is not one of the family's.
pub(super) type Family = fn(&str, &Args, &Ctx<'_>) -> Result<Option<Value>>;

/// Every family of functions of plain argument values. No two share a name.
pub(super) const FAMILIES: &[Family] = &[
    hex_and_hash,
    string_building,
    string_length_and_case,
    substrings,
    date_and_time,
    numeric,
    choice,
    session_info,
    string_search_and_edit,
    date_parts,
    formatting_and_identity,
    user_locks,
    sleep,
];

/// A call's evaluated arguments; an argument past the end reads as NULL.
pub(super) struct Args(pub(super) Vec<Value>);

impl Args {
    /// Argument `i`, NULL when there is none.
    fn arg(&self, i: usize) -> Value {
        self.0.get(i).cloned().unwrap_or(Value::Null)
    }

    /// Argument `i` as text.
    fn text(&self, i: usize) -> String {
        text_of(&self.arg(i))
    }

    /// Whether any argument is NULL (most string functions are then NULL).
    fn any_null(&self) -> bool {
        self.0.iter().any(Value::is_null)
    }

    /// Argument `i` as a count: a number, negative and missing ones as 0.
    fn count(&self, i: usize) -> usize {
        to_f64(&self.arg(i)).unwrap_or(0.0).max(0.0) as usize
    }
}

/// An interval's length: exact microseconds, or calendar months (which vary in length).
pub(super) enum IntervalAmount {
    Micros(i64),
    Months(i64),
}

/// `amount unit` as an interval.
pub(super) fn interval_us(amount: &Value, unit: &DateTimeField) -> Result<IntervalAmount> {
    let n = to_f64(amount).ok_or_else(|| Error::syntax("INTERVAL needs a number"))?;
    let us = |mult: f64| Ok(IntervalAmount::Micros((n * mult).round() as i64));
    match unit {
        DateTimeField::Microsecond | DateTimeField::Microseconds => us(1.0),
        DateTimeField::Second | DateTimeField::Seconds => us(1e6),
        DateTimeField::Minute | DateTimeField::Minutes => us(60e6),
        DateTimeField::Hour | DateTimeField::Hours => us(3600e6),
        DateTimeField::Day | DateTimeField::Days => us(86400e6),
        DateTimeField::Week(_) | DateTimeField::Weeks => us(7.0 * 86400e6),
        DateTimeField::Month | DateTimeField::Months => Ok(IntervalAmount::Months(n as i64)),
        DateTimeField::Year | DateTimeField::Years => Ok(IntervalAmount::Months(n as i64 * 12)),
        other => Err(Error::unsupported(format!("INTERVAL unit {other}"))),
    }
}

/// `base` moved by `sign` times `amount`, of `base`'s kind of time (NULL when `base` is not
/// a time).
pub(super) fn add_interval(base: &Value, amount: IntervalAmount, sign: i64, tz: i64) -> Value {
    let Some(us) = time_us(base, tz) else {
        return Value::Null;
    };
    let shifted = match amount {
        IntervalAmount::Micros(m) => us + sign * m,
        IntervalAmount::Months(m) => {
            let dt = DateTime::from_epoch_micros(us + tz * 1_000_000);
            let total = i64::from(dt.date.year) * 12 + i64::from(dt.date.month) - 1 + sign * m;
            let (y, mo) = (total.div_euclid(12), total.rem_euclid(12) + 1);
            let mut d = dt;
            d.date.year = y.clamp(0, 9999) as u16;
            d.date.month = mo as u8;
            d.to_epoch_micros() - tz * 1_000_000
        }
    };
    match base {
        Value::Timestamp(_) => Value::Timestamp(shifted),
        Value::Date(_) => Value::Date(DateTime::from_epoch_micros(shifted + tz * 1_000_000).date),
        _ => Value::DateTime(DateTime::from_epoch_micros(shifted + tz * 1_000_000)),
    }
}

/// Bytes as upper-case hex digits.
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

/// HEX, UNHEX, SHA1 and SHA.
fn hex_and_hash(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    Ok(Some(match name {
        "HEX" => match args.arg(0) {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Text(hex(&b)),
            Value::Int(i) => Value::Text(format!("{:X}", i)),
            Value::UInt(u) | Value::Bit(u) => Value::Text(format!("{u:X}")),
            other => Value::Text(hex(text_of(&other).as_bytes())),
        },
        "SHA1" | "SHA" => match args.arg(0) {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Text(sha1_smol::Sha1::from(&b).digest().to_string()),
            v => Value::Text(
                sha1_smol::Sha1::from(render(&v, None, ctx.tz).unwrap_or_default().as_bytes())
                    .digest()
                    .to_string(),
            ),
        },
        "UNHEX" => match args.arg(0) {
            Value::Null => Value::Null,
            v => unhex(&text_of(&v)).map(Value::Bytes).unwrap_or(Value::Null),
        },
        _ => return Ok(None),
    }))
}

/// CONCAT, CONCAT_WS, REPEAT, LPAD and RPAD.
fn string_building(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    let rendered = |v: &Value| render(v, None, ctx.tz).unwrap_or_default();
    Ok(Some(match name {
        "CONCAT" => {
            if args.any_null() {
                Value::Null
            } else if args.0.iter().any(|v| matches!(v, Value::Bytes(_))) {
                // A binary argument makes the result a binary string.
                let mut out = Vec::new();
                for v in &args.0 {
                    match v {
                        Value::Bytes(b) => out.extend_from_slice(b),
                        other => out.extend_from_slice(rendered(other).as_bytes()),
                    }
                }
                Value::Bytes(out)
            } else {
                Value::Text(args.0.iter().map(rendered).collect())
            }
        }
        "CONCAT_WS" => {
            at_least(name, args, 2)?;
            let sep = args.text(0);
            Value::Text(
                args.0[1..]
                    .iter()
                    .filter(|v| !v.is_null())
                    .map(rendered)
                    .collect::<Vec<_>>()
                    .join(&sep),
            )
        }
        "REPEAT" => {
            if args.any_null() {
                Value::Null
            } else {
                let n = args.count(1);
                match args.arg(0) {
                    Value::Bytes(b) => Value::Bytes(b.repeat(n)),
                    _ => Value::Text(args.text(0).repeat(n)),
                }
            }
        }
        "LPAD" | "RPAD" => {
            if args.any_null() {
                Value::Null
            } else {
                let s: Vec<char> = args.text(0).chars().collect();
                let n = args.count(1);
                let pad: Vec<char> = args.text(2).chars().collect();
                if n <= s.len() || pad.is_empty() {
                    Value::Text(s[..n.min(s.len())].iter().collect())
                } else {
                    let fill: String = pad.iter().cycle().take(n - s.len()).collect();
                    let s: String = s.iter().collect();
                    Value::Text(if name == "LPAD" { fill + &s } else { s + &fill })
                }
            }
        }
        _ => return Ok(None),
    }))
}

/// LENGTH (bytes), CHAR_LENGTH (characters), LOWER and UPPER, with their synonyms.
fn string_length_and_case(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    Ok(Some(match name {
        "LENGTH" | "OCTET_LENGTH" => match args.arg(0) {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Int(b.len() as i64),
            v => Value::Int(render(&v, None, ctx.tz).unwrap_or_default().len() as i64),
        },
        "CHAR_LENGTH" | "CHARACTER_LENGTH" | "LOWER" | "LCASE" | "UPPER" | "UCASE"
            if args.any_null() =>
        {
            Value::Null
        }
        "CHAR_LENGTH" | "CHARACTER_LENGTH" => Value::Int(args.text(0).chars().count() as i64),
        "LOWER" | "LCASE" => Value::Text(args.text(0).to_lowercase()),
        "UPPER" | "UCASE" => Value::Text(args.text(0).to_uppercase()),
        _ => return Ok(None),
    }))
}

/// LEFT, RIGHT and SUBSTRING (also SUBSTR and MID).
fn substrings(name: &str, args: &Args, _ctx: &Ctx<'_>) -> Result<Option<Value>> {
    if !matches!(name, "LEFT" | "RIGHT" | "SUBSTRING" | "SUBSTR" | "MID") {
        return Ok(None);
    }
    if args.any_null() {
        return Ok(Some(Value::Null));
    }
    Ok(Some(match name {
        "LEFT" => Value::Text(args.text(0).chars().take(args.count(1)).collect()),
        "RIGHT" => {
            let s: Vec<char> = args.text(0).chars().collect();
            let n = args.count(1).min(s.len());
            Value::Text(s[s.len() - n..].iter().collect())
        }
        _ => {
            let from = to_f64(&args.arg(1)).unwrap_or(1.0) as i64;
            let len = if args.0.len() > 2 {
                args.count(2)
            } else {
                usize::MAX
            };
            Value::Text(substring(&args.text(0), from, len))
        }
    }))
}

/// Up to `len` characters of `s` from position `from`: counted from 1, or from the end when
/// negative; position 0 starts past the end.
pub(super) fn substring(s: &str, from: i64, len: usize) -> String {
    let s: Vec<char> = s.chars().collect();
    let start = if from > 0 {
        (from - 1) as usize
    } else if from < 0 {
        s.len().saturating_sub((-from) as usize)
    } else {
        s.len()
    };
    s.iter().skip(start).take(len).collect()
}

/// The statement's time, in the session time zone, truncated to `fsp` fraction digits.
fn now_value(ctx: &Ctx<'_>, fsp: u32) -> Value {
    let unit = 10i64.pow(6 - fsp.min(6));
    Value::DateTime(DateTime::from_epoch_micros(
        ctx.now_us.div_euclid(unit) * unit + ctx.tz * 1_000_000,
    ))
}

/// NOW and its synonyms, UTC_TIMESTAMP, CURDATE, UNIX_TIMESTAMP and FROM_UNIXTIME (the parts
/// of a time are in `dates.rs`).
fn date_and_time(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    Ok(Some(match name {
        "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIMESTAMP" | "LOCALTIME" | "SYSDATE" => {
            now_value(ctx, to_f64(&args.arg(0)).unwrap_or(0.0) as u32)
        }
        "UTC_TIMESTAMP" => Value::DateTime(DateTime::from_epoch_micros(
            ctx.now_us.div_euclid(1_000_000) * 1_000_000,
        )),
        "CURDATE" | "CURRENT_DATE" => {
            Value::Date(DateTime::from_epoch_micros(ctx.now_us + ctx.tz * 1_000_000).date)
        }
        "UNIX_TIMESTAMP" => {
            if args.0.is_empty() {
                Value::Int(ctx.now_us.div_euclid(1_000_000))
            } else {
                match time_us(&args.arg(0), ctx.tz) {
                    Some(us) if us % 1_000_000 == 0 => Value::Int(us / 1_000_000),
                    Some(us) => Value::Decimal(format!("{:.6}", us as f64 / 1e6)),
                    None => Value::Null,
                }
            }
        }
        "FROM_UNIXTIME" => match to_f64(&args.arg(0)) {
            Some(s) => Value::DateTime(DateTime::from_epoch_micros(
                (s * 1e6) as i64 + ctx.tz * 1_000_000,
            )),
            None => Value::Null,
        },
        _ => return Ok(None),
    }))
}

/// FLOOR (`floor`) or CEIL of a value: exact for an integer or a DECIMAL (a BIGINT when it
/// fits, else a DECIMAL), a DOUBLE for anything else, as MySQL types them.
pub(super) fn floor_or_ceil(v: &Value, floor: bool) -> Result<Value> {
    if let Some(x) = Dec::of(v) {
        return Dec::of_int(if floor { x.floor() } else { x.ceil() }).into_value(true);
    }
    Ok(to_f64(v).map_or(Value::Null, |x| {
        Value::Double(if floor { x.floor() } else { x.ceil() })
    }))
}

/// ROUND(v, digits). An integer or a DECIMAL rounds exactly, half away from zero: a DECIMAL
/// keeps `digits` after the point (ROUND(1.5, 3) is 1.500), an integer stays one
/// (ROUND(1250, -2) is 1300). A DOUBLE (or a string) rounds half to even, as MySQL's `rint`
/// does (ROUND(2.5e0) is 2).
fn round(v: &Value, digits: i64) -> Result<Value> {
    if let Some(x) = Dec::of(v) {
        return if matches!(v, Value::Decimal(_)) {
            x.round(digits).into_decimal()
        } else {
            x.round(digits.min(0)).into_value(true)
        };
    }
    Ok(to_f64(v).map_or(Value::Null, |x| {
        let scale = 10f64.powi(digits.unsigned_abs().min(400) as i32);
        Value::Double(if digits >= 0 {
            (x * scale).round_ties_even() / scale
        } else {
            (x / scale).round_ties_even() * scale
        })
    }))
}

/// ABS, FLOOR, CEIL (CEILING), ROUND, MOD, SIGN, PI, BIT_COUNT, POW (POWER), EXP, SQRT,
/// LN, LOG2, LOG10, LOG, TRUNCATE and RAND.
fn numeric(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    let n = args.0.len();
    match name {
        "PI" => arity(name, n, 0, 0)?,
        "SIGN" | "EXP" | "SQRT" | "LN" | "LOG2" | "LOG10" | "BIT_COUNT" | "BIN" | "OCT" => {
            arity(name, n, 1, 1)?
        }
        "POW" | "POWER" | "TRUNCATE" => arity(name, n, 2, 2)?,
        "LOG" => arity(name, n, 1, 2)?,
        "RAND" => arity(name, n, 0, 1)?,
        _ => {}
    }
    Ok(Some(match name {
        "ABS" => match args.arg(0) {
            Value::Null => Value::Null,
            Value::Int(i) => int_result(i128::from(i).abs())?,
            Value::UInt(u) => Value::UInt(u),
            Value::Decimal(s) => Value::Decimal(s.trim_start_matches('-').to_string()),
            v => Value::Double(to_f64(&v).unwrap_or(0.0).abs()),
        },
        "FLOOR" => floor_or_ceil(&args.arg(0), true)?,
        "CEIL" | "CEILING" => floor_or_ceil(&args.arg(0), false)?,
        "ROUND" => {
            let digits = match args.arg(1) {
                Value::Null if n > 1 => return Ok(Some(Value::Null)),
                d => to_f64(&d).unwrap_or(0.0).clamp(-400.0, 400.0) as i64,
            };
            round(&args.arg(0), digits)?
        }
        "MOD" => {
            let (a, b) = (args.arg(0), args.arg(1));
            super::context::check_division(&BinaryOperator::Modulo, &a, &b, ctx)?;
            arith(&BinaryOperator::Modulo, &a, &b)?
        }
        "SIGN" => to_f64(&args.arg(0)).map_or(Value::Null, |x| {
            Value::Int(if x > 0.0 {
                1
            } else if x < 0.0 {
                -1
            } else {
                0
            })
        }),
        "PI" => Value::Double(std::f64::consts::PI),
        "BIT_COUNT" => super::value::bit_operand(&args.arg(0))
            .map_or(Value::Null, |b| Value::Int(i64::from(b.count_ones()))),
        // A number's (a BIT's) 64 bits in base 2 or 8, negative ones in two's complement.
        "BIN" => super::value::bit_operand(&args.arg(0))
            .map_or(Value::Null, |b| Value::Text(format!("{b:b}"))),
        "OCT" => super::value::bit_operand(&args.arg(0))
            .map_or(Value::Null, |b| Value::Text(format!("{b:o}"))),
        "POW" | "POWER" => match (to_f64(&args.arg(0)), to_f64(&args.arg(1))) {
            (Some(x), Some(y)) => in_range(name, args, x.powf(y))?,
            _ => Value::Null,
        },
        "EXP" => match to_f64(&args.arg(0)) {
            Some(x) => in_range(name, args, x.exp())?,
            None => Value::Null,
        },
        // Out of a function's domain is NULL, as MySQL gives it; a logarithm's says so
        // (warning 3020), a square root's does not.
        "SQRT" => match to_f64(&args.arg(0)) {
            Some(x) if x >= 0.0 => finite(x.sqrt()),
            _ => Value::Null,
        },
        "LN" | "LOG2" | "LOG10" => match to_f64(&args.arg(0)) {
            Some(x) if x > 0.0 => finite(match name {
                "LN" => x.ln(),
                "LOG2" => x.log2(),
                _ => x.log10(),
            }),
            Some(_) => invalid_logarithm(ctx),
            None => Value::Null,
        },
        "LOG" => match (to_f64(&args.arg(0)), args.0.len()) {
            (Some(x), 1) if x > 0.0 => Value::Double(x.ln()),
            (Some(b), 2) => match to_f64(&args.arg(1)) {
                Some(x) if x > 0.0 && b > 0.0 && b != 1.0 => finite(x.ln() / b.ln()),
                Some(_) => invalid_logarithm(ctx),
                None => Value::Null,
            },
            (Some(_), _) => invalid_logarithm(ctx),
            (None, _) => Value::Null,
        },
        "TRUNCATE" => match (args.arg(0), to_f64(&args.arg(1))) {
            (Value::Null, _) | (_, None) => Value::Null,
            (x, Some(d)) => truncate(&x, d.clamp(-65.0, 30.0) as i32),
        },
        "RAND" if !args.0.is_empty() => {
            return Err(Error::unsupported("RAND with a seed (RAND() is supported)"))
        }
        "RAND" => Value::Double(super::unique::random_u64() as f64 / (u64::MAX as f64 + 1.0)),
        _ => return Ok(None),
    }))
}

/// A logarithm outside its domain: NULL with warning 3020, as MySQL gives it.
fn invalid_logarithm(ctx: &Ctx<'_>) -> Value {
    ctx.warn(code::ER_INVALID_ARGUMENT_FOR_LOGARITHM, || {
        "Invalid argument for logarithm".into()
    });
    Value::Null
}

/// The functions whose value is one of their arguments: IF, IFNULL, NULLIF, COALESCE,
/// GREATEST and LEAST.
fn choice(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    let arg = |i| args.arg(i);
    Ok(Some(match name {
        "IFNULL" => {
            if arg(0).is_null() {
                arg(1)
            } else {
                arg(0)
            }
        }
        "COALESCE" => args
            .0
            .iter()
            .find(|v| !v.is_null())
            .cloned()
            .unwrap_or(Value::Null),
        "NULLIF" => {
            if compare(&arg(0), &arg(1), ctx.tz) == Some(Ordering::Equal) {
                Value::Null
            } else {
                arg(0)
            }
        }
        "IF" => {
            if truthy(&arg(0)) == Some(true) {
                arg(1)
            } else {
                arg(2)
            }
        }
        "GREATEST" | "LEAST" => {
            at_least(name, args, 2)?;
            if args.any_null() {
                Value::Null
            } else {
                let mut best = arg(0);
                for v in &args.0[1..] {
                    let o = compare(v, &best, ctx.tz);
                    if (name == "GREATEST" && o == Some(Ordering::Greater))
                        || (name == "LEAST" && o == Some(Ordering::Less))
                    {
                        best = v.clone();
                    }
                }
                best
            }
        }
        _ => return Ok(None),
    }))
}

/// SLEEP(seconds): waits, then 0. Never on the brief path (the statement runs again where it
/// may wait) nor inside a change of rows; a KILL of the connection takes effect once it ends.
fn sleep(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    if name != "SLEEP" {
        return Ok(None);
    }
    arity(name, args.0.len(), 1, 1)?;
    let seconds = match to_f64(&args.arg(0)) {
        Some(s) if s >= 0.0 && s.is_finite() => s,
        _ => {
            return Err(Error::new(
                code::ER_WRONG_ARGUMENTS,
                "Incorrect arguments to sleep",
            ))
        }
    };
    match ctx.sql {
        Some(sql) if !sql.may_wait() => Err(Error::would_wait()),
        Some(_) => {
            std::thread::sleep(std::time::Duration::from_secs_f64(
                seconds.min(31_536_000.0),
            ));
            Ok(Some(Value::Int(0)))
        }
        None => Err(Error::unsupported("SLEEP in a statement that changes rows")),
    }
}

/// GET_LOCK and its family (`user_locks.rs`), which need the session.
fn user_locks(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    if !is_user_lock_function(name) {
        return Ok(None);
    }
    match ctx.sql {
        Some(sql) => sql.user_lock_function(name, &args.0).map(Some),
        None => Err(Error::unsupported(format!(
            "{name} in a statement that changes rows"
        ))),
    }
}

/// The family of `strings.rs`.
fn string_search_and_edit(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    super::strings::search_and_edit(name, &args.0, ctx)
}

/// The family of `dates.rs`.
fn date_parts(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    super::dates::date_parts(name, &args.0, ctx)
}

/// `x` (a number or its text) cut, not rounded, to `d` digits after the point (before it when
/// negative), digit by digit on its decimal text as MySQL's exact arithmetic does: a double
/// is first written as the shortest decimal that reads back as it (1.13, not 1.1299...).
fn truncate(x: &Value, d: i32) -> Value {
    let text = match x {
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Decimal(s) | Value::Text(s) => s.trim().to_string(),
        other => match to_f64(other) {
            Some(f) if f.is_finite() => format!("{f}"),
            _ => return Value::Null,
        },
    };
    if text.contains(['e', 'E']) || text.parse::<f64>().is_err() {
        return to_f64(x).map_or(Value::Null, |f| {
            let scale = 10f64.powi(d);
            Value::Double((f * scale).trunc() / scale)
        });
    }
    let (negative, int_part, frac_part) = binlog_format::value::decimal_parts(&text);
    let int_part = if int_part.is_empty() { "0" } else { int_part };
    let sign = if negative { "-" } else { "" };
    let cut = if d > 0 {
        let d = d as usize;
        let mut frac: String = frac_part.chars().take(d).collect();
        while frac.len() < d {
            frac.push('0');
        }
        format!("{int_part}.{frac}")
    } else {
        let zeros = (-d) as usize;
        if zeros >= int_part.len() {
            "0".to_string()
        } else {
            format!(
                "{}{}",
                &int_part[..int_part.len() - zeros],
                "0".repeat(zeros)
            )
        }
    };
    let zero = cut.chars().all(|c| c == '0' || c == '.');
    let cut = if zero { cut } else { format!("{sign}{cut}") };
    if d > 0 {
        Value::Decimal(cut)
    } else {
        cut.parse::<i64>().map_or(Value::Decimal(cut), Value::Int)
    }
}

/// A result MySQL's DOUBLE holds, or its 1690 for one it does not (an overflow, or a pole such
/// as POW(0, -1)).
fn in_range(name: &str, args: &Args, x: f64) -> Result<Value> {
    if x.is_finite() {
        return Ok(Value::Double(x));
    }
    if x.is_nan() {
        return Ok(Value::Null);
    }
    let shown: Vec<String> = args.0.iter().map(text_of).collect();
    Err(Error::new(
        code::ER_DATA_OUT_OF_RANGE,
        format!(
            "DOUBLE value is out of range in '{}({})'",
            name.to_lowercase(),
            shown.join(",")
        ),
    ))
}

/// A number, or NULL where the computation left the numbers (NaN, infinity).
fn finite(x: f64) -> Value {
    if x.is_finite() {
        Value::Double(x)
    } else {
        Value::Null
    }
}

/// DATE_FORMAT, MD5, UUID and ISNULL.
fn formatting_and_identity(name: &str, args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    let n = args.0.len();
    match name {
        "DATE_FORMAT" => arity(name, n, 2, 2)?,
        "MD5" | "ISNULL" => arity(name, n, 1, 1)?,
        "UUID" => arity(name, n, 0, 0)?,
        _ => {}
    }
    Ok(Some(match name {
        "DATE_FORMAT" if args.any_null() => Value::Null,
        "DATE_FORMAT" => super::dates::date_format(&args.arg(0), &args.text(1), ctx),
        "MD5" => match args.arg(0) {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Text(hex(&md5(&b)).to_ascii_lowercase()),
            v => Value::Text(
                hex(&md5(render(&v, None, ctx.tz)
                    .unwrap_or_default()
                    .as_bytes()))
                .to_ascii_lowercase(),
            ),
        },
        "UUID" => Value::Text(super::unique::uuid_v1(ctx.now_us)),
        "ISNULL" => Value::Int(i64::from(args.arg(0).is_null())),
        _ => return Ok(None),
    }))
}

fn md5(bytes: &[u8]) -> [u8; 16] {
    use md5::Digest;
    md5::Md5::digest(bytes).into()
}

/// DATABASE (SCHEMA), VERSION, LAST_INSERT_ID, ROW_COUNT, FOUND_ROWS, CONNECTION_ID, CURRENT_USER, USER (and
/// SESSION_USER, SYSTEM_USER); SLEEP is [`sleep`].
fn session_info(name: &str, _args: &Args, ctx: &Ctx<'_>) -> Result<Option<Value>> {
    if name == "LAST_INSERT_ID" {
        arity(name, _args.0.len(), 0, 1)?;
    }
    Ok(Some(match name {
        "DATABASE" | "SCHEMA" => ctx.database.map_or(Value::Null, |d| Value::Text(d.into())),
        "VERSION" => Value::Text(server_version()),
        "LAST_INSERT_ID" => match _args.0.first() {
            None => Value::UInt(ctx.last_insert_id()),
            // LAST_INSERT_ID(expr) returns expr and makes it the session's LAST_INSERT_ID()
            // (MySQL's idiom for a sequence: UPDATE seq SET id = LAST_INSERT_ID(id + 1)).
            Some(Value::Null) => Value::Null,
            Some(v) => {
                let id = match v {
                    Value::Int(i) => *i as u64,
                    Value::UInt(u) => *u,
                    other => to_f64(other).unwrap_or(0.0).round() as i64 as u64,
                };
                *ctx.set_insert_id.lock().unwrap_or_else(|p| p.into_inner()) = Some(id);
                Value::UInt(id)
            }
        },
        "ROW_COUNT" => Value::Int(ctx.last.row_count),
        "FOUND_ROWS" => Value::UInt(ctx.last.found_rows),
        "CONNECTION_ID" => Value::UInt(ctx.connection_id),
        // The account (its host pattern), and the user with the client's host, as MySQL.
        "CURRENT_USER" => current_user(ctx),
        "USER" | "SESSION_USER" | "SYSTEM_USER" => Value::Text(ctx.authority.map_or_else(
            || "root@localhost".into(),
            |a| format!("{}@{}", a.account.user, a.client_host),
        )),
        _ => return Ok(None),
    }))
}

/// CURRENT_USER(): the session's account, `user@host` with the account's host pattern.
pub(super) fn current_user(ctx: &Ctx<'_>) -> Value {
    Value::Text(ctx.authority.map_or_else(
        || "root@localhost".into(),
        |a| format!("{}@{}", a.account.user, a.account.host),
    ))
}

/// Error 1582 unless `name` got at least `n` arguments, as MySQL checks native functions.
fn at_least(name: &str, args: &Args, n: usize) -> Result<()> {
    arity(name, args.0.len(), n, usize::MAX)
}

/// The server version clients see (`@@version`, `VERSION()`, the protocol's greeting, the
/// binlog's FORMAT_DESCRIPTION): one definition, so that they always agree.
pub fn server_version() -> String {
    format!("8.0.36-ringrep-{}", env!("CARGO_PKG_VERSION"))
}

/// Whether `name` is one of this module's functions.
pub(crate) fn is_user_lock_function(name: &str) -> bool {
    matches!(
        name,
        "GET_LOCK" | "RELEASE_LOCK" | "RELEASE_ALL_LOCKS" | "IS_FREE_LOCK" | "IS_USED_LOCK"
    )
}
