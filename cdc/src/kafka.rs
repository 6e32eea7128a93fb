//! The Kafka record layout (no Kafka client here). See `docs/kafka.md`.
//!
//! - Replication topic `<prefix>.replication`: one record per transaction, one partition.
//!   Key: the server id as decimal text. Value: one frame exactly as in a segment (length,
//!   CRC32C, bincode payload of a `Record`). Headers: `ringrep.seq`, `ringrep.server_id`,
//!   `ringrep.format_version`, all decimal text.
//! - Change topics `<prefix>.<database>.<table>`: one record per row event, the value a JSON
//!   envelope, the key the JSON of the full primary key, the partition chosen by murmur2 of the
//!   JSON of the primary-key prefix, as Kafka's own default partitioner would for that key.

use serde_json::{json, Map, Value as Json};

use binlog_format::error::{Position, Result};
use binlog_format::events::{Record, RowChange, RowEvent, Transaction};
use binlog_format::format::FormatVersion;
use binlog_format::frame::write_frame_with;
use binlog_format::schema::TableDef;
use binlog_format::value::{format_datetime, DateTime, Value};

/// The default topic prefix, which gives the topics `ringrep.replication` and
/// `ringrep.<database>.<table>`.
pub const DEFAULT_TOPIC_PREFIX: &str = "ringrep";

/// The replication topic's name: `<prefix>.replication`.
pub fn replication_topic(prefix: &str) -> String {
    format!("{prefix}.replication")
}

/// The change topic of a table: `<prefix>.<database>.<table>`, names used as they are.
pub fn change_topic(prefix: &str, database: &str, table: &str) -> String {
    format!("{prefix}.{database}.{table}")
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

/// The replication-topic record of one transaction.
pub fn replication_record(prefix: &str, tx: &Transaction) -> Result<KafkaRecord> {
    let mut value = Vec::new();
    write_frame_with(&mut value, |p| {
        binlog_format::codec::encode_transaction_record_into(tx, p)
    })?;
    Ok(KafkaRecord {
        topic: replication_topic(prefix),
        partition: Some(0),
        key: tx.server_id.to_string().into_bytes(),
        value: Some(value),
        headers: vec![
            ("ringrep.seq".into(), tx.seq.to_string()),
            ("ringrep.server_id".into(), tx.server_id.to_string()),
            (
                "ringrep.format_version".into(),
                (FormatVersion::CURRENT as u16).to_string(),
            ),
        ],
    })
}

/// Decodes a replication-topic value back into its transaction, checking the frame.
pub fn decode_replication_value(value: &[u8]) -> Result<Transaction> {
    let corrupt = |reason: String| binlog_format::error::Error::Corruption {
        position: Position::default(),
        reason,
    };
    match binlog_format::frame::scan_frame(value, binlog_format::format::DEFAULT_MAX_FRAME) {
        binlog_format::frame::FrameScan::Frame { payload, len } if len == value.len() => {
            match binlog_format::codec::decode_record(payload)? {
                Record::Transaction(tx) => Ok(tx),
                Record::Heartbeat(_) => Err(corrupt("heartbeat on the replication topic".into())),
            }
        }
        binlog_format::frame::FrameScan::Frame { .. } => {
            Err(corrupt("bytes after the frame".into()))
        }
        binlog_format::frame::FrameScan::Incomplete { .. } => {
            Err(corrupt("truncated frame".into()))
        }
        binlog_format::frame::FrameScan::Corrupt { reason, .. } => Err(corrupt(reason)),
    }
}

/// A value as JSON: integers as numbers, DECIMAL as a string (no precision lost), bytes as
/// lowercase hex, DATE `YYYY-MM-DD`, DATETIME `YYYY-MM-DD HH:MM:SS.ffffff`, TIMESTAMP as UTC
/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, JSON embedded as JSON, non-finite floats as strings.
pub fn value_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Int(i) => json!(i),
        Value::UInt(u) => json!(u),
        Value::Float(f) if f.is_finite() => json!(f),
        Value::Double(f) if f.is_finite() => json!(f),
        Value::Float(f) => json!(f.to_string()),
        Value::Double(f) => json!(f.to_string()),
        Value::Decimal(s) | Value::Text(s) => json!(s),
        Value::Bytes(b) => json!(b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
        Value::Date(d) => json!(d.to_string()),
        Value::DateTime(dt) => json!(format_datetime(dt, 6)),
        Value::Timestamp(us) => {
            json!(format_datetime(&DateTime::from_epoch_micros(*us), 6).replace(' ', "T") + "Z")
        }
        Value::Json(s) => serde_json::from_str(s).unwrap_or_else(|_| json!(s)),
    }
}

fn columns_json(table: &TableDef, positions: &[usize], values: &[Value]) -> Json {
    let mut m = Map::new();
    for (&pos, v) in positions.iter().zip(values) {
        if let Some(c) = table.columns.get(pos) {
            m.insert(c.name.clone(), value_json(v));
        }
    }
    Json::Object(m)
}

fn row_json(table: &TableDef, row: &[Value]) -> Json {
    let all: Vec<usize> = (0..table.columns.len()).collect();
    columns_json(table, &all, row)
}

/// Murmur2 as Kafka's Java client computes it (seed 0x9747b28c), for partition choice.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len() as u32;
    let mut h: u32 = 0x9747_b28c ^ len;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition for a prefix key: `(murmur2(bytes) & 0x7fffffff) % partitions`.
pub fn partition_for(prefix_key: &[u8], partitions: i32) -> i32 {
    (murmur2(prefix_key) & 0x7fff_ffff) % partitions.max(1)
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
    /// Index of the row event within its transaction.
    pub index: u32,
}

/// The change-topic records of one row event: the envelope, then a tombstone after a delete
/// when `tombstones` is set.
pub fn change_records(
    prefix: &str,
    table: &TableDef,
    ev: &RowEvent,
    src: &SourceInfo,
    partitions: i32,
    tombstones: bool,
) -> Vec<KafkaRecord> {
    let (key_values, after, before) = match &ev.change {
        RowChange::Write { row } => (table.key_of(row), Some(row_json(table, row)), None),
        RowChange::Update { key, after, before } => (
            key.clone(),
            Some(row_json(table, after)),
            before.as_ref().map(|b| row_json(table, b)),
        ),
        RowChange::Delete { key } => (key.clone(), None, None),
    };
    // Keys compare by the text collation: 'Bob' and 'bob' are one row (or one ring), so the
    // record key and the partition take text in its folded form, and every change of that
    // row has one record key and one partition whatever case its statement used. The
    // envelope's `key` keeps the values as stored, for sinks that look rows up by them.
    let folded: Vec<Value> = key_values
        .iter()
        .map(|v| match v {
            Value::Text(s) => Value::Text(binlog_format::collation::folded(s)),
            other => other.clone(),
        })
        .collect();
    let record_key = columns_json(table, &table.primary_key, &folded);
    let key = columns_json(table, &table.primary_key, &key_values);
    let prefix_len = table.prefix_columns().len();
    let prefix_key = columns_json(
        table,
        &table.primary_key[..prefix_len],
        &folded[..prefix_len.min(folded.len())],
    );
    let partition = partition_for(prefix_key.to_string().as_bytes(), partitions);
    let mut envelope = json!({
        "op": ev.op_name(),
        "database": table.database,
        "table": table.name,
        "key": key,
        "after": after,
        "cause": ev.cause.name(),
        "source": {
            "server_id": src.server_id,
            "seq": src.seq,
            "segment": binlog_format::segment::segment_name(src.position.segment),
            "offset": src.position.offset,
            "commit_time_us": src.commit_time_us,
            "index": src.index,
        },
    });
    if let (Some(b), Some(obj)) = (before, envelope.as_object_mut()) {
        obj.insert("before".into(), b);
    }
    let topic = change_topic(prefix, &table.database, &table.name);
    let key_bytes = record_key.to_string().into_bytes();
    let mut out = vec![KafkaRecord {
        topic: topic.clone(),
        partition: Some(partition),
        key: key_bytes.clone(),
        value: Some(envelope.to_string().into_bytes()),
        headers: vec![("ringrep.seq".into(), src.seq.to_string())],
    }];
    if tombstones && matches!(ev.change, RowChange::Delete { .. }) {
        out.push(KafkaRecord {
            topic,
            partition: Some(partition),
            key: key_bytes,
            value: None,
            headers: vec![],
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::events::samples;
    use binlog_format::events::Cause;

    #[test]
    fn murmur2_matches_kafka_reference_values() {
        // Values from Kafka's own UtilsTest for murmur2.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
    }

    #[test]
    fn replication_value_round_trips() {
        for tx in samples::transactions() {
            let rec = replication_record("ringrep", &tx).expect("record");
            assert_eq!(rec.topic, "ringrep.replication");
            let back =
                decode_replication_value(rec.value.as_deref().expect("value")).expect("decode");
            assert_eq!(back, tx);
        }
    }

    /// Where the tests' events sit: server 1, seq 5, segment 1 at 100.
    fn source() -> SourceInfo {
        SourceInfo {
            server_id: 1,
            seq: 5,
            position: Position {
                segment: 1,
                offset: 100,
            },
            commit_time_us: 0,
            index: 0,
        }
    }

    #[test]
    fn envelope_keys_by_full_key_and_partitions_by_prefix() {
        let t = samples::table();
        let row = |slot: i64| {
            vec![
                Value::Int(9),
                Value::Int(slot),
                Value::Null,
                Value::Timestamp(0),
                Value::Text("x".into()),
            ]
        };
        let src = source();
        let a = change_records(
            "ringrep",
            &t,
            &RowEvent {
                table_id: 7,
                change: RowChange::Write { row: row(1) },
                cause: Cause::Insert,
            },
            &src,
            12,
            true,
        );
        let b = change_records(
            "ringrep",
            &t,
            &RowEvent {
                table_id: 7,
                change: RowChange::Delete {
                    key: vec![Value::Int(9), Value::Int(2)],
                },
                cause: Cause::TtlPurge,
            },
            &src,
            12,
            true,
        );
        assert_eq!(a.len(), 1);
        assert_eq!(b.len(), 2, "delete followed by a tombstone");
        assert_eq!(a[0].partition, b[0].partition, "one prefix, one partition");
        assert_eq!(
            String::from_utf8_lossy(&a[0].key),
            r#"{"ring_idx":1,"user_id":9}"#
        );
        let env: Json =
            serde_json::from_slice(a[0].value.as_deref().expect("value")).expect("json");
        assert_eq!(env["op"], "write");
        assert_eq!(env["after"]["created_at"], "1970-01-01T00:00:00.000000Z");
        let del: Json =
            serde_json::from_slice(b[0].value.as_deref().expect("value")).expect("json");
        assert_eq!(del["op"], "delete");
        assert_eq!(del["cause"], "ttl_purge");
        assert!(b[1].value.is_none());
    }

    /// A text key is one key whatever case a statement wrote it in (keys compare so): the
    /// records of 'Bob' and 'BÖB' share key and partition, and `after` keeps what was written.
    #[test]
    fn text_keys_are_keyed_and_partitioned_by_their_folded_form() {
        let mut t = samples::table();
        t.columns[0].ty = binlog_format::schema::ColumnType::VarChar { len: 20 };
        let src = source();
        let write = |user: &str| {
            let row = vec![
                Value::Text(user.into()),
                Value::Int(1),
                Value::Null,
                Value::Timestamp(0),
                Value::Text("x".into()),
            ];
            let ev = RowEvent {
                table_id: 7,
                change: RowChange::Write { row },
                cause: Cause::Overwrite,
            };
            change_records("ringrep", &t, &ev, &src, 12, false).remove(0)
        };
        let (a, b) = (write("Bob"), write("BÖB"));
        assert_eq!(
            String::from_utf8_lossy(&a.key),
            r#"{"ring_idx":1,"user_id":"bob"}"#
        );
        assert_eq!(a.key, b.key);
        assert_eq!(a.partition, b.partition);
        let env: Json = serde_json::from_slice(b.value.as_deref().expect("value")).expect("json");
        assert_eq!(env["after"]["user_id"], "BÖB");
        assert_eq!(env["key"]["user_id"], "BÖB", "the envelope's key as stored");
    }
}
