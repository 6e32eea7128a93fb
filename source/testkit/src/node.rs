//! Starting nodes (`ringrep-source serve`, `ringrep-applier serve --listen`) as real processes,
//! finding the binaries, and talking to the nodes with mysql_async.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mysql_async::{Conn, OptsBuilder};

/// A running node; killed when dropped.
pub struct Node {
    /// The node's process.
    pub child: Child,
    /// The address it serves the MySQL protocol on.
    pub addr: SocketAddr,
    /// Every stderr line so far arrives here.
    pub log: mpsc::Receiver<String>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("pid", &self.child.id())
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd` with stderr captured and waits for the line containing `marker` followed by an
/// address.
pub fn start(mut cmd: Command, marker: &str) -> Node {
    cmd.env_remove("RINGREP_LISTEN")
        .env(
            "RINGREP_LOG",
            std::env::var("RINGREP_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start node");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("  node| {line}");
            if tx.send(line).is_err() {
                // Keep draining so the node never blocks on a full pipe.
                continue;
            }
        }
    });
    let addr = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("node did not print {marker:?}"));
        if let Some(i) = line.find(marker) {
            let rest = &line[i + marker.len()..];
            let addr = rest.split_whitespace().next().expect("address");
            break addr.parse().expect("address");
        }
    };
    Node {
        child,
        addr,
        log: rx,
    }
}

/// `ringrep-source serve` (the binary `bin`) on `data_dir`, on a free loopback port, with no
/// root password: the primary most tests start.
pub fn primary(bin: &Path, data_dir: &Path) -> Node {
    primary_with(bin, data_dir, &[])
}

/// [`primary`] with more flags for `serve`.
pub fn primary_with(bin: &Path, data_dir: &Path, extra: &[&str]) -> Node {
    primary_listening(bin, data_dir, "127.0.0.1:0", extra)
}

/// [`primary`] on a fixed loopback `port`, for tests that restart it where a replica's
/// `--source` still points.
pub fn primary_on(bin: &Path, data_dir: &Path, port: u16) -> Node {
    primary_listening(bin, data_dir, &format!("127.0.0.1:{port}"), &[])
}

fn primary_listening(bin: &Path, data_dir: &Path, listen: &str, extra: &[&str]) -> Node {
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--listen", listen])
        .args(extra)
        .env_remove("RINGREP_ROOT_PASSWORD");
    start(cmd, "listening on ")
}

/// A free loopback port (bound and released: a test that needs a fixed port takes one here).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// `ringrep-applier`, built by `cargo test --workspace` next to `source_bin` (another
/// package's binary has no `CARGO_BIN_EXE_` variable). `None`, having said why, when it is
/// not there; under CI, where the workspace is always built whole, a missing one fails the
/// test instead.
pub fn applier_next_to(source_bin: &Path) -> Option<PathBuf> {
    sibling(source_bin, "ringrep-applier")
}

/// `ringrep-source` next to `applier_bin`, as [`applier_next_to`] finds the applier.
pub fn source_next_to(applier_bin: &Path) -> Option<PathBuf> {
    sibling(applier_bin, "ringrep-source")
}

fn sibling(bin: &Path, name: &str) -> Option<PathBuf> {
    let p = bin.with_file_name(name);
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{name} is not built next to {}",
        bin.display()
    );
    eprintln!(
        "skipped: {name} is not built next to {} (run cargo test --workspace)",
        bin.display()
    );
    None
}

/// Client options for `user` at `addr`, over TCP.
pub fn opts(addr: SocketAddr, user: &str, password: Option<&str>, db: Option<&str>) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(user))
        .pass(password)
        .db_name(db)
        .prefer_socket(false)
}

/// A root connection to the node at `addr`.
pub async fn connect(addr: SocketAddr, db: Option<&str>) -> Conn {
    Conn::new(opts(addr, "root", None, db))
        .await
        .expect("connect")
}

/// The server error code of a failed call.
pub fn code(e: &mysql_async::Error) -> u16 {
    match e {
        mysql_async::Error::Server(s) => s.code,
        other => panic!("not a server error: {other:?}"),
    }
}

/// A two-thread tokio runtime for a test's clients.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Sends SIGTERM and waits for the exit status.
pub fn terminate(node: &mut Node) -> std::process::ExitStatus {
    let pid = node.child.id().to_string();
    let ok = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(ok.success());
    node.child.wait().expect("wait")
}

/// The `mariadb` (or `mysql`) command-line client, or `None` when neither is installed, which
/// CI does not allow (`.ci/run` installs it).
pub fn mysql_client() -> Option<&'static str> {
    let client = ["mariadb", "mysql"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if client.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install the mariadb client (.ci/run)"
        );
        eprintln!("skipped the command-line client check: no mariadb or mysql client");
    }
    client
}

/// Statements through `client` in batch mode as root: (succeeded, stdout, stderr).
pub fn run_client(
    client: &str,
    addr: SocketAddr,
    db: Option<&str>,
    sql: &str,
) -> (bool, String, String) {
    let port = addr.port().to_string();
    let out = Command::new(client)
        .args(["-h", "127.0.0.1", "-P", &port, "-u", "root", "--batch"])
        .args(db)
        .args(["-e", sql])
        .output()
        .expect("run client");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The spec's `user_events` table with MAX_ROWS_PER_PK=3.
pub const USER_EVENTS: &str = "CREATE TABLE user_events (
  user_id INT NOT NULL,
  ring_idx INT NOT NULL DEFAULT 0,
  ring_meta VARBINARY(64),
  created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  event_type VARCHAR(64),
  payload VARCHAR(256),
  PRIMARY KEY (user_id, ring_idx)
) ENGINE=NDB COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'";

/// The marker a replica prints before the address it serves clients on.
pub const REPLICA_LISTENING: &str = "replica listening on ";

/// A replica (`ringrep-applier` at `bin`) in `dir` following the primary at `primary` as root
/// over TCP, serving clients on a free loopback port: [`network_replica`] started.
pub fn replica(bin: &Path, dir: &Path, primary: SocketAddr) -> Node {
    start(
        network_replica(bin, dir, &format!("mysql://root@{primary}")),
        REPLICA_LISTENING,
    )
}

/// A replica (`ringrep-applier` at `bin`) in `dir` that follows the binlog directory
/// `binlog` (`--source-binlog`), serving clients on a free loopback port, started.
pub fn binlog_replica(bin: &Path, dir: &Path, binlog: &Path) -> Node {
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .arg("--replica-dir")
        .arg(dir)
        .arg("--source-binlog")
        .arg(binlog)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("RINGREP_ROOT_PASSWORD");
    start(cmd, REPLICA_LISTENING)
}

/// `ringrep-applier serve` (the binary `bin`) of a replica in `dir` following the primary at
/// `source` (`mysql://...`) over TCP, with a heartbeat of 100 ms and reconnects at most 1 s
/// apart, serving clients on a free loopback port. Add flags, then [`start`] it with the marker
/// [`REPLICA_LISTENING`].
pub fn network_replica(bin: &Path, dir: &Path, source: &str) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .arg("--replica-dir")
        .arg(dir)
        .arg("--source")
        .arg(source)
        .args([
            "--source-heartbeat-ms",
            "100",
            "--source-connect-retry",
            "1",
        ])
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("RINGREP_ROOT_PASSWORD");
    cmd
}
