//! One table's stored rows and unique indexes. Meta rows of ring tables are stored like any
//! row (slot 0); hiding them is the reader's job.

use std::collections::BTreeMap;

use binlog_format::schema::{IndexKind, TableDef};
use binlog_format::{Key, Value};

pub type Row = Vec<Value>;

/// Name of the hidden primary-key column that tables declared without a primary key get.
pub const HIDDEN_ROW_ID: &str = "__ringrep_row_id";

#[derive(Debug, Clone)]
pub struct Table {
    pub def: TableDef,
    pub rows: BTreeMap<Key, Row>,
    /// For each unique index of `def.indexes` (by position): unique value -> primary key.
    uniques: Vec<(usize, BTreeMap<Key, Key>)>,
    /// On a TTL table with an index whose first column is the TTL column (the spec's
    /// `ttl_index`): (expiry in epoch microseconds, primary key) of every data row that can
    /// expire, so the purge reads only expired rows instead of scanning the table.
    ttl_index: Option<std::collections::BTreeSet<(i64, Key)>>,
}

impl Table {
    pub fn new(def: TableDef) -> Table {
        let uniques = def
            .indexes
            .iter()
            .enumerate()
            .filter(|(_, i)| i.kind == IndexKind::Unique)
            .map(|(n, _)| (n, BTreeMap::new()))
            .collect();
        let ttl_index = def
            .ttl
            .as_ref()
            .filter(|t| {
                def.indexes
                    .iter()
                    .any(|i| i.columns.first() == Some(&t.column))
            })
            .map(|_| std::collections::BTreeSet::new());
        Table {
            def,
            rows: BTreeMap::new(),
            uniques,
            ttl_index,
        }
    }

    /// Rebuilds the table under a new definition, keeping rows whose layout fits it.
    pub fn with_rows(def: TableDef, rows: impl IntoIterator<Item = Row>) -> Table {
        let mut t = Table::new(def);
        for r in rows {
            t.put(r);
        }
        t
    }

    pub fn key_of(&self, row: &[Value]) -> Key {
        Key(self.def.key_of(row))
    }

    /// Whether a primary key is a ring meta row (slot 0).
    pub fn is_meta_key(&self, key: &Key) -> bool {
        self.def.ring.is_some()
            && key
                .0
                .last()
                .is_some_and(|v| matches!(v, Value::Int(0) | Value::UInt(0)))
    }

    /// The unique-index value of a row, or `None` when a column is NULL (NULLs never clash).
    pub fn unique_value(&self, index: usize, row: &[Value]) -> Option<Key> {
        let cols = &self.def.indexes[index].columns;
        let vals: Vec<Value> = cols
            .iter()
            .map(|&c| row.get(c).cloned().unwrap_or(Value::Null))
            .collect();
        if vals.iter().any(Value::is_null) {
            None
        } else {
            Some(Key(vals))
        }
    }

    /// The unique indexes of the table, by position in `def.indexes`.
    pub fn unique_indexes(&self) -> impl Iterator<Item = usize> + '_ {
        self.uniques.iter().map(|(n, _)| *n)
    }

    /// The primary key holding a unique value in the committed state.
    pub fn unique_holder(&self, index: usize, value: &Key) -> Option<&Key> {
        self.uniques
            .iter()
            .find(|(n, _)| *n == index)
            .and_then(|(_, m)| m.get(value))
    }

    /// Upserts a full row, keeping the unique indexes current. Returns the old row.
    pub fn put(&mut self, row: Row) -> Option<Row> {
        let key = self.key_of(&row);
        let old = self.remove(&key);
        if !self.is_meta_key(&key) {
            for u in 0..self.uniques.len() {
                let idx = self.uniques[u].0;
                if let Some(v) = self.unique_value(idx, &row) {
                    self.uniques[u].1.insert(v, key.clone());
                }
            }
            if let Some(e) = self.expiry(&row) {
                if let Some(ix) = self.ttl_index.as_mut() {
                    ix.insert((e, key.clone()));
                }
            }
        }
        self.rows.insert(key, row);
        old
    }

    pub fn remove(&mut self, key: &Key) -> Option<Row> {
        let old = self.rows.remove(key)?;
        if let Some(e) = self.expiry(&old) {
            if let Some(ix) = self.ttl_index.as_mut() {
                ix.remove(&(e, key.clone()));
            }
        }
        for u in 0..self.uniques.len() {
            let idx = self.uniques[u].0;
            if let Some(v) = self.unique_value(idx, &old) {
                if self.uniques[u].1.get(&v) == Some(key) {
                    self.uniques[u].1.remove(&v);
                }
            }
        }
        Some(old)
    }

    /// When a data row expires (`None`: no TTL, or a NULL TTL value: never).
    fn expiry(&self, row: &[Value]) -> Option<i64> {
        let ttl = self.def.ttl.as_ref()?;
        crate::types::expiry_us(row.get(ttl.column)?, ttl.seconds)
    }

    /// Up to `limit` data rows expired at `now`: from the TTL index when the table has one,
    /// else by scanning the table.
    pub fn expired_keys(&self, now: i64, limit: usize) -> Vec<Key> {
        match &self.ttl_index {
            Some(ix) => ix
                .iter()
                .take_while(|(e, _)| *e <= now)
                .take(limit)
                .map(|(_, k)| k.clone())
                .collect(),
            None => self
                .rows
                .iter()
                .filter(|(k, r)| !self.is_meta_key(k) && self.expiry(r).is_some_and(|e| e <= now))
                .take(limit)
                .map(|(k, _)| k.clone())
                .collect(),
        }
    }

    /// Whether purges read the TTL index (true) or scan the table.
    pub fn has_ttl_index(&self) -> bool {
        self.ttl_index.is_some()
    }

    pub fn clear(&mut self) {
        self.rows.clear();
        if let Some(ix) = self.ttl_index.as_mut() {
            ix.clear();
        }
        for (_, m) in &mut self.uniques {
            m.clear();
        }
    }
}
