//! Values that must differ from call to call: UUID() and RAND().

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A random number: the standard library's per-process random keys over a counter (SipHash),
/// good enough for RAND() and UUID()'s node, not for secrets.
pub(super) fn random_u64() -> u64 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = KEYS.get_or_init(RandomState::new).build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// 100-nanosecond intervals from the Gregorian calendar's start (1582-10-15) to 1970.
const GREGORIAN_TO_UNIX: u64 = 0x01B2_1DD2_1381_4000;

/// A version 1 UUID, as MySQL's UUID() makes: the time in 100 ns units (moved on by one when
/// two calls would share it, so the values of one process never repeat), a clock sequence and
/// a node fixed for the process. The node is random with its multicast bit set (RFC 9562's
/// choice for a node that is not a MAC address).
pub(super) fn uuid_v1(now_us: i64) -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    static NODE: OnceLock<(u16, u64)> = OnceLock::new();
    let now = (now_us.max(0) as u64) * 10 + GREGORIAN_TO_UNIX;
    let mut prev = LAST.load(Ordering::Relaxed);
    let ticks = loop {
        let next = now.max(prev + 1);
        match LAST.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(seen) => prev = seen,
        }
    };
    let (clock_seq, node) = *NODE.get_or_init(|| {
        let r = random_u64();
        (
            ((r >> 48) as u16 & 0x3FFF) | 0x8000,
            (r & 0xFFFF_FFFF_FFFF) | 0x0100_0000_0000,
        )
    });
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        ticks & 0xFFFF_FFFF,
        (ticks >> 32) & 0xFFFF,
        ((ticks >> 48) & 0x0FFF) | 0x1000,
        clock_seq,
        node
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_1_and_never_repeat_within_a_tick() {
        let a = uuid_v1(1_700_000_000_000_000);
        let b = uuid_v1(1_700_000_000_000_000);
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "1", "version 1: {a}");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "variant: {a}");
    }
}
