//! The local pipeline the demo runs: a primary node serving the MySQL protocol under a workload
//! of client connections, its TTL purge, a replica node that follows the primary's binlog
//! directory through the applier and serves reads, and the verifier.

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
use ringrep_applier::{Applier, BinlogDirSource};
use ringrep_engine::{Engine, EngineConfig};
use ringrep_server::{Server, ServerSettings};

use crate::workload::{event_values, user_events_sql, Rng, INSERT_EVENT_SQL};

#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub users: u64,
    pub events_per_user: u64,
    pub ring_size: u32,
    /// Inserts per second across all writers; 0 is as fast as possible.
    pub rate: u64,
    pub ttl_secs: Option<u32>,
    pub writers: usize,
    pub seed: u64,
    pub sync: SyncPolicy,
    pub data_dir: PathBuf,
    /// Print progress lines.
    pub progress: bool,
    /// Where the primary and the replica listen (port 0: any free port).
    pub primary_listen: SocketAddr,
    pub replica_listen: SocketAddr,
}

#[derive(Debug)]
pub struct DemoSummary {
    pub inserts: u64,
    pub seconds: f64,
    pub primary_rows: u64,
    pub meta_rows: u64,
    pub overwrites: u64,
    pub purges: u64,
    pub primary_seq: u64,
    pub lag: LagStats,
    pub report: Report,
    pub endpoints: Endpoints,
    /// `SELECT COUNT(*)` through each node's MySQL protocol: (primary, replica).
    pub client_rows: (u64, u64),
}

impl DemoSummary {
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
    pub primary: SocketAddr,
    pub replica: SocketAddr,
}

/// Runs the whole demo and returns its summary. `serving` is called once both servers listen
/// and once more, after the summary, when `keep_serving` is set (it may then wait, for example
/// for Ctrl-C, before the servers stop).
pub fn run_demo(opts: &DemoOptions) -> anyhow::Result<DemoSummary> {
    run_demo_with(opts, &mut |_| {}, None)
}

/// [`run_demo`] with a callback that learns the servers' addresses, and an optional wait that
/// keeps both servers up after the work is done.
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
        // Both nodes serve the MySQL protocol on loopback (root without a password).
        let (stop_servers, servers_stop) = tokio::sync::watch::channel(false);
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
        let (paddr, primary_server) = serve(&primary, opts.primary_listen).await?;
        let (raddr, replica_server) = serve(&replica, opts.replica_listen).await?;
        let endpoints = Endpoints {
            primary: paddr,
            replica: raddr,
        };
        on_listen(&endpoints);

        // The replica: the applier follows the primary's binlog directory.
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut applier = Applier::new(&replica)?;
        let from = applier.position(1).map_or(1, |p| p.last_seq + 1);
        let mut source = BinlogDirSource::open(&primary.binlog_dir(), from, primary.notifier());
        let applied_seq = Arc::new(AtomicU64::new(from - 1));
        let applied = Arc::clone(&applied_seq);
        let replica_task = tokio::spawn(async move {
            let r = applier
                .run(
                    &mut source,
                    None,
                    false,
                    Duration::from_millis(50),
                    &mut |_, item| applied.store(item.tx.seq, Ordering::Release),
                    &stop_rx,
                )
                .await;
            (applier, r)
        });

        // The TTL purge, as the primary node runs it.
        let purger = opts
            .ttl_secs
            .map(|_| ringrep_server::spawn_ttl_purge(primary.clone()));

        // The table and the workload, through the MySQL protocol: each writer is one client
        // connection sending one prepared INSERT per event.
        let mut admin = connect(paddr, None).await?;
        if primary.table_def("test", "user_events").is_none() {
            admin
                .query_drop(user_events_sql(opts.ring_size, opts.ttl_secs))
                .await
                .context("CREATE TABLE user_events")?;
        }
        let total = opts.users * opts.events_per_user;
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut writers = tokio::task::JoinSet::new();
        for w in 0..opts.writers.max(1) {
            let done = Arc::clone(&done);
            let (users, rate, seed) = (opts.users, opts.rate, opts.seed);
            writers.spawn(async move {
                let mut c = connect(paddr, None).await?;
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
        let seconds = started.elapsed().as_secs_f64();
        if let Some(p) = purger {
            p.abort();
            let _ = p.await;
            let e = primary.clone();
            tokio::task::spawn_blocking(move || e.purge_all(10_000)).await??;
        }

        // Wait for the replica to catch up with everything committed.
        let target = primary.last_seq();
        if opts.progress {
            eprintln!("workload done; waiting for the replica to apply seq {target}");
        }
        let wait_start = Instant::now();
        while applied_seq.load(Ordering::Acquire) < target {
            if replica_task.is_finished() {
                break;
            }
            if wait_start.elapsed() > Duration::from_secs(300) {
                anyhow::bail!(
                    "the replica did not catch up within 300 s (applied {} of {target})",
                    applied_seq.load(Ordering::Acquire)
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        // What a client of each node sees.
        let count = "SELECT COUNT(*) FROM test.user_events";
        let primary_count: u64 = admin.query_first(count).await?.unwrap_or(0);
        let mut reader = connect(raddr, None).await?;
        let replica_count: u64 = reader.query_first(count).await?.unwrap_or(0);
        reader.disconnect().await?;
        admin.disconnect().await?;

        if let Some(wait) = keep_serving {
            wait.await;
        }
        let _ = stop_tx.send(true);
        let (applier, result) = replica_task.await?;
        result.context("the applier stopped with an error")?;
        let _ = stop_servers.send(true);
        primary_server.await??;
        replica_server.await??;

        let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
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
        let (primary_rows, meta_rows) = primary.with_state(|st| {
            st.table("test", "user_events").map_or((0, 0), |t| {
                let meta = t.meta_rows() as u64;
                (t.len() as u64 - meta, meta)
            })
        });
        Ok(DemoSummary {
            inserts: total,
            seconds,
            primary_rows,
            meta_rows,
            overwrites,
            purges,
            primary_seq: target,
            lag: applier.lag.clone(),
            report,
            endpoints,
            client_rows: (primary_count, replica_count),
        })
    })
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
