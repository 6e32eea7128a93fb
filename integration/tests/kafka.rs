//! Primary, relay, broker, Kafka source, replica, verifier: converged. Then the change topic
//! read as any consumer would, checked against docs/kafka.md. The broker is the one named by
//! RINGREP_TEST_KAFKA_BROKERS (CI starts one), else librdkafka's in-process mock cluster.

use ringrep_testkit::broker;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use binlog_format::SyncPolicy;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use ringrep_applier::verify::{verify, VerifyOptions};
use ringrep_applier::{Applier, KafkaSource};
use ringrep_cdc::kafka::partition_for;
use ringrep_engine::{Engine, EngineConfig};
use ringrep_relay::Relay;
use ringrep_sql::SqlSession;
use serde_json::Value as Json;

const PARTITIONS: i32 = 4;

#[test]
fn primary_relay_broker_applier_replica_converge() {
    let broker = broker::broker();
    let settings = broker.settings("e2e", &["test.user_events"], PARTITIONS);
    let prefix = settings.topic_prefix.clone();
    let dir = tempfile::tempdir().expect("tempdir");
    let open = |name: &str, id: u32, read_only: bool| {
        let mut cfg = EngineConfig::new(id);
        cfg.sync = SyncPolicy::Never;
        cfg.read_only = read_only;
        Engine::open(&dir.path().join(name), cfg).expect("open").0
    };
    let primary = open("primary", 1, false);
    let replica = open("replica", 2, true);

    // The workload: ring overwrites, an update, a prefix delete and a TTL purge.
    let mut s = SqlSession::new(&primary);
    s.execute("CREATE TABLE test.user_events (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), payload VARCHAR(64), PRIMARY KEY (user_id, ring_idx), KEY ttl_index (created_at)) COMMENT='NDB_TABLE=TTL=1@created_at,MAX_ROWS_PER_PK=3'")
        .expect("create");
    for i in 0..60 {
        s.execute(&format!(
            "INSERT INTO test.user_events (user_id, payload) VALUES ({}, 'e{i}')",
            i % 6
        ))
        .expect("insert");
    }
    s.execute("UPDATE test.user_events SET payload = 'changed' WHERE user_id = 1")
        .expect("update");
    s.execute("DELETE FROM test.user_events WHERE user_id = 2")
        .expect("prefix delete");
    std::thread::sleep(Duration::from_millis(1100));
    s.execute("INSERT INTO test.user_events (user_id, payload) VALUES (9, 'late')")
        .expect("insert");
    primary.purge_all(100).expect("purge");
    let last = primary.last_seq();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let relay = rt.spawn(
        Relay::new(settings.clone(), &primary.binlog_dir(), primary.notifier()).run(stop_rx),
    );
    let mut applier = Applier::new(&replica).expect("applier");
    let (_never, never_rx) = tokio::sync::watch::channel(false);
    let applied = rt.block_on(async {
        let k = settings.clone();
        let mut source = tokio::task::spawn_blocking(move || KafkaSource::open(&k, 1))
            .await
            .expect("join")
            .expect("kafka source");
        tokio::time::timeout(
            Duration::from_secs(120),
            applier.run(
                &mut source,
                Some(last),
                false,
                Duration::from_millis(50),
                &mut |_, _| {},
                &never_rx,
            ),
        )
        .await
        .expect("the replica caught up within 120 s")
        .expect("apply")
    });
    assert_eq!(applied, last);
    let _ = stop_tx.send(true);
    assert_eq!(rt.block_on(relay).expect("join").expect("relay"), last);

    let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
    assert!(report.converged, "{}", report.text());

    // The change topic, as a consumer in any language reads it.
    let consumer: BaseConsumer = settings
        .client_config()
        .set("group.id", "ringrep-test")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let topic = format!("{prefix}.test.user_events");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(&topic, p, Offset::Beginning)
            .expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut by_partition: HashMap<i32, Vec<(Option<Json>, Json)>> = HashMap::new();
    let mut idle = Instant::now();
    while idle.elapsed() < Duration::from_secs(3) {
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            let m = m.expect("message");
            let key: Json = serde_json::from_slice(m.key().expect("key")).expect("key is JSON");
            let value = m
                .payload()
                .map(|v| serde_json::from_slice(v).expect("envelope is JSON"));
            by_partition
                .entry(m.partition())
                .or_default()
                .push((value, key));
            idle = Instant::now();
        }
    }
    let all: Vec<&(Option<Json>, Json)> = by_partition.values().flatten().collect();
    let envelopes: Vec<&Json> = all.iter().filter_map(|(v, _)| v.as_ref()).collect();
    // Every row event of the binlog exactly once, by operation and cause.
    let mut want: HashMap<(String, String), usize> = HashMap::new();
    let mut t = binlog_format::Tailer::open(&primary.binlog_dir(), binlog_format::StartAt::Seq(1));
    while let Some((_, rec)) = t.next_timeout(Duration::ZERO).expect("binlog") {
        let binlog_format::Record::Transaction(tx) = rec else {
            continue;
        };
        for ev in &tx.events {
            if let binlog_format::Event::Row(r) = ev {
                *want
                    .entry((r.op_name().to_string(), r.cause.name().to_string()))
                    .or_default() += 1;
            }
        }
    }
    let mut got: HashMap<(String, String), usize> = HashMap::new();
    for e in &envelopes {
        let op = e["op"].as_str().expect("op").to_string();
        let cause = e["cause"].as_str().expect("cause").to_string();
        *got.entry((op, cause)).or_default() += 1;
    }
    assert_eq!(
        got, want,
        "change records by op and cause, against the binlog"
    );
    let count = |op: &str, cause: &str| {
        got.get(&(op.to_string(), cause.to_string()))
            .copied()
            .unwrap_or(0)
    };
    // What the workload did shows up as the docs say: 60 inserts into rings of 3 over 6
    // prefixes (42 overwrites), the TTL purge as deletes, the prefix delete.
    assert_eq!(count("write", "overwrite"), 42, "overwrites are writes");
    assert!(count("delete", "ttl_purge") > 0, "TTL purges are deletes");
    assert_eq!(
        count("delete", "prefix_delete"),
        4,
        "the prefix delete: 3 rows and the meta row"
    );
    // Every delete is followed by its tombstone.
    let tombstones = all.iter().filter(|(v, _)| v.is_none()).count();
    assert_eq!(
        tombstones,
        envelopes.iter().filter(|e| e["op"] == "delete").count()
    );
    for (partition, records) in &by_partition {
        let mut last_seq: HashMap<String, u64> = HashMap::new();
        for (value, key) in records {
            // The key is the full primary key; the partition follows from its prefix.
            let user = key["user_id"].as_i64().expect("user_id in the key");
            assert!(key.get("ring_idx").is_some(), "{key}");
            let prefix_json = serde_json::json!({ "user_id": user }).to_string();
            assert_eq!(
                partition_for(prefix_json.as_bytes(), PARTITIONS),
                *partition
            );
            let Some(e) = value else { continue };
            assert_eq!(e["database"], "test");
            assert_eq!(e["table"], "user_events");
            assert_eq!(&e["key"], key);
            assert_eq!(e["source"]["server_id"], 1);
            // Per prefix, events arrive in sequence order.
            let seq = e["source"]["seq"].as_u64().expect("seq");
            let prev = last_seq.insert(user.to_string(), seq).unwrap_or(0);
            assert!(seq >= prev, "prefix {user}: seq {seq} after {prev}");
            if e["op"] == "write" {
                assert!(e["after"]["payload"].is_string() || e["after"]["payload"].is_null());
            }
        }
    }

    // The same topic through another client in another language, written from the docs.
    python_consumer_agrees(&settings.brokers, &topic);
}

/// Runs `kafka_consumer.py` (confluent-kafka) on the change topic; CI installs it, elsewhere
/// the check is skipped with a message when Python or the package is missing.
fn python_consumer_agrees(brokers: &str, topic: &str) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka_consumer.py");
    let usable = std::process::Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !usable {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install python3 with confluent-kafka (.ci/run)"
        );
        eprintln!("skipped the confluent-kafka consumer: python3 with confluent_kafka not found");
        return;
    }
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(["--brokers", brokers, "--topic", topic])
        .args([
            "--prefix-columns",
            "user_id",
            "--database",
            "test",
            "--table",
            "user_events",
        ])
        .output()
        .expect("run the python consumer");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("\"write/overwrite\""), "{report}");
}

/// A replica's Kafka source opened at any sequence number reads on from exactly that one,
/// whether the record sits at the start of a produce batch or inside one. (tansu 0.6.0 answers
/// a fetch from inside a batch with the next batch: a source that took the offset it probed
/// for the offset it asked for waited for a record that never came, "offset 1 did not arrive".)
#[test]
fn a_kafka_source_opens_at_any_seq_inside_a_produce_batch() {
    use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
    use ringrep_applier::EventSource;
    let broker = broker::broker();
    let settings = broker.settings("batches", &[], 1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let topic = ringrep_cdc::kafka::replication_topic(&settings.topic_prefix);
    rt.block_on(ringrep_kafka::ensure_topic(
        &settings,
        &topic,
        ringrep_kafka::TopicKind::Replication,
    ))
    .expect("topic");
    let producer: FutureProducer = settings
        .client_config()
        .set("linger.ms", "200")
        .set("enable.idempotence", "true")
        .create()
        .expect("producer");
    let tx = |seq: u64| binlog_format::Transaction {
        server_id: 1,
        seq,
        commit_time_us: 0,
        origin: None,
        events: vec![],
    };
    let send = |seqs: std::ops::RangeInclusive<u64>| {
        let futures: Vec<_> = seqs
            .map(|seq| {
                let rec =
                    ringrep_cdc::kafka::replication_record(&settings.topic_prefix, &tx(seq), 0)
                        .expect("record");
                let mut headers = rdkafka::message::OwnedHeaders::new();
                for (k, v) in &rec.headers {
                    headers = headers.insert(rdkafka::message::Header {
                        key: k,
                        value: Some(v.as_bytes()),
                    });
                }
                producer
                    .send_result(
                        FutureRecord::to(&rec.topic)
                            .partition(0)
                            .key(&rec.key[..])
                            .payload(&rec.value.clone().expect("value")[..])
                            .headers(headers),
                    )
                    .expect("queued")
            })
            .collect();
        rt.block_on(async {
            for f in futures {
                f.await.expect("delivered").expect("acknowledged");
            }
        });
    };
    // 60 records queued at once leave as one batch (or few); then three alone.
    send(1..=60);
    for seq in 61..=63 {
        send(seq..=seq);
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
    for from in [1, 2, 30, 59, 60, 61, 63] {
        let k = settings.clone();
        let mut source = KafkaSource::open(&k, from).expect("open");
        let got = rt
            .block_on(source.next(Duration::from_secs(30)))
            .expect("next")
            .map(|t| t.tx.seq);
        assert_eq!(got, Some(from), "opened at seq {from}");
    }
    let mut past = KafkaSource::open(&settings, 64).expect("open past the end");
    let got = rt
        .block_on(past.next(Duration::from_secs(2)))
        .expect("next");
    assert!(
        got.is_none(),
        "nothing after the last record: {:?}",
        got.map(|t| t.tx.seq)
    );
}
