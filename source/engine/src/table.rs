//! One table's stored rows and unique indexes. Meta rows of ring tables are stored like any
//! row (slot 0); hiding them is the reader's job.
//!
//! Rows are kept compact and in key order by [`super::store`]. Readers get decoded copies;
//! the verifier and snapshots can use the encoded bytes as they are.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use binlog_format::schema::{IndexKind, TableDef};
use binlog_format::{Key, Value};

use super::keybytes;
use super::store::Store;
pub use super::store::StoredRow;

/// A row: one value per column, in the table's column order.
pub type Row = Vec<Value>;

/// Name of the hidden primary-key column that tables declared without a primary key get.
pub use binlog_format::schema::HIDDEN_ROW_ID;

/// A table's definition and rows (data and meta rows alike), with its unique and TTL indexes.
#[derive(Clone)]
pub struct Table {
    /// The table's definition, shared with the statements that use it (a statement takes
    /// it without copying every column's name and type).
    pub def: Arc<TableDef>,
    rows: Store,
    /// For each unique index of `def.indexes` (by position): unique value -> primary key.
    uniques: Vec<(usize, std::collections::BTreeMap<Key, Key>)>,
    /// On a TTL table with an index whose first column is the TTL column (the spec's
    /// `ttl_index`): (expiry in epoch microseconds, primary key) of every data row that can
    /// expire, so the purge reads only expired rows instead of scanning the table.
    ttl_index: Option<BTreeSet<(i64, Key)>>,
    /// Changes since the table was made, above a base of its own (see [`Table::version`]).
    version: u64,
}

/// Bases of [`Table::version`]: each table made takes the next one, shifted past any count of
/// changes one table will see, so that two tables (or a table and its replacement under the
/// same id) never show the same version.
static VERSION_BASES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("def", &self.def)
            .field("rows", &self.rows.len())
            .finish_non_exhaustive()
    }
}

impl Table {
    /// An empty table of `def`.
    pub fn new(def: TableDef) -> Table {
        let uniques = def
            .indexes
            .iter()
            .enumerate()
            .filter(|(_, i)| i.kind == IndexKind::Unique)
            .map(|(n, _)| (n, std::collections::BTreeMap::new()))
            .collect();
        let ttl_index = def
            .ttl
            .as_ref()
            .filter(|t| {
                def.indexes
                    .iter()
                    .any(|i| i.columns.first() == Some(&t.column))
            })
            .map(|_| BTreeSet::new());
        let rows = Store::new(&def);
        Table {
            def: Arc::new(def),
            rows,
            uniques,
            ttl_index,
            version: VERSION_BASES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) << 32,
        }
    }

    /// A number that changes whenever the table's rows change, and differs between tables:
    /// caches of small tables (the accounts) compare it to know they are still current.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Rebuilds the table under a new definition, keeping rows whose layout fits it.
    pub(crate) fn with_rows(def: TableDef, rows: impl IntoIterator<Item = Row>) -> Table {
        let mut t = Table::new(def);
        for r in rows {
            t.put(&r);
        }
        t
    }

    /// Number of stored rows, meta and expired rows included.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Number of ring meta rows stored (0 for a plain table); a ring table counts them
    /// without reading its rows.
    pub fn meta_rows(&self) -> usize {
        match self.rows.meta_rows() {
            Some(n) => n,
            None if self.def.ring.is_some() => self
                .rows
                .iter()
                .filter(|s| self.is_meta_key(&self.keyed(*s).0))
                .count(),
            None => 0,
        }
    }

    /// Whether the table has no stored rows (meta rows count).
    pub fn is_empty(&self) -> bool {
        self.rows.len() == 0
    }

    /// The stored row under a primary key.
    pub fn get(&self, key: &Key) -> Option<Row> {
        self.rows.get(key.0.iter()).map(|s| s.row())
    }

    /// Column `col` of the row stored under `key`, the rest of the row not decoded.
    pub fn value(&self, key: &Key, col: usize) -> Option<Value> {
        self.rows.get(key.0.iter()).and_then(|s| s.value(col))
    }

    /// Whether a row is stored under `key`.
    pub fn contains(&self, key: &Key) -> bool {
        self.rows.get(key.0.iter()).is_some()
    }

    /// Every stored row with its key, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (Key, Row)> + '_ {
        self.rows.iter().map(|s| self.keyed(s))
    }

    /// A stored row decoded, with its key.
    pub fn keyed(&self, stored: StoredRow<'_>) -> (Key, Row) {
        let row = stored.row();
        (self.key_of(&row), row)
    }

    /// Every stored row, encoded, in key order.
    pub fn stored(&self) -> impl Iterator<Item = StoredRow<'_>> + '_ {
        self.rows.iter()
    }

    /// The stored rows whose key bytes lie within the bounds, encoded, in key order.
    pub fn stored_range<'a>(
        &'a self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> impl Iterator<Item = StoredRow<'a>> + 'a {
        self.rows.range(lower, upper)
    }

    /// The rows whose primary key starts with `prefix` (every row for an empty prefix), with
    /// their keys, in key order.
    pub fn prefix(&self, prefix: &[Value]) -> impl Iterator<Item = (Key, Row)> + '_ {
        let start = keybytes::encode(prefix);
        self.rows
            .range(Bound::Included(start.as_slice()), Bound::Unbounded)
            .take_while(move |s| s.key_bytes().starts_with(&start))
            .map(|s| self.keyed(s))
    }

    /// The primary key of a full row.
    pub fn key_of(&self, row: &[Value]) -> Key {
        Key(self.def.key_of(row))
    }

    /// Whether a full row is a ring meta row (slot 0).
    fn is_meta_row(&self, row: &[Value]) -> bool {
        self.def
            .ring
            .as_ref()
            .is_some_and(|r| matches!(row.get(r.slot_column), Some(Value::Int(0) | Value::UInt(0))))
    }

    /// Whether a primary key is a ring meta row (slot 0).
    pub fn is_meta_key(&self, key: &Key) -> bool {
        self.def.is_meta_key(&key.0)
    }

    /// The unique-index value of a row, or `None` when a column is NULL (NULLs never clash).
    pub(crate) fn unique_value(&self, index: usize, row: &[Value]) -> Option<Key> {
        self.def.index_value(index, row)
    }

    /// A unique index two stored rows share a value of (its position in `def.indexes` and the
    /// value), if any: `put` keeps one holder per value, so this counts the rows with a
    /// value instead. Only a snapshot written before text compared by the collation can hold
    /// such rows; loading one looks. Meta rows are left out, as `put` leaves them out of
    /// the indexes: the spec enters only data rows.
    pub(crate) fn shared_unique_value(&self) -> Option<(usize, Key)> {
        for (idx, holders) in &self.uniques {
            let mut seen = std::collections::HashSet::with_capacity(holders.len());
            for r in self.rows.iter() {
                let row = r.row();
                if self.is_meta_key(&self.key_of(&row)) {
                    continue;
                }
                if let Some(v) = self.unique_value(*idx, &row) {
                    if let Some(v) = seen.replace(v) {
                        return Some((*idx, v));
                    }
                }
            }
        }
        None
    }

    /// The unique indexes of the table, by position in `def.indexes`.
    pub(crate) fn unique_indexes(&self) -> impl Iterator<Item = usize> + '_ {
        self.uniques.iter().map(|(n, _)| *n)
    }

    /// The primary key holding a unique value in the committed state.
    pub(crate) fn unique_holder(&self, index: usize, value: &Key) -> Option<&Key> {
        self.uniques
            .iter()
            .find(|(n, _)| *n == index)
            .and_then(|(_, m)| m.get(value))
    }

    /// Upserts a full row, keeping the unique indexes current.
    pub fn put(&mut self, row: &[Value]) {
        self.put_encoded(row, None);
    }

    /// [`Table::put`], with the row's encoding (`encode_row_into`'s bytes) when the caller
    /// has it already.
    pub(super) fn put_encoded(&mut self, row: &[Value], encoded: Option<&[u8]>) {
        self.version = self.version.wrapping_add(1);
        if !self.has_secondary() {
            // Nothing else follows the row: its key is needed only as bytes.
            self.rows.put(self.def.key_refs(row), row, encoded);
            return;
        }
        let key = self.key_of(row);
        // The old row's index entries go first.
        self.remove(&key);
        self.rows.put(key.0.iter(), row, encoded);
        if !self.is_meta_key(&key) {
            for u in 0..self.uniques.len() {
                let idx = self.uniques[u].0;
                if let Some(v) = self.unique_value(idx, row) {
                    self.uniques[u].1.insert(v, key.clone());
                }
            }
            if let Some(e) = self.expiry(row) {
                if let Some(ix) = self.ttl_index.as_mut() {
                    ix.insert((e, key));
                }
            }
        }
    }

    /// Removes the row under a primary key; whether there was one.
    pub fn remove(&mut self, key: &Key) -> bool {
        self.version = self.version.wrapping_add(1);
        let Some(old) = self.rows.remove(key.0.iter()) else {
            return false;
        };
        if self.has_secondary() {
            self.unindex(&old.view().row());
        }
        true
    }

    /// Whether rows carry entries elsewhere (unique or TTL index) that follow them.
    fn has_secondary(&self) -> bool {
        !self.uniques.is_empty() || self.ttl_index.is_some()
    }

    /// Drops a removed row's unique and TTL index entries.
    fn unindex(&mut self, old: &[Value]) {
        let key = self.key_of(old);
        if let Some(e) = self.expiry(old) {
            if let Some(ix) = self.ttl_index.as_mut() {
                ix.remove(&(e, key.clone()));
            }
        }
        for u in 0..self.uniques.len() {
            let idx = self.uniques[u].0;
            if let Some(v) = self.unique_value(idx, old) {
                if self.uniques[u].1.get(&v) == Some(&key) {
                    self.uniques[u].1.remove(&v);
                }
            }
        }
    }

    /// When a data row expires (`None`: no TTL, or a NULL TTL value: never).
    fn expiry(&self, row: &[Value]) -> Option<i64> {
        let ttl = self.def.ttl.as_ref()?;
        crate::types::expiry_us(row.get(ttl.column)?, ttl.seconds)
    }

    /// Up to `limit` data rows expired at `now`: from the TTL index when the table has one,
    /// else by scanning the table.
    pub(crate) fn expired_keys(&self, now: i64, limit: usize) -> Vec<Key> {
        match &self.ttl_index {
            Some(ix) => ix
                .iter()
                .take_while(|(e, _)| *e <= now)
                .take(limit)
                .map(|(_, k)| k.clone())
                .collect(),
            // Without the index every row is read; only the expired ones build their key.
            None => self
                .rows
                .iter()
                .map(|s| s.row())
                .filter(|r| !self.is_meta_row(r) && self.expiry(r).is_some_and(|e| e <= now))
                .take(limit)
                .map(|r| self.key_of(&r))
                .collect(),
        }
    }

    /// Whether purges read the TTL index (true) or scan the table.
    pub fn has_ttl_index(&self) -> bool {
        self.ttl_index.is_some()
    }

    /// Removes every row (TRUNCATE).
    pub fn clear(&mut self) {
        self.version = self.version.wrapping_add(1);
        self.rows.clear();
        if let Some(ix) = self.ttl_index.as_mut() {
            ix.clear();
        }
        for (_, m) in &mut self.uniques {
            m.clear();
        }
    }
}
