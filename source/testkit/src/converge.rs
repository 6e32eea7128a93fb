//! Waiting for a position and proving convergence over `mysql://`: what every process test
//! with a replica does once its writes are in.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;

/// One number from `sql` at `addr`, or `None` when the node is unreachable or has none.
pub async fn query_u64(addr: SocketAddr, sql: &str) -> Option<u64> {
    let mut c = mysql_async::Conn::new(crate::node::opts(addr, "root", None, None))
        .await
        .ok()?;
    c.query_first(sql).await.ok().flatten()
}

/// The sequence number of the node's last commit (`@@ringrep_last_seq`); fails the test when
/// the node does not answer.
pub fn last_seq(rt: &tokio::runtime::Runtime, addr: SocketAddr) -> u64 {
    rt.block_on(query_u64(addr, "SELECT @@ringrep_last_seq"))
        .unwrap_or_else(|| panic!("no @@ringrep_last_seq from {addr}"))
}

/// Waits up to `within` until the replica at `replica` has applied `seq` of server 1; fails
/// the test if it is ever ahead of that.
pub fn wait_applied(
    rt: &tokio::runtime::Runtime,
    replica: SocketAddr,
    seq: u64,
    within: Duration,
    what: &str,
) {
    wait_applied_from(rt, replica, 1, seq, within, what)
}

/// [`wait_applied`] of server `source_id`'s `seq` (a replica of a promoted node, of a
/// replica in a chain).
pub fn wait_applied_from(
    rt: &tokio::runtime::Runtime,
    replica: SocketAddr,
    source_id: u32,
    seq: u64,
    within: Duration,
    what: &str,
) {
    let deadline = Instant::now() + within;
    let sql =
        format!("SELECT last_seq FROM mysql.ringrep_apply_status WHERE server_id = {source_id}");
    loop {
        let got = rt.block_on(query_u64(replica, &sql));
        if got == Some(seq) {
            return;
        }
        assert!(
            got.unwrap_or(0) <= seq,
            "{what}: replica ahead of the primary: {got:?} > {seq}"
        );
        assert!(
            Instant::now() < deadline,
            "{what}: replica at {got:?}, never reached seq {seq}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `ringrep-applier verify` of two sides, each a `mysql://` URL or a data directory: its exit
/// code, and its standard output followed by its standard error.
pub fn verify_urls(applier: &Path, primary: &str, replica: &str) -> (Option<i32>, String) {
    let out = Command::new(applier)
        .args(["verify", "--primary", primary, "--replica", replica])
        .output()
        .expect("run ringrep-applier verify");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `ringrep-applier verify` of two running nodes, as root: its exit code and report.
pub fn verify(applier: &Path, primary: SocketAddr, replica: SocketAddr) -> (Option<i32>, String) {
    verify_urls(
        applier,
        &format!("mysql://root@{primary}"),
        &format!("mysql://root@{replica}"),
    )
}
