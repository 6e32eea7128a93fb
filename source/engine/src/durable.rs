//! Waiting for durability without a sleeping thread per committer: the server's path.
//!
//! A committing session that defers durability logs and applies its transaction and returns
//! the record's LSN; the connection then awaits [`Engine::wait_durable_async`] before it
//! acknowledges. The first waiter that finds no fsync running starts one: a lone committer
//! runs it itself on its task's thread, otherwise a task on tokio's blocking pool keeps
//! fsyncing while later commits ask for more. Either publishes the durable LSN on a watch
//! channel that every waiter awaits. With a thread per statement sleeping in
//! the group commit instead, each commit cost a thread wake-up and a hand-back to the
//! connection's task (BENCHMARKS.md, fix 1 of the peer profile).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

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
    /// Whether an fsync for the waiters is running.
    in_flight: AtomicBool,
    /// How many commits are waiting for an fsync.
    waiting: AtomicUsize,
    /// How many were waiting when the last fsync finished: 1 when commits come one at a
    /// time.
    last_group: AtomicUsize,
    durable: watch::Sender<Durable>,
}

impl Default for AsyncDurability {
    fn default() -> Self {
        AsyncDurability {
            requested: AtomicU64::new(0),
            in_flight: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            last_group: AtomicUsize::new(0),
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

    /// Waits for the group commit to fsync past `lsn`. A waiter that finds no fsync running
    /// starts one: alone (no other commit waiting), it runs the fsync itself, right here on
    /// its task's thread, and needs no other thread at all; otherwise it starts a task on
    /// the blocking pool that keeps fsyncing while commits ask for more, so that no worker
    /// is blocked in an fsync while others have statements to run (both measured:
    /// BENCHMARKS.md, "The statement path"). At most one fsync runs at a time.
    async fn await_fsync(&self, lsn: u64) -> Result<()> {
        let d = &self.shared.durability;
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let alone = d.waiting.fetch_add(1, Ordering::SeqCst) == 0;
        let _waiting = Waiting(&d.waiting);
        let mut rx = d.durable.subscribe();
        d.requested.fetch_max(lsn, Ordering::SeqCst);
        let mut first = true;
        let state = loop {
            let state = rx.borrow_and_update().clone();
            match state {
                Durable::UpTo(at) if at < lsn => {}
                reached => break reached,
            }
            // The fsync clears `in_flight` before it publishes: a waiter that finds it set is
            // woken by that publication, one that finds it clear starts the next.
            if d.in_flight
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                // Alone now and in the last group: commits come one at a time. (Alone now
                // only, it is often the first of a group under load.)
                if first
                    && alone
                    && d.waiting.load(Ordering::SeqCst) == 1
                    && d.last_group.load(Ordering::Relaxed) <= 1
                {
                    self.sync_round();
                    first = false;
                    continue;
                }
                let engine = self.clone();
                tokio::task::spawn_blocking(move || engine.lead_syncs());
            }
            first = false;
            rx.changed()
                .await
                .map_err(|_| Error::internal("the durability channel closed"))?;
        };
        match state {
            // A heal may have cut this commit off: the writer knows.
            Durable::UpTo(_) => match self.shared.binlog.as_ref() {
                Some(w) => w.commit(lsn).map_err(Error::from),
                None => Ok(()),
            },
            Durable::Failed(e) => Err(e),
        }
    }

    /// Fsyncs for the waiters until nobody asks for more (on the blocking pool).
    fn lead_syncs(&self) {
        let d = &self.shared.durability;
        loop {
            let synced = self.sync_round();
            if synced.is_none_or(|at| d.requested.load(Ordering::SeqCst) <= at) {
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

    /// One fsync for the waiters, by the one that set `in_flight`: makes everything appended
    /// so far durable, clears `in_flight` and publishes how far the binlog is durable, which
    /// it returns (`None` after a failure).
    fn sync_round(&self) -> Option<u64> {
        let d = &self.shared.durability;
        // Should the fsync panic, the waiters hear of it instead of waiting forever.
        struct OnPanic<'a>(&'a AsyncDurability);
        impl Drop for OnPanic<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.in_flight.store(false, Ordering::SeqCst);
                    self.0
                        .durable
                        .send_replace(Durable::Failed(Error::internal("the fsync panicked")));
                }
            }
        }
        let _on_panic = OnPanic(d);
        let synced = match self.shared.binlog.as_ref() {
            // This fsyncs everything appended so far, which includes what every waiter asked
            // for and often commits appended since: publishing what the writer made durable
            // spares those a round. (Not `commit(requested)`: a request a heal cut off is no
            // reason to stop every later commit; its own waiter hears.)
            Some(w) => w.sync().map(|()| w.durable_lsn()).map_err(Error::from),
            None => Err(Error::internal("engine opened read-only")),
        };
        match synced {
            Ok(at) => {
                d.last_group
                    .store(d.waiting.load(Ordering::SeqCst), Ordering::Relaxed);
                d.in_flight.store(false, Ordering::SeqCst);
                d.durable.send_modify(|s| {
                    if let Durable::UpTo(durable) = s {
                        *durable = (*durable).max(at);
                    }
                });
                Some(at)
            }
            Err(e) => {
                // The heal cuts the binlog back to what can be trusted and takes the failed
                // commits out of the state. It leaves everything appended before it durable
                // or cut, so every waiter learns from the writer whether its own commit was
                // cut, even if a commit after the heal stopped the writer again (telling them
                // all they failed would be wrong for those the heal kept). Only if the heal
                // fails do they all fail.
                let healed = self.heal();
                d.in_flight.store(false, Ordering::SeqCst);
                match (&healed, self.shared.binlog.as_ref()) {
                    (Ok(_), Some(w)) => d.healed(w.durable_lsn()),
                    _ => {
                        if let Err(h) = &healed {
                            tracing::error!("the binlog could not be healed after a failure: {h}");
                        }
                        d.durable.send_replace(Durable::Failed(e));
                    }
                }
                None
            }
        }
    }
}
