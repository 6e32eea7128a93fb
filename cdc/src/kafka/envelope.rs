//! ringrep's own change-record envelope: `op`, `key`, `after`, `before`, the ring's `cause`,
//! `source` (where the event is in the primary's binlog), `transaction` (its place in the
//! transaction) and `schema_version`. Values as [`super::value_json`] writes them.

use binlog_format::events::{RowChange, RowEvent};
use binlog_format::schema::TableDef;
use binlog_format::value::Value;

use super::json::{write_columns, Object};
use super::partition::RowKey;
use super::{change_topic, ChangeOptions, KafkaRecord, SourceInfo, TxPlace, SEQ_HEADER};

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
    let mut key_bytes = Vec::with_capacity(64);
    write_columns(
        &mut key_bytes,
        table,
        table.primary_key.iter().copied(),
        &key.folded,
    );
    let value = envelope(table, ev, src, opts, &key);
    let change = KafkaRecord {
        topic: change_topic(opts.prefix, &table.database, &table.name),
        partition: Some(key.partition),
        key: key_bytes,
        value: Some(value),
        headers: vec![(SEQ_HEADER.into(), src.seq.to_string())],
    };
    if opts.tombstones && matches!(ev.change, RowChange::Delete { .. }) {
        let tombstone = KafkaRecord {
            topic: change.topic.clone(),
            key: change.key.clone(),
            value: None,
            headers: change.headers.clone(),
            ..change
        };
        return vec![change, tombstone];
    }
    vec![change]
}

/// The envelope's JSON, written field by field in the order of their sorted names (the bytes
/// a serde_json map of the same fields gives; `before` only when the event has one).
fn envelope(
    table: &TableDef,
    ev: &RowEvent,
    src: &SourceInfo,
    opts: &ChangeOptions<'_>,
    key: &RowKey,
) -> Vec<u8> {
    let all_columns = |out: &mut Vec<u8>, row: &[Value]| {
        write_columns(out, table, 0..table.columns.len(), row);
    };
    let (after, before) = match &ev.change {
        RowChange::Write { row } => (Some(row), None),
        RowChange::Update { after, before, .. } => (Some(after), before.as_ref()),
        RowChange::Delete { .. } => (None, None),
    };
    let (op, cause) = match src.snapshot.cause() {
        Some(cause) => ("read", cause),
        None => (ev.op_name(), ev.cause.name()),
    };
    let mut out = Vec::with_capacity(512);
    let mut o = Object::open(&mut out);
    match after {
        Some(row) => all_columns(o.field("after"), row),
        None => o.field("after").extend_from_slice(b"null"),
    }
    if let Some(row) = before {
        all_columns(o.field("before"), row);
    }
    o.string("cause", cause);
    o.string("database", &table.database);
    write_columns(
        o.field("key"),
        table,
        table.primary_key.iter().copied(),
        &key.stored,
    );
    o.string("op", op);
    o.string("schema_version", opts.schema_version);
    {
        let mut s = Object::open(o.field("source"));
        s.number("commit_time_us", src.commit_time_us);
        s.number("index", src.index);
        s.number("offset", src.position.offset);
        s.string(
            "segment",
            &binlog_format::segment::segment_name(src.position.segment),
        );
        s.number("seq", src.seq);
        s.number("server_id", src.server_id);
        s.close();
    }
    o.string("table", &table.name);
    if src.snapshot.is_read() {
        o.field("transaction").extend_from_slice(b"null");
    } else {
        let TxPlace {
            total_order,
            table_order,
            total_events,
            table_events,
        } = src.place;
        let mut t = Object::open(o.field("transaction"));
        t.number("data_collection_event_count", table_events);
        t.number("data_collection_order", table_order);
        t.number("event_count", total_events);
        t.string("id", &transaction_id(src.server_id, src.seq));
        t.number("seq", src.seq);
        t.number("total_order", total_order);
        t.close();
    }
    o.close();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::{Format, Snapshot};
    use binlog_format::error::Position;
    use binlog_format::events::samples;
    use binlog_format::events::Cause;

    use crate::kafka::json::columns_json;
    use serde_json::{json, Value as Json};

    /// The `transaction` block: the transaction's id and the event's place in it.
    fn transaction_json(src: &SourceInfo) -> Json {
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

    fn row_json(table: &TableDef, row: &[Value]) -> Json {
        let all: Vec<usize> = (0..table.columns.len()).collect();
        columns_json(table, &all, row)
    }

    /// The envelope as a serde_json tree, as the relay wrote it before it wrote the bytes
    /// directly: the direct writer must give the same bytes.
    fn envelope_tree(table: &TableDef, ev: &RowEvent, src: &SourceInfo, version: &str) -> String {
        let key = RowKey::of(table, &ev.change, 12);
        let (after, before) = match &ev.change {
            RowChange::Write { row } => (Some(row_json(table, row)), None),
            RowChange::Update { after, before, .. } => (
                Some(row_json(table, after)),
                before.as_ref().map(|b| row_json(table, b)),
            ),
            RowChange::Delete { .. } => (None, None),
        };
        let (op, cause, transaction) = match src.snapshot.cause() {
            Some(cause) => ("read", cause, Json::Null),
            None => (ev.op_name(), ev.cause.name(), transaction_json(src)),
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
            "schema_version": version,
        });
        if let (Some(b), Some(obj)) = (before, envelope.as_object_mut()) {
            obj.insert("before".into(), b);
        }
        envelope.to_string()
    }

    fn opts(tombstones: bool) -> ChangeOptions<'static> {
        ChangeOptions {
            prefix: "ringrep",
            partitions: 12,
            tombstones,
            format: Format::Ringrep,
            schema_version: "v1",
            debezium_schemas: None,
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
            snapshot: Snapshot::None,
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

    /// Columns written directly keep a map's rules: names sorted, a name given twice keeps
    /// its last value.
    #[test]
    fn columns_written_directly_are_a_maps_bytes() {
        let mut t = samples::table();
        t.columns[4].name = t.columns[0].name.clone();
        let row: Vec<Value> = (0..t.columns.len() as i64).map(Value::Int).collect();
        let all: Vec<usize> = (0..t.columns.len()).collect();
        let mut out = Vec::new();
        crate::kafka::json::write_columns(&mut out, &t, all.iter().copied(), &row);
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            columns_json(&t, &all, &row).to_string()
        );
    }

    /// The envelope written directly is, byte for byte, the serde_json tree the relay wrote
    /// before (names sorted, numbers and strings as serde_json writes them), for every change
    /// kind and every kind of value.
    #[test]
    fn direct_envelope_equals_the_serde_json_tree() {
        let t = samples::table();
        let values = [
            Value::Null,
            Value::Int(-7),
            Value::UInt(u64::MAX),
            Value::Float(1.1),
            Value::Double(f64::NAN),
            Value::Double(-0.25),
            Value::Decimal("-12.50".into()),
            Value::Text("quote \" back \\ tab \t ctl \u{1} é 😀".into()),
            Value::Bytes(vec![0, 255, 16]),
            Value::Json(r#"{"b": [1, 2.5, null], "a": "x"}"#.into()),
            Value::Json("not json".into()),
            Value::Date(binlog_format::value::Date {
                year: 2026,
                month: 12,
                day: 7,
            }),
            Value::DateTime(binlog_format::value::DateTime::from_epoch_micros(1_234_567)),
            Value::Timestamp(-1),
        ];
        let row = |i: usize| -> Vec<Value> {
            (0..t.columns.len())
                .map(|c| values[(i + c) % values.len()].clone())
                .collect()
        };
        let mut src = source();
        for i in 0..values.len() {
            let changes = [
                RowChange::Write { row: row(i) },
                RowChange::Update {
                    key: t.key_of(&row(i)),
                    before: Some(row(i + 1)),
                    after: row(i + 2),
                },
                RowChange::Update {
                    key: t.key_of(&row(i)),
                    before: None,
                    after: row(i + 3),
                },
                RowChange::Delete {
                    key: t.key_of(&row(i)),
                },
            ];
            for change in changes {
                src.snapshot = [Snapshot::Initial, Snapshot::None, Snapshot::Incremental][i % 3];
                let ev = RowEvent {
                    table_id: 7,
                    change,
                    cause: Cause::Overwrite,
                };
                let recs = change_records(&t, &ev, &src, &opts(false));
                let got = String::from_utf8(recs[0].value.clone().expect("value")).expect("utf8");
                assert_eq!(got, envelope_tree(&t, &ev, &src, "v1"));
                let key = RowKey::of(&t, &ev.change, 12);
                assert_eq!(
                    String::from_utf8_lossy(&recs[0].key),
                    columns_json(&t, &t.primary_key, &key.folded).to_string()
                );
                // The partition: murmur2 of the prefix's JSON as the serde_json tree wrote it.
                let prefix_len = t.prefix_columns().len();
                let prefix =
                    columns_json(&t, &t.primary_key[..prefix_len], &key.folded[..prefix_len]);
                assert_eq!(
                    recs[0].partition,
                    Some(crate::kafka::partition_for(
                        prefix.to_string().as_bytes(),
                        12
                    ))
                );
            }
        }
    }
}
