//! # integration
//!
//! End-to-end pieces of ringrep: the demo pipeline ([`pipeline`]) and its workload
//! ([`workload`]), the mysqltest transcript runner ([`mysqltest`]), and the history checker of
//! the tests under faults ([`history`]). The binaries
//! (`ringrep-demo`, `ringrep-mysqltest`, `ringrep-bench`, whose `peers` module holds the
//! side-by-side benchmark against MariaDB and Redis) are in `src/bin/`; the end-to-end tests
//! live in `tests/`.

pub mod history;
pub mod mysqltest;
pub mod pipeline;
pub mod workload;
