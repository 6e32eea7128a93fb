//! # ringrep-cdc
//!
//! What consumers outside ringrep read of its binlog: the renderings of committed
//! transactions for other programs and people, each from the records [`binlog_format`]
//! reads.
//!
//! - [`mysql_binlog`]: transactions as MySQL binlog v4 events (row based), for the tools that
//!   speak MySQL's replication protocol (Debezium, Maxwell, Canal, go-mysql, ...);
//!   `docs/cdc.md`. [`mysql_positions`]: where each transaction is in that encoding of a
//!   segment (the stream's start, SHOW BINARY LOGS, SHOW BINLOG EVENTS).
//! - [`kafka`]: how records are laid out on Kafka topics (the replication topic's frames,
//!   the change topics' JSON envelopes, partitioning); `docs/kafka.md`. No Kafka client here
//!   (that is `ringrep-kafka`).
//! - [`sql_text`]: `CREATE TABLE` statements and records as the SQL that replays them
//!   (`ringrep-binlog dump --sql`, SHOW CREATE TABLE).
//! - [`inspect`]: the `ringrep-binlog` tool's text and JSON renderings and statistics; the
//!   tool itself is this crate's binary.
//!
//! What this crate must not hold is the log itself: values, table definitions, events, the
//! codec, frames, segment files, readers, writers, tailers and durability are
//! [`binlog_format`]'s, and `binlog-format` never depends on this crate. A change here
//! changes what consumers see, never what is written to disk.

pub mod inspect;
pub mod kafka;
pub mod mysql_binlog;
pub mod mysql_positions;
pub mod sql_text;
