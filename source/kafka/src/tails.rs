//! Where the relay's topics end: the last (sequence number, order) each partition holds, so
//! that a relay that restarts produces only what is not there yet, and every record of a small
//! topic (the schema topic's, to announce each definition once).
//!
//! Partitions are read from a little before their high watermark and on until they are quiet,
//! never trusting the watermark as the end (tansu 0.6.0's counts produce batches, not records).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use ringrep_cdc::kafka::{ORDER_HEADER, SEQ_HEADER};

use crate::reader::header_u64;
use crate::{kafka_error, KafkaSettings, Result};

/// The last record of a partition, as the relay orders its records: by the transaction's
/// sequence number, then by the record's place among that transaction's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tail {
    /// `ringrep.seq` of the last record.
    pub seq: u64,
    /// `ringrep.order` of the last record; `u64::MAX` for a record written before the header
    /// existed (the whole transaction counts as there).
    pub order: u64,
}

/// How long a partition must stay quiet, once its high watermark is reached, to be at its end.
const QUIET: Duration = Duration::from_millis(300);

/// Gives up when nothing arrives for this long before every partition reached its watermark.
const STALL: Duration = Duration::from_secs(30);

fn consumer(settings: &KafkaSettings) -> Result<BaseConsumer> {
    settings
        .client_config()
        .set("group.id", "ringrep-relay")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("allow.auto.create.topics", "false")
        .set("fetch.wait.max.ms", "10")
        // What aborted Kafka transactions left is not there: the relay sends it again.
        .set("isolation.level", "read_committed")
        .create()
        .map_err(|e| kafka_error("consumer", e))
}

/// Assigns every partition of `topics` (name, partitions) that holds records, each from
/// `back` records before its high watermark; returns the watermarks of those assigned.
fn assign_tails(
    c: &BaseConsumer,
    topics: &[(String, i32)],
    back: i64,
) -> Result<HashMap<(String, i32), i64>> {
    let mut tpl = TopicPartitionList::new();
    let mut highs = HashMap::new();
    for (topic, partitions) in topics {
        for p in 0..*partitions {
            let (low, high) = c
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .map_err(|e| kafka_error(&format!("watermarks of {topic} [{p}]"), e))?;
            if high > low {
                tpl.add_partition_offset(topic, p, Offset::Offset((high - back).max(low)))
                    .map_err(|e| kafka_error("assign", e))?;
                highs.insert((topic.clone(), p), high);
            }
        }
    }
    c.assign(&tpl).map_err(|e| kafka_error("assign", e))?;
    Ok(highs)
}

/// Polls `c` until every partition in `highs` reached its watermark and all went quiet,
/// handing each record to `each`.
fn read_on(
    c: &BaseConsumer,
    mut highs: HashMap<(String, i32), i64>,
    stall: Duration,
    mut each: impl FnMut(&rdkafka::message::BorrowedMessage<'_>),
) -> Result<()> {
    if highs.is_empty() {
        // Nothing was assigned: every partition is empty.
        return Ok(());
    }
    let mut last_record = Instant::now();
    loop {
        match c.poll(Duration::from_millis(50)) {
            Some(Ok(m)) => {
                last_record = Instant::now();
                each(&m);
                let k = (m.topic().to_string(), m.partition());
                if highs.get(&k).is_some_and(|&h| m.offset() >= h - 1) {
                    highs.remove(&k);
                }
            }
            Some(Err(e)) => return Err(kafka_error("reading the topics' tails", e)),
            None if highs.is_empty() && last_record.elapsed() >= QUIET => return Ok(()),
            None if last_record.elapsed() >= stall => {
                let left: Vec<String> = highs.keys().map(|(t, p)| format!("{t} [{p}]")).collect();
                return Err(kafka_error(
                    "reading the topics' tails",
                    format!("nothing arrived for {stall:?} from {}", left.join(", ")),
                ));
            }
            None => {}
        }
    }
}

/// The last record of every partition of `topics` (name, partitions) that holds one with a
/// `ringrep.seq` header.
pub fn read_tails(
    settings: &KafkaSettings,
    topics: &[(String, i32)],
) -> Result<HashMap<(String, i32), Tail>> {
    // The last 16 offsets first. A broker that answers a fetch from inside a produce batch
    // with the next batch (tansu 0.6.0) sends nothing from there when the last batch is
    // longer: then each partition is read from its start.
    match read_tails_from(settings, topics, 16, QUICK_STALL) {
        Ok(t) => Ok(t),
        Err(e) => {
            tracing::warn!("reading the partitions' tails: {e}; reading them from their start");
            read_tails_from(settings, topics, i64::MAX / 2, STALL)
        }
    }
}

/// How long the read of the last offsets waits for a partition before reading it whole.
const QUICK_STALL: Duration = Duration::from_secs(3);

fn read_tails_from(
    settings: &KafkaSettings,
    topics: &[(String, i32)],
    back: i64,
    stall: Duration,
) -> Result<HashMap<(String, i32), Tail>> {
    let c = consumer(settings)?;
    let highs = assign_tails(&c, topics, back)?;
    let mut tails: HashMap<(String, i32), Tail> = HashMap::new();
    read_on(&c, highs, stall, |m| {
        let Some(seq) = header_u64(m, SEQ_HEADER) else {
            return;
        };
        let order = header_u64(m, ORDER_HEADER).unwrap_or(u64::MAX);
        let tail = Tail { seq, order };
        let slot = tails
            .entry((m.topic().to_string(), m.partition()))
            .or_insert(tail);
        *slot = (*slot).max(tail);
    })?;
    Ok(tails)
}

/// A record's key and value (`None`: a tombstone).
pub type KeyValue = (Vec<u8>, Option<Vec<u8>>);

/// Every record of the one-partition topic `topic`, (key, value), in offset order.
pub fn read_records(settings: &KafkaSettings, topic: &str) -> Result<Vec<KeyValue>> {
    let c = consumer(settings)?;
    let highs = assign_tails(&c, &[(topic.to_string(), 1)], i64::MAX / 2)?;
    let mut records = Vec::new();
    read_on(&c, highs, STALL, |m| {
        records.push((
            m.key().unwrap_or_default().to_vec(),
            m.payload().map(<[u8]>::to_vec),
        ));
    })?;
    Ok(records)
}
