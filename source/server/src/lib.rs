//! The MySQL-protocol server shared by the primary (`ringrep-source serve`) and the replica
//! (`ringrep-applier serve --listen`), speaking the MySQL client/server protocol itself
//! (`protocol.rs`: packets, the connection phase, responses).
//!
//! Each connection is its own SQL session with its own variables and transaction. A replica's
//! engine is read-only to sessions, so its clients get MySQL's read-only error while the
//! applier writes through the privileged path.
//!
//! Starting points: [`ServerSettings`] (from flags, a TOML file and the environment through
//! [`config::FileConfig`] and [`ServeArgs`]), [`Server::bind`] and [`Server::run`];
//! [`spawn_ttl_purge`] runs a primary's TTL purge beside it, [`stop_signal`] waits for SIGINT or
//! SIGTERM.

mod auth;
pub mod config;
mod conn;
mod metrics;
mod mysql_stream;
mod processes;
pub mod replica_sql;
mod status;
mod stream;
mod wire;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

pub use auth::Accounts;
pub use config::{ServeArgs, ServerSettings};

use ringrep_engine::Engine;

/// What every connection shares.
pub(crate) struct Shared {
    engine: Engine,
    /// The node's own accounts (configuration), which hold every privilege.
    accounts: Accounts,
    /// The accounts of `mysql.user`, as last read.
    account_cache: ringrep_sql::AccountCache,
    /// Open connections (for the limit).
    connections: AtomicUsize,
    max_connections: usize,
    /// How long a write may wait for a client that does not read (`net_write_timeout`).
    net_write_timeout: std::time::Duration,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// One clone per statement running on the blocking pool: shutdown waits for them.
    busy: Arc<()>,
    /// Statements running now (conn.rs `run`: one alone runs in place).
    in_flight: AtomicUsize,
    /// When the server started (COM_STATISTICS, SHOW STATUS's Uptime).
    started: std::time::Instant,
    /// The port clients connect to (`@@port`).
    port: u16,
    /// Connections accepted since the start (SHOW STATUS's Connections).
    connections_total: AtomicU64,
    /// The most connections open at once (Max_used_connections).
    max_used_connections: AtomicUsize,
    /// Statements clients sent since the start (Questions).
    questions: AtomicU64,
    /// Replicas streaming from this node now, by connection id (SHOW REPLICAS).
    replicas: std::sync::Mutex<std::collections::BTreeMap<u32, stream::Streaming>>,
    /// This node's replication channel, when it is a replica (SHOW REPLICA STATUS, CHANGE
    /// REPLICATION SOURCE TO, START and STOP REPLICA).
    replica: Option<Arc<dyn ReplicaControl>>,
    /// Parts of the node beside the server that show their figures in SHOW STATUS and the
    /// metrics (the Kafka relay).
    components: Vec<Arc<dyn Component>>,
    /// The logged-in connections (SHOW PROCESSLIST, KILL).
    processes: processes::Processes,
}

/// What a replication statement answers: OK with these notes for SHOW WARNINGS (code,
/// message), or an error.
pub type ReplicaReply = std::pin::Pin<
    Box<dyn Future<Output = Result<Vec<(u16, String)>, ringrep_engine::Error>> + Send>,
>;

/// A replica node's replication channel as its server's clients see and steer it, given to
/// the server by the replica binary ([`Server::with_replica`]).
pub trait ReplicaControl: Send + Sync + std::fmt::Debug {
    /// SHOW REPLICA STATUS: the fields of the one channel, in MySQL's order (ringrep's own
    /// last), `(column, value)` with `None` for NULL; empty when no source is configured.
    fn fields(&self) -> Vec<(&'static str, Option<String>)>;
    /// Carries out a replication statement; the future completes when it is done (STOP
    /// REPLICA: once the applier has stopped between transactions).
    fn command(&self, command: replica_sql::ReplicaCommand) -> ReplicaReply;
}

/// A part of the node beside the server (the Kafka relay) whose figures SHOW STATUS shows as
/// `<Status_prefix>_<name>` and the metrics as `<metrics_prefix>_<name>`
/// ([`Server::with_component`]).
pub trait Component: Send + Sync {
    /// The prefix of its SHOW STATUS variables, e.g. `Ringrep_relay`.
    fn status_prefix(&self) -> &'static str;
    /// The prefix of its metrics, e.g. `ringrep_relay`.
    fn metrics_prefix(&self) -> &'static str;
    /// Its figures now: (name, value). The metrics show those whose value is a number; a
    /// text value `v` of `name` becomes `<prefix>_<name>{value="v"} 1`.
    fn fields(&self, engine: &Engine) -> Vec<(&'static str, String)>;
}

/// A bound server, not yet accepting.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    next_id: AtomicU32,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listen", &self.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

/// How a server run ended.
#[derive(Debug, Clone, Default)]
pub struct ServeReport {
    /// Connections served.
    pub connections_accepted: u64,
    /// Connections refused (over `max_connections`).
    pub connections_refused: u64,
    /// Connections still open at shutdown (their open transactions were rolled back).
    pub connections_closed_at_shutdown: usize,
}

impl Server {
    /// Binds the listening socket. Without a root password only loopback addresses are
    /// allowed: an open server nobody can lock is never put on a network.
    pub async fn bind(engine: Engine, settings: &ServerSettings) -> io::Result<Server> {
        if settings.accounts.passwordless("root") && !settings.listen.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "refusing to listen on {} with no root password; set --root-password or RINGREP_ROOT_PASSWORD, or listen on loopback",
                    settings.listen
                ),
            ));
        }
        let listener = TcpListener::bind(settings.listen).await.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot listen on {}: {e}", settings.listen),
            )
        })?;
        let port = listener.local_addr().map_or(0, |a| a.port());
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                engine,
                accounts: settings.accounts.clone(),
                account_cache: Default::default(),
                processes: Default::default(),
                connections: AtomicUsize::new(0),
                max_connections: settings.max_connections,
                net_write_timeout: settings.net_write_timeout,
                tls: settings.tls.clone(),
                busy: Arc::new(()),
                in_flight: AtomicUsize::new(0),
                started: std::time::Instant::now(),
                port,
                connections_total: AtomicU64::new(0),
                max_used_connections: AtomicUsize::new(0),
                questions: AtomicU64::new(0),
                replicas: Default::default(),
                replica: None,
                components: Vec::new(),
            }),
            next_id: AtomicU32::new(1),
        })
    }

    /// Makes the replication statements act on `replica` (a replica node's channel). Only
    /// before [`Server::run`].
    pub fn with_replica(mut self, replica: Arc<dyn ReplicaControl>) -> Server {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.replica = Some(replica);
        }
        self
    }

    /// Shows `component`'s figures in SHOW STATUS and the metrics. Only before
    /// [`Server::run`] and [`Server::serve_metrics`].
    pub fn with_component(mut self, component: Arc<dyn Component>) -> Server {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.components.push(component);
        }
        self
    }

    /// Serves `GET /metrics` (Prometheus' text format) on `addr` for as long as the process
    /// runs; returns the address bound (with the port chosen, when 0 was asked for).
    pub async fn serve_metrics(&self, addr: SocketAddr) -> io::Result<SocketAddr> {
        metrics::serve(self.shared.clone(), addr).await
    }

    /// The address the server is bound to (with the port chosen, when 0 was asked for).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts clients until `shutdown` completes; then stops accepting, closes every
    /// connection (rolling back its open transaction), waits for statements already running
    /// to finish, and syncs the binlog.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<ServeReport> {
        let mut report = ServeReport::default();
        let mut conns = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
                accepted = self.listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            // Out of file descriptors and the like: wait, do not spin.
                            tracing::warn!("accept failed: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let open = self.shared.connections.fetch_add(1, Ordering::SeqCst);
                    if open >= self.shared.max_connections {
                        self.shared.connections.fetch_sub(1, Ordering::SeqCst);
                        report.connections_refused += 1;
                        tracing::warn!(%peer, "refused: too many connections ({open})");
                        tokio::spawn(refuse(stream));
                        continue;
                    }
                    report.connections_accepted += 1;
                    self.shared.connections_total.fetch_add(1, Ordering::Relaxed);
                    self.shared
                        .max_used_connections
                        .fetch_max(open + 1, Ordering::Relaxed);
                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                    let shared = self.shared.clone();
                    conns.spawn(conn::serve(shared, stream, peer, id));
                }
            }
        }
        drop(self.listener);
        report.connections_closed_at_shutdown = conns.len();
        tracing::info!("shutting down: closing {} connection(s)", conns.len());
        // Dropping a connection drops its session, which rolls back its open transaction.
        conns.shutdown().await;
        // A statement already on the blocking pool finishes there (its client may not hear
        // of it, which is allowed: it was never acknowledged).
        while Arc::strong_count(&self.shared.busy) > 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let engine = self.shared.engine.clone();
        tokio::task::spawn_blocking(move || engine.sync())
            .await
            .map_err(io::Error::other)?
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(report)
    }
}

/// MySQL's answer to one connection too many: error 1040 in place of the greeting.
async fn refuse(mut stream: TcpStream) {
    let msg = b"Too many connections";
    let mut payload = vec![0xff];
    payload.extend_from_slice(&1040u16.to_le_bytes());
    payload.extend_from_slice(msg);
    let len = payload.len() as u32;
    let mut packet = len.to_le_bytes()[..3].to_vec();
    packet.push(0);
    packet.extend_from_slice(&payload);
    let _ = stream.write_all(&packet).await;
    let _ = stream.shutdown().await;
}

/// The lowest sequence number a reader of this node's binlog that is not registered with the
/// engine resumes at (the Kafka relay inside the node), if any.
pub type BinlogHold = Arc<dyn Fn() -> Option<u64> + Send + Sync>;

/// Applies the engine's binlog retention ([`ringrep_engine::Retention`]) every 10 s until
/// aborted, keeping what readers still need up to the hard cap: those registered with the
/// engine (replicas' streams, online backups) and `holds` (the Kafka relay).
pub fn spawn_retention(engine: Engine, holds: Vec<BinlogHold>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(10));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let readers_from = holds.iter().filter_map(|h| h()).min();
            let e = engine.clone();
            let policy = engine.retention();
            match tokio::task::spawn_blocking(move || e.enforce_retention(&policy, readers_from))
                .await
            {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::error!("binlog retention: {e}"),
                Err(e) => tracing::error!("binlog retention stopped: {e}"),
            }
        }
    })
}

/// Runs the TTL purge every 100 ms until aborted (primaries only: a replica purges what its
/// primary's binlog says).
pub fn spawn_ttl_purge(engine: Engine) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let e = engine.clone();
            match tokio::task::spawn_blocking(move || e.purge_all(100)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::error!("TTL purge: {e}"),
                Err(e) => tracing::error!("TTL purge stopped: {e}"),
            }
        }
    })
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!("cannot watch SIGTERM: {e}");
                std::future::pending::<()>().await
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
    tracing::info!("stop requested");
}

/// Logs to standard error through tracing; `RINGREP_LOG` sets the filter (default `info`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RINGREP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
