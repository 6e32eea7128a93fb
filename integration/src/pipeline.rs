//! The local pipeline the demo runs: a primary engine under a workload, a TTL purge, a replica
//! that follows the primary's binlog directory through the applier, and the verifier.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use binlog_format::{BinlogReader, Cause, Event, ReaderOptions, Record, SyncPolicy};
use ringrep_applier::applier::LagStats;
use ringrep_applier::verify::{verify, Report, VerifyOptions};
use ringrep_applier::{Applier, BinlogDirSource};
use ringrep_source::{Engine, EngineConfig};

use crate::workload::{insert_event, user_events, Rng};

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
}

impl DemoSummary {
    pub fn text(&self) -> String {
        let ms =
            |v: Option<i64>| v.map_or("-".into(), |us| format!("{:.2} ms", us as f64 / 1000.0));
        format!(
            "inserts:        {}\nthroughput:     {:.0} inserts/s over {:.2} s\nrows on primary: {} data rows, {} meta rows\noverwrites:     {} (logged as row writes)\nTTL purges:     {} (logged as row deletes)\nbinlog:         {} transactions\nreplica lag:    p50 {}, p99 {} over {} transactions\nverification:   {}\n",
            self.inserts,
            self.inserts as f64 / self.seconds.max(1e-9),
            self.seconds,
            self.primary_rows,
            self.meta_rows,
            self.overwrites,
            self.purges,
            self.primary_seq,
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

/// Runs the whole demo and returns its summary.
pub fn run_demo(opts: &DemoOptions) -> anyhow::Result<DemoSummary> {
    let primary = open_primary(&opts.data_dir.join("primary"), opts.sync)?;
    let replica = open_replica(&opts.data_dir.join("replica"), opts.sync)?;
    let mut s = primary.session();
    let def = match primary.table_def("test", "user_events") {
        Some(d) => d,
        None => {
            s.create_table(user_events(opts.ring_size, opts.ttl_secs)?, false)?;
            primary
                .table_def("test", "user_events")
                .context("user_events missing after CREATE")?
        }
    };

    // The replica: the applier follows the primary's binlog directory on its own thread.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut applier = Applier::new(&replica)?;
    let from = applier.position(1).map_or(1, |p| p.last_seq + 1);
    let mut source = BinlogDirSource::open(&primary.binlog_dir(), from, primary.notifier());
    let applied_seq = Arc::new(AtomicU64::new(from - 1));
    let applied = Arc::clone(&applied_seq);
    let replica_task = runtime.spawn(async move {
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

    // The TTL purge, as the node runs it.
    let purging = Arc::new(AtomicBool::new(opts.ttl_secs.is_some()));
    let purger = {
        let (engine, purging) = (primary.clone(), Arc::clone(&purging));
        std::thread::spawn(move || -> ringrep_source::Result<()> {
            while purging.load(Ordering::Acquire) {
                engine.purge_all(100)?;
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(())
        })
    };

    // The workload: writers insert one event at a time for random users.
    let total = opts.users * opts.events_per_user;
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let writers: Vec<_> = (0..opts.writers.max(1))
        .map(|w| {
            let (engine, def, done) = (primary.clone(), def.clone(), Arc::clone(&done));
            let (users, rate, writers, seed) =
                (opts.users, opts.rate, opts.writers.max(1) as u64, opts.seed);
            std::thread::spawn(move || -> ringrep_source::Result<()> {
                let mut s = engine.session();
                let mut rng = Rng::new(seed.wrapping_add(w as u64));
                loop {
                    let n = done.fetch_add(1, Ordering::AcqRel);
                    if n >= total {
                        return Ok(());
                    }
                    if rate > 0 {
                        let due = started + Duration::from_secs_f64(n as f64 / rate as f64);
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                    }
                    let user = rng.below(users) as i64;
                    let _ = writers;
                    insert_event(&mut s, &def, user, n)?;
                }
            })
        })
        .collect();
    let mut last_print = Instant::now();
    while writers.iter().any(|w| !w.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
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
    for w in writers {
        w.join()
            .map_err(|_| anyhow::anyhow!("a writer thread panicked"))??;
    }
    if opts.progress {
        eprintln!(
            "  {total}/{total} inserts (100%), primary seq {}, replica applied {}",
            primary.last_seq(),
            applied_seq.load(Ordering::Acquire)
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    purging.store(false, Ordering::Release);
    purger
        .join()
        .map_err(|_| anyhow::anyhow!("the purge thread panicked"))??;
    if opts.ttl_secs.is_some() {
        primary.purge_all(10_000)?;
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
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = stop_tx.send(true);
    let (applier, result) = runtime.block_on(replica_task)?;
    result.context("the applier stopped with an error")?;

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
            let meta = t.rows.keys().filter(|k| t.is_meta_key(k)).count() as u64;
            (t.rows.len() as u64 - meta, meta)
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
    })
}
