//! # binlog-format
//!
//! The ringrep binlog: what a primary writes as its write-ahead log and what appliers, the
//! Kafka relay and consumers in other languages read. `docs/format.md` is the byte-level
//! reference; this crate is its Rust implementation. What consumers are given of it (MySQL
//! binlog events, the Kafka record layout, SQL text, the `ringrep-binlog` tool) is
//! `ringrep-cdc`'s, which depends on this crate and never the reverse.
//!
//! - [`value`] and [`schema`]: column values and table definitions as data.
//! - [`events`]: transactions, row and DDL events, heartbeats, segment headers.
//! - [`codec`]: the one bincode 2 configuration (and a faster decoder for transactions of row
//!   events and rows, checked against it); [`frame`]: length + CRC32C frames.
//! - [`segment`], [`reader`], [`writer`], [`tailer`]: files on disk; [`durable`]: how
//!   readers in other processes know what the writer has fsynced.
//!
//! ## Starting points
//!
//! - [`Record`] is what one frame of a segment holds: a [`Transaction`] (its [`Event`]s are
//!   [`RowEvent`]s and [`DdlEvent`]s) or a [`Heartbeat`]. Rows are `Vec<`[`Value`]`>` in
//!   table column order; [`Key`] orders and hashes primary keys.
//! - [`TableDef`] describes a table; a [`Schema`] is the set of them, rebuilt from a
//!   [`SegmentHeader`] and kept current with [`Schema::apply`].
//! - [`BinlogWriter`] appends records to a directory, rotates segments and makes commits
//!   durable as its [`SyncPolicy`] says; [`WriterOptions`] configures it.
//! - [`BinlogReader`] reads a whole directory (or one segment file) once, oldest record
//!   first; [`Tailer`] follows one as it grows. Both give each record's [`Position`].
//! - [`codec::encode`], [`codec::decode_record`] and [`frame::write_frame`] /
//!   [`frame::scan_frame`] work on bytes without files, for Kafka and tests.
//! - Every fallible call returns [`Result`], whose [`Error`] tells corruption, torn tails and
//!   sequence gaps apart from I/O errors.
//!
//! ## Example
//!
//! Write a transaction into a fresh binlog directory and read it back:
//!
//! ```
//! use binlog_format::{
//!     BinlogReader, BinlogWriter, Cause, Event, ReaderOptions, Record, RowChange, RowEvent,
//!     Transaction, Value, WriterOptions,
//! };
//!
//! let dir = tempfile::tempdir()?;
//! let tx = Transaction {
//!     server_id: 1,
//!     seq: 1,
//!     commit_time_us: 1_700_000_000_000_000,
//!     origin: None,
//!     events: vec![Event::Row(RowEvent {
//!         table_id: 7,
//!         change: RowChange::Write {
//!             row: vec![Value::Int(42), Value::Text("hello".into())],
//!         },
//!         cause: Cause::Insert,
//!     })],
//! };
//!
//! // `append` buffers the record; `commit` returns once it is durable (by default, fsynced).
//! let (writer, recovered) = BinlogWriter::open(dir.path(), WriterOptions::new(1))?;
//! assert_eq!(recovered.last_seq, 0, "a new binlog");
//! let lsn = writer.append(&Record::Transaction(tx.clone()))?;
//! writer.commit(lsn)?;
//! drop(writer);
//!
//! // The reader yields each record with its position, then ends.
//! let mut reader = BinlogReader::open(dir.path(), ReaderOptions::default())?;
//! let (position, record) = reader.next().expect("one record")?;
//! assert_eq!(record, Record::Transaction(tx));
//! assert_eq!(position.segment, 1);
//! assert!(position.to_string().starts_with("binlog.000001:"));
//! assert!(reader.next().is_none());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod codec;
pub mod collation;
pub mod durable;
pub mod error;
pub mod events;
pub mod failpoint;
mod fast_codec;
pub mod format;
pub mod frame;
mod notifier;
mod position;
pub mod reader;
pub mod schema;
pub mod segment;
pub mod tailer;
pub mod value;
pub mod writer;

pub use error::{Error, Result};
pub use events::{
    Cause, DdlEvent, Event, Heartbeat, Origin, Record, RowChange, RowEvent, SegmentHeader,
    Transaction,
};
pub use notifier::{Notifier, Past};
pub use position::Position;
pub use reader::{BinlogReader, ReaderOptions, RecoveryMode};
pub use schema::{ColumnDef, ColumnType, Schema, TableDef};
pub use tailer::{StartAt, Tailer};
pub use value::{Key, Value};
pub use writer::{BinlogWriter, SyncPolicy, WriterOptions};
