//! kill -9 of a primary under load, repeated, with a replica following it over TCP
//! (`ringrep-applier serve --source mysql://...`), and of the replica too: after each round
//! every acknowledged insert is on the restarted primary, the replica catches up with it, never
//! runs ahead of it, and the two verify converged.
//!
//! The replica binary is the workspace's `ringrep-applier`, next to `ringrep-source`
//! (`cargo test --workspace` builds both before running any test).

use ringrep_testkit::node;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use node::{connect, runtime, Node};

fn applier_bin() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_BIN_EXE_ringrep-source")).with_file_name("ringrep-applier");
    p.exists().then_some(p)
}

/// The primary on a fixed port (the replica's --source names it across restarts).
fn start_primary(dir: &Path, port: u16) -> Node {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringrep-source"));
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env_remove("RINGREP_ROOT_PASSWORD");
    node::start(cmd, "listening on ")
}

fn start_replica(bin: &Path, dir: &Path, primary: SocketAddr) -> Node {
    let cmd = node::network_replica(bin, dir, &format!("mysql://root@{primary}"));
    node::start(cmd, "replica listening on ")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Inserts until the connection fails; each acknowledged insert's value is recorded.
async fn load(addr: SocketAddr, from: u64, acked: Arc<AtomicU64>) {
    let Ok(mut c) = mysql_async::Conn::new(node::opts(addr, "root", None, Some("test"))).await
    else {
        return;
    };
    let mut v = from;
    loop {
        if c.exec_drop("INSERT INTO r (id, v) VALUES (?, ?)", (v % 7, v))
            .await
            .is_err()
        {
            return;
        }
        acked.store(v, Ordering::SeqCst);
        v += 1;
    }
}

async fn query_u64(addr: SocketAddr, sql: &str) -> Option<u64> {
    let mut c = mysql_async::Conn::new(node::opts(addr, "root", None, None))
        .await
        .ok()?;
    c.query_first(sql).await.ok().flatten()
}

#[test]
fn primary_and_replica_sigkilled_under_load_converge_over_tcp() {
    let Some(applier) = applier_bin() else {
        eprintln!("skipped: ringrep-applier is not built next to ringrep-source (run cargo test --workspace)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (pdir, rdir) = (dir.path().join("primary"), dir.path().join("replica"));
    let port = free_port();
    let mut primary = start_primary(&pdir, port);
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(primary.addr, Some("test")).await;
        c.query_drop("CREATE TABLE r (id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), v BIGINT, PRIMARY KEY (id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=1000000'")
            .await
            .expect("create");
    });
    let mut replica = start_replica(&applier, &rdir, primary.addr);
    let mut next = 1u64;
    for round in 0..3 {
        // Load, then SIGKILL the primary in the middle of it.
        let acked = Arc::new(AtomicU64::new(0));
        let writer = rt.spawn(load(primary.addr, next, acked.clone()));
        std::thread::sleep(Duration::from_millis(300));
        let _ = primary.child.kill();
        let _ = primary.child.wait();
        let _ = rt.block_on(writer);
        let last_acked = acked.load(Ordering::SeqCst);
        assert!(last_acked >= next, "round {round}: nothing acknowledged");
        primary = start_primary(&pdir, port);
        // Every acknowledged insert survived.
        let found = rt
            .block_on(query_u64(primary.addr, "SELECT MAX(v) FROM test.r"))
            .expect("max");
        assert!(
            found >= last_acked,
            "round {round}: acked {last_acked}, found {found}"
        );
        next = found + 1;
        if round == 1 {
            // The replica too, while the primary takes writes again.
            let acked = Arc::new(AtomicU64::new(0));
            let writer = rt.spawn(load(primary.addr, next, acked.clone()));
            std::thread::sleep(Duration::from_millis(200));
            let _ = replica.child.kill();
            let _ = replica.child.wait();
            std::thread::sleep(Duration::from_millis(200));
            writer.abort();
            let _ = rt.block_on(writer);
            next = acked.load(Ordering::SeqCst).max(next) + 1;
            replica = start_replica(&applier, &rdir, primary.addr);
        }
        // The replica catches up with the restarted primary and is never ahead of it.
        let seq = rt
            .block_on(query_u64(primary.addr, "SELECT @@ringrep_last_seq"))
            .expect("seq");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let applied = rt
                .block_on(query_u64(
                    replica.addr,
                    "SELECT last_seq FROM mysql.ringrep_apply_status WHERE server_id = 1",
                ))
                .unwrap_or(0);
            assert!(
                applied <= seq,
                "round {round}: replica at {applied}, primary at {seq}"
            );
            if applied == seq {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: replica stuck at {applied} < {seq}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let out = Command::new(&applier)
        .args([
            "verify",
            "--primary",
            &format!("mysql://root@{}", primary.addr),
        ])
        .args(["--replica", &format!("mysql://root@{}", replica.addr)])
        .output()
        .expect("verify");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("CONVERGED"), "{text}");
}
