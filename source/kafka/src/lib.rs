//! # ringrep-kafka
//!
//! What the Kafka relay and the replica's Kafka source share: the command-line flags and the
//! client settings ([`KafkaArgs`], [`KafkaSettings`]), the reader of the replication topic
//! ([`ReplicationReader`], [`last_relayed`], [`replication_seqs`]), the sequence headers of its
//! records ([`seq_header`]) and topic creation ([`ensure_topic`]). The record layout itself is
//! `ringrep_cdc::kafka`; this crate is the client side of it (librdkafka through rdkafka).

mod error;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use ringrep_cdc::kafka;

use error::refused;
pub use error::{kafka_error, Error, Result};
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

/// What the relay and the replica's Kafka source need to reach Kafka: [`KafkaArgs`] checked
/// and split up by [`KafkaArgs::settings`]. Its `Debug` shows option values only for keys
/// that cannot hold a secret.
#[derive(Clone)]
pub struct KafkaSettings {
    /// Bootstrap servers, `host:port,...` (librdkafka's `bootstrap.servers`).
    pub brokers: String,
    /// Topic name prefix: the replication topic is `<prefix>.replication`, a table's change
    /// topic `<prefix>.<database>.<table>`.
    pub topic_prefix: String,
    /// Partitions of each change topic the relay creates ([`KafkaArgs::settings`] checks it
    /// is at least 1).
    pub partitions: i32,
    /// Replication factor of the topics the relay creates ([`KafkaArgs::settings`] checks it
    /// is at least 1).
    pub replication_factor: i32,
    /// Whether the relay follows each delete's change record with a tombstone (null value).
    pub tombstones: bool,
    /// librdkafka client settings, (key, value), applied after `bootstrap.servers` so they
    /// can override it; SASL and TLS settings go here.
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
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| Error::Config(format!("--kafka-option {o}: expected KEY=VALUE")))?;
            options.push((k.trim().to_string(), v.trim().to_string()));
        }
        if self.kafka_partitions < 1 || self.kafka_replication_factor < 1 {
            return Err(Error::Config(
                "--kafka-partitions and --kafka-replication-factor must be at least 1".into(),
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

impl std::fmt::Debug for KafkaSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let options: Vec<(&str, &str)> = self
            .options
            .iter()
            .map(|(k, v)| (k.as_str(), if secret(k) { "***" } else { v.as_str() }))
            .collect();
        f.debug_struct("KafkaSettings")
            .field("brokers", &self.brokers)
            .field("topic_prefix", &self.topic_prefix)
            .field("partitions", &self.partitions)
            .field("replication_factor", &self.replication_factor)
            .field("tombstones", &self.tombstones)
            .field("options", &options)
            .finish()
    }
}

/// Whether a librdkafka setting can hold a secret (a password, a key, a token).
fn secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "secret", "key", "token", "jaas"]
        .iter()
        .any(|w| k.contains(w))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Printing settings (in a log line, an error) never shows a password.
    #[test]
    fn debug_hides_secrets() {
        let s = KafkaSettings {
            brokers: "127.0.0.1:9092".into(),
            topic_prefix: "ringrep".into(),
            partitions: 1,
            replication_factor: 1,
            tombstones: false,
            options: vec![
                ("sasl.password".into(), "hunter2".into()),
                ("sasl.username".into(), "relay".into()),
            ],
        };
        let text = format!("{s:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("relay"), "{text}");
    }

    /// A bad setting is a configuration error (no retry helps); a broker failure is retriable
    /// unless the broker refused who we are.
    #[test]
    fn errors_say_whether_a_retry_can_help() {
        let args = KafkaArgs {
            kafka_brokers: Some("127.0.0.1:9092".into()),
            kafka_options: vec!["no-equals-sign".into()],
            ..Default::default()
        };
        let e = args.settings().expect_err("bad option");
        assert!(matches!(e, Error::Config(_)) && !e.is_retriable(), "{e}");
        let e = kafka_error("metadata", "not available within 30 s");
        assert!(e.is_retriable());
        let refused =
            rdkafka::error::KafkaError::MetadataFetch(RDKafkaErrorCode::TopicAuthorizationFailed);
        assert!(!kafka_error("metadata", refused).is_retriable());
        let transient =
            rdkafka::error::KafkaError::MetadataFetch(RDKafkaErrorCode::BrokerTransportFailure);
        assert!(kafka_error("metadata", transient).is_retriable());
    }
}
