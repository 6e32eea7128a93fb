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
    killed_and_restarted(settings(&broker, "kill"), &[]);
}

/// The same with Kafka transactions, on the mock cluster (tansu 0.6.0 has no transactions):
/// each run fences the one before it and goes on from what committed. The mock keeps no
/// aborted transactions apart (its consumers see every record), so what this adds is the
/// transactional producer's life: init, begin, commit, and the fencing of a killed one's id.
#[test]
fn relay_in_kafka_transactions_killed_with_sigkill_resumes_exactly_once() {
    let broker = broker::mock();
    let s = settings(&broker, "txkill");
    killed_and_restarted(s, &["--kafka-transactions"]);
}

/// Four runs of the relay as a process with `args`, the first three SIGKILLed at random
/// moments while the primary writes, the last stopped with SIGTERM once all is relayed; then
/// every topic holds every record exactly once.
fn killed_and_restarted(settings: KafkaSettings, args: &[&str]) {
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
            .args(args)
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

/// A relay whose `transactional.id` another producer took over (a relay thought dead that was
/// not, beside its replacement) stops for good at its next commit, saying it was fenced,
/// instead of retrying and fencing the other in turn; its replacement then relays everything,
/// exactly once. librdkafka's mock cluster gives every producer a producer id of its own
/// instead of bumping the epoch of the one before (so two relays there would not fence each
/// other): the broker's answer to a fenced producer, PRODUCER_FENCED, is staged instead.
#[test]
fn a_fenced_relay_stops_for_good_and_its_replacement_goes_on() {
    let broker = broker::mock();
    let mock = broker.mock.as_ref().expect("mock cluster");
    let settings = KafkaSettings {
        transactional_id: Some("ringrep-test-fence".into()),
        transaction_topic: true,
        ..settings(&broker, "fence")
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = primary(dir.path());
    let rt = runtime();
    write(&engine, 0, 100);
    let first = Relay::new(settings.clone(), &engine.binlog_dir(), engine.notifier());
    let first_stats = first.stats.clone();
    let (_stop1, stop_rx1) = tokio::sync::watch::channel(false);
    let first = rt.spawn(first.run_with_retries(stop_rx1));
    wait_acked(&first_stats, engine.last_seq());
    let commits = first_stats
        .kafka_commits
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(commits > 0, "the relay committed Kafka transactions");
    let acked = first_stats
        .acked_seq
        .load(std::sync::atomic::Ordering::Acquire);
    mock.request_errors(
        RDKafkaApiKey::EndTxn,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_PRODUCER_FENCED],
    );
    write(&engine, 100, 100);
    let r = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), first)
            .await
            .expect("the fenced relay stops within a minute")
    });
    let e = r.expect("join").expect_err("the fenced relay stops");
    assert!(
        matches!(e, ringrep_kafka::Error::Fenced { .. }) && !e.is_retriable(),
        "fenced, for good: {e}"
    );
    assert_eq!(first_stats.state(), ringrep_relay::RelayState::Failed);
    assert!(
        first_stats.last_error().contains("fenced"),
        "{}",
        first_stats.last_error()
    );
    assert_eq!(
        first_stats
            .acked_seq
            .load(std::sync::atomic::Ordering::Acquire),
        acked,
        "a transaction that did not commit is not acknowledged"
    );
    let second = Relay::new(settings.clone(), &engine.binlog_dir(), engine.notifier());
    let second_stats = second.stats.clone();
    let (stop2, stop_rx2) = tokio::sync::watch::channel(false);
    let second = rt.spawn(second.run_with_retries(stop_rx2));
    wait_acked(&second_stats, engine.last_seq());
    assert_exactly_once(&settings, engine.last_seq());
    assert_other_topics_exactly_once(&settings, &engine);
    let _ = stop2.send(true);
    rt.block_on(second)
        .expect("join")
        .expect("the replacement stops cleanly");
}

/// `--kafka-transactions` against a broker without Kafka transactions (tansu 0.6.0, which CI
/// names in RINGREP_TEST_KAFKA_BROKERS): the relay stops for good at its first commit, saying
/// the broker has none and what to do, instead of retrying forever. On the mock cluster, which
/// has transactions, there is nothing to check.
#[test]
fn kafka_transactions_on_a_broker_without_them_stop_the_relay_saying_so() {
    let broker = broker();
    if broker.mock.is_some() {
        eprintln!("skipped: no broker without transactions is named (RINGREP_TEST_KAFKA_BROKERS)");
        return;
    }
    let settings = KafkaSettings {
        transactional_id: Some("ringrep-test-notxn".into()),
        ..settings(&broker, "notxn")
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = primary(dir.path());
    write(&engine, 0, 10);
    let rt = runtime();
    let relay = Relay::new(settings, &engine.binlog_dir(), engine.notifier());
    let stats = relay.stats.clone();
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    let r = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(120), relay.run_with_retries(stop_rx))
            .await
            .expect("the relay stops within two minutes")
    });
    let e = r.expect_err("no transactions on this broker");
    assert!(
        matches!(e, ringrep_kafka::Error::NoTransactions { .. }) && !e.is_retriable(),
        "{e}"
    );
    assert!(
        e.to_string().contains("without --kafka-transactions"),
        "{e}"
    );
    assert_eq!(stats.state(), ringrep_relay::RelayState::Failed);
}

/// Waits until `stats` says everything up to `seq` was acknowledged (committed, with Kafka
/// transactions).
fn wait_acked(stats: &ringrep_relay::RelayStats, seq: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while stats.acked_seq.load(std::sync::atomic::Ordering::Acquire) < seq {
        assert!(
            Instant::now() < deadline,
            "seq {seq} not acknowledged: {}",
            stats.last_error()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
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

/// Waits until the relay inside the node at `addr` runs (SHOW STATUS says `running`).
fn wait_until_running(rt: &tokio::runtime::Runtime, addr: std::net::SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while rt
        .block_on(relay_status(addr))
        .get("Ringrep_relay_state")
        .map(String::as_str)
        != Some("running")
    {
        assert!(Instant::now() < deadline, "the relay never ran");
        std::thread::sleep(Duration::from_millis(100));
    }
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
            "--kafka-heartbeat-ms",
            "200",
        ],
    );
    let rt = ringrep_testkit::node::runtime();
    // The relay starts on an empty node (its snapshot has no rows), then the writes come.
    wait_until_running(&rt, node.addr);
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
    // Idle now: heartbeats carry the last sequence number relayed and its commit time.
    let deadline = Instant::now() + Duration::from_secs(30);
    let beat = loop {
        let beats = broker::read_topic(&settings, &format!("{}.heartbeat", settings.topic_prefix));
        let last_beat = beats
            .last()
            .and_then(|r| serde_json::from_slice::<serde_json::Value>(r.value.as_deref()?).ok());
        if let Some(b) = last_beat.filter(|b| b["seq"] == last) {
            break b;
        }
        assert!(
            Instant::now() < deadline,
            "no heartbeat at seq {last}: {beats:?}"
        );
    };
    assert_eq!(beat["server_id"], 1);
    assert!(
        beat["commit_time_us"].as_i64().expect("commit time") > 0,
        "{beat}"
    );
    assert!(
        beat["ts_ms"].as_i64().expect("ts") >= beat["commit_time_us"].as_i64().unwrap_or(0) / 1000
    );
}

/// A snapshot of `engine`'s replicated tables as they stand (no writer runs meanwhile).
fn snapshot_of(engine: &Engine) -> ringrep_relay::TableSnapshot {
    engine.with_state(|state| ringrep_relay::TableSnapshot {
        seq: state.last_seq,
        server_id: 1,
        taken_us: 1,
        tables: state
            .tables
            .values()
            .map(|t| (t.def.as_ref().clone(), t.iter().map(|(_, r)| r).collect()))
            .collect(),
    })
}

/// `initial` snapshot, stopped half way (the relay told to stop), then cut off half way (the
/// relay's task dropped as a crash would), and finished by the next run: every row of the
/// table as it stood is one `read` record exactly once, marked begun and done on the schema
/// topic once each, then the changes after the snapshot's sequence number, each once. The
/// later runs go on from the relay's file: none takes another snapshot.
#[test]
fn a_snapshot_cut_off_half_way_is_finished_exactly_once() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let broker = broker();
    let settings = broker.settings("snapshot", &["test.ev", "test.big"], 4);
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = primary(&dir.path().join("p"));
    write(&engine, 0, 100);
    // A plain table big enough for the snapshot to be cut off in the middle.
    let mut s = SqlSession::new(&engine);
    s.execute("CREATE TABLE test.big (id INT PRIMARY KEY, v VARCHAR(32))")
        .expect("create");
    for chunk in 0..20 {
        let values: Vec<String> = (0..1000)
            .map(|i| format!("({}, 'row {i}')", chunk * 1000 + i))
            .collect();
        s.execute(&format!("INSERT INTO test.big VALUES {}", values.join(",")))
            .expect("insert");
    }
    let snap = snapshot_of(&engine);
    let rows: usize = snap.tables.iter().map(|(_, r)| r.len()).sum();
    let taken = std::sync::Arc::new(AtomicU32::new(0));
    let relay = || {
        let (snap, taken) = (snap.clone(), taken.clone());
        let f: ringrep_relay::SnapshotFn = std::sync::Arc::new(move || {
            // A second snapshot would send the rows again under other numbers.
            match taken.fetch_add(1, Ordering::SeqCst) {
                0 => Ok(snap.clone()),
                n => Err(format!("snapshot taken {} times", n + 1)),
            }
        });
        Relay::new(settings.clone(), &engine.binlog_dir(), None)
            .with_snapshots(f, &dir.path().join("relay"))
    };
    let rt = runtime();
    // Told to stop in the middle: it stops without sending the rest (a node that stops is not
    // held for the whole snapshot) and without the end mark.
    let stopped = relay();
    let stats = stopped.stats.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = rt.spawn(stopped.run(stop_rx));
    let deadline = Instant::now() + Duration::from_secs(60);
    while stats.change_records.load(Ordering::Relaxed) < 500 {
        assert!(
            Instant::now() < deadline && !task.is_finished(),
            "no progress"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = stop_tx.send(true);
    rt.block_on(task).expect("join").expect("a clean stop");
    let sent = stats.change_records.load(Ordering::Relaxed);
    assert!(
        sent < rows as u64,
        "stopped with {sent} of {rows} rows sent"
    );
    let first = relay();
    let stats = first.stats.clone();
    let (_stop1, stop_rx) = tokio::sync::watch::channel(false);
    let task = rt.spawn(first.run(stop_rx));
    let deadline = Instant::now() + Duration::from_secs(60);
    while stats.change_records.load(Ordering::Relaxed) < 500 {
        assert!(
            Instant::now() < deadline && !task.is_finished(),
            "no progress"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Cut off: the task dropped as a crash would, records in flight lost or not.
    task.abort();
    let _ = rt.block_on(task);
    let kept = std::fs::read_dir(dir.path().join("relay"))
        .expect("the relay's snapshot directory")
        .count();
    assert_eq!(kept, 1, "the snapshot is kept in a file while it is sent");
    write(&engine, 100, 50);
    let last = engine.last_seq();
    let second = relay();
    let stats = second.stats.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = rt.spawn(second.run(stop_rx));
    let deadline = Instant::now() + Duration::from_secs(120);
    while stats.acked_seq.load(Ordering::Acquire) < last {
        assert!(
            Instant::now() < deadline && !task.is_finished(),
            "{:?}",
            stats
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = stop_tx.send(true);
    rt.block_on(task).expect("join").expect("second run");
    assert_eq!(taken.load(Ordering::SeqCst), 1, "one snapshot in all");
    assert_eq!(
        std::fs::read_dir(dir.path().join("relay"))
            .expect("dir")
            .count(),
        0,
        "the file goes once the snapshot is done"
    );

    let prefix = &settings.topic_prefix;
    let mut records = broker::read_topic(&settings, &format!("{prefix}.test.ev"));
    records.extend(broker::read_topic(&settings, &format!("{prefix}.test.big")));
    let mut reads: Vec<u64> = Vec::new();
    let mut changes: Vec<(u64, u64)> = Vec::new();
    for r in &records {
        let v: serde_json::Value =
            serde_json::from_slice(r.value.as_deref().expect("value")).expect("json");
        let pair = (r.seq.expect("seq"), r.order.expect("order"));
        if v["op"] == "read" {
            assert_eq!(pair.0, snap.seq, "read records stand at the snapshot's seq");
            assert_eq!(v["cause"], "snapshot");
            reads.push(pair.1);
        } else {
            assert!(pair.0 > snap.seq, "a change at or below the snapshot: {v}");
            changes.push(pair);
        }
    }
    reads.sort_unstable();
    reads.dedup();
    assert_eq!(
        rows, 20_035,
        "7 rings of 4 with their meta rows, 20000 plain rows"
    );
    assert_eq!(reads.len(), rows, "each row once");
    let n_reads = records.len() - changes.len();
    assert_eq!(n_reads, rows, "no read record twice");
    // The changes after the snapshot: two row events per insert (the row and the meta row).
    changes.sort_unstable();
    let before = changes.len();
    changes.dedup();
    assert_eq!(changes.len(), before, "no change twice");
    assert_eq!(changes.len(), 100, "50 inserts after the snapshot");
    let marks: Vec<String> = broker::read_topic(&settings, &format!("{prefix}.schema-changes"))
        .iter()
        .filter_map(|r| {
            let v: serde_json::Value = serde_json::from_slice(r.value.as_deref()?).ok()?;
            let kind = v["kind"].as_str()?.to_string();
            kind.starts_with("snapshot").then_some(kind)
        })
        .collect();
    assert_eq!(marks, ["snapshot_start", "snapshot_end"]);
}

/// Runs `sql` on the node at `addr`, each statement in turn.
fn run_sql(rt: &tokio::runtime::Runtime, addr: std::net::SocketAddr, sql: &[&str]) {
    use mysql_async::prelude::*;
    rt.block_on(async {
        let mut c = ringrep_testkit::node::connect(addr, Some("test")).await;
        for q in sql {
            c.query_drop(*q)
                .await
                .unwrap_or_else(|e| panic!("{q}: {e}"));
        }
    });
}

/// Flushes the binary log and purges every file before the new one: the binlog now starts at
/// the node's next sequence number.
fn purge_binlog(rt: &tokio::runtime::Runtime, addr: std::net::SocketAddr) {
    use mysql_async::prelude::*;
    rt.block_on(async {
        let mut c = ringrep_testkit::node::connect(addr, None).await;
        c.query_drop("FLUSH BINARY LOGS").await.expect("flush");
        let logs: Vec<mysql_async::Row> = c.query("SHOW BINARY LOGS").await.expect("logs");
        let last: String = logs.last().and_then(|r| r.get(0)).expect("a log");
        c.query_drop(format!("PURGE BINARY LOGS TO '{last}'"))
            .await
            .expect("purge");
    });
}

/// The rows of `test.t` as (id, v), in id order.
fn rows_of(rt: &tokio::runtime::Runtime, addr: std::net::SocketAddr) -> Vec<(i64, String)> {
    use mysql_async::prelude::*;
    rt.block_on(async {
        let mut c = ringrep_testkit::node::connect(addr, Some("test")).await;
        c.query("SELECT id, v FROM t ORDER BY id")
            .await
            .expect("rows")
    })
}

/// The table `test.t` as a consumer of its change topic (ringrep's envelope) makes it:
/// `write` and `read` put a row, `delete` takes it away, in each partition's order.
fn materialized(settings: &KafkaSettings) -> Vec<(i64, String)> {
    let mut table = std::collections::BTreeMap::new();
    for r in broker::read_topic(settings, &format!("{}.test.t", settings.topic_prefix)) {
        let Some(v) = r.value else { continue };
        let e: serde_json::Value = serde_json::from_slice(&v).expect("json");
        let id = e["key"]["id"].as_i64().expect("id");
        match e["op"].as_str().expect("op") {
            "delete" => {
                table.remove(&id);
            }
            _ => {
                table.insert(id, e["after"]["v"].as_str().expect("v").to_string());
            }
        }
    }
    table.into_iter().collect()
}

/// A primary whose binlog was purged before its relay first ran sends its table whole
/// (`initial`), then the changes; the relay stopped while the binlog it needs is purged
/// refuses to go on under `initial`, saying what to do, and sends the table whole again under
/// `when_needed`. Each time a consumer's copy of the table equals the primary's.
#[test]
fn snapshots_send_what_a_purged_binlog_no_longer_holds() {
    let broker = broker();
    let settings = broker.settings("purged", &["test.t"], 3);
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_ringrep-source"));
    let dir = tempfile::tempdir().expect("tempdir");
    let port = ringrep_testkit::node::free_port();
    let rt = ringrep_testkit::node::runtime();
    let kafka = |mode: &str| {
        vec![
            "--listen".to_string(),
            format!("127.0.0.1:{port}"),
            "--kafka-brokers".into(),
            settings.brokers.clone(),
            "--kafka-topic-prefix".into(),
            settings.topic_prefix.clone(),
            "--kafka-snapshot".into(),
            mode.into(),
        ]
    };
    let start = |extra: &[String]| {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(dir.path())
            .args(&extra)
            .env_remove("RINGREP_ROOT_PASSWORD");
        if extra.is_empty() {
            cmd.args(["--listen", &format!("127.0.0.1:{port}")]);
        }
        ringrep_testkit::node::start(cmd, "listening on ")
    };
    let caught_up = |addr, want: &str| {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let s = rt.block_on(relay_status(addr));
            let last = ringrep_testkit::converge::last_seq(&rt, addr).to_string();
            if s.get("Ringrep_relay_acked_seq") == Some(&last)
                && s.get("Ringrep_relay_state").map(String::as_str) == Some(want)
            {
                return;
            }
            assert!(Instant::now() < deadline, "relay not caught up: {s:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // No relay yet: rows, then the binlog that holds them purged.
    let mut node = start(&[]);
    run_sql(
        &rt,
        node.addr,
        &["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))"],
    );
    for i in 0..50 {
        run_sql(
            &rt,
            node.addr,
            &[&format!("INSERT INTO t VALUES ({i}, 'v{i}')")],
        );
    }
    run_sql(&rt, node.addr, &["DELETE FROM t WHERE id < 10"]);
    purge_binlog(&rt, node.addr);
    ringrep_testkit::node::terminate(&mut node);

    // initial: the 40 rows whole, then what follows.
    let mut node = start(&kafka("initial"));
    caught_up(node.addr, "running");
    run_sql(
        &rt,
        node.addr,
        &[
            "UPDATE t SET v = 'changed' WHERE id = 20",
            "DELETE FROM t WHERE id = 21",
            "INSERT INTO t VALUES (100, 'new')",
        ],
    );
    caught_up(node.addr, "running");
    let want = rows_of(&rt, node.addr);
    assert_eq!(want.len(), 40);
    assert_eq!(materialized(&settings), want);
    ringrep_testkit::node::terminate(&mut node);

    // The relay away, the binlog it needs purged: initial refuses, naming the way out.
    let mut node = start(&[]);
    for i in 200..220 {
        run_sql(
            &rt,
            node.addr,
            &[&format!("INSERT INTO t VALUES ({i}, 'late')")],
        );
    }
    run_sql(&rt, node.addr, &["DELETE FROM t WHERE id = 30"]);
    purge_binlog(&rt, node.addr);
    ringrep_testkit::node::terminate(&mut node);
    let mut node = start(&kafka("initial"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let s = rt.block_on(relay_status(node.addr));
        if s.get("Ringrep_relay_state").map(String::as_str) == Some("failed") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "initial went on over a purged binlog: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status["Ringrep_relay_last_error"].contains("when_needed"),
        "{status:?}"
    );
    ringrep_testkit::node::terminate(&mut node);

    // when_needed: the table whole again, then the stream. A consumer that clears the table
    // at the second snapshot's start has the primary's rows; one that only applies records in
    // order has them too here, as the row deleted meanwhile was never sent again.
    let node = start(&kafka("when_needed"));
    caught_up(node.addr, "running");
    let want = rows_of(&rt, node.addr);
    assert_eq!(want.len(), 59);
    let got = materialized(&settings);
    let missing: Vec<_> = want.iter().filter(|r| !got.contains(r)).collect();
    assert!(missing.is_empty(), "rows not in the topic: {missing:?}");
    let marks = broker::read_topic(
        &settings,
        &format!("{}.schema-changes", settings.topic_prefix),
    )
    .iter()
    .filter_map(|r| {
        let v: serde_json::Value = serde_json::from_slice(r.value.as_deref()?).ok()?;
        let kind = v["kind"].as_str()?.to_string();
        kind.starts_with("snapshot").then_some(kind)
    })
    .count();
    assert_eq!(marks, 4, "two snapshots, each begun and done");
}

/// Topics the relay makes have the settings asked for (`--kafka-cleanup-policy compact`,
/// `--kafka-topic-config`, the schema topic compacted and kept forever); a topic someone else
/// made with other settings is used as it is, and the relay names each difference. Needs a
/// broker with CreateTopics and DescribeConfigs (CI's tansu); the mock cluster has neither.
#[test]
fn topics_are_made_with_their_settings_and_differences_are_named() {
    use rdkafka::admin::{
        AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication,
    };
    let broker = broker();
    if broker.mock.is_some() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs this against a real broker (RINGREP_TEST_KAFKA_BROKERS)"
        );
        eprintln!("skipped: the mock cluster has no CreateTopics or DescribeConfigs");
        return;
    }
    let settings = settings(&broker, "configs");
    let prefix = settings.topic_prefix.clone();
    let rt = runtime();
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        settings.client_config().create().expect("admin");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    // Someone made the schema topic before, with the broker's default policy.
    let schema = format!("{prefix}.schema-changes");
    let theirs =
        NewTopic::new(&schema, 1, TopicReplication::Fixed(1)).set("cleanup.policy", "delete");
    rt.block_on(admin.create_topics([&theirs], &opts))
        .expect("create")
        .into_iter()
        .for_each(|r| {
            r.expect("created");
        });
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = primary(dir.path());
    write(&engine, 0, 10);
    let relay = Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .arg("relay")
        .arg("--binlog-dir")
        .arg(engine.binlog_dir())
        .args(["--kafka-brokers", &settings.brokers])
        .args(["--kafka-topic-prefix", &prefix])
        .args(["--kafka-cleanup-policy", "compact"])
        .args(["--kafka-topic-config", "retention.ms=3600000"])
        .env("RINGREP_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start relay");
    assert_exactly_once(&settings, engine.last_seq());
    Command::new("kill")
        .args(["-TERM", &relay.id().to_string()])
        .status()
        .expect("kill");
    let out = relay.wait_with_output().expect("relay output");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains(&format!(
            "topic {schema} has cleanup.policy=delete, the relay creates its topics with cleanup.policy=compact"
        )),
        "{log}"
    );
    let change = format!("{prefix}.test.ev");
    let spec = ResourceSpecifier::Topic(&change);
    let found = rt
        .block_on(admin.describe_configs([&spec], &opts))
        .expect("describe")
        .remove(0)
        .expect("the change topic's settings");
    let get = |k: &str| found.get(k).and_then(|e| e.value.clone());
    assert_eq!(get("cleanup.policy").as_deref(), Some("compact"));
    assert_eq!(get("retention.ms").as_deref(), Some("3600000"));
}

/// Incremental snapshots asked for in SQL on a primary, as a user would: a signal table named
/// on the command line, an `execute-snapshot` and a `stop-snapshot` in one transaction (the
/// table queued, then taken out again before any chunk), then another `execute-snapshot`: the
/// table is sent whole in chunks, SHOW STATUS counts its rows and shows nothing waiting, and
/// the schema topic marks each step once.
#[test]
fn incremental_snapshots_are_asked_for_in_sql_and_shown_in_status() {
    use mysql_async::prelude::*;
    let broker = broker();
    let settings = broker.settings("incremental-sql", &["test.t", "test.sig"], 3);
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
            "3",
            "--kafka-signal-table",
            "test.sig",
            "--kafka-incremental-chunk-rows",
            "7",
        ],
    );
    let rt = ringrep_testkit::node::runtime();
    // Signals written before the relay's first run would be inside its initial snapshot,
    // which holds every table: they are acted on only after it.
    wait_until_running(&rt, node.addr);
    let last = rt.block_on(async {
        let mut c = ringrep_testkit::node::connect(node.addr, Some("test")).await;
        for q in [
            "CREATE TABLE sig (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT)",
            "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
        ] {
            c.query_drop(q).await.expect("create");
        }
        let values: Vec<String> = (0..50).map(|i| format!("({i}, 'v{i}')")).collect();
        c.query_drop(format!("INSERT INTO t VALUES {}", values.join(",")))
            .await
            .expect("insert");
        for q in [
            "BEGIN",
            r#"INSERT INTO sig VALUES ('a', 'execute-snapshot', '{"data-collections": ["test.t"]}')"#,
            "INSERT INTO sig VALUES ('a-stop', 'stop-snapshot', NULL)",
            "COMMIT",
            r#"INSERT INTO sig VALUES ('b', 'execute-snapshot', '{"data-collections": ["test.t", "test.missing"], "type": "incremental"}')"#,
        ] {
            c.query_drop(q).await.unwrap_or_else(|e| panic!("{q}: {e}"));
        }
        c.query_first::<u64, _>("SELECT @@ringrep_last_seq")
            .await
            .expect("seq")
            .expect("row")
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let s = rt.block_on(relay_status(node.addr));
        if s.get("Ringrep_relay_acked_seq") == Some(&last.to_string())
            && s.get("Ringrep_relay_incremental_snapshot_tables")
                .map(String::as_str)
                == Some("0")
            && s.get("Ringrep_relay_incremental_snapshot_rows")
                .map(String::as_str)
                == Some("50")
        {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the incremental snapshot did not finish: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status["Ringrep_relay_incremental_snapshot_table"], "");
    let prefix = &settings.topic_prefix;
    let marks: Vec<(String, String, Option<u64>)> =
        broker::read_topic(&settings, &format!("{prefix}.schema-changes"))
            .iter()
            .filter_map(|r| serde_json::from_slice::<serde_json::Value>(r.value.as_deref()?).ok())
            .filter_map(|v| {
                let kind = v["kind"].as_str()?.strip_prefix("incremental_snapshot_")?;
                Some((
                    kind.to_string(),
                    v["id"].as_str()?.to_string(),
                    v["rows"].as_u64().or(v["tables"].as_u64()),
                ))
            })
            .collect();
    let mark = |kind: &str, id: &str, n: Option<u64>| (kind.to_string(), id.to_string(), n);
    assert_eq!(
        marks,
        [
            mark("start", "a", None),
            mark("stop", "a-stop", Some(1)),
            mark("start", "b", None),
            mark("table_end", "b", Some(50)),
        ]
    );
    // Every row of the table once as a read, in chunks after the signal's transaction.
    let reads: Vec<(i64, u64)> = broker::read_topic(&settings, &format!("{prefix}.test.t"))
        .iter()
        .filter_map(|r| serde_json::from_slice::<serde_json::Value>(r.value.as_deref()?).ok())
        .filter(|v| v["cause"] == "incremental_snapshot")
        .map(|v| {
            assert_eq!(v["op"], "read", "{v}");
            (
                v["key"]["id"].as_i64().expect("id"),
                v["source"]["seq"].as_u64().expect("seq"),
            )
        })
        .collect();
    let mut ids: Vec<i64> = reads.iter().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..50).collect::<Vec<_>>());
    assert!(reads.iter().all(|(_, seq)| *seq == last), "{reads:?}");
}
