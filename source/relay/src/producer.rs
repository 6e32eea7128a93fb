//! The relay's producer (idempotent, `acks=all`) and the records it has in flight: skipping
//! what a partition holds already (after a restart), sending with backpressure, settling
//! deliveries oldest first (which moves [`RelayStats::acked_seq`](crate::RelayStats::acked_seq)
//! on), and the final flush.
//!
//! Why skipping by the partition's tail gives exactly once: the idempotent producer never
//! leaves a gap in a partition (the broker refuses a batch whose predecessor is missing), so
//! what a partition holds of the records sent to it is always a prefix of them, and records
//! are numbered (`ringrep.seq`, `ringrep.order`) the same way in every run. A record at or
//! below the partition's last pair is there; one above it is not.
//!
//! With Kafka transactions (`transactional_id`), records go out in transactions that the
//! relay ends only where a binlog transaction ends ([`Outbox::end_batch`], [`Outbox::drain`],
//! [`Outbox::boundary`]), and `acked_seq` moves only when one commits: retention never frees
//! binlog that an aborted transaction still needs. The producer is made, and so fences any
//! earlier one of its `transactional.id` and aborts what that one left open, before the
//! partitions' tails are read; the readers read committed records only, so the tail check
//! above stays exact.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use binlog_format::events::Transaction;
use rdkafka::client::ClientContext;
use rdkafka::config::FromClientConfigAndContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use ringrep_cdc::kafka::{KafkaRecord, ORDER_HEADER};
use ringrep_kafka::{kafka_error, Error, KafkaSettings, Result, Tail};

use crate::RelayStats;

/// Most records produced and not yet acknowledged: the relay waits for the oldest beyond it.
const MAX_IN_FLIGHT: usize = 20_000;

/// How long a Kafka transaction may stay open at a [`Outbox::boundary`] (a snapshot's rows),
/// well inside the coordinator's `transaction.timeout.ms`.
const MAX_TRANSACTION_AGE: Duration = Duration::from_secs(1);

/// How long initializing transactions and committing one may take before the run fails
/// (and starts again, aborting what it left open).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// The Kafka transaction of a relay run with `--kafka-transactions`.
#[derive(Debug)]
struct Txn {
    /// The producer's `transactional.id`.
    id: String,
    /// When the open transaction began; `None` when none is open.
    opened: Option<Instant>,
    /// The last replication record's (seq, commit time) delivered in the open transaction:
    /// acknowledged once the transaction commits.
    delivered: Option<(u64, i64)>,
}

/// What the broker has answered for, as the producer's delivery callback learns it: records
/// are numbered in the order they were produced, and only whether each was acknowledged is
/// kept (no future and no channel per record, which cost the relay a fifth of its time).
#[derive(Debug, Default)]
struct Answers {
    /// The number of the oldest record the relay has not settled.
    base: usize,
    /// For the records from `base` on: whether the broker acknowledged each.
    acked: VecDeque<bool>,
    /// The first delivery that failed: its topic and the error.
    failed: Option<(String, KafkaError)>,
}

/// The producer's side of [`Answers`]: its delivery callback, run on the producer's polling
/// thread, marks each record and wakes the relay if it waits.
struct Deliveries {
    answers: Arc<Mutex<Answers>>,
    wake: Arc<tokio::sync::Notify>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    /// The record's number.
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, number: usize) {
        let mut a = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(_) => {
                if let Some(at) = number.checked_sub(a.base) {
                    if let Some(slot) = a.acked.get_mut(at) {
                        *slot = true;
                    }
                }
            }
            Err((e, m)) => {
                if a.failed.is_none() {
                    a.failed = Some((m.topic().to_string(), e.clone()));
                }
            }
        }
        drop(a);
        self.wake.notify_one();
    }
}

/// The producer and what it has in flight.
pub(crate) struct Outbox {
    producer: Arc<ThreadedProducer<Deliveries>>,
    answers: Arc<Mutex<Answers>>,
    wake: Arc<tokio::sync::Notify>,
    /// The records produced and not yet settled, oldest first: each replication record's
    /// transaction seq and commit time (`None` for other records). The record numbered
    /// `answers.base` is the front.
    inflight: VecDeque<Option<(u64, i64)>>,
    /// The last (seq, order) of each partition by topic, read at start, for the partitions a
    /// record has not yet been sent to past it; emptied once the stream passes them all.
    tails: HashMap<String, HashMap<i32, Tail>>,
    /// The highest sequence number in `tails`.
    tails_end: u64,
    /// With Kafka transactions: the one open.
    txn: Option<Txn>,
    stats: Arc<RelayStats>,
}

impl Outbox {
    /// The idempotent producer of `settings`, counting into `stats`. With a
    /// `transactional_id` it is transactional, and initializing it fences an earlier producer
    /// of that id and aborts what that one left open: so make it before reading the tails.
    pub(crate) async fn create(settings: &KafkaSettings, stats: Arc<RelayStats>) -> Result<Outbox> {
        let answers = Arc::new(Mutex::new(Answers::default()));
        let wake = Arc::new(tokio::sync::Notify::new());
        let context = Deliveries {
            answers: Arc::clone(&answers),
            wake: Arc::clone(&wake),
        };
        let mut config = settings
            .client_config()
            .set("enable.idempotence", "true")
            // A batch that fails for good must not leave a gap behind later batches of its
            // partition: the tail check takes what a partition holds for a prefix. librdkafka
            // raises a fatal error instead, and the run starts again.
            .set("enable.gapless.guarantee", "true")
            .set("acks", "all")
            .clone();
        // Tuning that is the user's to change with `--kafka-option` (the settings refuse the
        // options above that would weaken the guarantees).
        let mut default = |k: &str, v: &str| {
            if config.get(k).is_none() {
                config.set(k, v);
            }
        };
        default("linger.ms", "5");
        if let Some(id) = &settings.transactional_id {
            // A record may not outlive its transaction's timeout (librdkafka's rule); a minute
            // is far more than a batch's commit takes.
            default("transaction.timeout.ms", "60000");
            default("message.timeout.ms", "60000");
            config.set("transactional.id", id);
        } else {
            default("message.timeout.ms", "300000");
        }
        let producer = ThreadedProducer::from_config_and_context(&config, context)
            .map_err(|e| kafka_error("producer", e))?;
        let outbox = Outbox {
            producer: Arc::new(producer),
            answers,
            wake,
            inflight: VecDeque::new(),
            tails: HashMap::new(),
            tails_end: 0,
            txn: settings.transactional_id.as_ref().map(|id| Txn {
                id: id.clone(),
                opened: None,
                delivered: None,
            }),
            stats,
        };
        if outbox.txn.is_some() {
            let p = Arc::clone(&outbox.producer);
            let r = tokio::task::spawn_blocking(move || p.init_transactions(TRANSACTION_TIMEOUT))
                .await
                .map_err(|e| kafka_error("transactions task", e))?;
            r.map_err(|e| outbox.transaction_error("initializing transactions", e))?;
        }
        Ok(outbox)
    }

    /// Skips, from now on, every record at or below its partition's tail in `tails` (read at
    /// start, after [`Outbox::create`]).
    pub(crate) fn skip_tails(&mut self, tails: HashMap<(String, i32), Tail>) {
        self.tails_end = tails.values().map(|t| t.seq).max().unwrap_or(0);
        let mut by_topic: HashMap<String, HashMap<i32, Tail>> = HashMap::new();
        for ((topic, partition), tail) in tails {
            by_topic.entry(topic).or_default().insert(partition, tail);
        }
        self.tails = by_topic;
    }

    /// `e`, met while doing `what` with transactions on, as the error that says what
    /// happened: another producer took our `transactional.id` (fenced, for good), the broker
    /// has no transactions (for good), or a Kafka error to retry.
    fn transaction_error(&self, what: &str, e: KafkaError) -> Error {
        let id = self.txn.as_ref().map_or("", |t| t.id.as_str());
        let fatal = self.producer.client().fatal_error();
        let code = e.rdkafka_error_code();
        let fenced = |c: Option<RDKafkaErrorCode>| {
            matches!(
                c,
                Some(
                    RDKafkaErrorCode::Fenced
                        | RDKafkaErrorCode::ProducerFenced
                        | RDKafkaErrorCode::InvalidProducerEpoch
                )
            )
        };
        if fenced(code) || fenced(fatal.as_ref().map(|(c, _)| *c)) {
            return Error::Fenced {
                transactional_id: id.to_string(),
                reason: fatal.map_or_else(|| e.to_string(), |(_, r)| r),
            };
        }
        if matches!(
            code,
            Some(RDKafkaErrorCode::UnsupportedVersion | RDKafkaErrorCode::UnsupportedFeature)
        ) {
            return Error::NoTransactions {
                what: what.to_string(),
                reason: e.to_string(),
            };
        }
        kafka_error(what, e)
    }

    /// The last sequence number whose records are all acknowledged.
    pub(crate) fn acked_seq(&self) -> u64 {
        self.stats.acked_seq.load(Ordering::Acquire)
    }

    /// Produces `rec`, which stands at `at` (its transaction's seq and its place among that
    /// transaction's records; `None`: a record not ordered so, whose topic the caller keeps
    /// from repeats itself), unless its partition holds it already. Returns whether it was
    /// produced.
    pub(crate) async fn send(&mut self, mut rec: KafkaRecord, at: Option<Tail>) -> Result<bool> {
        if let Some(at) = at {
            if self.is_there(&rec, at) {
                self.stats.skipped.fetch_add(1, Ordering::Relaxed);
                return Ok(false);
            }
            rec.headers
                .push((ORDER_HEADER.into(), at.order.to_string()));
        }
        self.produce(&rec, None).await?;
        Ok(true)
    }

    /// Counts a change record produced.
    pub(crate) fn count_change(&self) {
        self.stats.change_records.fetch_add(1, Ordering::Relaxed);
    }

    /// Produces the replication record of `tx`, made with `ringrep.acked_seq` `acked`; its
    /// acknowledgement moves `acked_seq` to `tx.seq`.
    pub(crate) async fn send_transaction(
        &mut self,
        rec: KafkaRecord,
        tx: &Transaction,
        acked: u64,
    ) -> Result<()> {
        self.produce(&rec, Some((tx.seq, tx.commit_time_us)))
            .await?;
        // A restart resumes the change topics after this record's `ringrep.acked_seq`.
        self.stats.checkpoint.store(acked, Ordering::Release);
        self.stats.transactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Whether `rec`'s partition held it at start: `at` is at or below the
    /// partition's tail. The first record past the tail ends the checks for that partition.
    fn is_there(&mut self, rec: &KafkaRecord, at: Tail) -> bool {
        if self.tails.is_empty() {
            return false;
        }
        if at.seq > self.tails_end {
            // Past every partition's end: nothing more can be there.
            self.tails.clear();
            return false;
        }
        let Some(partitions) = self.tails.get_mut(&rec.topic) else {
            return false;
        };
        let partition = rec.partition.unwrap_or(0);
        let Some(tail) = partitions.get(&partition) else {
            return false;
        };
        if at <= *tail {
            return true;
        }
        partitions.remove(&partition);
        false
    }

    /// Hands `rec` to the producer. When the local queue is full, or more than
    /// [`MAX_IN_FLIGHT`] records are in flight, waits for the oldest first.
    async fn produce(&mut self, rec: &KafkaRecord, seq: Option<(u64, i64)>) -> Result<()> {
        if let Some(Txn { opened: None, .. }) = &self.txn {
            if let Err(e) = self.producer.begin_transaction() {
                return Err(self.transaction_error("beginning a transaction", e));
            }
            if let Some(t) = &mut self.txn {
                t.opened = Some(Instant::now());
            }
        }
        loop {
            let mut headers = OwnedHeaders::new_with_capacity(rec.headers.len());
            for (k, v) in &rec.headers {
                headers = headers.insert(Header {
                    key: k,
                    value: Some(v.as_bytes()),
                });
            }
            // Numbered and counted as in flight before the callback can run for it.
            let number = {
                let mut a = self.lock();
                a.acked.push_back(false);
                a.base + a.acked.len() - 1
            };
            let mut br: BaseRecord<'_, [u8], [u8], usize> =
                BaseRecord::with_opaque_to(&rec.topic, number)
                    .key(&rec.key[..])
                    .headers(headers);
            if let Some(v) = &rec.value {
                br = br.payload(&v[..]);
            }
            if let Some(p) = rec.partition {
                br = br.partition(p);
            }
            match self.producer.send(br) {
                Ok(()) => {
                    self.inflight.push_back(seq);
                    self.stats
                        .in_flight
                        .store(self.inflight.len() as u64, Ordering::Relaxed);
                    if self.inflight.len() > MAX_IN_FLIGHT {
                        self.settle_front().await?;
                    }
                    return Ok(());
                }
                Err((e, _)) => {
                    self.lock().acked.pop_back();
                    match e {
                        // Backpressure: the local queue is full; wait for the broker to take
                        // some.
                        KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull) => {
                            if self.inflight.is_empty() {
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            } else {
                                self.settle_front().await?;
                            }
                        }
                        e => {
                            let what = format!("producing to {}", rec.topic);
                            return Err(match self.txn {
                                Some(_) => self.transaction_error(&what, e),
                                None => kafka_error(&what, e),
                            });
                        }
                    }
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.answers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where a batch of binlog transactions ends: settles every record the broker has already
    /// answered for, oldest first, without waiting; with Kafka transactions, commits the one
    /// open (waiting for it).
    pub(crate) async fn end_batch(&mut self) -> Result<()> {
        if self.txn.is_some() {
            return self.commit().await;
        }
        self.settle_ready().map(|_| ())
    }

    /// A place where a Kafka transaction may end (between a snapshot's rows): commits the
    /// open one when it has been open for [`MAX_TRANSACTION_AGE`]. Nothing without
    /// transactions.
    pub(crate) async fn boundary(&mut self) -> Result<()> {
        match &self.txn {
            Some(Txn {
                opened: Some(at), ..
            }) if at.elapsed() >= MAX_TRANSACTION_AGE => self.commit().await,
            _ => Ok(()),
        }
    }

    /// Waits until every record in flight is acknowledged; with Kafka transactions, commits
    /// the one open, so what was produced is visible to `read_committed` consumers.
    pub(crate) async fn drain(&mut self) -> Result<()> {
        if self.txn.is_some() {
            return self.commit().await;
        }
        self.wait_all().await
    }

    /// Waits until every record in flight is delivered.
    async fn wait_all(&mut self) -> Result<()> {
        while !self.inflight.is_empty() {
            self.settle_front().await?;
        }
        Ok(())
    }

    /// Commits the open Kafka transaction, if any (it flushes what is in flight first), then
    /// counts its replication records as acknowledged. A failure ends the run; the next one
    /// fences this producer and so aborts the transaction, and resumes from what committed.
    async fn commit(&mut self) -> Result<()> {
        if !matches!(
            self.txn,
            Some(Txn {
                opened: Some(_),
                ..
            })
        ) {
            return Ok(());
        }
        // Every record delivered first: rdkafka's commit flushes by polling in steps of
        // 100 ms, which with the producer's own polling thread beside it sleeps each step out
        // (a tenth of a second per commit); delivered, its flush returns at once.
        self.wait_all().await?;
        let p = Arc::clone(&self.producer);
        let r = tokio::task::spawn_blocking(move || p.commit_transaction(TRANSACTION_TIMEOUT))
            .await
            .map_err(|e| kafka_error("transactions task", e))?;
        r.map_err(|e| self.transaction_error("committing a transaction", e))?;
        let delivered = match &mut self.txn {
            Some(t) => {
                t.opened = None;
                t.delivered.take()
            }
            None => None,
        };
        self.stats.kafka_commits.fetch_add(1, Ordering::Relaxed);
        self.acknowledge(delivered);
        Ok(())
    }

    /// Moves `acked_seq` to the last replication record `last` (seq, commit time) names.
    fn acknowledge(&self, last: Option<(u64, i64)>) {
        if let Some((s, commit_us)) = last {
            self.stats
                .acked_commit_us
                .store(commit_us, Ordering::Relaxed);
            self.stats.acked_seq.store(s, Ordering::Release);
        }
    }

    /// Waits for every record in flight, then flushes the producer. Returns the last
    /// acknowledged sequence number.
    pub(crate) async fn finish(mut self) -> Result<u64> {
        self.drain().await?;
        let p = Arc::clone(&self.producer);
        tokio::task::spawn_blocking(move || p.flush(Duration::from_secs(30)))
            .await
            .map_err(|e| kafka_error("flush task", e))?
            .map_err(|e| kafka_error("flush", e))?;
        Ok(self.stats.acked_seq.load(Ordering::Acquire))
    }

    /// Settles, oldest first, the records the broker has acknowledged: a replication
    /// record's acknowledgement moves `acked_seq` to its seq (with Kafka transactions, once
    /// its transaction commits). Returns how many it settled; a
    /// failed delivery is an error (it stops the relay, whose next run resends from the
    /// checkpoint).
    fn settle_ready(&mut self) -> Result<usize> {
        let mut a = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((topic, e)) = a.failed.take() {
            drop(a);
            let what = format!("delivery to {topic} failed (not retriable, or retries ran out)");
            return Err(match self.txn {
                Some(_) => self.transaction_error(&what, e),
                None => kafka_error(&what, e),
            });
        }
        let mut settled = 0;
        let mut last = None;
        while a.acked.front() == Some(&true) {
            a.acked.pop_front();
            a.base += 1;
            settled += 1;
            if let Some(Some(seq)) = self.inflight.pop_front() {
                last = Some(seq);
            }
        }
        drop(a);
        match &mut self.txn {
            // Delivered is not yet committed: `commit` acknowledges.
            Some(t) => {
                if last.is_some() {
                    t.delivered = last;
                }
            }
            None => self.acknowledge(last),
        }
        if settled > 0 {
            self.stats
                .in_flight
                .store(self.inflight.len() as u64, Ordering::Relaxed);
        }
        Ok(settled)
    }

    /// Waits until the oldest record in flight is settled; a failed delivery stops the relay.
    async fn settle_front(&mut self) -> Result<()> {
        while !self.inflight.is_empty() {
            // A wake-up that came before this wait is kept by `Notify` as a permit, so none
            // is lost between the check and the wait.
            if self.settle_ready()? > 0 {
                return Ok(());
            }
            self.wake.notified().await;
        }
        Ok(())
    }
}
