//! Starting nodes (`ringrep-source serve`, `ringrep-applier serve --listen`) as real processes
//! and talking to them with mysql_async.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mysql_async::{Conn, OptsBuilder};

/// A running node; killed when dropped.
pub struct Node {
    pub child: Child,
    pub addr: SocketAddr,
    /// Every stderr line so far arrives here.
    pub log: mpsc::Receiver<String>,
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

pub fn opts(addr: SocketAddr, user: &str, password: Option<&str>, db: Option<&str>) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(user))
        .pass(password)
        .db_name(db)
        .prefer_socket(false)
}

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
