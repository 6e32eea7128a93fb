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

use super::Engine;
use crate::error::{Error, Result};

/// How far the binlog is durable, as the waiters see it.
#[derive(Debug, Clone)]
enum Durable {
    /// Everything appended up to this LSN is durable.
    UpTo(u64),
    /// An fsync failed: the writer is stopped, and no later commit can become durable.
    Failed(String),
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

impl Engine {
    /// Returns once the commit whose record ends at `lsn` (from a session that defers
    /// durability) is as durable as the sync policy promises. Call it within a tokio runtime.
    pub async fn wait_durable_async(&self, lsn: u64) -> Result<()> {
        if self.shared.cfg.sync != SyncPolicy::EveryCommit {
            // Only a write to the OS, no fsync to wait for.
            return self.wait_durable(lsn);
        }
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
            Durable::UpTo(_) => {
                self.count_durable_commit();
                Ok(())
            }
            Durable::Failed(msg) => Err(Error::internal(format!(
                "the commit is not durable: the binlog fsync failed ({msg})"
            ))),
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
                        .send_replace(Durable::Failed("the fsync task panicked".into()));
                    self.0.in_flight.store(false, Ordering::SeqCst);
                }
            }
        }
        let _on_panic = OnPanic(d);
        loop {
            let target = d.requested.load(Ordering::SeqCst);
            let synced = match self.shared.binlog.as_ref() {
                // `commit` fsyncs everything appended so far, which includes `target` and
                // often commits appended since: publishing what the writer made durable
                // spares those a round.
                Some(w) => w
                    .commit(target)
                    .map(|()| w.durable_lsn().max(target))
                    .map_err(Error::from),
                None => Err(Error::internal("engine opened read-only")),
            };
            let synced = match synced {
                Ok(at) => at,
                Err(e) => {
                    d.durable.send_replace(Durable::Failed(e.message));
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
