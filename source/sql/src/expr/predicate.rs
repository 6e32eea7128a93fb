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
