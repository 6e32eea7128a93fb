//! The schema-change topic, `<prefix>.schema-changes`: one record per DDL event, with the
//! statement, the table's definition after it (as JSON) and its schema version, and one
//! record announcing each table definition a change record names that the topic does not
//! hold yet (a table created before the relay started). One partition, so the records are in
//! stream order; keys are unique (a DDL's place, or a definition's version), so a compacted
//! topic keeps every record.

use serde_json::{json, Value as Json};

use binlog_format::events::{DdlEvent, Transaction};
use binlog_format::schema::{Schema, TableDef};

use super::envelope::transaction_id;
use super::{schema_topic, KafkaRecord, SourceInfo, SEQ_HEADER};
use crate::sql_text::ddl_statement;

/// A table definition's version: 16 hex digits of the FNV-1a hash of its JSON. It names one
/// definition exactly (a column, type, key or option changed gives another version) and is
/// the same in every run, so a consumer can look it up in the schema topic by value.
pub fn schema_version(def: &TableDef) -> String {
    let text = serde_json::to_string(def).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The schema version a schema-topic record's value names, if it names one.
pub fn version_named(value: &[u8]) -> Option<String> {
    let v: Json = serde_json::from_slice(value).ok()?;
    v.get("schema_version")?.as_str().map(str::to_string)
}

/// The table a DDL event leaves behind, if it is about one table and the table still exists.
fn table_after<'a>(schema_after: &'a Schema, d: &'a DdlEvent) -> Option<&'a TableDef> {
    match d {
        DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table } => Some(table),
        DdlEvent::TruncateTable { table_id } => schema_after.tables.get(table_id),
        _ => None,
    }
}

/// The (database, table) a DDL event is about; the table is `None` for database DDL.
fn names<'a>(schema_before: &'a Schema, d: &'a DdlEvent) -> (&'a str, Option<&'a str>) {
    match d {
        DdlEvent::CreateDatabase { name } | DdlEvent::DropDatabase { name } => (name, None),
        DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table } => {
            (&table.database, Some(&table.name))
        }
        DdlEvent::DropTable { database, name, .. } => (database, Some(name)),
        DdlEvent::TruncateTable { table_id } => match schema_before.tables.get(table_id) {
            Some(t) => (&t.database, Some(&t.name)),
            None => ("", None),
        },
    }
}

/// The schema-topic record of DDL event `d` of `tx` (its index in `src.index`), given the
/// schema before and after it.
pub fn ddl_record(
    prefix: &str,
    tx: &Transaction,
    src: &SourceInfo,
    d: &DdlEvent,
    schema_before: &Schema,
    schema_after: &Schema,
) -> KafkaRecord {
    let (database, table) = names(schema_before, d);
    let def = table_after(schema_after, d);
    let value = json!({
        "kind": d.name(),
        "database": database,
        "table": table,
        "statement": ddl_statement(schema_before, d),
        "table_def": def.map(def_json),
        "schema_version": def.map(schema_version),
        "source": {
            "server_id": tx.server_id,
            "seq": tx.seq,
            "segment": binlog_format::segment::segment_name(src.position.segment),
            "offset": src.position.offset,
            "commit_time_us": tx.commit_time_us,
            "index": src.index,
        },
        "transaction_id": transaction_id(tx.server_id, tx.seq),
    });
    let key = json!({"seq": tx.seq, "index": src.index});
    record(prefix, key, value, tx.seq)
}

/// The record announcing `def` (version `version`) before the first change record that names
/// it, when the topic does not hold it: the definition as of `seq`, with no statement.
pub fn definition_record(prefix: &str, def: &TableDef, version: &str, seq: u64) -> KafkaRecord {
    let value = json!({
        "kind": "definition",
        "database": def.database,
        "table": def.name,
        "statement": null,
        "table_def": def_json(def),
        "schema_version": version,
        "source": {"seq": seq},
    });
    let key = definition_key(&def.database, &def.name, version);
    record(prefix, key, value, seq)
}

/// Where a snapshot is in a schema-topic marker: begun (its `read` records follow on the change
/// topics) or done (all of them acknowledged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotMark {
    /// `snapshot_start`: a consumer that mirrors tables may clear them now: the `read`
    /// records that follow hold every row as of the snapshot's sequence number.
    Start,
    /// `snapshot_end`: every `read` record of the snapshot is in its topic.
    End,
}

impl SnapshotMark {
    fn kind(self) -> &'static str {
        match self {
            SnapshotMark::Start => "snapshot_start",
            SnapshotMark::End => "snapshot_end",
        }
    }
}

/// The schema-topic record marking the start or the end of a snapshot at `seq` of server
/// `server_id`, of `tables` tables and `rows` rows.
pub fn snapshot_record(
    prefix: &str,
    mark: SnapshotMark,
    server_id: u32,
    seq: u64,
    tables: u64,
    rows: u64,
) -> KafkaRecord {
    let value = json!({
        "kind": mark.kind(),
        "database": null,
        "table": null,
        "statement": null,
        "table_def": null,
        "schema_version": null,
        "source": {"server_id": server_id, "seq": seq},
        "tables": tables,
        "rows": rows,
    });
    record(
        prefix,
        json!({"snapshot": mark.kind(), "seq": seq}),
        value,
        seq,
    )
}

/// The snapshot mark a schema-topic record's value holds, with its sequence number.
pub fn snapshot_mark(value: &[u8]) -> Option<(SnapshotMark, u64)> {
    let v: Json = serde_json::from_slice(value).ok()?;
    let mark = match v.get("kind")?.as_str()? {
        "snapshot_start" => SnapshotMark::Start,
        "snapshot_end" => SnapshotMark::End,
        _ => return None,
    };
    Some((mark, v.get("source")?.get("seq")?.as_u64()?))
}

/// A step of an incremental snapshot, as a schema-topic record marks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncrementalMark<'a> {
    /// `incremental_snapshot_start`: a signal asked for these tables (database, table); their
    /// `read` records follow on their change topics, interleaved with the stream.
    Start {
        /// The tables queued, in the order they are sent.
        tables: &'a [(String, String)],
    },
    /// `incremental_snapshot_table_end`: every row of the table is in its topic.
    TableEnd {
        /// The table's database.
        database: &'a str,
        /// The table's name.
        table: &'a str,
        /// The `read` records sent for it.
        rows: u64,
    },
    /// `incremental_snapshot_stop`: a signal stopped this many queued tables.
    Stop {
        /// The tables taken out of the queue.
        tables: u64,
    },
}

/// The schema-topic record marking a step of the incremental snapshot `id` (the signal's id)
/// at `seq` of server `server_id`.
pub fn incremental_record(
    prefix: &str,
    mark: IncrementalMark<'_>,
    id: &str,
    server_id: u32,
    seq: u64,
) -> KafkaRecord {
    let source = json!({"server_id": server_id, "seq": seq});
    let (key, mut value) = match mark {
        IncrementalMark::Start { tables } => {
            let list: Vec<Json> = tables
                .iter()
                .map(|(d, t)| json!({"database": d, "table": t}))
                .collect();
            let kind = "incremental_snapshot_start";
            (
                json!({"incremental_snapshot": kind, "id": id, "seq": seq}),
                json!({"kind": kind, "id": id, "database": null, "table": null, "tables": list, "source": source}),
            )
        }
        IncrementalMark::TableEnd {
            database,
            table,
            rows,
        } => {
            let kind = "incremental_snapshot_table_end";
            (
                json!({"incremental_snapshot": kind, "id": id, "database": database, "table": table}),
                json!({"kind": kind, "id": id, "database": database, "table": table, "rows": rows, "source": source}),
            )
        }
        IncrementalMark::Stop { tables } => {
            let kind = "incremental_snapshot_stop";
            (
                json!({"incremental_snapshot": kind, "id": id, "seq": seq}),
                json!({"kind": kind, "id": id, "database": null, "table": null, "tables": tables, "source": source}),
            )
        }
    };
    // The fields every schema-topic record has, empty here.
    if let Some(o) = value.as_object_mut() {
        for k in ["statement", "table_def", "schema_version"] {
            o.insert(k.into(), Json::Null);
        }
    }
    record(prefix, key, value, seq)
}

/// The key of a definition record: database, table and version.
pub fn definition_key(database: &str, table: &str, version: &str) -> Json {
    json!({"database": database, "table": table, "schema_version": version})
}

/// A table definition as the schema topic writes it: columns with their SQL types, the
/// primary key and the ring and TTL options by name.
fn def_json(def: &TableDef) -> Json {
    let columns: Vec<Json> = def
        .columns
        .iter()
        .map(|c| json!({"name": c.name, "type": c.ty.sql(), "nullable": c.nullable}))
        .collect();
    let key: Vec<&str> = def
        .primary_key
        .iter()
        .filter_map(|&i| def.columns.get(i).map(|c| c.name.as_str()))
        .collect();
    json!({
        "database": def.database,
        "name": def.name,
        "columns": columns,
        "primary_key": key,
        "ring": def.ring.as_ref().map(|r| serde_json::to_value(r).unwrap_or(Json::Null)),
        "ttl": def.ttl.as_ref().map(|t| serde_json::to_value(t).unwrap_or(Json::Null)),
        "comment": def.comment,
    })
}

fn record(prefix: &str, key: Json, value: Json, seq: u64) -> KafkaRecord {
    KafkaRecord {
        topic: schema_topic(prefix),
        partition: Some(0),
        key: key.to_string().into_bytes(),
        value: Some(value.to_string().into_bytes()),
        headers: vec![(SEQ_HEADER.into(), seq.to_string())],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::error::Position;
    use binlog_format::events::samples;

    #[test]
    fn a_version_names_one_definition() {
        let t = samples::table();
        let mut altered = t.clone();
        altered.columns[4].name = "kind".into();
        assert_eq!(schema_version(&t), schema_version(&t.clone()));
        assert_ne!(schema_version(&t), schema_version(&altered));
        assert_eq!(schema_version(&t).len(), 16);
    }

    #[test]
    fn a_create_table_record_holds_its_statement_and_definition() {
        let t = samples::table();
        let d = DdlEvent::CreateTable { table: t.clone() };
        let tx = Transaction {
            server_id: 1,
            seq: 3,
            commit_time_us: 0,
            origin: None,
            events: vec![binlog_format::events::Event::Ddl(d.clone())],
        };
        let src = SourceInfo {
            server_id: 1,
            seq: 3,
            position: Position::default(),
            commit_time_us: 0,
            index: 0,
            place: Default::default(),
            snapshot: crate::kafka::Snapshot::None,
        };
        let before = Schema::default();
        let mut after = before.clone();
        after.apply(&d);
        let rec = ddl_record("ringrep", &tx, &src, &d, &before, &after);
        assert_eq!(rec.topic, "ringrep.schema-changes");
        let v: Json = serde_json::from_slice(rec.value.as_deref().expect("value")).expect("json");
        assert_eq!(v["kind"], "create_table");
        assert_eq!(v["table"], t.name.as_str());
        assert!(
            v["statement"]
                .as_str()
                .expect("statement")
                .starts_with("CREATE TABLE"),
            "{v}"
        );
        assert_eq!(v["schema_version"], schema_version(&t).as_str());
        assert_eq!(v["table_def"]["primary_key"][0], "user_id");
    }
}
