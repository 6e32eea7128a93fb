//! The transaction topic, `<prefix>.transaction`: a BEGIN and an END record for each
//! transaction with row events, as Debezium's transaction metadata topic writes them. The END
//! counts the transaction's row events, in all and per table, so that a consumer of the
//! change topics knows when it holds a whole transaction. One partition, keyed by the
//! transaction's id.

use std::collections::BTreeMap;

use serde_json::json;

use binlog_format::events::{Event, Transaction};
use binlog_format::schema::Schema;

use super::envelope::transaction_id;
use super::{transaction_topic, KafkaRecord, ORDER_HEADER, SEQ_HEADER};

/// The row events of `tx` per table (`database.table`), in table-name order, as the END
/// record and the change records' `data_collection_event_count` count them. Rows of tables
/// `schema` does not know are counted under their table id.
pub fn events_per_table(tx: &Transaction, schema: &Schema) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    // DDL inside the transaction changes the names rows are counted under; a copy of the
    // schema follows it, made at the first DDL only.
    let mut schema = std::borrow::Cow::Borrowed(schema);
    for ev in &tx.events {
        match ev {
            Event::Row(r) => {
                let name = match schema.tables.get(&r.table_id) {
                    Some(t) => format!("{}.{}", t.database, t.name),
                    None => format!("#{}", r.table_id),
                };
                *counts.entry(name).or_insert(0) += 1;
            }
            Event::Ddl(d) => schema.to_mut().apply(d),
        }
    }
    counts
}

/// The BEGIN and END records of `tx`, whose row events per table are `counts`.
pub fn begin_end_records(
    prefix: &str,
    tx: &Transaction,
    counts: &BTreeMap<String, u64>,
) -> [KafkaRecord; 2] {
    let id = transaction_id(tx.server_id, tx.seq);
    let ts_ms = tx.commit_time_us.div_euclid(1000);
    let total: u64 = counts.values().sum();
    let collections: Vec<_> = counts
        .iter()
        .map(|(name, n)| json!({"data_collection": name, "event_count": n}))
        .collect();
    let begin = json!({
        "status": "BEGIN", "id": id, "seq": tx.seq, "server_id": tx.server_id,
        "event_count": null, "data_collections": null, "ts_ms": ts_ms,
    });
    let end = json!({
        "status": "END", "id": id, "seq": tx.seq, "server_id": tx.server_id,
        "event_count": total, "data_collections": collections, "ts_ms": ts_ms,
    });
    let key = json!({"id": id}).to_string().into_bytes();
    let rec = |value: serde_json::Value, order: u64| KafkaRecord {
        topic: transaction_topic(prefix),
        partition: Some(0),
        key: key.clone(),
        value: Some(value.to_string().into_bytes()),
        headers: vec![
            (SEQ_HEADER.into(), tx.seq.to_string()),
            (ORDER_HEADER.into(), order.to_string()),
        ],
    };
    [rec(begin, 0), rec(end, 1)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::events::samples;

    #[test]
    fn end_counts_the_row_events_per_table() {
        let t = samples::table();
        let mut schema = Schema::default();
        schema.apply(&binlog_format::events::DdlEvent::CreateTable { table: t.clone() });
        let tx = samples::transactions()
            .into_iter()
            .find(|tx| tx.events.iter().any(|e| matches!(e, Event::Row(_))))
            .expect("a sample with rows");
        let counts = events_per_table(&tx, &schema);
        let rows = tx
            .events
            .iter()
            .filter(|e| matches!(e, Event::Row(_)))
            .count() as u64;
        assert_eq!(counts.values().sum::<u64>(), rows);
        let [begin, end] = begin_end_records("ringrep", &tx, &counts);
        let b: serde_json::Value =
            serde_json::from_slice(begin.value.as_deref().expect("value")).expect("json");
        let e: serde_json::Value =
            serde_json::from_slice(end.value.as_deref().expect("value")).expect("json");
        assert_eq!(b["status"], "BEGIN");
        assert_eq!(e["status"], "END");
        assert_eq!(e["event_count"], rows);
        assert_eq!(begin.key, end.key);
        assert_eq!(begin.topic, "ringrep.transaction");
    }
}
