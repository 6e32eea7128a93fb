//! SELECT: WHERE, GROUP BY with aggregates, HAVING, ORDER BY, DISTINCT, LIMIT over one table,
//! none, or the joined tables of `join`. On one table, a WHERE that fixes the leading
//! primary-key columns with `=` reads only that key range; a page in key order (`WHERE (k1,
//! k2) > (v1, v2) ORDER BY k1, k2 LIMIT n`) reads only that page; everything else scans the
//! table.

use std::cmp::Ordering;
use std::collections::HashMap;

use binlog_format::schema::{ColumnType, TableDef};
use binlog_format::{Key, Value};
use sqlparser::ast::{
    Distinct, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentClause,
    FunctionArguments, GroupByExpr, LimitClause, ObjectName, OrderByExpr, OrderByKind, OrderBySort,
    Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, SetOperator,
    SetQuantifier, TableFactor,
};

use crate::expr::decimal::Dec;
use crate::expr::memo::Memo;
use crate::expr::predicate::{equalities, keep_matching};
use crate::expr::rowset::{dedupe, filter_by};
use crate::expr::{
    compare, eval, is_aggregate, render, resolve, to_f64, truthy, Ctx, OuterRow, Scope,
};
use crate::parse::statement::split_name;
use crate::parse::tree::source_text;
use crate::table::columns::{table_columns, ColumnRef, FromTable, StarCol};
use crate::table::rows::Rows;
use crate::{Outcome, ResultSet, SqlSession};
use ringrep_engine::error::{code, Error, Result};

/// The FROM side of a SELECT: its tables, and what `*` stands for when that is not every
/// table's columns in order (after JOIN ... USING, joined columns come first, once).
struct SelectFrom {
    tables: Vec<FromTable>,
    star: Option<Vec<StarCol>>,
}

/// A select-list entry: an expression, or a column copied from the source row.
enum Item<'a> {
    Expr(&'a Expr),
    Slot(usize),
}

/// A column of a SELECT's result: its header, what gives its values, and the table column
/// type behind it (where it is a bare column).
struct OutputColumn<'a> {
    header: String,
    item: Item<'a>,
    ty: Option<ColumnType>,
}

/// An output row before ordering: its values, and its ORDER BY keys.
pub(crate) type KeyedRow = (Vec<Value>, Vec<Value>);

/// A statement's subquery results: the uncorrelated ones by key, the correlated ones by key
/// then by the values they read.
pub(crate) type SubqueryResults = (
    std::collections::HashMap<String, std::sync::Arc<Rows>>,
    std::collections::HashMap<String, Memo>,
);

/// The entries `*` stands for: a table's visible columns, in order, under their own names.
fn push_columns(outputs: &mut Vec<OutputColumn<'_>>, t: &FromTable) {
    for (i, name, ty) in &t.star {
        outputs.push(OutputColumn {
            header: name.clone(),
            item: Item::Slot(t.offset + i),
            ty: ty.clone(),
        });
    }
}

/// Sorts rows by their ORDER BY keys, made from the terms of `order` (NULLs first, as MySQL
/// does); a stable sort, so ties keep their order.
pub(crate) fn sort_keyed(out: &mut [KeyedRow], order: &[(&Expr, bool)], tz: i64) {
    if order.is_empty() {
        return;
    }
    out.sort_by(|a, b| {
        for (i, (_, d)) in order.iter().enumerate() {
            let o = match (a.1[i].is_null(), b.1[i].is_null()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                _ => compare(&a.1[i], &b.1[i], tz).unwrap_or(Ordering::Equal),
            };
            let o = if *d { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
}

/// The rows of a query's result: sorted by their keys as ORDER BY says, then cut to its
/// LIMIT and OFFSET.
fn ordered_page(
    mut keyed: Vec<KeyedRow>,
    order: &[(&Expr, bool)],
    q: &Query,
    ctx: &Ctx<'_>,
) -> Result<Vec<Vec<Value>>> {
    sort_keyed(&mut keyed, order, ctx.tz);
    let (limit, offset) = limits(q, ctx)?;
    Ok(keyed
        .into_iter()
        .skip(offset)
        .take(limit.unwrap_or(usize::MAX))
        .map(|(v, _)| v)
        .collect())
}

/// A query's LIMIT and OFFSET.
pub(crate) fn limits(q: &Query, ctx: &Ctx<'_>) -> Result<(Option<usize>, usize)> {
    let n = |e: &Expr| -> Result<Option<usize>> {
        Ok(to_f64(&eval(e, &Scope::empty(), ctx)?).map(|f| f as usize))
    };
    Ok(match &q.limit_clause {
        None => (None, 0),
        Some(LimitClause::LimitOffset { limit, offset, .. }) => (
            limit.as_ref().map(n).transpose()?.flatten(),
            offset
                .as_ref()
                .map(|o| n(&o.value))
                .transpose()?
                .flatten()
                .unwrap_or(0),
        ),
        Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
            (n(limit)?, n(offset)?.unwrap_or(0))
        }
    })
}

/// Aggregate calls in an expression, by their text.
fn collect_aggregates<'a>(e: &'a Expr, out: &mut Vec<&'a Function>) {
    match e {
        Expr::Function(f) if is_aggregate(&f.name.to_string()) => out.push(f),
        Expr::Function(f) => {
            if let FunctionArguments::List(l) = &f.args {
                for a in &l.args {
                    if let FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) = a {
                        collect_aggregates(x, out);
                    }
                }
            }
        }
        Expr::BinaryOp { left, right, .. } => {
            collect_aggregates(left, out);
            collect_aggregates(right, out);
        }
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::Cast { expr, .. } => collect_aggregates(expr, out),
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            if let Some(o) = operand {
                collect_aggregates(o, out);
            }
            for w in conditions {
                collect_aggregates(&w.condition, out);
                collect_aggregates(&w.result, out);
            }
            if let Some(e) = else_result {
                collect_aggregates(e, out);
            }
        }
        Expr::Between {
            expr, low, high, ..
        } => {
            collect_aggregates(expr, out);
            collect_aggregates(low, out);
            collect_aggregates(high, out);
        }
        _ => {}
    }
}

/// `column = name` terms among the top-level ANDs of a WHERE where `column` is one of the
/// query's own `columns` and `name` is not (so it names a column of an enclosing query).
fn outer_equalities(e: &Expr, columns: &[ColumnRef], out: &mut Vec<(String, Expr)>) {
    let scope = Scope {
        columns,
        row: &[],
        aggregates: None,
        place: "where clause",
    };
    let own = |x: &Expr| match x {
        Expr::Identifier(i) if !i.value.starts_with('@') => resolve(&scope, None, &i.value)
            .ok()
            .map(|_| i.value.to_lowercase()),
        Expr::CompoundIdentifier(p) if p.len() >= 2 => {
            resolve(&scope, Some(&p[p.len() - 2].value), &p[p.len() - 1].value)
                .ok()
                .map(|_| p[p.len() - 1].value.to_lowercase())
        }
        _ => None,
    };
    let foreign = |x: &Expr| match x {
        Expr::Identifier(i) if !i.value.starts_with('@') => {
            resolve(&scope, None, &i.value).is_err_and(|e| e.code == code::ER_BAD_FIELD_ERROR)
        }
        Expr::CompoundIdentifier(p) if p.len() >= 2 => {
            resolve(&scope, Some(&p[p.len() - 2].value), &p[p.len() - 1].value)
                .is_err_and(|e| e.code == code::ER_BAD_FIELD_ERROR)
        }
        _ => false,
    };
    let mut terms = Vec::new();
    crate::expr::predicate::conjuncts(e, &mut terms);
    for term in terms {
        if let Expr::BinaryOp {
            left,
            op: sqlparser::ast::BinaryOperator::Eq,
            right,
        } = term
        {
            if let (Some(c), true) = (own(left), foreign(right)) {
                out.push((c, (**right).clone()));
            } else if let (Some(c), true) = (own(right), foreign(left)) {
                out.push((c, (**left).clone()));
            }
        }
    }
}

/// A query's ORDER BY terms: expression and whether descending.
fn order_terms(q: &Query) -> Result<Vec<(&Expr, bool)>> {
    match q.order_by.as_ref().map(|o| &o.kind) {
        Some(OrderByKind::Expressions(v)) => Ok(order_pairs(v)),
        Some(OrderByKind::All(_)) => Err(Error::unsupported("ORDER BY ALL")),
        None => Ok(vec![]),
    }
}

/// A GROUP BY term as MySQL reads it: a number is the select list's column at that position
/// (from 1; past the list 1054), a name no column of the FROM tables has is a select-list
/// alias (MySQL looks in the tables first for GROUP BY); anything else is itself.
fn group_term<'e>(
    e: &'e Expr,
    outputs: &[OutputColumn<'e>],
    columns: &[ColumnRef],
) -> Result<std::borrow::Cow<'e, Expr>> {
    use std::borrow::Cow;
    // The expression behind one column of the select list.
    let output_expr = |o: &OutputColumn<'e>| -> Cow<'e, Expr> {
        match o.item {
            Item::Expr(x) => Cow::Borrowed(x),
            Item::Slot(s) => {
                let c = &columns[s];
                let name = sqlparser::ast::Ident::new(c.name.clone());
                Cow::Owned(if c.table.is_empty() {
                    Expr::Identifier(name)
                } else {
                    Expr::CompoundIdentifier(vec![
                        sqlparser::ast::Ident::new(c.table.clone()),
                        name,
                    ])
                })
            }
        }
    };
    match e {
        Expr::Value(v) => match &v.value {
            sqlparser::ast::Value::Number(n, _) => {
                match n
                    .parse::<usize>()
                    .ok()
                    .filter(|&p| p >= 1 && p <= outputs.len())
                {
                    Some(p) => Ok(output_expr(&outputs[p - 1])),
                    None => Err(Error::new(
                        code::ER_BAD_FIELD_ERROR,
                        format!("Unknown column '{n}' in 'group statement'"),
                    )),
                }
            }
            _ => Ok(Cow::Borrowed(e)),
        },
        Expr::Identifier(i) => {
            let name = i.value.to_lowercase();
            if columns.iter().any(|c| !c.qualified_only && c.name == name) {
                return Ok(Cow::Borrowed(e));
            }
            Ok(outputs
                .iter()
                .find(|o| o.header.to_lowercase() == name)
                .map_or(Cow::Borrowed(e), output_expr))
        }
        _ => Ok(Cow::Borrowed(e)),
    }
}

/// ORDER BY terms as expression and whether descending: a query's, an UPDATE's or DELETE's,
/// GROUP_CONCAT's.
pub(crate) fn order_pairs(terms: &[OrderByExpr]) -> Vec<(&Expr, bool)> {
    terms
        .iter()
        .map(|o| (&o.expr, matches!(o.options.sort, Some(OrderBySort::Desc))))
        .collect()
}

impl SqlSession {
    /// A query statement's result set (`text` is the statement's text, for column names).
    pub(crate) fn query(&mut self, q: &Query, text: &str) -> Result<Outcome> {
        let rows = self.run_query(q, text)?;
        Ok(self.rows_outcome(rows))
    }

    /// A query's rows as the statement's result set.
    pub(crate) fn rows_outcome(&self, rows: Rows) -> Outcome {
        Outcome::Rows(ResultSet {
            columns: rows.columns,
            types: rows.types,
            rows: rows.rows,
            tz: self.session.vars.tz_offset,
        })
    }

    /// The visible rows of a table for a WHERE, narrowed by leading key equalities (with a
    /// constant, or with a column of a query around this one).
    pub(crate) fn rows_for(
        &self,
        def: &TableDef,
        columns: &[ColumnRef],
        selection: Option<&Expr>,
    ) -> Result<Vec<Vec<Value>>> {
        let prefix = self.key_prefix_in(def, selection, Some(columns))?;
        let rows = self.session.scan(def, &prefix)?;
        keep_matching(selection, columns, rows, &self.ctx())
    }

    /// The rows of a query that reads one page of a table in primary-key order, read as one
    /// page rather than as the whole table: `SELECT * FROM t [WHERE (k1, k2) > (v1, v2)]
    /// [ORDER BY k1, k2] LIMIT n` (keyset pagination, as a verifier or a dump walks a table;
    /// `>=` and a leading part of the key too, the select list bare columns or `*`). The
    /// engine reads the first `offset + n` visible rows from the key bound on, under its lock
    /// for those rows only; the WHERE is then applied as always. `None` (read the whole
    /// table) for any other query, for a bound that is not exactly a key value, and when the
    /// page's WHERE turned rows away (a shorter bound than the whole key): those rows may
    /// have hidden later ones the LIMIT should have taken.
    fn page_rows(
        &self,
        q: &Query,
        select: &Select,
        def: &TableDef,
        columns: &[ColumnRef],
    ) -> Result<Option<Vec<Vec<Value>>>> {
        let plain = select.projection.iter().all(|item| match item {
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => true,
            SelectItem::UnnamedExpr(e) => {
                matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
            }
            _ => false,
        });
        let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(v, m) if v.is_empty() && m.is_empty());
        if !plain
            || grouped
            || select.having.is_some()
            || select.distinct.is_some()
            || !q.locks.is_empty()
        {
            return Ok(None);
        }
        let ctx = self.ctx();
        let (Some(limit), offset) = limits(q, &ctx)? else {
            return Ok(None);
        };
        let Some(cap) = offset.checked_add(limit) else {
            return Ok(None);
        };
        let column_name = |e: &Expr| match e {
            Expr::Identifier(i) => Some(i.value.clone()),
            Expr::CompoundIdentifier(p) if p.len() <= 3 => p.last().map(|i| i.value.clone()),
            _ => None,
        };
        let is_key_column = |e: &Expr, at: usize| {
            column_name(e).is_some_and(|n| {
                def.primary_key
                    .get(at)
                    .is_some_and(|&c| def.columns[c].name.eq_ignore_ascii_case(&n))
            })
        };
        // ORDER BY none, or the whole primary key ascending, on key types whose SQL order is
        // their stored order (not FLOAT or DOUBLE, where -0 and 0 are one value to SQL).
        let order = order_terms(q)?;
        if !order.is_empty() {
            let ordered_like_keys = order.len() == def.primary_key.len()
                && order
                    .iter()
                    .enumerate()
                    .all(|(at, (e, desc))| !desc && is_key_column(e, at))
                && def.primary_key.iter().all(|&c| {
                    matches!(
                        def.columns[c].ty,
                        ColumnType::Integer { .. }
                            | ColumnType::Decimal { .. }
                            | ColumnType::Char { .. }
                            | ColumnType::VarChar { .. }
                            | ColumnType::Binary { .. }
                            | ColumnType::VarBinary { .. }
                            | ColumnType::Date
                            | ColumnType::DateTime { .. }
                            | ColumnType::Timestamp { .. }
                    )
                });
            if !ordered_like_keys {
                return Ok(None);
            }
        }
        // WHERE none, or one comparison of the leading key columns with values.
        let mut lower: Option<(Vec<Value>, bool)> = None;
        if let Some(w) = &select.selection {
            let Expr::BinaryOp { left, op, right } = w else {
                return Ok(None);
            };
            let inclusive = match op {
                sqlparser::ast::BinaryOperator::Gt => false,
                sqlparser::ast::BinaryOperator::GtEq => true,
                _ => return Ok(None),
            };
            let (names, values): (Vec<&Expr>, Vec<&Expr>) = match (left.as_ref(), right.as_ref()) {
                (Expr::Tuple(l), Expr::Tuple(r)) if l.len() == r.len() => {
                    (l.iter().collect(), r.iter().collect())
                }
                (Expr::Tuple(_), _) | (_, Expr::Tuple(_)) => return Ok(None),
                (l, r) => (vec![l], vec![r]),
            };
            if names.len() > def.primary_key.len()
                || !names.iter().enumerate().all(|(at, e)| is_key_column(e, at))
            {
                return Ok(None);
            }
            let mut bound = Vec::with_capacity(values.len());
            for (at, e) in values.into_iter().enumerate() {
                let col = &def.columns[def.primary_key[at]];
                let Ok(v) = eval(e, &Scope::empty(), &ctx) else {
                    return Ok(None);
                };
                // As for a key prefix: only an exact value of the column's type is a bound.
                if col.ty.is_string() && !matches!(v, Value::Text(_) | Value::Bytes(_)) {
                    return Ok(None);
                }
                match ringrep_engine::types::coerce(v.clone(), col, 1, ctx.tz) {
                    Ok(c) if compare(&c, &v, ctx.tz) == Some(Ordering::Equal) && !c.is_null() => {
                        bound.push(c)
                    }
                    _ => return Ok(None),
                }
            }
            lower = Some((bound, inclusive));
        }
        let from = match &lower {
            Some((v, true)) => std::ops::Bound::Included(v.as_slice()),
            Some((v, false)) => std::ops::Bound::Excluded(v.as_slice()),
            None => std::ops::Bound::Unbounded,
        };
        let Some(rows) = self.session.scan_page(def, from, cap)? else {
            return Ok(None);
        };
        let full = rows.len() == cap;
        let read = rows.len();
        let kept = keep_matching(select.selection.as_ref(), columns, rows, &ctx)?;
        if full && kept.len() < read {
            return Ok(None);
        }
        Ok(Some(kept))
    }

    /// The leading primary-key values a WHERE fixes with `=` (exact values of the columns
    /// types): only rows under that prefix can match, so only they need reading.
    pub(crate) fn key_prefix(
        &self,
        def: &TableDef,
        selection: Option<&Expr>,
    ) -> Result<Vec<Value>> {
        self.key_prefix_in(def, selection, None)
    }

    /// [`SqlSession::key_prefix`], where `inner` (the scope of the query's own columns)
    /// lets `key = name` narrow too when `name` is not one of them: a column of the row of an
    /// enclosing query, a correlated subquery's usual `inner.k = outer.k`.
    fn key_prefix_in(
        &self,
        def: &TableDef,
        selection: Option<&Expr>,
        inner: Option<&[ColumnRef]>,
    ) -> Result<Vec<Value>> {
        let mut prefix = Vec::new();
        if let Some(w) = selection {
            let mut eqs = Vec::new();
            equalities(w, &mut eqs);
            let constants = eqs.len();
            if let Some(columns) = inner {
                outer_equalities(w, columns, &mut eqs);
            }
            let ctx = self.ctx();
            for &pk in &def.primary_key {
                let name = def.columns[pk].name.to_lowercase();
                let Some(at) = eqs.iter().position(|(c, _)| *c == name) else {
                    break;
                };
                let v = match eval(&eqs[at].1, &Scope::empty(), &ctx) {
                    Ok(v) => v,
                    // An outer name that is no column anywhere: the WHERE says so itself.
                    Err(_) if at >= constants => break,
                    Err(e) => return Err(e),
                };
                // Text keys are filed by the collation WHERE compares with, so a string
                // narrows a text key column; a number does not (`'05' = 5` by value).
                if def.columns[pk].ty.is_string() && !matches!(v, Value::Text(_) | Value::Bytes(_))
                {
                    break;
                }
                // Only an exact value of the column's type can narrow the scan.
                match ringrep_engine::types::coerce(v.clone(), &def.columns[pk], 1, ctx.tz) {
                    Ok(c) if compare(&c, &v, ctx.tz) == Some(Ordering::Equal) && !c.is_null() => {
                        prefix.push(c)
                    }
                    _ => break,
                }
            }
        }
        Ok(prefix)
    }

    /// Runs the subqueries of an UPDATE, DELETE or ON DUPLICATE KEY UPDATE before it changes
    /// anything, so that evaluation inside the change finds them. As in MySQL, a subquery
    /// may not read the table being changed (error 1093).
    pub(crate) fn prefetch_subqueries<'e>(
        &self,
        target: &TableDef,
        exprs: impl IntoIterator<Item = &'e Expr>,
    ) -> Result<()> {
        self.visit_subqueries(target, exprs, true)
    }

    /// Error 1093 when a subquery of `exprs` reads `target` (a statement changing it evaluates
    /// them as it goes, row by row).
    pub(crate) fn check_subquery_targets<'e>(
        &self,
        target: &TableDef,
        exprs: impl IntoIterator<Item = &'e Expr>,
    ) -> Result<()> {
        self.visit_subqueries(target, exprs, false)
    }

    /// Checks that no subquery of `exprs` reads `target` (1093) and, with `run`, runs them.
    fn visit_subqueries<'e>(
        &self,
        target: &TableDef,
        exprs: impl IntoIterator<Item = &'e Expr>,
        run: bool,
    ) -> Result<()> {
        use crate::parse::tree::visit_stored_relations;
        use sqlparser::ast::{visit_expressions, InTarget};
        use std::ops::ControlFlow;
        let current = self.session.vars.database.clone().unwrap_or_default();
        let mut done: Vec<String> = Vec::new();
        for e in exprs {
            let flow = visit_expressions(e, |e| {
                let q = match e {
                    Expr::Subquery(q) | Expr::Exists { subquery: q, .. } => q,
                    Expr::In {
                        target: InTarget::Subquery(q),
                        ..
                    } => q,
                    _ => return ControlFlow::Continue(()),
                };
                let text = q.to_string();
                // A subquery inside one already run was run with it.
                if done.iter().any(|d| d.contains(&text)) {
                    return ControlFlow::Continue(());
                }
                let reads_target =
                    visit_stored_relations(q.as_ref(), |name| match split_name(name) {
                        Ok((db, t))
                            if t.eq_ignore_ascii_case(&target.name)
                                && db
                                    .as_deref()
                                    .unwrap_or(&current)
                                    .eq_ignore_ascii_case(&target.database) =>
                        {
                            ControlFlow::Break(())
                        }
                        _ => ControlFlow::Continue(()),
                    });
                if reads_target.is_break() {
                    return ControlFlow::Break(Error::new(
                        code::ER_UPDATE_TABLE_USED,
                        format!(
                            "You can't specify target table '{}' for update in FROM clause",
                            target.name
                        ),
                    ));
                }
                if !run {
                    return ControlFlow::Continue(());
                }
                match self.run_subquery(q) {
                    Ok(_) => {
                        done.push(text);
                        ControlFlow::Continue(())
                    }
                    Err(err) => ControlFlow::Break(err),
                }
            });
            if let ControlFlow::Break(err) = flow {
                return Err(err);
            }
        }
        Ok(())
    }

    /// The result the statement keeps for the uncorrelated subquery under `key` (its text
    /// after [`SqlSession::cte_scope_key`]), if it ran.
    fn cached_subquery(&self, text: &str) -> Option<std::sync::Arc<Rows>> {
        self.subqueries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(text)
            .cloned()
    }

    /// Runs a subquery once per statement: later evaluations (one per outer row) reuse the
    /// result, which cannot change while the statement reads.
    pub(crate) fn run_subquery(&self, q: &Query) -> Result<std::sync::Arc<Rows>> {
        let text = q.to_string();
        let key = self.cte_scope_key() + &text;
        if let Some(rows) = self.cached_subquery(&key) {
            return Ok(rows);
        }
        // Not holding the lock while running: the subquery may have subqueries of its own.
        let rows = std::sync::Arc::new(self.run_query(q, &text)?);
        self.subqueries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, rows.clone());
        Ok(rows)
    }

    /// Runs a subquery met while evaluating the row `scope` of an enclosing query, whose
    /// own enclosing rows are `outer`: a column the subquery does not have is looked up in
    /// `scope`'s row, then further out (a correlated subquery). A subquery that read nothing
    /// of them is kept for the statement, as an uncorrelated one; one that read the
    /// enclosing row only is kept by the values it read there.
    pub(crate) fn run_subquery_in(
        &self,
        q: &Query,
        scope: &Scope<'_>,
        outer: Option<&std::sync::Arc<OuterRow>>,
    ) -> Result<std::sync::Arc<Rows>> {
        use std::sync::Arc;
        let text = q.to_string();
        let key = self.cte_scope_key() + &text;
        if let Some(rows) = self.cached_subquery(&key) {
            return Ok(rows);
        }
        if let Some(rows) = self
            .correlated
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .and_then(|m| m.get(scope))
        {
            return Ok(rows);
        }
        let frame = Arc::new(OuterRow {
            columns: scope.columns.to_vec(),
            row: scope.row.to_vec(),
            parent: outer.cloned(),
            read: Default::default(),
            read_further: Default::default(),
        });
        let saved = self
            .outer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(frame.clone());
        let result = self.run_query(q, &text);
        self.restore_outer(saved);
        let rows = Arc::new(result?);
        if !frame.was_read() {
            self.subqueries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key, rows.clone());
        } else if !frame
            .read_further
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            self.correlated
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key)
                .or_default()
                .insert(scope, frame.read_slots(), rows.clone());
        }
        Ok(rows)
    }

    /// Takes the subquery results the running statement keeps away (a view's query and a
    /// trigger's body keep their own).
    pub(crate) fn take_subquery_results(&self) -> SubqueryResults {
        (
            std::mem::take(&mut *self.subqueries.lock().unwrap_or_else(|p| p.into_inner())),
            std::mem::take(&mut *self.correlated.lock().unwrap_or_else(|p| p.into_inner())),
        )
    }

    /// Puts back what [`SqlSession::take_subquery_results`] took.
    pub(crate) fn restore_subquery_results(&self, (plain, correlated): SubqueryResults) {
        *self.subqueries.lock().unwrap_or_else(|p| p.into_inner()) = plain;
        *self.correlated.lock().unwrap_or_else(|p| p.into_inner()) = correlated;
    }

    /// Takes the rows around the running subquery away (a view's query runs without them).
    pub(crate) fn take_outer(&self) -> Option<std::sync::Arc<OuterRow>> {
        self.outer.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Puts back what [`SqlSession::take_outer`] took.
    pub(crate) fn restore_outer(&self, outer: Option<std::sync::Arc<OuterRow>>) {
        *self.outer.lock().unwrap_or_else(|p| p.into_inner()) = outer;
    }

    /// The rows of a query: a SELECT (over one table, none, or joined tables), a
    /// parenthesised query or a set operation. `text` is the query's text as written, which
    /// names the result's columns.
    pub(crate) fn run_query(&self, q: &Query, text: &str) -> Result<Rows> {
        match &q.with {
            Some(with) => {
                self.with_ctes(with, text, || match crate::parse::tree::written(text, q) {
                    Some(_) => self.run_body(q, text),
                    // Not the text the query was parsed from (a subquery's, written back): the
                    // body's own text names its columns.
                    None => {
                        let mut bare = q.clone();
                        bare.with = None;
                        self.run_body(q, &bare.to_string())
                    }
                })
            }
            None => self.run_body(q, text),
        }
    }

    /// [`SqlSession::run_query`] once the query's common table expressions are in scope.
    fn run_body(&self, q: &Query, text: &str) -> Result<Rows> {
        let select: &Select = match q.body.as_ref() {
            SetExpr::Select(s) => s,
            SetExpr::Query(inner) => return self.run_query(inner, text),
            SetExpr::SetOperation { .. } => return self.union_query(q, text),
            _ => return Err(Error::unsupported("VALUES and TABLE as queries")),
        };
        if select.from.len() > 1
            || select
                .from
                .iter()
                .any(|t| !t.joins.is_empty() || matches!(t.relation, TableFactor::Derived { .. }))
        {
            let joined = self.joined_rows(&select.from, select.selection.as_ref())?;
            let kept = keep_matching(
                select.selection.as_ref(),
                &joined.columns,
                joined.rows,
                &self.ctx(),
            )?;
            let from = SelectFrom {
                tables: joined.tables,
                star: Some(joined.star),
            };
            return self.finish_select(q, text, select, from, joined.columns, kept);
        }
        let (def, columns) = match select.from.first().map(|t| &t.relation) {
            None => (None, Vec::new()),
            // FROM DUAL: MySQL's name for no table.
            Some(TableFactor::Table { name, .. })
                if name.0.len() == 1 && name.to_string().eq_ignore_ascii_case("DUAL") =>
            {
                (None, Vec::new())
            }
            Some(TableFactor::Table { name, alias, .. }) => {
                let (db, t) = split_name(name)?;
                if let Some(computed) = self.computed_table(db.as_deref(), &t) {
                    let (vdef, rows) = computed?;
                    let alias = alias
                        .as_ref()
                        .map_or(t.to_lowercase(), |a| a.name.value.to_lowercase());
                    let cols = table_columns(&vdef, Some(&alias));
                    let kept = keep_matching(select.selection.as_ref(), &cols, rows, &self.ctx())?;
                    let from = vec![FromTable::of_def(alias, &vdef, 0)];
                    let from = SelectFrom {
                        tables: from,
                        star: None,
                    };
                    return self.finish_select(q, text, select, from, cols, kept);
                }
                let def = self.session.table_def(db.as_deref(), &t)?;
                let cols = table_columns(&def, alias.as_ref().map(|a| a.name.value.as_str()));
                (Some(def), cols)
            }
            Some(other) => return Err(Error::unsupported(format!("FROM {other}"))),
        };
        let source_rows = match &def {
            Some(d) => match self.page_rows(q, select, d, &columns)? {
                Some(rows) => rows,
                None => self.rows_for(d, &columns, select.selection.as_ref())?,
            },
            None => {
                let ctx = self.ctx();
                let keep = match &select.selection {
                    Some(w) => truthy(&eval(w, &Scope::empty(), &ctx)?) == Some(true),
                    None => true,
                };
                if keep {
                    vec![vec![]]
                } else {
                    vec![]
                }
            }
        };

        let from = def
            .iter()
            .map(|def| {
                let alias = columns
                    .iter()
                    .find(|c| !c.table.is_empty())
                    .map(|c| c.table.clone())
                    .unwrap_or_default();
                FromTable::of_def(alias, def, 0)
            })
            .collect();
        let from = SelectFrom {
            tables: from,
            star: None,
        };
        self.finish_select(q, text, select, from, columns, source_rows)
    }

    /// UNION [ALL | DISTINCT] of SELECTs, then the query's ORDER BY (over the result's
    /// column names or positions) and LIMIT. Column names and types come from the first SELECT.
    fn union_query(&self, q: &Query, text: &str) -> Result<Rows> {
        let mut result = self.set_rows(q, &q.body, text)?;
        let columns: Vec<ColumnRef> = result
            .columns
            .iter()
            .map(|c| ColumnRef {
                table: String::new(),
                name: c.to_lowercase(),
                ty: None,
                qualified_only: false,
            })
            .collect();
        let ctx = self.ctx();
        let order = order_terms(q)?;
        let mut keyed = Vec::with_capacity(result.rows.len());
        for row in std::mem::take(&mut result.rows) {
            let scope = Scope {
                columns: &columns,
                row: &row,
                aggregates: None,
                place: "order clause",
            };
            let mut keys = Vec::with_capacity(order.len());
            for (e, _) in &order {
                let position = match e {
                    Expr::Value(v) => match &v.value {
                        sqlparser::ast::Value::Number(n, _) => n.parse::<usize>().ok(),
                        _ => None,
                    },
                    _ => None,
                };
                keys.push(match position {
                    Some(p) if p >= 1 && p <= row.len() => row[p - 1].clone(),
                    Some(p) => return Err(Error::bad_field(&p.to_string(), "order clause")),
                    None => eval(e, &scope, &ctx)?,
                });
            }
            keyed.push((row, keys));
        }
        result.rows = ordered_page(keyed, &order, q, &ctx)?;
        Ok(result)
    }

    /// The rows of one operand of a set operation, unsorted and unlimited.
    fn set_rows(&self, q: &Query, body: &SetExpr, text: &str) -> Result<Rows> {
        match body {
            SetExpr::Select(_) => {
                let plain = Query {
                    body: Box::new(body.clone()),
                    order_by: None,
                    limit_clause: None,
                    ..q.clone()
                };
                self.run_query(&plain, text)
            }
            // A parenthesised operand keeps its own ORDER BY and LIMIT.
            SetExpr::Query(inner) => self.run_query(inner, text),
            SetExpr::SetOperation {
                op,
                set_quantifier,
                left,
                right,
            } => {
                let all = match set_quantifier {
                    SetQuantifier::All => true,
                    SetQuantifier::Distinct | SetQuantifier::None => false,
                    other => return Err(Error::unsupported(format!("{op} {other}"))),
                };
                let mut l = self.set_rows(q, left, text)?;
                let r = self.set_rows(q, right, text)?;
                if l.columns.len() != r.columns.len() {
                    return Err(Error::new(
                        code::ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
                        "The used SELECT statements have a different number of columns",
                    ));
                }
                for (lt, rt) in l.types.iter_mut().zip(&r.types) {
                    if lt != rt {
                        *lt = None;
                    }
                }
                let tz = self.session.vars.tz_offset;
                match op {
                    SetOperator::Union => l.rows.extend(r.rows),
                    SetOperator::Except | SetOperator::Minus | SetOperator::Intersect => {
                        let keep_found = matches!(op, SetOperator::Intersect);
                        filter_by(&mut l.rows, r.rows, keep_found, all, tz);
                    }
                }
                if !all {
                    dedupe(&mut l.rows, |r| r.as_slice(), tz);
                }
                Ok(l)
            }
            _ => Err(Error::unsupported("VALUES and TABLE as queries")),
        }
    }

    /// Projection, grouping, ordering and limits over the rows a query's FROM and WHERE gave.
    fn finish_select(
        &self,
        q: &Query,
        text: &str,
        select: &Select,
        from: SelectFrom,
        columns: Vec<ColumnRef>,
        source_rows: Vec<Vec<Value>>,
    ) -> Result<Rows> {
        let outputs = self.select_list(text, select, &from, &columns)?;
        let order = order_terms(q)?;
        let aggs = aggregate_calls(&outputs, select.having.as_ref(), &order);
        let group_by: Vec<std::borrow::Cow<'_, Expr>> = match &select.group_by {
            GroupByExpr::Expressions(v, modifiers) if modifiers.is_empty() => v
                .iter()
                .map(|e| group_term(e, &outputs, &columns))
                .collect::<Result<_>>()?,
            // WITH ROLLUP's super-aggregate rows are not made: refused rather than left out.
            GroupByExpr::Expressions(..) => {
                return Err(Error::unsupported("GROUP BY ... WITH ROLLUP"))
            }
            GroupByExpr::All(_) => return Err(Error::unsupported("GROUP BY ALL")),
        };
        let group_by: Vec<&Expr> = group_by.iter().map(|e| e.as_ref()).collect();
        let ctx = self.ctx();
        let shaper = OutputRows::new(&outputs, &columns, select.having.as_ref(), &order, &ctx);
        let mut out = if !group_by.is_empty() || !aggs.is_empty() {
            shaper.per_group(source_rows, &group_by, &aggs)?
        } else {
            shaper.per_row(&source_rows)?
        };
        if matches!(select.distinct, Some(Distinct::Distinct)) {
            dedupe(&mut out, |(v, _)| v.as_slice(), ctx.tz);
        }
        let rows = ordered_page(out, &order, q, &ctx)?;
        Ok(Rows {
            columns: outputs.iter().map(|o| o.header.clone()).collect(),
            types: outputs.into_iter().map(|o| o.ty).collect(),
            rows,
        })
    }

    /// The columns of a SELECT's result, from its select list: headers as MySQL names them,
    /// and `*` and `t.*` expanded.
    fn select_list<'q>(
        &self,
        text: &str,
        select: &'q Select,
        from: &SelectFrom,
        columns: &[ColumnRef],
    ) -> Result<Vec<OutputColumn<'q>>> {
        let mut outputs = Vec::new();
        let written = select_list_texts(text).filter(|t| t.len() == select.projection.len());
        for (n, item) in select.projection.iter().enumerate() {
            match item {
                SelectItem::UnnamedExpr(e) => outputs.push(OutputColumn {
                    header: item_header(text, e, written.as_ref().map(|t| t[n].as_str())),
                    item: Item::Expr(e),
                    ty: self.expr_type(e, columns),
                }),
                SelectItem::ExprWithAlias { expr, alias } => outputs.push(OutputColumn {
                    header: alias.value.clone(),
                    item: Item::Expr(expr),
                    ty: self.expr_type(expr, columns),
                }),
                SelectItem::Wildcard(_) => {
                    if from.tables.is_empty() {
                        return Err(Error::new(code::ER_NO_TABLES_USED, "No tables used"));
                    }
                    match &from.star {
                        Some(star) => outputs.extend(star.iter().map(|(s, n, t)| OutputColumn {
                            header: n.clone(),
                            item: Item::Slot(*s),
                            ty: t.clone(),
                        })),
                        None => {
                            for t in &from.tables {
                                push_columns(&mut outputs, t);
                            }
                        }
                    }
                }
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(n),
                    _,
                ) => push_columns(&mut outputs, qualified_table(&from.tables, n)?),
                other => return Err(Error::unsupported(format!("select item {other}"))),
            }
        }
        Ok(outputs)
    }

    /// The column type behind an expression that is a bare column reference.
    fn expr_type(&self, e: &Expr, columns: &[ColumnRef]) -> Option<ColumnType> {
        let scope = Scope {
            columns,
            row: &[],
            aggregates: None,
            place: "field list",
        };
        match e {
            Expr::Identifier(i) => resolve(&scope, None, &i.value)
                .ok()
                .and_then(|s| columns[s].ty.clone()),
            Expr::CompoundIdentifier(p) if p.len() >= 2 => {
                resolve(&scope, Some(&p[p.len() - 2].value), &p[p.len() - 1].value)
                    .ok()
                    .and_then(|s| columns[s].ty.clone())
            }
            Expr::Function(f)
                if matches!(
                    f.name.to_string().to_ascii_uppercase().as_str(),
                    "MIN" | "MAX"
                ) =>
            {
                match &f.args {
                    FunctionArguments::List(l) => match l.args.first() {
                        Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(x))) => {
                            self.expr_type(x, columns)
                        }
                        _ => None,
                    },
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// The header MySQL gives an unaliased select item: a string literal's value, a qualified
/// column's name alone, anything else as written (`written`, the item's text in the
/// statement, when known).
fn item_header(text: &str, e: &Expr, written: Option<&str>) -> String {
    let as_written = || {
        written
            .map(str::to_string)
            .or_else(|| source_text(text, e))
            .unwrap_or_else(|| e.to_string())
    };
    match e {
        // A string written in the statement names its column; one bound to a parameter
        // (which stands where the `?` was) does not: MySQL names that column as written.
        Expr::Value(v) => match &v.value {
            sqlparser::ast::Value::SingleQuotedString(s)
                if written != Some("?") && source_text(text, e).as_deref() != Some("?") =>
            {
                s.clone()
            }
            _ => as_written(),
        },
        // MySQL names a column by its name, without the quotes it was written in (`id` is
        // named id, as Connector/J's callers look it up).
        Expr::Identifier(i) if i.quote_style.is_some() => i.value.clone(),
        // MySQL names a qualified column by the column alone.
        Expr::CompoundIdentifier(parts) if !parts.is_empty() => {
            parts[parts.len() - 1].value.clone()
        }
        _ => as_written(),
    }
}

/// The table `name.*` names: by alias, or, with one table, by its real name too (as in
/// `SELECT t.* FROM t`).
fn qualified_table<'t>(tables: &'t [FromTable], name: &ObjectName) -> Result<&'t FromTable> {
    let (_, name) = split_name(name)?;
    let name_l = name.to_lowercase();
    tables
        .iter()
        .find(|t| t.alias == name_l || (tables.len() == 1 && t.name.eq_ignore_ascii_case(&name)))
        .ok_or_else(|| Error::new(code::ER_BAD_TABLE_ERROR, format!("Unknown table '{name}'")))
}

/// The aggregate calls a SELECT computes per group: those of its select list, then of
/// HAVING, then of ORDER BY.
fn aggregate_calls<'a>(
    outputs: &[OutputColumn<'a>],
    having: Option<&'a Expr>,
    order: &[(&'a Expr, bool)],
) -> Vec<&'a Function> {
    let mut aggs: Vec<&Function> = Vec::new();
    for o in outputs {
        if let Item::Expr(e) = o.item {
            collect_aggregates(e, &mut aggs);
        }
    }
    if let Some(h) = having {
        collect_aggregates(h, &mut aggs);
    }
    for (e, _) in order {
        collect_aggregates(e, &mut aggs);
    }
    aggs
}

/// The rows of each group, groups in the order their first row came (no GROUP BY: one group
/// of every row, even of none).
fn groups(
    source_rows: Vec<Vec<Value>>,
    group_by: &[&Expr],
    columns: &[ColumnRef],
    ctx: &Ctx<'_>,
) -> Result<Vec<Vec<Vec<Value>>>> {
    let mut groups: Vec<Vec<Vec<Value>>> = Vec::new();
    let mut index: HashMap<Key, usize> = HashMap::new();
    for r in source_rows {
        let scope = Scope {
            columns,
            row: &r,
            aggregates: None,
            place: "group statement",
        };
        let key = Key(group_by
            .iter()
            .map(|g| eval(g, &scope, ctx))
            .collect::<Result<_>>()?);
        match index.get(&key) {
            Some(&i) => groups[i].push(r),
            None => {
                index.insert(key, groups.len());
                groups.push(vec![r]);
            }
        }
    }
    if groups.is_empty() && group_by.is_empty() {
        groups.push(vec![]);
    }
    Ok(groups)
}

/// Makes output rows of source rows (or of groups): the select list's values, kept where
/// HAVING holds, with their ORDER BY keys.
struct OutputRows<'a> {
    outputs: &'a [OutputColumn<'a>],
    columns: &'a [ColumnRef],
    having: Option<&'a Expr>,
    order: &'a [(&'a Expr, bool)],
    /// Each output column's position by its header, lower-cased (ORDER BY may name them).
    aliases: HashMap<String, usize>,
    ctx: &'a Ctx<'a>,
}

impl<'a> OutputRows<'a> {
    fn new(
        outputs: &'a [OutputColumn<'a>],
        columns: &'a [ColumnRef],
        having: Option<&'a Expr>,
        order: &'a [(&'a Expr, bool)],
        ctx: &'a Ctx<'a>,
    ) -> OutputRows<'a> {
        let aliases = outputs
            .iter()
            .enumerate()
            .map(|(i, o)| (o.header.to_lowercase(), i))
            .collect();
        OutputRows {
            outputs,
            columns,
            having,
            order,
            aliases,
            ctx,
        }
    }

    /// One output row per source row.
    fn per_row(&self, source_rows: &[Vec<Value>]) -> Result<Vec<KeyedRow>> {
        let mut out = Vec::new();
        for r in source_rows {
            self.emit(r, None, &mut out)?;
        }
        Ok(out)
    }

    /// One output row per group: its aggregates computed over its rows, everything else
    /// read from its first row (NULLs for an empty group).
    fn per_group(
        &self,
        source_rows: Vec<Vec<Value>>,
        group_by: &[&Expr],
        aggs: &[&Function],
    ) -> Result<Vec<KeyedRow>> {
        let mut out = Vec::new();
        for rows in groups(source_rows, group_by, self.columns, self.ctx)? {
            let mut values = HashMap::new();
            for f in aggs {
                values.insert(f.to_string(), aggregate(f, &rows, self.columns, self.ctx)?);
            }
            let empty = vec![Value::Null; self.columns.len()];
            let rep = rows.first().unwrap_or(&empty);
            self.emit(rep, Some(&values), &mut out)?;
        }
        Ok(out)
    }

    /// Adds the output row of `row` to `out`, unless HAVING rejects it.
    fn emit(
        &self,
        row: &[Value],
        agg: Option<&HashMap<String, Value>>,
        out: &mut Vec<KeyedRow>,
    ) -> Result<()> {
        let vals = self.project(row, agg)?;
        if !self.having_holds(row, agg, &vals)? {
            return Ok(());
        }
        let keys = self.order_keys(row, agg, &vals)?;
        out.push((vals, keys));
        Ok(())
    }

    /// The select list's values for `row`.
    fn project(&self, row: &[Value], agg: Option<&HashMap<String, Value>>) -> Result<Vec<Value>> {
        let scope = Scope {
            columns: self.columns,
            row,
            aggregates: agg,
            place: "field list",
        };
        let mut vals = Vec::with_capacity(self.outputs.len());
        for o in self.outputs {
            vals.push(match o.item {
                Item::Expr(e) => eval(e, &scope, self.ctx)?,
                Item::Slot(i) => row[i].clone(),
            });
        }
        Ok(vals)
    }

    /// Whether HAVING (if any) holds for `row`, whose output values are `vals`. HAVING may
    /// name the select list's aliases where it names no column.
    fn having_holds(
        &self,
        row: &[Value],
        agg: Option<&HashMap<String, Value>>,
        vals: &[Value],
    ) -> Result<bool> {
        let Some(h) = self.having else {
            return Ok(true);
        };
        let hscope = Scope {
            columns: self.columns,
            row,
            aggregates: agg,
            place: "having clause",
        };
        let hv = match eval(h, &hscope, self.ctx) {
            Err(e) if e.code == code::ER_BAD_FIELD_ERROR => {
                let alias_cols: Vec<ColumnRef> = self
                    .outputs
                    .iter()
                    .map(|o| ColumnRef {
                        table: String::new(),
                        name: o.header.to_lowercase(),
                        ty: None,
                        qualified_only: false,
                    })
                    .collect();
                eval(
                    h,
                    &Scope {
                        columns: &alias_cols,
                        row: vals,
                        aggregates: agg,
                        place: "having clause",
                    },
                    self.ctx,
                )?
            }
            other => other?,
        };
        Ok(truthy(&hv) == Some(true))
    }

    /// The ORDER BY keys of `row`: a select-list alias that names no column, or a position,
    /// reads the output value; anything else is evaluated over the row.
    fn order_keys(
        &self,
        row: &[Value],
        agg: Option<&HashMap<String, Value>>,
        vals: &[Value],
    ) -> Result<Vec<Value>> {
        let scope = Scope {
            columns: self.columns,
            row,
            aggregates: agg,
            place: "order clause",
        };
        let mut keys = Vec::with_capacity(self.order.len());
        for (e, _) in self.order {
            let by_alias = match e {
                Expr::Identifier(i) => self
                    .aliases
                    .get(&i.value.to_lowercase())
                    .copied()
                    .filter(|_| resolve(&scope, None, &i.value).is_err()),
                Expr::Value(v) => match &v.value {
                    sqlparser::ast::Value::Number(n, _) => n
                        .parse::<usize>()
                        .ok()
                        .filter(|&p| p >= 1 && p <= vals.len())
                        .map(|p| p - 1),
                    _ => None,
                },
                _ => None,
            };
            keys.push(match by_alias {
                Some(i) => vals[i].clone(),
                None => eval(e, &scope, self.ctx)?,
            });
        }
        Ok(keys)
    }
}

/// An aggregate's value over a group's rows.
fn aggregate(
    f: &Function,
    rows: &[Vec<Value>],
    columns: &[ColumnRef],
    ctx: &Ctx<'_>,
) -> Result<Value> {
    let name = f.name.to_string().to_ascii_uppercase();
    let FunctionArguments::List(list) = &f.args else {
        return Err(Error::syntax(format!("{name} needs an argument")));
    };
    let distinct = matches!(
        list.duplicate_treatment,
        Some(sqlparser::ast::DuplicateTreatment::Distinct)
    );
    let arg = list.args.first();
    let star = matches!(arg, Some(FunctionArg::Unnamed(FunctionArgExpr::Wildcard)));
    if name == "COUNT" && star {
        return Ok(Value::Int(rows.len() as i64));
    }
    let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(e))) = arg else {
        return Err(Error::syntax(format!("{name} needs an expression")));
    };
    // GROUP_CONCAT's ORDER BY and SEPARATOR are MySQL's; any other clause is refused rather
    // than left out of the result.
    let mut order: Vec<(&Expr, bool)> = Vec::new();
    for clause in &list.clauses {
        match clause {
            FunctionArgumentClause::Separator(_) if name == "GROUP_CONCAT" => {}
            FunctionArgumentClause::OrderBy(terms) if name == "GROUP_CONCAT" => {
                order = order_pairs(terms);
            }
            other => return Err(Error::unsupported(format!("{name}(... {other})"))),
        }
    }
    let mut vals = Vec::new();
    // With an ORDER BY, each value with its keys, sorted before they are joined.
    let mut keyed: Vec<KeyedRow> = Vec::new();
    for r in rows {
        let scope = Scope {
            columns,
            row: r,
            aggregates: None,
            place: "field list",
        };
        let v = eval(e, &scope, ctx)?;
        if v.is_null() {
            continue;
        }
        if order.is_empty() {
            vals.push(v);
        } else {
            let keys = order
                .iter()
                .map(|(o, _)| eval(o, &scope, ctx))
                .collect::<Result<Vec<_>>>()?;
            keyed.push((vec![v], keys));
        }
    }
    if !order.is_empty() {
        sort_keyed(&mut keyed, &order, ctx.tz);
        vals = keyed.into_iter().flat_map(|(v, _)| v).collect();
    }
    if distinct {
        let mut uniq: Vec<Value> = Vec::new();
        for v in vals {
            if !uniq
                .iter()
                .any(|u| compare(u, &v, ctx.tz) == Some(Ordering::Equal))
            {
                uniq.push(v);
            }
        }
        vals = uniq;
    }
    Ok(match name.as_str() {
        "COUNT" => Value::Int(vals.len() as i64),
        "SUM" | "AVG" => {
            if vals.is_empty() {
                return Ok(Value::Null);
            }
            // Integers and DECIMALs add exactly, as a DECIMAL of the largest scale (AVG's 4
            // digits more); anything else as a DOUBLE, as in MySQL.
            let exact: Option<Vec<Dec>> = vals.iter().map(Dec::of).collect();
            match exact {
                Some(exact) => {
                    let scale = exact.iter().map(Dec::scale).max().unwrap_or(0);
                    let sum = exact
                        .iter()
                        .fold(Dec::int(0).rescale(scale), |s, v| s.add(v));
                    if name == "SUM" {
                        sum.into_decimal()?
                    } else {
                        let n = Dec::int(vals.len() as i64);
                        sum.divide(&n)
                            .expect("a count is not zero")
                            .into_decimal()?
                    }
                }
                None => {
                    let sum: f64 = vals.iter().filter_map(to_f64).sum();
                    Value::Double(if name == "SUM" {
                        sum
                    } else {
                        sum / vals.len() as f64
                    })
                }
            }
        }
        "MIN" | "MAX" => {
            let mut best: Option<Value> = None;
            for v in vals {
                best = Some(match best {
                    None => v,
                    Some(b) => {
                        let o = compare(&v, &b, ctx.tz);
                        if (name == "MIN" && o == Some(Ordering::Less))
                            || (name == "MAX" && o == Some(Ordering::Greater))
                        {
                            v
                        } else {
                            b
                        }
                    }
                });
            }
            best.unwrap_or(Value::Null)
        }
        "GROUP_CONCAT" => {
            let sep = list
                .clauses
                .iter()
                .find_map(|c| match c {
                    FunctionArgumentClause::Separator(s) => {
                        Some(s.to_string().trim_matches('\'').to_string())
                    }
                    _ => None,
                })
                .unwrap_or_else(|| ",".into());
            if vals.is_empty() {
                Value::Null
            } else {
                Value::Text(
                    vals.iter()
                        .map(|v| render(v, None, ctx.tz).unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join(&sep),
                )
            }
        }
        _ => return Err(Error::unsupported(format!("aggregate {name}"))),
    })
}

/// The text of each select item of the outermost SELECT in `text`, as written.
fn select_list_texts(text: &str) -> Option<Vec<String>> {
    let upper = text.trim_start().to_ascii_uppercase();
    if !upper.starts_with("SELECT") {
        return None;
    }
    let body = &text.trim_start()[6..];
    let end = [
        "FROM",
        "WHERE",
        "GROUP BY",
        "HAVING",
        "ORDER BY",
        "LIMIT",
        "INTO",
        "FOR UPDATE",
        "LOCK IN",
        "UNION",
        "EXCEPT",
        "INTERSECT",
    ]
    .iter()
    .filter_map(|k| crate::parse::lexer::find_top_level(body, k))
    .min()
    .unwrap_or(body.len());
    let mut list = body[..end].trim();
    // The modifiers MySQL takes before the list, in any order.
    const MODIFIERS: [&str; 10] = [
        "DISTINCT ",
        "DISTINCTROW ",
        "ALL ",
        "HIGH_PRIORITY ",
        "STRAIGHT_JOIN ",
        "SQL_SMALL_RESULT ",
        "SQL_BIG_RESULT ",
        "SQL_BUFFER_RESULT ",
        "SQL_NO_CACHE ",
        "SQL_CALC_FOUND_ROWS ",
    ];
    while let Some(m) = MODIFIERS.iter().find(|m| {
        list.get(..m.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(m))
    }) {
        list = list[m.len()..].trim_start();
    }
    Some(
        crate::parse::lexer::split_top_level_commas(list)
            .into_iter()
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use crate::{test_rows, test_session};

    fn one_column(s: &mut crate::SqlSession, sql: &str) -> Vec<String> {
        test_rows(s, sql)
            .into_iter()
            .map(|r| r[0].clone().unwrap_or_else(|| "NULL".into()))
            .collect()
    }

    fn session(dir: &std::path::Path) -> (ringrep_engine::Engine, crate::SqlSession) {
        test_session(
            dir,
            &[
                "CREATE TABLE t (id INT PRIMARY KEY, g INT, v INT)",
                "CREATE TABLE u (id INT PRIMARY KEY, g INT, w INT)",
                "INSERT INTO t VALUES (1, 1, 10), (2, 1, 20), (3, 2, 30), (4, 3, 40)",
                "INSERT INTO u VALUES (1, 1, 100), (2, 2, 200), (3, 2, 300)",
            ],
        )
    }

    /// Row constructors compare as MySQL compares them: in order, column by column, NULL
    /// where a NULL decides.
    #[test]
    fn row_constructors_compare_column_by_column() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_e, mut s) = session(dir.path());
        for (sql, want) in [
            ("SELECT (1, 2) < (1, 3)", "1"),
            ("SELECT (1, 2) > (1, 3)", "0"),
            ("SELECT (2, 0) > (1, 9)", "1"),
            ("SELECT (1, 3) >= (1, 3)", "1"),
            ("SELECT (1, 3) <= (1, 2)", "0"),
            ("SELECT (1, 2) = (1, 2)", "1"),
            ("SELECT (1, 2) <> (1, 2)", "0"),
            ("SELECT (1, NULL) = (1, 2)", "NULL"),
            ("SELECT (1, NULL) = (2, 2)", "0"),
            ("SELECT (1, NULL) > (1, 2)", "NULL"),
            ("SELECT (2, NULL) > (1, 2)", "1"),
            ("SELECT (NULL, 1) < (1, 2)", "NULL"),
            ("SELECT (1, NULL) <=> (1, NULL)", "1"),
            ("SELECT ('a', 'B') < ('A', 'c')", "1"),
        ] {
            assert_eq!(one_column(&mut s, sql), [want], "{sql}");
        }
        let e = s
            .execute("SELECT (1, 2) = (1, 2, 3)")
            .expect_err("three against two");
        assert_eq!(e.code, 1241, "{e:?}");
    }

    /// Keyset pagination, `WHERE (k1, k2) > (...) ORDER BY k1, k2 LIMIT n` (read a page at a
    /// time by the engine), gives exactly the rows a whole read would: pages walked from the
    /// last key of each make the table; a bound on part of the key, `>=`, OFFSET, and a
    /// transaction's own changes too.
    #[test]
    fn key_order_pages_are_the_rows_a_whole_read_gives() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_e, mut s) = session(dir.path());
        s.execute(
            "CREATE TABLE k (a INT NOT NULL, b VARCHAR(5) NOT NULL, v INT, PRIMARY KEY (a, b))",
        )
        .expect("create");
        for a in [3, 1, 2] {
            for b in ["y", "X", "z"] {
                s.execute(&format!("INSERT INTO k VALUES ({a}, '{b}', {a}0)"))
                    .expect("insert");
            }
        }
        let whole = test_rows(&mut s, "SELECT * FROM k ORDER BY a, b");
        assert_eq!(whole.len(), 9);
        for n in 1..=4 {
            let mut walked: Vec<Vec<Option<String>>> = Vec::new();
            loop {
                let sql = match walked.last() {
                    None => format!("SELECT * FROM k ORDER BY a, b LIMIT {n}"),
                    Some(r) => format!(
                        "SELECT * FROM k WHERE (a, b) > ({}, '{}') ORDER BY a, b LIMIT {n}",
                        r[0].as_deref().expect("a"),
                        r[1].as_deref().expect("b")
                    ),
                };
                let page = test_rows(&mut s, &sql);
                let done = page.len() < n;
                walked.extend(page);
                if done {
                    break;
                }
            }
            assert_eq!(walked, whole, "pages of {n}");
        }
        // The whole read, then cut: what each paged query must give.
        let cut = |from: usize, n: usize| whole[from..(from + n).min(whole.len())].to_vec();
        assert_eq!(
            test_rows(
                &mut s,
                "SELECT * FROM k WHERE (a, b) >= (2, 'y') ORDER BY a, b LIMIT 2"
            ),
            cut(4, 2)
        );
        assert_eq!(
            test_rows(&mut s, "SELECT * FROM k WHERE a > 1 ORDER BY a, b LIMIT 2"),
            cut(3, 2)
        );
        assert_eq!(
            test_rows(
                &mut s,
                "SELECT * FROM k WHERE (a) >= (2) ORDER BY a, b LIMIT 2 OFFSET 2"
            ),
            cut(5, 2)
        );
        assert_eq!(
            test_rows(
                &mut s,
                "SELECT a, b, v FROM k WHERE (a, b) > (3, 'y') LIMIT 5"
            ),
            cut(8, 5)
        );
        s.execute("BEGIN").expect("begin");
        s.execute("INSERT INTO k VALUES (1, 'a', 0)")
            .expect("insert");
        let first = test_rows(&mut s, "SELECT * FROM k ORDER BY a, b LIMIT 1");
        assert_eq!(
            first[0][1].as_deref(),
            Some("a"),
            "the transaction's own row"
        );
        s.execute("ROLLBACK").expect("rollback");
    }

    #[test]
    fn correlated_subqueries_read_the_outer_row() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_e, mut s) = session(dir.path());
        let q = |s: &mut crate::SqlSession, sql: &str| one_column(s, sql).join(",");
        assert_eq!(
            q(
                &mut s,
                "SELECT (SELECT COUNT(*) FROM u WHERE u.g = t.g) FROM t ORDER BY id"
            ),
            "1,1,2,0"
        );
        assert_eq!(
            q(
                &mut s,
                "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.g = t.g) ORDER BY id"
            ),
            "1,2,3"
        );
        assert_eq!(
            q(
                &mut s,
                "SELECT id FROM t WHERE NOT EXISTS (SELECT * FROM u WHERE g = t.g)"
            ),
            "4"
        );
        assert_eq!(
            q(
                &mut s,
                "SELECT id FROM t WHERE v * 10 IN (SELECT w FROM u WHERE u.g = t.g) ORDER BY id"
            ),
            "1,3"
        );
        assert_eq!(
            q(
                &mut s,
                "SELECT id FROM t AS a WHERE v > (SELECT AVG(v) FROM t AS b WHERE b.g = a.g)"
            ),
            "2"
        );
        // Two levels out, and a name the inner query has itself (its own `g` wins).
        assert_eq!(
            q(&mut s, "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE g = t.g AND EXISTS (SELECT 1 FROM t AS x WHERE x.id = u.id AND x.v = t.v)) ORDER BY id"),
            "1,3"
        );
        // The key of the inner table narrows by the outer value.
        assert_eq!(
            q(
                &mut s,
                "SELECT (SELECT w FROM u WHERE u.id = t.id) FROM t ORDER BY id"
            ),
            "100,200,300,NULL"
        );
    }

    #[test]
    fn a_name_in_neither_scope_is_an_unknown_column() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_e, mut s) = session(dir.path());
        for (sql, msg) in [
            (
                "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.g = t.nosuch)",
                "Unknown column 't.nosuch' in 'where clause'",
            ),
            (
                "SELECT (SELECT nosuch FROM u LIMIT 1) FROM t",
                "Unknown column 'nosuch' in 'field list'",
            ),
            (
                "SELECT (SELECT 1 FROM u WHERE x.g = u.g) FROM t",
                "Unknown column 'x.g' in 'where clause'",
            ),
        ] {
            let e = s.execute(sql).expect_err(sql);
            assert_eq!((e.code, e.message.as_str()), (1054, msg), "{sql}");
        }
    }

    #[test]
    fn results_kept_by_the_outer_values_they_read_stay_right() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_e, mut s) = session(dir.path());
        // Runs that read different outer columns (t.v for g = 1, t.id otherwise), with values
        // repeating across rows.
        assert_eq!(
            one_column(
                &mut s,
                "SELECT (SELECT CASE WHEN t.g = 1 THEN t.v ELSE t.id END) FROM t ORDER BY id"
            ),
            ["10", "20", "3", "4"]
        );
        assert_eq!(
            one_column(
                &mut s,
                "SELECT (SELECT COUNT(*) FROM u WHERE u.g = t.g) + (SELECT COUNT(*) FROM u WHERE u.g = t.g) FROM t AS t ORDER BY id"
            ),
            ["2", "2", "4", "0"]
        );
        // A view's query does not see the columns of the query reading it.
        s.execute("CREATE VIEW vu AS SELECT id, g FROM u")
            .expect("view");
        assert_eq!(
            one_column(
                &mut s,
                "SELECT (SELECT COUNT(*) FROM vu WHERE vu.g = t.g) FROM t ORDER BY id"
            ),
            ["1", "1", "2", "0"]
        );
    }

    #[test]
    fn updates_and_deletes_take_correlated_conditions_and_values() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_e, mut s) = session(dir.path());
        s.execute("UPDATE t SET v = (SELECT MAX(w) FROM u WHERE u.g = t.g) WHERE EXISTS (SELECT 1 FROM u WHERE u.g = t.g)")
            .expect("update");
        assert_eq!(
            one_column(&mut s, "SELECT v FROM t ORDER BY id"),
            ["100", "100", "300", "40"]
        );
        s.execute("DELETE FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.g = t.g)")
            .expect("delete");
        assert_eq!(
            one_column(&mut s, "SELECT id FROM t ORDER BY id"),
            ["1", "2", "3"]
        );
        let e = s
            .execute("UPDATE t SET v = (SELECT MAX(v) FROM t AS x WHERE x.g = t.g)")
            .expect_err("1093");
        assert_eq!(e.code, 1093);
        let e = s
            .execute("DELETE FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.g = t.nosuch)")
            .expect_err("1054");
        assert_eq!(e.code, 1054);
    }
}
