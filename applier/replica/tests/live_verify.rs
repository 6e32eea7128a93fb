//! `ringrep-applier verify --live` while the primary takes writes: each run compares both
//! nodes at one sequence number of the primary's (the line naming it says which) and finds them
//! converged, with no writer stopped; a row changed behind the replica's back is named, at the
//! next live run, though writes go on.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use binlog_format::Value;
use mysql_async::prelude::*;
use ringrep_engine::{Engine, EngineConfig};
use ringrep_testkit::{converge, node};

fn applier() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ringrep-applier"))
}

/// Inserts into both tables until `stop`; counts what was acknowledged.
async fn write(addr: std::net::SocketAddr, stop: Arc<AtomicBool>, acked: Arc<AtomicU64>) {
    let mut c = node::connect(addr, Some("test")).await;
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        c.exec_drop(
            "INSERT INTO ue (user_id, payload) VALUES (?, ?)",
            (n % 17, format!("p{n}")),
        )
        .await
        .expect("ring insert");
        c.exec_drop("INSERT INTO plain (v) VALUES (?)", (n,))
            .await
            .expect("plain insert");
        acked.fetch_add(2, Ordering::SeqCst);
    }
}

/// `verify --live` of the two nodes: exit code and everything it printed.
fn live(primary: std::net::SocketAddr, replica: std::net::SocketAddr) -> (Option<i32>, String) {
    let out = std::process::Command::new(applier())
        .args(["verify", "--live", "--primary"])
        .arg(format!("mysql://root@{primary}"))
        .arg("--replica")
        .arg(format!("mysql://root@{replica}"))
        .output()
        .expect("run verify --live");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The sequence number a live run compared at.
fn compared_at(report: &str) -> u64 {
    let line = report
        .lines()
        .find(|l| l.contains("both sides at the primary's seq"))
        .unwrap_or_else(|| panic!("no point named: {report}"));
    line.split("seq ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no seq in {line:?}"))
}

#[test]
fn live_verification_compares_one_point_while_writes_go_on_and_names_a_difference() {
    let Some(source_bin) = node::source_next_to(applier()) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let primary = node::primary(&source_bin, &dir.path().join("primary"));
    let rdir = dir.path().join("replica");
    let mut replica = node::replica(applier(), &rdir, primary.addr);
    let rt = node::runtime();
    rt.block_on(async {
        let mut c = node::connect(primary.addr, Some("test")).await;
        c.query_drop("CREATE TABLE ue (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), payload VARCHAR(64), PRIMARY KEY (user_id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=4'")
            .await
            .expect("create ring");
        c.query_drop("CREATE TABLE plain (id INT PRIMARY KEY AUTO_INCREMENT, v BIGINT)")
            .await
            .expect("create plain");
    });

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let writer = rt.spawn(write(primary.addr, stop.clone(), acked.clone()));
    let mut points = Vec::new();
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        let before = acked.load(Ordering::SeqCst);
        let (code, report) = live(primary.addr, replica.addr);
        assert_eq!(code, Some(0), "round {round}: {report}");
        assert!(report.contains("CONVERGED"), "round {round}: {report}");
        points.push(compared_at(&report));
        // The writer went on while the nodes were read.
        assert!(
            acked.load(Ordering::SeqCst) > before,
            "round {round}: writes stopped"
        );
    }
    assert!(
        points.windows(2).all(|w| w[0] < w[1]),
        "each run compares a later point: {points:?}"
    );

    // A row changed behind the replica's back (its process stopped, its directory written
    // through the privileged path): the next live run, under writes, names it.
    let _ = node::terminate(&mut replica);
    {
        let mut cfg = EngineConfig::new(2);
        cfg.read_only = true;
        let (engine, _) = Engine::open(&rdir, cfg).expect("replica directory");
        let def = engine.table_def("test", "plain").expect("table");
        let mut s = engine.session();
        s.vars.applier = true;
        let row = s.scan(&def, &[Value::Int(1)]).expect("scan");
        let mut changed = row[0].clone();
        changed[1] = Value::Int(-1);
        s.raw_write(&def, changed).expect("change a row");
        s.commit().expect("commit");
    }
    let replica = node::replica(applier(), &rdir, primary.addr);
    let (code, report) = live(primary.addr, replica.addr);
    stop.store(true, Ordering::SeqCst);
    rt.block_on(writer).expect("writer");
    assert_eq!(code, Some(1), "{report}");
    assert!(report.contains("test.plain"), "{report}");
    assert!(report.contains("different 1"), "{report}");
    assert!(report.contains("id=1"), "{report}");

    // Quiet again: the stream-free verifier agrees with the live one.
    let seq = converge::last_seq(&rt, primary.addr);
    converge::wait_applied(&rt, replica.addr, seq, Duration::from_secs(60), "quiet");
    let (code, report) = converge::verify(applier(), primary.addr, replica.addr);
    assert_eq!(code, Some(1), "{report}");
    assert!(report.contains("different 1"), "{report}");
}
