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
