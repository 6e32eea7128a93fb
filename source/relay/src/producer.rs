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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use binlog_format::events::Transaction;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use ringrep_cdc::kafka::{KafkaRecord, ORDER_HEADER};
use ringrep_kafka::{kafka_error, KafkaSettings, Result, Tail};

use crate::RelayStats;

/// Most records produced and not yet acknowledged: the relay waits for the oldest beyond it.
const MAX_IN_FLIGHT: usize = 20_000;

/// The producer and what it has in flight.
pub(crate) struct Outbox {
    producer: FutureProducer,
    /// Records produced and not yet settled, oldest first, each with its transaction's seq
    /// and commit time when it is a replication record.
    inflight: VecDeque<(Option<(u64, i64)>, DeliveryFuture)>,
    /// The last (seq, order) of each partition by topic, read at start, for the partitions a
    /// record has not yet been sent to past it; emptied once the stream passes them all.
    tails: HashMap<String, HashMap<i32, Tail>>,
    /// The highest sequence number in `tails`.
    tails_end: u64,
    stats: Arc<RelayStats>,
}

impl Outbox {
    /// The idempotent producer of `settings`, counting into `stats`, skipping records at or
    /// below `tails`.
    pub(crate) fn create(
        settings: &KafkaSettings,
        stats: Arc<RelayStats>,
        tails: HashMap<(String, i32), Tail>,
    ) -> Result<Outbox> {
        let producer: FutureProducer = settings
            .client_config()
            .set("enable.idempotence", "true")
            // A batch that fails for good must not leave a gap behind later batches of its
            // partition: the tail check takes what a partition holds for a prefix. librdkafka
            // raises a fatal error instead, and the run starts again.
            .set("enable.gapless.guarantee", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("message.timeout.ms", "300000")
            .create()
            .map_err(|e| kafka_error("producer", e))?;
        let tails_end = tails.values().map(|t| t.seq).max().unwrap_or(0);
        let mut by_topic: HashMap<String, HashMap<i32, Tail>> = HashMap::new();
        for ((topic, partition), tail) in tails {
            by_topic.entry(topic).or_default().insert(partition, tail);
        }
        Ok(Outbox {
            producer,
            inflight: VecDeque::new(),
            tails: by_topic,
            tails_end,
            stats,
        })
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
            match self.producer.send_result(fr) {
                Ok(f) => {
                    self.inflight.push_back((seq, f));
                    self.stats
                        .in_flight
                        .store(self.inflight.len() as u64, Ordering::Relaxed);
                    if self.inflight.len() > MAX_IN_FLIGHT {
                        self.settle_front().await?;
                    }
                    return Ok(());
                }
                // Backpressure: the local queue is full; wait for the broker to take some.
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    if self.inflight.is_empty() {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    } else {
                        self.settle_front().await?;
                    }
                }
                Err((e, _)) => return Err(kafka_error(&format!("producing to {}", rec.topic), e)),
            }
        }
    }

    /// Settles every record the broker has already answered for, oldest first, without
    /// waiting; stops at the first one still unanswered.
    pub(crate) async fn settle_acknowledged(&mut self) -> Result<()> {
        while self.settle_ready().await? {}
        Ok(())
    }

    /// Waits until every record in flight is acknowledged.
    pub(crate) async fn drain(&mut self) -> Result<()> {
        while !self.inflight.is_empty() {
            self.settle_front().await?;
        }
        Ok(())
    }

    /// Waits for every record in flight, then flushes the producer. Returns the last
    /// acknowledged sequence number.
    pub(crate) async fn finish(mut self) -> Result<u64> {
        while !self.inflight.is_empty() {
            self.settle_front().await?;
        }
        let p = self.producer.clone();
        tokio::task::spawn_blocking(move || p.flush(Duration::from_secs(30)))
            .await
            .map_err(|e| kafka_error("flush task", e))?
            .map_err(|e| kafka_error("flush", e))?;
        Ok(self.stats.acked_seq.load(Ordering::Acquire))
    }

    /// Settles the oldest record in flight if the broker has answered for it; false otherwise.
    async fn settle_ready(&mut self) -> Result<bool> {
        let Some((_, f)) = self.inflight.front_mut() else {
            return Ok(false);
        };
        // A zero timeout still polls the future once.
        match tokio::time::timeout(Duration::ZERO, f).await {
            Err(_) => Ok(false),
            Ok(result) => {
                let seq = self.inflight.pop_front().and_then(|(seq, _)| seq);
                self.stats
                    .in_flight
                    .store(self.inflight.len() as u64, Ordering::Relaxed);
                settle(seq, result, &self.stats).map(|()| true)
            }
        }
    }

    /// Waits for the oldest record in flight; a failed delivery stops the relay.
    async fn settle_front(&mut self) -> Result<()> {
        let Some((seq, f)) = self.inflight.pop_front() else {
            return Ok(());
        };
        self.stats
            .in_flight
            .store(self.inflight.len() as u64, Ordering::Relaxed);
        settle(seq, f.await, &self.stats)
    }
}

/// Settles one delivery: a replication record's acknowledgement moves `acked_seq` to its
/// `seq`; a failed delivery, or a producer gone away, is an error.
fn settle(
    seq: Option<(u64, i64)>,
    result: Result<rdkafka::producer::future_producer::OwnedDeliveryResult, impl std::fmt::Display>,
    stats: &RelayStats,
) -> Result<()> {
    match result {
        Ok(Ok(_)) => {
            if let Some((s, commit_us)) = seq {
                stats.acked_commit_us.store(commit_us, Ordering::Relaxed);
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
