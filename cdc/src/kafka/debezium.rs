//! Change records as Debezium's MySQL connector writes them, so that consumers built for
//! Debezium (the ExtractNewRecordState SMT, the JDBC sink, ...) read ringrep's change topics
//! unchanged: with `schemas`, key and value are each `{"schema": ..., "payload": ...}` as
//! Kafka Connect's JsonConverter writes them (`schemas.enable=true`); without, the payload
//! alone.
//!
//! - **Key**: the primary-key columns as a struct `<prefix>.<db>.<table>.Key`, text in its
//!   collation's folded form (as ringrep's own envelope keys, see [`super::partition`]), so a
//!   row has one record key however its statements spelt it.
//! - **Value**: the envelope `<prefix>.<db>.<table>.Envelope` (version 2): `before`, `after`
//!   (structs `<prefix>.<db>.<table>.Value`), `source` (`io.debezium.connector.mysql.Source`),
//!   `transaction` (`event.block`), `op`, `ts_ms`, `ts_us`, `ts_ns`. The field lists are those
//!   Debezium 3.6 builds for the same table. `source` adds three optional fields of ringrep's:
//!   `ringrep_seq`, `ringrep_cause` (`insert`, `overwrite`, `meta_update`, `update`,
//!   `prefix_delete`, `ttl_purge`, `delete_oldest`, `truncate`, `delete`) and
//!   `ringrep_schema_version`; `file` is the binlog segment, `pos` the transaction's offset in
//!   it, `row` the event's index in the transaction.
//! - **op**: a first insert is `c`; every other write (a ring overwrite, a meta-row write, an
//!   update logged as a write) is `u` with `before` null, since the log holds no before image
//!   for it; an update is `u`, with `before` when the primary logged one; a delete is `d`. An
//!   update that moves a row to another primary key is, as Debezium writes it, a `d` under the
//!   old key (and its tombstone) and then a `c` under the new one, so keyed consumers and
//!   compaction see the old key go.
//! - **Deletes** log only the primary key, so a delete's `before` holds the key columns and
//!   null in every other column. For that to be valid, every column outside the primary key
//!   is `optional` in the row schema, NOT NULL ones too (Debezium marks those required).
//! - **Times**: `ts_ms` (and `source.ts_ms`) is the transaction's commit time, not the time
//!   the record was made as in Debezium, so that the same binlog always gives the same
//!   records (a relay that restarts writes them again byte for byte).
//!
//! Column types map as Debezium MySQL's defaults do (checked against Debezium 3.6.3's
//! `MySqlValueConverters`), except DECIMAL, which is a string as with
//! `decimal.handling.mode=string`:
//!
//! | MySQL | Connect type | schema name |
//! |---|---|---|
//! | TINYINT (also TINYINT(1), BOOL), TINYINT UNSIGNED, SMALLINT | int16 | |
//! | SMALLINT UNSIGNED, MEDIUMINT (either), INT | int32 | |
//! | INT UNSIGNED, BIGINT | int64 | |
//! | BIGINT UNSIGNED | int64, above 2^63-1 wrapped to negative (`bigint.unsigned.handling.mode=long`) | |
//! | DECIMAL | string | |
//! | FLOAT / DOUBLE | float / double | |
//! | CHAR, VARCHAR, TEXT | string | |
//! | BINARY, VARBINARY, BLOB | bytes (base64 in JSON) | |
//! | JSON | string, the document's text | `io.debezium.data.Json` |
//! | ENUM / SET | string, parameter `allowed` | `io.debezium.data.Enum` / `io.debezium.data.EnumSet` |
//! | YEAR | int32 | `io.debezium.time.Year` |
//! | DATE | int32, days since 1970-01-01 | `io.debezium.time.Date` |
//! | DATETIME(0..3) | int64, ms since the epoch read as UTC | `io.debezium.time.Timestamp` |
//! | DATETIME(4..6) | int64, µs since the epoch read as UTC | `io.debezium.time.MicroTimestamp` |
//! | TIMESTAMP | string, ISO-8601 UTC with `Z` and fsp fraction digits | `io.debezium.time.ZonedTimestamp` |
//!
//! Zero dates are null in a nullable column, the epoch otherwise, as in Debezium. Column
//! defaults are not in the schemas: JsonConverter would put a default in place of every
//! null it reads.

mod payload;
mod schema;

use serde_json::{json, Value as Json};

use binlog_format::events::{Cause, RowChange, RowEvent};
use binlog_format::schema::TableDef;

use super::envelope::transaction_id;
use super::partition::RowKey;
use super::{change_topic, ChangeOptions, KafkaRecord, SourceInfo, SEQ_HEADER};

/// A table's key and value schemas as JsonConverter embeds them, as JSON text. They are the
/// same for every record of one table definition: a relay that keeps them per definition
/// (`ChangeOptions::debezium_schemas`) writes them once instead of building and printing two
/// JSON trees for every record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebeziumSchemas {
    key: String,
    value: String,
}

impl DebeziumSchemas {
    /// The schemas of `table`'s records under topic prefix `prefix`.
    pub fn of(prefix: &str, table: &TableDef) -> DebeziumSchemas {
        DebeziumSchemas {
            key: schema::key_schema(prefix, table).to_string(),
            value: schema::envelope_schema(prefix, table).to_string(),
        }
    }
}

/// `{"schema": <schema>, "payload": <payload>}` as JsonConverter writes it, from the schema's
/// JSON text.
fn with_schema(schema: &str, payload: &Json) -> Vec<u8> {
    let payload = payload.to_string();
    let mut out = Vec::with_capacity(schema.len() + payload.len() + 24);
    out.extend_from_slice(b"{\"schema\":");
    out.extend_from_slice(schema.as_bytes());
    out.extend_from_slice(b",\"payload\":");
    out.extend_from_slice(payload.as_bytes());
    out.push(b'}');
    out
}

/// What `source.version` names: the ringrep release that wrote the record.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The change records of one row event in Debezium's format, with JsonConverter's schemas
/// when `schemas` is set: the change, then a tombstone after a delete when `opts.tombstones`
/// is set (an update that changes the primary key gives a delete, its tombstone and a create).
pub(crate) fn change_records(
    table: &TableDef,
    ev: &RowEvent,
    src: &SourceInfo,
    opts: &ChangeOptions<'_>,
    schemas: bool,
) -> Vec<KafkaRecord> {
    let w = Writer {
        table,
        cause: ev.cause,
        src,
        opts,
        schemas: schemas.then(|| match opts.debezium_schemas {
            Some(kept) => std::borrow::Cow::Borrowed(kept),
            None => std::borrow::Cow::Owned(DebeziumSchemas::of(opts.prefix, table)),
        }),
        topic: change_topic(opts.prefix, &table.database, &table.name),
    };
    let key = RowKey::of(table, &ev.change, opts.partitions);
    match &ev.change {
        RowChange::Write { row } => {
            let op = match (src.snapshot.is_read(), ev.cause) {
                (true, _) => "r",
                (false, Cause::Insert) => "c",
                (false, _) => "u",
            };
            vec![w.change(&key, op, Json::Null, payload::row(table, row))]
        }
        RowChange::Update { after, before, .. } => {
            let before = before.as_ref().map(|b| payload::row(table, b));
            let moved_to = RowKey::of(
                table,
                &RowChange::Write { row: after.clone() },
                opts.partitions,
            );
            if moved_to.folded == key.folded {
                let before = before.unwrap_or(Json::Null);
                return vec![w.change(&key, "u", before, payload::row(table, after))];
            }
            let before = before.unwrap_or_else(|| payload::key_only_row(table, &key.stored));
            let mut out = w.delete(&key, before);
            out.push(w.change(&moved_to, "c", Json::Null, payload::row(table, after)));
            out
        }
        RowChange::Delete { .. } => w.delete(&key, payload::key_only_row(table, &key.stored)),
    }
}

/// What every record of one row event shares.
struct Writer<'a> {
    table: &'a TableDef,
    cause: Cause,
    src: &'a SourceInfo,
    opts: &'a ChangeOptions<'a>,
    /// The key and value schemas, when they are embedded.
    schemas: Option<std::borrow::Cow<'a, DebeziumSchemas>>,
    topic: String,
}

impl Writer<'_> {
    /// A record keyed by `key` with the envelope of `op`.
    fn change(&self, key: &RowKey, op: &str, before: Json, after: Json) -> KafkaRecord {
        let src = self.src;
        let us = src.commit_time_us;
        let ms = us.div_euclid(1000);
        let ns = us.saturating_mul(1000);
        let envelope = json!({
            "before": before,
            "after": after,
            "source": {
                "version": VERSION,
                "connector": "ringrep",
                "name": self.opts.prefix,
                "ts_ms": ms,
                "snapshot": src.snapshot.debezium_name(),
                "db": self.table.database,
                "sequence": null,
                "ts_us": us,
                "ts_ns": ns,
                "table": self.table.name,
                "server_id": src.server_id,
                "gtid": null,
                "file": binlog_format::segment::segment_name(src.position.segment),
                "pos": src.position.offset,
                "row": src.index,
                "thread": null,
                "query": null,
                "ringrep_seq": src.seq,
                "ringrep_cause": src.snapshot.cause().unwrap_or(self.cause.name()),
                "ringrep_schema_version": self.opts.schema_version,
            },
            "transaction": if src.snapshot.is_read() { Json::Null } else { json!({
                "id": transaction_id(src.server_id, src.seq),
                "total_order": src.place.total_order,
                "data_collection_order": src.place.table_order,
            }) },
            "op": op,
            "ts_ms": ms,
            "ts_us": us,
            "ts_ns": ns,
        });
        let value = match &self.schemas {
            Some(s) => with_schema(&s.value, &envelope),
            None => envelope.to_string().into_bytes(),
        };
        self.record(key, Some(value))
    }

    /// The delete of `key` (whose row was `before`), then its tombstone if asked for.
    fn delete(&self, key: &RowKey, before: Json) -> Vec<KafkaRecord> {
        let mut out = vec![self.change(key, "d", before, Json::Null)];
        if self.opts.tombstones {
            out.push(self.record(key, None));
        }
        out
    }

    fn record(&self, key: &RowKey, value: Option<Vec<u8>>) -> KafkaRecord {
        let fields = payload::columns(self.table, &self.table.primary_key, &key.folded);
        let key_bytes = match &self.schemas {
            Some(s) => with_schema(&s.key, &fields),
            None => fields.to_string().into_bytes(),
        };
        KafkaRecord {
            topic: self.topic.clone(),
            partition: Some(key.partition),
            key: key_bytes,
            value,
            headers: vec![(SEQ_HEADER.into(), self.src.seq.to_string())],
        }
    }
}

#[cfg(test)]
mod tests;
