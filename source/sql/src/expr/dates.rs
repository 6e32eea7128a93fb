//! The parts of a date and time, differences between two, and DATE_FORMAT: YEAR, MONTH, DAY
//! (DAYOFMONTH), HOUR, MINUTE, SECOND, MICROSECOND, QUARTER, DAYOFWEEK, WEEKDAY, DAYOFYEAR,
//! MONTHNAME, DAYNAME, DATE, TIME, LAST_DAY, TO_DAYS, DATEDIFF, TIMESTAMPDIFF and EXTRACT.
//!
//! Each reads its argument in the session time zone (a TIMESTAMP is stored in UTC), takes
//! DATETIME text as MySQL does, and is NULL for NULL or for what is not a time.

use binlog_format::value::{civil_from_days, days_from_civil, Date, DateTime, Value};
use sqlparser::ast::DateTimeField;

use ringrep_engine::error::{Error, Result};

use super::context::Ctx;
use super::value::time_us;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Monday first, as WEEKDAY counts.
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// `v` as a wall-clock time in the session's zone `tz`, if it is a time.
pub(super) fn local(v: &Value, tz: i64) -> Option<DateTime> {
    time_us(v, tz).map(|us| DateTime::from_epoch_micros(us + tz * 1_000_000))
}

/// Days since 1970-01-01.
fn day_number(d: &Date) -> i64 {
    days_from_civil(i64::from(d.year), u32::from(d.month), u32::from(d.day))
}

/// 0 for Monday to 6 for Sunday (1970-01-01 was a Thursday).
fn weekday(d: &Date) -> usize {
    (day_number(d) + 3).rem_euclid(7) as usize
}

fn day_of_year(d: &Date) -> i64 {
    day_number(d) - days_from_civil(i64::from(d.year), 1, 1) + 1
}

fn last_day(d: &Date) -> Date {
    let (y, m) = if d.month == 12 {
        (i64::from(d.year) + 1, 1)
    } else {
        (i64::from(d.year), u32::from(d.month) + 1)
    };
    let (y, m, day) = civil_from_days(days_from_civil(y, m, 1) - 1);
    Date {
        year: y as u16,
        month: m as u8,
        day: day as u8,
    }
}

/// The date functions of one time argument, and DATEDIFF; `None` when `name` is none of them.
pub(super) fn date_parts(name: &str, args: &[Value], ctx: &Ctx<'_>) -> Result<Option<Value>> {
    let arity = |n| super::value::arity(name, args.len(), n, n);
    let part: fn(&DateTime) -> Value = match name {
        "YEAR" => |t| Value::Int(i64::from(t.date.year)),
        "MONTH" => |t| Value::Int(i64::from(t.date.month)),
        "DAY" | "DAYOFMONTH" => |t| Value::Int(i64::from(t.date.day)),
        "HOUR" => |t| Value::Int(i64::from(t.hour)),
        "MINUTE" => |t| Value::Int(i64::from(t.minute)),
        "SECOND" => |t| Value::Int(i64::from(t.second)),
        "MICROSECOND" => |t| Value::Int(i64::from(t.micros)),
        "QUARTER" => |t| Value::Int(i64::from(t.date.month + 2) / 3),
        "DAYOFWEEK" => |t| Value::Int((weekday(&t.date) as i64 + 1) % 7 + 1),
        "WEEKDAY" => |t| Value::Int(weekday(&t.date) as i64),
        "DAYOFYEAR" => |t| Value::Int(day_of_year(&t.date)),
        "MONTHNAME" => |t| Value::Text(MONTHS[usize::from(t.date.month.clamp(1, 12)) - 1].into()),
        "DAYNAME" => |t| Value::Text(DAYS[weekday(&t.date)].into()),
        "DATE" => |t| Value::Date(t.date),
        "TIME" => |t| {
            Value::Time(
                (i64::from(t.hour) * 3600 + i64::from(t.minute) * 60 + i64::from(t.second))
                    * 1_000_000
                    + i64::from(t.micros),
            )
        },
        "TIME_TO_SEC" | "SEC_TO_TIME" => {
            arity(1)?;
            let (v, clipped) = seconds_and_time(name, &args[0], ctx.tz);
            if clipped {
                let text = ringrep_engine::types::text_of(&args[0]);
                ctx.warn(
                    ringrep_engine::error::code::ER_TRUNCATED_WRONG_VALUE,
                    || format!("Truncated incorrect time value: '{text}'"),
                );
            }
            return Ok(Some(v));
        }
        "LAST_DAY" => |t| Value::Date(last_day(&t.date)),
        "TO_DAYS" => |t| Value::Int(day_number(&t.date) + 719_528),
        "DATEDIFF" => {
            arity(2)?;
            return Ok(Some(
                match (
                    args.first().and_then(|v| local(v, ctx.tz)),
                    args.get(1).and_then(|v| local(v, ctx.tz)),
                ) {
                    (Some(a), Some(b)) => Value::Int(day_number(&a.date) - day_number(&b.date)),
                    _ => Value::Null,
                },
            ));
        }
        _ => return Ok(None),
    };
    arity(1)?;
    // A TIME value: its parts, the hours past 23 included.
    if let (Some(Value::Time(us)), true) = (
        args.first(),
        matches!(name, "HOUR" | "MINUTE" | "SECOND" | "MICROSECOND" | "TIME"),
    ) {
        let a = us.unsigned_abs();
        let secs = (a / 1_000_000) as i64;
        return Ok(Some(match name {
            "HOUR" => Value::Int(secs / 3600),
            "MINUTE" => Value::Int(secs % 3600 / 60),
            "SECOND" => Value::Int(secs % 60),
            "MICROSECOND" => Value::Int((a % 1_000_000) as i64),
            _ => Value::Time(*us),
        }));
    }
    // A time of day or duration as text ('10:05:03', '838:59:59.5'), which is no date.
    if let (Some(Value::Text(text)), true) = (
        args.first(),
        matches!(name, "HOUR" | "MINUTE" | "SECOND" | "MICROSECOND" | "TIME"),
    ) {
        if let Some(t) = time_of_text(text) {
            return Ok(Some(match name {
                "HOUR" => Value::Int(t.hours as i64),
                "MINUTE" => Value::Int(i64::from(t.minute)),
                "SECOND" => Value::Int(i64::from(t.second)),
                "MICROSECOND" => Value::Int(i64::from(t.micros)),
                _ => {
                    let us = (i64::from(t.hours) * 3600
                        + i64::from(t.minute) * 60
                        + i64::from(t.second))
                        * 1_000_000
                        + i64::from(t.micros);
                    Value::Time(if t.negative { -us } else { us })
                }
            }));
        }
    }
    Ok(Some(
        args.first()
            .and_then(|v| local(v, ctx.tz))
            .map_or(Value::Null, |t| part(&t)),
    ))
}

/// TIME_TO_SEC (a time's seconds, signed, with its fraction when it has one) and
/// SEC_TO_TIME (seconds as a TIME, held to its range): NULL for NULL or what is no time; and
/// whether SEC_TO_TIME had to hold it (MySQL warns).
fn seconds_and_time(name: &str, v: &Value, tz: i64) -> (Value, bool) {
    use ringrep_engine::types::{time_of, TimeError};
    if v.is_null() {
        return (Value::Null, false);
    }
    if name == "TIME_TO_SEC" {
        let us = match time_of(v, tz) {
            Ok(us) => us,
            Err(TimeError::OutOfRange(us)) => us,
            Err(_) => return (Value::Null, false),
        };
        if us % 1_000_000 == 0 {
            return (Value::Int(us / 1_000_000), false);
        }
        let sign = if us < 0 { "-" } else { "" };
        let a = us.unsigned_abs();
        let secs = format!("{sign}{}.{:06}", a / 1_000_000, a % 1_000_000);
        return (Value::Decimal(secs), false);
    }
    let text = match super::decimal::Dec::of(v) {
        Some(d) => d.to_string(),
        None => match super::value::to_f64(v) {
            Some(f) => format!("{f:.6}"),
            None => return (Value::Null, false),
        },
    };
    let (neg, int, frac) = binlog_format::value::decimal_parts(&text);
    let whole: i64 = int
        .parse()
        .unwrap_or(if int.is_empty() { 0 } else { i64::MAX });
    let micros: i64 = format!("{:0<6}", &frac[..frac.len().min(6)])
        .parse()
        .unwrap_or(0);
    let max = binlog_format::value::TIME_MAX_MICROS;
    let us = whole.saturating_mul(1_000_000).saturating_add(micros);
    (
        Value::Time(if neg { -us.min(max) } else { us.min(max) }),
        us > max,
    )
}

/// A TIME value written as text: `[-]H:MM[:SS[.fraction]]`, hours up to 838 as MySQL's.
struct TimeOfText {
    negative: bool,
    hours: u32,
    minute: u8,
    second: u8,
    micros: u32,
}

fn time_of_text(text: &str) -> Option<TimeOfText> {
    let t = text.trim();
    let (negative, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let (clock, fraction) = t.split_once('.').unwrap_or((t, ""));
    let parts: Vec<&str> = clock.split(':').collect();
    if !(2..=3).contains(&parts.len())
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let hours: u32 = parts[0].parse().ok()?;
    let minute: u8 = parts[1].parse().ok()?;
    let second: u8 = parts.get(2).map_or(Some(0), |p| p.parse().ok())?;
    if hours > 838 || minute > 59 || second > 59 {
        return None;
    }
    let micros = format!("{:0<6}", &fraction[..fraction.len().min(6)])
        .parse()
        .ok()?;
    Some(TimeOfText {
        negative,
        hours,
        minute,
        second,
        micros,
    })
}

/// `EXTRACT(unit FROM t)`: one part of `t`. (The parser refuses the compound units,
/// `YEAR_MONTH` and the like, before they reach here.)
pub(super) fn extract(field: &DateTimeField, v: &Value, ctx: &Ctx<'_>) -> Result<Value> {
    // A TIME's parts carry its sign, and its hours go past 23, as MySQL's EXTRACT gives them.
    if let Value::Time(us) = v {
        let sign = if *us < 0 { -1 } else { 1 };
        let a = us.unsigned_abs();
        let secs = (a / 1_000_000) as i64;
        let part = match field {
            DateTimeField::Hour | DateTimeField::Hours => secs / 3600,
            DateTimeField::Minute | DateTimeField::Minutes => secs % 3600 / 60,
            DateTimeField::Second | DateTimeField::Seconds => secs % 60,
            DateTimeField::Microsecond | DateTimeField::Microseconds => (a % 1_000_000) as i64,
            _ => return Ok(Value::Null),
        };
        return Ok(Value::Int(sign * part));
    }
    let Some(t) = local(v, ctx.tz) else {
        return Ok(Value::Null);
    };
    let (y, mo, d) = (
        i64::from(t.date.year),
        i64::from(t.date.month),
        i64::from(t.date.day),
    );
    let (h, mi, s, us) = (
        i64::from(t.hour),
        i64::from(t.minute),
        i64::from(t.second),
        i64::from(t.micros),
    );
    Ok(Value::Int(match field {
        DateTimeField::Year | DateTimeField::Years => y,
        DateTimeField::Quarter => (mo + 2) / 3,
        DateTimeField::Month | DateTimeField::Months => mo,
        DateTimeField::Week(_) | DateTimeField::Weeks => week_of_year(&t.date),
        DateTimeField::Day | DateTimeField::Days => d,
        DateTimeField::Hour | DateTimeField::Hours => h,
        DateTimeField::Minute | DateTimeField::Minutes => mi,
        DateTimeField::Second | DateTimeField::Seconds => s,
        DateTimeField::Microsecond | DateTimeField::Microseconds => us,
        other => return Err(Error::unsupported(format!("EXTRACT of {other}"))),
    }))
}

/// MySQL's default week (mode 0): weeks start on Sunday, and days before the year's first
/// Sunday are in week 0.
fn week_of_year(d: &Date) -> i64 {
    let jan1 = Date {
        year: d.year,
        month: 1,
        day: 1,
    };
    // Days from January 1st back to the Sunday on or before it.
    let offset = (weekday(&jan1) as i64 + 1) % 7;
    let first_sunday = if offset == 0 { 1 } else { 8 - offset };
    let doy = day_of_year(d);
    if doy < first_sunday {
        0
    } else {
        (doy - first_sunday) / 7 + 1
    }
}

/// `TIMESTAMPDIFF(unit, a, b)`: `b - a` in whole units (months and years by the calendar,
/// less one when `b`'s day and time of the month have not reached `a`'s).
pub(super) fn timestamp_diff(unit: &str, a: &Value, b: &Value, ctx: &Ctx<'_>) -> Result<Value> {
    let (Some(ua), Some(ub)) = (time_us(a, ctx.tz), time_us(b, ctx.tz)) else {
        return Ok(Value::Null);
    };
    let micros = |per: i64| Ok(Value::Int((ub - ua) / per));
    match unit {
        "MICROSECOND" => micros(1),
        "SECOND" => micros(1_000_000),
        "MINUTE" => micros(60_000_000),
        "HOUR" => micros(3_600_000_000),
        "DAY" => micros(86_400_000_000),
        "WEEK" => micros(7 * 86_400_000_000),
        "MONTH" | "QUARTER" | "YEAR" => {
            let (ta, tb) = (
                DateTime::from_epoch_micros(ua + ctx.tz * 1_000_000),
                DateTime::from_epoch_micros(ub + ctx.tz * 1_000_000),
            );
            let months = |t: &DateTime| i64::from(t.date.year) * 12 + i64::from(t.date.month);
            // What is left of a month: its day and time, compared as one number.
            let rest = |t: &DateTime| {
                t.to_epoch_micros()
                    - DateTime {
                        date: Date { day: 1, ..t.date },
                        hour: 0,
                        minute: 0,
                        second: 0,
                        micros: 0,
                    }
                    .to_epoch_micros()
            };
            let mut n = months(&tb) - months(&ta);
            if n > 0 && rest(&tb) < rest(&ta) {
                n -= 1;
            } else if n < 0 && rest(&tb) > rest(&ta) {
                n += 1;
            }
            Ok(Value::Int(match unit {
                "MONTH" => n,
                "QUARTER" => n / 3,
                _ => n / 12,
            }))
        }
        other => Err(Error::syntax(format!(
            "You have an error in your SQL syntax; TIMESTAMPDIFF takes MICROSECOND, SECOND, \
             MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR, not {other}"
        ))),
    }
}

/// `DATE_FORMAT(t, format)`: MySQL's specifiers (`%Y %y %m %c %d %e %H %k %h %I %l %i %s %S
/// %f %p %r %T %M %b %W %a %D %j %w %U %%`); any other `%x` gives `x`, as in MySQL.
pub(super) fn date_format(v: &Value, format: &str, ctx: &Ctx<'_>) -> Value {
    let Some(t) = local(v, ctx.tz) else {
        return Value::Null;
    };
    let hour12 = match t.hour % 12 {
        0 => 12,
        h => h,
    };
    let ampm = if t.hour < 12 { "AM" } else { "PM" };
    let month = MONTHS[usize::from(t.date.month.clamp(1, 12)) - 1];
    let day = DAYS[weekday(&t.date)];
    let mut out = String::with_capacity(format.len() + 8);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else {
            out.push('%');
            break;
        };
        match spec {
            'Y' => out.push_str(&format!("{:04}", t.date.year)),
            'y' => out.push_str(&format!("{:02}", t.date.year % 100)),
            'm' => out.push_str(&format!("{:02}", t.date.month)),
            'c' => out.push_str(&t.date.month.to_string()),
            'd' => out.push_str(&format!("{:02}", t.date.day)),
            'e' => out.push_str(&t.date.day.to_string()),
            'H' => out.push_str(&format!("{:02}", t.hour)),
            'k' => out.push_str(&t.hour.to_string()),
            'h' | 'I' => out.push_str(&format!("{hour12:02}")),
            'l' => out.push_str(&hour12.to_string()),
            'i' => out.push_str(&format!("{:02}", t.minute)),
            's' | 'S' => out.push_str(&format!("{:02}", t.second)),
            'f' => out.push_str(&format!("{:06}", t.micros)),
            'p' => out.push_str(ampm),
            'r' => out.push_str(&format!(
                "{hour12:02}:{:02}:{:02} {ampm}",
                t.minute, t.second
            )),
            'T' => out.push_str(&format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second)),
            'M' => out.push_str(month),
            'b' => out.push_str(&month[..3]),
            'W' => out.push_str(day),
            'a' => out.push_str(&day[..3]),
            'D' => {
                let n = t.date.day;
                let suffix = match (n % 10, n / 10) {
                    (_, 1) => "th",
                    (1, _) => "st",
                    (2, _) => "nd",
                    (3, _) => "rd",
                    _ => "th",
                };
                out.push_str(&format!("{n}{suffix}"));
            }
            'j' => out.push_str(&format!("{:03}", day_of_year(&t.date))),
            'w' => out.push_str(&((weekday(&t.date) + 1) % 7).to_string()),
            'U' => out.push_str(&format!("{:02}", week_of_year(&t.date))),
            other => out.push(other),
        }
    }
    Value::Text(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(year: u16, month: u8, day: u8) -> Date {
        Date { year, month, day }
    }

    #[test]
    fn weekdays_and_weeks_follow_the_calendar() {
        // 2026-12-03 is a Thursday; 2026 starts on a Thursday, its first Sunday the 4th.
        assert_eq!(DAYS[weekday(&date(2026, 12, 3))], "Thursday");
        assert_eq!(week_of_year(&date(2026, 1, 3)), 0);
        assert_eq!(week_of_year(&date(2026, 1, 4)), 1);
        assert_eq!(week_of_year(&date(2026, 12, 31)), 52);
        assert_eq!(day_of_year(&date(2024, 12, 31)), 366);
        assert_eq!(last_day(&date(2024, 2, 10)), date(2024, 2, 29));
        assert_eq!(last_day(&date(2026, 12, 3)), date(2026, 12, 31));
    }
}
