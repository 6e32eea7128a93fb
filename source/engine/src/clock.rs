//! Time, injectable so that tests control TTL expiry and CURRENT_TIMESTAMP.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where the engine reads the time: the system clock in a node, a [`ManualClock`] in tests.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Microseconds since 1970-01-01 UTC.
    fn now_us(&self) -> i64;
}

/// The wall clock of the machine.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock that reads `start_us` (microseconds since 1970-01-01 UTC) until moved.
    pub fn new(start_us: i64) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(start_us)))
    }

    /// Sets the time to `us` microseconds since 1970-01-01 UTC.
    pub fn set(&self, us: i64) {
        self.0.store(us, Ordering::SeqCst);
    }

    /// Moves the time forward by `secs` seconds (backward if negative).
    pub fn advance_secs(&self, secs: i64) {
        self.0.fetch_add(secs * 1_000_000, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
