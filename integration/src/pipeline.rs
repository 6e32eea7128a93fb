//! The local pipeline the demo runs: a primary node serving the MySQL protocol under a workload
//! of client connections, its TTL purge, a replica node that follows the primary's binlog
//! directory through the applier and serves reads, and the verifier.
//!
//! [`run_demo_with`] goes through it in order: both nodes serve (`Servers`), the replica
//! follows (`Follower`), the workload runs (`run_workload`), the replica catches up
//! (`wait_for_replica`), clients count rows on both nodes (`client_counts`), everything stops,
//! and `summarize` verifies and counts.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use binlog_format::{BinlogReader, Cause, Event, ReaderOptions, Record, SyncPolicy};
use mysql_async::prelude::*;
use ringrep_applier::applier::LagStats;
use ringrep_applier::verify::{verify, Report, VerifyOptions};
use ringrep_applier::{Applier, NetworkConfig, NetworkSource};
use ringrep_engine::{Engine, EngineConfig};
use ringrep_server::{ServeReport, Server, ServerSettings};
use tokio::task::JoinHandle;

use crate::workload::{event_values, user_events_sql, Rng, INSERT_EVENT_SQL};

/// What a demo run does: the workload, the table it writes, the nodes' sync policy, and where
/// they keep their data and listen.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Distinct users: each insert goes to one of them at random (one ring per user).
    pub users: u64,
    /// Inserts per user on average: the workload is `users * events_per_user` inserts.
    pub events_per_user: u64,
    /// Ring size of `user_events` (`MAX_ROWS_PER_PK`); used only when the table is created.
    pub ring_size: u32,
    /// Inserts per second across all writers; 0 is as fast as possible.
    pub rate: u64,
    /// TTL of events in seconds (`TTL=...@created_at`); with it the primary also runs its TTL
    /// purge. Used for the table only when the table is created.
    pub ttl_secs: Option<u32>,
    /// Concurrent writers, each one client connection (at least one runs).
    pub writers: usize,
    /// Seed of the writers' choice of users (writer `w` uses `seed + w`).
    pub seed: u64,
    /// Binlog sync policy of both nodes.
    pub sync: SyncPolicy,
    /// The primary's data goes in `primary/` under it, the replica's in `replica/`; existing
    /// data is opened and added to.
    pub data_dir: PathBuf,
    /// Print progress lines.
    pub progress: bool,
    /// Where the primary listens (port 0: any free port).
    pub primary_listen: SocketAddr,
    /// Where the replica listens (port 0: any free port).
    pub replica_listen: SocketAddr,
}

/// What a demo run measured and found.
#[derive(Debug)]
pub struct DemoSummary {
    /// Inserts the workload sent (`users * events_per_user`).
    pub inserts: u64,
    /// Seconds the workload took, from the writers' start to the last one's end.
    pub seconds: f64,
    /// Data rows of `test.user_events` on the primary at the end, meta rows not counted.
    pub primary_rows: u64,
    /// Ring meta rows of `test.user_events` on the primary at the end.
    pub meta_rows: u64,
    /// Row events in the primary's whole binlog caused by a ring overwriting its oldest row.
    pub overwrites: u64,
    /// Row events in the primary's whole binlog caused by the TTL purge.
    pub purges: u64,
    /// The primary's last sequence number once the workload (and purge) ended: what the
    /// replica was waited for.
    pub primary_seq: u64,
    /// Replica lag of the transactions the applier applied.
    pub lag: LagStats,
    /// The verifier's comparison of both nodes, every table, meta rows included.
    pub report: Report,
    /// Where both nodes listened.
    pub endpoints: Endpoints,
    /// `SELECT COUNT(*)` through each node's MySQL protocol: (primary, replica).
    pub client_rows: (u64, u64),
}

impl DemoSummary {
    /// The summary as the demo prints it: one `label: figures` line per measure, the
    /// verification last.
    pub fn text(&self) -> String {
        let ms =
            |v: Option<i64>| v.map_or("-".into(), |us| format!("{:.2} ms", us as f64 / 1000.0));
        format!(
            "inserts:        {}\nthroughput:     {:.0} inserts/s over {:.2} s\nrows on primary: {} data rows, {} meta rows\noverwrites:     {} (logged as row writes)\nTTL purges:     {} (logged as row deletes)\nbinlog:         {} transactions\nclients see:    {} rows on the primary ({}), {} on the replica ({})\nreplica lag:    p50 {}, p99 {} over {} transactions\nverification:   {}\n",
            self.inserts,
            self.inserts as f64 / self.seconds.max(1e-9),
            self.seconds,
            self.primary_rows,
            self.meta_rows,
            self.overwrites,
            self.purges,
            self.primary_seq,
            self.client_rows.0,
            self.endpoints.primary,
            self.client_rows.1,
            self.endpoints.replica,
            ms(self.lag.percentile(50.0)),
            ms(self.lag.percentile(99.0)),
            self.lag.count(),
            if self.report.converged { "CONVERGED (every table, meta rows included)" } else { "DIFFERENT (see the report above)" }
        )
    }
}

fn open_primary(dir: &Path, sync: SyncPolicy) -> anyhow::Result<Engine> {
    let mut cfg = EngineConfig::new(1);
    cfg.sync = sync;
    Ok(Engine::open(dir, cfg)
        .with_context(|| format!("opening primary in {}", dir.display()))?
        .0)
}

fn open_replica(dir: &Path, sync: SyncPolicy) -> anyhow::Result<Engine> {
    let mut cfg = EngineConfig::new(2);
    cfg.sync = sync;
    cfg.read_only = true;
    Ok(Engine::open(dir, cfg)
        .with_context(|| format!("opening replica in {}", dir.display()))?
        .0)
}

/// The MySQL-protocol side of a demo run.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// Where the primary serves the MySQL protocol (user root, no password).
    pub primary: SocketAddr,
    /// Where the replica serves reads (user root, no password; the replica is read-only).
    pub replica: SocketAddr,
}

/// Runs the demo pipeline with a callback that learns the servers' addresses once both listen, and an
/// optional wait, after the work is done and before the servers stop, that keeps both servers
/// up (for example until Ctrl-C).
pub fn run_demo_with(
    opts: &DemoOptions,
    on_listen: &mut dyn FnMut(&Endpoints),
    keep_serving: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
) -> anyhow::Result<DemoSummary> {
    let primary = open_primary(&opts.data_dir.join("primary"), opts.sync)?;
    let replica = open_replica(&opts.data_dir.join("replica"), opts.sync)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let servers = Servers::start(&primary, &replica, opts).await?;
        let endpoints = servers.endpoints.clone();
        on_listen(&endpoints);
        let follower = Follower::start(endpoints.primary, &replica)?;
        // The TTL purge, as the primary node runs it.
        let purger = opts
            .ttl_secs
            .map(|_| ringrep_server::spawn_ttl_purge(primary.clone()));

        // The table, then the workload, through the MySQL protocol.
        let mut admin = connect(endpoints.primary, None).await?;
        create_table(&primary, &mut admin, opts).await?;
        let workload = run_workload(opts, &primary, endpoints.primary, &follower.applied).await?;
        if let Some(p) = purger {
            finish_purge(&primary, p).await?;
        }

        let target = primary.last_seq();
        wait_for_replica(opts, &follower, target).await?;
        let client_rows = client_counts(admin, endpoints.replica).await?;

        if let Some(wait) = keep_serving {
            wait.await;
        }
        let applier = follower.stop().await?;
        servers.stop().await?;
        summarize(
            &primary,
            &replica,
            workload,
            target,
            applier,
            endpoints,
            client_rows,
        )
    })
}

/// Both nodes serving the MySQL protocol (root without a password).
struct Servers {
    endpoints: Endpoints,
    /// Turns true to stop both servers.
    stop: tokio::sync::watch::Sender<bool>,
    primary: JoinHandle<std::io::Result<ServeReport>>,
    replica: JoinHandle<std::io::Result<ServeReport>>,
}

impl Servers {
    /// Binds the primary's server, then the replica's, at the addresses of `opts`, and runs
    /// both until [`Servers::stop`].
    async fn start(
        primary: &Engine,
        replica: &Engine,
        opts: &DemoOptions,
    ) -> anyhow::Result<Servers> {
        let (stop, servers_stop) = tokio::sync::watch::channel(false);
        let serve = |engine: &Engine, addr: SocketAddr| {
            let engine = engine.clone();
            let mut stop = servers_stop.clone();
            async move {
                let mut settings = ServerSettings::local(addr.port());
                settings.listen = addr;
                let server = Server::bind(engine, &settings).await?;
                let bound = server.local_addr()?;
                let task = tokio::spawn(server.run(async move {
                    let _ = stop.wait_for(|s| *s).await;
                }));
                anyhow::Ok((bound, task))
            }
        };
        let (paddr, primary_server) = serve(primary, opts.primary_listen).await?;
        let (raddr, replica_server) = serve(replica, opts.replica_listen).await?;
        Ok(Servers {
            endpoints: Endpoints {
                primary: paddr,
                replica: raddr,
            },
            stop,
            primary: primary_server,
            replica: replica_server,
        })
    }

    /// Stops both servers and waits for them; an error of either is returned.
    async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        self.primary.await??;
        self.replica.await??;
        Ok(())
    }
}

/// The replica: the applier following the primary's replication stream over TCP (as it would
/// from another machine), in a task of its own.
struct Follower {
    /// The last sequence number applied.
    applied: Arc<AtomicU64>,
    /// Turns true to stop the applier.
    stop: tokio::sync::watch::Sender<bool>,
    task: JoinHandle<(Applier, ringrep_applier::Result<u64>)>,
}

impl Follower {
    /// Starts the applier on `replica` from the transaction after its stored position, pulling
    /// the stream of the primary's MySQL port at `primary`.
    fn start(primary: SocketAddr, replica: &Engine) -> anyhow::Result<Follower> {
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let mut applier = Applier::new(replica)?;
        let from = applier.position(1).map_or(1, |p| p.last_seq + 1);
        let mut source = NetworkSource::new(
            NetworkConfig {
                address: primary.to_string(),
                user: "root".into(),
                password: String::new(),
                replica_id: replica.config().server_id,
                heartbeat: Duration::from_millis(500),
                connect_retry: Duration::from_secs(2),
                tls: None,
                ca_file: None,
            },
            from,
        );
        let applied_seq = Arc::new(AtomicU64::new(from - 1));
        let applied = Arc::clone(&applied_seq);
        let task = tokio::spawn(async move {
            let r = applier
                .run(
                    &mut source,
                    None,
                    false,
                    Duration::from_millis(50),
                    &mut |_, seq| applied.store(seq, Ordering::Release),
                    &stop_rx,
                )
                .await;
            (applier, r)
        });
        Ok(Follower {
            applied: applied_seq,
            stop,
            task,
        })
    }

    /// The last sequence number applied.
    fn applied(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }

    /// Stops the applier and returns it (with its lag figures); an applier that had stopped
    /// with an error returns the error.
    async fn stop(self) -> anyhow::Result<Applier> {
        let _ = self.stop.send(true);
        let (applier, result) = self.task.await?;
        result.context("the applier stopped with an error")?;
        Ok(applier)
    }
}

/// Creates `test.user_events` through `admin` unless the primary has it.
async fn create_table(
    primary: &Engine,
    admin: &mut mysql_async::Conn,
    opts: &DemoOptions,
) -> anyhow::Result<()> {
    if primary.table_def("test", "user_events").is_none() {
        admin
            .query_drop(user_events_sql(opts.ring_size, opts.ttl_secs))
            .await
            .context("CREATE TABLE user_events")?;
    }
    Ok(())
}

/// What the workload did.
struct Workload {
    /// Inserts sent.
    inserts: u64,
    /// From the writers' start to the last one's end.
    seconds: f64,
}

/// The workload: `opts.writers` client connections to the primary at `primary_addr`, each
/// sending one prepared INSERT per event until `users * events_per_user` are sent, at
/// `opts.rate` overall. Prints progress once a second when asked.
async fn run_workload(
    opts: &DemoOptions,
    primary: &Engine,
    primary_addr: SocketAddr,
    applied_seq: &AtomicU64,
) -> anyhow::Result<Workload> {
    let total = opts.users * opts.events_per_user;
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..opts.writers.max(1) {
        let done = Arc::clone(&done);
        let (users, rate, seed) = (opts.users, opts.rate, opts.seed);
        writers.spawn(async move {
            let mut c = connect(primary_addr, None).await?;
            let stmt = c.prep(INSERT_EVENT_SQL).await?;
            let mut rng = Rng::new(seed.wrapping_add(w as u64));
            loop {
                let n = done.fetch_add(1, Ordering::AcqRel);
                if n >= total {
                    break;
                }
                if rate > 0 {
                    let due = started + Duration::from_secs_f64(n as f64 / rate as f64);
                    tokio::time::sleep_until(due.into()).await;
                }
                let user = rng.below(users) as i64;
                let (event_type, payload) = event_values(n);
                c.exec_drop(&stmt, (user, event_type, payload))
                    .await
                    .with_context(|| format!("insert {n}"))?;
            }
            c.disconnect().await?;
            anyhow::Ok(())
        });
    }
    let mut last_print = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    while !writers.is_empty() {
        tokio::select! {
            joined = writers.join_next() => {
                if let Some(r) = joined {
                    r.map_err(|e| anyhow::anyhow!("a writer failed: {e}"))??;
                }
            }
            _ = tick.tick() => {}
        }
        if opts.progress && last_print.elapsed() >= Duration::from_secs(1) {
            let n = done.load(Ordering::Acquire).min(total);
            eprintln!(
                "  {n}/{total} inserts ({:.0}%), primary seq {}, replica applied {}",
                100.0 * n as f64 / total.max(1) as f64,
                primary.last_seq(),
                applied_seq.load(Ordering::Acquire)
            );
            last_print = Instant::now();
        }
    }
    if opts.progress {
        eprintln!(
            "  {total}/{total} inserts (100%), primary seq {}, replica applied {}",
            primary.last_seq(),
            applied_seq.load(Ordering::Acquire)
        );
    }
    Ok(Workload {
        inserts: total,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Stops the background TTL purge, then purges every expired row at once, so that the
/// primary's last transaction is final.
async fn finish_purge(primary: &Engine, purger: JoinHandle<()>) -> anyhow::Result<()> {
    purger.abort();
    let _ = purger.await;
    let e = primary.clone();
    tokio::task::spawn_blocking(move || e.purge_all(10_000)).await??;
    Ok(())
}

/// Waits until the replica has applied `target`, or its applier stopped; fails after 300 s.
async fn wait_for_replica(
    opts: &DemoOptions,
    follower: &Follower,
    target: u64,
) -> anyhow::Result<()> {
    if opts.progress {
        eprintln!("workload done; waiting for the replica to apply seq {target}");
    }
    let wait_start = Instant::now();
    while follower.applied() < target {
        if follower.task.is_finished() {
            break;
        }
        if wait_start.elapsed() > Duration::from_secs(300) {
            anyhow::bail!(
                "the replica did not catch up within 300 s (applied {} of {target})",
                follower.applied()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// What a client of each node sees: `SELECT COUNT(*)` of `test.user_events` through `admin`
/// (the primary) and through a new connection to the replica at `replica_addr`; both
/// connections are closed. Returns (primary, replica).
async fn client_counts(
    mut admin: mysql_async::Conn,
    replica_addr: SocketAddr,
) -> anyhow::Result<(u64, u64)> {
    let count = "SELECT COUNT(*) FROM test.user_events";
    let primary_count: u64 = admin.query_first(count).await?.unwrap_or(0);
    let mut reader = connect(replica_addr, None).await?;
    let replica_count: u64 = reader.query_first(count).await?.unwrap_or(0);
    reader.disconnect().await?;
    admin.disconnect().await?;
    Ok((primary_count, replica_count))
}

/// The summary, once both nodes stopped serving: the verifier's report, the overwrites and
/// purges logged in the primary's binlog, and the primary's row counts.
fn summarize(
    primary: &Engine,
    replica: &Engine,
    workload: Workload,
    primary_seq: u64,
    applier: Applier,
    endpoints: Endpoints,
    client_rows: (u64, u64),
) -> anyhow::Result<DemoSummary> {
    let report = verify(primary, replica, &VerifyOptions::default(), &mut |_| {});
    let (overwrites, purges) = logged_causes(primary)?;
    let (primary_rows, meta_rows) = primary.with_state(|st| {
        st.table("test", "user_events").map_or((0, 0), |t| {
            let meta = t.meta_rows() as u64;
            (t.len() as u64 - meta, meta)
        })
    });
    Ok(DemoSummary {
        inserts: workload.inserts,
        seconds: workload.seconds,
        primary_rows,
        meta_rows,
        overwrites,
        purges,
        primary_seq,
        lag: applier.lag.clone(),
        report,
        endpoints,
        client_rows,
    })
}

/// Row events in the primary's binlog caused by ring overwrites and by the TTL purge.
fn logged_causes(primary: &Engine) -> anyhow::Result<(u64, u64)> {
    let (mut overwrites, mut purges) = (0, 0);
    for item in BinlogReader::open(&primary.binlog_dir(), ReaderOptions::default())? {
        if let (_, Record::Transaction(tx)) = item? {
            for ev in &tx.events {
                if let Event::Row(r) = ev {
                    match r.cause {
                        Cause::Overwrite => overwrites += 1,
                        Cause::TtlPurge => purges += 1,
                        _ => {}
                    }
                }
            }
        }
    }
    Ok((overwrites, purges))
}

async fn connect(addr: SocketAddr, db: Option<&str>) -> anyhow::Result<mysql_async::Conn> {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some("root"))
        .db_name(db)
        .prefer_socket(false);
    mysql_async::Conn::new(opts)
        .await
        .with_context(|| format!("connecting to {addr}"))
}
