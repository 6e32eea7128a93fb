//! # ringrep-applier
//!
//! The replica side of ringrep: [`source`] (where transactions come from), [`applier`]
//! (replaying them through the engine's privileged path, exactly once), and [`verify`]
//! (proving a replica equals its primary, or showing where it does not).

pub mod applier;
pub mod error;
pub mod failpoint;
pub mod kafka;

pub mod source;
pub mod verify;

pub use applier::{AppliedPosition, Applier, ApplyOutcome};
pub use error::{Error, Result};
pub use kafka::KafkaSource;
pub use source::{BinlogDirSource, EventSource, SourcedTx};
pub use verify::{verify, Report, VerifyOptions};
