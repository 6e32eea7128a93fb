//! The Kafka relay against a broker: the one named by RINGREP_TEST_KAFKA_BROKERS (CI starts one),
//! else librdkafka's in-process mock cluster (whose brokers listen on loopback, so a relay
//! process can reach them too). The replication topic must hold every sequence number exactly
//! once, in order, whatever happens to the relay or the brokers.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringrep_testkit::broker;

use binlog_format::SyncPolicy;
use broker::{broker, Broker};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use ringrep_engine::{Engine, EngineConfig};
use ringrep_kafka::{replication_seqs, KafkaSettings};
use ringrep_relay::Relay;
use ringrep_sql::SqlSession;

fn settings(broker: &Broker, name: &str) -> KafkaSettings {
    broker.settings(name, &["test.ev"], 4)
}

fn primary(dir: &std::path::Path) -> Engine {
    let mut cfg = EngineConfig::new(1);
    cfg.sync = SyncPolicy::Never;
    let (engine, _) = Engine::open(dir, cfg).expect("open");
    let mut s = SqlSession::new(&engine);
    s.execute("CREATE TABLE test.ev (k INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(32), v BIGINT, PRIMARY KEY (k, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=4'")
        .expect("create");
    engine
}

fn write(engine: &Engine, from: u64, n: u64) {
    let mut s = SqlSession::new(engine);
    for i in from..from + n {
        s.execute(&format!(
            "INSERT INTO test.ev (k, v) VALUES ({}, {i})",
            i % 7
        ))
        .expect("insert");
    }
}

fn assert_exactly_once(settings: &KafkaSettings, last: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seqs = replication_seqs(settings).expect("read the replication topic");
        if seqs.len() as u64 >= last || Instant::now() > deadline {
            let want: Vec<(u32, u64)> = (1..=last).map(|s| (1, s)).collect();
            assert_eq!(seqs.len(), want.len(), "records in the replication topic");
            assert_eq!(seqs, want, "every seq once, in order");
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A child process killed when dropped, so that a failed assertion does not leave a relay
/// retrying against a broker that is gone.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The relay as a process, killed with SIGKILL at random moments while the primary writes,
/// and restarted each time: nothing lost, nothing twice.
#[test]
fn relay_killed_with_sigkill_resumes_without_loss_or_duplicates() {
    let broker = broker();
    let settings = settings(&broker, "kill");
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = primary(dir.path());
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
            .arg("relay")
            .arg("--binlog-dir")
            .arg(engine.binlog_dir())
            .args(["--kafka-brokers", &settings.brokers])
            .args(["--kafka-topic-prefix", &settings.topic_prefix])
            .args(["--kafka-partitions", "4"])
            .arg("--kafka-transaction-topic")
            .env("RINGREP_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start relay")
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(7);
    eprintln!("seed {seed}");
    let mut rng = seed;
    let mut next = 0;
    for round in 0..4 {
        let mut relay = Reaped(spawn());
        write(&engine, next, 150);
        next += 150;
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis(100 + (rng >> 33) % 400));
        if round < 3 {
            relay.0.kill().expect("SIGKILL");
        } else {
            // The last one runs until the topic has everything, then stops cleanly.
            assert_exactly_once(&settings, engine.last_seq());
            let pid = relay.0.id().to_string();
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .expect("kill");
        }
        let status = relay.0.wait().expect("wait");
        if round == 3 {
            assert!(status.success(), "clean stop on SIGTERM: {status}");
        }
    }
    assert_exactly_once(&settings, engine.last_seq());
    assert_other_topics_exactly_once(&settings, &engine);
}

/// The change, transaction and schema topics after the relay's SIGKILLs: each row event's
/// change record exactly once (by its `ringrep.seq` and `ringrep.order`), one BEGIN and one
/// END per transaction with rows, and the one CREATE TABLE once on the schema topic.
fn assert_other_topics_exactly_once(settings: &KafkaSettings, engine: &Engine) {
    use binlog_format::events::{Event, Record};
    let mut t = binlog_format::Tailer::open(&engine.binlog_dir(), binlog_format::StartAt::Seq(1));
    let (mut want_changes, mut want_tx) = (Vec::new(), Vec::new());
    let mut ddl = 0;
    while let Some((_, rec)) = t.next_timeout(Duration::ZERO).expect("binlog") {
        let Record::Transaction(tx) = rec else {
            continue;
        };
        let mut rows = false;
        for (i, ev) in tx.events.iter().enumerate() {
            match ev {
                Event::Row(_) => {
                    want_changes.push((tx.seq, 4 * i as u64));
                    rows = true;
                }
                Event::Ddl(_) => ddl += 1,
            }
        }
        if rows {
            want_tx.push((tx.seq, 0));
            want_tx.push((tx.seq, 1));
        }
    }
    let prefix = &settings.topic_prefix;
    let mut got: Vec<(u64, u64)> = broker::read_topic(settings, &format!("{prefix}.test.ev"))
        .iter()
        .map(|r| (r.seq.expect("seq header"), r.order.expect("order header")))
        .collect();
    got.sort_unstable();
    assert_eq!(got.len(), want_changes.len(), "change records");
    assert_eq!(got, want_changes, "each row event's change record once");
    let tx: Vec<(u64, u64)> = broker::read_topic(settings, &format!("{prefix}.transaction"))
        .iter()
        .map(|r| (r.seq.expect("seq header"), r.order.expect("order header")))
        .collect();
    assert_eq!(tx, want_tx, "BEGIN and END once per transaction, in order");
    let schema = broker::read_topic(settings, &format!("{prefix}.schema-changes"));
    assert_eq!(schema.len(), ddl, "one schema record per DDL: {schema:?}");
}

/// Broker trouble of every kind the mock cluster can stage, while the primary writes:
/// retriable produce errors, slow brokers, partition leaders moving between brokers, the
/// replication partition without a leader, the leader's broker down and up again. Depending on
/// timing these hit the relay's startup (reading the topic's tail) or its producing; either
/// way it rides them out, and the topic ends up with every seq exactly once.
#[test]
fn relay_rides_out_broker_faults() {
    // Faults can only be staged on the mock cluster, so this test uses one even when
    // RINGREP_TEST_KAFKA_BROKERS names a real broker.
    let broker = broker::mock();
    let Some(mock) = &broker.mock else {
        unreachable!("broker::mock() always has a mock cluster")
    };
    let mut settings = settings(&broker, "faults");
    // Reconnect quickly after the outage (librdkafka's default backoff grows to 10 s).
    settings.options = vec![
        ("reconnect.backoff.max.ms".into(), "500".into()),
        ("retry.backoff.max.ms".into(), "500".into()),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = primary(dir.path());
    let rt = runtime();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let durable_engine = engine.clone();
    let relay = Relay::new(settings.clone(), &engine.binlog_dir(), engine.notifier())
        .with_durable(std::sync::Arc::new(move || durable_engine.durable_seq()));
    let stats = relay.stats.clone();
    let task = rt.spawn(relay.run(stop_rx));
    // Waits until the relay has acknowledged `last`; false if the relay task ended first.
    let caught_up = |last: u64| -> bool {
        let deadline = Instant::now() + Duration::from_secs(60);
        while stats.acked_seq.load(std::sync::atomic::Ordering::Acquire) < last {
            if task.is_finished() {
                return false;
            }
            assert!(
                Instant::now() < deadline,
                "relay stalled: acknowledged up to seq {} of {last}",
                stats.acked_seq.load(std::sync::atomic::Ordering::Acquire)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    };
    write(&engine, 0, 100);
    // Retriable produce errors: librdkafka retries them; the idempotent producer keeps order.
    mock.request_errors(
        RDKafkaApiKey::Produce,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
        ],
    );
    write(&engine, 100, 100);
    // Every broker answers slowly for a while.
    for b in 1..=3 {
        mock.broker_round_trip_time(b, Duration::from_millis(300))
            .expect("rtt");
    }
    write(&engine, 200, 100);
    std::thread::sleep(Duration::from_millis(500));
    for b in 1..=3 {
        mock.broker_round_trip_time(b, Duration::ZERO).expect("rtt");
    }
    write(&engine, 300, 100);
    // Leader changes: every partition moves to another broker, twice, while writes go on;
    // then the replication partition has no leader at all for a moment.
    let replication = format!("{}.replication", settings.topic_prefix);
    let change = format!("{}.test.ev", settings.topic_prefix);
    for (round, leader) in [2, 3].into_iter().enumerate() {
        mock.partition_leader(&replication, 0, Some(leader))
            .expect("move leader");
        for p in 0..4 {
            mock.partition_leader(&change, p, Some(leader))
                .expect("move leader");
        }
        write(&engine, 400 + 100 * round as u64, 100);
    }
    // Nothing may be in flight while the partition has no leader: librdkafka 2.12.1's mock
    // broker dereferences the missing leader when it answers a produce request for such a
    // partition (rdkafka_mock_handlers.c, `mpart->leader->id` in the CurrentLeader tag) and
    // crashes the test process. A real broker answers NOT_LEADER_OR_FOLLOWER. So the relay
    // first catches up, sits through the leaderless moment idle (refreshing metadata), and
    // the next writes come after the leader is back.
    if !caught_up(engine.last_seq()) {
        panic!("relay ended early: {:?}", rt.block_on(task));
    }
    mock.partition_leader(&replication, 0, None)
        .expect("no leader");
    std::thread::sleep(Duration::from_millis(300));
    mock.partition_leader(&replication, 0, Some(1))
        .expect("leader back");
    write(&engine, 600, 100);
    // The leader's broker goes down and comes back.
    mock.broker_down(1).expect("broker down");
    write(&engine, 700, 50);
    std::thread::sleep(Duration::from_secs(1));
    mock.broker_up(1).expect("broker up");
    write(&engine, 750, 50);
    let last = engine.last_seq();
    if !caught_up(last) {
        panic!("relay ended early: {:?}", rt.block_on(task));
    }
    let _ = stop_tx.send(true);
    let acked = rt.block_on(task).expect("join").expect("relay");
    assert_eq!(acked, last);
    assert_exactly_once(&settings, last);
}

/// `SHOW STATUS LIKE 'Ringrep_relay%'` as a map.
async fn relay_status(addr: std::net::SocketAddr) -> std::collections::HashMap<String, String> {
    use mysql_async::prelude::*;
    let mut c = ringrep_testkit::node::connect(addr, None).await;
    let rows: Vec<(String, String)> = c
        .query("SHOW STATUS LIKE 'Ringrep_relay%'")
        .await
        .expect("show status");
    rows.into_iter().collect()
}

/// A relay inside a primary whose broker cannot be reached: the node keeps serving, and SHOW
/// STATUS shows the relay retrying with its error, instead of one log line and silence.
#[test]
fn a_relay_without_its_broker_retries_and_shows_why() {
    use mysql_async::prelude::*;
    let dir = tempfile::tempdir().expect("tempdir");
    // A port nothing listens on.
    let brokers = format!("127.0.0.1:{}", ringrep_testkit::node::free_port());
    let node = ringrep_testkit::node::primary_with(
        std::path::Path::new(env!("CARGO_BIN_EXE_ringrep-source")),
        dir.path(),
        &[
            "--kafka-brokers",
            &brokers,
            "--kafka-option",
            "socket.connection.setup.timeout.ms=1000",
        ],
    );
    let rt = ringrep_testkit::node::runtime();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        let s = rt.block_on(relay_status(node.addr));
        if s.get("Ringrep_relay_state").map(String::as_str) == Some("retrying") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the relay never showed a retry: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        status["Ringrep_relay_errors"]
            .parse::<u64>()
            .expect("errors")
            >= 1
    );
    assert!(
        status["Ringrep_relay_last_error"].contains("kafka"),
        "{status:?}"
    );
    // The node serves on.
    rt.block_on(async {
        let mut c = ringrep_testkit::node::connect(node.addr, Some("test")).await;
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
            .await
            .expect("create");
        c.query_drop("INSERT INTO t VALUES (1)")
            .await
            .expect("insert");
    });
}

/// A relay inside a primary, on the broker of the tests: SHOW STATUS and the metrics show it
/// running, caught up to the node's last commit, with its counts, lag and no error.
#[test]
fn a_relay_in_a_primary_shows_its_progress() {
    use mysql_async::prelude::*;
    let broker = broker();
    let settings = settings(&broker, "status");
    let dir = tempfile::tempdir().expect("tempdir");
    let node = ringrep_testkit::node::primary_with(
        std::path::Path::new(env!("CARGO_BIN_EXE_ringrep-source")),
        dir.path(),
        &[
            "--kafka-brokers",
            &settings.brokers,
            "--kafka-topic-prefix",
            &settings.topic_prefix,
            "--kafka-partitions",
            "4",
            "--kafka-format",
            "debezium",
        ],
    );
    let rt = ringrep_testkit::node::runtime();
    let last = rt.block_on(async {
        let mut c = ringrep_testkit::node::connect(node.addr, Some("test")).await;
        c.query_drop("CREATE TABLE ev (k INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(32), v BIGINT, PRIMARY KEY (k, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=4'")
            .await
            .expect("create");
        for i in 0..40 {
            c.query_drop(format!("INSERT INTO ev (k, v) VALUES ({}, {i})", i % 7))
                .await
                .expect("insert");
        }
        c.query_first::<u64, _>("SELECT @@ringrep_last_seq")
            .await
            .expect("seq")
            .expect("row")
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let s = rt.block_on(relay_status(node.addr));
        if s.get("Ringrep_relay_acked_seq") == Some(&last.to_string()) {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the relay did not catch up: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status["Ringrep_relay_state"], "running");
    assert_eq!(status["Ringrep_relay_lag_seq"], "0");
    assert_eq!(status["Ringrep_relay_lag_ms"], "0");
    // 41 transactions (the CREATE and 40 inserts); each insert writes a row and its meta row.
    assert_eq!(status["Ringrep_relay_transactions"], last.to_string());
    assert_eq!(status["Ringrep_relay_change_records"], "80");
    assert_eq!(status["Ringrep_relay_errors"], "0");
    assert_eq!(status["Ringrep_relay_last_error"], "");
    // The change topic in Debezium's envelope (`--kafka-format debezium`): 40 inserts into
    // rings of 4 over 7 prefixes are 28 first inserts (`c`), 12 overwrites and 40 meta-row
    // writes (`u`), each once.
    let records = broker::read_topic(&settings, &format!("{}.test.ev", settings.topic_prefix));
    let mut ops = std::collections::HashMap::new();
    for r in &records {
        let v: serde_json::Value =
            serde_json::from_slice(r.value.as_deref().expect("no deletes, no tombstones"))
                .expect("JSON");
        assert_eq!(
            v["schema"]["name"],
            format!("{}.test.ev.Envelope", settings.topic_prefix)
        );
        let p = &v["payload"];
        assert_eq!(p["source"]["connector"], "ringrep");
        *ops.entry(p["op"].as_str().expect("op").to_string())
            .or_insert(0) += 1;
    }
    assert_eq!(ops.get("c"), Some(&28), "{ops:?}");
    assert_eq!(ops.get("u"), Some(&52), "{ops:?}");
    assert_eq!(records.len(), 80);
}
