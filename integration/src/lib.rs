//! # integration
//!
//! End-to-end pieces of ringrep: the demo pipeline ([`pipeline`]) and its workload
//! ([`workload`]); the side-by-side benchmark against MariaDB and Redis ([`peers`]); the
//! end-to-end tests live in `tests/`.

pub mod mysqltest;
pub mod peers;
pub mod pipeline;
pub mod workload;
