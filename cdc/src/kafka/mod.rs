//! The Kafka record layout (no Kafka client here). See `docs/kafka.md`.
//!
//! - Replication topic `<prefix>.replication` ([`replication`]): one record per transaction,
//!   one partition. Key: the server id as decimal text. Value: one frame exactly as in a
//!   segment (length, CRC32C, bincode payload of a `Record`).
//! - Change topics `<prefix>.<database>.<table>`: one record per row event, keyed by the JSON
//!   of the full primary key and partitioned by murmur2 of the JSON of the primary-key prefix
//!   ([`partition`]), the value in one of the [`Format`]s: ringrep's own envelope
//!   ([`envelope`]) or Debezium's ([`debezium`]).
//! - Transaction topic `<prefix>.transaction` ([`transaction`]): a BEGIN and an END record per
//!   transaction with row events, the END counting the events per table.
//! - Schema topic `<prefix>.schema-changes` ([`schema`]): every DDL with its statement, the
//!   table's definition after it and its schema version.
//! - Heartbeat topic `<prefix>.heartbeat` ([`heartbeat`]): the stream's position and the time,
//!   while the stream is idle.
//!
//! Every record but heartbeats carries the headers `ringrep.seq` (its transaction) and
//! `ringrep.order` (its place among the records of that transaction), which together order
//! the records of one partition: the relay resumes after the last pair a partition holds.

pub mod debezium;
pub mod envelope;
pub mod heartbeat;
mod json;
pub mod partition;
pub mod replication;
pub mod schema;
pub mod transaction;

use binlog_format::error::Position;
use binlog_format::events::RowEvent;
use binlog_format::schema::TableDef;

pub use debezium::DebeziumSchemas;
pub use json::value_json;
pub use partition::{murmur2, partition_for};
pub use replication::{decode_replication_value, replication_record};

/// The default topic prefix, which gives the topics `ringrep.replication` and
/// `ringrep.<database>.<table>`.
pub const DEFAULT_TOPIC_PREFIX: &str = "ringrep";

/// Header: the sequence number of the transaction a record belongs to (decimal text).
pub const SEQ_HEADER: &str = "ringrep.seq";

/// Header: the record's place among the records the relay produces for its transaction,
/// from 0, across all topics (decimal text).
pub const ORDER_HEADER: &str = "ringrep.order";

/// The replication topic's name: `<prefix>.replication`.
pub fn replication_topic(prefix: &str) -> String {
    format!("{prefix}.replication")
}

/// The change topic of a table: `<prefix>.<database>.<table>`, names used as they are.
pub fn change_topic(prefix: &str, database: &str, table: &str) -> String {
    format!("{prefix}.{database}.{table}")
}

/// The transaction topic's name: `<prefix>.transaction`.
pub fn transaction_topic(prefix: &str) -> String {
    format!("{prefix}.transaction")
}

/// The schema-change topic's name: `<prefix>.schema-changes`.
pub fn schema_topic(prefix: &str) -> String {
    format!("{prefix}.schema-changes")
}

/// The heartbeat topic's name: `<prefix>.heartbeat`.
pub fn heartbeat_topic(prefix: &str) -> String {
    format!("{prefix}.heartbeat")
}

/// A record ready to hand to a producer.
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaRecord {
    /// The topic to produce to.
    pub topic: String,
    /// The partition to produce to (this crate always sets it; `None` would leave the
    /// choice to the producer).
    pub partition: Option<i32>,
    /// The record key's bytes: the server id as decimal text on the replication topic, the
    /// JSON of the full primary key on a change topic.
    pub key: Vec<u8>,
    /// `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    /// Record headers, name and value, in order; values are decimal text.
    pub headers: Vec<(String, String)>,
}

/// A row event's place in its transaction, so that a consumer can tell when it holds the
/// whole of a transaction, per table or across tables. Places count row events only (not
/// DDL, not tombstones) and start at 1, as Debezium's `total_order` and
/// `data_collection_order` do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxPlace {
    /// The event's place among the transaction's row events.
    pub total_order: u64,
    /// The event's place among the transaction's row events of the same table.
    pub table_order: u64,
    /// How many row events the transaction has.
    pub total_events: u64,
    /// How many row events of this table the transaction has.
    pub table_events: u64,
}

/// Where a row event sits in the stream, for the envelope's `source`.
#[derive(Debug, Clone, Copy)]
pub struct SourceInfo {
    /// The server that wrote the transaction.
    pub server_id: u32,
    /// The transaction's sequence number.
    pub seq: u64,
    /// Where the transaction's record is in the binlog.
    pub position: Position,
    /// The transaction's commit time, microseconds since the Unix epoch.
    pub commit_time_us: i64,
    /// Index of the event within its transaction (DDL events counted).
    pub index: u32,
    /// The event's place among the transaction's row events.
    pub place: TxPlace,
    /// Which snapshot the row is read by, if any (`seq` is then the snapshot's): such a
    /// record is a read of the row as it stood then (`op` `read`, Debezium's `r`), not a
    /// change, and belongs to no transaction.
    pub snapshot: Snapshot,
}

/// Whether a change record is a change of a transaction or a read of a row by a snapshot,
/// and by which kind of snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Snapshot {
    /// A change made by a transaction.
    #[default]
    None,
    /// A row of a snapshot of every table at one sequence number, sent before the changes
    /// after it (`--kafka-snapshot`).
    Initial,
    /// A row of a chunk of an incremental snapshot of one table: read at the sequence number
    /// of the transaction it follows in the stream.
    Incremental,
}

impl Snapshot {
    /// Whether the record is a read of a row rather than a change.
    pub fn is_read(self) -> bool {
        self != Snapshot::None
    }

    /// The `cause` ringrep's envelope gives a read (`snapshot`, `incremental_snapshot`).
    pub fn cause(self) -> Option<&'static str> {
        match self {
            Snapshot::None => None,
            Snapshot::Initial => Some("snapshot"),
            Snapshot::Incremental => Some("incremental_snapshot"),
        }
    }

    /// Debezium's `source.snapshot`: `false`, `true`, or `incremental`.
    pub fn debezium_name(self) -> &'static str {
        match self {
            Snapshot::None => "false",
            Snapshot::Initial => "true",
            Snapshot::Incremental => "incremental",
        }
    }
}

/// How change records' keys and values are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// ringrep's own JSON envelope ([`envelope`]).
    #[default]
    Ringrep,
    /// Debezium's MySQL connector envelope ([`debezium`]), with or without the schemas that
    /// Kafka Connect's JsonConverter embeds (`schemas.enable`).
    Debezium {
        /// Whether each key and value is `{"schema": ..., "payload": ...}`.
        schemas: bool,
    },
}

impl Format {
    /// The format named on the command line: `ringrep`, `debezium` (schemas embedded) or
    /// `debezium-noschema`.
    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "ringrep" => Some(Format::Ringrep),
            "debezium" => Some(Format::Debezium { schemas: true }),
            "debezium-noschema" => Some(Format::Debezium { schemas: false }),
            _ => None,
        }
    }
}

/// What the change records of one row event need besides the event.
#[derive(Debug, Clone, Copy)]
pub struct ChangeOptions<'a> {
    /// The topic prefix (and Debezium's logical server name).
    pub prefix: &'a str,
    /// Partitions of the table's change topic.
    pub partitions: i32,
    /// Whether a delete is followed by a tombstone.
    pub tombstones: bool,
    /// The value format.
    pub format: Format,
    /// The table definition's version ([`schema::schema_version`]), named in every change
    /// record so that a consumer finds the definition in the schema topic.
    pub schema_version: &'a str,
    /// The table's Debezium schemas written once for its definition, when the caller keeps
    /// them ([`DebeziumSchemas::of`]); without, `Format::Debezium { schemas: true }` writes
    /// them for each record.
    pub debezium_schemas: Option<&'a DebeziumSchemas>,
}

/// The change-topic records of one row event in `opts.format`: the change, then a tombstone
/// after a delete when `opts.tombstones` is set.
pub fn change_records(
    table: &TableDef,
    ev: &RowEvent,
    src: &SourceInfo,
    opts: &ChangeOptions<'_>,
) -> Vec<KafkaRecord> {
    match opts.format {
        Format::Ringrep => envelope::change_records(table, ev, src, opts),
        Format::Debezium { schemas } => debezium::change_records(table, ev, src, opts, schemas),
    }
}
