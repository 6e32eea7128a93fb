//! Waking readers in the writer's process when they have records to pass on: threads (a
//! tailer) wait on a condition variable, tasks (the server's replication streams) on a future,
//! so that a stream needs no thread of its own (docs/architecture.md, "The statement path").

use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// What a writer publishes: the end of what it has fsynced (segment, length) and how many
/// times the binlog was cut back before it (see [`Published::heals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Published {
    /// Segment and byte length that everything before is fsynced to.
    pub end: (u64, u64),
    /// Heals of the writer, plus one for every writer that opened the directory before it:
    /// bytes a reader read past the durable end before this changed may since have been
    /// rewritten (see [`crate::BinlogWriter::heal`]), and are read again.
    pub heals: u64,
}

/// Wakes tailers and tasks in the same process when they have records to pass on.
#[derive(Debug, Default)]
pub struct Notifier {
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct State {
    generation: u64,
    /// Tasks in [`Notifier::past`], woken (and forgotten) at the next notification.
    wakers: Vec<Waker>,
    /// Threads in [`Notifier::wait_past`]: without one, a notification makes no system call
    /// (it comes after every fsync).
    sleepers: usize,
    /// What the writer last published (the durable end and the heal count), while it is
    /// open: readers in its process go by this instead of reading `binlog.durable`.
    published: Option<Published>,
}

impl Notifier {
    /// Moves the generation on and wakes every thread in [`Notifier::wait_past`] and every
    /// task awaiting [`Notifier::past`]. The writer calls it when readers have more to pass
    /// on: after each fsync, rotation and heal, and after each write to the file when nothing
    /// is fsynced ([`crate::SyncPolicy::Never`]).
    pub fn notify(&self) {
        let wakers = {
            let mut s = lock(&self.state);
            s.generation += 1;
            if s.sleepers > 0 {
                self.cv.notify_all();
            }
            std::mem::take(&mut s.wakers)
        };
        // Outside the lock: a woken task may poll at once on another thread.
        for w in wakers {
            w.wake();
        }
    }

    /// The end of what the writer has made durable, as it publishes it in `binlog.durable`
    /// (segment, length; see [`crate::durable`]), or `None` once the writer is closed (or
    /// before it published): then the files and their lock say what is durable.
    pub fn durable_end(&self) -> Option<(u64, u64)> {
        self.published().map(|p| p.end)
    }

    /// [`Notifier::durable_end`] with the heal count published with it.
    pub fn published(&self) -> Option<Published> {
        lock(&self.state).published
    }

    /// Moves the durable end on to `published.end` (never back) and takes its heal count;
    /// the writer calls it as it publishes, before it notifies.
    pub(crate) fn advance_published(&self, published: Published) {
        let mut s = lock(&self.state);
        let end = s
            .published
            .map_or(published.end, |old| old.end.max(published.end));
        s.published = Some(Published {
            end,
            heals: published.heals,
        });
    }

    /// Clears [`Notifier::durable_end`]: the writer is closing.
    pub(crate) fn clear_durable_end(&self) {
        lock(&self.state).published = None;
    }

    /// The number of notifications so far; pass it to [`Notifier::wait_past`] or
    /// [`Notifier::past`] to wait for the next one.
    pub fn generation(&self) -> u64 {
        lock(&self.state).generation
    }

    /// Waits until the generation moves past `seen` or `timeout` passes.
    pub fn wait_past(&self, seen: u64, timeout: Duration) -> u64 {
        let mut s = lock(&self.state);
        if s.generation != seen {
            return s.generation;
        }
        s.sleepers += 1;
        let (mut s, _) = self
            .cv
            .wait_timeout_while(s, timeout, |s| s.generation == seen)
            .unwrap_or_else(|p| p.into_inner());
        s.sleepers -= 1;
        s.generation
    }

    /// Completes, with the new generation, once the generation moves past `seen`: the
    /// asynchronous [`Notifier::wait_past`] (any executor; add a timeout around it).
    pub fn past(&self, seen: u64) -> Past<'_> {
        Past {
            notifier: self,
            seen,
        }
    }
}

/// The future of [`Notifier::past`].
#[derive(Debug)]
pub struct Past<'a> {
    notifier: &'a Notifier,
    seen: u64,
}

impl Future for Past<'_> {
    type Output = u64;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        let mut s = lock(&self.notifier.state);
        if s.generation != self.seen {
            return Poll::Ready(s.generation);
        }
        // Registered under the lock that `notify` moves the generation under: no
        // notification falls between the look and the registration. A task polling again
        // before one comes is registered once.
        if !s.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            s.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain data: a panic while holding the lock leaves nothing half-done.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_task_is_woken_once_by_the_next_notification_and_then_sees_it() {
        let n = Notifier::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let seen = n.generation();
        let mut past = n.past(seen);
        // Polled twice before anything happens: pending, registered once.
        assert_eq!(Pin::new(&mut past).poll(&mut cx), Poll::Pending);
        assert_eq!(Pin::new(&mut past).poll(&mut cx), Poll::Pending);
        n.notify();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(Pin::new(&mut past).poll(&mut cx), Poll::Ready(seen + 1));
        // The waker was forgotten: a later notification wakes nobody.
        n.notify();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // A generation already past is ready at once, registering nothing.
        assert_eq!(
            Pin::new(&mut n.past(seen)).poll(&mut cx),
            Poll::Ready(seen + 2)
        );
    }

    #[test]
    fn threads_and_tasks_are_woken_by_the_same_notification() {
        let n = Arc::new(Notifier::default());
        let seen = n.generation();
        let waiter = {
            let n = n.clone();
            std::thread::spawn(move || n.wait_past(seen, Duration::from_secs(60)))
        };
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut past = n.past(seen);
        assert_eq!(
            Pin::new(&mut past).poll(&mut Context::from_waker(&waker)),
            Poll::Pending
        );
        n.notify();
        assert_eq!(waiter.join().expect("waiter"), seen + 1);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }
}
