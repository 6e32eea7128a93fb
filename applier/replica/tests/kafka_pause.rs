//! A replica fed from Kafka whose broker does not answer pauses and tries again, as MySQL's
//! I/O thread retries a source it lost, instead of stopping for good until someone types
//! START REPLICA; SHOW REPLICA STATUS says why meanwhile.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use ringrep_testkit::node;

#[test]
fn a_kafka_fed_replica_whose_broker_is_away_pauses_and_retries_instead_of_stopping() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Nothing listens there: every metadata request fails.
    let absent = format!("127.0.0.1:{}", node::free_port());
    let mut cmd = Command::new(Path::new(env!("CARGO_BIN_EXE_ringrep-applier")));
    cmd.arg("serve")
        .arg("--replica-dir")
        .arg(dir.path())
        .args(["--kafka-brokers", &absent])
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("RINGREP_ROOT_PASSWORD")
        .env_remove("RINGREP_KAFKA_BROKERS");
    let mut replica = node::start(cmd, node::REPLICA_LISTENING);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match replica.log.recv_timeout(Duration::from_secs(1)) {
            Ok(line) if line.contains("replication paused") => {
                assert!(line.contains("trying again"), "{line}");
                break;
            }
            Ok(line) => assert!(
                !line.contains("replication stopped"),
                "stopped instead of pausing: {line}"
            ),
            Err(_) => assert!(
                Instant::now() < deadline,
                "the replica never reported the absent broker"
            ),
        }
    }
    let rt = node::runtime();
    let (io_running, io_error): (String, String) = rt.block_on(async {
        let mut c = node::connect(replica.addr, None).await;
        let row: mysql_async::Row = c
            .query_first("SHOW REPLICA STATUS")
            .await
            .expect("status")
            .expect("a row");
        (
            row.get::<String, _>("Replica_IO_Running")
                .unwrap_or_default(),
            row.get::<String, _>("Last_IO_Error").unwrap_or_default(),
        )
    });
    assert_ne!(io_running, "No", "{io_error}");
    assert!(
        io_error.contains("paused") && io_error.contains("kafka"),
        "{io_error}"
    );
    let _ = node::terminate(&mut replica);
}

/// A process that keeps one core busy while it lives, as another tenant of the machine would.
struct Busy(std::process::Child);

impl Busy {
    fn start() -> Busy {
        Busy(
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("start a busy loop"),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Kafka-fed replica, with a busy process beside it, across its own SIGKILL and its broker
/// going down and up: it resumes from its stored position each time and ends converged with
/// the primary, every commit applied once. (The mock cluster, the one broker whose brokers a
/// test can take down; the primary's relay and the replica reach it on loopback.)
#[test]
fn a_kafka_fed_replica_resumes_after_its_sigkill_and_a_broker_restart_under_load() {
    let broker = ringrep_testkit::broker::mock();
    let settings = broker.settings("resume", &["test.ev"], 2);
    let applier = Path::new(env!("CARGO_BIN_EXE_ringrep-applier"));
    let source = node::source_next_to(applier).expect("ringrep-source next to ringrep-applier");
    let kafka = [
        "--kafka-brokers",
        &settings.brokers,
        "--kafka-topic-prefix",
        &settings.topic_prefix,
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let primary = node::primary_with(&source, &dir.path().join("p"), &kafka);
    let _busy = Busy::start();
    let rt = node::runtime();
    let write = |from: u64, n: u64| {
        rt.block_on(async {
            let mut c = node::connect(primary.addr, Some("test")).await;
            if from == 0 {
                c.query_drop("CREATE TABLE ev (k INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(32), v BIGINT, PRIMARY KEY (k, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=4'")
                    .await
                    .expect("create");
            }
            for i in from..from + n {
                c.query_drop(format!("INSERT INTO ev (k, v) VALUES ({}, {i})", i % 7))
                    .await
                    .expect("insert");
            }
        });
        ringrep_testkit::converge::last_seq(&rt, primary.addr)
    };
    let start_replica = || {
        let mut cmd = Command::new(applier);
        cmd.arg("serve")
            .arg("--replica-dir")
            .arg(dir.path().join("r"))
            .args(kafka)
            .args(["--listen", "127.0.0.1:0"])
            .env_remove("RINGREP_ROOT_PASSWORD")
            .env_remove("RINGREP_KAFKA_BROKERS");
        node::start(cmd, node::REPLICA_LISTENING)
    };
    let last = write(0, 60);
    let mut replica = start_replica();
    ringrep_testkit::converge::wait_applied(
        &rt,
        replica.addr,
        last,
        Duration::from_secs(120),
        "first",
    );
    replica.child.kill().expect("SIGKILL the replica");
    let _ = replica.child.wait();
    let last = write(60, 60);
    let replica = start_replica();
    ringrep_testkit::converge::wait_applied(
        &rt,
        replica.addr,
        last,
        Duration::from_secs(120),
        "after its SIGKILL",
    );
    let mock = broker.mock.as_ref().expect("mock");
    for b in 1..=3 {
        mock.broker_down(b).expect("broker down");
    }
    let last = write(120, 30);
    std::thread::sleep(Duration::from_secs(2));
    for b in 1..=3 {
        mock.broker_up(b).expect("broker up");
    }
    let last = last.max(write(150, 30));
    ringrep_testkit::converge::wait_applied(
        &rt,
        replica.addr,
        last,
        Duration::from_secs(180),
        "after the broker came back",
    );
    let (code, report) = ringrep_testkit::converge::verify(applier, primary.addr, replica.addr);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains("CONVERGED"), "{report}");
}

/// A Kafka-fed replica whose next transaction is no longer in the replication topic (here: the
/// primary's first commits were purged from its binlog before the relay first ran, so the
/// topic begins after them; a topic's retention does the same) stops for good, applying
/// nothing, and says to provision it again, as MySQL's replica stops on error 1236.
#[test]
fn a_kafka_fed_replica_whose_next_seq_left_the_topic_stops_saying_to_provision_it() {
    let broker = ringrep_testkit::broker::mock();
    let settings = broker.settings("gone", &["test.ev"], 1);
    let applier = Path::new(env!("CARGO_BIN_EXE_ringrep-applier"));
    let source = node::source_next_to(applier).expect("ringrep-source next to ringrep-applier");
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = node::runtime();
    let write = |addr: std::net::SocketAddr, sql: &str| {
        rt.block_on(async {
            let mut c = node::connect(addr, Some("test")).await;
            c.query_drop(sql).await.expect(sql);
        })
    };
    // Commits before any relay ran.
    let mut first = node::primary(&source, &dir.path().join("p"));
    write(first.addr, "CREATE TABLE ev (k INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(32), v BIGINT, PRIMARY KEY (k, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=4'");
    write(first.addr, "INSERT INTO ev (k, v) VALUES (1, 1), (2, 2)");
    write(first.addr, "FLUSH BINARY LOGS");
    let newest: String = rt.block_on(async {
        let mut c = node::connect(first.addr, None).await;
        let logs: Vec<(String, u64, String)> = c.query("SHOW BINARY LOGS").await.expect("logs");
        logs.last().expect("a binlog").0.clone()
    });
    write(first.addr, &format!("PURGE BINARY LOGS TO '{newest}'"));
    node::terminate(&mut first);
    let kafka = [
        "--kafka-brokers",
        &settings.brokers,
        "--kafka-topic-prefix",
        &settings.topic_prefix,
    ];
    let primary = node::primary_with(&source, &dir.path().join("p"), &kafka);
    write(primary.addr, "INSERT INTO ev (k, v) VALUES (3, 3)");
    let mut cmd = Command::new(applier);
    cmd.arg("serve")
        .arg("--replica-dir")
        .arg(dir.path().join("r"))
        .args(kafka)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("RINGREP_ROOT_PASSWORD")
        .env_remove("RINGREP_KAFKA_BROKERS");
    let replica = node::start(cmd, node::REPLICA_LISTENING);
    let deadline = Instant::now() + Duration::from_secs(120);
    // Commits go on (the relay's snapshot holds those before it started; the replication
    // topic begins after it).
    let mut v = 4;
    let stopped = loop {
        match replica.log.recv_timeout(Duration::from_secs(1)) {
            Ok(line) if line.contains("replication stopped") => break line,
            Ok(_) => {}
            Err(_) => {
                assert!(
                    Instant::now() < deadline,
                    "the replica never stopped on the missing transactions"
                );
                write(
                    primary.addr,
                    &format!("INSERT INTO ev (k, v) VALUES (4, {v})"),
                );
                v += 1;
            }
        }
    };
    assert!(
        stopped.contains("is no longer in the topic") && stopped.contains("ringrep-applier seed"),
        "{stopped}"
    );
    let (io_error, applied): (String, Option<u64>) = rt.block_on(async {
        let mut c = node::connect(replica.addr, None).await;
        let row: mysql_async::Row = c
            .query_first("SHOW REPLICA STATUS")
            .await
            .expect("status")
            .expect("a row");
        let applied = c
            .query_first("SELECT last_seq FROM mysql.ringrep_apply_status WHERE server_id = 1")
            .await
            .expect("position");
        (
            row.get::<String, _>("Last_IO_Error").unwrap_or_default(),
            applied,
        )
    });
    assert!(
        io_error.contains("provision this replica again"),
        "{io_error}"
    );
    assert_eq!(applied, None, "the replica applied something past the gap");
}
