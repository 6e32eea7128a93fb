//! Row locks held until a transaction ends. A ring insert locks its prefix's meta row (so
//! inserts into one prefix run one after another, different prefixes in parallel) and the slot
//! it writes; UPDATE and the TTL purge lock the rows they change; a prefix DELETE locks the meta
//! row before the data rows. A wait that outlasts the timeout fails with MySQL's retriable
//! error 1205 instead of hanging; deadlocks resolve the same way.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use binlog_format::Key;

use crate::error::{Error, Result};

pub type LockKey = (u64, Key);

#[derive(Debug, Default)]
struct Owners {
    held: HashMap<LockKey, u64>,
    /// Sessions waiting for any lock: releases only wake sleepers when there are some, so
    /// the common case (nobody waiting) costs no wake-ups.
    waiters: usize,
}

#[derive(Debug, Default)]
pub struct LockTable {
    owners: Mutex<Owners>,
    released: Condvar,
}

impl LockTable {
    /// Locks `key` for `txn`, waiting up to `timeout`. Returns true when newly taken (false
    /// when `txn` already held it).
    pub fn acquire(&self, txn: u64, key: LockKey, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match owners.held.get(&key) {
                None => {
                    owners.held.insert(key, txn);
                    return Ok(true);
                }
                Some(&o) if o == txn => return Ok(false),
                Some(_) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(Error::lock_wait_timeout());
                    }
                    owners.waiters += 1;
                    owners = self
                        .released
                        .wait_timeout(owners, deadline - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    owners.waiters -= 1;
                }
            }
        }
    }

    /// Locks `key` only if nobody holds it (the purge skips locked rows).
    pub fn try_acquire(&self, txn: u64, key: LockKey) -> bool {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        match owners.held.get(&key) {
            None => {
                owners.held.insert(key, txn);
                true
            }
            Some(&o) => o == txn,
        }
    }

    pub fn release_all(&self, txn: u64, keys: impl IntoIterator<Item = LockKey>) {
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

    pub fn held(&self) -> usize {
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
        let k = (1, Key(vec![Value::Int(1)]));
        assert!(t
            .acquire(1, k.clone(), Duration::from_millis(10))
            .expect("free"));
        assert!(!t
            .acquire(1, k.clone(), Duration::from_millis(10))
            .expect("reentrant"));
        let e = t
            .acquire(2, k.clone(), Duration::from_millis(20))
            .expect_err("held");
        assert!(e.is_retriable());
        t.release_all(1, [k.clone()]);
        assert!(t
            .acquire(2, k, Duration::from_millis(10))
            .expect("released"));
    }
}
