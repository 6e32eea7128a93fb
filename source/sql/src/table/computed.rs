//! Tables computed on the fly (the catalog's, views', common table expressions'): their
//! definitions and columns.

use binlog_format::schema::{ColumnDef, ColumnType, IntWidth, LobSize, TableDef};
use binlog_format::Value;
use ringrep_engine::error::{code, Error, Result};
use std::sync::Arc;

use crate::table::rows::Rows;

/// A computed table: its definition (names and types of its columns) and its rows.
pub(crate) type Computed = (TableDef, Vec<Vec<Value>>);

/// The definition of a computed table (a catalog table, a view): its columns, no keys.
pub(crate) fn computed_def(database: &str, name: &str, columns: Vec<ColumnDef>) -> TableDef {
    TableDef {
        id: 0,
        database: database.into(),
        name: name.into(),
        columns,
        primary_key: vec![],
        indexes: vec![],
        ring: None,
        ttl: None,
        partitioning: None,
        comment: None,
    }
}

/// A column of a system or computed table: no default, no auto-increment.
pub(crate) fn plain_column(name: &str, ty: ColumnType, nullable: bool) -> ColumnDef {
    ColumnDef::plain(name, ty, nullable)
}

/// A query's rows as a table that reads as `name`: columns named by `names` (or by the
/// query's headers when `names` is empty), typed by the query's columns or, where a column
/// has no table column behind it, by its values. Shared with views.
pub(crate) fn computed_rows(
    database: &str,
    name: &str,
    names: &[String],
    rows: Rows,
) -> Result<Computed> {
    let names: Vec<String> = if names.is_empty() {
        rows.columns.clone()
    } else if names.len() == rows.columns.len() {
        names.to_vec()
    } else {
        return Err(Error::new(
            code::ER_VIEW_WRONG_LIST,
            "In definition of view, derived table or common table expression, SELECT list and column names list have different column counts",
        ));
    };
    let columns = names
        .iter()
        .zip(&rows.types)
        .enumerate()
        .map(|(i, (n, ty))| {
            let ty = ty.clone().unwrap_or_else(|| type_of_values(&rows.rows, i));
            plain_column(n, ty, true)
        })
        .collect();
    Ok((computed_def(database, name, columns), rows.rows))
}

/// The column type the values of column `i` have (the first value that is not NULL decides;
/// LONGTEXT when all are NULL), for a computed column with no table column behind it.
fn type_of_values(rows: &[Vec<Value>], i: usize) -> ColumnType {
    let first = rows.iter().filter_map(|r| r.get(i)).find(|v| !v.is_null());
    match first {
        Some(Value::Int(_)) => ColumnType::Integer {
            width: IntWidth::Big,
            unsigned: false,
        },
        Some(Value::UInt(_)) => ColumnType::Integer {
            width: IntWidth::Big,
            unsigned: true,
        },
        Some(Value::Float(_)) => ColumnType::Float,
        Some(Value::Double(_)) => ColumnType::Double,
        Some(Value::Decimal(d)) => ColumnType::Decimal {
            precision: 65,
            scale: d.split_once('.').map_or(0, |(_, f)| f.len().min(30) as u8),
        },
        Some(Value::Bytes(_)) => ColumnType::Blob {
            size: LobSize::Long,
        },
        Some(Value::Date(_)) => ColumnType::Date,
        Some(Value::DateTime(_)) => ColumnType::DateTime { fsp: 6 },
        Some(Value::Timestamp(_)) => ColumnType::Timestamp { fsp: 6 },
        Some(Value::Json(_)) => ColumnType::Json,
        Some(Value::Time(_)) => ColumnType::Time { fsp: 6 },
        Some(Value::Bit(_)) => ColumnType::Bit { width: 64 },
        Some(Value::Text(_)) | Some(Value::Null) | None => ColumnType::Text {
            size: LobSize::Long,
        },
    }
}

/// The expressions in scope while a statement runs, innermost last: each name with its rows
/// and the number it was defined under (see [`SqlSession::cte_scope_key`]).
pub(crate) type CteScope = Vec<(String, Arc<Computed>, u64)>;
