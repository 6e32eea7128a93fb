//! WHERE clauses taken apart and applied: the top-level AND terms of a condition, the
//! `column = constant` terms that can narrow a key scan, and whether rows satisfy it. Used
//! by `select`, `join` (which borrows WHERE equalities for comma joins) and `dml`.

use binlog_format::Value;
use sqlparser::ast::{BinaryOperator, Expr};

use super::context::{Ctx, Scope};
use super::evaluate::eval;
use super::value::truthy;
use crate::table::columns::ColumnRef;
use ringrep_engine::error::Result;

/// The top-level AND terms of a condition (parentheses looked through).
pub(crate) fn conjuncts<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        Expr::Nested(inner) => conjuncts(inner, out),
        other => out.push(other),
    }
}

/// Functions whose value is not fixed by their arguments, or that act: MySQL does not fold
/// a call of one into a constant.
const NOT_CONSTANT: &[&str] = &[
    "RAND",
    "UUID",
    "UUID_SHORT",
    "SYSDATE",
    "SLEEP",
    "BENCHMARK",
    "LAST_INSERT_ID",
    "ROW_COUNT",
    "FOUND_ROWS",
    "VALUES",
];

/// Whether `e` is a constant expression as MySQL's optimizer folds one before the engine
/// sees the condition: literals, user variables and deterministic built-in functions and
/// operators of them (FLOOR, SUBSTRING, CAST, ... included); no column, subquery, aggregate,
/// window or function that acts or varies.
pub(crate) fn constant_expression(e: &Expr) -> bool {
    use sqlparser::ast::{visit_expressions, FunctionArguments};
    use std::ops::ControlFlow;
    let flow = visit_expressions(e, |x| {
        let constant = match x {
            // A user variable (`@v`) is a constant of the statement; any other name a column.
            Expr::Identifier(i) => i.quote_style.is_none() && i.value.starts_with('@'),
            Expr::CompoundIdentifier(_)
            | Expr::Subquery(_)
            | Expr::Exists { .. }
            | Expr::In {
                target: sqlparser::ast::InTarget::Subquery(_),
                ..
            }
            | Expr::Wildcard(_)
            | Expr::QualifiedWildcard(..) => false,
            Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_uppercase();
                f.name.0.len() == 1
                    && f.over.is_none()
                    && f.filter.is_none()
                    && f.within_group.is_empty()
                    && !matches!(f.args, FunctionArguments::Subquery(_))
                    && !super::value::is_aggregate(&name)
                    && !super::functions::is_user_lock_function(&name)
                    && !NOT_CONSTANT.contains(&name.as_str())
            }
            _ => true,
        };
        if constant {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    });
    flow.is_continue()
}

/// Equality constraints `col = constant` among the top-level ANDs of a WHERE.
pub(crate) fn equalities(e: &Expr, out: &mut Vec<(String, Expr)>) {
    let col = |x: &Expr| match x {
        Expr::Identifier(i) => Some(i.value.to_lowercase()),
        Expr::CompoundIdentifier(p) => p.last().map(|i| i.value.to_lowercase()),
        _ => None,
    };
    let constant = |x: &Expr| matches!(x, Expr::Value(_));
    let mut terms = Vec::new();
    conjuncts(e, &mut terms);
    for term in terms {
        if let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = term
        {
            if let (Some(c), true) = (col(left), constant(right)) {
                out.push((c, (**right).clone()));
            } else if let (Some(c), true) = (col(right), constant(left)) {
                out.push((c, (**left).clone()));
            }
        }
    }
}

/// Whether a row satisfies a WHERE clause (no clause: every row).
pub(crate) fn row_matches(
    selection: Option<&Expr>,
    columns: &[ColumnRef],
    row: &[Value],
    ctx: &Ctx<'_>,
) -> Result<bool> {
    match selection {
        None => Ok(true),
        Some(w) => Ok(truthy(&eval(
            w,
            &Scope {
                columns,
                row,
                aggregates: None,
                place: "where clause",
            },
            ctx,
        )?) == Some(true)),
    }
}

/// The rows that satisfy a WHERE clause, in order (no clause: all of them).
pub(crate) fn keep_matching(
    selection: Option<&Expr>,
    columns: &[ColumnRef],
    rows: Vec<Vec<Value>>,
    ctx: &Ctx<'_>,
) -> Result<Vec<Vec<Value>>> {
    if selection.is_none() {
        return Ok(rows);
    }
    let mut kept = Vec::with_capacity(rows.len());
    for r in rows {
        if row_matches(selection, columns, &r, ctx)? {
            kept.push(r);
        }
    }
    Ok(kept)
}
