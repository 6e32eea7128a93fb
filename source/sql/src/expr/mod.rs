//! Expression evaluation with MySQL's semantics: NULL is unknown, numbers compare as numbers,
//! strings compare by the text collation (`binlog_format::collation`: MySQL's default
//! utf8mb4_0900_ai_ci, without case or accents, trailing spaces counting), a string compared
//! with a number or a time is converted first.

mod dates;
pub(crate) mod decimal;
mod functions;
pub(crate) mod predicate;
pub(crate) mod result;
pub(crate) mod rowset;
mod strings;
mod unique;

pub(crate) use functions::{arity, server_version};

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use binlog_format::schema::ColumnType;
use binlog_format::value::{format_datetime, DateTime, Value};
use sqlparser::ast::{
    BinaryOperator, CastKind, CeilFloorKind, DataType, DateTimeField, Expr, InTarget, Query,
    UnaryOperator, Value as SqlValue,
};

use crate::table::columns::ColumnRef;
use crate::table::rows::Rows;
use decimal::Dec;
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::types::parse_datetime_text;

/// What an expression can see.
pub(crate) struct Scope<'a> {
    /// The columns of `row`, slot by slot: what column names resolve against.
    pub(crate) columns: &'a [ColumnRef],
    /// The values of the current row, one per entry of `columns`.
    pub(crate) row: &'a [Value],
    /// Aggregate results of the current group, by the aggregate's text.
    pub(crate) aggregates: Option<&'a HashMap<String, Value>>,
    /// Where an unknown column error says the column was used ("field list", "where clause").
    pub(crate) place: &'static str,
}

impl Scope<'_> {
    /// No columns and no row: for expressions evaluated outside any row (LIMIT, SET, INSERT
    /// values, defaults), where a column name is an unknown column.
    pub(crate) fn empty() -> Scope<'static> {
        Scope {
            columns: &[],
            row: &[],
            aggregates: None,
            place: "field list",
        }
    }
}

/// What the session's previous statement did, as ROW_COUNT() and FOUND_ROWS() tell it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LastStatement {
    /// The rows it changed; -1 for one that returned rows or failed, 0 for any other.
    pub(crate) row_count: i64,
    /// The rows of the last result set the session sent.
    pub(crate) found_rows: u64,
}

impl Default for LastStatement {
    fn default() -> LastStatement {
        LastStatement {
            row_count: -1,
            found_rows: 0,
        }
    }
}

/// Session-wide inputs of evaluation.
pub(crate) struct Ctx<'a> {
    /// The session, for subqueries and `@@` variables (`None` while the session is busy
    /// changing rows: then subqueries come from `prefetched`).
    pub(crate) sql: Option<&'a crate::SqlSession>,
    /// Where the session is busy changing rows: the statement's subqueries, run beforehand
    /// (see `SqlSession::prefetch_subqueries`), by their text.
    pub(crate) prefetched: Option<&'a HashMap<String, Arc<Rows>>>,
    /// The statement's time (`NOW()`), epoch microseconds.
    pub(crate) now_us: i64,
    /// The session's time zone offset in seconds.
    pub(crate) tz: i64,
    /// The session's user variables (`@name`), by lower-case name.
    pub(crate) user_vars: &'a HashMap<String, Value>,
    /// The current database (`DATABASE()`), if one is selected.
    pub(crate) database: Option<&'a str>,
    /// `LAST_INSERT_ID()`.
    pub(crate) last_insert_id: u64,
    /// `ROW_COUNT()` and `FOUND_ROWS()`: what the session's previous statement did.
    pub(crate) last: LastStatement,
    /// Who runs the statement (`CURRENT_USER()`, `USER()`); `None` without a server.
    pub(crate) authority: Option<&'a crate::Authority>,
    /// `CONNECTION_ID()`.
    pub(crate) connection_id: u64,
    /// The row an INSERT ... ON DUPLICATE KEY UPDATE tried to insert, by lower-case column
    /// name, for `VALUES(col)`.
    pub(crate) inserted: Option<&'a HashMap<String, Value>>,
    /// Inside a subquery: the rows of the queries around it, innermost first, whose columns
    /// a name reaches when the subquery's own columns do not have it (a correlated subquery).
    pub(crate) outer: Option<Arc<OuterRow>>,
    /// The statement writes what it evaluates (INSERT, REPLACE, UPDATE without IGNORE): a
    /// division by zero is error 1365, as in MySQL's default strict mode with
    /// ERROR_FOR_DIVISION_BY_ZERO, not a NULL written in place of the value.
    pub(crate) strict: bool,
    /// sql_mode has ERROR_FOR_DIVISION_BY_ZERO: a division by zero warns (an error where
    /// `strict`); without it the result is NULL and nothing is said, as in MySQL.
    pub(crate) zero_division_errors: bool,
    /// Where warnings of the evaluation go (SHOW WARNINGS after the statement); `None` where
    /// nobody collects them.
    pub(crate) warnings: Option<&'a std::sync::Mutex<Warnings>>,
    /// What `LAST_INSERT_ID(expr)` set during the statement: the session's LAST_INSERT_ID()
    /// from then on, and the statement's insert id in its OK packet.
    pub(crate) set_insert_id: &'a std::sync::Mutex<Option<u64>>,
}

impl Ctx<'_> {
    /// `LAST_INSERT_ID()`: what `LAST_INSERT_ID(expr)` set in this statement, else the
    /// session's.
    pub(crate) fn last_insert_id(&self) -> u64 {
        self.set_insert_id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or(self.last_insert_id)
    }
}

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

/// The most warnings one statement keeps, as MySQL's `max_error_count`.
pub(crate) use ringrep_engine::MAX_WARNINGS;

/// The warnings of an evaluation: the first [`MAX_WARNINGS`] and how many more there were
/// (which `@@warning_count` counts, as MySQL's does).
#[derive(Debug, Default)]
pub(crate) struct Warnings {
    /// Code and message of each kept warning.
    pub(crate) kept: Vec<(u16, String)>,
    /// The warnings past those kept.
    pub(crate) dropped: u64,
}

impl Ctx<'_> {
    /// A warning for SHOW WARNINGS, made only when there is room for it (counted otherwise).
    pub(crate) fn warn(&self, code: ringrep_engine::error::Code, message: impl FnOnce() -> String) {
        if let Some(w) = self.warnings {
            let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
            if w.kept.len() < MAX_WARNINGS {
                w.kept.push((code.number, message()));
            } else {
                w.dropped += 1;
            }
        }
    }
}

/// Error 1365 when `ctx` writes what it evaluates and `op` divides by a zero `divisor`,
/// warning 1365 otherwise (the result is NULL).
pub(crate) fn check_division(
    op: &BinaryOperator,
    dividend: &Value,
    divisor: &Value,
    ctx: &Ctx<'_>,
) -> Result<()> {
    let divides = matches!(
        op,
        BinaryOperator::Divide | BinaryOperator::MyIntegerDivide | BinaryOperator::Modulo
    );
    if divides && ctx.zero_division_errors && !dividend.is_null() && to_f64(divisor) == Some(0.0) {
        if ctx.strict {
            return Err(Error::new(code::ER_DIVISION_BY_ZERO, "Division by 0"));
        }
        ctx.warn(code::ER_DIVISION_BY_ZERO, || "Division by 0".into());
    }
    Ok(())
}

/// [`check_numeric_text`] for two values compared: a string compared with a number is read
/// as one.
fn check_compared(a: &Value, b: &Value, ctx: &Ctx<'_>) -> Result<()> {
    if is_numeric(a) != is_numeric(b) {
        check_numeric_text(a, ctx)?;
        check_numeric_text(b, ctx)?;
    }
    Ok(())
}

/// [`check_compared`] for a value compared with several (IN, BETWEEN): a string on the left
/// is read as a number once, as MySQL reads it, each string on the right once.
fn check_compared_with<'v>(
    v: &Value,
    others: impl IntoIterator<Item = &'v Value> + Clone,
    ctx: &Ctx<'_>,
) -> Result<()> {
    if is_numeric(v) {
        for x in others {
            check_numeric_text(x, ctx)?;
        }
    } else if others.into_iter().any(is_numeric) {
        check_numeric_text(v, ctx)?;
    }
    Ok(())
}

/// Warning 1292 when arithmetic reads a string that is not wholly a number (`'12x' + 1` is
/// 13, `'abc' + 1` is 1), an error when `ctx` writes what it evaluates under a strict
/// sql_mode, as MySQL says and refuses it; spaces around the number are not counted.
pub(crate) fn check_numeric_text(v: &Value, ctx: &Ctx<'_>) -> Result<()> {
    let Value::Text(text) = v else {
        return Ok(());
    };
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let whole = !t.is_empty()
        && t.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E'))
        && t.parse::<f64>().is_ok();
    if whole {
        return Ok(());
    }
    let message = || format!("Truncated incorrect DOUBLE value: '{text}'");
    if ctx.strict {
        return Err(Error::new(code::ER_TRUNCATED_WRONG_VALUE, message()));
    }
    ctx.warn(code::ER_TRUNCATED_WRONG_VALUE, message);
    Ok(())
}

/// The current row of a query around a subquery, as the subquery's column references see
/// it, with the rows further out (`parent`). What the subquery read of it is recorded: a
/// run that read none of it gives the same rows for every outer row (the run never looked),
/// so its result is kept for the statement; a run that read some gives the same rows for
/// every outer row with the same values there.
#[derive(Debug)]
pub(crate) struct OuterRow {
    /// The columns of `row`, as the enclosing query's scope has them.
    pub(crate) columns: Vec<ColumnRef>,
    /// The enclosing query's current row.
    pub(crate) row: Vec<Value>,
    /// The row of the query around the enclosing one, when that is a subquery too.
    pub(crate) parent: Option<Arc<OuterRow>>,
    /// Slots of `row` a column reference read while the subquery ran.
    pub(crate) read: std::sync::Mutex<Vec<usize>>,
    /// Whether a reference read a row further out (`parent` or beyond).
    pub(crate) read_further: std::sync::atomic::AtomicBool,
}

impl OuterRow {
    /// The slots of the row the subquery read, in slot order.
    pub(crate) fn read_slots(&self) -> Vec<usize> {
        let mut slots = self.read.lock().unwrap_or_else(|p| p.into_inner()).clone();
        slots.sort_unstable();
        slots.dedup();
        slots
    }

    /// Whether the subquery read this row or one further out.
    pub(crate) fn was_read(&self) -> bool {
        self.read_further.load(std::sync::atomic::Ordering::Relaxed)
            || !self
                .read
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
    }
}

/// The value of column `table.name` in the rows around a subquery, innermost first: `None`
/// when none has it (the caller's unknown column error stands). The reading is recorded on
/// the row it came from, and every row inside that one learns that a row further out was read.
pub(crate) fn outer_column(
    ctx: &Ctx<'_>,
    table: Option<&str>,
    name: &str,
) -> Option<Result<Value>> {
    let mut frame = ctx.outer.as_deref();
    let mut inside: Vec<&OuterRow> = Vec::new();
    while let Some(f) = frame {
        let scope = Scope {
            columns: &f.columns,
            row: &f.row,
            aggregates: None,
            place: "field list",
        };
        match resolve(&scope, table, name) {
            Ok(i) => {
                f.read.lock().unwrap_or_else(|p| p.into_inner()).push(i);
                for g in inside {
                    g.read_further
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                return Some(Ok(f.row[i].clone()));
            }
            Err(e) if e.code == code::ER_NON_UNIQ_ERROR => return Some(Err(e)),
            Err(_) => {}
        }
        inside.push(f);
        frame = f.parent.as_deref();
    }
    None
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

fn bool_value(b: Option<bool>) -> Value {
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

fn numeric_prefix(s: &str) -> f64 {
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
        Value::UInt(u) => Some(*u),
        other => {
            let f = to_f64(other)?.round();
            Some(if f < 0.0 { f as i64 as u64 } else { f as u64 })
        }
    }
}

fn as_i128(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(i128::from(*i)),
        Value::UInt(u) => Some(i128::from(*u)),
        _ => None,
    }
}

/// A time value as epoch microseconds (wall-clock values read in the session time zone).
fn time_us(v: &Value, tz: i64) -> Option<i64> {
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

fn is_time(v: &Value) -> bool {
    matches!(v, Value::Timestamp(_) | Value::DateTime(_) | Value::Date(_))
}

fn is_numeric(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Double(_) | Value::Decimal(_)
    )
}

/// MySQL comparison; `None` when either side is NULL.
pub(crate) fn compare(a: &Value, b: &Value, tz: i64) -> Option<Ordering> {
    if a.is_null() || b.is_null() {
        return None;
    }
    if let (Some(x), Some(y)) = (as_i128(a), as_i128(b)) {
        return Some(x.cmp(&y));
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
fn literal(v: &SqlValue) -> Result<Value> {
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
        SqlValue::Boolean(b) => Value::Int(i64::from(*b)),
        SqlValue::Null => Value::Null,
        other => return Err(Error::unsupported(format!("literal {other}"))),
    })
}

/// Hex digits as bytes (an odd count gets a leading 0); `None` for a non-hex digit.
fn unhex(h: &str) -> Option<Vec<u8>> {
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

/// Finds the slot of a column reference.
pub(crate) fn resolve(scope: &Scope<'_>, table: Option<&str>, name: &str) -> Result<usize> {
    let name_l = lowercase(name);
    let table_l = table.map(lowercase);
    let mut found = None;
    for (i, c) in scope.columns.iter().enumerate() {
        let visible = match &table_l {
            Some(t) => **t == c.table,
            None => !c.qualified_only,
        };
        if c.name == *name_l && visible {
            if found.is_some() {
                return Err(Error::new(
                    code::ER_NON_UNIQ_ERROR,
                    format!("Column '{name}' in {} is ambiguous", scope.place),
                ));
            }
            found = Some(i);
        }
    }
    let shown = match table {
        Some(t) => format!("{t}.{name}"),
        None => name.to_string(),
    };
    found.ok_or_else(|| Error::bad_field(&shown, scope.place))
}

/// `name` in lower case, copied only when it may change: a column is resolved for every row
/// a statement reads, and names are nearly always written in lower-case ASCII already.
fn lowercase(name: &str) -> std::borrow::Cow<'_, str> {
    if name
        .bytes()
        .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
    {
        name.into()
    } else {
        name.to_lowercase().into()
    }
}

fn int_result(v: i128) -> Result<Value> {
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
fn typed_int(v: Option<i128>, unsigned: bool) -> Result<Value> {
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
fn out_of_range_in(e: Error, expr: &impl std::fmt::Display) -> Error {
    if e.code == code::ER_DATA_OUT_OF_RANGE && e.message.ends_with("out of range") {
        return Error::new(
            code::ER_DATA_OUT_OF_RANGE,
            format!("{} in '{expr}'", e.message),
        );
    }
    e
}

fn arith(op: &BinaryOperator, a: &Value, b: &Value) -> Result<Value> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    if let (Some(x), Some(y)) = (as_i128(a), as_i128(b)) {
        let unsigned = matches!(a, Value::UInt(_)) || matches!(b, Value::UInt(_));
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
fn decimal_arith(op: &BinaryOperator, x: &Dec, y: &Dec) -> Result<Value> {
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
fn like_as(text: &str, pattern: &str, escape: char, exact: bool) -> bool {
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

/// `@@name` (the scope prefix already removed).
fn system_variable(name: &str, ctx: &Ctx<'_>) -> Result<Value> {
    match ctx.sql {
        Some(sql) => sql.system_variable(name),
        None => Err(Error::unsupported(format!(
            "@@{name} in a statement that changes rows"
        ))),
    }
}

/// Evaluates an expression.
pub(crate) fn eval(e: &Expr, scope: &Scope<'_>, ctx: &Ctx<'_>) -> Result<Value> {
    match e {
        Expr::Value(v) => literal(&v.value),
        Expr::Identifier(id) => {
            if let Some(var) = id.value.strip_prefix('@') {
                if let Some(sys) = var.strip_prefix('@').filter(|_| id.quote_style.is_none()) {
                    return system_variable(sys, ctx);
                }
                if id.quote_style.is_none() {
                    return Ok(ctx
                        .user_vars
                        .get(&var.to_lowercase())
                        .cloned()
                        .unwrap_or(Value::Null));
                }
            }
            let i = match resolve(scope, None, &id.value) {
                Ok(i) => i,
                Err(e) if e.code == code::ER_BAD_FIELD_ERROR => {
                    // A column of a query around this one (a correlated subquery).
                    if let Some(v) = outer_column(ctx, None, &id.value) {
                        return v;
                    }
                    // MySQL's CURRENT_USER without parentheses, where no column is so named.
                    if id.quote_style.is_none() && id.value.eq_ignore_ascii_case("CURRENT_USER") {
                        return Ok(functions::current_user(ctx));
                    }
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            Ok(scope.row[i].clone())
        }
        Expr::CompoundIdentifier(parts) => {
            let n = parts.len();
            // @@session.name, @@global.name
            if n == 2 && parts[0].value.starts_with("@@") && parts[0].quote_style.is_none() {
                return system_variable(&parts[1].value, ctx);
            }
            if n >= 2 {
                let (table, name) = (&parts[n - 2].value, &parts[n - 1].value);
                match resolve(scope, Some(table), name) {
                    Ok(i) => Ok(scope.row[i].clone()),
                    Err(e) if e.code == code::ER_BAD_FIELD_ERROR => {
                        outer_column(ctx, Some(table), name).unwrap_or(Err(e))
                    }
                    Err(e) => Err(e),
                }
            } else {
                Err(Error::syntax(format!("bad identifier {e}")))
            }
        }
        Expr::Nested(inner) => eval(inner, scope, ctx),
        Expr::Collate { expr, collation } => {
            // `x COLLATE utf8mb4_bin` is how MySQL asks for an exact comparison: the text as
            // bytes, which compare bytewise. A case-insensitive collation is the default one.
            let name = collation.to_string().trim_matches('`').to_ascii_lowercase();
            let v = eval(expr, scope, ctx)?;
            match collation_named(&name) {
                Collated::Bytes => Ok(match v {
                    Value::Text(s) => Value::Bytes(ringrep_engine::types::raw_bytes(&s)),
                    other => other,
                }),
                Collated::Text => Ok(v),
                Collated::Other => Err(Error::unsupported(format!("COLLATE {name}"))),
            }
        }
        Expr::IsNull(x) => Ok(Value::Int(i64::from(eval(x, scope, ctx)?.is_null()))),
        Expr::IsNotNull(x) => Ok(Value::Int(i64::from(!eval(x, scope, ctx)?.is_null()))),
        Expr::IsTrue(x) => Ok(Value::Int(i64::from(
            truthy(&eval(x, scope, ctx)?) == Some(true),
        ))),
        Expr::IsFalse(x) => Ok(Value::Int(i64::from(
            truthy(&eval(x, scope, ctx)?) == Some(false),
        ))),
        Expr::UnaryOp { op, expr } => {
            let v = eval(expr, scope, ctx)?;
            match op {
                UnaryOperator::Not => Ok(bool_value(truthy(&v).map(|b| !b))),
                UnaryOperator::Minus => match v {
                    Value::Null => Ok(Value::Null),
                    Value::Int(i) => typed_int(Some(-i128::from(i)), false)
                        .map_err(|err| out_of_range_in(err, e)),
                    // A literal past BIGINT's range is a number, negated as a number (MySQL
                    // reads `-18446744073709551615` as a DECIMAL).
                    Value::UInt(u) if matches!(expr.as_ref(), Expr::Value(_)) => {
                        Ok(int_result(-i128::from(u))
                            .unwrap_or_else(|_| Value::Decimal(format!("-{u}"))))
                    }
                    // An unsigned expression stays unsigned: only zero negates.
                    Value::UInt(u) => {
                        typed_int(Some(-i128::from(u)), true).map_err(|err| out_of_range_in(err, e))
                    }
                    // Through the exact number: -0.0 is 0.0, as MySQL shows it.
                    Value::Decimal(s) => match Dec::parse(&s) {
                        Some(d) => Dec::int(0).sub(&d).into_decimal(),
                        None => Ok(Value::Decimal(match s.strip_prefix('-') {
                            Some(p) => p.to_string(),
                            None => format!("-{s}"),
                        })),
                    },
                    other => {
                        check_numeric_text(&other, ctx)?;
                        Ok(Value::Double(-to_f64(&other).unwrap_or(0.0)))
                    }
                },
                UnaryOperator::Plus => Ok(v),
                UnaryOperator::BitwiseNot => {
                    Ok(bit_operand(&v).map_or(Value::Null, |b| Value::UInt(!b)))
                }
                other => Err(Error::unsupported(format!("operator {other}"))),
            }
        }
        Expr::BinaryOp { left, op, right } => {
            // `t + INTERVAL n unit`, `t - INTERVAL n unit`, `INTERVAL n unit + t`: MySQL's
            // date arithmetic, as DATE_ADD and DATE_SUB.
            match (op, left.as_ref(), right.as_ref()) {
                (BinaryOperator::Plus, base, Expr::Interval(iv))
                | (BinaryOperator::Plus, Expr::Interval(iv), base) => {
                    return functions::interval_arithmetic(base, iv, 1, scope, ctx)
                }
                (BinaryOperator::Minus, base, Expr::Interval(iv)) => {
                    return functions::interval_arithmetic(base, iv, -1, scope, ctx)
                }
                _ => {}
            }
            match op {
                BinaryOperator::And => {
                    let l = truthy(&eval(left, scope, ctx)?);
                    if l == Some(false) {
                        return Ok(Value::Int(0));
                    }
                    let r = truthy(&eval(right, scope, ctx)?);
                    return Ok(match (l, r) {
                        (_, Some(false)) => Value::Int(0),
                        (Some(true), Some(true)) => Value::Int(1),
                        _ => Value::Null,
                    });
                }
                BinaryOperator::Or => {
                    let l = truthy(&eval(left, scope, ctx)?);
                    if l == Some(true) {
                        return Ok(Value::Int(1));
                    }
                    let r = truthy(&eval(right, scope, ctx)?);
                    return Ok(match (l, r) {
                        (_, Some(true)) => Value::Int(1),
                        (Some(false), Some(false)) => Value::Int(0),
                        _ => Value::Null,
                    });
                }
                _ => {}
            }
            let l = eval(left, scope, ctx)?;
            let r = eval(right, scope, ctx)?;
            // A string compared with a number is read as one: MySQL warns of one that is not
            // (an error in a strict write, an UPDATE's WHERE included).
            let comparison = matches!(
                op,
                BinaryOperator::Eq
                    | BinaryOperator::NotEq
                    | BinaryOperator::Lt
                    | BinaryOperator::LtEq
                    | BinaryOperator::Gt
                    | BinaryOperator::GtEq
                    | BinaryOperator::Spaceship
            );
            if comparison {
                check_compared(&l, &r, ctx)?;
            }
            let cmp = || compare(&l, &r, ctx.tz);
            match op {
                BinaryOperator::Eq => Ok(bool_value(cmp().map(|o| o == Ordering::Equal))),
                BinaryOperator::NotEq => Ok(bool_value(cmp().map(|o| o != Ordering::Equal))),
                BinaryOperator::Lt => Ok(bool_value(cmp().map(|o| o == Ordering::Less))),
                BinaryOperator::LtEq => Ok(bool_value(cmp().map(|o| o != Ordering::Greater))),
                BinaryOperator::Gt => Ok(bool_value(cmp().map(|o| o == Ordering::Greater))),
                BinaryOperator::GtEq => Ok(bool_value(cmp().map(|o| o != Ordering::Less))),
                BinaryOperator::Spaceship => {
                    Ok(Value::Int(i64::from(match (l.is_null(), r.is_null()) {
                        (true, true) => true,
                        (false, false) => cmp() == Some(Ordering::Equal),
                        _ => false,
                    })))
                }
                BinaryOperator::Xor => Ok(match (truthy(&l), truthy(&r)) {
                    (Some(a), Some(b)) => Value::Int(i64::from(a ^ b)),
                    _ => Value::Null,
                }),
                BinaryOperator::StringConcat => Ok(if l.is_null() || r.is_null() {
                    Value::Null
                } else {
                    Value::Text(
                        ringrep_engine::types::text_of(&l) + &ringrep_engine::types::text_of(&r),
                    )
                }),
                BinaryOperator::BitwiseAnd
                | BinaryOperator::BitwiseOr
                | BinaryOperator::BitwiseXor
                | BinaryOperator::PGBitwiseShiftLeft
                | BinaryOperator::PGBitwiseShiftRight => {
                    let (Some(a), Some(b)) = (bit_operand(&l), bit_operand(&r)) else {
                        return Ok(Value::Null);
                    };
                    // A shift by 64 or more leaves nothing, as in MySQL (not Rust's wrap).
                    let shift = u32::try_from(b).ok().filter(|&b| b < 64);
                    Ok(Value::UInt(match op {
                        BinaryOperator::BitwiseAnd => a & b,
                        BinaryOperator::BitwiseOr => a | b,
                        BinaryOperator::BitwiseXor => a ^ b,
                        BinaryOperator::PGBitwiseShiftLeft => shift.map_or(0, |b| a << b),
                        _ => shift.map_or(0, |b| a >> b),
                    }))
                }
                _ => {
                    check_numeric_text(&l, ctx)?;
                    check_numeric_text(&r, ctx)?;
                    check_division(op, &l, &r, ctx)?;
                    arith(op, &l, &r).map_err(|err| out_of_range_in(err, e))
                }
            }
        }
        Expr::In {
            expr,
            target,
            negated,
            ..
        } => {
            let v = eval(expr, scope, ctx)?;
            let candidates = match target {
                InTarget::List(list) => list
                    .iter()
                    .map(|item| eval(item, scope, ctx))
                    .collect::<Result<Vec<_>>>()?,
                InTarget::Subquery(q) => subquery(q, scope, ctx)?
                    .rows
                    .iter()
                    .map(|row| row[0].clone())
                    .collect(),
                other => return Err(Error::unsupported(format!("IN {other}"))),
            };
            // Nothing to compare with: false (true for NOT IN), even for NULL, as MySQL
            // evaluates `NULL IN (an empty subquery)`.
            if candidates.is_empty() {
                return Ok(Value::Int(i64::from(*negated)));
            }
            if v.is_null() {
                return Ok(Value::Null);
            }
            let mut saw_null = false;
            check_compared_with(&v, candidates.iter(), ctx)?;
            for x in candidates {
                match compare(&v, &x, ctx.tz) {
                    Some(Ordering::Equal) => return Ok(Value::Int(i64::from(!negated))),
                    None => saw_null = true,
                    _ => {}
                }
            }
            Ok(if saw_null {
                Value::Null
            } else {
                Value::Int(i64::from(*negated))
            })
        }
        Expr::Between {
            expr,
            negated,
            low,
            high,
        } => {
            let v = eval(expr, scope, ctx)?;
            let (low, high) = (eval(low, scope, ctx)?, eval(high, scope, ctx)?);
            check_compared_with(&v, [&low, &high], ctx)?;
            let lo = compare(&v, &low, ctx.tz);
            let hi = compare(&v, &high, ctx.tz);
            Ok(match (lo, hi) {
                (Some(a), Some(b)) => Value::Int(i64::from(
                    (a != Ordering::Less && b != Ordering::Greater) != *negated,
                )),
                _ => Value::Null,
            })
        }
        Expr::Like {
            negated,
            expr,
            pattern,
            escape_char,
            ..
        } => {
            let v = eval(expr, scope, ctx)?;
            let p = eval(pattern, scope, ctx)?;
            if v.is_null() || p.is_null() {
                return Ok(Value::Null);
            }
            let esc = match escape_char {
                Some(e) => ringrep_engine::types::text_of(&eval(e, scope, ctx)?)
                    .chars()
                    .next()
                    .unwrap_or('\\'),
                None => '\\',
            };
            let exact = matches!(v, Value::Bytes(_)) || matches!(p, Value::Bytes(_));
            Ok(Value::Int(i64::from(
                like_as(
                    &ringrep_engine::types::text_of(&v),
                    &ringrep_engine::types::text_of(&p),
                    esc,
                    exact,
                ) != *negated,
            )))
        }
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            let base = match operand {
                Some(o) => Some(eval(o, scope, ctx)?),
                None => None,
            };
            for w in conditions {
                let c = eval(&w.condition, scope, ctx)?;
                let hit = match &base {
                    Some(b) => compare(b, &c, ctx.tz) == Some(Ordering::Equal),
                    None => truthy(&c) == Some(true),
                };
                if hit {
                    return eval(&w.result, scope, ctx);
                }
            }
            match else_result {
                Some(e) => eval(e, scope, ctx),
                None => Ok(Value::Null),
            }
        }
        Expr::Cast {
            expr,
            data_type,
            kind,
            ..
        } => {
            let _ = kind == &CastKind::Cast;
            cast(eval(expr, scope, ctx)?, data_type, ctx)
        }
        // A character set introducer (`_utf8mb4'abc'`, `_binary'...'` as mysqldump writes
        // binary columns): binary is bytes, any other character set text.
        Expr::Prefixed { prefix, value } if prefix.value.starts_with('_') => {
            in_charset(eval(value, scope, ctx)?, &prefix.value[1..])
        }
        // CONVERT(x USING charset).
        Expr::Convert {
            expr,
            data_type: None,
            charset: Some(charset),
            ..
        } => in_charset(eval(expr, scope, ctx)?, &charset.to_string()),
        Expr::Function(f) => functions::eval_function(f, scope, ctx),
        Expr::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => {
            let v = eval(expr, scope, ctx)?;
            if v.is_null() {
                return Ok(Value::Null);
            }
            let from = match substring_from {
                Some(f) => to_f64(&eval(f, scope, ctx)?).unwrap_or(1.0) as i64,
                None => 1,
            };
            let len = match substring_for {
                Some(l) => to_f64(&eval(l, scope, ctx)?).unwrap_or(0.0).max(0.0) as usize,
                None => usize::MAX,
            };
            Ok(Value::Text(functions::substring(
                &ringrep_engine::types::text_of(&v),
                from,
                len,
            )))
        }
        Expr::Trim {
            expr,
            trim_where,
            trim_what,
            trim_characters: None,
        } => {
            let what = match trim_what {
                Some(w) => Some(eval(w, scope, ctx)?),
                None => None,
            };
            Ok(strings::trim(
                &eval(expr, scope, ctx)?,
                what.as_ref(),
                trim_where.as_ref(),
            ))
        }
        Expr::Position { expr, r#in } => {
            let (needle, hay) = (eval(expr, scope, ctx)?, eval(r#in, scope, ctx)?);
            if needle.is_null() || hay.is_null() {
                return Ok(Value::Null);
            }
            Ok(Value::Int(strings::locate(
                &ringrep_engine::types::text_of(&needle),
                &ringrep_engine::types::text_of(&hay),
                1,
            )))
        }
        // `FLOOR(x)` and `CEIL(x)` parse as expressions of their own.
        Expr::Floor {
            expr,
            field: CeilFloorKind::DateTimeField(DateTimeField::NoDateTime),
        } => functions::floor_or_ceil(&eval(expr, scope, ctx)?, true),
        Expr::Ceil {
            expr,
            field: CeilFloorKind::DateTimeField(DateTimeField::NoDateTime),
        } => functions::floor_or_ceil(&eval(expr, scope, ctx)?, false),
        Expr::Extract { field, expr, .. } => dates::extract(field, &eval(expr, scope, ctx)?, ctx),
        Expr::Subquery(q) => {
            let rows = subquery(q, scope, ctx)?;
            match rows.rows.len() {
                0 => Ok(Value::Null),
                1 => Ok(rows.rows[0][0].clone()),
                _ => Err(Error::new(
                    code::ER_SUBQUERY_NO_1_ROW,
                    "Subquery returns more than 1 row",
                )),
            }
        }
        Expr::Exists {
            subquery: q,
            negated,
        } => {
            let found = !run_subquery(q, scope, ctx)?.rows.is_empty();
            Ok(Value::Int(i64::from(found != *negated)))
        }
        Expr::Interval(_) => Err(Error::syntax(
            "INTERVAL is only allowed with date arithmetic",
        )),
        Expr::TypedString(ts) => literal(&ts.value.value),
        Expr::Tuple(_) => Err(Error::new(
            code::ER_OPERAND_COLUMNS,
            "Operand should contain 1 column(s)",
        )),
        other => Err(Error::unsupported(format!("expression {other}"))),
    }
}

/// A subquery's rows: run now, where the row being evaluated (`scope`) and the rows around
/// it are the outer rows its column references may reach; or, inside a change, as run
/// before it.
fn run_subquery(q: &Query, scope: &Scope<'_>, ctx: &Ctx<'_>) -> Result<Arc<Rows>> {
    if let Some(sql) = ctx.sql {
        return sql.run_subquery_in(q, scope, ctx.outer.as_ref());
    }
    ctx.prefetched
        .and_then(|p| p.get(&q.to_string()).cloned())
        .ok_or_else(|| Error::internal("a subquery was not run before the change that uses it"))
}

/// Runs a subquery that must yield one column (scalar and IN subqueries).
fn subquery(q: &Query, scope: &Scope<'_>, ctx: &Ctx<'_>) -> Result<Arc<Rows>> {
    let rows = run_subquery(q, scope, ctx)?;
    if rows.columns.len() != 1 {
        return Err(Error::new(
            code::ER_OPERAND_COLUMNS,
            "Operand should contain 1 column(s)",
        ));
    }
    Ok(rows)
}

fn cast(v: Value, ty: &DataType, ctx: &Ctx<'_>) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let name = ty.to_string().to_ascii_uppercase();
    let integer = ["SIGNED", "INT", "BIGINT", "UNSIGNED"]
        .iter()
        .any(|p| name.starts_with(p));
    if integer && matches!(v, Value::Text(_) | Value::Bytes(_)) {
        // MySQL warns when it takes a string's leading integer; in a value an INSERT or
        // UPDATE writes (strict mode) that is an error: nothing half-read is stored.
        let text = ringrep_engine::types::text_of(&v);
        let t = text.trim_matches(' ');
        let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            let message = format!("Truncated incorrect INTEGER value: '{text}'");
            if ctx.strict {
                return Err(Error::new(code::ER_TRUNCATED_WRONG_VALUE, message));
            }
            ctx.warn(code::ER_TRUNCATED_WRONG_VALUE, || message);
        }
    }
    Ok(
        if name.starts_with("SIGNED") || name.starts_with("INT") || name.starts_with("BIGINT") {
            // MySQL's 64 bits taken as signed: an unsigned integer past i64's range wraps; a
            // number of another kind or a string past it stops at its bounds.
            let bits = integer_bits(&v);
            Value::Int(match v {
                Value::Int(_) | Value::UInt(_) => bits as i64,
                _ => bits.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
            })
        } else if name.starts_with("UNSIGNED") {
            // And as unsigned: a negative value wraps (-1 is 18446744073709551615).
            Value::UInt(integer_bits(&v) as u64)
        } else if name.starts_with("CHAR")
            || name.starts_with("VARCHAR")
            || name.starts_with("TEXT")
        {
            Value::Text(render(&v, None, ctx.tz).unwrap_or_default())
        } else if name.starts_with("BINARY") {
            Value::Bytes(match v {
                Value::Bytes(b) => b,
                Value::Text(t) => ringrep_engine::types::raw_bytes(&t),
                other => render(&other, None, ctx.tz)
                    .unwrap_or_default()
                    .into_bytes(),
            })
        } else if name.starts_with("DECIMAL") {
            cast_decimal(v, ty, ctx)?
        } else if name.starts_with("DATETIME") || name.starts_with("TIMESTAMP") {
            match time_us(&v, ctx.tz) {
                Some(us) => Value::DateTime(DateTime::from_epoch_micros(us + ctx.tz * 1_000_000)),
                None => Value::Null,
            }
        } else if name.starts_with("DATE") {
            match time_us(&v, ctx.tz) {
                Some(us) => Value::Date(DateTime::from_epoch_micros(us + ctx.tz * 1_000_000).date),
                None => Value::Null,
            }
        } else if name.starts_with("DOUBLE")
            || name.starts_with("FLOAT")
            || name.starts_with("REAL")
        {
            Value::Double(to_f64(&v).unwrap_or(0.0))
        } else if name.starts_with("JSON") {
            Value::Json(ringrep_engine::types::text_of(&v))
        } else {
            return Err(Error::unsupported(format!("CAST AS {ty}")));
        },
    )
}

/// CAST(v AS DECIMAL(p, s)): rounded to `s` digits (MySQL's default DECIMAL(10, 0)); past
/// the type's range its largest value of that sign, a string read to the end of the number
/// at its front (0 for none), each with MySQL's warning (1264, 1292). A size MySQL refuses
/// is its error (1425 to 1427).
fn cast_decimal(v: Value, ty: &DataType, ctx: &Ctx<'_>) -> Result<Value> {
    use sqlparser::ast::ExactNumberInfo;
    let (precision, scale) = match ty {
        DataType::Decimal(info) | DataType::Numeric(info) | DataType::Dec(info) => match info {
            ExactNumberInfo::None => (10, 0),
            ExactNumberInfo::Precision(p) => (*p, 0),
            ExactNumberInfo::PrecisionAndScale(p, s) => (*p, (*s).max(0) as u64),
        },
        _ => (10, 0),
    };
    let shown = render(&v, None, ctx.tz).unwrap_or_default();
    let (precision, scale) = ringrep_engine::types::decimal_size(precision, scale, &shown)?;
    let def = binlog_format::schema::ColumnDef {
        name: format!("CAST({shown} AS DECIMAL({precision},{scale}))"),
        ty: ColumnType::Decimal { precision, scale },
        nullable: true,
        default: binlog_format::schema::ColumnDefault::None,
        on_update_now: false,
        auto_increment: false,
    };
    let (d, diagnostic) = ringrep_engine::types::convert(v, &def, 1, ctx.tz, true)?;
    match diagnostic.map(|(c, _)| c) {
        Some(c) if c == code::ER_WARN_DATA_OUT_OF_RANGE => {
            ctx.warn(code::ER_WARN_DATA_OUT_OF_RANGE, || {
                format!("Out of range value for column '{}' at row 1", def.name)
            });
        }
        Some(c)
            if c == code::WARN_DATA_TRUNCATED || c == code::ER_TRUNCATED_WRONG_VALUE_FOR_FIELD =>
        {
            // As CAST AS SIGNED: an error in a value a strict write stores.
            let message = format!("Truncated incorrect DECIMAL value: '{shown}'");
            if ctx.strict {
                return Err(Error::new(code::ER_TRUNCATED_WRONG_VALUE, message));
            }
            ctx.warn(code::ER_TRUNCATED_WRONG_VALUE, || message);
        }
        _ => {}
    }
    Ok(d)
}

/// A string in character set `charset`: `binary` makes bytes, which compare bytewise; every
/// other character set is text (ringrep's text is UTF-8 whatever the name; a name it does not
/// know is error 1115, as in MySQL).
fn in_charset(v: Value, charset: &str) -> Result<Value> {
    let charset = charset.trim_matches('`').to_ascii_lowercase();
    const TEXT: [&str; 5] = ["utf8mb4", "utf8mb3", "utf8", "latin1", "ascii"];
    if v.is_null() {
        return Ok(Value::Null);
    }
    if charset == "binary" {
        return Ok(match v {
            Value::Bytes(b) => Value::Bytes(b),
            Value::Text(t) => Value::Bytes(ringrep_engine::types::raw_bytes(&t)),
            other => Value::Bytes(ringrep_engine::types::text_of(&other).into_bytes()),
        });
    }
    if !TEXT.contains(&charset.as_str()) {
        return Err(Error::new(
            code::ER_UNKNOWN_CHARACTER_SET,
            format!("Unknown character set: '{charset}'"),
        ));
    }
    Ok(match v {
        Value::Text(t) => Value::Text(t),
        other => Value::Text(ringrep_engine::types::text_of(&other)),
    })
}

/// The 64 bits CAST(... AS SIGNED) and CAST(... AS UNSIGNED) read from `v`, as MySQL takes
/// them: integers exactly (never through a double), other numbers rounded half away from zero
/// and held to the 64-bit range, text by its leading integer (`'12abc'` is 12, with warning
/// 1292 from `cast`, which refuses it in a value being written) or, failing that, as a
/// number.
fn integer_bits(v: &Value) -> i128 {
    const LOW: i128 = i64::MIN as i128;
    const HIGH: i128 = u64::MAX as i128;
    let of_f64 = |f: f64| (f.round() as i128).clamp(LOW, HIGH);
    match v {
        Value::Int(i) => i128::from(*i),
        Value::UInt(u) => i128::from(*u),
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
        Some(ColumnType::Timestamp { fsp }) | Some(ColumnType::DateTime { fsp }) => Some(*fsp),
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
        // A YEAR is four digits: 0 is 0000.
        Value::Int(y) if matches!(ty, Some(ColumnType::Year)) => format!("{y:04}"),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.to_string(),
    })
}

/// A session's SQL mode until SET changes it: strict, and a division by zero in a written
/// value is an error.
pub(crate) const SQL_MODE: &str = "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO";

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
