//! The Kafka relay: follows a primary's binlog directory and produces the records that
//! `ringrep-cdc` lays out (docs/kafka.md): one replication-topic record per transaction and
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
//!
//! Layout. [`Relay::run`] finds where to resume (`resume`: the last sequence number in the
//! replication topic, the binlog segment to replay from), opens the producer (`producer`: the
//! idempotent producer and the records in flight), then reads the binlog in batches (`binlog`)
//! and turns each transaction into its records (`tables`: the table definitions and change
//! topics as of the record read, and the per-transaction produce) until told to stop.

mod binlog;
mod producer;
mod resume;
mod tables;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use binlog_format::{Notifier, Record};
use ringrep_cdc::kafka;
use ringrep_kafka::{Error, KafkaSettings, Result};

use binlog::Batches;
use producer::Outbox;
use tables::Tables;

/// What a relay has done so far (shared with whoever shows progress).
#[derive(Debug, Default)]
pub struct RelayStats {
    /// The last sequence number whose replication record the broker acknowledged.
    pub acked_seq: AtomicU64,
    /// Transactions (replication records) produced in this run.
    pub transactions: AtomicU64,
    /// Change records produced in this run (tombstones included).
    pub change_records: AtomicU64,
}

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
    /// acknowledged. Returns the last acknowledged sequence number.
    pub async fn run(self, stop: tokio::sync::watch::Receiver<bool>) -> Result<u64> {
        let topic = kafka::replication_topic(&self.settings.topic_prefix);
        let resume = resume::resume_point(&self.settings, &topic, &self.binlog_dir).await?;
        self.stats.acked_seq.store(resume, Ordering::Release);
        tracing::info!(
            "relay: {topic} holds seq {resume}; relaying from seq {}",
            resume + 1
        );

        let mut outbox = Outbox::create(&self.settings, Arc::clone(&self.stats))?;
        let start = resume::segment_start(&self.binlog_dir, resume + 1)?;
        let mut binlog = Batches::open(
            &self.binlog_dir,
            start,
            self.notifier.clone(),
            self.durable.clone(),
            self.heals.clone(),
        );
        let mut tables = Tables::default();
        while !*stop.borrow() {
            let (records, err) = binlog.next_batch().await?;
            for (position, record, header) in records {
                if let Some(defs) = header {
                    tables.reset(defs);
                }
                let Record::Transaction(tx) = record else {
                    continue;
                };
                // Transactions up to the resume point are read only for their DDL.
                let relay_it = tx.seq > resume;
                tables
                    .relay_transaction(&self.settings, &mut outbox, position, &tx, relay_it)
                    .await?;
            }
            if let Some(e) = err {
                return Err(Error::from(e));
            }
            // Settle what the broker already acknowledged, without waiting.
            outbox.settle_acknowledged().await?;
        }
        outbox.finish().await
    }
}
