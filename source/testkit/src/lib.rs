//! # ringrep-testkit
//!
//! Helpers the test suites of several crates share, so that none of them includes another's
//! files: [`engine`] (an engine on a manual clock, ring and plain table definitions, a
//! reference model of rings), [`node`] (`ringrep-source serve` and `ringrep-applier serve` as
//! real processes, with a client), [`converge`] (waiting for a replica's position and
//! verifying two nodes over `mysql://`), [`broker`] (the Kafka broker of a test: a real one
//! named by `RINGREP_TEST_KAFKA_BROKERS`, or librdkafka's in-process mock cluster), and
//! [`faults`] (a small filesystem that fills up). Every process test starts its nodes and
//! checks them through these, so a change to how a node starts is made once.

pub mod broker;
pub mod converge;
/// The engine fixtures (they live in `ringrep-model`, which the fuzz targets build without
/// this crate's Kafka and MySQL clients).
pub use ringrep_model::fixtures as engine;
pub mod faults;
pub mod node;
pub mod raw;
