//! A query's rows before rendering ([`Rows`]): what `select` produces and what expressions
//! read from their subqueries. It lives apart from both so that `expr` and `select` do not
//! depend on each other for it.

use binlog_format::schema::ColumnType;
use binlog_format::Value;

/// A query's result before rendering.
#[derive(Debug)]
pub(crate) struct Rows {
    /// The result's column names (headers), in order.
    pub(crate) columns: Vec<String>,
    /// The table column type behind each result column, where there is one.
    pub(crate) types: Vec<Option<ColumnType>>,
    /// The rows, each with one value per column.
    pub(crate) rows: Vec<Vec<Value>>,
}
