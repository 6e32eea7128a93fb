//! Where a table's rows sit in memory, in key order.
//!
//! Each row is one allocation holding its primary key as order-preserving bytes
//! ([`super::keybytes`]) and the row in its binlog encoding. Plain tables keep their rows in one
//! B-tree ordered by the key bytes. Ring tables, which hold millions of rows in small rings,
//! keep a hash map of rings by prefix (with the prefixes in a B-tree for order), and each ring
//! a vector indexed by slot: finding a slot is a hash lookup and an index, not a search among
//! every row. Slots a ring never assigns (negative, past the ring's size, not an integer: only
//! a raw write can make them) sit in the ring's own small B-tree, so every key still has its
//! place.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use binlog_format::schema::TableDef;
use binlog_format::Value;

use super::keybytes;

/// One stored row: the key's length (LEB128), the key's bytes, then the row's encoding.
/// Ordered, compared and looked up by the key bytes alone.
#[derive(Clone)]
pub(super) struct Stored(Box<[u8]>);

impl Stored {
    fn new(key: &[u8], row: &[Value]) -> Stored {
        thread_local! {
            static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        SCRATCH.with(|cell| {
            let mut enc = cell.borrow_mut();
            enc.clear();
            binlog_format::codec::encode_row_into(row, &mut enc);
            Stored::from_encoded(key, &enc)
        })
    }

    /// A stored row from its key bytes and its row's encoding (`encode_row_into`'s bytes).
    fn from_encoded(key: &[u8], enc: &[u8]) -> Stored {
        let mut len = [0u8; 5];
        let n = leb128(key.len(), &mut len);
        let mut out = Vec::with_capacity(n + key.len() + enc.len());
        out.extend_from_slice(&len[..n]);
        out.extend_from_slice(key);
        out.extend_from_slice(enc);
        Stored(out.into_boxed_slice())
    }

    /// The stored form of a row under `key`: `encoded` when the caller has the row's
    /// encoding already (from the binlog frame it just wrote), else encoded here.
    fn of(key: &[u8], row: &[Value], encoded: Option<&[u8]>) -> Stored {
        match encoded {
            Some(enc) => Stored::from_encoded(key, enc),
            None => Stored::new(key, row),
        }
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

    pub(super) fn view(&self) -> StoredRow<'_> {
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
#[derive(Debug, Clone, Copy)]
pub struct StoredRow<'a> {
    key: &'a [u8],
    row: &'a [u8],
}

impl<'a> StoredRow<'a> {
    /// The primary key as order-preserving bytes (see `keybytes`): equal keys have
    /// equal bytes, and the bytes sort like the keys.
    pub fn key_bytes(&self) -> &'a [u8] {
        self.key
    }

    /// The row's binlog encoding (a `Vec<Value>`, docs/format.md).
    pub fn encoded(&self) -> &'a [u8] {
        self.row
    }

    /// Column `col` of the row, decoding only what comes before it (`None` past the row's
    /// end).
    pub fn value(&self, col: usize) -> Option<Value> {
        // Encoded here, as for `row`.
        binlog_format::codec::decode_row_value(self.row, col).expect("a stored row decodes")
    }

    /// The decoded row.
    pub fn row(&self) -> Vec<Value> {
        // The bytes were encoded from a row by `Stored::new` in this process, so they decode;
        // a failure here is memory corruption, not bad input.
        binlog_format::codec::decode_row(self.row).expect("a stored row decodes")
    }
}

/// One ring: slot n (0 is the meta row) at index n.
#[derive(Clone, Default)]
pub(super) struct Ring {
    slots: Vec<Option<Stored>>,
    /// Rows at slots that are not an index of `slots` (see the module's comment). Boxed:
    /// nearly every ring has none, and a pointer costs a third of an empty set.
    #[allow(clippy::box_collection)]
    odd: Option<Box<BTreeSet<Stored>>>,
}

/// The key bytes of slot 0 (`Int(0)` and `UInt(0)` encode alike): odd slots that sort before
/// it (negative ones) come before `slots` in key order, the others after.
const SLOT_ZERO: [u8; 2] = [1, 0x80];

impl Ring {
    fn iter(&self, prefix_len: usize) -> impl Iterator<Item = &Stored> + '_ {
        let odd = self.odd.iter().flat_map(|o| o.iter());
        let before = move |s: &&Stored| s.split().0.get(prefix_len..) < Some(&SLOT_ZERO[..]);
        odd.clone()
            .filter(before)
            .chain(self.slots.iter().flatten())
            .chain(odd.filter(move |s| !before(s)))
    }

    fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none) && self.odd.as_ref().is_none_or(|o| o.is_empty())
    }
}

/// The slot a ring files a row under: its index in `slots`, or `None` for an odd slot.
fn slot_index(slot: Option<&Value>, size: u32) -> Option<usize> {
    let n = match slot? {
        Value::Int(i) => u64::try_from(*i).ok()?,
        Value::UInt(u) => *u,
        _ => return None,
    };
    (n <= u64::from(size)).then_some(n as usize)
}

#[derive(Clone)]
pub(super) enum Store {
    Plain(BTreeSet<Stored>),
    Rings(Rings),
}

/// A ring table's rows: each prefix's ring, found by the prefix's key bytes.
#[derive(Clone)]
pub(super) struct Rings {
    /// The rings' size: slots 0 to `size` are indexes of `Ring::slots`.
    size: u32,
    rings: HashMap<Box<[u8]>, Ring, foldhash::fast::RandomState>,
    /// The prefixes of `rings`, in order.
    order: BTreeSet<Box<[u8]>>,
    len: usize,
}

type Iter<'a> = Box<dyn Iterator<Item = StoredRow<'a>> + 'a>;

impl Rings {
    // `k` is a whole key's bytes, `k[..at]` its prefix's and `slot` its last value (see
    // `keybytes::with_key_split`).

    fn get(&self, k: &[u8], at: usize, slot: Option<&Value>) -> Option<&Stored> {
        let ring = self.rings.get(&k[..at])?;
        match slot_index(slot, self.size) {
            Some(i) => ring.slots.get(i)?.as_ref(),
            None => ring.odd.as_ref()?.get(k),
        }
    }

    fn put(&mut self, k: &[u8], at: usize, slot: Option<&Value>, stored: Stored) -> Option<Stored> {
        let ring = match self.rings.get_mut(&k[..at]) {
            Some(r) => r,
            None => {
                self.order.insert(k[..at].into());
                self.rings.entry(k[..at].into()).or_default()
            }
        };
        let old = match slot_index(slot, self.size) {
            Some(i) => {
                if i >= ring.slots.len() {
                    // Rings fill slot after slot. Room for 16 first, then for the whole
                    // ring: two allocations, and little unused room in the many rings that
                    // hold a few rows.
                    let whole = self.size as usize + 1;
                    let want = if i < 16 { 16 } else { whole }.max(i + 1);
                    ring.slots.reserve_exact(want - ring.slots.len());
                    ring.slots.resize(i + 1, None);
                }
                ring.slots[i].replace(stored)
            }
            None => ring.odd.get_or_insert_default().replace(stored),
        };
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    fn remove(&mut self, k: &[u8], at: usize, slot: Option<&Value>) -> Option<Stored> {
        let ring = self.rings.get_mut(&k[..at])?;
        let old = match slot_index(slot, self.size) {
            Some(i) => ring.slots.get_mut(i)?.take(),
            None => ring.odd.as_mut()?.take(k),
        };
        if old.is_some() {
            self.len -= 1;
            // A ring emptied by a prefix delete goes, so that deleted prefixes do not pile
            // up. (A ring with its meta row is not empty: no need to look.)
            if ring.slots.first().is_none_or(Option::is_none) && ring.is_empty() {
                self.rings.remove(&k[..at]);
                self.order.remove(&k[..at]);
            }
        }
        old
    }

    /// The rows of the rings whose prefixes lie in `prefixes`, in key order.
    fn rows<'a>(
        &'a self,
        prefixes: impl Iterator<Item = &'a Box<[u8]>> + 'a,
    ) -> impl Iterator<Item = StoredRow<'a>> + 'a {
        prefixes
            .filter_map(|p| Some((p, self.rings.get(p)?)))
            .flat_map(|(p, r)| r.iter(p.len()))
            .map(Stored::view)
    }

    fn range<'a>(&'a self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Iter<'a> {
        // Prefix encodings are self-delimiting, so only the ring of the greatest prefix at
        // or below the lower bound can hold keys on both sides of it.
        let first: Bound<&[u8]> = match lower {
            Bound::Included(b) | Bound::Excluded(b) => self
                .order
                .range::<[u8], _>((Bound::Unbounded, Bound::Included(b)))
                .next_back()
                .map_or(Bound::Unbounded, |p| Bound::Included(&p[..])),
            Bound::Unbounded => Bound::Unbounded,
        };
        let lower = lower.map(<[u8]>::to_vec);
        let upper = upper.map(<[u8]>::to_vec);
        let prefixes = self.order.range::<[u8], _>((first, Bound::Unbounded));
        Box::new(
            self.rows(prefixes)
                .skip_while(move |s| match &lower {
                    Bound::Included(b) => s.key < b.as_slice(),
                    Bound::Excluded(b) => s.key <= b.as_slice(),
                    Bound::Unbounded => false,
                })
                .take_while(move |s| match &upper {
                    Bound::Included(b) => s.key <= b.as_slice(),
                    Bound::Excluded(b) => s.key < b.as_slice(),
                    Bound::Unbounded => true,
                }),
        )
    }
}

impl Store {
    /// Rings for a ring table whose slot is the last key column (as every ring's is).
    pub(super) fn new(def: &TableDef) -> Store {
        match &def.ring {
            Some(r) if def.primary_key.last() == Some(&r.slot_column) => Store::Rings(Rings {
                size: r.size,
                rings: HashMap::default(),
                order: BTreeSet::new(),
                len: 0,
            }),
            _ => Store::Plain(BTreeSet::new()),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Store::Plain(rows) => rows.len(),
            Store::Rings(r) => r.len,
        }
    }

    /// How many rings hold a meta row (slot 0), without reading any row; `None` for a
    /// plain store.
    pub(super) fn meta_rows(&self) -> Option<usize> {
        match self {
            Store::Plain(_) => None,
            Store::Rings(r) => Some(
                r.rings
                    .values()
                    .filter(|g| matches!(g.slots.first(), Some(Some(_))))
                    .count(),
            ),
        }
    }

    /// The row under a key given as its values.
    pub(super) fn get<'v>(&self, key: impl Iterator<Item = &'v Value>) -> Option<StoredRow<'_>> {
        match self {
            Store::Plain(rows) => keybytes::with_key(key, |k| rows.get(k).map(Stored::view)),
            Store::Rings(r) => {
                keybytes::with_key_split(key, |k, at, slot| r.get(k, at, slot).map(Stored::view))
            }
        }
    }

    /// Stores a row under its key (given as its values), returning the row it replaces.
    /// `encoded`, when given, is the row's encoding (`encode_row_into`'s bytes), copied
    /// instead of encoding the row again.
    pub(super) fn put<'v>(
        &mut self,
        key: impl Iterator<Item = &'v Value>,
        row: &[Value],
        encoded: Option<&[u8]>,
    ) -> Option<Stored> {
        match self {
            Store::Plain(rows) => {
                keybytes::with_key(key, |k| rows.replace(Stored::of(k, row, encoded)))
            }
            Store::Rings(r) => keybytes::with_key_split(key, |k, at, slot| {
                r.put(k, at, slot, Stored::of(k, row, encoded))
            }),
        }
    }

    /// Removes the row under a key given as its values, returning it.
    pub(super) fn remove<'v>(&mut self, key: impl Iterator<Item = &'v Value>) -> Option<Stored> {
        match self {
            Store::Plain(rows) => keybytes::with_key(key, |k| rows.take(k)),
            Store::Rings(r) => keybytes::with_key_split(key, |k, at, slot| r.remove(k, at, slot)),
        }
    }

    /// Every row, in key order.
    pub(super) fn iter(&self) -> Iter<'_> {
        match self {
            Store::Plain(rows) => Box::new(rows.iter().map(Stored::view)),
            Store::Rings(r) => Box::new(r.rows(r.order.iter())),
        }
    }

    /// The rows whose key bytes lie within the bounds, in key order.
    pub(super) fn range<'a>(&'a self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Iter<'a> {
        if let (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) =
            (lower, upper)
        {
            // Nothing lies between crossed bounds (a B-tree's own range would panic).
            let both_included = matches!((lower, upper), (Bound::Included(_), Bound::Included(_)));
            if a > b || (a == b && !both_included) {
                return Box::new(std::iter::empty());
            }
        }
        match self {
            Store::Plain(rows) => Box::new(rows.range::<[u8], _>((lower, upper)).map(Stored::view)),
            Store::Rings(r) => r.range(lower, upper),
        }
    }

    pub(super) fn clear(&mut self) {
        match self {
            Store::Plain(rows) => rows.clear(),
            Store::Rings(r) => {
                r.rings.clear();
                r.order.clear();
                r.len = 0;
            }
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

    /// A ring of 4 keyed by (p, slot). Only the key's layout matters here.
    fn ring_def() -> TableDef {
        use binlog_format::schema::{ColumnDef, ColumnDefault, ColumnType, RingOptions};
        let col = |name: &str| ColumnDef {
            name: name.into(),
            ty: ColumnType::VarBinary { len: 64 },
            nullable: true,
            default: ColumnDefault::None,
            on_update_now: false,
            auto_increment: false,
            comment: String::new(),
        };
        TableDef {
            id: 1,
            database: "test".into(),
            name: "r".into(),
            columns: vec![col("p"), col("slot"), col("meta")],
            primary_key: vec![0, 1],
            indexes: vec![],
            ring: Some(RingOptions {
                size: 4,
                slot_column: 1,
                meta_column: 2,
            }),
            ttl: None,
            partitioning: None,
            comment: None,
        }
    }

    /// Keys of a ring table of size 4: a text prefix (empty, "a", "ab": one is a prefix of
    /// the next as text), then a slot, in range or odd.
    fn ring_key() -> impl Strategy<Value = Vec<Value>> {
        (
            prop_oneof![Just(""), Just("a"), Just("ab"), Just("b")],
            prop_oneof![
                (0i64..=4).prop_map(Value::Int),
                (0u64..=4).prop_map(Value::UInt),
                Just(Value::Int(-1)),
                Just(Value::Int(5)),
                Just(Value::Int(i64::MAX)),
                Just(Value::UInt(u64::MAX)),
                Just(Value::Text("x".into())),
            ],
        )
            .prop_map(|(p, s)| vec![Value::Text(p.into()), s])
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(Vec<Value>, i64),
        Remove(Vec<Value>),
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Rings hold, find, order and range exactly as one B-tree of every row does.
        #[test]
        fn rings_behave_like_one_btree(
            ops in proptest::collection::vec(
                prop_oneof![
                    (ring_key(), any::<i64>()).prop_map(|(k, v)| Op::Put(k, v)),
                    ring_key().prop_map(Op::Remove),
                ],
                0..60,
            ),
            bounds in (ring_key(), ring_key(), 0..3u8, 0..3u8),
        ) {
            let def = ring_def();
            let mut rings = Store::new(&def);
            let mut plain = Store::Plain(BTreeSet::new());
            prop_assert!(matches!(rings, Store::Rings(_)), "a ring table gets rings");
            for op in &ops {
                match op {
                    Op::Put(k, v) => {
                        let row = vec![k[0].clone(), k[1].clone(), Value::Int(*v)];
                        // The rings copy the row's encoding; the B-tree encodes it.
                        let mut enc = Vec::new();
                        binlog_format::codec::encode_row_into(&row, &mut enc);
                        let a = rings.put(k.iter(), &row, Some(&enc)).map(|s| s.view().row());
                        let b = plain.put(k.iter(), &row, None).map(|s| s.view().row());
                        prop_assert_eq!(a, b);
                    }
                    Op::Remove(k) => {
                        let a = rings.remove(k.iter()).map(|s| s.view().row());
                        let b = plain.remove(k.iter()).map(|s| s.view().row());
                        prop_assert_eq!(a, b);
                    }
                }
                prop_assert_eq!(rings.len(), plain.len());
            }
            let all = |s: Iter<'_>| s.map(|r| (r.key_bytes().to_vec(), r.row())).collect::<Vec<_>>();
            prop_assert_eq!(all(rings.iter()), all(plain.iter()));
            let slot_zero = plain
                .iter()
                .filter(|r| def.is_meta_key(&r.row()[..2]))
                .count();
            prop_assert_eq!(rings.meta_rows(), Some(slot_zero));
            for op in &ops {
                let (Op::Put(k, _) | Op::Remove(k)) = op;
                let a = rings.get(k.iter()).map(|r| r.row());
                let b = plain.get(k.iter()).map(|r| r.row());
                prop_assert_eq!(a, b);
            }
            let (lo, hi) = (keybytes::encode(&bounds.0), keybytes::encode(&bounds.1));
            // Also bounds that are a prefix alone.
            let lo_prefix = keybytes::encode(&bounds.0[..1]);
            let bound = |b: &[u8], kind: u8| match kind {
                0 => Bound::Included(b.to_vec()),
                1 => Bound::Excluded(b.to_vec()),
                _ => Bound::Unbounded,
            };
            for lower in [bound(&lo, bounds.2), bound(&lo_prefix, bounds.2)] {
                let upper = bound(&hi, bounds.3);
                let (l, u) = (lower.as_ref().map(Vec::as_slice), upper.as_ref().map(Vec::as_slice));
                prop_assert_eq!(all(rings.range(l, u)), all(plain.range(l, u)));
            }
        }
    }
}
