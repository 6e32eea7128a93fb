//! The relay's figures: its throughput to a broker, and the lag from a primary's commit to a
//! replica fed through Kafka. Without `--brokers`, librdkafka's in-process mock cluster stands
//! in for the broker.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use binlog_format::SyncPolicy;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use ringrep_applier::verify::{verify, VerifyOptions};
use ringrep_cdc::kafka::Format;
use ringrep_kafka::KafkaSettings;
use ringrep_relay::Relay;

use crate::replica::steady_rate;
use crate::{insert_row, open};

/// librdkafka's in-process mock cluster.
type Mock = MockCluster<'static, DefaultProducerContext>;

/// `kafka`: [`relay_throughput`] for a backlog of `txs` transactions, then
/// [`lag_through_kafka`] at `rate` inserts/s for `seconds`, against `brokers` or, without
/// them, a mock cluster.
pub(crate) fn kafka_bench(
    dir: &Path,
    brokers: Option<String>,
    (txs, rate, seconds): (u64, u64, u64),
    (format, transactions, options): (Format, bool, Vec<(String, String)>),
) -> anyhow::Result<()> {
    let mock = match &brokers {
        Some(_) => None,
        None => Some(MockCluster::new(1)?),
    };
    let servers = match (&brokers, &mock) {
        (Some(b), _) => b.clone(),
        (None, Some(m)) => m.bootstrap_servers(),
        (None, None) => unreachable!("one of the two is set"),
    };
    let broker_name = if mock.is_some() {
        "librdkafka mock cluster (in process)"
    } else {
        servers.as_str()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    let settings = |phase: &str| -> anyhow::Result<KafkaSettings> {
        let s = kafka_settings(&servers, mock.as_ref(), phase)?;
        Ok(KafkaSettings {
            format,
            transactional_id: transactions.then(|| format!("{}.relay", s.topic_prefix)),
            options: options.clone(),
            ..s
        })
    };
    let (t, c, secs, startup) = relay_throughput(&rt, dir, settings("throughput")?, txs)?;
    let guarantee = if transactions {
        "in Kafka transactions (one per batch of up to 512 binlog transactions)"
    } else {
        "idempotent, restarts skip what each partition holds"
    };
    println!("kafka: broker {broker_name}, change records in {format:?}, {guarantee}");
    println!("relay startup (topics created, tails read): {startup:.2} s");
    let relay_rate = (t + c) as f64 / secs;
    println!(
        "relay throughput: {t} transactions and {c} change records in {secs:.2} s = {:.0} tx/s, {:.0} change records/s, {relay_rate:.0} records/s in all (exactly once; from the end of the startup to the last acknowledgement, the change topic's creation included)",
        t as f64 / secs,
        c as f64 / secs,
    );
    let bound = bare_producer(&rt, &servers, mock.as_ref(), t + c)?;
    println!(
        "bare rdkafka producer (idempotent, acks=all, linger.ms=5, 300-byte values, 6 partitions): {} records in {:.2} s = {bound:.0} records/s; relay = {:.2}x of it",
        t + c,
        (t + c) as f64 / bound,
        relay_rate / bound
    );

    lag_through_kafka(&rt, dir, settings("lag")?, (rate, seconds))
}

/// The bound: what a bare producer with the relay's settings does against the same broker,
/// `n` records of 300 bytes keyed over 6 partitions, from the first send to the last
/// acknowledgement. Returns records/s.
fn bare_producer(
    rt: &tokio::runtime::Runtime,
    servers: &str,
    mock: Option<&Mock>,
    n: u64,
) -> anyhow::Result<f64> {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let settings = kafka_settings(servers, mock, "bare")?;
    let topic = format!("{}.bare", settings.topic_prefix);
    if let Some(m) = mock {
        m.create_topic(&topic, 6, 1)?;
    } else {
        let mut s = settings.clone();
        s.partitions = 6;
        rt.block_on(ringrep_kafka::ensure_topic(
            &s,
            &topic,
            ringrep_kafka::TopicKind::Change,
        ))?;
    }
    let producer: FutureProducer = settings
        .client_config()
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()?;
    let value = vec![b'x'; 300];
    let start = Instant::now();
    rt.block_on(async {
        let mut inflight = std::collections::VecDeque::new();
        for i in 0..n {
            let key = i.to_string();
            loop {
                let rec = FutureRecord::to(&topic)
                    .key(key.as_bytes())
                    .payload(&value[..])
                    .partition((i % 6) as i32);
                match producer.send_result(rec) {
                    Ok(f) => {
                        inflight.push_back(f);
                        break;
                    }
                    Err(_) => match inflight.pop_front() {
                        Some(f) => {
                            f.await?.map_err(|(e, _)| e)?;
                        }
                        None => tokio::time::sleep(Duration::from_millis(1)).await,
                    },
                }
            }
            if inflight.len() > 20_000 {
                if let Some(f) = inflight.pop_front() {
                    f.await?.map_err(|(e, _)| e)?;
                }
            }
        }
        for f in inflight {
            f.await?.map_err(|(e, _)| e)?;
        }
        anyhow::Ok(())
    })?;
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Throughput: a primary writes `txs` single-row transactions, then a relay started from
/// scratch relays them all. Returns the transactions and change records it produced, the
/// seconds from the end of its startup to the broker's acknowledgement of the last
/// transaction, and the seconds its startup took.
fn relay_throughput(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    settings: KafkaSettings,
    txs: u64,
) -> anyhow::Result<(u64, u64, f64, f64)> {
    let (primary, def) = open(&dir.join("p1"), 1, SyncPolicy::Never, false)?;
    let mut s = primary.session();
    for n in 0..txs {
        insert_row(&mut s, &def, n)?;
    }
    primary.sync()?;
    let last = primary.last_seq();
    let relay = Relay::new(settings, &primary.binlog_dir(), None);
    let stats = relay.stats.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let began = Instant::now();
    let task = rt.spawn(relay.run(stop_rx));
    while matches!(
        stats.state(),
        ringrep_relay::RelayState::Idle | ringrep_relay::RelayState::Starting
    ) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let startup = began.elapsed().as_secs_f64();
    let start = Instant::now();
    while stats.acked_seq.load(Ordering::Acquire) < last {
        if task.is_finished() {
            rt.block_on(task)??;
            anyhow::bail!("the relay stopped before relaying seq {last}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let secs = start.elapsed().as_secs_f64();
    let _ = stop_tx.send(true);
    rt.block_on(task)??;
    Ok((
        stats.transactions.load(Ordering::Relaxed),
        stats.change_records.load(Ordering::Relaxed),
        secs,
        startup,
    ))
}

/// Lag: primary -> relay -> broker -> Kafka source -> replica, durable on both sides, at `rate`
/// inserts/s for `seconds`; prints the median and 99th percentile and whether the replica
/// converged.
fn lag_through_kafka(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    settings: KafkaSettings,
    (rate, seconds): (u64, u64),
) -> anyhow::Result<()> {
    let (primary, def) = open(&dir.join("p2"), 1, SyncPolicy::EveryCommit, false)?;
    let (replica, _) = open(&dir.join("r2"), 2, SyncPolicy::EveryCommit, true)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let relay = Relay::new(settings.clone(), &primary.binlog_dir(), primary.notifier());
    let stats = relay.stats.clone();
    let relay = rt.spawn(relay.run(stop_rx));
    // The lag is the steady state's: writes start once the relay has started.
    while matches!(
        stats.state(),
        ringrep_relay::RelayState::Idle | ringrep_relay::RelayState::Starting
    ) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let k = settings.clone();
    let source = rt.block_on(async {
        tokio::task::spawn_blocking(move || ringrep_applier::KafkaSource::open(&k, 1)).await
    })??;
    let applier = steady_rate(
        rt,
        &primary,
        &def,
        &replica,
        Box::new(source),
        rate,
        seconds,
    )?;
    let _ = stop_tx.send(true);
    rt.block_on(relay)??;
    let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
    let ms = |v: Option<i64>| v.map_or(0.0, |us| us as f64 / 1000.0);
    println!(
        "lag through Kafka: {rate} inserts/s for {seconds} s, durable on both sides: p50 {:.2} ms, p99 {:.2} ms over {} transactions; converged: {}",
        ms(applier.lag.percentile(50.0)),
        ms(applier.lag.percentile(99.0)),
        applier.lag.count(),
        report.converged
    );
    Ok(())
}

/// Settings for one phase of the Kafka benchmark, under a topic prefix of its own
/// (`bench-<phase>-<nanoseconds>`); on the mock cluster, which has no CreateTopics, its topics
/// are created up front.
fn kafka_settings(
    brokers: &str,
    mock: Option<&Mock>,
    phase: &str,
) -> anyhow::Result<KafkaSettings> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let prefix = format!("bench-{phase}-{nanos}");
    if let Some(m) = mock {
        for t in ["replication", "schema-changes", "transaction", "heartbeat"] {
            m.create_topic(&format!("{prefix}.{t}"), 1, 1)?;
        }
        m.create_topic(&format!("{prefix}.test.user_events"), 6, 1)?;
    }
    Ok(KafkaSettings::new(brokers, &prefix))
}
