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
            m.create_topic(&format!("{prefix}.replication"), 1, 3)
                .expect("create topic");
            for t in change_topics {
                m.create_topic(&format!("{prefix}.{t}"), partitions, 3)
                    .expect("create topic");
            }
        }
        KafkaSettings {
            brokers: self.servers.clone(),
            topic_prefix: prefix,
            partitions,
            replication_factor: 1,
            tombstones: true,
            options: vec![],
        }
    }
}
