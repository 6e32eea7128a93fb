//! kill -9 of a primary under load, repeated, with a replica following it over TCP
//! (`ringrep-applier serve --source mysql://...`), and of the replica too: after each round
//! every acknowledged insert is on the restarted primary, the replica catches up with it, never
//! runs ahead of it, and the two verify converged.
//!
//! The replica binary is the workspace's `ringrep-applier`, next to `ringrep-source`
//! (`cargo test --workspace` builds both before running any test).

use ringrep_testkit::{converge, node};

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use converge::query_u64;
use mysql_async::prelude::*;
use node::{connect, runtime, Node};

/// The primary on a fixed port (the replica's --source names it across restarts).
fn start_primary(dir: &Path, port: u16) -> Node {
    node::primary_on(Path::new(env!("CARGO_BIN_EXE_ringrep-source")), dir, port)
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

#[test]
fn primary_and_replica_sigkilled_under_load_converge_over_tcp() {
    let Some(applier) = node::applier_next_to(Path::new(env!("CARGO_BIN_EXE_ringrep-source")))
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (pdir, rdir) = (dir.path().join("primary"), dir.path().join("replica"));
    let port = node::free_port();
    let mut primary = start_primary(&pdir, port);
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(primary.addr, Some("test")).await;
        c.query_drop("CREATE TABLE r (id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), v BIGINT, PRIMARY KEY (id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=1000000'")
            .await
            .expect("create");
    });
    let mut replica = node::replica(&applier, &rdir, primary.addr);
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
            replica = node::replica(&applier, &rdir, primary.addr);
        }
        // The replica catches up with the restarted primary and is never ahead of it.
        let seq = converge::last_seq(&rt, primary.addr);
        converge::wait_applied(
            &rt,
            replica.addr,
            seq,
            Duration::from_secs(60),
            &format!("round {round}"),
        );
    }
    let (code, text) = converge::verify(&applier, primary.addr, replica.addr);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("CONVERGED"), "{text}");
}
