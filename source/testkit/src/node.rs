//! Starting nodes (`ringrep-source serve`, `ringrep-applier serve --listen`) as real processes
//! and talking to them with mysql_async.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
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
pub fn primary(bin: &std::path::Path, data_dir: &std::path::Path) -> Node {
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("RINGREP_ROOT_PASSWORD");
    start(cmd, "listening on ")
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

/// `ringrep-applier serve` (the binary `bin`) of a replica in `dir` following the primary at
/// `source` (`mysql://...`) over TCP, with a heartbeat of 100 ms and reconnects at most 1 s
/// apart, serving clients on a free loopback port. Add flags, then [`start`] it with the marker
/// `"replica listening on "`.
pub fn network_replica(bin: &std::path::Path, dir: &std::path::Path, source: &str) -> Command {
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
