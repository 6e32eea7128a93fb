//! # ringrep-kafka
//!
//! What the Kafka relay and the replica's Kafka source share: the command-line flags and the
//! client settings ([`KafkaArgs`], [`KafkaSettings`]), the reader of the replication topic
//! ([`ReplicationReader`], [`last_relayed`], [`replication_seqs`]; module `reader`), the
//! places the topics' partitions end at ([`read_tails`], [`read_records`]; module `tails`) and
//! topic creation with its settings checked ([`ensure_topic`]; module `topics`). The record
//! layout itself is `ringrep_cdc::kafka`; this crate is the client side of it (librdkafka
//! through rdkafka).

mod error;
mod reader;
mod tails;
mod topics;

use std::time::Duration;

use rdkafka::config::ClientConfig;
use ringrep_cdc::kafka::{self, Format};

pub use error::{kafka_error, Error, Result};
pub use reader::{last_relayed, replication_seqs, seq_header, LastRelayed, ReplicationReader};
pub use tails::{read_records, read_tails, KeyValue, Tail};
pub use topics::{ensure_topic, ensure_topics, list_topics, TopicKind};

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
    /// After each delete, also produce a tombstone (null value) for log compaction. On by
    /// default when `--kafka-cleanup-policy` compacts; `--kafka-tombstones=false` turns it off.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub kafka_tombstones: Option<bool>,
    /// The change records' format: `ringrep` (ringrep's envelope), `debezium` (Debezium's
    /// MySQL envelope with the schemas Kafka Connect's JsonConverter embeds) or
    /// `debezium-noschema`.
    #[arg(long, default_value = "ringrep", value_name = "FORMAT")]
    pub kafka_format: String,
    /// `cleanup.policy` of the change topics the relay creates: `delete`, `compact` (the last
    /// record of each row: at most N+1 per ring prefix) or `compact,delete`.
    #[arg(long, default_value = "delete", value_name = "POLICY")]
    pub kafka_cleanup_policy: String,
    /// Another setting of the change topics the relay creates, KEY=VALUE, repeatable
    /// (`retention.ms=604800000`, ...); checked against existing topics at start.
    #[arg(long = "kafka-topic-config", value_name = "KEY=VALUE")]
    pub kafka_topic_configs: Vec<String>,
    /// Also write a BEGIN and an END record per transaction to `<prefix>.transaction`.
    #[arg(long)]
    pub kafka_transaction_topic: bool,
    /// When tables are sent whole before their changes: `initial` (when the topics hold
    /// nothing of this stream yet), `when_needed` (also when the binlog the change topics need
    /// next was purged), `no_data` (never: the change topics start where the binlog does).
    #[arg(long, default_value = "initial", value_name = "MODE")]
    pub kafka_snapshot: String,
    /// The signal table (`DATABASE.TABLE`, columns `id`, `type`, `data` as Debezium's): a
    /// row written to it with type `execute-snapshot` starts an incremental snapshot of the
    /// tables its data names, `stop-snapshot` stops one. Needs the relay inside the primary.
    #[arg(long, value_name = "DATABASE.TABLE")]
    pub kafka_signal_table: Option<String>,
    /// Rows per chunk of an incremental snapshot [default: 1024].
    #[arg(long, value_name = "ROWS")]
    pub kafka_incremental_chunk_rows: Option<usize>,
    /// Produce in Kafka transactions (several binlog transactions in each, never one split),
    /// under a stable `transactional.id` that fences an earlier relay of the same stream; for
    /// consumers with `isolation.level=read_committed`. Needs a broker with transactions
    /// (tansu 0.6.0 has none: without this flag, restarts skip what each partition holds).
    #[arg(long)]
    pub kafka_transactions: bool,
    /// The `transactional.id` of `--kafka-transactions`, `ringrep-relay.<prefix>` by default;
    /// giving it turns them on.
    #[arg(long, value_name = "ID")]
    pub kafka_transactional_id: Option<String>,
    /// Milliseconds between heartbeat records on `<prefix>.heartbeat` while the stream is
    /// idle; 0 turns them off.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub kafka_heartbeat_ms: u64,
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
    /// The change records' format.
    pub format: Format,
    /// Settings of the change topics the relay creates, `cleanup.policy` first.
    pub topic_configs: Vec<(String, String)>,
    /// Whether the relay writes the transaction topic.
    pub transaction_topic: bool,
    /// The interval of heartbeat records while idle; `None`: no heartbeats.
    pub heartbeat: Option<Duration>,
    /// When tables are sent whole before their changes.
    pub snapshot: SnapshotMode,
    /// The signal table (database, table) whose rows start and stop incremental snapshots.
    pub signal_table: Option<(String, String)>,
    /// Rows per chunk of an incremental snapshot (at least 1).
    pub incremental_chunk_rows: usize,
    /// With Kafka transactions: the producer's `transactional.id`. `None`: an idempotent
    /// producer without transactions, and restarts skip what each partition holds.
    pub transactional_id: Option<String>,
    /// librdkafka client settings, (key, value), applied after `bootstrap.servers` so they
    /// can override it; SASL and TLS settings go here.
    pub options: Vec<(String, String)>,
}

/// When the relay sends tables whole (as `read` records taken at one sequence number) before
/// their changes, as Debezium's `snapshot.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnapshotMode {
    /// When the topics hold nothing of this stream yet.
    #[default]
    Initial,
    /// As `Initial`, and also when the binlog the change topics need next was purged.
    WhenNeeded,
    /// Never: the change topics start where the binlog does.
    NoData,
}

impl SnapshotMode {
    const ALL: [SnapshotMode; 3] = [
        SnapshotMode::Initial,
        SnapshotMode::WhenNeeded,
        SnapshotMode::NoData,
    ];

    /// The mode's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SnapshotMode::Initial => "initial",
            SnapshotMode::WhenNeeded => "when_needed",
            SnapshotMode::NoData => "no_data",
        }
    }

    /// The mode named on the command line: `initial`, `when_needed` or `no_data`.
    pub fn parse(name: &str) -> Option<SnapshotMode> {
        SnapshotMode::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// A `KEY=VALUE` flag split in two, or a configuration error naming `flag`.
fn key_value(flag: &str, o: &str) -> Result<(String, String)> {
    let (k, v) = o
        .split_once('=')
        .ok_or_else(|| Error::Config(format!("{flag} {o}: expected KEY=VALUE")))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// Refuses a `--kafka-option` that would weaken what the relay guarantees (the idempotent,
/// gapless producer that every acknowledged record's place depends on), or that has a flag of
/// its own. Others (`linger.ms`, `message.timeout.ms`, `fetch.wait.max.ms`, security
/// settings) pass to librdkafka as given, over the relay's defaults.
fn check_option(k: &str, v: &str) -> Result<()> {
    let why = match k {
        "enable.idempotence" | "enable.gapless.guarantee" if v != "true" => {
            "exactly-once delivery needs the idempotent, gapless producer"
        }
        "acks" | "request.required.acks" if v != "all" && v != "-1" => {
            "exactly-once delivery needs acks=all"
        }
        "transactional.id" => "give it with --kafka-transactional-id (and --kafka-transactions)",
        "isolation.level" if v != "read_committed" => {
            "the tail check and the Kafka-fed replica read only committed records"
        }
        _ => return Ok(()),
    };
    Err(Error::Config(format!("--kafka-option {k}={v}: {why}")))
}

impl KafkaArgs {
    /// The settings, or `None` without `--kafka-brokers`.
    pub fn settings(&self) -> Result<Option<KafkaSettings>> {
        let Some(brokers) = self.kafka_brokers.clone() else {
            return Ok(None);
        };
        let options = self
            .kafka_options
            .iter()
            .map(|o| key_value("--kafka-option", o))
            .collect::<Result<Vec<_>>>()?;
        for (k, v) in &options {
            check_option(k, v)?;
        }
        if self.kafka_partitions < 1 || self.kafka_replication_factor < 1 {
            return Err(Error::Config(
                "--kafka-partitions and --kafka-replication-factor must be at least 1".into(),
            ));
        }
        // Kafka's own rule for topic names (the prefix also names the relay's snapshot files).
        let prefix = &self.kafka_topic_prefix;
        if prefix.is_empty()
            || prefix.len() > 200
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(Error::Config(format!(
                "--kafka-topic-prefix {prefix:?}: 1 to 200 of the characters Kafka allows in topic names (A-Z a-z 0-9 . _ -)"
            )));
        }
        let format = Format::parse(&self.kafka_format).ok_or_else(|| {
            Error::Config(format!(
                "--kafka-format {}: expected ringrep, debezium or debezium-noschema",
                self.kafka_format
            ))
        })?;
        let snapshot = SnapshotMode::parse(&self.kafka_snapshot).ok_or_else(|| {
            Error::Config(format!(
                "--kafka-snapshot {}: expected initial, when_needed or no_data",
                self.kafka_snapshot
            ))
        })?;
        let signal_table = match &self.kafka_signal_table {
            None => None,
            Some(t) => match t.split_once('.') {
                Some((db, name)) if !db.is_empty() && !name.is_empty() && !name.contains('.') => {
                    Some((db.to_string(), name.to_string()))
                }
                _ => {
                    return Err(Error::Config(format!(
                        "--kafka-signal-table {t}: expected DATABASE.TABLE"
                    )))
                }
            },
        };
        let chunk_rows = self.kafka_incremental_chunk_rows.unwrap_or(1024);
        if chunk_rows == 0 {
            return Err(Error::Config(
                "--kafka-incremental-chunk-rows must be at least 1".into(),
            ));
        }
        let transactional_id = match &self.kafka_transactional_id {
            Some(id) if id.is_empty() => {
                return Err(Error::Config(
                    "--kafka-transactional-id: must not be empty".into(),
                ))
            }
            Some(id) => Some(id.clone()),
            None => self
                .kafka_transactions
                .then(|| format!("ringrep-relay.{prefix}")),
        };
        let policy = self.kafka_cleanup_policy.replace(' ', "");
        if !["delete", "compact", "compact,delete", "delete,compact"].contains(&policy.as_str()) {
            return Err(Error::Config(format!(
                "--kafka-cleanup-policy {}: expected delete, compact or compact,delete",
                self.kafka_cleanup_policy
            )));
        }
        let mut topic_configs = vec![("cleanup.policy".to_string(), policy.clone())];
        for c in &self.kafka_topic_configs {
            let (k, v) = key_value("--kafka-topic-config", c)?;
            if k == "cleanup.policy" {
                return Err(Error::Config(
                    "--kafka-topic-config cleanup.policy=...: use --kafka-cleanup-policy".into(),
                ));
            }
            topic_configs.push((k, v));
        }
        Ok(Some(KafkaSettings {
            tombstones: self.kafka_tombstones.unwrap_or(policy.contains("compact")),
            format,
            topic_configs,
            transaction_topic: self.kafka_transaction_topic,
            heartbeat: (self.kafka_heartbeat_ms > 0)
                .then(|| Duration::from_millis(self.kafka_heartbeat_ms)),
            snapshot,
            signal_table,
            incremental_chunk_rows: chunk_rows,
            transactional_id,
            options,
            ..KafkaSettings::new(&brokers, &self.kafka_topic_prefix)
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
            .field("format", &self.format)
            .field("topic_configs", &self.topic_configs)
            .field("transaction_topic", &self.transaction_topic)
            .field("heartbeat", &self.heartbeat)
            .field("snapshot", &self.snapshot)
            .field("signal_table", &self.signal_table)
            .field("incremental_chunk_rows", &self.incremental_chunk_rows)
            .field("transactional_id", &self.transactional_id)
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
    /// The defaults of the flags for `brokers` and topic prefix `prefix`: 6 partitions,
    /// replication factor 1, ringrep's format, `cleanup.policy=delete` without tombstones, no
    /// transaction topic, heartbeats every 10 s, `initial` snapshots, no signal table (chunks of
    /// 1024 rows when one is given), no Kafka transactions, no client options.
    pub fn new(brokers: &str, prefix: &str) -> KafkaSettings {
        KafkaSettings {
            brokers: brokers.to_string(),
            topic_prefix: prefix.to_string(),
            partitions: 6,
            replication_factor: 1,
            tombstones: false,
            format: Format::Ringrep,
            topic_configs: vec![("cleanup.policy".into(), "delete".into())],
            transaction_topic: false,
            heartbeat: Some(Duration::from_secs(10)),
            snapshot: SnapshotMode::Initial,
            signal_table: None,
            incremental_chunk_rows: 1024,
            transactional_id: None,
            options: vec![],
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::error::RDKafkaErrorCode;

    /// Printing settings (in a log line, an error) never shows a password.
    #[test]
    fn debug_hides_secrets() {
        let s = KafkaSettings {
            options: vec![
                ("sasl.password".into(), "hunter2".into()),
                ("sasl.username".into(), "relay".into()),
            ],
            ..KafkaSettings::new("127.0.0.1:9092", "ringrep")
        };
        let text = format!("{s:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("relay"), "{text}");
    }

    /// Compaction turns tombstones on unless told otherwise; a bad format or policy is a
    /// configuration error.
    #[test]
    fn topic_settings_follow_the_flags() {
        let args = |policy: &str, tombstones: Option<bool>| KafkaArgs {
            kafka_brokers: Some("127.0.0.1:9092".into()),
            kafka_cleanup_policy: policy.into(),
            kafka_tombstones: tombstones,
            kafka_format: "ringrep".into(),
            kafka_snapshot: "initial".into(),
            kafka_topic_prefix: "ringrep".into(),
            kafka_partitions: 6,
            kafka_replication_factor: 1,
            ..Default::default()
        };
        let s = args("compact", None).settings().expect("ok").expect("some");
        assert!(s.tombstones);
        assert_eq!(
            s.topic_configs[0],
            ("cleanup.policy".into(), "compact".into())
        );
        let s = args("compact", Some(false))
            .settings()
            .expect("ok")
            .expect("some");
        assert!(!s.tombstones);
        let s = args("delete", None).settings().expect("ok").expect("some");
        assert!(!s.tombstones);
        assert!(matches!(
            args("forever", None).settings(),
            Err(Error::Config(_))
        ));
        assert_eq!(s.transactional_id, None);
        let mut t = args("delete", None);
        t.kafka_transactions = true;
        let s = t.settings().expect("ok").expect("some");
        assert_eq!(s.transactional_id.as_deref(), Some("ringrep-relay.ringrep"));
        t.kafka_transactions = false;
        t.kafka_transactional_id = Some("relay-eu-1".into());
        let s = t.settings().expect("ok").expect("some");
        assert_eq!(s.transactional_id.as_deref(), Some("relay-eu-1"));
        t.kafka_transactional_id = Some(String::new());
        assert!(matches!(t.settings(), Err(Error::Config(_))));
        let mut bad = args("delete", None);
        bad.kafka_format = "avro".into();
        assert!(matches!(bad.settings(), Err(Error::Config(_))));
        for prefix in ["", "a/b", "../x", "r r"] {
            let mut bad = args("delete", None);
            bad.kafka_topic_prefix = prefix.into();
            assert!(
                matches!(bad.settings(), Err(Error::Config(_))),
                "{prefix:?}"
            );
        }
    }

    /// A bad setting is a configuration error (no retry helps); a broker failure is retriable
    /// unless the broker refused who we are.
    #[test]
    fn errors_say_whether_a_retry_can_help() {
        let args = KafkaArgs {
            kafka_brokers: Some("127.0.0.1:9092".into()),
            kafka_options: vec!["no-equals-sign".into()],
            kafka_format: "ringrep".into(),
            kafka_cleanup_policy: "delete".into(),
            kafka_snapshot: "initial".into(),
            ..Default::default()
        };
        let e = args.settings().expect_err("bad option");
        assert!(matches!(e, Error::Config(_)) && !e.is_retriable(), "{e}");
        // Options that would weaken the guarantees are refused; tuning passes.
        for (o, refused) in [
            ("acks=1", true),
            ("acks=all", false),
            ("enable.idempotence=false", true),
            ("enable.gapless.guarantee=false", true),
            ("transactional.id=x", true),
            ("isolation.level=read_uncommitted", true),
            ("linger.ms=0", false),
            ("fetch.wait.max.ms=1", false),
        ] {
            let args = KafkaArgs {
                kafka_options: vec![o.into()],
                kafka_partitions: 1,
                kafka_replication_factor: 1,
                kafka_topic_prefix: "ringrep".into(),
                ..args.clone()
            };
            let got = args.settings();
            assert_eq!(got.is_err(), refused, "{o}: {got:?}");
            if let Err(e) = got {
                assert!(e.to_string().contains(o), "{e}");
            }
        }
        let e = kafka_error("metadata", "not available within 30 s");
        assert!(e.is_retriable());
        let refused =
            rdkafka::error::KafkaError::MetadataFetch(RDKafkaErrorCode::TopicAuthorizationFailed);
        assert!(!kafka_error("metadata", refused).is_retriable());
        let transient =
            rdkafka::error::KafkaError::MetadataFetch(RDKafkaErrorCode::BrokerTransportFailure);
        assert!(kafka_error("metadata", transient).is_retriable());
        let bad = rdkafka::error::KafkaError::ClientCreation("`linger.ms` out of range".into());
        assert!(!kafka_error("producer", bad).is_retriable());
    }
}
