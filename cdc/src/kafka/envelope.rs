//! ringrep's own change-record envelope: `op`, `key`, `after`, `before`, the ring's `cause`,
//! `source` (where the event is in the primary's binlog), `transaction` (its place in the
//! transaction) and `schema_version`. Values as [`super::value_json`] writes them.

use serde_json::{json, Value as Json};

use binlog_format::events::{RowChange, RowEvent};
use binlog_format::schema::TableDef;
use binlog_format::value::Value;

use super::json::columns_json;
use super::partition::RowKey;
use super::{change_topic, ChangeOptions, KafkaRecord, SourceInfo, TxPlace, SEQ_HEADER};

fn row_json(table: &TableDef, row: &[Value]) -> Json {
    let all: Vec<usize> = (0..table.columns.len()).collect();
    columns_json(table, &all, row)
}

/// The `transaction` block: the transaction's id and the event's place in it.
pub(crate) fn transaction_json(src: &SourceInfo) -> Json {
    let TxPlace {
        total_order,
        table_order,
        total_events,
        table_events,
    } = src.place;
    json!({
        "id": transaction_id(src.server_id, src.seq),
        "seq": src.seq,
        "total_order": total_order,
        "data_collection_order": table_order,
        "event_count": total_events,
        "data_collection_event_count": table_events,
    })
}

/// A transaction's id as the envelopes and the transaction topic write it:
/// `<server_id>:<seq>`.
pub fn transaction_id(server_id: u32, seq: u64) -> String {
    format!("{server_id}:{seq}")
}

/// The change records of one row event in ringrep's envelope: the change, then a tombstone
/// after a delete when `opts.tombstones` is set.
pub(crate) fn change_records(
    table: &TableDef,
    ev: &RowEvent,
    src: &SourceInfo,
    opts: &ChangeOptions<'_>,
) -> Vec<KafkaRecord> {
    let key = RowKey::of(table, &ev.change, opts.partitions);
    let (after, before) = match &ev.change {
        RowChange::Write { row } => (Some(row_json(table, row)), None),
        RowChange::Update { after, before, .. } => (
            Some(row_json(table, after)),
            before.as_ref().map(|b| row_json(table, b)),
        ),
        RowChange::Delete { .. } => (None, None),
    };
    let (op, cause, transaction) = if src.snapshot {
        ("read", "snapshot", Json::Null)
    } else {
        (ev.op_name(), ev.cause.name(), transaction_json(src))
    };
    let mut envelope = json!({
        "op": op,
        "database": table.database,
        "table": table.name,
        "key": columns_json(table, &table.primary_key, &key.stored),
        "after": after,
        "cause": cause,
        "source": {
            "server_id": src.server_id,
            "seq": src.seq,
            "segment": binlog_format::segment::segment_name(src.position.segment),
            "offset": src.position.offset,
            "commit_time_us": src.commit_time_us,
            "index": src.index,
        },
        "transaction": transaction,
        "schema_version": opts.schema_version,
    });
    if let (Some(b), Some(obj)) = (before, envelope.as_object_mut()) {
        obj.insert("before".into(), b);
    }
    let topic = change_topic(opts.prefix, &table.database, &table.name);
    let key_bytes = columns_json(table, &table.primary_key, &key.folded)
        .to_string()
        .into_bytes();
    let mut out = vec![KafkaRecord {
        topic: topic.clone(),
        partition: Some(key.partition),
        key: key_bytes.clone(),
        value: Some(envelope.to_string().into_bytes()),
        headers: vec![(SEQ_HEADER.into(), src.seq.to_string())],
    }];
    if opts.tombstones && matches!(ev.change, RowChange::Delete { .. }) {
        out.push(KafkaRecord {
            topic,
            partition: Some(key.partition),
            key: key_bytes,
            value: None,
            headers: vec![(SEQ_HEADER.into(), src.seq.to_string())],
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::Format;
    use binlog_format::error::Position;
    use binlog_format::events::samples;
    use binlog_format::events::Cause;

    fn opts(tombstones: bool) -> ChangeOptions<'static> {
        ChangeOptions {
            prefix: "ringrep",
            partitions: 12,
            tombstones,
            format: Format::Ringrep,
            schema_version: "v1",
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
            place: TxPlace {
                total_order: 1,
                table_order: 1,
                total_events: 2,
                table_events: 2,
            },
            snapshot: false,
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
            &t,
            &RowEvent {
                table_id: 7,
                change: RowChange::Write { row: row(1) },
                cause: Cause::Insert,
            },
            &src,
            &opts(true),
        );
        let b = change_records(
            &t,
            &RowEvent {
                table_id: 7,
                change: RowChange::Delete {
                    key: vec![Value::Int(9), Value::Int(2)],
                },
                cause: Cause::TtlPurge,
            },
            &src,
            &opts(true),
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
            change_records(&t, &ev, &src, &opts(false)).remove(0)
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
