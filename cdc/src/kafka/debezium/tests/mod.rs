//! What the records of each kind of row event hold; [`types`]: each column type's encoding.

use serde_json::{json, Value as Json};

use binlog_format::error::Position;
use binlog_format::events::samples;
use binlog_format::events::{Cause, RowChange, RowEvent};
use binlog_format::schema::TableDef;
use binlog_format::value::Value;

use super::*;
use crate::kafka::{Format, TxPlace};

mod types;

fn opts(tombstones: bool, schemas: bool) -> ChangeOptions<'static> {
    ChangeOptions {
        prefix: "ringrep",
        partitions: 12,
        tombstones,
        format: Format::Debezium { schemas },
        schema_version: "v1",
        debezium_schemas: None,
    }
}

/// Server 1, seq 5, segment 1 at 100, committed at 1_700_000_000.123456 s.
fn source() -> SourceInfo {
    SourceInfo {
        server_id: 1,
        seq: 5,
        position: Position {
            segment: 1,
            offset: 100,
        },
        commit_time_us: 1_700_000_000_123_456,
        index: 2,
        place: TxPlace {
            total_order: 3,
            table_order: 2,
            total_events: 4,
            table_events: 2,
        },
        snapshot: crate::kafka::Snapshot::None,
    }
}

/// A row of [`samples::table`]: (user_id, ring_idx, ring_meta, created_at, payload).
fn sample_row(user: i64, slot: i64, payload: &str) -> Vec<Value> {
    vec![
        Value::Int(user),
        Value::Int(slot),
        Value::Null,
        Value::Timestamp(1_700_000_000_123_000),
        Value::Text(payload.into()),
    ]
}

fn records(
    table: &TableDef,
    change: RowChange,
    cause: Cause,
    o: &ChangeOptions<'_>,
) -> Vec<KafkaRecord> {
    let ev = RowEvent {
        table_id: table.id,
        change,
        cause,
    };
    let out = change_records(
        table,
        &ev,
        &source(),
        o,
        matches!(o.format, Format::Debezium { schemas: true }),
    );
    for r in &out {
        assert_eq!(r.headers, vec![(SEQ_HEADER.to_string(), "5".to_string())]);
        if let Format::Debezium { schemas: true } = o.format {
            let key = parse(&r.key);
            conforms(&key["schema"], &key["payload"]);
            if let Some(v) = &r.value {
                let v = parse(v);
                conforms(&v["schema"], &v["payload"]);
            }
        }
    }
    out
}

fn parse(bytes: &[u8]) -> Json {
    serde_json::from_slice(bytes).expect("json")
}

/// The value's payload, with or without schemas.
fn payload(r: &KafkaRecord) -> Json {
    let v = parse(r.value.as_deref().expect("a value"));
    match v.get("schema") {
        Some(_) => v["payload"].clone(),
        None => v,
    }
}

/// Checks `value` against a Connect schema as JsonConverter reads it: every field present,
/// null only where optional, each primitive of its JSON kind and in range.
fn conforms(schema: &Json, value: &Json) {
    let optional = schema["optional"].as_bool().expect("optional");
    if value.is_null() {
        assert!(optional, "null for required {schema}");
        return;
    }
    let ty = schema["type"].as_str().expect("type");
    let int_in = |lo: i64, hi: i64| value.as_i64().is_some_and(|i| (lo..=hi).contains(&i));
    match ty {
        "struct" => {
            let fields = schema["fields"].as_array().expect("fields");
            let obj = value.as_object().expect("an object");
            assert_eq!(
                obj.len(),
                fields.len(),
                "fields of {value} against {schema}"
            );
            for f in fields {
                let name = f["field"].as_str().expect("field");
                conforms(
                    f,
                    obj.get(name)
                        .unwrap_or_else(|| panic!("no {name} in {value}")),
                );
            }
        }
        "int16" => assert!(int_in(i16::MIN.into(), i16::MAX.into()), "{value} as {ty}"),
        "int32" => assert!(int_in(i32::MIN.into(), i32::MAX.into()), "{value} as {ty}"),
        "int64" => assert!(value.is_i64(), "{value} as {ty}"),
        "float" | "double" => assert!(value.is_number(), "{value} as {ty}"),
        "string" | "bytes" => assert!(value.is_string(), "{value} as {ty}"),
        "boolean" => assert!(value.is_boolean(), "{value} as {ty}"),
        other => panic!("unexpected type {other}"),
    }
}

#[test]
fn a_first_insert_is_a_create_with_the_source_and_transaction_blocks() {
    let t = samples::table();
    let o = opts(true, true);
    let out = records(
        &t,
        RowChange::Write {
            row: sample_row(9, 1, "x"),
        },
        Cause::Insert,
        &o,
    );
    assert_eq!(out.len(), 1);
    let key = parse(&out[0].key);
    assert_eq!(key["payload"], json!({"user_id": 9, "ring_idx": 1}));
    assert_eq!(key["schema"]["name"], "ringrep.test.user_events.Key");
    let v = parse(out[0].value.as_deref().expect("value"));
    assert_eq!(v["schema"]["name"], "ringrep.test.user_events.Envelope");
    assert_eq!(
        v["schema"]["fields"][0]["name"],
        "ringrep.test.user_events.Value"
    );
    let p = &v["payload"];
    assert_eq!(p["op"], "c");
    assert!(p["before"].is_null());
    assert_eq!(
        p["after"],
        json!({"user_id": 9, "ring_idx": 1, "ring_meta": null,
               "created_at": "2023-11-14T22:13:20.123Z", "payload": "x"})
    );
    assert_eq!(p["ts_ms"], 1_700_000_000_123i64);
    assert_eq!(p["ts_us"], 1_700_000_000_123_456i64);
    assert_eq!(
        p["source"],
        json!({
            "version": VERSION, "connector": "ringrep", "name": "ringrep",
            "ts_ms": 1_700_000_000_123i64, "snapshot": "false", "db": "test", "sequence": null,
            "ts_us": 1_700_000_000_123_456i64, "ts_ns": 1_700_000_000_123_456_000i64,
            "table": "user_events", "server_id": 1, "gtid": null, "file": "binlog.000001",
            "pos": 100, "row": 2, "thread": null, "query": null, "ringrep_seq": 5,
            "ringrep_cause": "insert", "ringrep_schema_version": "v1",
        })
    );
    assert_eq!(
        p["transaction"],
        json!({"id": "1:5", "total_order": 3, "data_collection_order": 2})
    );
}

#[test]
fn other_writes_are_updates_without_a_before_image() {
    let t = samples::table();
    for cause in [Cause::Overwrite, Cause::MetaUpdate, Cause::Update] {
        let row = RowChange::Write {
            row: sample_row(9, 1, "y"),
        };
        let out = records(&t, row, cause, &opts(true, true));
        assert_eq!(out.len(), 1);
        let p = payload(&out[0]);
        assert_eq!(p["op"], "u", "{cause:?}");
        assert!(p["before"].is_null());
        assert_eq!(p["after"]["payload"], "y");
        assert_eq!(p["source"]["ringrep_cause"], cause.name());
    }
}

#[test]
fn an_update_carries_its_before_image_when_logged() {
    let t = samples::table();
    let update = |before: Option<Vec<Value>>| RowChange::Update {
        key: vec![Value::Int(9), Value::Int(1)],
        after: sample_row(9, 1, "new"),
        before,
    };
    let with = records(
        &t,
        update(Some(sample_row(9, 1, "old"))),
        Cause::Update,
        &opts(true, true),
    );
    let without = records(&t, update(None), Cause::Update, &opts(true, true));
    assert_eq!((with.len(), without.len()), (1, 1));
    let (a, b) = (payload(&with[0]), payload(&without[0]));
    assert_eq!((&a["op"], &b["op"]), (&json!("u"), &json!("u")));
    assert_eq!(a["before"]["payload"], "old");
    assert_eq!(a["after"]["payload"], "new");
    assert!(b["before"].is_null());
    assert_eq!(with[0].key, without[0].key);
}

#[test]
fn a_delete_holds_the_key_and_is_followed_by_its_tombstone() {
    let t = samples::table();
    let del = || RowChange::Delete {
        key: vec![Value::Int(9), Value::Int(2)],
    };
    let out = records(&t, del(), Cause::TtlPurge, &opts(true, true));
    assert_eq!(out.len(), 2);
    let p = payload(&out[0]);
    assert_eq!(p["op"], "d");
    assert!(p["after"].is_null());
    assert_eq!(
        p["before"],
        json!({"user_id": 9, "ring_idx": 2, "ring_meta": null, "created_at": null, "payload": null})
    );
    assert_eq!(p["source"]["ringrep_cause"], "ttl_purge");
    assert!(out[1].value.is_none(), "a tombstone");
    assert_eq!(
        (&out[1].key, out[1].partition),
        (&out[0].key, out[0].partition)
    );
    let write = records(
        &t,
        RowChange::Write {
            row: sample_row(9, 2, "x"),
        },
        Cause::Insert,
        &opts(true, true),
    );
    assert_eq!(
        (&write[0].key, write[0].partition),
        (&out[0].key, out[0].partition)
    );
    assert_eq!(
        records(&t, del(), Cause::Delete, &opts(false, true)).len(),
        1
    );
}

#[test]
fn an_update_of_the_primary_key_is_a_delete_then_a_create() {
    let t = samples::table();
    let change = RowChange::Update {
        key: vec![Value::Int(9), Value::Int(1)],
        after: sample_row(10, 1, "moved"),
        before: None,
    };
    let out = records(&t, change, Cause::Update, &opts(true, true));
    assert_eq!(out.len(), 3);
    let (d, c) = (payload(&out[0]), payload(&out[2]));
    assert_eq!((&d["op"], &c["op"]), (&json!("d"), &json!("c")));
    assert_eq!(d["before"]["user_id"], 9);
    assert!(out[1].value.is_none());
    assert_eq!(
        parse(&out[0].key)["payload"],
        json!({"user_id": 9, "ring_idx": 1})
    );
    assert_eq!(
        parse(&out[2].key)["payload"],
        json!({"user_id": 10, "ring_idx": 1})
    );
    assert_eq!(c["after"]["payload"], "moved");
}

#[test]
fn without_schemas_key_and_value_are_the_payloads() {
    let t = samples::table();
    let row = RowChange::Write {
        row: sample_row(9, 1, "x"),
    };
    let with = records(&t, row.clone(), Cause::Insert, &opts(false, true));
    let without = records(&t, row, Cause::Insert, &opts(false, false));
    assert_eq!(parse(&without[0].key), json!({"user_id": 9, "ring_idx": 1}));
    assert_eq!(parse(&with[0].key)["payload"], parse(&without[0].key));
    let v = parse(without[0].value.as_deref().expect("value"));
    assert!(v.get("schema").is_none());
    assert_eq!(v, payload(&with[0]));
    assert_eq!(with[0].partition, without[0].partition);
}

/// Schemas kept per table definition give the records that schemas made for each record give:
/// the same key and value, as JSON, for writes, updates and deletes with their tombstones.
#[test]
fn kept_schemas_give_the_same_records() {
    let table = samples::table();
    let kept = DebeziumSchemas::of("ringrep", &table);
    let with_kept = ChangeOptions {
        debezium_schemas: Some(&kept),
        ..opts(true, true)
    };
    let key = table.key_of(&sample_row(1, 1, "a"));
    for (change, cause) in [
        (
            RowChange::Write {
                row: sample_row(1, 1, "a"),
            },
            Cause::Insert,
        ),
        (
            RowChange::Update {
                key: key.clone(),
                before: Some(sample_row(1, 1, "a")),
                after: sample_row(1, 1, "b"),
            },
            Cause::Update,
        ),
        (RowChange::Delete { key }, Cause::Delete),
    ] {
        let each = records(&table, change.clone(), cause, &opts(true, true));
        let once = records(&table, change, cause, &with_kept);
        assert_eq!(each.len(), once.len());
        for (a, b) in each.iter().zip(&once) {
            assert_eq!(parse(&a.key), parse(&b.key));
            assert_eq!(a.value.as_deref().map(parse), b.value.as_deref().map(parse));
            assert!(b.key.starts_with(br#"{"schema":"#), "JsonConverter's order");
        }
    }
}
