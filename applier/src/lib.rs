//! # ringrep-applier
//!
//! The replica side of ringrep: [`source`] (where transactions come from: a primary's binlog
//! directory, its replication stream over the network through [`network`], or its replication
//! topic in Kafka through [`kafka`]), [`applier`] (replaying them
//! through the engine's privileged path, exactly once), and [`mod@verify`] (proving a replica
//! equals its primary, or showing where it does not).
//!
//! Starting points: an [`EventSource`] ([`BinlogDirSource`], [`NetworkSource`], [`KafkaSource`]) feeds an
//! [`Applier`] on the replica's engine; [`Applier::run`] applies until stopped, storing the
//! source position in the same commit as the rows ([`applier::read_positions`] reads it back).
//! [`verify()`] compares two engines table by table. This crate depends on the engine, not on
//! the SQL front end or the server: the replica binary (`applier/replica`) adds those.

pub mod applier;
pub mod error;
pub mod failpoint;
pub mod kafka;
pub mod network;
pub mod point_in_time;
pub mod snapshot_stream;
pub mod source;
pub mod verify;

pub use applier::{may_block, AppliedPosition, Applier, ApplyOutcome};
pub use error::{Error, Result};
pub use kafka::KafkaSource;
pub use network::{NetworkConfig, NetworkSource};
pub use point_in_time::PointInTime;
pub use snapshot_stream::SnapshotStream;
pub use source::{BinlogDirSource, EventSource, Provision, SourcedTx};
pub use verify::{verify, Report, VerifyOptions};
