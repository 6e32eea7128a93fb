//! Table locks as LOCK TABLES takes them: a READ lock lets every session read the table and
//! none write it; a WRITE lock keeps every other session out of it. A session takes all the
//! locks of one LOCK TABLES at once (waiting until none conflicts) and gives them all back
//! together (UNLOCK TABLES, the next LOCK TABLES, a new transaction, or the session's end).
//!
//! The SQL layer asks before each statement whether the tables it reads and writes are
//! open to it (`Engine::table_locks().wait_for_access`); with no lock held anywhere that is
//! one atomic load. Row locks are separate (`locks.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// A table by database and name, lower-cased (as the catalog compares them).
pub type TableKey = (String, String);

/// What LOCK TABLES asks for a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// `READ [LOCAL]`: everyone may read, no one write.
    Read,
    /// `[LOW_PRIORITY] WRITE`: only the holder may read or write.
    Write,
}

#[derive(Debug, Default)]
struct Held {
    readers: Vec<u64>,
    writer: Option<u64>,
}

impl Held {
    /// Whether `owner` may take `mode` here.
    fn grants(&self, owner: u64, mode: LockMode) -> bool {
        let others_write = self.writer.is_some_and(|w| w != owner);
        match mode {
            LockMode::Read => !others_write,
            LockMode::Write => !others_write && self.readers.iter().all(|&r| r == owner),
        }
    }
}

/// The table locks of one engine (see the module's description).
#[derive(Debug, Default)]
pub struct TableLocks {
    tables: Mutex<HashMap<TableKey, Held>>,
    released: Condvar,
    /// Locks held, all sessions together: 0 lets every statement skip the map.
    held: AtomicUsize,
}

impl TableLocks {
    fn map(&self) -> MutexGuard<'_, HashMap<TableKey, Held>> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether any session holds a table lock.
    pub fn any_held(&self) -> bool {
        self.held.load(Ordering::Acquire) > 0
    }

    /// Waits until `ready` holds of the map, for up to `wait` (`None`: not at all, the
    /// brief path's [`Error::would_wait`]); 1205 when the time runs out.
    fn wait_until<'a>(
        &'a self,
        mut map: MutexGuard<'a, HashMap<TableKey, Held>>,
        wait: Option<Duration>,
        ready: impl Fn(&HashMap<TableKey, Held>) -> bool,
    ) -> Result<MutexGuard<'a, HashMap<TableKey, Held>>> {
        let Some(wait) = wait else {
            return if ready(&map) {
                Ok(map)
            } else {
                Err(Error::would_wait())
            };
        };
        let deadline = Instant::now() + wait;
        while !ready(&map) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::lock_wait_timeout());
            }
            map = self
                .released
                .wait_timeout(map, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(map)
    }

    /// Takes every lock of `tables` for `owner` at once, once none conflicts with another
    /// session's (waiting up to `wait`, see [`TableLocks::wait_for_access`]). The owner's
    /// earlier locks must have been given back first.
    pub fn lock(
        &self,
        owner: u64,
        tables: &[(TableKey, LockMode)],
        wait: Option<Duration>,
    ) -> Result<()> {
        let map = self.map();
        let mut map = self.wait_until(map, wait, |m| {
            tables
                .iter()
                .all(|(t, mode)| m.get(t).is_none_or(|h| h.grants(owner, *mode)))
        })?;
        for (t, mode) in tables {
            let h = map.entry(t.clone()).or_default();
            match mode {
                LockMode::Read => h.readers.push(owner),
                LockMode::Write => h.writer = Some(owner),
            }
            self.held.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Gives back every lock `owner` holds; whether it held any.
    pub fn unlock_all(&self, owner: u64) -> bool {
        let mut map = self.map();
        let mut released = 0;
        map.retain(|_, h| {
            let before = h.readers.len();
            h.readers.retain(|&r| r != owner);
            released += before - h.readers.len();
            if h.writer == Some(owner) {
                h.writer = None;
                released += 1;
            }
            !h.readers.is_empty() || h.writer.is_some()
        });
        if released > 0 {
            self.held.fetch_sub(released, Ordering::AcqRel);
            self.released.notify_all();
        }
        released > 0
    }

    /// Waits (up to `wait`; `None`: not at all) until no other session's lock keeps `owner`,
    /// which holds none, from reading `reads` and writing `writes`: a WRITE lock keeps it
    /// out of a table, a READ lock keeps it from writing one.
    pub fn wait_for_access(
        &self,
        owner: u64,
        reads: &[TableKey],
        writes: &[TableKey],
        wait: Option<Duration>,
    ) -> Result<()> {
        if !self.any_held() {
            return Ok(());
        }
        let map = self.map();
        self.wait_until(map, wait, |m| {
            reads
                .iter()
                .all(|t| m.get(t).is_none_or(|h| h.grants(owner, LockMode::Read)))
                && writes
                    .iter()
                    .all(|t| m.get(t).is_none_or(|h| h.grants(owner, LockMode::Write)))
        })
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> TableKey {
        ("d".into(), name.into())
    }

    #[test]
    fn read_locks_share_and_write_locks_exclude() {
        let locks = TableLocks::default();
        assert!(!locks.any_held());
        locks
            .lock(1, &[(t("a"), LockMode::Read)], None)
            .expect("read");
        locks
            .lock(2, &[(t("a"), LockMode::Read)], None)
            .expect("a second reader");
        // Readers of `a`, others too, may read it; no one else may write it.
        locks
            .wait_for_access(3, &[t("a")], &[], None)
            .expect("read under READ locks");
        let e = locks
            .wait_for_access(3, &[], &[t("a")], None)
            .expect_err("write under a READ lock");
        assert!(e.is_would_wait(), "{e:?}");
        let e = locks
            .lock(
                3,
                &[(t("b"), LockMode::Write), (t("a"), LockMode::Write)],
                None,
            )
            .expect_err("WRITE over READ");
        assert!(e.is_would_wait());
        // All or nothing: `b` was not taken by the refused request.
        locks
            .wait_for_access(4, &[t("b")], &[t("b")], None)
            .expect("b is free");
        assert!(locks.unlock_all(1));
        assert!(locks.unlock_all(2));
        assert!(!locks.unlock_all(2));
        assert!(!locks.any_held());
        locks
            .lock(3, &[(t("a"), LockMode::Write)], None)
            .expect("WRITE once the readers left");
        let e = locks
            .wait_for_access(4, &[t("a")], &[], Some(Duration::from_millis(20)))
            .expect_err("read under another's WRITE lock");
        assert_eq!(e.code, crate::error::code::ER_LOCK_WAIT_TIMEOUT);
        assert!(!e.is_would_wait());
    }

    #[test]
    fn a_waiter_goes_on_when_the_lock_is_given_back() {
        let locks = std::sync::Arc::new(TableLocks::default());
        locks
            .lock(1, &[(t("a"), LockMode::Write)], None)
            .expect("write");
        let waiter = {
            let locks = std::sync::Arc::clone(&locks);
            std::thread::spawn(move || {
                locks.wait_for_access(2, &[], &[t("a")], Some(Duration::from_secs(30)))
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "it waits while the lock is held");
        locks.unlock_all(1);
        waiter
            .join()
            .expect("waiter")
            .expect("access once unlocked");
    }
}
