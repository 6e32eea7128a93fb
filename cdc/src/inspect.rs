//! What the `ringrep-binlog` tool prints: text and JSON renderings of records, and statistics.
//! Kept in the library so other tools (and tests) render records the same way.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value as Json};

use crate::kafka::value_json;
use binlog_format::error::Position;
use binlog_format::events::{DdlEvent, Event, Record, RowChange, RowEvent};
use binlog_format::schema::{Schema, TableDef};
use binlog_format::value::{format_timestamp, Value};

fn table_label(schema: &Schema, id: u64) -> String {
    schema
        .tables
        .get(&id)
        .map(TableDef::qualified_name)
        .unwrap_or_else(|| format!("<table {id}>"))
}

fn values_text(
    out: &mut String,
    table: Option<&TableDef>,
    positions: Option<&[usize]>,
    values: &[Value],
) {
    for (i, v) in values.iter().enumerate() {
        let pos = positions.and_then(|p| p.get(i).copied()).unwrap_or(i);
        let name = table
            .and_then(|t| t.columns.get(pos))
            .map(|c| c.name.as_str())
            .unwrap_or("?");
        let shown = match v {
            Value::Text(s) | Value::Json(s) | Value::Decimal(s) => format!("{s:?}"),
            Value::Bytes(b) => format!(
                "0x{}",
                b.iter().map(|x| format!("{x:02X}")).collect::<String>()
            ),
            other => other.to_string(),
        };
        let _ = writeln!(out, "###   @{}={} /* {} */", pos + 1, shown, name);
    }
}

/// A record as readable text, in the spirit of `mysqlbinlog -v`.
pub fn record_text(schema: &Schema, position: Position, record: &Record) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# at {position}");
    match record {
        Record::Heartbeat(hb) => {
            let _ = writeln!(
                out,
                "#heartbeat server_id={} time={} last_seq={}",
                hb.server_id,
                format_timestamp(hb.time_us, 6),
                hb.last_seq
            );
        }
        Record::Transaction(tx) => {
            let origin = tx
                .origin
                .map(|o| format!(" origin={}:{}", o.server_id, o.seq))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "#transaction seq={} server_id={} commit_time={}{} events={}",
                tx.seq,
                tx.server_id,
                format_timestamp(tx.commit_time_us, 6),
                origin,
                tx.events.len()
            );
            for ev in &tx.events {
                match ev {
                    Event::Row(r) => row_text(&mut out, schema, r),
                    Event::Ddl(d) => ddl_text(&mut out, schema, d),
                }
            }
        }
    }
    out
}

fn row_text(out: &mut String, schema: &Schema, r: &RowEvent) {
    let table = schema.tables.get(&r.table_id);
    let _ = writeln!(
        out,
        "### {} {} cause={}",
        r.op_name().to_uppercase(),
        table_label(schema, r.table_id),
        r.cause.name()
    );
    let pk = table.map(|t| t.primary_key.as_slice());
    match &r.change {
        RowChange::Write { row } => values_text(out, table, None, row),
        RowChange::Update { key, after, before } => {
            let _ = writeln!(out, "### WHERE");
            values_text(out, table, pk, key);
            if let Some(b) = before {
                let _ = writeln!(out, "### BEFORE");
                values_text(out, table, None, b);
            }
            let _ = writeln!(out, "### SET");
            values_text(out, table, None, after);
        }
        RowChange::Delete { key } => values_text(out, table, pk, key),
    }
}

fn ddl_text(out: &mut String, schema: &Schema, d: &DdlEvent) {
    match d {
        DdlEvent::CreateDatabase { name } | DdlEvent::DropDatabase { name } => {
            let _ = writeln!(out, "### DDL {} {name}", d.name());
        }
        DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table } => {
            let _ = writeln!(
                out,
                "### DDL {} {} id={} columns={}",
                d.name(),
                table.qualified_name(),
                table.id,
                table.columns.len()
            );
        }
        DdlEvent::DropTable {
            table_id,
            database,
            name,
        } => {
            let _ = writeln!(out, "### DDL {} {database}.{name} id={table_id}", d.name());
        }
        DdlEvent::TruncateTable { table_id } => {
            let _ = writeln!(
                out,
                "### DDL {} {}",
                d.name(),
                table_label(schema, *table_id)
            );
        }
    }
}

fn values_json(values: &[Value]) -> Json {
    Json::Array(values.iter().map(value_json).collect())
}

/// A record as one JSON object (values in column order, see docs/format.md).
pub fn record_json(schema: &Schema, position: Position, record: &Record) -> Json {
    let pos = json!({"segment": binlog_format::segment::segment_name(position.segment), "offset": position.offset});
    match record {
        Record::Heartbeat(hb) => {
            json!({"position": pos, "type": "heartbeat", "server_id": hb.server_id, "time_us": hb.time_us, "last_seq": hb.last_seq})
        }
        Record::Transaction(tx) => {
            let events: Vec<Json> = tx
                .events
                .iter()
                .map(|ev| match ev {
                    Event::Row(r) => {
                        let mut o = json!({"kind": "row", "op": r.op_name(), "table_id": r.table_id, "table": table_label(schema, r.table_id), "cause": r.cause.name()});
                        let m = o.as_object_mut();
                        if let Some(m) = m {
                            match &r.change {
                                RowChange::Write { row } => {
                                    m.insert("row".into(), values_json(row));
                                }
                                RowChange::Update { key, after, before } => {
                                    m.insert("key".into(), values_json(key));
                                    m.insert("after".into(), values_json(after));
                                    if let Some(b) = before {
                                        m.insert("before".into(), values_json(b));
                                    }
                                }
                                RowChange::Delete { key } => {
                                    m.insert("key".into(), values_json(key));
                                }
                            }
                        }
                        o
                    }
                    Event::Ddl(d) => {
                        let table = match d {
                            DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table } => serde_json::to_value(table).unwrap_or(Json::Null),
                            _ => Json::Null,
                        };
                        json!({"kind": "ddl", "ddl": d.name(), "detail": serde_json::to_value(d).unwrap_or(Json::Null), "table": table})
                    }
                })
                .collect();
            json!({
                "position": pos, "type": "transaction", "seq": tx.seq, "server_id": tx.server_id,
                "commit_time_us": tx.commit_time_us,
                "origin": tx.origin.map(|o| json!({"server_id": o.server_id, "seq": o.seq})),
                "events": events,
            })
        }
    }
}

/// Counters for `ringrep-binlog stats`, over the records given to [`Stats::add`].
#[derive(Debug, Default)]
pub struct Stats {
    /// Counters per segment number.
    pub segments: BTreeMap<u64, SegmentStats>,
    /// Per table label (`database.table`, or `<table ID>` for a table the schema does not
    /// know): row event counts per `op/cause` (such as `write/overwrite`).
    pub tables: BTreeMap<String, BTreeMap<String, u64>>,
    /// Transaction records seen.
    pub transactions: u64,
    /// Heartbeat records seen.
    pub heartbeats: u64,
    /// Row events seen, over all transactions.
    pub row_events: u64,
    /// DDL events seen, over all transactions.
    pub ddl_events: u64,
    /// The sequence number of the first transaction seen, if any.
    pub first_seq: Option<u64>,
    /// The sequence number of the last transaction seen, if any.
    pub last_seq: Option<u64>,
}

/// Counters for one segment, within [`Stats`].
#[derive(Debug, Default, Clone)]
pub struct SegmentStats {
    /// Records seen in the segment (transactions and heartbeats).
    pub records: u64,
    /// Sum of the `len` given with each record: the bytes of the frames seen.
    pub bytes: u64,
    /// The sequence number of the segment's first transaction seen, if any.
    pub first_seq: Option<u64>,
    /// The sequence number of the segment's last transaction seen, if any.
    pub last_seq: Option<u64>,
}

impl Stats {
    /// Counts one record at `position` whose frame took `len` bytes; `schema` (as of the
    /// record) names its tables.
    pub fn add(&mut self, schema: &Schema, position: Position, len: u64, record: &Record) {
        let seg = self.segments.entry(position.segment).or_default();
        seg.records += 1;
        seg.bytes += len;
        match record {
            Record::Heartbeat(_) => self.heartbeats += 1,
            Record::Transaction(tx) => {
                self.transactions += 1;
                seg.first_seq.get_or_insert(tx.seq);
                seg.last_seq = Some(tx.seq);
                self.first_seq.get_or_insert(tx.seq);
                self.last_seq = Some(tx.seq);
                for ev in &tx.events {
                    match ev {
                        Event::Row(r) => {
                            self.row_events += 1;
                            *self
                                .tables
                                .entry(table_label(schema, r.table_id))
                                .or_default()
                                .entry(format!("{}/{}", r.op_name(), r.cause.name()))
                                .or_default() += 1;
                        }
                        Event::Ddl(_) => self.ddl_events += 1,
                    }
                }
            }
        }
    }

    /// The counters as `ringrep-binlog stats` prints them: a tab-separated line per segment,
    /// a summary line, then a line per table with its `op/cause=count` pairs.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let seq = |s: Option<u64>| s.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
        let _ = writeln!(out, "segment\trecords\tbytes\tfirst_seq\tlast_seq");
        for (n, s) in &self.segments {
            let _ = writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}",
                binlog_format::segment::segment_name(*n),
                s.records,
                s.bytes,
                seq(s.first_seq),
                seq(s.last_seq)
            );
        }
        let _ = writeln!(
            out,
            "transactions {} (seq {}..{}), heartbeats {}, row events {}, ddl events {}",
            self.transactions,
            seq(self.first_seq),
            seq(self.last_seq),
            self.heartbeats,
            self.row_events,
            self.ddl_events
        );
        for (table, counts) in &self.tables {
            let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "{table}: {}", parts.join(" "));
        }
        out
    }
}
