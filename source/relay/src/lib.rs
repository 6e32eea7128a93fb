//! The Kafka relay: follows a primary's binlog directory and produces the records that
//! `ringrep-cdc` lays out (docs/kafka.md): per transaction, the schema-topic records of its
//! DDL, a BEGIN on the transaction topic (when enabled), one change record per row event, an
//! END, then one replication-topic record; heartbeats while idle.
//!
//! Guarantees: every record exactly once, per partition in stream order, on brokers with or
//! without Kafka transactions. The producer is idempotent with `acks=all`, so within a run
//! nothing is duplicated, reordered or skipped in a partition. Each replication record carries
//! the last sequence number whose records on every topic were acknowledged when it was
//! produced (`ringrep.acked_seq`); a run, after a clean stop or a `kill -9`, replays the
//! binlog after that number, reads the last (`ringrep.seq`, `ringrep.order`) of every
//! partition it writes, and skips each record at or below its partition's last pair (module
//! `producer` says why that is exact). The schema topic is kept from repeats by its keys.
//!
//! Layout. [`Relay::run`] finds where to resume (`resume`), opens the producer (`producer`:
//! the idempotent producer, the partitions' tails and the records in flight), then reads the
//! binlog in batches (`binlog`) and turns each transaction into its records (`tables`: the
//! schema as of the record read, the topics, the per-transaction produce) until told to stop.
//! [`Relay::run_with_retries`] runs it again with backoff after a failure a retry can mend.
//! `stats`: what it has done, for logs, metrics and SHOW STATUS.

mod binlog;
mod producer;
mod resume;
mod stats;
mod tables;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use binlog_format::{Notifier, Record};
use ringrep_cdc::kafka::{self, Format};
use ringrep_kafka::{Error, KafkaSettings, Result};

use binlog::Batches;
use producer::Outbox;
pub use stats::{RelayState, RelayStats};
use tables::Tables;

/// The relay of one binlog directory.
pub struct Relay {
    settings: KafkaSettings,
    binlog_dir: PathBuf,
    notifier: Option<Arc<Notifier>>,
    /// The writing engine's durable sequence number, when the relay runs beside it.
    durable: Option<binlog::DurableSeq>,
    /// The writing engine's count of binlog heals, when the relay runs beside it.
    heals: Option<binlog::Heals>,
    /// Progress of [`Relay::run`], updated while it runs: clone it before calling `run`.
    pub stats: Arc<RelayStats>,
}

impl std::fmt::Debug for Relay {
    // The client options are left out: they may hold credentials (sasl.password=...).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("brokers", &self.settings.brokers)
            .field("topic_prefix", &self.settings.topic_prefix)
            .field("binlog_dir", &self.binlog_dir)
            .field("notifier", &self.notifier.is_some())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The first pause after a failed run; each failure in a row doubles it up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// The longest pause between runs.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

impl Relay {
    /// A relay of `binlog_dir` to the brokers and topics of `settings`. With `notifier` (the
    /// writing engine's, when the relay runs in the primary's process) the relay wakes as soon
    /// as a record is written; without it, it polls the directory, sleeping a short while
    /// between looks.
    /// Nothing is read or produced before [`Relay::run`].
    pub fn new(
        settings: KafkaSettings,
        binlog_dir: &Path,
        notifier: Option<Arc<Notifier>>,
    ) -> Relay {
        Relay {
            settings,
            binlog_dir: binlog_dir.to_path_buf(),
            notifier,
            durable: None,
            heals: None,
            stats: Arc::new(RelayStats::default()),
        }
    }

    /// Relays a transaction only once `durable()` (the writing engine's durable sequence
    /// number) covers it, so the topics never hold a transaction the primary could lose in a
    /// crash. For a relay in the primary's process; a relay of another process's directory
    /// cannot know and relays what is written.
    pub fn with_durable(mut self, durable: Arc<dyn Fn() -> u64 + Send + Sync>) -> Relay {
        self.durable = Some(durable);
        self
    }

    /// Tells the relay how many times the writing engine healed its binlog (`binlog_heals`):
    /// a transaction it holds until durable is dropped and read again when a heal cuts the
    /// binlog back under it, so that a record cut off never reaches Kafka.
    pub fn with_heals(mut self, heals: Arc<dyn Fn() -> u64 + Send + Sync>) -> Relay {
        self.heals = Some(heals);
        self
    }

    /// Relays until `stop` turns true, then waits for every produced record to be
    /// acknowledged. Returns the last acknowledged sequence number. A failure ends the run.
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) -> Result<u64> {
        let r = self.run_once(&mut stop).await;
        self.stats.finished(&r);
        r
    }

    /// As [`Relay::run`], but a failure a retry can mend (a broker away, a delivery that
    /// timed out) starts the run again after a pause that doubles from 1 s up to 60 s, while
    /// `stats` shows the state and the error; a failure no retry can mend (a setting, a topic
    /// of another server's stream, a refused login, a corrupt binlog) ends it.
    pub async fn run_with_retries(
        self,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> Result<u64> {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let started = Instant::now();
            let r = self.run_once(&mut stop).await;
            self.stats.finished(&r);
            match r {
                Err(e) if e.is_retriable() && !*stop.borrow() => {
                    tracing::error!(
                        "the Kafka relay stopped: {e}; starting it again in {backoff:?}"
                    );
                    self.stats.set_state(RelayState::Retrying);
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => {}
                    }
                    if *stop.borrow() {
                        return Err(e);
                    }
                    // A run that went well for a while starts the pauses over.
                    backoff = if started.elapsed() > MAX_BACKOFF {
                        FIRST_BACKOFF
                    } else {
                        (backoff * 2).min(MAX_BACKOFF)
                    };
                }
                other => return other,
            }
        }
    }

    async fn run_once(&self, stop: &mut tokio::sync::watch::Receiver<bool>) -> Result<u64> {
        let began = Instant::now();
        self.stats.set_state(RelayState::Starting);
        let start = resume::start(&self.settings, &self.binlog_dir).await?;
        let window = start.window;
        self.stats.acked_seq.store(window.acked, Ordering::Release);
        let guarantee = match self.settings.format {
            Format::Ringrep => "ringrep envelope",
            Format::Debezium { schemas: true } => "Debezium envelope with schemas",
            Format::Debezium { schemas: false } => "Debezium envelope without schemas",
        };
        tracing::info!(
            "relay: exactly once per partition (idempotent producer; restarts skip what each partition holds): {} holds seq {}, all records acknowledged up to seq {}; {} partitions' tails read in {} ms; {guarantee}",
            kafka::replication_topic(&self.settings.topic_prefix),
            window.relayed,
            window.acked,
            start.tails.len(),
            began.elapsed().as_millis(),
        );
        let mut outbox = Outbox::create(&self.settings, Arc::clone(&self.stats), start.tails)?;
        let from = resume::segment_start(&self.binlog_dir, window.acked + 1)?;
        let mut binlog = Batches::open(
            &self.binlog_dir,
            from,
            self.notifier.clone(),
            self.durable.clone(),
            self.heals.clone(),
        );
        let mut tables = Tables::new(start.announced);
        let mut server_id = start.server_id;
        let mut last = (window.relayed, 0i64);
        let mut idle_since = Instant::now();
        self.stats.set_state(RelayState::Running);
        while !*stop.borrow() {
            let (records, err) = binlog.next_batch().await?;
            if !records.is_empty() {
                idle_since = Instant::now();
            }
            for (position, record, header) in records {
                if let Some(schema) = header {
                    tables.reset(schema);
                }
                let Record::Transaction(tx) = record else {
                    continue;
                };
                self.stats.read_seq.store(tx.seq, Ordering::Relaxed);
                server_id = Some(tx.server_id);
                tables
                    .relay_transaction(&self.settings, &mut outbox, position, &tx, window)
                    .await?;
                last = (tx.seq, tx.commit_time_us);
            }
            if let Some(e) = err {
                return Err(Error::from(e));
            }
            if let (Some(every), Some(server)) = (self.settings.heartbeat, server_id) {
                if idle_since.elapsed() >= every {
                    let now_ms = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as i64);
                    let rec = kafka::heartbeat::heartbeat_record(
                        &self.settings.topic_prefix,
                        server,
                        last.0,
                        last.1,
                        now_ms,
                    );
                    outbox.send(rec, None).await?;
                    self.stats.heartbeats.fetch_add(1, Ordering::Relaxed);
                    idle_since = Instant::now();
                }
            }
            // Settle what the broker already acknowledged, without waiting.
            outbox.settle_acknowledged().await?;
        }
        outbox.finish().await
    }
}
