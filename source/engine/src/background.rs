//! Threads for copies that run beside committers: the automatic snapshot and the snapshot a
//! new replica is sent. They copy every row a frame at a time and can keep a core busy for
//! seconds; a committer that waits for that core waits in its commit's latency. These threads
//! run at a lower scheduling priority (a nice value of [`NICE`]), so that on a busy machine the
//! scheduler serves the committers first and the copy takes the time they leave. On an idle
//! machine the copy runs as fast as before.

use std::io;
use std::thread::JoinHandle;

/// The nice value of a background copy's thread (0 is a normal thread's; 19 the lowest).
/// At 10, the scheduler gives a busy normal thread about ten times the copy's share of a core.
pub const NICE: i32 = 10;

/// Spawns `f` on a thread named `name` whose priority is lowered to [`NICE`] before `f` runs.
/// A priority that cannot be changed (a system without it) is logged, and `f` runs anyway:
/// the copy is the same, only its share of the machine differs.
pub fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if let Err(e) = lower_priority() {
                tracing::debug!("background thread keeps its priority: {e}");
            }
            f()
        })
}

/// Sets the calling thread's nice value to [`NICE`]. On Linux a nice value belongs to a
/// thread, not to its process (setpriority(2), NOTES), so only this thread is lowered; a
/// thread cannot raise its priority again without privileges, which is why background copies
/// get threads of their own rather than borrowing pooled ones.
#[cfg(target_os = "linux")]
fn lower_priority() -> io::Result<()> {
    let tid = rustix::thread::gettid();
    rustix::process::setpriority_process(Some(tid), NICE).map_err(io::Error::from)
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "a thread's own priority is set on Linux only",
    ))
}

/// The calling thread's nice value (tests).
#[cfg(all(test, target_os = "linux"))]
fn current_nice() -> i32 {
    rustix::process::getpriority_process(Some(rustix::thread::gettid())).expect("getpriority")
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_background_thread_runs_at_the_lower_priority_and_the_spawner_keeps_its_own() {
        let before = current_nice();
        let inside = spawn("background-test", current_nice)
            .expect("spawn")
            .join()
            .expect("join");
        // A thread at a nice value above NICE already (the tests run under `nice`) keeps it.
        if before <= NICE {
            assert_eq!(inside, NICE);
        }
        assert_eq!(
            current_nice(),
            before,
            "the spawning thread's priority changed"
        );
    }
}
