//! Expression evaluation with MySQL's semantics: NULL is unknown, numbers compare as numbers,
//! strings compare case-insensitively (the default utf8mb4_0900_ai_ci collation), a string
//! compared with a number or a time is converted first.

use std::cmp::Ordering;
use std::collections::HashMap;

use binlog_format::schema::ColumnType;
use binlog_format::value::{format_datetime, DateTime, Value};
use sqlparser::ast::{
    BinaryOperator, CastKind, DataType, DateTimeField, Expr, Function, FunctionArg,
    FunctionArgExpr, FunctionArguments, InTarget, Query, UnaryOperator, Value as SqlValue,
};

use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::types::parse_datetime_text;

/// A column a row slot holds: its table (or alias) and name, lower-cased, and its type.
#[derive(Debug, Clone)]
pub struct ColumnRef {
    pub table: String,
    pub name: String,
    pub ty: Option<ColumnType>,
    /// Reachable only as `table.name`: the second copy of a JOIN ... USING column, whose
    /// bare name means the joined (coalesced) column.
    pub qualified_only: bool,
}

/// What an expression can see.
pub struct Scope<'a> {
    pub columns: &'a [ColumnRef],
    pub row: &'a [Value],
    /// Aggregate results of the current group, by the aggregate's text.
    pub aggregates: Option<&'a HashMap<String, Value>>,
    /// Where an unknown column error says the column was used ("field list", "where clause").
    pub place: &'static str,
}

impl Scope<'_> {
    pub fn empty() -> Scope<'static> {
        Scope {
            columns: &[],
            row: &[],
            aggregates: None,
            place: "field list",
        }
    }
}

/// Session-wide inputs of evaluation.
pub struct Ctx<'a> {
    /// The session, for subqueries.
    pub sql: Option<&'a super::SqlSession>,
    /// Where the session is busy changing rows: the statement's subqueries, run beforehand
    /// (see `SqlSession::prefetch_subqueries`), by their text.
    pub prefetched: Option<&'a HashMap<String, std::sync::Arc<super::select::Rows>>>,
    pub now_us: i64,
    pub tz: i64,
    pub user_vars: &'a HashMap<String, Value>,
    pub database: Option<&'a str>,
    pub last_insert_id: u64,
    /// The row an INSERT ... ON DUPLICATE KEY UPDATE tried to insert, by lower-case column
    /// name, for `VALUES(col)`.
    pub inserted: Option<&'a HashMap<String, Value>>,
}

pub fn is_aggregate(name: &str) -> bool {
    matches!(
        name.to_ascii_uppercase().as_str(),
        "COUNT" | "SUM" | "MIN" | "MAX" | "AVG" | "GROUP_CONCAT"
    )
}

/// SQL truth: `None` for NULL.
pub fn truthy(v: &Value) -> Option<bool> {
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
pub fn to_f64(v: &Value) -> Option<f64> {
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
pub fn compare(a: &Value, b: &Value, tz: i64) -> Option<Ordering> {
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
        _ => {
            let x = ringrep_engine::types::text_of(a).to_lowercase();
            let y = ringrep_engine::types::text_of(b).to_lowercase();
            Some(x.trim_end_matches(' ').cmp(y.trim_end_matches(' ')))
        }
    }
}

/// A literal of the SQL text as a value.
pub fn literal(v: &SqlValue) -> Result<Value> {
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

pub fn unhex(h: &str) -> Option<Vec<u8>> {
    let h = if h.len() % 2 == 1 {
        format!("0{h}")
    } else {
        h.to_string()
    };
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).ok())
        .collect()
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

/// Finds the slot of a column reference.
pub fn resolve(scope: &Scope<'_>, table: Option<&str>, name: &str) -> Result<usize> {
    let name_l = name.to_lowercase();
    let table_l = table.map(str::to_lowercase);
    let mut found = None;
    for (i, c) in scope.columns.iter().enumerate() {
        let visible = match &table_l {
            Some(t) => *t == c.table,
            None => !c.qualified_only,
        };
        if c.name == name_l && visible {
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

fn args_of(f: &Function) -> Result<Vec<&FunctionArgExpr>> {
    match &f.args {
        FunctionArguments::None => Ok(vec![]),
        FunctionArguments::List(l) => Ok(l
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(e) => e,
                FunctionArg::Named { arg, .. } | FunctionArg::ExprNamed { arg, .. } => arg,
            })
            .collect()),
        FunctionArguments::Subquery(_) => {
            Err(Error::unsupported("subqueries as function arguments"))
        }
    }
}

fn arg_exprs(f: &Function) -> Result<Vec<&Expr>> {
    args_of(f)?
        .into_iter()
        .map(|a| match a {
            FunctionArgExpr::Expr(e) => Ok(e),
            _ => Err(Error::syntax(format!("unexpected * in {}", f.name))),
        })
        .collect()
}

fn interval_us(amount: &Value, unit: &DateTimeField) -> Result<IntervalAmount> {
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

enum IntervalAmount {
    Micros(i64),
    Months(i64),
}

fn add_interval(base: &Value, amount: IntervalAmount, sign: i64, tz: i64) -> Value {
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

fn now_value(ctx: &Ctx<'_>, fsp: u32) -> Value {
    let unit = 10i64.pow(6 - fsp.min(6));
    Value::DateTime(DateTime::from_epoch_micros(
        ctx.now_us.div_euclid(unit) * unit + ctx.tz * 1_000_000,
    ))
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

fn arith(op: &BinaryOperator, a: &Value, b: &Value) -> Result<Value> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    if let (Some(x), Some(y)) = (as_i128(a), as_i128(b)) {
        return match op {
            BinaryOperator::Plus => int_result(x + y),
            BinaryOperator::Minus => int_result(x - y),
            BinaryOperator::Multiply => int_result(x.checked_mul(y).ok_or_else(|| {
                Error::new(code::ER_DATA_OUT_OF_RANGE, "BIGINT value is out of range")
            })?),
            BinaryOperator::Divide => {
                if y == 0 {
                    Ok(Value::Null)
                } else {
                    Ok(Value::Decimal(format!("{:.4}", x as f64 / y as f64)))
                }
            }
            BinaryOperator::MyIntegerDivide => {
                if y == 0 {
                    Ok(Value::Null)
                } else {
                    int_result(x / y)
                }
            }
            BinaryOperator::Modulo => {
                if y == 0 {
                    Ok(Value::Null)
                } else {
                    int_result(x % y)
                }
            }
            _ => Err(Error::unsupported(format!("operator {op}"))),
        };
    }
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
    let decimal = matches!(a, Value::Decimal(_)) || matches!(b, Value::Decimal(_));
    if decimal {
        let scale = |v: &Value| match v {
            Value::Decimal(s) => s.split_once('.').map_or(0, |(_, f)| f.len()),
            _ => 0,
        };
        let s = scale(a).max(scale(b))
            + if matches!(op, BinaryOperator::Divide) {
                4
            } else {
                0
            };
        let s = if matches!(op, BinaryOperator::Multiply) {
            scale(a) + scale(b)
        } else {
            s
        };
        return Ok(Value::Decimal(format!("{r:.s$}")));
    }
    Ok(Value::Double(r))
}

/// SQL LIKE with `%` and `_`, case-insensitive as the default collation.
pub fn like(text: &str, pattern: &str, escape: char) -> bool {
    let t: Vec<char> = text.to_lowercase().chars().collect();
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    fn go(t: &[char], p: &[char], esc: char) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('%') => (0..=t.len()).any(|i| go(&t[i..], &p[1..], esc)),
            Some('_') => !t.is_empty() && go(&t[1..], &p[1..], esc),
            Some(&c) if c == esc && p.len() > 1 => {
                !t.is_empty() && t[0] == p[1] && go(&t[1..], &p[2..], esc)
            }
            Some(&c) => !t.is_empty() && t[0] == c && go(&t[1..], &p[1..], esc),
        }
    }
    go(&t, &p, escape)
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
pub fn eval(e: &Expr, scope: &Scope<'_>, ctx: &Ctx<'_>) -> Result<Value> {
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
            let i = resolve(scope, None, &id.value)?;
            Ok(scope.row[i].clone())
        }
        Expr::CompoundIdentifier(parts) => {
            let n = parts.len();
            // @@session.name, @@global.name
            if n == 2 && parts[0].value.starts_with("@@") && parts[0].quote_style.is_none() {
                return system_variable(&parts[1].value, ctx);
            }
            if n >= 2 {
                let i = resolve(scope, Some(&parts[n - 2].value), &parts[n - 1].value)?;
                Ok(scope.row[i].clone())
            } else {
                Err(Error::syntax(format!("bad identifier {e}")))
            }
        }
        Expr::Nested(inner) => eval(inner, scope, ctx),
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
                    Value::Int(i) => int_result(-i128::from(i)),
                    Value::UInt(u) => int_result(-i128::from(u)),
                    Value::Decimal(s) => Ok(Value::Decimal(match s.strip_prefix('-') {
                        Some(p) => p.to_string(),
                        None => format!("-{s}"),
                    })),
                    other => Ok(Value::Double(-to_f64(&other).unwrap_or(0.0))),
                },
                UnaryOperator::Plus => Ok(v),
                other => Err(Error::unsupported(format!("operator {other}"))),
            }
        }
        Expr::BinaryOp { left, op, right } => {
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
                | BinaryOperator::BitwiseXor => {
                    let (Some(a), Some(b)) = (to_f64(&l), to_f64(&r)) else {
                        return Ok(Value::Null);
                    };
                    let (a, b) = (a as i64 as u64, b as i64 as u64);
                    Ok(Value::UInt(match op {
                        BinaryOperator::BitwiseAnd => a & b,
                        BinaryOperator::BitwiseOr => a | b,
                        _ => a ^ b,
                    }))
                }
                _ => arith(op, &l, &r),
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
                InTarget::Subquery(q) => subquery(q, ctx)?
                    .rows
                    .iter()
                    .map(|row| row[0].clone())
                    .collect(),
                other => return Err(Error::unsupported(format!("IN {other}"))),
            };
            if v.is_null() {
                return Ok(Value::Null);
            }
            let mut saw_null = false;
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
            let lo = compare(&v, &eval(low, scope, ctx)?, ctx.tz);
            let hi = compare(&v, &eval(high, scope, ctx)?, ctx.tz);
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
            Ok(Value::Int(i64::from(
                like(
                    &ringrep_engine::types::text_of(&v),
                    &ringrep_engine::types::text_of(&p),
                    esc,
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
        Expr::Function(f) => eval_function(f, scope, ctx),
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
            let s: Vec<char> = ringrep_engine::types::text_of(&v).chars().collect();
            let from = match substring_from {
                Some(f) => to_f64(&eval(f, scope, ctx)?).unwrap_or(1.0) as i64,
                None => 1,
            };
            let start = if from > 0 {
                (from - 1) as usize
            } else if from < 0 {
                s.len().saturating_sub((-from) as usize)
            } else {
                s.len()
            };
            let len = match substring_for {
                Some(l) => to_f64(&eval(l, scope, ctx)?).unwrap_or(0.0).max(0.0) as usize,
                None => usize::MAX,
            };
            Ok(Value::Text(s.iter().skip(start).take(len).collect()))
        }
        Expr::Subquery(q) => {
            let rows = subquery(q, ctx)?;
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
            let found = !run_subquery(q, ctx)?.rows.is_empty();
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

/// A subquery's rows: run now, or, inside a change, as run before it.
fn run_subquery(q: &Query, ctx: &Ctx<'_>) -> Result<std::sync::Arc<super::select::Rows>> {
    if let Some(sql) = ctx.sql {
        return sql.run_subquery(q);
    }
    ctx.prefetched
        .and_then(|p| p.get(&q.to_string()).cloned())
        .ok_or_else(|| Error::internal("a subquery was not run before the change that uses it"))
}

/// Runs an uncorrelated subquery that must yield one column (scalar and IN subqueries). A
/// reference to an outer column fails inside it as an unknown column, rather than being
/// evaluated against the wrong row.
fn subquery(q: &Query, ctx: &Ctx<'_>) -> Result<std::sync::Arc<super::select::Rows>> {
    let rows = run_subquery(q, ctx)?;
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
    Ok(
        if name.starts_with("SIGNED") || name.starts_with("INT") || name.starts_with("BIGINT") {
            Value::Int(to_f64(&v).unwrap_or(0.0).round() as i64)
        } else if name.starts_with("UNSIGNED") {
            Value::UInt(to_f64(&v).unwrap_or(0.0).round().max(0.0) as u64)
        } else if name.starts_with("CHAR")
            || name.starts_with("VARCHAR")
            || name.starts_with("TEXT")
        {
            Value::Text(render(&v, None, ctx.tz).unwrap_or_default())
        } else if name.starts_with("BINARY") {
            Value::Bytes(render(&v, None, ctx.tz).unwrap_or_default().into_bytes())
        } else if name.starts_with("DECIMAL") {
            Value::Decimal(format!("{}", to_f64(&v).unwrap_or(0.0).round()))
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

fn eval_function(f: &Function, scope: &Scope<'_>, ctx: &Ctx<'_>) -> Result<Value> {
    let name = f.name.to_string().to_ascii_uppercase();
    if is_aggregate(&name) {
        let key = f.to_string();
        return scope
            .aggregates
            .and_then(|a| a.get(&key))
            .cloned()
            .ok_or_else(|| {
                Error::new(
                    code::ER_INVALID_GROUP_FUNC_USE,
                    "Invalid use of group function",
                )
            });
    }
    // VALUES(col) names a column of the row being inserted, not of the row in scope.
    if name == "VALUES" {
        let args = arg_exprs(f)?;
        let col = match args.first() {
            Some(Expr::Identifier(i)) => i.value.to_lowercase(),
            Some(Expr::CompoundIdentifier(p)) => {
                p.last().map(|i| i.value.to_lowercase()).unwrap_or_default()
            }
            _ => return Err(Error::syntax("VALUES() takes a column name")),
        };
        return Ok(ctx
            .inserted
            .and_then(|m| m.get(&col))
            .cloned()
            .unwrap_or(Value::Null));
    }
    // Date arithmetic takes an INTERVAL argument, which is not a value.
    if matches!(
        name.as_str(),
        "DATE_SUB" | "DATE_ADD" | "ADDDATE" | "SUBDATE"
    ) {
        let args = arg_exprs(f)?;
        let [base, interval] = args.as_slice() else {
            return Err(Error::syntax(format!("{name} takes 2 arguments")));
        };
        let base = eval(base, scope, ctx)?;
        let sign = if name.contains("SUB") { -1 } else { 1 };
        return match interval {
            Expr::Interval(iv) => {
                let amount = eval(&iv.value, scope, ctx)?;
                if amount.is_null() {
                    return Ok(Value::Null);
                }
                let unit = iv.leading_field.clone().unwrap_or(DateTimeField::Day);
                Ok(add_interval(
                    &base,
                    interval_us(&amount, &unit)?,
                    sign,
                    ctx.tz,
                ))
            }
            other => {
                let days = eval(other, scope, ctx)?;
                Ok(add_interval(
                    &base,
                    interval_us(&days, &DateTimeField::Day)?,
                    sign,
                    ctx.tz,
                ))
            }
        };
    }
    let args: Vec<Value> = arg_exprs(f)?
        .into_iter()
        .map(|a| eval(a, scope, ctx))
        .collect::<Result<_>>()?;
    let arg = |i: usize| args.get(i).cloned().unwrap_or(Value::Null);
    let text = |i: usize| ringrep_engine::types::text_of(&arg(i));
    let any_null = args.iter().any(Value::is_null);
    Ok(match name.as_str() {
        "HEX" => match arg(0) {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Text(hex(&b)),
            Value::Int(i) => Value::Text(format!("{:X}", i)),
            Value::UInt(u) => Value::Text(format!("{u:X}")),
            other => Value::Text(hex(ringrep_engine::types::text_of(&other).as_bytes())),
        },
        "SHA1" | "SHA" => match arg(0) {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Text(sha1_smol::Sha1::from(&b).digest().to_string()),
            v => Value::Text(
                sha1_smol::Sha1::from(render(&v, None, ctx.tz).unwrap_or_default().as_bytes())
                    .digest()
                    .to_string(),
            ),
        },
        "UNHEX" => match arg(0) {
            Value::Null => Value::Null,
            v => unhex(&ringrep_engine::types::text_of(&v))
                .map(Value::Bytes)
                .unwrap_or(Value::Null),
        },
        "CONCAT" => {
            if any_null {
                Value::Null
            } else if args.iter().any(|v| matches!(v, Value::Bytes(_))) {
                // A binary argument makes the result a binary string.
                let mut out = Vec::new();
                for v in &args {
                    match v {
                        Value::Bytes(b) => out.extend_from_slice(b),
                        other => out.extend_from_slice(
                            render(other, None, ctx.tz).unwrap_or_default().as_bytes(),
                        ),
                    }
                }
                Value::Bytes(out)
            } else {
                Value::Text(
                    args.iter()
                        .map(|v| render(v, None, ctx.tz).unwrap_or_default())
                        .collect(),
                )
            }
        }
        "CONCAT_WS" => {
            let sep = text(0);
            Value::Text(
                args[1..]
                    .iter()
                    .filter(|v| !v.is_null())
                    .map(|v| render(v, None, ctx.tz).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(&sep),
            )
        }
        "LENGTH" | "OCTET_LENGTH" => match arg(0) {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Int(b.len() as i64),
            v => Value::Int(render(&v, None, ctx.tz).unwrap_or_default().len() as i64),
        },
        "CHAR_LENGTH" | "CHARACTER_LENGTH" => {
            if any_null {
                Value::Null
            } else {
                Value::Int(text(0).chars().count() as i64)
            }
        }
        "LOWER" | "LCASE" => {
            if any_null {
                Value::Null
            } else {
                Value::Text(text(0).to_lowercase())
            }
        }
        "UPPER" | "UCASE" => {
            if any_null {
                Value::Null
            } else {
                Value::Text(text(0).to_uppercase())
            }
        }
        "REPEAT" => {
            if any_null {
                Value::Null
            } else {
                let n = to_f64(&arg(1)).unwrap_or(0.0).max(0.0) as usize;
                match arg(0) {
                    Value::Bytes(b) => Value::Bytes(b.repeat(n)),
                    _ => Value::Text(text(0).repeat(n)),
                }
            }
        }
        "LEFT" => {
            if any_null {
                Value::Null
            } else {
                Value::Text(
                    text(0)
                        .chars()
                        .take(to_f64(&arg(1)).unwrap_or(0.0).max(0.0) as usize)
                        .collect(),
                )
            }
        }
        "RIGHT" => {
            if any_null {
                Value::Null
            } else {
                let s: Vec<char> = text(0).chars().collect();
                let n = (to_f64(&arg(1)).unwrap_or(0.0).max(0.0) as usize).min(s.len());
                Value::Text(s[s.len() - n..].iter().collect())
            }
        }
        "LPAD" | "RPAD" => {
            if any_null {
                Value::Null
            } else {
                let s: Vec<char> = text(0).chars().collect();
                let n = to_f64(&arg(1)).unwrap_or(0.0).max(0.0) as usize;
                let pad: Vec<char> = text(2).chars().collect();
                if n <= s.len() || pad.is_empty() {
                    Value::Text(s[..n.min(s.len())].iter().collect())
                } else {
                    let fill: String = pad.iter().cycle().take(n - s.len()).collect();
                    let s: String = s.iter().collect();
                    Value::Text(if name == "LPAD" { fill + &s } else { s + &fill })
                }
            }
        }
        "SUBSTRING" | "SUBSTR" | "MID" => {
            if any_null {
                Value::Null
            } else {
                let s: Vec<char> = text(0).chars().collect();
                let from = to_f64(&arg(1)).unwrap_or(1.0) as i64;
                let start = if from > 0 {
                    (from - 1) as usize
                } else if from < 0 {
                    s.len().saturating_sub((-from) as usize)
                } else {
                    s.len()
                };
                let len = if args.len() > 2 {
                    to_f64(&arg(2)).unwrap_or(0.0).max(0.0) as usize
                } else {
                    usize::MAX
                };
                Value::Text(s.iter().skip(start).take(len).collect())
            }
        }
        "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIMESTAMP" | "LOCALTIME" | "SYSDATE" => {
            now_value(ctx, to_f64(&arg(0)).unwrap_or(0.0) as u32)
        }
        "UTC_TIMESTAMP" => Value::DateTime(DateTime::from_epoch_micros(
            ctx.now_us.div_euclid(1_000_000) * 1_000_000,
        )),
        "CURDATE" | "CURRENT_DATE" => {
            Value::Date(DateTime::from_epoch_micros(ctx.now_us + ctx.tz * 1_000_000).date)
        }
        "UNIX_TIMESTAMP" => {
            if args.is_empty() {
                Value::Int(ctx.now_us.div_euclid(1_000_000))
            } else {
                match time_us(&arg(0), ctx.tz) {
                    Some(us) if us % 1_000_000 == 0 => Value::Int(us / 1_000_000),
                    Some(us) => Value::Decimal(format!("{:.6}", us as f64 / 1e6)),
                    None => Value::Null,
                }
            }
        }
        "FROM_UNIXTIME" => match to_f64(&arg(0)) {
            Some(s) => Value::DateTime(DateTime::from_epoch_micros(
                (s * 1e6) as i64 + ctx.tz * 1_000_000,
            )),
            None => Value::Null,
        },
        "TIMESTAMPDIFF" => return Err(Error::unsupported("TIMESTAMPDIFF")),
        "IFNULL" => {
            if arg(0).is_null() {
                arg(1)
            } else {
                arg(0)
            }
        }
        "COALESCE" => args
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
        "ABS" => match arg(0) {
            Value::Null => Value::Null,
            Value::Int(i) => int_result(i128::from(i).abs())?,
            Value::UInt(u) => Value::UInt(u),
            Value::Decimal(s) => Value::Decimal(s.trim_start_matches('-').to_string()),
            v => Value::Double(to_f64(&v).unwrap_or(0.0).abs()),
        },
        "FLOOR" => to_f64(&arg(0)).map_or(Value::Null, |x| Value::Int(x.floor() as i64)),
        "CEIL" | "CEILING" => to_f64(&arg(0)).map_or(Value::Null, |x| Value::Int(x.ceil() as i64)),
        "ROUND" => match (to_f64(&arg(0)), args.len()) {
            (None, _) => Value::Null,
            (Some(x), 1) => Value::Int(x.round() as i64),
            (Some(x), _) => {
                let d = to_f64(&arg(1)).unwrap_or(0.0).max(0.0) as usize;
                Value::Decimal(format!(
                    "{:.*}",
                    d,
                    (x * 10f64.powi(d as i32)).round() / 10f64.powi(d as i32)
                ))
            }
        },
        "MOD" => arith(&BinaryOperator::Modulo, &arg(0), &arg(1))?,
        "GREATEST" | "LEAST" => {
            if any_null {
                Value::Null
            } else {
                let mut best = arg(0);
                for v in &args[1..] {
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
        "DATABASE" | "SCHEMA" => ctx.database.map_or(Value::Null, |d| Value::Text(d.into())),
        "VERSION" => Value::Text(format!("8.0.0-ringrep-{}", env!("CARGO_PKG_VERSION"))),
        "LAST_INSERT_ID" => Value::UInt(ctx.last_insert_id),
        "CONNECTION_ID" => Value::UInt(1),
        "SLEEP" => Value::Int(0),
        _ => {
            return Err(Error::new(
                code::ER_SP_DOES_NOT_EXIST,
                format!("FUNCTION {} does not exist", f.name),
            ))
        }
    })
}

/// A value as the `mysql` client prints it; `None` for NULL. `ty` (the column's type, when the
/// value comes straight from a column) gives the fraction digits of times.
pub fn render(v: &Value, ty: Option<&ColumnType>, tz: i64) -> Option<String> {
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
        Value::Float(f) => format_float(f64::from(*f), 6),
        Value::Double(f) => format_float(*f, 17),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.to_string(),
    })
}

/// MySQL prints FLOAT with 6 significant digits and DOUBLE with the shortest exact form.
fn format_float(f: f64, digits: usize) -> String {
    if f == f.trunc() && f.abs() < 1e15 {
        return format!("{}", f as i64);
    }
    if digits >= 17 {
        return format!("{f}");
    }
    let s = format!("{:.*e}", digits - 1, f);
    let parsed: f64 = s.parse().unwrap_or(f);
    let out = format!("{parsed}");
    if out.len() > 20 {
        s
    } else {
        out
    }
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
