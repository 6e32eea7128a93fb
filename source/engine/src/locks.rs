//! Row locks held until a transaction ends. A ring insert locks its prefix's meta row (so
//! inserts into one prefix run one after another, different prefixes in parallel) and the slot
//! it writes; UPDATE and the TTL purge lock the rows they change; a prefix DELETE locks the meta
//! row before the data rows. A wait that would close a cycle of waiting transactions fails at
//! once with MySQL's deadlock error 1213 (the session then rolls its transaction back, which
//! frees the others); any other wait that outlasts the timeout fails with the retriable error
//! 1205 instead of hanging.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use binlog_format::Key;

use crate::error::{Error, Result};

/// A row lock's name: the table and a 64-bit hash of the row's primary key, with a seed
/// chosen per process. Taking a row lock then allocates nothing and hashes 16 bytes. Two keys
/// that hash alike (about once in 10^19 pairs, and not choosable without the seed) would share
/// a lock: at worst a wait or a deadlock error that was not needed, both retriable, never a
/// conflict missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct LockKey {
    table: u64,
    key_hash: u64,
}

impl LockKey {
    pub(crate) fn new(table: u64, key: &Key) -> LockKey {
        LockKey::from_hash(table, super::overlay::key_hash(&key.0))
    }

    /// The lock of the row whose key's `key_hash` is `hash` (computed once by a caller that
    /// also needs it for its overlay).
    pub(crate) fn from_hash(table: u64, hash: u64) -> LockKey {
        LockKey {
            table,
            key_hash: hash,
        }
    }
}

/// Every row write takes and releases a lock, so hashing is on the hot path: foldhash is a
/// few times faster than the standard SipHash, and its random seed (per map) still makes
/// keys chosen to collide hard to find (it is minimally DoS-resistant, not cryptographic).
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Debug, Default)]
struct Owners {
    held: Map<LockKey, u64>,
    /// The lock each waiting transaction is blocked on. Keyed by lock rather than by holder so
    /// the wait-for graph always reflects who holds that lock now.
    waiting_on: Map<u64, LockKey>,
    /// Sessions waiting for any lock: releases only wake sleepers when there are some, so
    /// the common case (nobody waiting) costs no wake-ups.
    waiters: usize,
}

impl Owners {
    /// Whether `txn` waiting for `holder` would close a cycle: follows what `holder` waits
    /// for, and what that lock's holder waits for, back to `txn`.
    fn closes_cycle(&self, txn: u64, holder: u64) -> bool {
        let mut cur = holder;
        // Each step visits a different waiting transaction unless there is a cycle not
        // through `txn` (its members will detect it themselves), so this bounds the walk.
        for _ in 0..=self.waiting_on.len() {
            if cur == txn {
                return true;
            }
            match self.waiting_on.get(&cur).and_then(|k| self.held.get(k)) {
                Some(&next) => cur = next,
                None => return false,
            }
        }
        false
    }
}

#[derive(Debug, Default)]
pub(crate) struct LockTable {
    owners: Mutex<Owners>,
    released: Condvar,
}

impl LockTable {
    /// Locks `key` for `txn`, waiting up to `timeout`. Returns true when newly taken (false
    /// when `txn` already held it).
    pub(crate) fn acquire(&self, txn: u64, key: LockKey, timeout: Duration) -> Result<bool> {
        // Only a wait needs the clock (most locks are free).
        let mut deadline = None;
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let taken = match owners.held.get(&key) {
                None => true,
                Some(&o) if o == txn => false,
                Some(&holder) => {
                    if owners.closes_cycle(txn, holder) {
                        owners.waiting_on.remove(&txn);
                        return Err(Error::deadlock());
                    }
                    let now = Instant::now();
                    let deadline = *deadline.get_or_insert(now + timeout);
                    if now >= deadline {
                        owners.waiting_on.remove(&txn);
                        return Err(Error::lock_wait_timeout());
                    }
                    owners.waiting_on.insert(txn, key);
                    owners.waiters += 1;
                    owners = self
                        .released
                        .wait_timeout(owners, deadline - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    owners.waiters -= 1;
                    continue;
                }
            };
            if taken {
                owners.held.insert(key, txn);
            }
            if deadline.is_some() {
                owners.waiting_on.remove(&txn);
            }
            return Ok(taken);
        }
    }

    /// Locks `key` only if nobody holds it (the purge skips locked rows).
    pub(crate) fn try_acquire(&self, txn: u64, key: LockKey) -> bool {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        match owners.held.get(&key) {
            None => {
                owners.held.insert(key, txn);
                true
            }
            Some(&o) => o == txn,
        }
    }

    pub(crate) fn release_all(&self, txn: u64, keys: impl IntoIterator<Item = LockKey>) {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        for k in keys {
            if owners.held.get(&k) == Some(&txn) {
                owners.held.remove(&k);
            }
        }
        let wake = owners.waiters > 0;
        drop(owners);
        if wake {
            self.released.notify_all();
        }
    }

    /// Whether a transaction other than `me` holds a row lock of `table` (LOCK TABLES waits
    /// until none does: each is a transaction that wrote it and has not ended). A walk over
    /// every lock held, for a statement that is rare.
    pub(crate) fn held_by_others(&self, table: u64, me: Option<u64>) -> bool {
        let owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners
            .held
            .iter()
            .any(|(k, &txn)| k.table == table && Some(txn) != me)
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .held
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::Value;

    #[test]
    fn a_held_lock_times_out_with_a_retriable_error() {
        let t = LockTable::default();
        let k = LockKey::new(1, &Key(vec![Value::Int(1)]));
        assert!(t.acquire(1, k, Duration::from_millis(10)).expect("free"));
        assert!(!t
            .acquire(1, k, Duration::from_millis(10))
            .expect("reentrant"));
        let e = t
            .acquire(2, k, Duration::from_millis(20))
            .expect_err("held");
        assert!(e.is_retriable());
        t.release_all(1, [k]);
        assert!(t
            .acquire(2, k, Duration::from_millis(10))
            .expect("released"));
    }

    #[test]
    fn a_wait_that_closes_a_cycle_fails_at_once_with_1213() {
        use std::sync::Arc;
        let t = Arc::new(LockTable::default());
        let a = LockKey::new(1, &Key(vec![Value::Int(1)]));
        let b = LockKey::new(1, &Key(vec![Value::Int(2)]));
        assert!(t.acquire(1, a, Duration::ZERO).expect("a"));
        assert!(t.acquire(2, b, Duration::ZERO).expect("b"));
        // Transaction 1 waits for b (held by 2) on another thread...
        let waiter = {
            let t = t.clone();
            std::thread::spawn(move || t.acquire(1, b, Duration::from_secs(60)))
        };
        while t
            .owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .waiting_on
            .is_empty()
        {
            std::thread::yield_now();
        }
        // ...so transaction 2 waiting for a would wait forever: it is refused straight away,
        // long before its own 60 s timeout.
        let e = t
            .acquire(2, a, Duration::from_secs(60))
            .expect_err("deadlock");
        assert_eq!(e.code, crate::error::code::ER_LOCK_DEADLOCK);
        assert!(e.is_retriable());
        // Once the victim rolls back, the other transaction gets its lock.
        t.release_all(2, [b]);
        assert!(waiter.join().expect("thread").expect("lock after rollback"));
        assert_eq!(t.held(), 2);
    }
}
