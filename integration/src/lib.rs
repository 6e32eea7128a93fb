//! # integration
//!
//! End-to-end pieces of ringrep: the demo pipeline ([`pipeline`]) and its workload
//! ([`workload`]); the end-to-end tests live in `tests/`.

pub mod mysqltest;
pub mod pipeline;
pub mod workload;
