//! One table's stored rows and unique indexes. Meta rows of ring tables are stored like any
//! row (slot 0); hiding them is the reader's job.
//!
//! Rows are kept compact, because the ring tables hold millions of them: each row is one
//! allocation holding its primary key as order-preserving bytes ([`super::keybytes`]) and the
//! row in its binlog encoding, in a B-tree ordered by the key bytes. Readers get decoded
//! copies; the verifier and snapshots can use the encoded bytes as they are.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ops::Bound;

use binlog_format::schema::{IndexKind, TableDef};
use binlog_format::{Key, Value};

use super::keybytes;

pub type Row = Vec<Value>;

/// Name of the hidden primary-key column that tables declared without a primary key get.
pub const HIDDEN_ROW_ID: &str = "__ringrep_row_id";

/// One stored row: the key's length (LEB128), the key's bytes, then the row's encoding.
/// Ordered, compared and looked up by the key bytes alone.
#[derive(Clone)]
struct Stored(Box<[u8]>);

impl Stored {
    fn new(key: &[u8], row: &[Value]) -> Stored {
        thread_local! {
            static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        SCRATCH.with(|cell| {
            let mut enc = cell.borrow_mut();
            enc.clear();
            binlog_format::codec::encode_row_into(row, &mut enc);
            let mut len = [0u8; 5];
            let n = leb128(key.len(), &mut len);
            let mut out = Vec::with_capacity(n + key.len() + enc.len());
            out.extend_from_slice(&len[..n]);
            out.extend_from_slice(key);
            out.extend_from_slice(&enc);
            Stored(out.into_boxed_slice())
        })
    }

    #[inline]
    fn split(&self) -> (&[u8], &[u8]) {
        // Keys under 128 bytes (nearly all) have a one-byte length.
        if let Some(&b) = self.0.first() {
            if b < 0x80 {
                return self.0[1..].split_at(usize::from(b).min(self.0.len() - 1));
            }
        }
        let (mut len, mut shift, mut i) = (0usize, 0, 0);
        while let Some(&b) = self.0.get(i) {
            len |= usize::from(b & 0x7f) << shift;
            shift += 7;
            i += 1;
            if b & 0x80 == 0 {
                break;
            }
        }
        self.0[i..].split_at(len.min(self.0.len() - i))
    }

    fn view(&self) -> StoredRow<'_> {
        let (key, row) = self.split();
        StoredRow { key, row }
    }
}

fn leb128(mut n: usize, out: &mut [u8; 5]) -> usize {
    let mut i = 0;
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 || i == 4 {
            out[i] = b;
            return i + 1;
        }
        out[i] = b | 0x80;
        i += 1;
    }
}

impl PartialEq for Stored {
    fn eq(&self, other: &Self) -> bool {
        self.split().0 == other.split().0
    }
}

impl Eq for Stored {}

impl PartialOrd for Stored {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Stored {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.split().0.cmp(other.split().0)
    }
}

impl Borrow<[u8]> for Stored {
    fn borrow(&self) -> &[u8] {
        self.split().0
    }
}

/// A stored row as it sits in the table, without decoding it.
#[derive(Clone, Copy)]
pub struct StoredRow<'a> {
    key: &'a [u8],
    row: &'a [u8],
}

impl<'a> StoredRow<'a> {
    /// The primary key as order-preserving bytes (see [`super::keybytes`]): equal keys have
    /// equal bytes, and the bytes sort like the keys.
    pub fn key_bytes(&self) -> &'a [u8] {
        self.key
    }

    /// The row's binlog encoding (a `Vec<Value>`, docs/format.md).
    pub fn encoded(&self) -> &'a [u8] {
        self.row
    }

    /// The decoded row.
    pub fn row(&self) -> Row {
        decode_row(self.row)
    }
}

fn decode_row(bytes: &[u8]) -> Row {
    // The bytes were encoded from a row by `Stored::new` in this process, so they decode; a
    // failure here is memory corruption, not bad input.
    binlog_format::codec::decode_row(bytes).expect("a stored row decodes")
}

#[derive(Clone)]
pub struct Table {
    pub def: TableDef,
    rows: BTreeSet<Stored>,
    /// For each unique index of `def.indexes` (by position): unique value -> primary key.
    uniques: Vec<(usize, std::collections::BTreeMap<Key, Key>)>,
    /// On a TTL table with an index whose first column is the TTL column (the spec's
    /// `ttl_index`): (expiry in epoch microseconds, primary key) of every data row that can
    /// expire, so the purge reads only expired rows instead of scanning the table.
    ttl_index: Option<BTreeSet<(i64, Key)>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("def", &self.def)
            .field("rows", &self.rows.len())
            .finish_non_exhaustive()
    }
}

impl Table {
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
        Table {
            def,
            rows: BTreeSet::new(),
            uniques,
            ttl_index,
        }
    }

    /// Rebuilds the table under a new definition, keeping rows whose layout fits it.
    pub fn with_rows(def: TableDef, rows: impl IntoIterator<Item = Row>) -> Table {
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

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The stored row under a primary key.
    pub fn get(&self, key: &Key) -> Option<Row> {
        keybytes::with_key(key.0.iter(), |k| self.rows.get(k).map(|s| s.view().row()))
    }

    pub fn contains(&self, key: &Key) -> bool {
        keybytes::with_key(key.0.iter(), |k| self.rows.contains(k))
    }

    /// Every stored row with its key, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (Key, Row)> + '_ {
        self.rows.iter().map(|s| self.keyed(s.view()))
    }

    /// A stored row decoded, with its key.
    pub fn keyed(&self, stored: StoredRow<'_>) -> (Key, Row) {
        let row = stored.row();
        (self.key_of(&row), row)
    }

    /// Every stored row, encoded, in key order.
    pub fn stored(&self) -> impl Iterator<Item = StoredRow<'_>> + '_ {
        self.rows.iter().map(Stored::view)
    }

    /// The stored rows whose key bytes lie within the bounds, encoded, in key order.
    pub fn stored_range<'a>(
        &'a self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> impl Iterator<Item = StoredRow<'a>> + 'a {
        self.rows.range::<[u8], _>((lower, upper)).map(Stored::view)
    }

    /// The rows whose primary key starts with `prefix` (every row for an empty prefix), with
    /// their keys, in key order.
    pub fn prefix(&self, prefix: &[Value]) -> impl Iterator<Item = (Key, Row)> + '_ {
        let start = keybytes::encode(prefix);
        self.rows
            .range::<[u8], _>((Bound::Included(start.as_slice()), Bound::Unbounded))
            .map(Stored::view)
            .take_while(move |s| s.key.starts_with(&start))
            .map(|s| self.keyed(s))
    }

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

    /// Upserts a full row, keeping the unique indexes current.
    pub fn put(&mut self, row: &[Value]) {
        if !self.has_secondary() {
            // Nothing else follows the row: its key is needed only as bytes.
            let stored = keybytes::with_key(self.def.key_refs(row), |k| Stored::new(k, row));
            self.rows.replace(stored);
            return;
        }
        let key = self.key_of(row);
        let bytes = keybytes::of_key(&key);
        // The old row's index entries go first.
        self.remove_encoded(&bytes);
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
        self.rows.replace(Stored::new(&bytes, row));
    }

    /// Removes the row under a primary key; whether there was one.
    pub fn remove(&mut self, key: &Key) -> bool {
        self.remove_encoded(&keybytes::of_key(key))
    }

    /// Whether rows carry entries elsewhere (unique or TTL index) that follow them.
    fn has_secondary(&self) -> bool {
        !self.uniques.is_empty() || self.ttl_index.is_some()
    }

    fn remove_encoded(&mut self, bytes: &[u8]) -> bool {
        let Some(old) = self.rows.take(bytes) else {
            return false;
        };
        if !self.has_secondary() {
            return true;
        }
        let old = old.view().row();
        let key = self.key_of(&old);
        if let Some(e) = self.expiry(&old) {
            if let Some(ix) = self.ttl_index.as_mut() {
                ix.remove(&(e, key.clone()));
            }
        }
        for u in 0..self.uniques.len() {
            let idx = self.uniques[u].0;
            if let Some(v) = self.unique_value(idx, &old) {
                if self.uniques[u].1.get(&v) == Some(&key) {
                    self.uniques[u].1.remove(&v);
                }
            }
        }
        true
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
            // Without the index every row is read; only the expired ones build their key.
            None => self
                .rows
                .iter()
                .map(|s| s.view().row())
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key_bytes() -> impl Strategy<Value = Vec<u8>> {
        // Short keys from few byte values, so that keys that are prefixes of others, and
        // lengths on both sides of the one-byte length prefix, come up often.
        prop_oneof![
            proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(255u8)], 0..12),
            proptest::collection::vec(prop_oneof![Just(0u8), Just(255u8)], 120..140),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Stored rows order and match exactly as their key bytes do, and give back their key
        /// and row.
        #[test]
        fn stored_rows_order_like_their_key_bytes(a in key_bytes(), b in key_bytes()) {
            let (sa, sb) = (Stored::new(&a, &[Value::Int(1)]), Stored::new(&b, &[]));
            prop_assert_eq!(sa.cmp(&sb), a.cmp(&b));
            prop_assert_eq!(sa == sb, a == b);
            prop_assert_eq!(sa.view().key_bytes(), a.as_slice());
            prop_assert_eq!(sa.view().row(), vec![Value::Int(1)]);
            prop_assert_eq!(sb.view().key_bytes(), b.as_slice());
        }
    }
}
