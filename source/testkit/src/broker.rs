//! The Kafka broker of a test: the one RINGREP_TEST_KAFKA_BROKERS names, else a fresh in-process
//! mock cluster of three brokers (listening on loopback, so relay processes reach it too).

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use ringrep_kafka::KafkaSettings;

/// A broker for one test: a real one, or a mock cluster that lives as long as this value.
pub struct Broker {
    /// The mock cluster, when no real broker was named.
    pub mock: Option<MockCluster<'static, DefaultProducerContext>>,
    /// The bootstrap servers to give clients.
    pub servers: String,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("servers", &self.servers)
            .field("mock", &self.mock.is_some())
            .finish_non_exhaustive()
    }
}

/// The broker `RINGREP_TEST_KAFKA_BROKERS` names, else a fresh mock cluster.
pub fn broker() -> Broker {
    match std::env::var("RINGREP_TEST_KAFKA_BROKERS") {
        Ok(servers) if !servers.is_empty() => Broker {
            mock: None,
            servers,
        },
        _ => mock(),
    }
}

/// A fresh in-process mock cluster of three brokers, whatever RINGREP_TEST_KAFKA_BROKERS says:
/// for tests that stage broker faults, which only the mock can.
pub fn mock() -> Broker {
    let mock = MockCluster::new(3).expect("mock cluster");
    let servers = mock.bootstrap_servers();
    Broker {
        mock: Some(mock),
        servers,
    }
}

impl Broker {
    /// Settings with a topic prefix of its own (tests sharing a broker never meet). On the
    /// mock cluster the replication topic and `change_topics` (`database.table`, with
    /// `partitions` each) are created up front, since the mock has no CreateTopics.
    pub fn settings(&self, name: &str, change_topics: &[&str], partitions: i32) -> KafkaSettings {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let prefix = format!("t{}-{name}-{nanos}", std::process::id());
        if let Some(m) = &self.mock {
            // The mock has no CreateTopics: every topic the relay writes is made here.
            for t in ["replication", "schema-changes", "transaction", "heartbeat"] {
                m.create_topic(&format!("{prefix}.{t}"), 1, 3)
                    .expect("create topic");
            }
            for t in change_topics {
                m.create_topic(&format!("{prefix}.{t}"), partitions, 3)
                    .expect("create topic");
            }
        }
        KafkaSettings {
            partitions,
            tombstones: true,
            ..KafkaSettings::new(&self.servers, &prefix)
        }
    }
}

/// A record as a consumer of a topic reads it.
#[derive(Debug, Clone)]
pub struct Consumed {
    /// The partition it is in.
    pub partition: i32,
    /// The record key.
    pub key: Option<Vec<u8>>,
    /// The value; `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    /// The `ringrep.seq` header.
    pub seq: Option<u64>,
    /// The `ringrep.order` header.
    pub order: Option<u64>,
}

/// Every record of every partition of `topic`, each partition in offset order, read from the
/// beginning until nothing new arrives for 3 s, or for 20 s at most (no watermark is trusted
/// as the end: tansu's count batches). Empty when the topic does not exist.
pub fn read_topic(settings: &KafkaSettings, topic: &str) -> Vec<Consumed> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    let consumer: BaseConsumer = settings
        .client_config()
        .set("group.id", "ringrep-test-reader")
        .set("enable.auto.commit", "false")
        .set("allow.auto.create.topics", "false")
        .create()
        .expect("consumer");
    let md = consumer
        .fetch_metadata(Some(topic), std::time::Duration::from_secs(10))
        .expect("metadata");
    let partitions = md
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map_or(0, |t| t.partitions().len() as i32);
    if partitions == 0 {
        return Vec::new();
    }
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let mut idle = std::time::Instant::now();
    // A topic that never goes quiet (heartbeats every few hundred ms) is read for 20 s at most.
    let cap = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while idle.elapsed() < std::time::Duration::from_secs(3) && std::time::Instant::now() < cap {
        let Some(m) = consumer.poll(std::time::Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("message");
        let header = |name: &str| {
            m.headers()?
                .iter()
                .find(|h| h.key == name)
                .and_then(|h| h.value)
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(|t| t.parse().ok())
        };
        out.push(Consumed {
            partition: m.partition(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            seq: header("ringrep.seq"),
            order: header("ringrep.order"),
        });
        idle = std::time::Instant::now();
    }
    out
}
