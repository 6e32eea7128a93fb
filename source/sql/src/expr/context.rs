//! What an evaluation sees: the row in scope (`Scope`), the session's state and its warnings
//! (`Ctx`), the rows of the queries around a subquery (`OuterRow`).

use std::collections::HashMap;
use std::sync::Arc;

use binlog_format::value::Value;
use sqlparser::ast::{BinaryOperator, Query};

use crate::table::columns::ColumnRef;
use crate::table::rows::Rows;
use ringrep_engine::error::{code, Error, Result};

use super::value::*;

/// The most warnings one statement keeps, as MySQL's `max_error_count`.
pub(crate) use ringrep_engine::MAX_WARNINGS;

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

/// What an evaluation asks of the session it runs in: `SqlSession` answers (`session/run.rs`),
/// so that this floor need not know it.
pub(crate) trait EvalSession {
    /// `@@name`'s value (`SqlSession::system_variable`).
    fn system_variable(&self, name: &str) -> Result<Value>;
    /// A subquery's rows, with the rows around it (`SqlSession::run_subquery_in`).
    fn run_subquery_in(
        &self,
        q: &Query,
        scope: &Scope<'_>,
        outer: Option<&Arc<OuterRow>>,
    ) -> Result<Arc<Rows>>;
    /// Whether the statement may wait (`SqlSession::may_wait`).
    fn may_wait(&self) -> bool;
    /// GET_LOCK and its family (`SqlSession::user_lock_function`).
    fn user_lock_function(&self, name: &str, args: &[Value]) -> Result<Value>;
}

/// Session-wide inputs of evaluation.
pub(crate) struct Ctx<'a> {
    /// The session, for subqueries and `@@` variables (`None` while the session is busy
    /// changing rows: then subqueries come from `prefetched`).
    pub(crate) sql: Option<&'a dyn EvalSession>,
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
    pub(crate) authority: Option<&'a crate::accounts::Authority>,
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
pub(super) fn check_compared(a: &Value, b: &Value, ctx: &Ctx<'_>) -> Result<()> {
    if is_numeric(a) != is_numeric(b) {
        check_numeric_text(a, ctx)?;
        check_numeric_text(b, ctx)?;
    }
    Ok(())
}

/// [`check_compared`] for a value compared with several (IN, BETWEEN): a string on the left
/// is read as a number once, as MySQL reads it, each string on the right once.
pub(super) fn check_compared_with<'v>(
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
pub(super) fn lowercase(name: &str) -> std::borrow::Cow<'_, str> {
    if name
        .bytes()
        .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
    {
        name.into()
    } else {
        name.to_lowercase().into()
    }
}

/// A session's SQL mode until SET changes it: strict, and a division by zero in a written
/// value is an error.
pub(crate) const SQL_MODE: &str = "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO";
