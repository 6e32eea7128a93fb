//! An expression's value: [`eval`], with the function calls whose arguments are expressions
//! (aggregates, `VALUES(col)`, date arithmetic) and casts; the other functions are
//! `functions`'s.

use std::cmp::Ordering;
use std::sync::Arc;

use binlog_format::schema::ColumnType;
use binlog_format::value::{DateTime, Value};
use sqlparser::ast::{
    BinaryOperator, CastKind, CeilFloorKind, DataType, DateTimeField, Expr, Function, FunctionArg,
    FunctionArgExpr, FunctionArguments, InTarget, Query, UnaryOperator,
};

use crate::table::rows::Rows;
use ringrep_engine::error::{code, Error, Result};

use super::context::*;
use super::decimal::Dec;
use super::functions::*;
use super::value::*;
use super::{dates, functions, strings};

/// Evaluates a function call.
pub(super) fn eval_function(f: &Function, scope: &Scope<'_>, ctx: &Ctx<'_>) -> Result<Value> {
    let name = f.name.to_string().to_ascii_uppercase();
    if is_aggregate(&name) {
        return group_result(f, scope);
    }
    // VALUES(col) names a column of the row being inserted, not of the row in scope.
    if name == "VALUES" {
        return inserted_value(f, ctx);
    }
    // TIMESTAMPDIFF's first argument is a unit, not a value.
    if name == "TIMESTAMPDIFF" {
        let args = arg_exprs(f)?;
        arity(&name, args.len(), 3, 3)?;
        let [unit, a, b] = args.as_slice() else {
            return Err(Error::internal("TIMESTAMPDIFF took 3 arguments"));
        };
        let unit = match unit {
            Expr::Identifier(i) => i.value.to_ascii_uppercase(),
            other => other.to_string().to_ascii_uppercase(),
        };
        let (a, b) = (eval(a, scope, ctx)?, eval(b, scope, ctx)?);
        return super::dates::timestamp_diff(&unit, &a, &b, ctx);
    }
    // Date arithmetic takes an INTERVAL argument, which is not a value.
    if matches!(
        name.as_str(),
        "DATE_SUB" | "DATE_ADD" | "ADDDATE" | "SUBDATE"
    ) {
        return date_arithmetic(&name, f, scope, ctx);
    }
    let args = Args(
        arg_exprs(f)?
            .into_iter()
            .map(|a| eval(a, scope, ctx))
            .collect::<Result<_>>()?,
    );
    for family in FAMILIES {
        if let Some(v) = family(&name, &args, ctx)? {
            return Ok(v);
        }
    }
    Err(Error::new(
        code::ER_SP_DOES_NOT_EXIST,
        format!("FUNCTION {} does not exist", f.name),
    ))
}

/// The argument expressions of a call (named arguments by their value).
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

/// The argument expressions of a call; a `*` argument is an error.
fn arg_exprs(f: &Function) -> Result<Vec<&Expr>> {
    args_of(f)?
        .into_iter()
        .map(|a| match a {
            FunctionArgExpr::Expr(e) => Ok(e),
            _ => Err(Error::syntax(format!("unexpected * in {}", f.name))),
        })
        .collect()
}

/// An aggregate call outside aggregation reads the current group's result, computed
/// beforehand by the SELECT; with no group it is misplaced.
fn group_result(f: &Function, scope: &Scope<'_>) -> Result<Value> {
    let key = f.to_string();
    scope
        .aggregates
        .and_then(|a| a.get(&key))
        .cloned()
        .ok_or_else(|| {
            Error::new(
                code::ER_INVALID_GROUP_FUNC_USE,
                "Invalid use of group function",
            )
        })
}

/// `VALUES(col)` in ON DUPLICATE KEY UPDATE: the value the INSERT tried for `col` (NULL
/// elsewhere).
fn inserted_value(f: &Function, ctx: &Ctx<'_>) -> Result<Value> {
    let args = arg_exprs(f)?;
    let col = match args.first() {
        Some(Expr::Identifier(i)) => i.value.to_lowercase(),
        Some(Expr::CompoundIdentifier(p)) => {
            p.last().map(|i| i.value.to_lowercase()).unwrap_or_default()
        }
        _ => return Err(Error::syntax("VALUES() takes a column name")),
    };
    Ok(ctx
        .inserted
        .and_then(|m| m.get(&col))
        .cloned()
        .unwrap_or(Value::Null))
}

/// DATE_ADD, DATE_SUB, ADDDATE and SUBDATE: a time moved by an `INTERVAL n unit`, or by a
/// number of days.
fn date_arithmetic(name: &str, f: &Function, scope: &Scope<'_>, ctx: &Ctx<'_>) -> Result<Value> {
    let args = arg_exprs(f)?;
    let [base, interval] = args.as_slice() else {
        return Err(Error::syntax(format!("{name} takes 2 arguments")));
    };
    let sign = if name.contains("SUB") { -1 } else { 1 };
    match interval {
        Expr::Interval(iv) => interval_arithmetic(base, iv, sign, scope, ctx),
        other => {
            let base = eval(base, scope, ctx)?;
            let days = eval(other, scope, ctx)?;
            Ok(add_interval(
                &base,
                interval_us(&days, &DateTimeField::Day)?,
                sign,
                ctx.tz,
            ))
        }
    }
}

/// `base` moved by the interval `iv`, forwards (`sign` 1) or back (-1): `t + INTERVAL ...`.
pub(super) fn interval_arithmetic(
    base: &Expr,
    iv: &sqlparser::ast::Interval,
    sign: i64,
    scope: &Scope<'_>,
    ctx: &Ctx<'_>,
) -> Result<Value> {
    let base = eval(base, scope, ctx)?;
    let amount = eval(&iv.value, scope, ctx)?;
    if amount.is_null() || base.is_null() {
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
                    return interval_arithmetic(base, iv, 1, scope, ctx)
                }
                (BinaryOperator::Minus, base, Expr::Interval(iv)) => {
                    return interval_arithmetic(base, iv, -1, scope, ctx)
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
            if let (Expr::Tuple(ls), Expr::Tuple(rs)) = (left.as_ref(), right.as_ref()) {
                return compare_rows(ls, op, rs, scope, ctx);
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

/// A comparison of two row constructors, `(a, b) > (x, y)`, as MySQL makes it: `=` when
/// every pair is equal, `<>` when one is not; `<`, `<=`, `>`, `>=` in order, column by
/// column (`(a, b) > (x, y)` is `a > x OR (a = x AND b > y)`), NULL where a NULL decides;
/// `<=>` pair by pair NULL-safe.
fn compare_rows(
    ls: &[Expr],
    op: &BinaryOperator,
    rs: &[Expr],
    scope: &Scope<'_>,
    ctx: &Ctx<'_>,
) -> Result<Value> {
    if ls.len() != rs.len() {
        return Err(Error::new(
            code::ER_OPERAND_COLUMNS,
            format!("Operand should contain {} column(s)", ls.len()),
        ));
    }
    let and = |a: Option<bool>, b: Option<bool>| match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    };
    let or = |a: Option<bool>, b: Option<bool>| match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    };
    let mut pairs = Vec::with_capacity(ls.len());
    for (l, r) in ls.iter().zip(rs) {
        if matches!(l, Expr::Tuple(_)) || matches!(r, Expr::Tuple(_)) {
            return Err(Error::new(
                code::ER_OPERAND_COLUMNS,
                "Operand should contain 1 column(s)",
            ));
        }
        let (l, r) = (eval(l, scope, ctx)?, eval(r, scope, ctx)?);
        check_compared(&l, &r, ctx)?;
        pairs.push((l, r));
    }
    let cmp = |(l, r): &(Value, Value)| compare(l, r, ctx.tz);
    // Three-valued: a NULL pair leaves the result open, an unequal pair closes it.
    let all_equal = || {
        let mut acc = Some(true);
        for p in &pairs {
            acc = and(acc, cmp(p).map(|o| o == Ordering::Equal));
        }
        acc
    };
    let ordered = |strict: Ordering, or_equal: bool| {
        let (mut result, mut equal_so_far) = (Some(false), Some(true));
        for (i, p) in pairs.iter().enumerate() {
            let c = cmp(p);
            let mut here = c.map(|o| o == strict);
            if or_equal && i + 1 == pairs.len() {
                here = or(here, c.map(|o| o == Ordering::Equal));
            }
            result = or(result, and(equal_so_far, here));
            equal_so_far = and(equal_so_far, c.map(|o| o == Ordering::Equal));
        }
        result
    };
    Ok(match op {
        BinaryOperator::Eq => bool_value(all_equal()),
        BinaryOperator::NotEq => bool_value(all_equal().map(|b| !b)),
        BinaryOperator::Lt => bool_value(ordered(Ordering::Less, false)),
        BinaryOperator::LtEq => bool_value(ordered(Ordering::Less, true)),
        BinaryOperator::Gt => bool_value(ordered(Ordering::Greater, false)),
        BinaryOperator::GtEq => bool_value(ordered(Ordering::Greater, true)),
        BinaryOperator::Spaceship => Value::Int(i64::from(pairs.iter().all(|p| {
            match (p.0.is_null(), p.1.is_null()) {
                (true, true) => true,
                (false, false) => cmp(p) == Some(Ordering::Equal),
                _ => false,
            }
        }))),
        _ => {
            return Err(Error::new(
                code::ER_OPERAND_COLUMNS,
                "Operand should contain 1 column(s)",
            ))
        }
    })
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
        } else if name.starts_with("TIME") {
            cast_time(&v, &name, ctx)?
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

/// CAST(v AS TIME[(fsp)]): rounded to `fsp` digits (0 by default, 1426 past 6); a time past
/// the range its nearest end, what is no time NULL, each with MySQL's warning (1292).
fn cast_time(v: &Value, name: &str, ctx: &Ctx<'_>) -> Result<Value> {
    use ringrep_engine::types::{round_time, time_of, TimeError};
    let fsp: u64 = name
        .split_once('(')
        .and_then(|(_, r)| r.trim_end_matches(')').trim().parse().ok())
        .unwrap_or(0);
    if fsp > 6 {
        return Err(Error::new(
            code::ER_TOO_BIG_PRECISION,
            format!("Too-big precision {fsp} specified for 'CAST'. Maximum is 6."),
        ));
    }
    let max = binlog_format::value::TIME_MAX_MICROS;
    let warn = || {
        let text = ringrep_engine::types::text_of(v);
        ctx.warn(code::ER_TRUNCATED_WRONG_VALUE, || {
            format!("Truncated incorrect time value: '{text}'")
        });
    };
    Ok(match time_of(v, ctx.tz) {
        Ok(us) => Value::Time(round_time(us, fsp as u8).clamp(-max, max)),
        Err(TimeError::OutOfRange(us)) => {
            warn();
            Value::Time(us)
        }
        Err(_) => {
            warn();
            Value::Null
        }
    })
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
        comment: String::new(),
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
