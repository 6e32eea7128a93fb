//! # ringrep-source
//!
//! The ringrep primary: the ring engine ([`engine`]) that implements
//! `rondb-ring-buffer-tables.md`, its value types ([`types`]) and ring rules ([`ring`]), and
//! the binlog it writes as its write-ahead log.

pub mod clock;
pub mod ddl;
pub mod engine;
pub mod error;
pub mod relay;
pub mod ring;
pub mod server;
pub mod sql;
pub mod types;
pub mod writer;

pub use engine::{Engine, EngineConfig, InsertMode, OpenReport, Session, SessionVars};
pub use error::{Error, Result};
