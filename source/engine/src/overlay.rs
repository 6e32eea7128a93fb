//! A transaction's view of its own changes: per table, each key it wrote or deleted and the
//! index in its events of the last change there. The row, and its key, are read from that
//! event: staging a row copies nothing and keeps no key, only the key's hash (computed once
//! per row, and shared with the row's lock). Hashed, not ordered: every row write looks its
//! key up here, and only a scan inside the transaction needs order (it sorts what it takes).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use binlog_format::{Event, Key, RowChange, RowEvent, Value};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A key's hash as the overlay and the row locks use it: keys that compare equal (5 and
/// unsigned 5 are one key) hash alike. The seed is chosen per process, so keys that collide
/// cannot be chosen in advance.
pub(crate) fn key_hash(key: &[Value]) -> u64 {
    static SEED: OnceLock<foldhash::quality::RandomState> = OnceLock::new();
    let mut h = SEED.get_or_init(Default::default).build_hasher();
    Key::hash_values(key, &mut h);
    h.finish()
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Overlay {
    tables: FastMap<u64, Staged>,
}

/// One table's part: event indexes by key hash.
#[derive(Debug, Default, Clone)]
struct Staged {
    /// The table's primary-key positions, to read a written row's key.
    pk: Vec<usize>,
    by_hash: FastMap<u64, At>,
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

    /// The keys `table`'s rows were changed at and the index of the last event at each.
    pub(crate) fn changed(&self, ops: &[Event], table: u64) -> Vec<(Key, usize)> {
        let Some(t) = self.tables.get(&table) else {
            return Vec::new();
        };
        t.by_hash
            .values()
            .flat_map(At::indexes)
            .filter(|&&at| matches!(ops.get(at), Some(Event::Row(_))))
            .map(|&at| (Key(key_at(&t.pk, ops, at).cloned().collect()), at))
            .collect()
    }

    /// Keeps the entries for which `f` returns true, after letting it move their index.
    pub(crate) fn retain(&mut self, mut f: impl FnMut(&mut usize) -> bool) {
        for t in self.tables.values_mut() {
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
        let mut changed = o.changed(&ops, 1);
        changed.sort_by_key(|(_, at)| *at);
        assert_eq!(
            changed,
            vec![(Key(k12.to_vec()), 1), (Key(k11u.to_vec()), 2)]
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

    #[test]
    fn equal_keys_hash_alike() {
        assert_eq!(
            key_hash(&[Value::Int(5), Value::Text("x".into())]),
            key_hash(&[Value::UInt(5), Value::Text("x".into())])
        );
        assert_ne!(key_hash(&[Value::Int(5)]), key_hash(&[Value::Int(6)]));
    }
}
