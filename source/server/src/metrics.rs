//! The metrics endpoint (`--metrics-listen ADDR`): `GET /metrics` in Prometheus' text format,
//! over a minimal HTTP/1.1 of its own (one request per connection; the node has no other HTTP).
//!
//! Every node: commits (`ringrep_last_seq`, `ringrep_durable_seq`), the binlog's bytes,
//! segments and fsyncs, statements, client connections, replicas streaming and the TTL purge's deletions. A replica
//! adds its applied and received positions, the source's last sequence number, its lag and
//! whether its link is up (the fields of SHOW REPLICA STATUS).

use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Shared;

/// The metrics of one node, as Prometheus reads them.
pub(crate) fn render(shared: &Shared) -> String {
    let engine = &shared.engine;
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: &str| {
        // A value that starts with labels follows the name directly: `name{label="v"} 1`.
        let sep = if value.starts_with('{') { "" } else { " " };
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{sep}{value}"
        );
    };
    metric(
        "ringrep_last_seq",
        "counter",
        "Sequence number of the last transaction committed to this node's binlog.",
        &engine.last_seq().to_string(),
    );
    metric(
        "ringrep_durable_seq",
        "counter",
        "Sequence number of the last transaction durable on this node (what replicas may receive).",
        &engine.durable_seq().to_string(),
    );
    let files = engine.binlog_files().unwrap_or_default();
    metric(
        "ringrep_binlog_bytes",
        "gauge",
        "Bytes in the binlog's segment files.",
        &files.iter().map(|(_, n)| n).sum::<u64>().to_string(),
    );
    metric(
        "ringrep_binlog_segments",
        "gauge",
        "Segment files in the binlog.",
        &files.len().to_string(),
    );
    metric(
        "ringrep_binlog_fsyncs_total",
        "counter",
        "fsyncs of binlog segment files since the binlog opened (commit groups, rotations, heals, periodic and deferred syncs).",
        &engine.binlog_fsyncs().to_string(),
    );
    metric(
        "ringrep_binlog_fsyncs_when_idle_total",
        "counter",
        "Commit groups' fsyncs that a server thread ran when it had run out of work (no thread hand-off), among ringrep_binlog_fsyncs_total.",
        &engine.binlog_fsyncs_when_idle().to_string(),
    );
    metric(
        "ringrep_questions_total",
        "counter",
        "Statements clients sent since the server started.",
        &shared.questions.load(Ordering::Relaxed).to_string(),
    );
    metric(
        "ringrep_client_connections",
        "gauge",
        "Client connections open now.",
        &shared.connections.load(Ordering::Relaxed).to_string(),
    );
    let replicas = shared.replicas.lock().map(|r| r.len()).unwrap_or(0);
    metric(
        "ringrep_replicas_streaming",
        "gauge",
        "Replicas streaming this node's binlog now.",
        &replicas.to_string(),
    );
    metric(
        "ringrep_ttl_purged_rows_total",
        "counter",
        "Rows the TTL purge deleted since the node started.",
        &engine.purged_rows().to_string(),
    );
    metric(
        "ringrep_binlog_segments_purged_total",
        "counter",
        "Binlog segments removed by retention or PURGE BINARY LOGS since the node started.",
        &engine.purged_segments().to_string(),
    );
    metric(
        "ringrep_binlog_readers_overtaken_total",
        "counter",
        "Times retention removed binlog that a connected replica or the relay still needed.",
        &engine.readers_overtaken().to_string(),
    );
    for c in &shared.components {
        let prefix = c.metrics_prefix();
        for (name, value) in c.fields(engine) {
            let full = format!("{prefix}_{name}");
            if value.parse::<f64>().is_ok() {
                metric(
                    &full,
                    "gauge",
                    &format!("{} of the {prefix} part.", name.replace('_', " ")),
                    &value,
                );
            } else if !value.is_empty() {
                let label = value
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', " ");
                metric(
                    &full,
                    "gauge",
                    &format!(
                        "{} of the {prefix} part, as a label.",
                        name.replace('_', " ")
                    ),
                    &format!("{{value=\"{label}\"}} 1"),
                );
            }
        }
    }
    if let Some(status) = &shared.replica {
        let fields = status.fields();
        let get = |name: &str| {
            fields
                .iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, v)| v.clone())
        };
        let num = |name: &str| get(name).unwrap_or_else(|| "NaN".into());
        metric(
            "ringrep_replica_applied_seq",
            "counter",
            "Sequence number of the source's last transaction this replica applied.",
            &num("Executed_Seq"),
        );
        metric(
            "ringrep_replica_received_seq",
            "counter",
            "Sequence number of the source's last transaction this replica received.",
            &num("Retrieved_Seq"),
        );
        metric(
            "ringrep_replica_source_seq",
            "gauge",
            "The source's last durable sequence number as this replica last heard it.",
            &num("Source_Last_Seq"),
        );
        metric(
            "ringrep_replica_lag_seconds",
            "gauge",
            "Seconds_Behind_Source (NaN while the link is down).",
            &num("Seconds_Behind_Source"),
        );
        let up = get("Replica_IO_Running").as_deref() == Some("Yes");
        metric(
            "ringrep_replica_link_up",
            "gauge",
            "1 while the replica's link to its source is up.",
            if up { "1" } else { "0" },
        );
    }
    out
}

/// Binds `addr` and answers `GET /metrics` until the task is dropped.
pub(crate) async fn serve(shared: Arc<Shared>, addr: SocketAddr) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(5), answer(&shared, stream)).await;
            });
        }
    });
    Ok(local)
}

/// Reads one request head (at most 8 KiB) and answers it.
async fn answer(shared: &Shared, mut stream: TcpStream) -> io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let mut parts = line.split_whitespace();
    let (status, body) = match (parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics")) => ("200 OK", render(shared)),
        (Some("GET"), _) => ("404 Not Found", "not found; try /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "GET /metrics\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
