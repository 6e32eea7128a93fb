//! Failpoints for crash tests: `RINGREP_FAILPOINT=name` makes the process exit abruptly
//! (as SIGKILL would, with no cleanup) when it reaches that point; `name:N` on the N-th time.
//! Unset, a failpoint costs one relaxed atomic load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static SPEC: OnceLock<Option<(String, u64)>> = OnceLock::new();
static HITS: AtomicU64 = AtomicU64::new(0);

fn spec() -> &'static Option<(String, u64)> {
    SPEC.get_or_init(|| {
        let v = std::env::var("RINGREP_FAILPOINT").ok()?;
        let (name, n) = match v.split_once(':') {
            Some((name, n)) => (name.to_string(), n.parse().unwrap_or(1)),
            None => (v, 1),
        };
        Some((name, n))
    })
}

/// Crashes the process here if the failpoint `name` is armed and due.
pub fn hit(name: &str) {
    if let Some((armed, n)) = spec() {
        if armed == name && HITS.fetch_add(1, Ordering::Relaxed) + 1 >= *n {
            eprintln!("failpoint {name} reached: aborting");
            std::process::abort();
        }
    }
}
