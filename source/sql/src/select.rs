//! SELECT: WHERE, GROUP BY with aggregates, HAVING, ORDER BY, DISTINCT, LIMIT over one table,
//! none, or the joined tables of `join`. On one table, a WHERE that fixes the leading
//! primary-key columns with `=` reads only that key range; everything else scans the table.

use std::cmp::Ordering;
use std::collections::HashMap;

use binlog_format::schema::{ColumnType, TableDef};
use binlog_format::{Key, Value};
use sqlparser::ast::{
    BinaryOperator, Distinct, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentClause,
    FunctionArguments, GroupByExpr, LimitClause, OrderByKind, OrderBySort, Query, Select,
    SelectItem, SelectItemQualifiedWildcardKind, SetExpr, SetOperator, SetQuantifier, Spanned,
    TableFactor,
};

use super::expr::{compare, eval, is_aggregate, render, to_f64, truthy, ColumnRef, Scope};
use super::join::FromTable;
use super::rowset::{dedupe, filter_by};
use super::{split_name, Outcome, ResultSet, SqlSession};
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::HIDDEN_ROW_ID;

/// The FROM side of a SELECT: its tables, and what `*` stands for when that is not every
/// table's columns in order (after JOIN ... USING, joined columns come first, once).
struct SelectFrom {
    tables: Vec<FromTable>,
    star: Option<Vec<(usize, String, Option<ColumnType>)>>,
}

/// A select-list entry: an expression, or a column copied from the source row.
enum Item<'a> {
    Expr(&'a Expr),
    Slot(usize),
}

/// The entries `*` stands for: a table's visible columns, in order, under their own names.
fn push_columns(items: &mut Vec<(String, Item<'_>, Option<ColumnType>)>, t: &FromTable) {
    for (i, name, ty) in &t.star {
        items.push((name.clone(), Item::Slot(t.offset + i), ty.clone()));
    }
}

/// Sorts rows by their ORDER BY keys (NULLs first, as MySQL does); a stable sort, so ties
/// keep their order.
fn sort_keyed(out: &mut [(Vec<Value>, Vec<Value>)], desc: &[bool], tz: i64) {
    if desc.is_empty() {
        return;
    }
    out.sort_by(|a, b| {
        for (i, d) in desc.iter().enumerate() {
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

/// A query's LIMIT and OFFSET.
fn limits(q: &Query, ctx: &super::expr::Ctx<'_>) -> Result<(Option<usize>, usize)> {
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

/// A query's result before rendering.
pub struct Rows {
    pub columns: Vec<String>,
    pub types: Vec<Option<ColumnType>>,
    pub rows: Vec<Vec<Value>>,
}

/// The text of an AST node as the user wrote it (MySQL names result columns so).
fn source_text(text: &str, node: &impl Spanned) -> Option<String> {
    let span = node.span();
    if span.start.line == 0 {
        return None;
    }
    let offset = |line: u64, col: u64| -> Option<usize> {
        let mut off = 0;
        for (i, l) in text.split('\n').enumerate() {
            if i as u64 + 1 == line {
                let chars: usize = l
                    .chars()
                    .take(col.saturating_sub(1) as usize)
                    .map(char::len_utf8)
                    .sum();
                return Some(off + chars);
            }
            off += l.len() + 1;
        }
        None
    };
    let (a, mut b) = (
        offset(span.start.line, span.start.column)?,
        offset(span.end.line, span.end.column)?,
    );
    // Function spans stop before their closing parenthesis (and `COUNT(*)` covers only the
    // name): extend to where the parentheses balance.
    let bytes = text.as_bytes();
    let mut depth: i32 = text
        .get(a..b)?
        .bytes()
        .map(|c| i32::from(c == b'(') - i32::from(c == b')'))
        .sum();
    let mut probe = b;
    while probe < bytes.len() && bytes[probe] == b' ' {
        probe += 1;
    }
    if depth == 0
        && probe < bytes.len()
        && bytes[probe] == b'('
        && text
            .get(a..b)?
            .ends_with(|c: char| c.is_alphanumeric() || c == '_')
    {
        b = probe;
    }
    let mut quote = None;
    while b < bytes.len()
        && (depth > 0 || (b < bytes.len() && bytes[b] == b'(' && depth == 0 && b == probe))
    {
        let c = bytes[b];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'\'' || c == b'"' => quote = Some(c),
            None if c == b'(' => depth += 1,
            None if c == b')' => depth -= 1,
            None => {}
        }
        b += 1;
        if depth == 0 {
            break;
        }
    }
    text.get(a..b)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
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

/// The scope columns of a table (the hidden row id stays out of sight).
pub(crate) fn table_columns(def: &TableDef, alias: Option<&str>) -> Vec<ColumnRef> {
    let t = alias.unwrap_or(&def.name).to_lowercase();
    def.columns
        .iter()
        .map(|c| ColumnRef {
            table: if c.name == HIDDEN_ROW_ID {
                String::new()
            } else {
                t.clone()
            },
            name: if c.name == HIDDEN_ROW_ID {
                String::new()
            } else {
                c.name.to_lowercase()
            },
            ty: Some(c.ty.clone()),
            qualified_only: false,
        })
        .collect()
}

/// Whether a row satisfies a WHERE clause (no clause: every row).
pub(crate) fn row_matches(
    selection: Option<&Expr>,
    columns: &[ColumnRef],
    row: &[Value],
    ctx: &super::expr::Ctx<'_>,
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
fn keep_matching(
    selection: Option<&Expr>,
    columns: &[ColumnRef],
    rows: Vec<Vec<Value>>,
    ctx: &super::expr::Ctx<'_>,
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

/// A query's ORDER BY terms: expression and whether descending.
fn order_terms(q: &Query) -> Result<Vec<(&Expr, bool)>> {
    match q.order_by.as_ref().map(|o| &o.kind) {
        Some(OrderByKind::Expressions(v)) => Ok(v
            .iter()
            .map(|o| (&o.expr, matches!(o.options.sort, Some(OrderBySort::Desc))))
            .collect()),
        Some(OrderByKind::All(_)) => Err(Error::unsupported("ORDER BY ALL")),
        None => Ok(vec![]),
    }
}

impl SqlSession {
    pub(crate) fn query(&mut self, q: &Query, text: &str) -> Result<Outcome> {
        let rows = self.run_query(q, text)?;
        Ok(Outcome::Rows(ResultSet {
            columns: rows.columns,
            types: rows.types,
            rows: rows.rows,
            tz: self.session.vars.tz_offset,
        }))
    }

    /// The visible rows of a table for a WHERE, narrowed by leading key equalities.
    pub(crate) fn rows_for(
        &self,
        def: &TableDef,
        columns: &[ColumnRef],
        selection: Option<&Expr>,
    ) -> Result<Vec<Vec<Value>>> {
        let mut prefix = Vec::new();
        if let Some(w) = selection {
            let mut eqs = Vec::new();
            equalities(w, &mut eqs);
            let ctx = self.ctx();
            for &pk in &def.primary_key {
                let name = def.columns[pk].name.to_lowercase();
                let Some((_, e)) = eqs.iter().find(|(c, _)| *c == name) else {
                    break;
                };
                let v = eval(e, &Scope::empty(), &ctx)?;
                // Only an exact value of the column's type can narrow the scan.
                match ringrep_engine::types::coerce(v.clone(), &def.columns[pk], 1, ctx.tz) {
                    Ok(c) if compare(&c, &v, ctx.tz) == Some(Ordering::Equal) && !c.is_null() => {
                        prefix.push(c)
                    }
                    _ => break,
                }
            }
        }
        let rows = self.session.scan(def, &prefix)?;
        keep_matching(selection, columns, rows, &self.ctx())
    }

    /// Runs the subqueries of an UPDATE, DELETE or ON DUPLICATE KEY UPDATE before it changes
    /// anything, so that evaluation inside the change finds them. As in MySQL, a subquery
    /// may not read the table being changed (error 1093).
    pub(crate) fn prefetch_subqueries<'e>(
        &self,
        target: &TableDef,
        exprs: impl IntoIterator<Item = &'e Expr>,
    ) -> Result<()> {
        use sqlparser::ast::{visit_expressions, visit_relations, InTarget};
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
                let reads_target = visit_relations(q.as_ref(), |name| match split_name(name) {
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

    /// Runs a subquery once per statement: later evaluations (one per outer row) reuse the
    /// result, which cannot change while the statement reads.
    pub(crate) fn run_subquery(&self, q: &Query) -> Result<std::sync::Arc<Rows>> {
        let text = q.to_string();
        let cached = self
            .subqueries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&text)
            .cloned();
        if let Some(rows) = cached {
            return Ok(rows);
        }
        // Not holding the lock while running: the subquery may have subqueries of its own.
        let rows = std::sync::Arc::new(self.run_query(q, &text)?);
        self.subqueries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(text, rows.clone());
        Ok(rows)
    }

    pub(crate) fn run_query(&self, q: &Query, text: &str) -> Result<Rows> {
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
            Some(TableFactor::Table { name, alias, .. }) => {
                let (db, t) = split_name(name)?;
                if db
                    .as_deref()
                    .is_some_and(|d| d.eq_ignore_ascii_case("ndbinfo"))
                    && t.eq_ignore_ascii_case("memory_per_fragment")
                {
                    let (vdef, rows) = super::show::memory_per_fragment(self.engine());
                    let cols = table_columns(&vdef, alias.as_ref().map(|a| a.name.value.as_str()));
                    let kept = keep_matching(select.selection.as_ref(), &cols, rows, &self.ctx())?;
                    let from = vec![FromTable::of_def(String::new(), &vdef, 0)];
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
            Some(d) => self.rows_for(d, &columns, select.selection.as_ref())?,
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
        let desc: Vec<bool> = order.iter().map(|(_, d)| *d).collect();
        sort_keyed(&mut keyed, &desc, ctx.tz);
        let (limit, offset) = limits(q, &ctx)?;
        result.rows = keyed
            .into_iter()
            .skip(offset)
            .take(limit.unwrap_or(usize::MAX))
            .map(|(v, _)| v)
            .collect();
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
        let SelectFrom { tables: from, star } = from;
        // Projection: (header, expression or column slot, type).
        let mut items: Vec<(String, Item<'_>, Option<ColumnType>)> = Vec::new();
        let item_texts = select_list_texts(text).filter(|t| t.len() == select.projection.len());
        for (n, item) in select.projection.iter().enumerate() {
            match item {
                SelectItem::UnnamedExpr(e) => {
                    let header = match e {
                        Expr::Value(v) => match &v.value {
                            sqlparser::ast::Value::SingleQuotedString(s) => s.clone(),
                            _ => item_texts
                                .as_ref()
                                .map(|t| t[n].clone())
                                .or_else(|| source_text(text, e))
                                .unwrap_or_else(|| e.to_string()),
                        },
                        // MySQL names a qualified column by the column alone.
                        Expr::CompoundIdentifier(parts) if !parts.is_empty() => {
                            parts[parts.len() - 1].value.clone()
                        }
                        _ => item_texts
                            .as_ref()
                            .map(|t| t[n].clone())
                            .or_else(|| source_text(text, e))
                            .unwrap_or_else(|| e.to_string()),
                    };
                    items.push((header, Item::Expr(e), self.expr_type(e, &columns)));
                }
                SelectItem::ExprWithAlias { expr, alias } => items.push((
                    alias.value.clone(),
                    Item::Expr(expr),
                    self.expr_type(expr, &columns),
                )),
                SelectItem::Wildcard(_) => {
                    if from.is_empty() {
                        return Err(Error::new(code::ER_NO_TABLES_USED, "No tables used"));
                    }
                    match &star {
                        Some(star) => items.extend(
                            star.iter()
                                .map(|(s, n, t)| (n.clone(), Item::Slot(*s), t.clone())),
                        ),
                        None => {
                            for t in &from {
                                push_columns(&mut items, t);
                            }
                        }
                    }
                }
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(n),
                    _,
                ) => {
                    let (_, name) = split_name(n)?;
                    let name_l = name.to_lowercase();
                    // One table: its real name works too, as in `SELECT t.* FROM t`.
                    let t = from
                        .iter()
                        .find(|t| {
                            t.alias == name_l
                                || (from.len() == 1 && t.name.eq_ignore_ascii_case(&name))
                        })
                        .ok_or_else(|| {
                            Error::new(code::ER_BAD_TABLE_ERROR, format!("Unknown table '{name}'"))
                        })?;
                    push_columns(&mut items, t);
                }
                other => return Err(Error::unsupported(format!("select item {other}"))),
            }
        }

        let mut aggs: Vec<&Function> = Vec::new();
        for (_, it, _) in &items {
            if let Item::Expr(e) = it {
                collect_aggregates(e, &mut aggs);
            }
        }
        if let Some(h) = &select.having {
            collect_aggregates(h, &mut aggs);
        }
        let order_exprs = order_terms(q)?;
        for (e, _) in &order_exprs {
            collect_aggregates(e, &mut aggs);
        }
        let group_by: Vec<&Expr> = match &select.group_by {
            GroupByExpr::Expressions(v, _) => v.iter().collect(),
            GroupByExpr::All(_) => return Err(Error::unsupported("GROUP BY ALL")),
        };
        let ctx = self.ctx();
        let grouped = !group_by.is_empty() || !aggs.is_empty();

        // Each output row: (projected values, values for ORDER BY).
        let mut out: Vec<(Vec<Value>, Vec<Value>)> = Vec::new();
        let aliases: HashMap<String, usize> = items
            .iter()
            .enumerate()
            .map(|(i, (h, _, _))| (h.to_lowercase(), i))
            .collect();
        let emit = |row: &[Value],
                    agg: Option<&HashMap<String, Value>>,
                    out: &mut Vec<(Vec<Value>, Vec<Value>)>|
         -> Result<()> {
            let scope = Scope {
                columns: &columns,
                row,
                aggregates: agg,
                place: "field list",
            };
            let mut vals = Vec::with_capacity(items.len());
            for (_, it, _) in &items {
                vals.push(match it {
                    Item::Expr(e) => eval(e, &scope, &ctx)?,
                    Item::Slot(i) => row[*i].clone(),
                });
            }
            if let Some(h) = &select.having {
                let hscope = Scope {
                    columns: &columns,
                    row,
                    aggregates: agg,
                    place: "having clause",
                };
                let hv = match eval(h, &hscope, &ctx) {
                    Err(e) if e.code == code::ER_BAD_FIELD_ERROR => {
                        // HAVING may name select aliases.
                        let alias_cols: Vec<ColumnRef> = items
                            .iter()
                            .map(|(h, _, _)| ColumnRef {
                                table: String::new(),
                                name: h.to_lowercase(),
                                ty: None,
                                qualified_only: false,
                            })
                            .collect();
                        eval(
                            h,
                            &Scope {
                                columns: &alias_cols,
                                row: &vals,
                                aggregates: agg,
                                place: "having clause",
                            },
                            &ctx,
                        )?
                    }
                    other => other?,
                };
                if truthy(&hv) != Some(true) {
                    return Ok(());
                }
            }
            let scope = Scope {
                columns: &columns,
                row,
                aggregates: agg,
                place: "order clause",
            };
            let mut keys = Vec::with_capacity(order_exprs.len());
            for (e, _) in &order_exprs {
                let by_alias = match e {
                    Expr::Identifier(i) => aliases
                        .get(&i.value.to_lowercase())
                        .copied()
                        .filter(|_| super::expr::resolve(&scope, None, &i.value).is_err()),
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
                    None => eval(e, &scope, &ctx)?,
                });
            }
            out.push((vals, keys));
            Ok(())
        };

        if grouped {
            let mut groups: Vec<(Key, Vec<Vec<Value>>)> = Vec::new();
            let mut index: HashMap<Key, usize> = HashMap::new();
            for r in source_rows {
                let scope = Scope {
                    columns: &columns,
                    row: &r,
                    aggregates: None,
                    place: "group statement",
                };
                let key = Key(group_by
                    .iter()
                    .map(|g| eval(g, &scope, &ctx))
                    .collect::<Result<_>>()?);
                match index.get(&key) {
                    Some(&i) => groups[i].1.push(r),
                    None => {
                        index.insert(key.clone(), groups.len());
                        groups.push((key, vec![r]));
                    }
                }
            }
            if groups.is_empty() && group_by.is_empty() {
                groups.push((Key(vec![]), vec![]));
            }
            for (_, rows) in &groups {
                let mut values = HashMap::new();
                for f in &aggs {
                    values.insert(f.to_string(), aggregate(f, rows, &columns, &ctx)?);
                }
                let empty = vec![Value::Null; columns.len()];
                let rep = rows.first().unwrap_or(&empty);
                emit(rep, Some(&values), &mut out)?;
            }
        } else {
            for r in &source_rows {
                emit(r, None, &mut out)?;
            }
        }

        if matches!(select.distinct, Some(Distinct::Distinct)) {
            dedupe(&mut out, |(v, _)| v.as_slice(), ctx.tz);
        }
        let desc: Vec<bool> = order_exprs.iter().map(|(_, d)| *d).collect();
        sort_keyed(&mut out, &desc, ctx.tz);
        let (limit, offset) = limits(q, &ctx)?;
        let rows: Vec<Vec<Value>> = out
            .into_iter()
            .skip(offset)
            .take(limit.unwrap_or(usize::MAX))
            .map(|(v, _)| v)
            .collect();
        Ok(Rows {
            columns: items.iter().map(|(h, _, _)| h.clone()).collect(),
            types: items.into_iter().map(|(_, _, t)| t).collect(),
            rows,
        })
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
            Expr::Identifier(i) => super::expr::resolve(&scope, None, &i.value)
                .ok()
                .and_then(|s| columns[s].ty.clone()),
            Expr::CompoundIdentifier(p) if p.len() >= 2 => {
                super::expr::resolve(&scope, Some(&p[p.len() - 2].value), &p[p.len() - 1].value)
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

fn aggregate(
    f: &Function,
    rows: &[Vec<Value>],
    columns: &[ColumnRef],
    ctx: &super::expr::Ctx<'_>,
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
    let mut vals = Vec::new();
    for r in rows {
        let v = eval(
            e,
            &Scope {
                columns,
                row: r,
                aggregates: None,
                place: "field list",
            },
            ctx,
        )?;
        if !v.is_null() {
            vals.push(v);
        }
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
            let all_int = vals
                .iter()
                .all(|v| matches!(v, Value::Int(_) | Value::UInt(_)));
            if all_int {
                let sum: i128 = vals
                    .iter()
                    .map(|v| match v {
                        Value::Int(i) => i128::from(*i),
                        Value::UInt(u) => i128::from(*u),
                        _ => 0,
                    })
                    .sum();
                if name == "SUM" {
                    Value::Decimal(sum.to_string())
                } else {
                    Value::Decimal(format!("{:.4}", sum as f64 / vals.len() as f64))
                }
            } else {
                let sum: f64 = vals.iter().filter_map(to_f64).sum();
                let decimal = vals.iter().any(|v| matches!(v, Value::Decimal(_)));
                let r = if name == "SUM" {
                    sum
                } else {
                    sum / vals.len() as f64
                };
                if decimal {
                    let scale = vals
                        .iter()
                        .map(|v| match v {
                            Value::Decimal(s) => s.split_once('.').map_or(0, |(_, f)| f.len()),
                            _ => 0,
                        })
                        .max()
                        .unwrap_or(0)
                        + if name == "AVG" { 4 } else { 0 };
                    Value::Decimal(format!("{r:.scale$}"))
                } else {
                    Value::Double(r)
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
    .filter_map(|k| super::lexer::find_top_level(body, k))
    .min()
    .unwrap_or(body.len());
    let mut list = body[..end].trim();
    for modifier in ["DISTINCT ", "ALL ", "SQL_NO_CACHE ", "STRAIGHT_JOIN "] {
        if list.len() >= modifier.len() && list[..modifier.len()].eq_ignore_ascii_case(modifier) {
            list = list[modifier.len()..].trim_start();
        }
    }
    Some(
        super::lexer::split_top_level_commas(list)
            .into_iter()
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect(),
    )
}
