//! A statement's result set: names, declared types and values, rendered as text on demand
//! (the mysql client's view) or typed for the wire (the server's view).

use binlog_format::schema::ColumnType;
use binlog_format::Value;

use super::value::render;

/// The rows a statement returned, with their column names and types. Values are kept as
/// read; [`ResultSet::text_rows`] and [`ResultSet::cell_text`] render them as the `mysql`
/// client prints them.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSet {
    /// The column names (headers), in order.
    pub columns: Vec<String>,
    /// The table column type behind each result column, where there is one (`None` for
    /// expressions and for SHOW output).
    pub types: Vec<Option<ColumnType>>,
    /// The rows, each with one value per column.
    pub rows: Vec<Vec<Value>>,
    /// The session's time zone offset in seconds when the rows were read: TIMESTAMP values are
    /// UTC and print in it.
    pub tz: i64,
}

impl ResultSet {
    /// A result made of text (SHOW and other server-made answers).
    pub(crate) fn text(columns: &[&str], rows: Vec<Vec<Option<String>>>) -> ResultSet {
        ResultSet {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            types: vec![None; columns.len()],
            rows: rows
                .into_iter()
                .map(|r| {
                    r.into_iter()
                        .map(|v| v.map_or(Value::Null, Value::Text))
                        .collect()
                })
                .collect(),
            tz: 0,
        }
    }

    /// The named columns as integers (their text parsed; NULL and anything else kept), typed
    /// BIGINT: server-made answers whose MySQL columns are numbers (SHOW PROCESSLIST's Id and
    /// Time, SHOW REPLICA STATUS's ports and positions), so that drivers hand out numbers.
    pub fn with_integer_columns(mut self, names: &[&str]) -> ResultSet {
        for (i, name) in self.columns.iter().enumerate() {
            if !names.contains(&name.as_str()) {
                continue;
            }
            self.types[i] = Some(ColumnType::Integer {
                width: binlog_format::schema::IntWidth::Big,
                unsigned: false,
            });
            for row in &mut self.rows {
                if let Some(v) = row.get_mut(i) {
                    if let Some(n) = match v {
                        Value::Text(t) => t.parse::<i64>().ok(),
                        _ => None,
                    } {
                        *v = Value::Int(n);
                    }
                }
            }
        }
        self
    }

    /// One value of column `column` as the mysql client prints it (`None` is NULL):
    /// TIMESTAMPs in the result's time zone, times with the fraction digits of the column's
    /// type, floats as MySQL prints them.
    pub fn cell_text(&self, value: &Value, column: usize) -> Option<String> {
        render(
            value,
            self.types.get(column).and_then(Option::as_ref),
            self.tz,
        )
    }

    /// Every row as text, as the mysql client prints it.
    pub fn text_rows(&self) -> Vec<Vec<Option<String>>> {
        self.rows
            .iter()
            .map(|r| {
                r.iter()
                    .enumerate()
                    .map(|(i, v)| self.cell_text(v, i))
                    .collect()
            })
            .collect()
    }
}

impl Outcome {
    /// Rows made of text (SHOW and other server-made answers).
    pub fn text(columns: &[&str], rows: Vec<Vec<Option<String>>>) -> Outcome {
        Outcome::Rows(ResultSet::text(columns, rows))
    }

    /// [`Outcome::text`] with the columns named `integers` as integers
    /// ([`ResultSet::with_integer_columns`]).
    pub fn text_with_integers(
        columns: &[&str],
        rows: Vec<Vec<Option<String>>>,
        integers: &[&str],
    ) -> Outcome {
        Outcome::Rows(ResultSet::text(columns, rows).with_integer_columns(integers))
    }
}

/// What one statement produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A result set.
    Rows(ResultSet),
    /// A change: rows affected and MySQL's info line (`Records: 3  Duplicates: 0 ...`).
    Affected {
        /// The rows the statement affected, counted as MySQL counts them (an INSERT ... ON
        /// DUPLICATE KEY UPDATE that changes a row counts 2).
        rows: u64,
        /// The info line MySQL sends with the OK packet for some statements (multi-row
        /// INSERT, UPDATE, ALTER TABLE, LOAD DATA), when there is one.
        info: Option<String>,
        /// What a client that set `CLIENT_FOUND_ROWS` is told in place of `rows`, where
        /// that differs: an UPDATE's rows matched, changed or not, and an INSERT ... ON
        /// DUPLICATE KEY UPDATE's count with a row left as it was counted 1.
        found: Option<u64>,
    },
    /// Anything else (SET, BEGIN, ...).
    Ok,
}

impl Outcome {
    /// The rows a client that set `CLIENT_FOUND_ROWS` is told were affected, where that
    /// differs from the rows affected: an UPDATE's rows matched, changed or not.
    pub fn rows_matched(&self) -> Option<u64> {
        match self {
            Outcome::Affected { found, .. } => *found,
            _ => None,
        }
    }
}
