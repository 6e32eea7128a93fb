//! Waiting for durability without a sleeping thread per committer: the server's path.
//!
//! A committing session that defers durability logs and applies its transaction and returns
//! the record's LSN; the connection then awaits [`Engine::wait_durable_async`] before it
//! acknowledges. The first waiter that finds no fsync running starts one on tokio's blocking
//! pool; that task keeps fsyncing while later commits ask for more, and publishes the durable
//! LSN on a watch channel that every waiter awaits. With a thread per statement sleeping in
//! the group commit instead, each commit cost a thread wake-up and a hand-back to the
//! connection's task (BENCHMARKS.md, fix 1 of the peer profile).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use binlog_format::SyncPolicy;
use tokio::sync::watch;

use super::{Engine, ReadFence};
use crate::error::{Error, Result};

/// How far the binlog is durable, as the waiters see it.
#[derive(Debug, Clone)]
enum Durable {
    /// Everything appended up to this LSN is durable.
    UpTo(u64),
    /// A write or fsync failed: the writer is stopped, and no commit after the durable point
    /// can become durable, until a heal.
    Failed(Error),
}

pub(crate) struct AsyncDurability {
    /// The highest LSN any waiter asked for.
    requested: AtomicU64,
    /// Whether a task is fsyncing for the waiters.
    in_flight: AtomicBool,
    durable: watch::Sender<Durable>,
}

impl Default for AsyncDurability {
    fn default() -> Self {
        AsyncDurability {
            requested: AtomicU64::new(0),
            in_flight: AtomicBool::new(false),
            durable: watch::Sender::new(Durable::UpTo(0)),
        }
    }
}

impl AsyncDurability {
    /// After a heal: everything up to `lsn` is durable or lost (the writer says which), and
    /// commits may become durable again.
    pub(crate) fn healed(&self, lsn: u64) {
        self.durable.send_replace(Durable::UpTo(lsn));
    }
}

impl Engine {
    /// Returns once the commit whose record ends at `lsn` (from a session that defers
    /// durability) is as durable as the sync policy promises. Call it within a tokio runtime.
    pub async fn wait_durable_async(&self, lsn: u64) -> Result<()> {
        if self.shared.cfg.sync != SyncPolicy::EveryCommit {
            // Only a write to the OS, no fsync to wait for.
            return self.wait_durable(lsn);
        }
        self.await_fsync(lsn).await?;
        self.count_durable_commit();
        Ok(())
    }

    /// Returns once a statement that began at `fence` may show what it read: every commit it
    /// could have seen (up to the last one applied now) is acknowledged as its sync policy
    /// says. With `EveryCommit` a reader therefore never sees a commit that a failed fsync,
    /// or a power loss, then takes back; it waits for the group commit in flight instead
    /// (docs/operations.md, "What readers see"). Fails when a commit the statement could have
    /// seen failed, or the binlog was healed while it ran.
    pub async fn wait_read_async(&self, fence: ReadFence) -> Result<()> {
        let Some(writer) = self.shared.binlog.as_ref() else {
            return Ok(());
        };
        // A replica's rows came from its primary only once durable there: if the replica's
        // own fsync fails or it crashes, it applies them again, so showing them before its
        // fsync shows nothing the system can lose (and a reader of a replica does not wait
        // for the replica's group commit). A promoted replica is a primary again.
        if self.is_read_only() {
            return Ok(());
        }
        let lsn = self.shared.applied_lsn.load(Ordering::Acquire);
        let withheld = |e: Error| Error::withheld(&e);
        // A heal took applied transactions back while the statement ran.
        let taken_back = || {
            (self.shared.taken_back.load(Ordering::Acquire) != fence.taken_back).then(|| {
                withheld(Error::internal(
                    "the binlog was cut back after a failed write while the statement ran",
                ))
            })
        };
        if let Some(e) = taken_back() {
            return Err(e);
        }
        if lsn > writer.acknowledged_lsn() {
            let waited = if self.shared.cfg.sync == SyncPolicy::EveryCommit {
                self.await_fsync(lsn).await
            } else {
                writer.commit(lsn).map_err(Error::from)
            };
            waited.map_err(withheld)?;
        }
        if writer.is_lost(lsn) {
            return Err(withheld(Error::internal(format!(
                "the binlog was cut back past LSN {lsn} after a failed write"
            ))));
        }
        taken_back().map_or(Ok(()), Err)
    }

    /// Waits for the group commit to fsync past `lsn`, starting one if none is running.
    async fn await_fsync(&self, lsn: u64) -> Result<()> {
        let d = &self.shared.durability;
        let mut rx = d.durable.subscribe();
        // Ask first, then look for a running fsync task: that task looks at the requests
        // again after clearing `in_flight`, so one of the two always sees the other (SeqCst).
        d.requested.fetch_max(lsn, Ordering::SeqCst);
        if d.in_flight
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            let engine = self.clone();
            tokio::task::spawn_blocking(move || engine.lead_syncs());
        }
        let state = rx
            .wait_for(|s| match s {
                Durable::UpTo(at) => *at >= lsn,
                Durable::Failed(_) => true,
            })
            .await
            .map_err(|_| Error::internal("the durability channel closed"))?
            .clone();
        match state {
            // A heal may have cut this commit off: the writer knows.
            Durable::UpTo(_) => match self.shared.binlog.as_ref() {
                Some(w) => w.commit(lsn).map_err(Error::from),
                None => Ok(()),
            },
            Durable::Failed(e) => Err(e),
        }
    }

    /// Fsyncs for the waiters until nobody asks for more.
    fn lead_syncs(&self) {
        let d = &self.shared.durability;
        // Should this task panic, the waiters hear of it instead of waiting forever for a
        // task that is gone.
        struct OnPanic<'a>(&'a AsyncDurability);
        impl Drop for OnPanic<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0
                        .durable
                        .send_replace(Durable::Failed(Error::internal("the fsync task panicked")));
                    self.0.in_flight.store(false, Ordering::SeqCst);
                }
            }
        }
        let _on_panic = OnPanic(d);
        loop {
            let synced = match self.shared.binlog.as_ref() {
                // This fsyncs everything appended so far, which includes what every waiter
                // asked for and often commits appended since: publishing what the writer made
                // durable spares those a round. (Not `commit(requested)`: a request a heal
                // cut off is no reason to stop every later commit; its own waiter hears.)
                Some(w) => w.sync().map(|()| w.durable_lsn()).map_err(Error::from),
                None => Err(Error::internal("engine opened read-only")),
            };
            let synced = match synced {
                Ok(at) => at,
                Err(e) => {
                    // The heal cuts the binlog back to what can be trusted and takes the
                    // failed commits out of the state. It leaves everything appended before
                    // it durable or cut, so every waiter learns from the writer whether its
                    // own commit was cut, even if a commit after the heal stopped the writer
                    // again (telling them all they failed would be wrong for those the heal
                    // kept). Only if the heal fails do they all fail.
                    let healed = self.heal();
                    match (&healed, self.shared.binlog.as_ref()) {
                        (Ok(_), Some(w)) => d.healed(w.durable_lsn()),
                        _ => {
                            if let Err(h) = &healed {
                                tracing::error!(
                                    "the binlog could not be healed after a failure: {h}"
                                );
                            }
                            d.durable.send_replace(Durable::Failed(e));
                        }
                    }
                    d.in_flight.store(false, Ordering::SeqCst);
                    return;
                }
            };
            d.durable.send_modify(|s| {
                if let Durable::UpTo(at) = s {
                    *at = (*at).max(synced);
                }
            });
            d.in_flight.store(false, Ordering::SeqCst);
            if d.requested.load(Ordering::SeqCst) <= synced {
                return;
            }
            // More was asked for meanwhile: go on, unless a new waiter already took over.
            if d.in_flight
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                return;
            }
        }
    }
}
