//! Topic creation: each kind of topic with its partition count and settings, set when the
//! relay creates it and checked against what an existing topic has (a warning names each
//! difference: the relay never changes a topic someone else made).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;

use crate::{kafka_error, KafkaSettings, Result};

/// The kinds of topic the relay writes, each with its own partitions and settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicKind {
    /// `<prefix>.replication`: one partition, the broker's default settings (a replica that
    /// starts from empty needs what retention keeps).
    Replication,
    /// A change topic: `--kafka-partitions`, `--kafka-cleanup-policy` and
    /// `--kafka-topic-config`.
    Change,
    /// `<prefix>.schema-changes`: one partition, compacted and kept forever (its keys are
    /// unique, so compaction drops nothing).
    Schema,
    /// `<prefix>.transaction`: one partition, the change topics' settings but never
    /// compacted (each key is one transaction).
    Transaction,
    /// `<prefix>.heartbeat`: one partition, compacted (the last heartbeat is what counts).
    Heartbeat,
}

impl TopicKind {
    /// The partition count and settings a topic of this kind is created with.
    pub fn layout(self, settings: &KafkaSettings) -> (i32, Vec<(String, String)>) {
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        match self {
            TopicKind::Replication => (1, vec![]),
            TopicKind::Change => (settings.partitions, settings.topic_configs.clone()),
            TopicKind::Schema => (
                1,
                pairs(&[
                    ("cleanup.policy", "compact"),
                    ("retention.ms", "-1"),
                    ("retention.bytes", "-1"),
                ]),
            ),
            TopicKind::Transaction => {
                let mut c = settings.topic_configs.clone();
                if let Some(p) = c.iter_mut().find(|(k, _)| k == "cleanup.policy") {
                    p.1 = "delete".into();
                }
                (1, c)
            }
            TopicKind::Heartbeat => (1, pairs(&[("cleanup.policy", "compact")])),
        }
    }
}

/// The partition count of `topic` as the broker's metadata shows it, if it exists. No answer
/// at all (the brokers cannot be reached) is an error, so that a relay without its broker says
/// so within seconds instead of waiting on topic creation and its timeouts.
async fn partitions_of(
    admin: &Arc<AdminClient<DefaultClientContext>>,
    topic: &str,
) -> Result<Option<i32>> {
    let (a, t) = (admin.clone(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        let md = a
            .inner()
            .fetch_metadata(Some(&t), Duration::from_secs(5))
            .map_err(|e| kafka_error(&format!("metadata of topic {t}"), e))?;
        let Some(found) = md.topics().iter().find(|x| x.name() == t) else {
            return Ok(None);
        };
        Ok((found.error().is_none() && !found.partitions().is_empty())
            .then(|| found.partitions().len() as i32))
    })
    .await
    .map_err(|e| kafka_error("metadata task", e))?
}

/// Creates `topic` as a topic of `kind` unless it exists, and returns its partition count
/// once the broker shows it. An existing topic is used as it is, after a warning for each
/// setting (and a partition count) that differs from what the relay would have created.
pub async fn ensure_topic(settings: &KafkaSettings, topic: &str, kind: TopicKind) -> Result<i32> {
    Ok(ensure_topics(settings, &[(topic, kind)]).await?[0])
}

/// [`ensure_topic`] for several topics at once, with one client and one CreateTopics
/// request: their partition counts, in order.
pub async fn ensure_topics(
    settings: &KafkaSettings,
    topics: &[(&str, TopicKind)],
) -> Result<Vec<i32>> {
    let admin: AdminClient<DefaultClientContext> = settings
        .client_config()
        // Looking a topic up must not create it with the broker's defaults.
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(|e| kafka_error("admin client", e))?;
    let admin = Arc::new(admin);
    let mut found = Vec::with_capacity(topics.len());
    let mut missing = Vec::new();
    for &(topic, kind) in topics {
        let (partitions, configs) = kind.layout(settings);
        let p = partitions_of(&admin, topic).await?;
        if let Some(p) = p {
            if p != partitions && kind != TopicKind::Change {
                tracing::warn!(
                    "topic {topic} has {p} partitions, the relay creates it with {partitions}"
                );
            }
            check_configs(&admin, topic, &configs).await;
        } else {
            missing.push((topic, partitions, configs));
        }
        found.push(p);
    }
    if !missing.is_empty() {
        let news: Vec<NewTopic<'_>> = missing
            .iter()
            .map(|(topic, partitions, configs)| {
                let mut new = NewTopic::new(
                    topic,
                    *partitions,
                    TopicReplication::Fixed(settings.replication_factor),
                );
                for (k, v) in configs {
                    new = new.set(k, v);
                }
                new
            })
            .collect();
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        match admin.create_topics(news.iter(), &opts).await {
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
                "could not create topics ({e}); relying on the broker's auto-creation"
            ),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut out = Vec::with_capacity(topics.len());
    for (&(topic, _), p) in topics.iter().zip(found) {
        if let Some(p) = p {
            out.push(p);
            continue;
        }
        loop {
            if let Some(p) = partitions_of(&admin, topic).await? {
                out.push(p);
                break;
            }
            if Instant::now() > deadline {
                return Err(kafka_error(
                    &format!("topic {topic}"),
                    "not available within 30 s",
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(out)
}

/// Whether the broker answered DescribeConfigs so far (see [`check_configs`]).
static DESCRIBE_CONFIGS: AtomicBool = AtomicBool::new(true);

/// Warns for each of `wanted` that `topic` has with another value (or could not be read).
async fn check_configs(
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
    wanted: &[(String, String)],
) {
    if wanted.is_empty() {
        return;
    }
    if !DESCRIBE_CONFIGS.load(Ordering::Relaxed) {
        return;
    }
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(5)));
    let spec = ResourceSpecifier::Topic(topic);
    let found = match admin.describe_configs([&spec], &opts).await {
        Ok(mut r) if !r.is_empty() => r.remove(0),
        Ok(_) => return,
        Err(e) => {
            // A broker without DescribeConfigs (librdkafka's mock cluster) lets each request
            // time out: one warning, then no more asking.
            DESCRIBE_CONFIGS.store(false, Ordering::Relaxed);
            tracing::warn!("could not check the settings of topic {topic}: {e}; topic settings are not checked from now on");
            return;
        }
    };
    let resource = match found {
        Ok(r) => r,
        Err(code) => {
            tracing::warn!("could not check the settings of topic {topic}: {code}");
            return;
        }
    };
    for (k, v) in wanted {
        let have = resource.get(k).and_then(|e| e.value.clone());
        if have.as_deref() != Some(v.as_str()) {
            tracing::warn!(
                "topic {topic} has {k}={}, the relay creates its topics with {k}={v}; the topic is used as it is",
                have.as_deref().unwrap_or("(unset)")
            );
        }
    }
}

/// The topics whose name starts with `<prefix>.`, with their partition counts; a topic the
/// broker reports an error for (no leader for a moment) is a retriable error.
pub fn list_topics(settings: &KafkaSettings) -> Result<Vec<(String, i32)>> {
    let consumer: rdkafka::consumer::BaseConsumer = settings
        .client_config()
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(|e| kafka_error("metadata client", e))?;
    let md = rdkafka::consumer::Consumer::fetch_metadata(&consumer, None, Duration::from_secs(10))
        .map_err(|e| kafka_error("listing topics", e))?;
    let start = format!("{}.", settings.topic_prefix);
    let mut out = Vec::new();
    for t in md.topics().iter().filter(|t| t.name().starts_with(&start)) {
        // A topic without a leader for a moment must not pass for one without records: its
        // tail would be missing and what it holds produced again.
        if let Some(e) = t.error() {
            return Err(kafka_error(
                &format!("metadata of {}", t.name()),
                format!("{:?}", rdkafka::error::RDKafkaErrorCode::from(e)),
            ));
        }
        out.push((t.name().to_string(), t.partitions().len() as i32));
    }
    Ok(out)
}
