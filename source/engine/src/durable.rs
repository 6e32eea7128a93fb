//! Waiting for durability without a sleeping thread per committer: the server's path.
//!
//! A committing session that defers durability logs and applies its transaction and returns
//! the record's LSN; the connection then awaits [`Engine::wait_durable_async`] before it
//! acknowledges. The first waiter that finds no fsync running starts one: a lone committer
//! runs it itself on its task's thread, otherwise a task on tokio's blocking pool keeps
//! fsyncing while later commits ask for more, each fsync first gathering a group as large as
//! the last one (for no longer than the last round took). Either publishes the durable LSN
//! on a watch channel that every waiter awaits. With a thread per statement sleeping in
//! the group commit instead, each commit cost a thread wake-up and a hand-back to the
//! connection's task (BENCHMARKS.md, fix 1 of the peer profile).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

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
    /// How the fsyncs under load gather their groups ([`Gathering`]).
    gathering: Gathering,
    /// Whether the runtime's worker threads run the group's fsync when they run out of
    /// work ([`Engine::sync_when_idle`] from tokio's `on_thread_park`), so that waiters need
    /// no leader of their own.
    idle_syncs: AtomicBool,
    /// Group fsyncs run by a worker that had run out of work.
    idle_fsyncs: AtomicU64,
}

/// The fsync leader's wait for its group. Under load, commits come in waves: the fsync that
/// ends wakes a group of connections, whose clients answer with their next statements. An
/// fsync that starts as soon as the first of them has committed covers part of the wave and
/// leaves the rest to another fsync right after it; on a machine where the CPU is the limit
/// each fsync's own cost (the block layer, the virtual disk's doorbells, the wake-ups of its
/// waiters and of the replica's stream) then goes to half the commits it could have served.
/// So the leader waits until as many commits have asked as the last group held, but never
/// longer than the last round (write-out and fsync) took: a commit waits at most one more
/// round, and a group that does not come (the load dropped) sets the next, smaller,
/// expectation.
/// Measured in BENCHMARKS.md, "Fsync groups gathered".
struct Gathering {
    /// Commits that have asked for an fsync, ever.
    asked: AtomicU64,
    /// `asked` when the last fsync for the waiters started.
    round_start: AtomicU64,
    /// How many asked between the starts of the last two fsyncs.
    last_size: AtomicU64,
    /// How long the last round (write-out and fsync) took, in nanoseconds.
    last_fsync_ns: AtomicU64,
    /// While the leader waits: the `asked` count at which it is to be woken (else 0).
    wake_at: AtomicU64,
    lock: Mutex<()>,
    woken: Condvar,
    /// The longest a leader waits, whatever the last round took.
    cap: Duration,
}

impl Default for Gathering {
    fn default() -> Self {
        Gathering {
            asked: AtomicU64::new(0),
            round_start: AtomicU64::new(0),
            last_size: AtomicU64::new(0),
            last_fsync_ns: AtomicU64::new(0),
            wake_at: AtomicU64::new(0),
            lock: Mutex::new(()),
            woken: Condvar::new(),
            cap: Duration::from_millis(2),
        }
    }
}

impl Gathering {
    /// A commit asks for an fsync; wakes the leader when it completes the group.
    fn ask(&self) {
        let asked = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        let wake_at = self.wake_at.load(Ordering::SeqCst);
        // Only the commit that takes `wake_at` back wakes the leader: the others of the
        // group do not queue on its lock (the leader looks at `asked` again when woken).
        if wake_at != 0
            && asked >= wake_at
            && self
                .wake_at
                .compare_exchange(wake_at, 0, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            // Under the lock: the leader holds it from announcing `wake_at` until it waits.
            let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.woken.notify_one();
        }
    }

    /// Waits (on the fsync leader's thread) until the group is as large as the last one,
    /// or as long as the last round took (`cap` at most) has passed.
    fn gather(&self) {
        let want = self.wanted();
        if self.asked.load(Ordering::SeqCst) >= want {
            return;
        }
        let deadline = Instant::now() + self.last_round();
        let mut g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.wake_at.store(want, Ordering::SeqCst);
        while self.asked.load(Ordering::SeqCst) < want {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            g = self
                .woken
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        self.wake_at.store(0, Ordering::SeqCst);
    }

    /// An fsync for the waiters starts: what asked since the last one is its group.
    fn round_starts(&self) -> Instant {
        let asked = self.asked.load(Ordering::SeqCst);
        let start = self.round_start.swap(asked, Ordering::SeqCst);
        self.last_size
            .store(asked.saturating_sub(start), Ordering::Relaxed);
        Instant::now()
    }

    /// The `asked` count at which the group is as large as the last one.
    fn wanted(&self) -> u64 {
        self.round_start.load(Ordering::SeqCst) + self.last_size.load(Ordering::Relaxed)
    }

    /// How long a group is waited for: as long as the last round took, `cap` at most.
    fn last_round(&self) -> Duration {
        Duration::from_nanos(self.last_fsync_ns.load(Ordering::Relaxed)).min(self.cap)
    }

    /// Whether as many commits have asked since the last fsync started as its group held
    /// (the group a leader would wait for).
    fn complete(&self) -> bool {
        self.asked.load(Ordering::SeqCst) >= self.wanted()
    }

    /// How long a waiter leaves its fsync to an idle worker: [`Gathering::last_round`], and
    /// not under tokio's timer resolution (a millisecond).
    fn patience(&self) -> Duration {
        self.last_round().max(Duration::from_millis(1))
    }

    fn round_ends(&self, started: Instant) {
        let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_fsync_ns.store(took, Ordering::Relaxed);
    }
}

impl Default for AsyncDurability {
    fn default() -> Self {
        AsyncDurability {
            requested: AtomicU64::new(0),
            in_flight: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            last_group: AtomicUsize::new(0),
            durable: watch::Sender::new(Durable::UpTo(0)),
            gathering: Gathering::default(),
            idle_syncs: AtomicBool::new(false),
            idle_fsyncs: AtomicU64::new(0),
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
    /// From now on the group commit's fsync is run by the runtime's worker threads when
    /// they run out of work: the caller must have built its runtime with
    /// `on_thread_park(move || engine.sync_when_idle())`. A worker that has run every task
    /// it had (each commit appended and applied, its connection waiting) fsyncs for them
    /// before it sleeps, instead of a leader on the blocking pool that is woken to gather
    /// the group and then wakes the workers (BENCHMARKS.md, "Commit paths without the
    /// hand-offs"). The tasks it wakes go to the runtime's queue, run by this worker (on a
    /// current-thread runtime, at once) or by another one, woken if it sleeps. The worker
    /// gathers the group as the leader did: it fsyncs only once as many commits have asked
    /// as the last group held, and a commit whose group did not come within the last
    /// round's time (a worker never idle, or the load dropping) fsyncs in place.
    pub fn sync_when_workers_idle(&self) {
        self.shared
            .durability
            .idle_syncs
            .store(true, Ordering::SeqCst);
    }

    /// For tokio's `on_thread_park`: if a commit waits for an fsync and none runs, runs
    /// it here, before the worker sleeps (see [`Engine::sync_when_workers_idle`]).
    pub fn sync_when_idle(&self) {
        let d = &self.shared.durability;
        if !d.idle_syncs.load(Ordering::Relaxed) {
            return;
        }
        let durable = match &*d.durable.borrow() {
            Durable::UpTo(at) => *at,
            Durable::Failed(_) => return,
        };
        if d.requested.load(Ordering::SeqCst) > durable
            && d.gathering.complete()
            && d.in_flight
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.sync_round(false);
            d.idle_fsyncs.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Group fsyncs that a worker ran when it had run out of work
    /// ([`Engine::sync_when_idle`]); the others of [`Engine::binlog_fsyncs`] were run by a
    /// lone committer, a leader on the blocking pool, or the binlog itself.
    pub fn binlog_fsyncs_when_idle(&self) -> u64 {
        self.shared.durability.idle_fsyncs.load(Ordering::Relaxed)
    }

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
        d.gathering.ask();
        let mut rx = d.durable.subscribe();
        d.requested.fetch_max(lsn, Ordering::SeqCst);
        let mut first = true;
        // With workers that fsync when idle: until when this commit leaves it to them.
        // Alone, and alone the last time: the in-place fsync below, which needs no other
        // thread (a worker's hook would wake its waiter on another worker).
        let lone = alone && d.last_group.load(Ordering::Relaxed) <= 1;
        let mut patience = (d.idle_syncs.load(Ordering::Relaxed) && !lone)
            .then(|| tokio::time::Instant::now() + d.gathering.patience());
        let state = loop {
            let state = rx.borrow_and_update().clone();
            match state {
                Durable::UpTo(at) if at < lsn => {}
                reached => break reached,
            }
            if let Some(until) = patience {
                if let Ok(changed) = tokio::time::timeout_at(until, rx.changed()).await {
                    changed.map_err(|_| Error::internal("the durability channel closed"))?;
                    continue;
                }
                // The group did not come in time (or no worker went idle): this commit
                // fsyncs for it, here, unless an fsync already runs, whose publication it
                // then awaits.
                patience = None;
                first = false;
                if d.in_flight
                    .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    self.sync_round(false);
                } else {
                    rx.changed()
                        .await
                        .map_err(|_| Error::internal("the durability channel closed"))?;
                }
                continue;
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
                    self.sync_round(false);
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
            let synced = self.sync_round(true);
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
    /// it returns (`None` after a failure). `gather`: first wait for the group
    /// ([`Gathering`]), as the leader under load does.
    fn sync_round(&self, gather: bool) -> Option<u64> {
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
        if gather {
            d.gathering.gather();
        }
        let started = d.gathering.round_starts();
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
                d.gathering.round_ends(started);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Runs `gather` on a thread; the receiver hears when it returned, with `asked` then.
    fn gather_on_thread(g: &Arc<Gathering>) -> std::sync::mpsc::Receiver<u64> {
        let (tx, rx) = std::sync::mpsc::channel();
        let g = Arc::clone(g);
        std::thread::spawn(move || {
            g.gather();
            let _ = tx.send(g.asked.load(Ordering::SeqCst));
        });
        rx
    }

    /// `g` after a round whose group was `size` commits and which took `took_ns`.
    fn after_a_round(g: &Gathering, size: u64, took_ns: u64) {
        for _ in 0..size {
            g.ask();
        }
        g.round_starts();
        g.last_fsync_ns.store(took_ns, Ordering::SeqCst);
    }

    /// A leader that would otherwise wait an hour: only the wake-up can end its wait.
    fn patient() -> Arc<Gathering> {
        Arc::new(Gathering {
            cap: Duration::from_secs(3600),
            ..Gathering::default()
        })
    }

    #[test]
    fn a_group_is_what_asked_between_two_fsyncs() {
        let g = Gathering::default();
        for _ in 0..4 {
            g.ask();
        }
        g.round_starts();
        assert_eq!(g.last_size.load(Ordering::SeqCst), 4);
        g.ask();
        g.ask();
        g.round_starts();
        assert_eq!(g.last_size.load(Ordering::SeqCst), 2);
        g.round_starts();
        assert_eq!(g.last_size.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn the_leader_is_woken_by_the_commit_that_completes_the_group() {
        let g = patient();
        after_a_round(&g, 3, u64::MAX);
        let returned = gather_on_thread(&g);
        // Once the leader waits for the group: it holds the lock from announcing `wake_at`
        // until it sleeps, so the asks below find it waiting, and only the wake-up ends it.
        while g.wake_at.load(Ordering::SeqCst) != 6 {
            std::thread::yield_now();
        }
        for _ in 0..3 {
            g.ask();
        }
        let asked = returned
            .recv_timeout(Duration::from_secs(60))
            .expect("the leader was not woken when its group was complete");
        assert!(asked >= 6, "the leader went on with {} of 3", asked - 3);
        assert_eq!(g.wake_at.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_group_that_does_not_come_is_waited_for_no_longer_than_the_last_fsync_took() {
        let g = patient();
        after_a_round(&g, 5, 1_000_000);
        g.ask();
        let asked = gather_on_thread(&g)
            .recv_timeout(Duration::from_secs(60))
            .expect("the leader kept waiting past the last fsync's time");
        assert_eq!(asked, 6);
        // The next group expected is the one that came.
        g.round_starts();
        assert_eq!(g.last_size.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_group_that_does_not_come_is_waited_for_no_longer_than_the_cap() {
        let g = Arc::new(Gathering::default());
        after_a_round(&g, 5, u64::MAX);
        gather_on_thread(&g)
            .recv_timeout(Duration::from_secs(60))
            .expect("the leader kept waiting past its cap");
    }

    #[test]
    fn the_first_group_and_a_group_of_one_that_asked_are_not_waited_for() {
        let g = patient();
        g.last_fsync_ns.store(u64::MAX, Ordering::SeqCst);
        // Nothing measured yet: no group to wait for.
        gather_on_thread(&g)
            .recv_timeout(Duration::from_secs(60))
            .expect("the first leader waited");
        g.ask();
        g.round_starts();
        g.ask();
        // The last group was one commit, and this one has asked.
        gather_on_thread(&g)
            .recv_timeout(Duration::from_secs(60))
            .expect("the leader waited for a group that had come");
        assert_eq!(g.wake_at.load(Ordering::SeqCst), 0);
    }
}
