//! The results of a statement's correlated subqueries, by the outer values a run read.

use std::collections::HashMap;

use binlog_format::Value;

use super::context::Scope;
use crate::table::rows::Rows;

/// How many results of one correlated subquery a statement keeps.
const MEMO_ROWS: usize = 4096;

/// The results of one correlated subquery in a statement, by the outer values a run read.
/// A run reads the same slots again for the same values there (it takes the same path), so
/// a result found under the slots one run read, with the values now in them, is the result.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    entries: Vec<MemoEntry>,
    kept: usize,
}

#[derive(Debug)]
struct MemoEntry {
    /// The enclosing scope's columns (table, name): the same text under another scope has
    /// other slots.
    columns: Vec<(String, String)>,
    /// The slots of the enclosing row the runs read.
    slots: Vec<usize>,
    /// Results by the values in `slots`, encoded: exactly those values, since a run over
    /// 'Bob' may differ from one over 'bob' (CONCAT, BINARY) although `Key` calls them equal.
    rows: HashMap<Vec<u8>, std::sync::Arc<Rows>>,
}

impl MemoEntry {
    fn fits(&self, scope: &Scope<'_>) -> bool {
        self.columns.len() == scope.columns.len()
            && self
                .columns
                .iter()
                .zip(scope.columns)
                .all(|((t, n), c)| *t == c.table && *n == c.name)
            && self.slots.iter().all(|&s| s < scope.row.len())
    }

    fn key(&self, row: &[Value]) -> Vec<u8> {
        let values: Vec<Value> = self.slots.iter().map(|&s| row[s].clone()).collect();
        let mut key = Vec::new();
        binlog_format::codec::encode_row_into(&values, &mut key);
        key
    }
}

impl Memo {
    pub(crate) fn get(&self, scope: &Scope<'_>) -> Option<std::sync::Arc<Rows>> {
        self.entries
            .iter()
            .filter(|e| e.fits(scope))
            .find_map(|e| e.rows.get(&e.key(scope.row)).cloned())
    }

    pub(crate) fn insert(
        &mut self,
        scope: &Scope<'_>,
        slots: Vec<usize>,
        rows: std::sync::Arc<Rows>,
    ) {
        if self.kept >= MEMO_ROWS {
            return;
        }
        let at = match self
            .entries
            .iter()
            .position(|e| e.slots == slots && e.fits(scope))
        {
            Some(at) => at,
            None => {
                self.entries.push(MemoEntry {
                    columns: scope
                        .columns
                        .iter()
                        .map(|c| (c.table.clone(), c.name.clone()))
                        .collect(),
                    slots,
                    rows: HashMap::new(),
                });
                self.entries.len() - 1
            }
        };
        let entry = &mut self.entries[at];
        let key = entry.key(scope.row);
        entry.rows.insert(key, rows);
        self.kept += 1;
    }
}
