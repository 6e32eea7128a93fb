//! # binlog-format
//!
//! The ringrep binlog: what a primary writes as its write-ahead log and what appliers, the
//! Kafka relay and consumers in other languages read. `docs/format.md` is the byte-level
//! reference; this crate is its Rust implementation.
//!
//! - [`value`] and [`schema`]: column values and table definitions as data.
//! - [`events`]: transactions, row and DDL events, heartbeats, segment headers.
//! - [`codec`]: the one bincode 2 configuration (and a faster decoder for transactions of row
//!   events and rows, checked against it); [`frame`]: length + CRC32C frames.
//! - [`segment`], [`reader`], [`writer`], [`tailer`]: files on disk.
//! - [`kafka`]: how records are laid out on Kafka topics.

pub mod codec;
pub mod error;
pub mod events;
mod fast_codec;
pub mod format;
pub mod frame;
pub mod inspect;
pub mod kafka;
pub mod reader;
pub mod schema;
pub mod segment;
pub mod tailer;
pub mod value;
pub mod writer;

pub use error::{Error, Position, Result};
pub use events::{
    Cause, DdlEvent, Event, Heartbeat, Origin, Record, RowChange, RowEvent, SegmentHeader,
    Transaction,
};
pub use reader::{BinlogReader, ReaderOptions, RecoveryMode};
pub use schema::{ColumnDef, ColumnType, Schema, TableDef};
pub use tailer::{StartAt, Tailer};
pub use value::{Key, Value};
pub use writer::{BinlogWriter, Notifier, SyncPolicy, WriterOptions};
