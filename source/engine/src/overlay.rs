//! A transaction's view of its own changes: per table, each key it wrote or deleted and the
//! index in its events of the last change there. The row, and its key, are read from that
//! event: staging a row copies nothing and keeps no key, only the key's hash (computed once
//! per row, and shared with the row's lock). Hashed, not ordered: every row write looks its
//! key up here, and only a scan inside the transaction needs order. A table's first scan in a
//! transaction builds an ordered copy of its entries, kept up to date by later writes, so
//! that a statement scanning n prefixes of a table it writes costs n range reads, not n
//! passes over everything the transaction wrote; writes before any scan pay nothing for it.
//! Likewise a table's first unique check builds a map from each unique value its staged rows
//! hold to their events, so that a statement of n rows into a table with a unique index does
//! n lookups, not n passes.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, OnceLock, PoisonError};

use binlog_format::schema::{IndexKind, TableDef};
use binlog_format::{Event, Key, RowChange, RowEvent, Value};

pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A key's hash as the overlay and the row locks use it: keys that compare equal (5 and
/// unsigned 5 are one key) hash alike. The seed is chosen per process, so keys that collide
/// cannot be chosen in advance.
pub(crate) fn key_hash(key: &[Value]) -> u64 {
    key_hash_iter(key.len(), key)
}

/// `key_hash` of the key the `len` values make, in this order, without assembling it.
pub(crate) fn key_hash_iter<'v>(len: usize, key: impl IntoIterator<Item = &'v Value>) -> u64 {
    static SEED: OnceLock<foldhash::quality::RandomState> = OnceLock::new();
    let mut h = SEED.get_or_init(Default::default).build_hasher();
    Key::hash_iter(len, key, &mut h);
    h.finish()
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Overlay {
    tables: FastMap<u64, Staged>,
}

/// One table's part: event indexes by key hash.
#[derive(Debug, Default)]
struct Staged {
    /// The table's primary-key positions, to read a written row's key.
    pk: Vec<usize>,
    by_hash: FastMap<u64, At>,
    /// The same entries by key, once a scan asked for them (see the module's notes); `None`
    /// until then, and again after entries were moved back (an undo).
    /// (Behind a lock, not a cell: sessions are shared with the tasks that serve them.)
    ordered: Mutex<Option<BTreeMap<Key, usize>>>,
    /// The staged rows by unique value, once a unique check asked for them (see the module's
    /// notes); `None` until then, and again after an undo.
    uniques: Mutex<Option<StagedUniques>>,
}

/// A table's staged rows by their values in its unique indexes.
#[derive(Debug)]
struct StagedUniques {
    /// The unique indexes: their place among the table's indexes, and their columns.
    indexes: Vec<(usize, Vec<usize>)>,
    /// The events that wrote a row with a value (the index's place and the value's
    /// `key_hash`). An event replaced since at its key stays listed; a lookup leaves it out.
    by_value: FastMap<(usize, u64), Vec<usize>>,
}

/// A table definition's unique indexes: their places among its indexes, and their columns.
fn unique_indexes(def: &TableDef) -> impl Iterator<Item = (usize, &[usize])> + '_ {
    def.indexes
        .iter()
        .enumerate()
        .filter(|(_, i)| i.kind == IndexKind::Unique)
        .map(|(n, i)| (n, i.columns.as_slice()))
}

impl StagedUniques {
    fn new(def: &TableDef) -> StagedUniques {
        StagedUniques {
            indexes: unique_indexes(def)
                .map(|(n, columns)| (n, columns.to_vec()))
                .collect(),
            by_value: FastMap::default(),
        }
    }

    /// Whether the map was built for `def`'s unique indexes: another session's CREATE or
    /// DROP INDEX while this transaction is open changes them, and the map is built anew.
    fn built_for(&self, def: &TableDef) -> bool {
        self.indexes
            .iter()
            .map(|(n, c)| (*n, c.as_slice()))
            .eq(unique_indexes(def))
    }

    /// Lists the row the event at `at` writes (if it writes one) under each of its unique
    /// values; NULLs clash with nothing, so a value with a NULL is not listed.
    fn add(&mut self, ops: &[Event], at: usize) {
        let Some(row) = written_row(ops, at) else {
            return;
        };
        for (index, columns) in &self.indexes {
            let values = columns.iter().map(|&c| row.get(c).unwrap_or(&Value::Null));
            if values.clone().any(Value::is_null) {
                continue;
            }
            let hash = key_hash_iter(columns.len(), values);
            self.by_value.entry((*index, hash)).or_default().push(at);
        }
    }
}

/// The row the event at `at` leaves at its key: a write's row, an update's after image.
fn written_row(ops: &[Event], at: usize) -> Option<&[Value]> {
    match ops.get(at) {
        Some(Event::Row(RowEvent {
            change: RowChange::Write { row } | RowChange::Update { after: row, .. },
            ..
        })) => Some(row),
        _ => None,
    }
}

impl Clone for Staged {
    /// The ordered copy is not cloned: the clone builds its own when it is scanned.
    fn clone(&self) -> Staged {
        Staged {
            pk: self.pk.clone(),
            by_hash: self.by_hash.clone(),
            ordered: Mutex::new(None),
            uniques: Mutex::new(None),
        }
    }
}

/// The events at the keys of one hash: one key, but for a collision of 64-bit hashes.
#[derive(Debug, Clone)]
enum At {
    One(usize),
    Many(Vec<usize>),
}

impl At {
    fn indexes(&self) -> &[usize] {
        match self {
            At::One(at) => std::slice::from_ref(at),
            At::Many(ats) => ats,
        }
    }
}

/// Whether two sequences of key values are the same key (`Key`'s equality).
fn same_key<'a, 'b>(
    mut a: impl Iterator<Item = &'a Value>,
    mut b: impl Iterator<Item = &'b Value>,
) -> bool {
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x.total_cmp(y).is_eq() => {}
            _ => return false,
        }
    }
}

/// The key values of the row the event at `at` changes: a written row's key columns (`pk`
/// its primary-key positions), an update's or a delete's key; nothing for anything else.
fn key_at<'o>(
    pk: &'o [usize],
    ops: &'o [Event],
    at: usize,
) -> impl Iterator<Item = &'o Value> + 'o {
    let (row, key): (Option<&[Value]>, &[Value]) = match ops.get(at) {
        Some(Event::Row(RowEvent {
            change: RowChange::Write { row },
            ..
        })) => (Some(row), &[]),
        Some(Event::Row(RowEvent {
            change: RowChange::Update { key, .. } | RowChange::Delete { key },
            ..
        })) => (None, key),
        _ => (None, &[]),
    };
    pk.iter()
        .filter_map(move |&c| row.map(|r| r.get(c).unwrap_or(&Value::Null)))
        .chain(key.iter())
}

impl Overlay {
    /// The index of the last event at `key` (whose `key_hash` is `hash`) of `table`, when the
    /// transaction changed that row.
    pub(crate) fn get(&self, ops: &[Event], table: u64, key: &[Value], hash: u64) -> Option<usize> {
        let t = self.tables.get(&table)?;
        t.by_hash
            .get(&hash)?
            .indexes()
            .iter()
            .copied()
            .find(|&at| same_key(key_at(&t.pk, ops, at), key.iter()))
    }

    /// Whether the transaction changed the row at `key` of `table`.
    pub(crate) fn contains(&self, ops: &[Event], table: u64, key: &Key) -> bool {
        self.get(ops, table, &key.0, key_hash(&key.0)).is_some()
    }

    /// Records that the event at `at` (already in `ops`) changed the row at its key, whose
    /// `key_hash` is `hash`, of `table`, whose primary key is `pk`; returns the index it
    /// replaces.
    pub(crate) fn insert(
        &mut self,
        ops: &[Event],
        table: u64,
        pk: &[usize],
        hash: u64,
        at: usize,
    ) -> Option<usize> {
        let t = self.tables.entry(table).or_default();
        if t.pk.as_slice() != pk {
            t.pk = pk.to_vec();
        }
        if let Some(ordered) = t.ordered.get_mut().unwrap_or_else(PoisonError::into_inner) {
            let key = Key(key_at(&t.pk, ops, at).cloned().collect());
            // Replaced whole: the key as this event spells it, as `changed` gives it.
            ordered.remove(&key);
            ordered.insert(key, at);
        }
        if let Some(uniques) = t.uniques.get_mut().unwrap_or_else(PoisonError::into_inner) {
            uniques.add(ops, at);
        }
        let entry = match t.by_hash.entry(hash) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(At::One(at));
                return None;
            }
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        };
        let found = entry
            .indexes()
            .iter()
            .position(|&old| same_key(key_at(&t.pk, ops, old), key_at(&t.pk, ops, at)));
        match (entry, found) {
            (At::One(old), Some(_)) => Some(std::mem::replace(old, at)),
            (At::Many(ats), Some(i)) => Some(std::mem::replace(&mut ats[i], at)),
            (entry @ At::One(_), None) => {
                let first = entry.indexes()[0];
                *entry = At::Many(vec![first, at]);
                None
            }
            (At::Many(ats), None) => {
                ats.push(at);
                None
            }
        }
    }

    /// The keys `table`'s rows were changed at that start with `prefix`, in key order, and
    /// the index of the last event at each.
    pub(crate) fn changed_in(
        &self,
        ops: &[Event],
        table: u64,
        prefix: &[Value],
    ) -> Vec<(Key, usize)> {
        let Some(t) = self.tables.get(&table) else {
            return Vec::new();
        };
        if t.by_hash.is_empty() {
            return Vec::new();
        }
        let mut ordered = t.ordered.lock().unwrap_or_else(PoisonError::into_inner);
        let ordered = ordered.get_or_insert_with(|| {
            t.by_hash
                .values()
                .flat_map(At::indexes)
                .map(|&at| (Key(key_at(&t.pk, ops, at).cloned().collect()), at))
                .collect()
        });
        // A prefix sorts before every longer key that starts with it.
        let from = Key(prefix.to_vec());
        ordered
            .range(from..)
            .take_while(|(k, _)| {
                k.0.len() >= prefix.len()
                    && k.0.iter().zip(prefix).all(|(a, b)| a.total_cmp(b).is_eq())
            })
            .filter(|(_, &at)| matches!(ops.get(at), Some(Event::Row(_))))
            .map(|(k, &at)| (k.clone(), at))
            .collect()
    }

    /// The rows of `table` (defined by `def`) this transaction wrote, as they stand now, whose
    /// value in unique index `index` hashes as `value` does: each row's key and event. The
    /// caller compares the values (a hash names candidates only).
    pub(crate) fn staged_with_unique(
        &self,
        ops: &[Event],
        def: &TableDef,
        index: usize,
        value: &[Value],
    ) -> Vec<(Key, usize)> {
        let Some(t) = self.tables.get(&def.id) else {
            return Vec::new();
        };
        if t.by_hash.is_empty() {
            return Vec::new();
        }
        let mut guard = t.uniques.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.as_ref().is_some_and(|u| !u.built_for(def)) {
            *guard = None;
        }
        let uniques = guard.get_or_insert_with(|| {
            let mut u = StagedUniques::new(def);
            for &at in t.by_hash.values().flat_map(At::indexes) {
                u.add(ops, at);
            }
            u
        });
        let hash = key_hash_iter(value.len(), value);
        let Some(events) = uniques.by_value.get_mut(&(index, hash)) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        // Only the last event at its key counts: a later one replaced the row. The replaced
        // ones go from the list, so a row written many times is not walked many times.
        events.retain(|&at| {
            let key: Vec<Value> = key_at(&t.pk, ops, at).cloned().collect();
            let last = self.get(ops, def.id, &key, key_hash(&key)) == Some(at);
            if last {
                found.push((Key(key), at));
            }
            last
        });
        found
    }

    /// Keeps the entries for which `f` returns true, after letting it move their index.
    pub(crate) fn retain(&mut self, mut f: impl FnMut(&mut usize) -> bool) {
        for t in self.tables.values_mut() {
            // Rebuilt by the next scan or check that needs them.
            *t.ordered.get_mut().unwrap_or_else(PoisonError::into_inner) = None;
            *t.uniques.get_mut().unwrap_or_else(PoisonError::into_inner) = None;
            t.by_hash.retain(|_, entry| match entry {
                At::One(at) => f(at),
                At::Many(ats) => {
                    ats.retain_mut(|at| f(at));
                    !ats.is_empty()
                }
            });
        }
    }

    /// Empties it for the next transaction, keeping the room of tables with up to `max`
    /// keys.
    pub(crate) fn reset(&mut self, max: usize) {
        self.tables.retain(|_, t| {
            t.by_hash.clear();
            *t.ordered.get_mut().unwrap_or_else(PoisonError::into_inner) = None;
            *t.uniques.get_mut().unwrap_or_else(PoisonError::into_inner) = None;
            t.by_hash.capacity() <= max
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::Cause;

    fn write(row: Vec<Value>) -> Event {
        Event::Row(RowEvent {
            table_id: 1,
            change: RowChange::Write { row },
            cause: Cause::Insert,
        })
    }

    fn delete(key: Vec<Value>) -> Event {
        Event::Row(RowEvent {
            table_id: 1,
            change: RowChange::Delete { key },
            cause: Cause::Delete,
        })
    }

    /// Keys are told apart by their values even when their hashes collide, equal keys of
    /// different integer types are one key, and undo walks entries back.
    #[test]
    fn finds_the_last_event_at_each_key_even_when_hashes_collide() {
        let pk = [0usize, 1];
        let ops = vec![
            write(vec![Value::Int(1), Value::Int(1), Value::Text("a".into())]),
            write(vec![Value::Int(1), Value::Int(2), Value::Text("b".into())]),
            delete(vec![Value::UInt(1), Value::Int(1)]),
        ];
        let k11 = [Value::Int(1), Value::Int(1)];
        let k12 = [Value::Int(1), Value::Int(2)];
        let mut o = Overlay::default();
        // One hash for both keys: a collision.
        assert_eq!(o.insert(&ops, 1, &pk, 7, 0), None);
        assert_eq!(o.insert(&ops, 1, &pk, 7, 1), None);
        assert_eq!(o.get(&ops, 1, &k11, 7), Some(0));
        assert_eq!(o.get(&ops, 1, &k12, 7), Some(1));
        assert_eq!(o.get(&ops, 2, &k12, 7), None, "another table");
        // The delete's key is unsigned 1: the same key as Int 1.
        let k11u = [Value::UInt(1), Value::Int(1)];
        assert_eq!(o.insert(&ops, 1, &pk, 7, 2), Some(0));
        assert_eq!(o.get(&ops, 1, &k11, 7), Some(2));
        assert_eq!(
            o.changed_in(&ops, 1, &[]),
            vec![(Key(k11u.to_vec()), 2), (Key(k12.to_vec()), 1)]
        );
        // Undo of event 2: back to event 0 at its key.
        o.retain(|at| {
            if *at == 2 {
                *at = 0;
            }
            true
        });
        assert_eq!(o.get(&ops, 1, &k11, 7), Some(0));
        o.retain(|at| *at != 1);
        assert_eq!(o.get(&ops, 1, &k12, 7), None);
        assert_eq!(o.get(&ops, 1, &k11, 7), Some(0));
        o.reset(16);
        assert_eq!(o.get(&ops, 1, &k11, 7), None);
    }

    /// A prefix's changes in key order, from the ordered copy built by the first scan and
    /// kept up to date by later writes, and rebuilt after an undo.
    #[test]
    fn changes_under_a_prefix_come_in_key_order() {
        let pk = [0usize, 1];
        let row = |a: i64, b: i64| write(vec![Value::Int(a), Value::Int(b), Value::Null]);
        let mut ops = vec![row(2, 1), row(1, 2), row(1, 1), row(3, 1)];
        let mut o = Overlay::default();
        for at in 0..ops.len() {
            let key: Vec<Value> = key_at(&pk, &ops, at).cloned().collect();
            o.insert(&ops, 1, &pk, key_hash(&key), at);
        }
        let keys = |o: &Overlay, ops: &[Event], prefix: &[Value]| -> Vec<(Vec<i64>, usize)> {
            o.changed_in(ops, 1, prefix)
                .into_iter()
                .map(|(k, at)| {
                    let k = k.0.iter().map(|v| match v {
                        Value::Int(i) => *i,
                        Value::UInt(u) => *u as i64,
                        _ => -1,
                    });
                    (k.collect(), at)
                })
                .collect()
        };
        assert_eq!(
            keys(&o, &ops, &[Value::Int(1)]),
            [(vec![1, 1], 2), (vec![1, 2], 1)]
        );
        assert_eq!(keys(&o, &ops, &[]).len(), 4);
        assert!(keys(&o, &ops, &[Value::Int(4)]).is_empty());
        // Written after the first scan: a delete of (1, 1) (as unsigned 1) and a new (1, 0).
        ops.push(delete(vec![Value::UInt(1), Value::Int(1)]));
        ops.push(row(1, 0));
        for at in 4..6 {
            let key: Vec<Value> = key_at(&pk, &ops, at).cloned().collect();
            o.insert(&ops, 1, &pk, key_hash(&key), at);
        }
        assert_eq!(
            keys(&o, &ops, &[Value::Int(1)]),
            [(vec![1, 0], 5), (vec![1, 1], 4), (vec![1, 2], 1)]
        );
        // Undo of the last two events: the entries go back and the copy is rebuilt.
        o.retain(|at| match *at {
            4 => {
                *at = 2;
                true
            }
            5 => false,
            _ => true,
        });
        ops.truncate(4);
        assert_eq!(
            keys(&o, &ops, &[Value::Int(1)]),
            [(vec![1, 1], 2), (vec![1, 2], 1)]
        );
    }

    #[test]
    fn equal_keys_hash_alike() {
        assert_eq!(
            key_hash(&[Value::Int(5), Value::Text("x".into())]),
            key_hash(&[Value::UInt(5), Value::Text("x".into())])
        );
        assert_ne!(key_hash(&[Value::Int(5)]), key_hash(&[Value::Int(6)]));
    }
}
