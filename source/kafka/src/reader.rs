//! The replication topic's reader: one partition, read with a manual assignment and no
//! committed offsets; its tail (where a relay resumes) and every sequence number in it (for
//! checks).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use ringrep_cdc::kafka;

use crate::error::refused;
use crate::{kafka_error, KafkaSettings, Result};

/// A consumer of the replication topic's one partition, with a manual assignment and no
/// committed offsets (the relay, the applier's Kafka source and checks all read it so).
pub struct ReplicationReader {
    /// The consumer, nothing assigned until [`ReplicationReader::assign`]; poll it for records.
    pub consumer: BaseConsumer,
    /// The replication topic's name, `<prefix>.replication`.
    pub topic: String,
}

impl std::fmt::Debug for ReplicationReader {
    // librdkafka's consumer has no Debug of its own.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicationReader")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl ReplicationReader {
    /// A consumer of `settings`' replication topic, nothing assigned yet. `group` only names
    /// the client to the broker: nothing is ever committed.
    pub fn open(settings: &KafkaSettings, group: &str) -> Result<ReplicationReader> {
        let mut config = settings.client_config();
        // A replica follows the stream live: a broker that holds a fetch until its wait runs
        // out (librdkafka's default is 500 ms) would add that to the lag of a lone commit.
        // `--kafka-option fetch.wait.max.ms=...` overrides it.
        if config.get("fetch.wait.max.ms").is_none() {
            config.set("fetch.wait.max.ms", "10");
        }
        let consumer = config
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            // A replica applies only what a relay committed (with Kafka transactions; without,
            // every record is committed).
            .set("isolation.level", "read_committed")
            .create()
            .map_err(|e| kafka_error("consumer", e))?;
        Ok(ReplicationReader {
            consumer,
            topic: kafka::replication_topic(&settings.topic_prefix),
        })
    }

    /// (low, high) watermarks of partition 0: the first offset still held and the offset the
    /// next record will get. Transient errors (a partition without a leader for a moment) are
    /// retried for up to 30 s; a refused request (authentication, authorization) is not.
    pub fn watermarks(&self) -> Result<(i64, i64)> {
        // A partition without a leader for a moment (an election, a broker restarting)
        // answers with a transient error: ask again until the time is up.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self
                .consumer
                .fetch_watermarks(&self.topic, 0, Duration::from_secs(10))
            {
                Ok(w) => return Ok(w),
                Err(e) if Instant::now() < deadline && !refused(&e) => {
                    tracing::warn!("watermarks of {}: {e}; asking again", self.topic);
                    std::thread::sleep(Duration::from_millis(250));
                    // The client keeps the partition's last known state in its metadata
                    // cache (refreshed every few minutes); ask the cluster afresh.
                    let _ = self
                        .consumer
                        .fetch_metadata(Some(&self.topic), Duration::from_secs(5));
                }
                Err(e) => return Err(kafka_error(&format!("watermarks of {}", self.topic), e)),
            }
        }
    }

    /// The offset the consumer reads next on partition 0 (-1 before it has read anything).
    pub fn position(&self) -> Result<i64> {
        let tpl = self
            .consumer
            .position()
            .map_err(|e| kafka_error(&format!("position in {}", self.topic), e))?;
        Ok(tpl
            .find_partition(&self.topic, 0)
            .and_then(|p| match p.offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            })
            .unwrap_or(-1))
    }

    /// Assigns partition 0 from `offset`: the consumer's next polls read on from there.
    pub fn assign(&self, offset: i64) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, 0, Offset::Offset(offset))
            .map_err(|e| kafka_error("assign", e))?;
        self.consumer
            .assign(&tpl)
            .map_err(|e| kafka_error("assign", e))
    }
}

/// The last transaction in the replication topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastRelayed {
    /// The server whose stream the topic holds.
    pub server_id: u32,
    /// The last sequence number in the topic.
    pub seq: u64,
    /// The last sequence number whose records on every topic the broker had acknowledged
    /// when that record was produced (`ringrep.acked_seq`; `seq` for records written before
    /// the header existed).
    pub acked_seq: u64,
}

/// The last transaction in the replication topic, or `None` when it is empty.
pub fn last_relayed(settings: &KafkaSettings) -> Result<Option<LastRelayed>> {
    let reader = ReplicationReader::open(settings, "ringrep-relay")?;
    let (consumer, topic) = (&reader.consumer, &reader.topic);
    let (low, high) = reader.watermarks()?;
    if high <= low {
        return Ok(None);
    }
    // The last few offsets, in case the tail holds records that are not transactions.
    let mut from = (high - 16).max(low);
    reader.assign(from)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last: Option<LastRelayed> = None;
    let mut reached_end = false;
    let mut idle_since = Instant::now();
    loop {
        match consumer.poll(Duration::from_millis(300)) {
            Some(Ok(m)) => {
                idle_since = Instant::now();
                if let Some((server_id, seq)) = seq_header(&m) {
                    let acked_seq = header_u64(&m, ringrep_cdc::kafka::replication::ACKED_HEADER)
                        .unwrap_or(seq);
                    let found = LastRelayed {
                        server_id,
                        seq,
                        acked_seq,
                    };
                    last = Some(last.map_or(found, |l| if seq > l.seq { found } else { l }));
                }
                reached_end |= m.offset() >= high - 1;
            }
            Some(Err(e)) => return Err(kafka_error(&format!("reading {topic}"), e)),
            // Past the high watermark and nothing more: that was the tail. (Reading on until
            // the partition is quiet also copes with brokers whose offsets are not one per
            // record.)
            None if reached_end => return Ok(last),
            // Quiet before the watermark was seen: the end only if the consumer's position is
            // there (a broker whose offsets skip); a slow broker is waited for, since a tail
            // taken too early would have the run produce again what the topic holds.
            None if last.is_some() && idle_since.elapsed() > Duration::from_secs(3) => {
                if reader.position()? >= high {
                    return Ok(last);
                }
                idle_since = Instant::now();
            }
            // Nothing from the last offsets: a broker that answers a fetch from inside a
            // produce batch with the next batch (tansu 0.6.0) sends nothing when the last
            // batch is longer. Read the partition from its start.
            None if last.is_none()
                && from > low
                && idle_since.elapsed() > Duration::from_secs(3) =>
            {
                from = low;
                reader.assign(from)?;
                idle_since = Instant::now();
            }
            None => {}
        }
        if Instant::now() > deadline {
            return Err(kafka_error(
                &format!("reading the tail of {topic}"),
                format!("offsets {from}..{high} did not arrive within 30 s"),
            ));
        }
    }
}

/// A header's value as a number, if the record has it.
pub(crate) fn header_u64<M: Message>(m: &M, name: &str) -> Option<u64> {
    let headers = m.headers()?;
    headers
        .iter()
        .find(|h| h.key == name)
        .and_then(|h| h.value)
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|t| t.parse().ok())
}

/// (server id, seq) from a replication record's headers.
pub fn seq_header<M: Message>(m: &M) -> Option<(u32, u64)> {
    let headers = m.headers()?;
    let mut seq = None;
    let mut server = None;
    for h in headers.iter() {
        let text = h.value.and_then(|v| std::str::from_utf8(v).ok());
        match h.key {
            "ringrep.seq" => seq = text.and_then(|t| t.parse().ok()),
            "ringrep.server_id" => server = text.and_then(|t| t.parse().ok()),
            _ => {}
        }
    }
    Some((server?, seq?))
}

/// Every record of the replication topic as (server id, seq), in offset order: what a consumer
/// of the topic sees (for checks and tests). Reads until the high watermark seen at the start.
pub fn replication_seqs(settings: &KafkaSettings) -> Result<Vec<(u32, u64)>> {
    let reader = ReplicationReader::open(settings, "ringrep-check")?;
    let (consumer, topic) = (&reader.consumer, &reader.topic);
    let (low, high) = reader.watermarks()?;
    let mut out = Vec::new();
    if high <= low {
        return Ok(out);
    }
    reader.assign(low)?;
    let mut deadline = Instant::now() + Duration::from_secs(30);
    let mut reached_end = false;
    loop {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                deadline = Instant::now() + Duration::from_secs(30);
                let ids = seq_header(&m).ok_or_else(|| {
                    kafka_error(
                        topic,
                        format!("offset {} has no sequence headers", m.offset()),
                    )
                })?;
                out.push(ids);
                reached_end |= m.offset() >= high - 1;
            }
            Some(Err(e)) => return Err(kafka_error(&format!("reading {topic}"), e)),
            // Past the high watermark and quiet: the end. (Reading on until quiet also copes
            // with brokers whose watermark counts batches rather than records.)
            None if reached_end => return Ok(out),
            None if Instant::now() > deadline => {
                return Err(kafka_error(
                    topic,
                    format!("stalled at {} of {high} records", out.len()),
                ))
            }
            None => {}
        }
    }
}
