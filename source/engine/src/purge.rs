//! The TTL purge: deletes expired rows in small batches, each its own transaction, logged as
//! row deletes (cause `ttl_purge`) so replicas purge the same rows. Rows another transaction
//! holds are skipped until the next round. Meta rows never expire.

use binlog_format::{Cause, Event, Key, RowChange, RowEvent};

use super::{Engine, LockKey};
use crate::error::{Error, Result};
use crate::types::expiry_us;

/// Smallest and largest purge batch; the batch grows while rounds fill it and shrinks when
/// they find little, as the spec's adaptive purge does.
pub(crate) const MIN_BATCH: usize = 5;
pub(crate) const MAX_BATCH: usize = 50;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PurgeRound {
    pub deleted: usize,
    pub skipped_locked: usize,
}

impl Engine {
    /// Deletes up to `batch` expired rows (one transaction). Returns what it did.
    pub(crate) fn purge_expired(&self, batch: usize) -> Result<PurgeRound> {
        let now = self.now_us();
        let candidates: Vec<(u64, Key)> = {
            let st = self.read();
            let mut out = Vec::new();
            for t in st.tables.values() {
                if t.def.ttl.is_none() {
                    continue;
                }
                out.extend(
                    t.expired_keys(now, batch - out.len())
                        .into_iter()
                        .map(|k| (t.def.id, k)),
                );
                if out.len() >= batch {
                    break;
                }
            }
            out
        };
        let mut round = PurgeRound::default();
        if candidates.is_empty() {
            return Ok(round);
        }
        let txn = self.next_txn_id();
        let mut held = Vec::new();
        let mut events = Vec::new();
        for (table, key) in candidates {
            let lock = LockKey::new(table, &key);
            if self.shared.locks.try_acquire(txn, lock) {
                held.push(lock);
                events.push(Event::Row(RowEvent {
                    table_id: table,
                    change: RowChange::Delete { key: key.0 },
                    cause: Cause::TtlPurge,
                }));
            } else {
                round.skipped_locked += 1;
            }
        }
        // Re-check under the locks: a row may have been overwritten or updated since.
        let result = self.commit_events_filtered(events, now);
        self.shared.locks.release_all(txn, held);
        round.deleted = result?;
        Ok(round)
    }

    fn commit_events_filtered(&self, events: Vec<Event>, now: i64) -> Result<usize> {
        let still_expired: Vec<Event> = {
            let st = self.read();
            events
                .into_iter()
                .filter(|ev| {
                    let Event::Row(RowEvent {
                        table_id,
                        change: RowChange::Delete { key },
                        ..
                    }) = ev
                    else {
                        return false;
                    };
                    let Some(t) = st.tables.get(table_id) else {
                        return false;
                    };
                    let Some(ttl) = &t.def.ttl else { return false };
                    t.get(&Key(key.clone()))
                        .and_then(|r| r.get(ttl.column).and_then(|v| expiry_us(v, ttl.seconds)))
                        .is_some_and(|e| e <= now)
                })
                .collect()
        };
        let n = still_expired.len();
        if n > 0 {
            // A fenced node writes nothing (checked under the state's lock, as a client's
            // commit checks it).
            self.commit_events(still_expired, None, |_, _| {
                if self.fence() == crate::Fence::Open {
                    Ok(())
                } else {
                    Err(Error::read_only())
                }
            })?;
        }
        Ok(n)
    }

    /// Purges until nothing expired is left (or `max_rounds` rounds), adapting the batch size.
    /// Returns the rows deleted.
    pub fn purge_all(&self, max_rounds: usize) -> Result<usize> {
        // `SET GLOBAL read_only` stops the purge: a fenced primary must not write what the
        // node that replaces it will not have.
        if self.fence() != crate::Fence::Open {
            return Ok(0);
        }
        let mut batch = MIN_BATCH;
        let mut total = 0;
        for _ in 0..max_rounds {
            let r = self.purge_expired(batch)?;
            total += r.deleted;
            self.shared
                .purged_rows
                .fetch_add(r.deleted as u64, std::sync::atomic::Ordering::Relaxed);
            if r.deleted == 0 && r.skipped_locked == 0 {
                break;
            }
            batch = if r.deleted >= batch {
                (batch * 2).min(MAX_BATCH)
            } else {
                (batch / 2).max(MIN_BATCH)
            };
        }
        Ok(total)
    }
}
