//! SHOW STATUS: what the server adds to the node's own counters (connections, statements,
//! uptime), under MySQL's names so that monitoring tools read them as they read MySQL's.

use std::sync::atomic::Ordering;

use ringrep_sql::ServerStatus;

use super::Shared;

impl ServerStatus for Shared {
    fn status(&self) -> Vec<(String, String)> {
        let uptime = self.started.elapsed().as_secs();
        let questions = self.questions.load(Ordering::Relaxed);
        let replicas = self.replicas.lock().map(|r| r.len()).unwrap_or(0);
        let components = self.components.iter().flat_map(|c| {
            let prefix = c.status_prefix();
            c.fields(&self.engine)
                .into_iter()
                .map(move |(n, v)| (format!("{prefix}_{n}"), v))
        });
        [
            ("Uptime", uptime),
            ("Uptime_since_flush_status", uptime),
            (
                "Threads_connected",
                self.connections.load(Ordering::Relaxed) as u64,
            ),
            (
                "Threads_running",
                self.in_flight.load(Ordering::Relaxed) as u64,
            ),
            (
                "Connections",
                self.connections_total.load(Ordering::Relaxed),
            ),
            (
                "Max_used_connections",
                self.max_used_connections.load(Ordering::Relaxed) as u64,
            ),
            // ringrep runs no statements of its own: every one is a client's.
            ("Questions", questions),
            ("Queries", questions),
            ("Ringrep_replicas_streaming", replicas as u64),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .chain(components)
        .collect()
    }
}
