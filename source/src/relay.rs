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
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use crate::error::{Error, Result};

/// Kafka flags shared by `ringrep-source serve` and `ringrep-source relay`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KafkaArgs {
    /// Kafka bootstrap servers (host:port,...). With it, the node relays its binlog to Kafka.
    #[arg(long, env = "RINGREP_KAFKA_BROKERS")]
    pub kafka_brokers: Option<String>,
    /// Topic name prefix: `<prefix>.replication` and `<prefix>.<database>.<table>`.
    #[arg(long, env = "RINGREP_KAFKA_TOPIC_PREFIX", default_value = kafka::DEFAULT_TOPIC_PREFIX)]
    pub kafka_topic_prefix: String,
    /// Partitions of each change topic the relay creates.
    #[arg(long, default_value_t = 6)]
    pub kafka_partitions: i32,
    /// Replication factor of the topics the relay creates.
    #[arg(long, default_value_t = 1)]
    pub kafka_replication_factor: i32,
    /// After each delete, also produce a tombstone (null value) for log compaction.
    #[arg(long)]
    pub kafka_tombstones: bool,
    /// A librdkafka client setting, KEY=VALUE, repeatable: SASL and TLS go here
    /// (security.protocol=SASL_SSL, sasl.mechanism=SCRAM-SHA-512, sasl.username=..., ...).
    #[arg(long = "kafka-option", value_name = "KEY=VALUE")]
    pub kafka_options: Vec<String>,
}

/// What the relay needs to reach Kafka.
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    pub brokers: String,
    pub topic_prefix: String,
    pub partitions: i32,
    pub replication_factor: i32,
    pub tombstones: bool,
    pub options: Vec<(String, String)>,
}

impl KafkaArgs {
    /// The settings, or `None` without `--kafka-brokers`.
    pub fn settings(&self) -> Result<Option<KafkaSettings>> {
        let Some(brokers) = self.kafka_brokers.clone() else {
            return Ok(None);
        };
        let mut options = Vec::new();
        for o in &self.kafka_options {
            let (k, v) = o.split_once('=').ok_or_else(|| {
                Error::internal(format!("--kafka-option {o}: expected KEY=VALUE"))
            })?;
            options.push((k.trim().to_string(), v.trim().to_string()));
        }
        if self.kafka_partitions < 1 || self.kafka_replication_factor < 1 {
            return Err(Error::internal(
                "--kafka-partitions and --kafka-replication-factor must be at least 1",
            ));
        }
        Ok(Some(KafkaSettings {
            brokers,
            topic_prefix: self.kafka_topic_prefix.clone(),
            partitions: self.kafka_partitions,
            replication_factor: self.kafka_replication_factor,
            tombstones: self.kafka_tombstones,
            options,
        }))
    }
}

impl KafkaSettings {
    /// The librdkafka configuration: brokers, then the user's options.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        for (k, v) in &self.options {
            c.set(k, v);
        }
        c
    }
}

fn kafka_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::internal(format!("kafka: {what}: {e}"))
}

/// What a relay has done so far (shared with whoever shows progress).
#[derive(Debug, Default)]
pub struct RelayStats {
    /// The last sequence number whose replication record the broker acknowledged.
    pub acked_seq: AtomicU64,
    /// Transactions and change records produced in this run.
    pub transactions: AtomicU64,
    pub change_records: AtomicU64,
}

/// A consumer of the replication topic's one partition, with a manual assignment and no
/// committed offsets (the relay, the applier's Kafka source and checks all read it so).
pub struct ReplicationReader {
    pub consumer: BaseConsumer,
    pub topic: String,
}

impl ReplicationReader {
    /// `group` only names the client to the broker: nothing is ever committed.
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
            .create()
            .map_err(|e| kafka_error("consumer", e))?;
        Ok(ReplicationReader {
            consumer,
            topic: kafka::replication_topic(&settings.topic_prefix),
        })
    }

    /// (low, high) watermarks of partition 0.
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

    /// Reads on from `offset`.
    pub fn assign(&self, offset: i64) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, 0, Offset::Offset(offset))
            .map_err(|e| kafka_error("assign", e))?;
        self.consumer
            .assign(&tpl)
            .map_err(|e| kafka_error("assign", e))
    }
}

/// Errors that asking again cannot mend: the broker refused who we are or what we asked.
fn refused(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::Authentication
                | RDKafkaErrorCode::SaslAuthenticationFailed
                | RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::ClusterAuthorizationFailed
                | RDKafkaErrorCode::GroupAuthorizationFailed
        )
    )
}

/// The last transaction in the replication topic: (server id, seq), or `None` when empty.
pub fn last_relayed(settings: &KafkaSettings) -> Result<Option<(u32, u64)>> {
    let reader = ReplicationReader::open(settings, "ringrep-relay")?;
    let (consumer, topic) = (&reader.consumer, &reader.topic);
    let (low, high) = reader.watermarks()?;
    if high <= low {
        return Ok(None);
    }
    // The last few offsets, in case the tail holds records that are not transactions.
    let from = (high - 16).max(low);
    reader.assign(from)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last: Option<(u32, u64)> = None;
    let mut reached_end = false;
    let mut idle_since = Instant::now();
    loop {
        match consumer.poll(Duration::from_millis(300)) {
            Some(Ok(m)) => {
                idle_since = Instant::now();
                if let Some(found) = seq_header(&m) {
                    last = Some(last.map_or(found, |l| if found.1 > l.1 { found } else { l }));
                }
                reached_end |= m.offset() >= high - 1;
            }
            Some(Err(e)) => return Err(kafka_error(&format!("reading {topic}"), e)),
            // Past the high watermark and nothing more: that was the tail. (Reading on until
            // the partition is quiet also copes with brokers whose offsets are not one per
            // record.)
            None if reached_end => return Ok(last),
            None if last.is_some() && idle_since.elapsed() > Duration::from_secs(3) => {
                return Ok(last)
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

/// The partition count of `topic` as the broker's metadata shows it, if it exists.
async fn partitions_of(
    admin: &Arc<AdminClient<DefaultClientContext>>,
    topic: &str,
) -> Result<Option<i32>> {
    let (a, t) = (admin.clone(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        let md = a
            .inner()
            .fetch_metadata(Some(&t), Duration::from_secs(5))
            .ok()?;
        let found = md.topics().iter().find(|x| x.name() == t)?;
        (found.error().is_none() && !found.partitions().is_empty())
            .then(|| found.partitions().len() as i32)
    })
    .await
    .map_err(|e| kafka_error("metadata task", e))
}

/// Creates `topic` unless it exists; returns its partition count once the broker shows it.
pub async fn ensure_topic(settings: &KafkaSettings, topic: &str, partitions: i32) -> Result<i32> {
    let admin: AdminClient<DefaultClientContext> = settings
        .client_config()
        // Looking a topic up must not create it with the broker's defaults.
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(|e| kafka_error("admin client", e))?;
    let admin = Arc::new(admin);
    if let Some(p) = partitions_of(&admin, topic).await? {
        return Ok(p);
    }
    let new = NewTopic::new(
        topic,
        partitions,
        TopicReplication::Fixed(settings.replication_factor),
    );
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    match admin.create_topics([&new], &opts).await {
        Ok(results) => {
            for r in results {
                match r {
                    Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                    Err((t, code)) => tracing::warn!(
                        "could not create topic {t} ({code}); relying on the broker's auto-creation"
                    ),
                }
            }
        }
        Err(e) => tracing::warn!(
            "could not create topic {topic} ({e}); relying on the broker's auto-creation"
        ),
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(p) = partitions_of(&admin, topic).await? {
            return Ok(p);
        }
        if Instant::now() > deadline {
            return Err(kafka_error(
                &format!("topic {topic}"),
                "not available within 30 s",
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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
