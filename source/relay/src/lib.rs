//! The Kafka relay: follows a primary's binlog directory and produces the records that
//! `binlog-format` lays out (docs/kafka.md): one replication-topic record per transaction and
//! one change-topic record per row event.
//!
//! Guarantees. The producer is idempotent with `acks=all`, so within a run nothing is
//! duplicated or reordered. After any restart, clean or `kill -9`, the relay reads the last
//! sequence number that reached the replication topic and resumes after it: that topic holds
//! every transaction exactly once, in order, whatever happens to the relay. Change records of
//! a transaction are produced before its replication record, so a crash can repeat the change
//! records of the transactions after the last one in the replication topic (at least once);
//! each envelope carries `source.server_id` and `source.seq` to drop such repeats. Kafka
//! transactions are not used, so correctness does not depend on the broker supporting them.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use binlog_format::kafka::{self, KafkaRecord, SourceInfo};
use binlog_format::segment::{list_segments, SegmentCursor};
use binlog_format::{DdlEvent, Event, Notifier, Position, Record, StartAt, TableDef, Tailer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};

use ringrep_kafka::{ensure_topic, kafka_error, last_relayed, Error, KafkaSettings, Result};

/// What a relay has done so far (shared with whoever shows progress).
#[derive(Debug, Default)]
pub struct RelayStats {
    /// The last sequence number whose replication record the broker acknowledged.
    pub acked_seq: AtomicU64,
    /// Transactions and change records produced in this run.
    pub transactions: AtomicU64,
    pub change_records: AtomicU64,
}

/// The first sequence number of the segment that holds `seq` (the relay replays the segment
/// from there to know every table's definition at `seq`).
fn segment_start(dir: &Path, seq: u64) -> Result<u64> {
    let mut start = 1;
    if !dir.exists() {
        return Ok(start);
    }
    for n in list_segments(dir)? {
        let first = SegmentCursor::open(dir, n, binlog_format::format::DEFAULT_MAX_FRAME)?
            .header
            .first_seq;
        if first <= seq {
            start = first;
        } else {
            break;
        }
    }
    Ok(start)
}

/// One record read from the binlog, with the segment header when a new segment began.
type Read = (Position, Record, Option<Vec<TableDef>>);

/// The relay of one binlog directory.
pub struct Relay {
    settings: KafkaSettings,
    binlog_dir: PathBuf,
    notifier: Option<Arc<Notifier>>,
    pub stats: Arc<RelayStats>,
}

impl Relay {
    pub fn new(
        settings: KafkaSettings,
        binlog_dir: &Path,
        notifier: Option<Arc<Notifier>>,
    ) -> Relay {
        Relay {
            settings,
            binlog_dir: binlog_dir.to_path_buf(),
            notifier,
            stats: Arc::new(RelayStats::default()),
        }
    }

    /// Relays until `stop` turns true, then waits for every produced record to be
    /// acknowledged. Returns the last acknowledged sequence number.
    pub async fn run(self, stop: tokio::sync::watch::Receiver<bool>) -> Result<u64> {
        let settings = self.settings.clone();
        let topic = kafka::replication_topic(&settings.topic_prefix);
        ensure_topic(&settings, &topic, 1).await?;
        let resume = {
            let (s, t) = (settings.clone(), topic.clone());
            let dir = self.binlog_dir.clone();
            tokio::task::spawn_blocking(move || -> Result<u64> {
                let last = last_relayed(&s)?;
                let server = binlog_format::segment::directory_server_id(&dir)?;
                if let (Some((topic_server, seq)), Some(ours)) = (last, server) {
                    if topic_server != ours {
                        return Err(kafka_error(
                            &t,
                            format!("the topic holds server {topic_server}'s stream (seq {seq}), this binlog is server {ours}'s; use another --kafka-topic-prefix"),
                        ));
                    }
                }
                Ok(last.map_or(0, |l| l.1))
            })
            .await
            .map_err(|e| kafka_error("startup", e))??
        };
        self.stats.acked_seq.store(resume, Ordering::Release);
        tracing::info!(
            "relay: {topic} holds seq {resume}; relaying from seq {}",
            resume + 1
        );

        let producer: FutureProducer = settings
            .client_config()
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("message.timeout.ms", "300000")
            .create()
            .map_err(|e| kafka_error("producer", e))?;

        let start = segment_start(&self.binlog_dir, resume + 1)?;
        let mut tailer = Tailer::open(&self.binlog_dir, StartAt::Seq(start));
        if let Some(n) = &self.notifier {
            tailer = tailer.with_notifier(n.clone());
        }
        let mut tailer = Some(tailer);
        let mut schema: HashMap<u64, TableDef> = HashMap::new();
        let mut topics: HashMap<String, i32> = HashMap::new();
        let mut inflight: VecDeque<(Option<u64>, DeliveryFuture)> = VecDeque::new();
        let mut last_header: Option<u64> = None;
        loop {
            if *stop.borrow() {
                break;
            }
            let mut t = tailer
                .take()
                .ok_or_else(|| kafka_error("binlog", "reader lost after an error"))?;
            let (t, batch) = tokio::task::spawn_blocking(move || {
                let mut out: Vec<Read> = Vec::new();
                let mut err = None;
                let deadline = Instant::now() + Duration::from_millis(100);
                while out.len() < 512 {
                    // Wait only for the first record; after it, take what is already there,
                    // so that a lone commit is relayed at once rather than after the wait.
                    let left = if out.is_empty() {
                        deadline.saturating_duration_since(Instant::now())
                    } else {
                        Duration::ZERO
                    };
                    match t.next_timeout(left) {
                        Ok(Some((pos, rec))) => {
                            let header = t.header().and_then(|h| {
                                (last_header != Some(h.first_seq)).then(|| {
                                    last_header = Some(h.first_seq);
                                    h.tables.clone()
                                })
                            });
                            out.push((pos, rec, header));
                        }
                        Ok(None) => break,
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                (t, (out, err, last_header))
            })
            .await
            .map_err(|e| kafka_error("binlog reader task", e))?;
            tailer = Some(t);
            let (records, err, lh) = batch;
            last_header = lh;
            for (position, record, header) in records {
                if let Some(tables) = header {
                    schema = tables.into_iter().map(|d| (d.id, d)).collect();
                }
                let Record::Transaction(tx) = record else {
                    continue;
                };
                let relay_it = tx.seq > resume;
                for (index, ev) in tx.events.iter().enumerate() {
                    match ev {
                        Event::Ddl(
                            DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table },
                        ) => {
                            schema.insert(table.id, table.clone());
                        }
                        Event::Ddl(DdlEvent::DropTable { table_id, .. }) => {
                            schema.remove(table_id);
                        }
                        Event::Ddl(_) => {}
                        Event::Row(row) if relay_it => {
                            let def = schema.get(&row.table_id).ok_or_else(|| {
                                kafka_error(
                                    "binlog",
                                    format!(
                                        "seq {}: table id {} is not in the schema",
                                        tx.seq, row.table_id
                                    ),
                                )
                            })?;
                            let ctopic = kafka::change_topic(
                                &settings.topic_prefix,
                                &def.database,
                                &def.name,
                            );
                            let partitions = match topics.get(&ctopic) {
                                Some(p) => *p,
                                None => {
                                    let p = ensure_topic(&settings, &ctopic, settings.partitions)
                                        .await?;
                                    topics.insert(ctopic.clone(), p);
                                    p
                                }
                            };
                            let src = SourceInfo {
                                server_id: tx.server_id,
                                seq: tx.seq,
                                position,
                                commit_time_us: tx.commit_time_us,
                                index: index as u32,
                            };
                            for rec in kafka::change_records(
                                &settings.topic_prefix,
                                def,
                                row,
                                &src,
                                partitions,
                                settings.tombstones,
                            ) {
                                produce(&producer, &rec, None, &mut inflight, &self.stats).await?;
                                self.stats.change_records.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Event::Row(_) => {}
                    }
                }
                if relay_it {
                    let rec = kafka::replication_record(&settings.topic_prefix, &tx)
                        .map_err(|e| kafka_error("encoding", e))?;
                    produce(&producer, &rec, Some(tx.seq), &mut inflight, &self.stats).await?;
                    self.stats.transactions.fetch_add(1, Ordering::Relaxed);
                }
            }
            if let Some(e) = err {
                return Err(Error::from(e));
            }
            // Settle what the broker already acknowledged, without waiting.
            while settle_ready(&mut inflight, &self.stats).await? {}
        }
        while !inflight.is_empty() {
            settle_front(&mut inflight, &self.stats).await?;
        }
        let p = producer.clone();
        tokio::task::spawn_blocking(move || p.flush(Duration::from_secs(30)))
            .await
            .map_err(|e| kafka_error("flush task", e))?
            .map_err(|e| kafka_error("flush", e))?;
        Ok(self.stats.acked_seq.load(Ordering::Acquire))
    }
}

/// Settles the oldest record in flight if the broker has answered for it; false otherwise.
async fn settle_ready(
    inflight: &mut VecDeque<(Option<u64>, DeliveryFuture)>,
    stats: &RelayStats,
) -> Result<bool> {
    let Some((_, f)) = inflight.front_mut() else {
        return Ok(false);
    };
    // A zero timeout still polls the future once.
    match tokio::time::timeout(Duration::ZERO, f).await {
        Err(_) => Ok(false),
        Ok(result) => {
            let seq = inflight.pop_front().and_then(|(seq, _)| seq);
            settle(seq, result, stats).map(|()| true)
        }
    }
}

/// Most records produced and not yet acknowledged: the relay waits for the oldest beyond it.
const MAX_IN_FLIGHT: usize = 20_000;

async fn produce(
    producer: &FutureProducer,
    rec: &KafkaRecord,
    seq: Option<u64>,
    inflight: &mut VecDeque<(Option<u64>, DeliveryFuture)>,
    stats: &RelayStats,
) -> Result<()> {
    loop {
        let mut headers = OwnedHeaders::new();
        for (k, v) in &rec.headers {
            headers = headers.insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            });
        }
        let mut fr: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&rec.topic)
            .key(&rec.key[..])
            .headers(headers);
        if let Some(v) = &rec.value {
            fr = fr.payload(&v[..]);
        }
        if let Some(p) = rec.partition {
            fr = fr.partition(p);
        }
        match producer.send_result(fr) {
            Ok(f) => {
                inflight.push_back((seq, f));
                if inflight.len() > MAX_IN_FLIGHT {
                    settle_front(inflight, stats).await?;
                }
                return Ok(());
            }
            // Backpressure: the local queue is full; wait for the broker to take some.
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                if inflight.is_empty() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                } else {
                    settle_front(inflight, stats).await?;
                }
            }
            Err((e, _)) => return Err(kafka_error(&format!("producing to {}", rec.topic), e)),
        }
    }
}

/// Waits for the oldest record in flight; a failed delivery stops the relay.
async fn settle_front(
    inflight: &mut VecDeque<(Option<u64>, DeliveryFuture)>,
    stats: &RelayStats,
) -> Result<()> {
    let Some((seq, f)) = inflight.pop_front() else {
        return Ok(());
    };
    settle(seq, f.await, stats)
}

fn settle(
    seq: Option<u64>,
    result: Result<rdkafka::producer::future_producer::OwnedDeliveryResult, impl std::fmt::Display>,
    stats: &RelayStats,
) -> Result<()> {
    match result {
        Ok(Ok(_)) => {
            if let Some(s) = seq {
                stats.acked_seq.store(s, Ordering::Release);
            }
            Ok(())
        }
        Ok(Err((e, m))) => Err(kafka_error(
            &format!(
                "delivery to {} failed (not retriable, or retries ran out)",
                m.topic()
            ),
            e,
        )),
        Err(e) => Err(kafka_error(
            "delivery",
            format!("the producer went away ({e})"),
        )),
    }
}
