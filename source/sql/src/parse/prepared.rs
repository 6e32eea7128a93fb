//! A prepared statement's text parsed once, as a session keeps it: the statement with its
//! placeholders (`Template`), an INSERT's rows compiled (`InsertPlan`), a brief SELECT's table.
//! Only the data: `exec::bound` and `exec::insert_plan` build and run them.

use std::sync::{Arc, Mutex};

use binlog_format::schema::TableDef;
use sqlparser::ast::{Expr, Statement};

/// A prepared statement parsed once: the statement, and for each placeholder in the order the
/// syntax-tree visitor meets it, which parameter it takes (its place in the text; the
/// visitor's order can differ from the text's).
pub(crate) struct Template {
    pub(crate) stmt: Statement,
    /// The normalized text it was parsed from: the spans in `stmt` are of it, and a SELECT
    /// names its columns from it.
    pub(crate) text: String,
    pub(crate) parameter: Vec<usize>,
    /// An INSERT of listed rows, compiled (`insert_plan.rs`).
    pub(crate) insert: Option<InsertPlan>,
    /// `exec::bound::lists_its_rows` of the statement: asked on every execution, answered once.
    pub(crate) lists_its_rows: bool,
}

/// The one table a brief SELECT reads, as the statement names it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BriefRead {
    pub(crate) db: Option<String>,
    pub(crate) table: String,
}

/// A prepared text as a session finds it once: its template (an INSERT, UPDATE, DELETE or
/// SELECT), and for a SELECT that runs briefly the table it reads (which keeps it on its
/// connection's task).
#[derive(Clone, Default)]
pub(crate) struct Parsed {
    pub(crate) template: Option<Arc<Template>>,
    pub(crate) read: Option<Arc<BriefRead>>,
}

/// What an INSERT of listed rows does, with its values still to come.
pub(crate) struct InsertPlan {
    pub(crate) db: Option<String>,
    pub(crate) table: String,
    /// The column list as written; empty when the statement has none (every visible column).
    pub(crate) names: Vec<String>,
    pub(crate) rows: Vec<Vec<Cell>>,
    pub(crate) ignore: bool,
    /// The positions of `names` in the definition they were last looked up in, and whether
    /// one is listed twice. A DDL gives the table a new definition: looked up again then.
    pub(crate) resolved: Mutex<Option<Resolved>>,
}

pub(crate) struct Resolved {
    pub(crate) def: Arc<TableDef>,
    pub(crate) columns: Arc<[usize]>,
    pub(crate) twice: bool,
}

/// One value of a row.
pub(crate) enum Cell {
    /// Parameter number n (in text order).
    Param(usize),
    /// The DEFAULT keyword.
    Default,
    /// Any other expression, evaluated on each execution as the general INSERT does.
    Expr(Box<Expr>),
}
