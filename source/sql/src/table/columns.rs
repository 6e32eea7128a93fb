//! The columns a row of a query has and the names that reach them: the scope columns
//! expressions resolve against ([`ColumnRef`]), a table's scope columns
//! ([`table_columns`]) and the tables of a FROM clause with what `*` stands for in each
//! ([`FromTable`]). Both `select` and `join` build on these; this module depends on neither.

use binlog_format::schema::{ColumnType, TableDef};

use ringrep_engine::error::{code, Error};
use ringrep_engine::HIDDEN_ROW_ID;

/// A column a row slot holds: its table (or alias) and name, lower-cased, and its type.
#[derive(Debug, Clone)]
pub(crate) struct ColumnRef {
    /// The table's name or alias, lower-cased; empty for a result or hidden column.
    pub(crate) table: String,
    /// The column's name, lower-cased; empty for the hidden row id.
    pub(crate) name: String,
    /// The table column's type, when the slot holds one (`None` for computed values).
    pub(crate) ty: Option<ColumnType>,
    /// Reachable only as `table.name`: the second copy of a JOIN ... USING column, whose
    /// bare name means the joined (coalesced) column.
    pub(crate) qualified_only: bool,
}

/// A column `*` stands for: its slot (in a table, or in a combined row), its name as
/// declared, and its type.
pub(crate) type StarCol = (usize, String, Option<ColumnType>);

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

/// A table of a FROM clause: the name queries qualify it with (lower case), its own name,
/// where its columns start in a combined row, and the columns `*` stands for (position in
/// the table, name, type).
pub(crate) struct FromTable {
    /// The name that qualifies its columns (`alias.col`), lower-cased.
    pub(crate) alias: String,
    /// The table's own name, as declared.
    pub(crate) name: String,
    /// The slot of its first column in a combined row.
    pub(crate) offset: usize,
    /// The columns `*` stands for, with slots counted from the table's first column.
    pub(crate) star: Vec<StarCol>,
}

impl FromTable {
    /// A stored table whose columns start at `offset`: `*` stands for its visible columns.
    pub(crate) fn of_def(alias: String, def: &TableDef, offset: usize) -> FromTable {
        FromTable {
            alias,
            name: def.name.clone(),
            offset,
            star: def
                .columns
                .iter()
                .enumerate()
                .filter(|(_, c)| c.name != HIDDEN_ROW_ID)
                .map(|(i, c)| (i, c.name.clone(), Some(c.ty.clone())))
                .collect(),
        }
    }
}

/// Error 1136 for row `row` (counted from 1) of an INSERT.
pub(crate) fn wrong_value_count(row: usize) -> Error {
    Error::new(
        code::ER_WRONG_VALUE_COUNT_ON_ROW,
        format!("Column count doesn't match value count at row {row}"),
    )
}
