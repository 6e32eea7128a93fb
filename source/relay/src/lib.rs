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
mod incremental;
mod producer;
mod resume;
mod snapshot;
mod stats;
mod tables;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use binlog_format::{Notifier, Record};
use ringrep_cdc::kafka::{self, Format};
use ringrep_kafka::{kafka_error, Error, KafkaSettings, Result, SnapshotMode};

use binlog::Batches;
use incremental::Incremental;
pub use incremental::{Chunk, ChunkFn, ChunkRequest};
use producer::Outbox;
pub use snapshot::{SnapshotFn, TableSnapshot};
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
    /// What takes a snapshot, and the directory where one is kept while it is sent.
    snapshots: Option<(SnapshotFn, PathBuf)>,
    /// What reads chunks of a table for incremental snapshots, and the directory where the
    /// relay keeps their progress.
    chunks: Option<(ChunkFn, PathBuf)>,
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

/// The longest time the relay spends on chunks of incremental snapshots between two batches
/// of the binlog.
const CHUNKS_PER_BATCH_TIME: Duration = Duration::from_millis(100);

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
            snapshots: None,
            chunks: None,
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

    /// Lets the relay send tables whole (`--kafka-snapshot`): `take` takes a snapshot of the
    /// node, and `dir` keeps it while it is sent (a file per snapshot, removed once all its
    /// records are acknowledged). Without it, a relay that needs a snapshot fails, saying so.
    pub fn with_snapshots(mut self, take: SnapshotFn, dir: &Path) -> Relay {
        self.snapshots = Some((take, dir.to_path_buf()));
        self
    }

    /// Lets the relay act on incremental-snapshot signals (`--kafka-signal-table`): `take`
    /// reads a chunk of a table at one sequence number, and `dir` keeps the progress and the
    /// chunk being sent. Without it, a signal is logged as not acted on.
    pub fn with_chunks(mut self, take: ChunkFn, dir: &Path) -> Relay {
        self.chunks = Some((take, dir.to_path_buf()));
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
            let ran = started.elapsed();
            self.stats.finished(&r);
            match r {
                Err(e) if e.is_retriable() && !*stop.borrow() => {
                    // A run that went well for a while starts the pauses over.
                    if ran > MAX_BACKOFF {
                        backoff = FIRST_BACKOFF;
                    }
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
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                other => return other,
            }
        }
    }

    async fn run_once(&self, stop: &mut tokio::sync::watch::Receiver<bool>) -> Result<u64> {
        let began = Instant::now();
        self.stats.set_state(RelayState::Starting);
        // Made first: with Kafka transactions, this fences an earlier relay of the stream and
        // aborts what it left open, so the tails read next are final.
        let mut outbox = Outbox::create(&self.settings, Arc::clone(&self.stats)).await?;
        let start = resume::start(&self.settings, &self.binlog_dir).await?;
        let window = start.window;
        self.stats.acked_seq.store(window.acked, Ordering::Release);
        let format = match self.settings.format {
            Format::Ringrep => "ringrep envelope",
            Format::Debezium { schemas: true } => "Debezium envelope with schemas",
            Format::Debezium { schemas: false } => "Debezium envelope without schemas",
        };
        let guarantee = match &self.settings.transactional_id {
            Some(id) => format!("exactly once per partition, in Kafka transactions (transactional.id {id}; a consumer with isolation.level=read_committed sees whole binlog transactions)"),
            None => "exactly once per partition (idempotent producer; restarts skip what each partition holds)".to_string(),
        };
        tracing::info!(
            "relay: {guarantee}: {} holds seq {}, all records acknowledged up to seq {}; {} partitions' tails read in {} ms; {format}",
            kafka::replication_topic(&self.settings.topic_prefix),
            window.relayed,
            window.acked,
            start.tails.len(),
            began.elapsed().as_millis(),
        );
        let fresh = window.relayed == 0 && start.tails.is_empty() && start.snapshot.is_none();
        outbox.skip_tails(start.tails);
        let mut tables = Tables::new(start.announced);
        let mut incremental =
            Incremental::open(&self.settings, self.chunks.clone(), Arc::clone(&self.stats))?;
        // The first seq the binlog still holds (1 when it holds none yet).
        let first = resume::first_seq(&self.binlog_dir)?.unwrap_or(1);
        let snapped = match self
            .snapshot_if_needed(
                &mut outbox,
                &mut tables,
                (window, start.snapshot, fresh, first),
                stop,
            )
            .await?
        {
            Snapped::Stopped => return outbox.finish().await,
            Snapped::Upto(seq) => seq,
        };
        if let Some(seq) = snapped {
            incremental.superseded(seq)?;
        }
        // Changes at or below a snapshot's sequence number are in it.
        let window = tables::Window {
            acked: window.acked.max(snapped.unwrap_or(0)),
            ..window
        };
        let mut next = window.acked.min(window.relayed) + 1;
        if next < first {
            // Only the replication topic can be behind a purge here: the change topics had a
            // snapshot, or the run stopped before this.
            tracing::warn!(
                "relay: the binlog starts at seq {first}; seqs {next} to {} were purged before they reached {}: a replica fed from Kafka must be made from a backup taken since (ringrep-source backup, then ringrep-applier seed)",
                first - 1,
                kafka::replication_topic(&self.settings.topic_prefix)
            );
            next = first;
        }
        incremental.resume(window.acked, next)?;
        let from = resume::segment_start(&self.binlog_dir, next)?;
        // What the run owes starts at `next`: everything before it is in the topics, in a
        // snapshot, or purged before it could be (said above).
        self.stats.acked_seq.fetch_max(next - 1, Ordering::AcqRel);
        self.stats.checkpoint.store(next - 1, Ordering::Release);
        let mut binlog = Batches::open(
            &self.binlog_dir,
            from,
            self.notifier.clone(),
            self.durable.clone(),
            self.heals.clone(),
        );
        let mut server_id = start.server_id;
        let mut last = (self.stats.acked_seq.load(Ordering::Acquire), 0i64);
        // The last transaction read this run (the replay starts at `from`).
        let mut read_through = from - 1;
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
                incremental
                    .after_transaction(&self.settings, &mut outbox, &mut tables, &tx)
                    .await?;
                last = (tx.seq, tx.commit_time_us);
                read_through = tx.seq;
            }
            if let Some(e) = err {
                return Err(Error::from(e));
            }
            if let Some(server) = server_id {
                // Chunks of incremental snapshots, between batches, for a short while at most,
                // so the stream never waits long for them.
                let began = Instant::now();
                while incremental.wants_chunk()
                    && !*stop.borrow()
                    && began.elapsed() < CHUNKS_PER_BATCH_TIME
                {
                    let sent = incremental
                        .step(
                            &self.settings,
                            &mut outbox,
                            &mut tables,
                            read_through,
                            server,
                        )
                        .await?;
                    if !sent {
                        break;
                    }
                }
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
            // Settle what the broker already acknowledged, without waiting (with Kafka
            // transactions, commit the batch's).
            outbox.end_batch().await?;
        }
        outbox.finish().await
    }

    /// Sends a snapshot when the mode and the topics call for one: a snapshot begun and not
    /// done is finished from its file; a fresh stream (nothing of it in the topics) gets one
    /// unless the mode is `no_data`; a stream whose change topics need binlog that was purged
    /// gets one with `when_needed`, and is an error otherwise. `marked` is the last snapshot
    /// the schema topic marks (and whether it is done), `fresh` whether the topics hold
    /// nothing of the stream, `first` the binlog's first sequence number.
    async fn snapshot_if_needed(
        &self,
        outbox: &mut Outbox,
        tables: &mut Tables,
        (window, marked, fresh, first): (tables::Window, Option<(u64, bool)>, bool, u64),
        stop: &tokio::sync::watch::Receiver<bool>,
    ) -> Result<Snapped> {
        let prefix = &self.settings.topic_prefix;
        let mode = self.settings.snapshot;
        if let Some((seq, false)) = marked {
            let Some((_, dir)) = &self.snapshots else {
                return Err(Error::Config(format!(
                    "the schema topic marks a snapshot at seq {seq} begun and not done, and this relay cannot read snapshots (run it inside the primary, or with --data-dir)"
                )));
            };
            let path = snapshot::file(dir, prefix, seq);
            let snap = snapshot::load(&path)?;
            tracing::info!(
                "relay: finishing the snapshot at seq {seq} from {}",
                path.display()
            );
            let Some(rows) = snapshot::send(&self.settings, outbox, tables, &snap, stop).await?
            else {
                return Ok(Snapped::Stopped);
            };
            tracing::info!("relay: snapshot at seq {seq} done: {rows} rows");
        }
        // A snapshot finished just now is done too: what follows it may still be purged.
        let done = marked.map(|(seq, _)| seq);
        if let (Some(seq), Some((_, dir))) = (done, &self.snapshots) {
            // Its file goes, whether it was finished just now or the run before was cut off
            // between the end mark and the removal.
            let _ = std::fs::remove_file(snapshot::file(dir, prefix, seq));
        }
        let next = window.acked.max(done.unwrap_or(0)) + 1;
        let purged = !fresh && next < first;
        let needed = match mode {
            SnapshotMode::NoData => false,
            SnapshotMode::Initial => fresh,
            SnapshotMode::WhenNeeded => fresh || purged,
        };
        if !needed {
            if purged {
                return Err(Error::Config(format!(
                    "the change topics need seq {next}, and the binlog now starts at seq {first}: it was purged behind the relay; restart with --kafka-snapshot when_needed to send the tables whole again"
                )));
            }
            return Ok(Snapped::Upto(done));
        }
        let Some((take, dir)) = &self.snapshots else {
            if first <= 1 {
                tracing::warn!("relay: no snapshot source; the change topics start from the binlog's first record, which holds every change since the start");
                return Ok(Snapped::Upto(done));
            }
            return Err(Error::Config(format!(
                "a snapshot is needed (--kafka-snapshot {}) and the binlog starts at seq {first}, but this relay cannot take one (run it inside the primary, or with --data-dir)",
                mode.name()
            )));
        };
        let take = Arc::clone(take);
        let snap = tokio::task::spawn_blocking(move || take())
            .await
            .map_err(|e| kafka_error("snapshot task", e))?
            .map_err(|e| kafka_error("taking a snapshot", e))?;
        let path = snapshot::file(dir, prefix, snap.seq);
        snapshot::save(&path, &snap)?;
        let rows: usize = snap.tables.iter().map(|(_, r)| r.len()).sum();
        tracing::info!(
            "relay: snapshot at seq {}: {} tables, {rows} rows, kept in {} until sent",
            snap.seq,
            snap.tables.len(),
            path.display()
        );
        if snapshot::send(&self.settings, outbox, tables, &snap, stop)
            .await?
            .is_none()
        {
            return Ok(Snapped::Stopped);
        }
        tracing::info!("relay: snapshot at seq {} done", snap.seq);
        let _ = std::fs::remove_file(&path);
        Ok(Snapped::Upto(Some(snap.seq)))
    }
}

/// What [`Relay::snapshot_if_needed`] did.
enum Snapped {
    /// It was told to stop while it sent a snapshot; the next run finishes it from its file.
    Stopped,
    /// The sequence number of the last snapshot done, if any.
    Upto(Option<u64>),
}
