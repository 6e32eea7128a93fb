//! The relay's producer (idempotent, `acks=all`) and the records it has in flight: sending
//! with backpressure, settling deliveries oldest first (which moves
//! [`RelayStats::acked_seq`](crate::RelayStats::acked_seq) on), and the final flush.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use ringrep_cdc::kafka::KafkaRecord;
use ringrep_kafka::{kafka_error, KafkaSettings, Result};

use crate::RelayStats;

/// Most records produced and not yet acknowledged: the relay waits for the oldest beyond it.
const MAX_IN_FLIGHT: usize = 20_000;

/// The producer and what it has in flight.
pub(crate) struct Outbox {
    producer: FutureProducer,
    /// Records produced and not yet settled, oldest first, each with its transaction's seq
    /// when it is a replication record.
    inflight: VecDeque<(Option<u64>, DeliveryFuture)>,
    stats: Arc<RelayStats>,
}

impl Outbox {
    /// The idempotent producer of `settings`, counting into `stats`.
    pub(crate) fn create(settings: &KafkaSettings, stats: Arc<RelayStats>) -> Result<Outbox> {
        let producer: FutureProducer = settings
            .client_config()
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("message.timeout.ms", "300000")
            .create()
            .map_err(|e| kafka_error("producer", e))?;
        Ok(Outbox {
            producer,
            inflight: VecDeque::new(),
            stats,
        })
    }

    /// Produces one change record.
    pub(crate) async fn send_change(&mut self, rec: &KafkaRecord) -> Result<()> {
        self.produce(rec, None).await?;
        self.stats.change_records.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Produces the replication record of transaction `seq`; its acknowledgement moves
    /// `acked_seq` to `seq`.
    pub(crate) async fn send_transaction(&mut self, rec: &KafkaRecord, seq: u64) -> Result<()> {
        self.produce(rec, Some(seq)).await?;
        self.stats.transactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Hands `rec` to the producer. When the local queue is full, or more than
    /// [`MAX_IN_FLIGHT`] records are in flight, waits for the oldest first.
    async fn produce(&mut self, rec: &KafkaRecord, seq: Option<u64>) -> Result<()> {
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
                settle(seq, result, &self.stats).map(|()| true)
            }
        }
    }

    /// Waits for the oldest record in flight; a failed delivery stops the relay.
    async fn settle_front(&mut self) -> Result<()> {
        let Some((seq, f)) = self.inflight.pop_front() else {
            return Ok(());
        };
        settle(seq, f.await, &self.stats)
    }
}

/// Settles one delivery: a replication record's acknowledgement moves `acked_seq` to its
/// `seq`; a failed delivery, or a producer gone away, is an error.
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
