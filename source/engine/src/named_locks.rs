//! User-level locks, MySQL's GET_LOCK family: a name a session holds exclusively, as often as
//! it took it, until it gives it back as often or ends. Nothing is written to the binlog and
//! transactions do not touch them; migration tools and job schedulers use them to run one at
//! a time across servers' clients.
//!
//! Names compare case-insensitively, as MySQL's. A wait that would close a cycle (each
//! session waiting for a name another of them holds) is refused at once with 3058 instead of
//! running to its timeout.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{code, Error, Result};

/// The longest name MySQL takes for a user-level lock.
pub const MAX_NAME: usize = 64;

#[derive(Debug)]
struct Holder {
    owner: u64,
    connection: u64,
    count: u64,
}

#[derive(Debug, Default)]
struct Map {
    held: HashMap<String, Holder>,
    /// The name each waiting owner waits for (to find cycles).
    waiting: HashMap<u64, String>,
}

/// How long GET_LOCK may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Not at all: the caller cannot block here (the brief path's [`Error::would_wait`] when
    /// the lock is taken and the call would wait).
    Never,
    /// Up to this long (zero: try once).
    Up(Duration),
    /// Until the lock is free (a negative timeout in SQL).
    Forever,
}

/// The user-level locks of one engine (see the module's description).
#[derive(Debug, Default)]
pub struct NamedLocks {
    map: Mutex<Map>,
    released: Condvar,
}

/// A name as locks compare it, or MySQL's 3057 for one it refuses.
fn key(name: &str) -> Result<String> {
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(Error::new(
            code::ER_USER_LOCK_WRONG_NAME,
            format!("Incorrect user-level lock name '{name}'."),
        ));
    }
    Ok(name.to_lowercase())
}

impl NamedLocks {
    fn lock_map(&self) -> MutexGuard<'_, Map> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// GET_LOCK: takes `name` for `owner` (whose connection is `connection`), once more if
    /// it holds it already; `Ok(true)` when taken, `Ok(false)` when `wait` ran out.
    pub fn get(&self, name: &str, owner: u64, connection: u64, wait: Wait) -> Result<bool> {
        let name = key(name)?;
        let mut map = self.lock_map();
        let deadline = match wait {
            Wait::Up(d) => Some(Instant::now() + d),
            _ => None,
        };
        loop {
            match map.held.get_mut(&name) {
                None => {
                    map.held.insert(
                        name,
                        Holder {
                            owner,
                            connection,
                            count: 1,
                        },
                    );
                    return Ok(true);
                }
                Some(h) if h.owner == owner => {
                    h.count += 1;
                    return Ok(true);
                }
                Some(_) => {}
            }
            let left = match (wait, deadline) {
                (Wait::Never, _) => return Err(Error::would_wait()),
                (_, Some(d)) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        map.waiting.remove(&owner);
                        return Ok(false);
                    }
                    left
                }
                // Forever: wake now and then all the same (a lost notification costs a second).
                _ => Duration::from_secs(1),
            };
            if map.waiting.insert(owner, name.clone()).is_none() && closes_cycle(&map, owner) {
                map.waiting.remove(&owner);
                return Err(Error::new(
                    code::ER_USER_LOCK_DEADLOCK,
                    "Deadlock found when trying to get user-level lock; try rolling back \
                     transaction/releasing locks and restarting lock acquisition.",
                ));
            }
            map = self
                .released
                .wait_timeout(map, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            map.waiting.remove(&owner);
        }
    }

    /// RELEASE_LOCK: `Some(true)` when `owner` held `name` (once less now), `Some(false)` when
    /// another session holds it, `None` when no one does.
    pub fn release(&self, name: &str, owner: u64) -> Result<Option<bool>> {
        let name = key(name)?;
        let mut map = self.lock_map();
        let Some(h) = map.held.get_mut(&name) else {
            return Ok(None);
        };
        if h.owner != owner {
            return Ok(Some(false));
        }
        h.count -= 1;
        if h.count == 0 {
            map.held.remove(&name);
            self.released.notify_all();
        }
        Ok(Some(true))
    }

    /// RELEASE_ALL_LOCKS (and a session's end): gives back every lock `owner` holds; how
    /// many times they had been taken, all together.
    pub fn release_all(&self, owner: u64) -> u64 {
        let mut map = self.lock_map();
        let mut released = 0;
        map.held.retain(|_, h| {
            if h.owner == owner {
                released += h.count;
                false
            } else {
                true
            }
        });
        if released > 0 {
            self.released.notify_all();
        }
        released
    }

    /// IS_USED_LOCK: the connection holding `name`, if one does.
    pub fn holder(&self, name: &str) -> Result<Option<u64>> {
        let name = key(name)?;
        Ok(self.lock_map().held.get(&name).map(|h| h.connection))
    }
}

/// Whether `owner`'s wait closes a cycle: following the holder of what each waits for leads
/// back to it.
fn closes_cycle(map: &Map, owner: u64) -> bool {
    let mut at = owner;
    for _ in 0..=map.waiting.len() {
        let Some(holder) = map
            .waiting
            .get(&at)
            .and_then(|name| map.held.get(name))
            .map(|h| h.owner)
        else {
            return false;
        };
        if holder == owner {
            return true;
        }
        at = holder;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_name_is_held_by_one_session_as_often_as_it_took_it() {
        let locks = NamedLocks::default();
        assert!(locks
            .get("Job", 1, 10, Wait::Up(Duration::ZERO))
            .expect("ok"));
        assert!(locks.get("job", 1, 10, Wait::Never).expect("ok"), "again");
        assert!(!locks
            .get("JOB", 2, 20, Wait::Up(Duration::ZERO))
            .expect("ok"));
        assert!(locks
            .get("job", 2, 20, Wait::Never)
            .expect_err("refused")
            .is_would_wait());
        assert_eq!(locks.holder("job").expect("ok"), Some(10));
        assert_eq!(locks.release("job", 2).expect("ok"), Some(false));
        assert_eq!(locks.release("job", 1).expect("ok"), Some(true));
        assert_eq!(locks.holder("job").expect("ok"), Some(10), "taken twice");
        assert_eq!(locks.release_all(1), 1);
        assert_eq!(locks.holder("job").expect("ok"), None);
        assert_eq!(locks.release("job", 1).expect("ok"), None);
        assert_eq!(
            locks.get("", 1, 10, Wait::Never).expect_err("refused").code,
            code::ER_USER_LOCK_WRONG_NAME
        );
        assert!(locks.get(&"x".repeat(65), 1, 10, Wait::Never).is_err());
    }

    #[test]
    fn a_waiter_takes_the_lock_when_it_is_given_back_and_cycles_are_refused() {
        let locks = Arc::new(NamedLocks::default());
        assert!(locks.get("a", 1, 10, Wait::Never).expect("ok"));
        assert!(locks.get("b", 2, 20, Wait::Never).expect("ok"));
        let waiter = {
            let locks = Arc::clone(&locks);
            std::thread::spawn(move || locks.get("a", 2, 20, Wait::Forever))
        };
        while locks.lock_map().waiting.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        // 1 waiting for b, which 2 holds while it waits for a, which 1 holds: a cycle.
        let e = locks.get("b", 1, 10, Wait::Forever).expect_err("refused");
        assert_eq!(e.code, code::ER_USER_LOCK_DEADLOCK);
        assert_eq!(locks.release_all(1), 1);
        assert!(waiter.join().expect("ok").expect("ok"), "2 took a");
        assert_eq!(locks.holder("a").expect("ok"), Some(20));
    }
}
