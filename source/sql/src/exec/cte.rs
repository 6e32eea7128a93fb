//! Common table expressions: `WITH [RECURSIVE] name [(columns)] AS (query), ... query`.
//!
//! Each expression is run once, in the order written, before the query it belongs to, and is
//! then read as a table under its name, unqualified, wherever the name is in scope: the
//! query's body (subqueries included) and the expressions written after it. With RECURSIVE,
//! an expression's own definition sees it too. A view's query never sees the expressions of
//! the statement that reads the view. A recursive expression is run to its fixed point: its
//! non-recursive query blocks first, then its recursive blocks over the rows the previous
//! round added, until a round adds none (MySQL's way, bounded by
//! `cte_max_recursion_depth`).

use std::ops::ControlFlow;
use std::sync::Arc;

use binlog_format::Value;
use sqlparser::ast::{
    Cte, ObjectName, Query, SetExpr, SetOperator, SetQuantifier, Statement, Visit, Visitor, With,
};

use crate::parse::tree::{single_name, written};
use crate::table::computed::computed_rows;
use crate::table::computed::{Computed, CteScope};
use crate::table::rows::Rows;
use crate::SqlSession;
use ringrep_engine::error::{code, Error, Result};

/// Numbers every expression defined in the process, so that two scopes never share a key.
static NEXT_DEFINITION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// MySQL's default `cte_max_recursion_depth`.
pub(crate) const DEFAULT_MAX_RECURSION_DEPTH: u64 = 1000;

/// The rows a recursive expression may reach before its statement fails with 1114 ("table is
/// full", as MySQL's temporary table does when it outgrows its limit): a recursion that
/// multiplies its rows each round would otherwise take the server's memory long before
/// `cte_max_recursion_depth` stops it.
const MAX_RECURSIVE_ROWS: usize = 1_000_000;

impl SqlSession {
    /// The rows the expression `name` stands for where the statement is running, if one of
    /// that name is in scope.
    pub(crate) fn cte_rows(&self, name: &str) -> Option<Computed> {
        let scope = self.ctes.lock().unwrap_or_else(|p| p.into_inner());
        scope
            .iter()
            .rev()
            .find(|(n, ..)| n.eq_ignore_ascii_case(name))
            .map(|(_, rows, _)| (**rows).clone())
    }

    /// What keys the statement's subquery results (with their text) in the scope at hand:
    /// the same text reads other rows under other expressions (each round of a recursive one
    /// binds its name anew), so results are kept apart by the definitions in scope. Empty
    /// where none is.
    pub(crate) fn cte_scope_key(&self) -> String {
        let scope = self.ctes.lock().unwrap_or_else(|p| p.into_inner());
        let mut key = String::new();
        for (_, _, id) in scope.iter() {
            key.push_str(&id.to_string());
            key.push(' ');
        }
        key
    }

    /// Takes every expression out of scope (a view's query runs without them).
    pub(crate) fn take_ctes(&self) -> CteScope {
        std::mem::take(&mut *self.ctes.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Puts back what [`SqlSession::take_ctes`] took.
    pub(crate) fn restore_ctes(&self, scope: CteScope) {
        *self.ctes.lock().unwrap_or_else(|p| p.into_inner()) = scope;
    }

    fn push_cte(&self, name: &str, rows: Computed) {
        self.ctes.lock().unwrap_or_else(|p| p.into_inner()).push((
            name.to_string(),
            Arc::new(rows),
            NEXT_DEFINITION.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        ));
    }

    fn scope_depth(&self) -> usize {
        self.ctes.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn truncate_ctes(&self, depth: usize) {
        self.ctes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .truncate(depth);
    }

    /// Runs `body` with the expressions of `with` in scope; they leave it afterwards, whatever
    /// the outcome. `text` is the statement's text (it names the expressions' columns).
    pub(crate) fn with_ctes(
        &self,
        with: &With,
        text: &str,
        body: impl FnOnce() -> Result<Rows>,
    ) -> Result<Rows> {
        let depth = self.scope_depth();
        let result = self.define_ctes(with, text).and_then(|()| body());
        self.truncate_ctes(depth);
        result
    }

    fn define_ctes(&self, with: &With, text: &str) -> Result<()> {
        for (i, cte) in with.cte_tables.iter().enumerate() {
            let name = &cte.alias.name.value;
            if with.cte_tables[..i]
                .iter()
                .any(|c| c.alias.name.value.eq_ignore_ascii_case(name))
            {
                return Err(Error::new(
                    code::ER_NONUNIQ_TABLE,
                    format!("Not unique table/alias: '{name}'"),
                ));
            }
            let names = column_names(cte);
            let rows = if with.recursive && reads_name(&cte.query, name) {
                self.recursive_rows(cte, &names)?
            } else {
                // Its own text, as written where known, names its columns.
                let own = written(text, &cte.query).unwrap_or_else(|| cte.query.to_string());
                self.run_query(&cte.query, &own)?
            };
            let computed = computed_rows("", name, &names, rows)?;
            let columns = &computed.0.columns;
            if let Some(dup) = columns.iter().enumerate().find_map(|(i, c)| {
                columns[..i]
                    .iter()
                    .any(|d| d.name.eq_ignore_ascii_case(&c.name))
                    .then_some(&c.name)
            }) {
                return Err(Error::new(
                    code::ER_DUP_FIELDNAME,
                    format!("Duplicate column name '{dup}'"),
                ));
            }
            self.push_cte(name, computed);
        }
        Ok(())
    }

    /// A recursive expression's rows: its non-recursive blocks, then rounds of its recursive
    /// blocks over what the round before added, until one adds nothing.
    fn recursive_rows(&self, cte: &Cte, names: &[String]) -> Result<Rows> {
        let name = &cte.alias.name.value;
        let q = &cte.query;
        if q.order_by.is_some() || q.limit_clause.is_some() || q.fetch.is_some() {
            return Err(Error::unsupported(
                "ORDER BY or LIMIT over a recursive common table expression",
            ));
        }
        // Its blocks are run one by one, written back as text, outside such a clause's scope.
        if q.with.is_some() {
            return Err(Error::unsupported(
                "a WITH clause inside a recursive common table expression",
            ));
        }
        let mut blocks = Vec::new();
        union_blocks(&q.body, &mut blocks);
        if blocks.len() < 2 {
            return Err(Error::new(
                code::ER_CTE_RECURSIVE_REQUIRES_UNION,
                format!("Recursive Common Table Expression '{name}' should contain a UNION"),
            ));
        }
        let reads: Vec<bool> = blocks.iter().map(|(_, b)| reads_name(*b, name)).collect();
        let first_recursive = reads.iter().position(|r| *r).unwrap_or(blocks.len());
        if first_recursive == 0 || reads[first_recursive..].iter().any(|r| !r) {
            return Err(Error::new(
                code::ER_CTE_RECURSIVE_REQUIRES_NONRECURSIVE_FIRST,
                format!(
                    "Recursive Common Table Expression '{name}' should have one or more \
                     non-recursive query blocks followed by one or more recursive ones"
                ),
            ));
        }
        for (_, block) in &blocks[first_recursive..] {
            check_recursive_block(block, name)?;
        }
        // A UNION without ALL anywhere makes the whole result distinct, as in MySQL.
        let distinct = blocks[1..].iter().any(|(d, _)| *d);
        let mut anchor_sql = String::new();
        for (i, (d, block)) in blocks[..first_recursive].iter().enumerate() {
            if i > 0 {
                anchor_sql.push_str(if *d { " UNION " } else { " UNION ALL " });
            }
            anchor_sql.push_str(&block.to_string());
        }
        let anchor = self.run_text(&anchor_sql)?;
        let recursive: Vec<(Query, String)> = blocks[first_recursive..]
            .iter()
            .map(|(_, b)| {
                let text = b.to_string();
                query_of(&text).map(|q| (q, text))
            })
            .collect::<Result<_>>()?;
        let width = anchor.columns.len();
        let tz = self.session.vars.tz_offset;
        let mut all = anchor.rows;
        if distinct {
            crate::expr::rowset::dedupe(&mut all, |r| r.as_slice(), tz);
        }
        let mut fresh = all.clone();
        let mut rounds = 0u64;
        while !fresh.is_empty() {
            if rounds >= self.cte_max_recursion_depth {
                return Err(Error::new(
                    code::ER_CTE_MAX_RECURSION_DEPTH,
                    format!(
                        "Recursive query aborted after {} iterations. Try increasing \
                         @@cte_max_recursion_depth to a larger value.",
                        rounds + 1
                    ),
                ));
            }
            rounds += 1;
            // The recursive blocks read only what the previous round added.
            let working = Rows {
                columns: anchor.columns.clone(),
                types: anchor.types.clone(),
                rows: fresh,
            };
            let depth = self.scope_depth();
            self.push_cte(name, computed_rows("", name, names, working)?);
            let round: Result<Vec<Vec<Value>>> =
                recursive
                    .iter()
                    .try_fold(Vec::new(), |mut added, (q, text)| {
                        let rows = self.run_query(q, text)?;
                        if rows.columns.len() != width {
                            return Err(Error::new(
                                code::ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
                                "The used SELECT statements have a different number of columns",
                            ));
                        }
                        added.extend(rows.rows);
                        Ok(added)
                    });
            self.truncate_ctes(depth);
            let added = round?;
            fresh = if distinct {
                let before = all.len();
                all.extend(added);
                crate::expr::rowset::dedupe(&mut all, |r| r.as_slice(), tz);
                all[before..].to_vec()
            } else {
                all.extend(added.iter().cloned());
                added
            };
            if all.len() > MAX_RECURSIVE_ROWS {
                return Err(Error::new(
                    code::ER_RECORD_FILE_FULL,
                    format!(
                        "The table '{name}' is full (a recursive common table expression may \
                         hold {MAX_RECURSIVE_ROWS} rows)"
                    ),
                ));
            }
        }
        Ok(Rows {
            columns: anchor.columns,
            types: anchor.types,
            rows: all,
        })
    }

    /// The rows of a query given as text (a block of a recursive expression, written back).
    fn run_text(&self, sql: &str) -> Result<Rows> {
        self.run_query(&query_of(sql)?, sql)
    }
}

/// MySQL's rules for a recursive query block, which the round-by-round run relies on: one
/// plain SELECT reading the expression once, in its FROM and not on the inner side of an outer
/// join, with no aggregation, window, DISTINCT, ORDER BY or LIMIT (each would see only one
/// round's rows, where MySQL's meaning is over all of them).
fn check_recursive_block(block: &SetExpr, name: &str) -> Result<()> {
    use sqlparser::ast::{GroupByExpr, JoinOperator, TableFactor};
    let select = match block {
        SetExpr::Select(s) => s,
        SetExpr::Query(q) if q.order_by.is_some() || q.limit_clause.is_some() => {
            return Err(Error::unsupported(
                "ORDER BY / LIMIT in recursive query block of Common Table Expression",
            ))
        }
        SetExpr::Query(q) => return check_recursive_block(&q.body, name),
        _ => return Ok(()),
    };
    if select.distinct.is_some() {
        return Err(Error::unsupported(
            "SELECT DISTINCT in recursive query block of Common Table Expression",
        ));
    }
    let grouped = match &select.group_by {
        GroupByExpr::All(_) => true,
        GroupByExpr::Expressions(e, _) => !e.is_empty(),
    };
    let mut found = AggregateFinder::default();
    let _ = select.projection.visit(&mut found);
    let aggregates =
        grouped || select.having.is_some() || !select.named_window.is_empty() || found.found;
    if aggregates {
        return Err(Error::new(
            code::ER_CTE_RECURSIVE_FORBIDS_AGGREGATION,
            format!(
                "Recursive Common Table Expression '{name}' can contain neither aggregation \
                 nor window functions in recursive query block"
            ),
        ));
    }
    let is_self = |f: &TableFactor| match f {
        TableFactor::Table { name: n, .. } => {
            single_name(n).is_some_and(|n| n.eq_ignore_ascii_case(name))
        }
        _ => false,
    };
    let mut in_from = 0;
    for t in &select.from {
        let factors: Vec<&TableFactor> = std::iter::once(&t.relation)
            .chain(t.joins.iter().map(|j| &j.relation))
            .collect();
        for (i, f) in factors.iter().enumerate() {
            if !is_self(f) {
                continue;
            }
            in_from += 1;
            // The inner side of an outer join: the right of a LEFT JOIN, or anything left
            // of a later RIGHT JOIN.
            let left_joined = i > 0
                && matches!(
                    t.joins[i - 1].join_operator,
                    JoinOperator::Left(_) | JoinOperator::LeftOuter(_)
                );
            let right_joined = t.joins[i..].iter().any(|j| {
                matches!(
                    j.join_operator,
                    JoinOperator::Right(_) | JoinOperator::RightOuter(_)
                )
            });
            if left_joined || right_joined {
                return Err(forbidden_join_order(name));
            }
        }
    }
    let mut anywhere = 0;
    let _ = sqlparser::ast::visit_relations(block, |n: &ObjectName| {
        if single_name(n).is_some_and(|n| n.eq_ignore_ascii_case(name)) {
            anywhere += 1;
        }
        ControlFlow::<()>::Continue(())
    });
    if in_from != 1 || anywhere != 1 {
        return Err(Error::new(
            code::ER_CTE_RECURSIVE_REQUIRES_SINGLE_REFERENCE,
            format!(
                "In recursive query block of Recursive Common Table Expression '{name}', the \
                 recursive table must be referenced only once, and not in any subquery"
            ),
        ));
    }
    Ok(())
}

/// Finds an aggregate or window function of a query block itself, not of its subqueries
/// (theirs aggregate their own rows).
#[derive(Default)]
struct AggregateFinder {
    depth: usize,
    found: bool,
}

impl Visitor for AggregateFinder {
    type Break = ();

    fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &sqlparser::ast::Expr) -> ControlFlow<()> {
        if let (0, sqlparser::ast::Expr::Function(f)) = (self.depth, e) {
            let aggregate = f.name.0.len() == 1
                && matches!(&f.args, sqlparser::ast::FunctionArguments::List(_))
                && crate::expr::is_aggregate(&f.name.to_string());
            if aggregate || f.over.is_some() {
                self.found = true;
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

fn forbidden_join_order(name: &str) -> Error {
    Error::new(
        code::ER_CTE_RECURSIVE_FORBIDDEN_JOIN_ORDER,
        format!(
            "In recursive query block of Recursive Common Table Expression '{name}', the \
             recursive table must neither be in the right argument of a LEFT JOIN, nor be \
             forced to be non-first with join order hints"
        ),
    )
}

fn query_of(sql: &str) -> Result<Query> {
    match crate::parse::statement::parse_one(sql)? {
        Statement::Query(q) => Ok(*q),
        _ => Err(Error::internal(format!("not a query: {sql}"))),
    }
}

/// The column names an expression declares (`name (a, b) AS ...`); empty when it declares
/// none (its query's headers name them).
fn column_names(cte: &Cte) -> Vec<String> {
    cte.alias
        .columns
        .iter()
        .map(|c| c.name.value.clone())
        .collect()
}

/// The query blocks of a UNION chain, left to right, each with whether the UNION before it is
/// DISTINCT (the first's flag means nothing); anything else is one block.
fn union_blocks<'q>(body: &'q SetExpr, out: &mut Vec<(bool, &'q SetExpr)>) {
    match body {
        SetExpr::SetOperation {
            op: SetOperator::Union,
            set_quantifier,
            left,
            right,
        } => {
            union_blocks(left, out);
            let all = matches!(
                set_quantifier,
                SetQuantifier::All | SetQuantifier::AllByName
            );
            out.push((!all, right));
        }
        other => out.push((false, other)),
    }
}

/// Whether `node` reads a table called `name`, unqualified, anywhere in it.
fn reads_name<V: Visit>(node: &V, name: &str) -> bool {
    sqlparser::ast::visit_relations(node, |n| {
        if single_name(n).is_some_and(|s| s.eq_ignore_ascii_case(name)) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}
