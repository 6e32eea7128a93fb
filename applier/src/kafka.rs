//! The applier's Kafka source: the replication topic (`<prefix>.replication`, partition 0),
//! read with a manual assignment from the offset that holds the replica's next sequence
//! number. The offset is found from the sequence numbers in the records (a binary search over
//! the partition), never from consumer-group offsets, so the replica's own stored position is
//! the only position there is. librdkafka reconnects by itself when brokers restart.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use binlog_format::Position;
use rdkafka::message::Message;
use ringrep_cdc::kafka::decode_replication_value;
use ringrep_kafka::{seq_header, KafkaSettings, ReplicationReader};

use crate::error::{Error, Result};
use crate::source::{EventSource, SourcedTx};

fn source_error(what: impl std::fmt::Display) -> Error {
    Error::Source(format!("kafka: {what}"))
}

/// A replication topic followed from a sequence number.
pub struct KafkaSource {
    reader: Arc<ReplicationReader>,
    brokers: String,
    /// The next sequence number wanted; records below it are skipped.
    next_seq: u64,
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("brokers", &self.brokers)
            .field("topic", &self.reader.topic)
            .field("next_seq", &self.next_seq)
            .finish_non_exhaustive()
    }
}

/// How long one probe of the binary search waits for its record. A probe that gets nothing
/// counts as "past the end", which can only make the start earlier (more records skipped),
/// never later, so a slow broker costs time, not records.
const PROBE_WAIT: Duration = Duration::from_secs(5);

impl KafkaSource {
    fn connect(settings: &KafkaSettings, from_seq: u64) -> Result<KafkaSource> {
        Ok(KafkaSource {
            reader: Arc::new(
                ReplicationReader::open(settings, "ringrep-applier").map_err(source_error)?,
            ),
            brokers: settings.brokers.clone(),
            next_seq: from_seq,
        })
    }

    /// Opens the replication topic so that the next record [`EventSource::next`] returns is
    /// the one with sequence `from_seq` (records before it are read and skipped), or the next
    /// one to arrive when the topic does not reach it yet. Blocking: call from a blocking
    /// context.
    pub fn open(settings: &KafkaSettings, from_seq: u64) -> Result<KafkaSource> {
        let source = KafkaSource::connect(settings, from_seq)?;
        let offset = source.offset_of(from_seq)?;
        source.assign(offset)?;
        Ok(source)
    }

    /// The server id of the stream in the topic, waiting up to `wait` for a first record.
    pub fn server_id(settings: &KafkaSettings, wait: Duration) -> Result<Option<u32>> {
        let probe = KafkaSource::connect(settings, 1)?;
        let (low, _) = probe.watermarks()?;
        probe.assign(low)?;
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if let Some((server, _)) = probe.read_one(Duration::from_millis(200))?.map(|x| x.1) {
                return Ok(Some(server));
            }
        }
        Ok(None)
    }

    fn watermarks(&self) -> Result<(i64, i64)> {
        self.reader.watermarks().map_err(source_error)
    }

    fn assign(&self, offset: i64) -> Result<()> {
        self.reader.assign(offset).map_err(source_error)
    }

    /// The next record: (offset, (server id, seq), value).
    #[allow(clippy::type_complexity)]
    fn read_one(&self, wait: Duration) -> Result<Option<(i64, (u32, u64), Vec<u8>)>> {
        match self.reader.consumer.poll(wait) {
            None => Ok(None),
            Some(Err(e)) => Err(source_error(format!("reading {}: {e}", self.reader.topic))),
            Some(Ok(m)) => {
                let ids = seq_header(&m).ok_or_else(|| {
                    source_error(format!(
                        "{} offset {} has no ringrep.seq/ringrep.server_id headers",
                        self.reader.topic,
                        m.offset()
                    ))
                })?;
                Ok(Some((
                    m.offset(),
                    ids,
                    m.payload().unwrap_or_default().to_vec(),
                )))
            }
        }
    }

    /// The first record a read from `offset` delivers: (its offset, its sequence number), or
    /// `None` when nothing arrives within [`PROBE_WAIT`]. Its offset may be past `offset`:
    /// some brokers (tansu 0.6.0) answer a fetch from inside a produce batch with the next
    /// batch, so only offsets a read lands on exactly are safe places to start.
    fn probe(&self, offset: i64) -> Result<Option<(i64, u64)>> {
        self.assign(offset)?;
        let deadline = Instant::now() + PROBE_WAIT;
        while Instant::now() < deadline {
            if let Some((at, (_, seq), _)) = self.read_one(Duration::from_millis(200))? {
                if at >= offset {
                    return Ok(Some((at, seq)));
                }
            }
        }
        Ok(None)
    }

    /// An offset to read from so that the record with sequence number `seq` is among those
    /// read, and few before it are: an offset a read lands on exactly, holding a sequence
    /// number below `seq` (the reader skips up to `seq`), or the topic's start when no record
    /// is below it. Sequence numbers rise with offsets, so a binary search over probes finds
    /// it. No watermark is trusted as the end.
    fn offset_of(&self, seq: u64) -> Result<i64> {
        let (low, high) = self.watermarks()?;
        if high <= low {
            return Ok(low);
        }
        let mut best = match self.probe(low)? {
            Some((at, s)) if s < seq => at,
            _ => return Ok(low),
        };
        let (mut lo, mut hi) = (best + 1, high - 1);
        while lo <= hi {
            let mid = lo + (hi - lo) / 2;
            match self.probe(mid)? {
                Some((at, s)) if s < seq => {
                    best = best.max(at);
                    lo = at.max(mid) + 1;
                }
                _ => hi = mid - 1,
            }
        }
        Ok(best)
    }
}

#[async_trait]
impl EventSource for KafkaSource {
    async fn next(&mut self, timeout: Duration) -> Result<Option<SourcedTx>> {
        let reader = self.reader.clone();
        let next = self.next_seq;
        let got = tokio::task::spawn_blocking(move || -> Result<Option<SourcedTx>> {
            let deadline = Instant::now() + timeout;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let topic = &reader.topic;
                let m = match reader.consumer.poll(left) {
                    None => return Ok(None),
                    Some(Err(e)) => {
                        // Broker hiccups surface here; librdkafka reconnects by itself.
                        tracing::warn!("kafka: {topic}: {e}");
                        if Instant::now() >= deadline {
                            return Ok(None);
                        }
                        continue;
                    }
                    Some(Ok(m)) => m,
                };
                let offset = m.offset();
                let value = m.payload().ok_or_else(|| {
                    source_error(format!("{topic} offset {offset}: a record without a value"))
                })?;
                let tx = decode_replication_value(value)
                    .map_err(|e| source_error(format!("{topic} offset {offset}: {e}")))?;
                if tx.seq < next {
                    continue;
                }
                if tx.seq > next {
                    // Exactly-once topics have no gaps of their own: records were deleted, and
                    // nothing after them may be applied. (Looking for the record again by its
                    // sequence number, for a topic written again, reassigned the consumer while
                    // librdkafka 2.12.1 was still starting the partition, and it aborted on its
                    // assertion `rktp->rktp_started`.)
                    return Err(Error::SourceFatal(format!(
                        "sequence gap from server {}: {topic} offset {offset} holds seq {}, and seq {next} is no longer in the topic (its retention deleted it, or the broker lost its data and the relay began the stream again after a snapshot); provision this replica again: seed it from a backup of the primary (ringrep-applier seed), then serve it from Kafka",
                        tx.server_id, tx.seq
                    )));
                }
                return Ok(Some(SourcedTx {
                    tx,
                    position: Position {
                        segment: 0,
                        offset: offset as u64,
                    },
                }));
            }
        })
        .await
        .map_err(|e| source_error(format!("reader task: {e}")))??;
        if let Some(t) = &got {
            self.next_seq = t.tx.seq + 1;
        }
        Ok(got)
    }

    fn describe(&self) -> String {
        format!("Kafka topic {} at {}", self.reader.topic, self.brokers)
    }
}
