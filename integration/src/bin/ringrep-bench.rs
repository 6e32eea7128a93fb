//! `ringrep-bench`: end-to-end benchmark runs whose figures go in BENCHMARKS.md. Every run
//! prints what it measured and how; none asserts anything.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use binlog_format::schema::TableDef;
use binlog_format::{SyncPolicy, Value};
use clap::{Parser, Subcommand};
use integration::workload::Rng;
use ringrep_applier::verify::{verify, VerifyOptions};
use ringrep_applier::{Applier, BinlogDirSource};
use ringrep_engine::writer::RingWriter;
use ringrep_engine::{Engine, EngineConfig, InsertMode, Session};

#[derive(Parser)]
#[command(
    name = "ringrep-bench",
    about = "ringrep end-to-end benchmarks (figures for BENCHMARKS.md)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The disk's own fsync rate (what durable commits are bounded by).
    Fsync {
        #[arg(long, default_value_t = 2)]
        seconds: u64,
    },
    /// Ring inserts of 150-byte rows into PREFIXES rings of size 64 through the native batch
    /// writer (one transaction per batch of BATCH rows).
    EngineBatch {
        #[arg(long, default_value_t = 10_000)]
        prefixes: u64,
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        #[arg(long, default_value_t = 1000)]
        batch: u64,
        /// Writer threads, each with its own session and its own share of the prefixes
        /// (prefix modulo WRITERS) and of the rows.
        #[arg(long, default_value_t = 1)]
        writers: u64,
    },
    /// How long a writer waits while a snapshot is taken: an exact one (the state's lock held
    /// throughout, as for a backup) against a live one (held a frame of rows at a time, as
    /// for automatic snapshots), after loading ROWS batched inserts.
    SnapshotPause {
        #[arg(long, default_value_t = 3_000_000)]
        rows: u64,
    },
    /// Single-row autocommit inserts from WRITERS concurrent writers with a durable group
    /// commit. Each writer is a task that awaits its commit's durability (the server's path)
    /// on a runtime of THREADS worker threads, or with `--committers threads` a thread that
    /// sleeps in the group commit.
    EngineAutocommit {
        #[arg(long, default_value_t = 64)]
        writers: usize,
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        #[arg(long, default_value = "commit")]
        sync: String,
        #[arg(long, value_enum, default_value = "tasks")]
        committers: Committers,
        /// Worker threads of the runtime the tasks run on (`--committers tasks`).
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
    /// A backlog of TXS ring-insert transactions applied by a replica (durable commits).
    Catchup {
        #[arg(long, default_value_t = 200_000)]
        txs: u64,
    },
    /// Replica lag at a steady insert rate, through the binlog directory (same process).
    Lag {
        #[arg(long, default_value_t = 2000)]
        rate: u64,
        #[arg(long, default_value_t = 5)]
        seconds: u64,
    },
    /// Workload RB-1 side by side against MariaDB and Redis, each with a replica (start the
    /// peers first: integration/bench/peers.sh). Prints Markdown tables for BENCHMARKS.md.
    Peers(Box<PeersArgs>),
    /// The relay's throughput to a broker (a backlog of TXS ring inserts relayed from scratch),
    /// then lag from a primary's commit to a replica fed through Kafka at RATE inserts/s.
    /// Without --brokers, librdkafka's in-process mock cluster stands in for the broker.
    Kafka {
        #[arg(long)]
        brokers: Option<String>,
        #[arg(long, default_value_t = 100_000)]
        txs: u64,
        #[arg(long, default_value_t = 2000)]
        rate: u64,
        #[arg(long, default_value_t = 5)]
        seconds: u64,
    },
    /// The verifier comparing two equal engines of ROWS rows.
    Verify {
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
    },
}

/// How `engine-autocommit`'s writers wait for their commits to become durable.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Committers {
    /// Tasks on a small runtime, each awaiting `Engine::wait_durable_async` (the server's path).
    Tasks,
    /// One thread per writer, sleeping in the group commit (`Session::commit`).
    Threads,
}

#[derive(clap::Args)]
struct PeersArgs {
    /// Systems to run, comma-separated: ringrep, mariadb, redis-always, redis-everysec.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ringrep,mariadb,redis-always,redis-everysec"
    )]
    systems: Vec<integration::peers::SystemKind>,
    /// Concurrent client counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    clients: Vec<usize>,
    #[arg(long, default_value_t = 10_000)]
    prefixes: u64,
    /// Seconds of warm-up before each measured interval.
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Seconds measured per system and client count.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Seconds the replica is paused to build the catch-up backlog.
    #[arg(long, default_value_t = 5)]
    backlog: u64,
    /// Data directory for ringrep's nodes and the fsync probe: the disk the peers use.
    #[arg(long)]
    dir: std::path::PathBuf,
    #[arg(long, default_value = "127.0.0.1:23306")]
    mariadb_primary: std::net::SocketAddr,
    #[arg(long, default_value = "127.0.0.1:23307")]
    mariadb_replica: std::net::SocketAddr,
    #[arg(long, default_value = "127.0.0.1:26379")]
    redis_primary: std::net::SocketAddr,
    #[arg(long, default_value = "127.0.0.1:26380")]
    redis_replica: std::net::SocketAddr,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// The spec's `user_events` table with rings of 64 (payload in column 5).
fn table() -> TableDef {
    integration::workload::user_events(64, None).unwrap_or_else(|e| panic!("bench table: {e}"))
}

/// Position of the payload column in [`table`].
const PAYLOAD: usize = 5;

fn open(
    dir: &Path,
    id: u32,
    sync: SyncPolicy,
    read_only: bool,
) -> anyhow::Result<(Engine, TableDef)> {
    let mut cfg = EngineConfig::new(id);
    cfg.sync = sync;
    cfg.read_only = read_only;
    cfg.snapshot_every = 0;
    let (engine, _) = Engine::open(dir, cfg)?;
    if !read_only {
        engine.session().create_table(table(), true)?;
    }
    let def = engine
        .table_def("test", "user_events")
        .unwrap_or_else(table);
    Ok((engine, def))
}

/// `snapshot-pause`: one autocommit writer records its longest commit while nothing else
/// runs, during an exact snapshot and during a live one.
fn snapshot_pause(dir: &Path, rows: u64) -> anyhow::Result<()> {
    let (engine, def) = open(dir, 1, SyncPolicy::Never, false)?;
    batch_writer(&engine, &def, 0, 1, 10_000, rows, 1000)?;
    let stored = engine.with_state(|st| st.table("test", "user_events").map_or(0, |t| t.len()));
    // Longest commit in microseconds per phase: idle, exact snapshot, live snapshot.
    let phase = AtomicU64::new(0);
    let longest: [AtomicU64; 3] = Default::default();
    let stop = AtomicBool::new(false);
    let shared = Writers::new(engine.clone(), def);
    let mut took = [Duration::ZERO; 2];
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let writer = scope.spawn(|| -> anyhow::Result<()> {
            let mut s = shared.engine.session();
            let mut rng = Rng::new(3);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let start = Instant::now();
                shared.insert(&mut s, &mut rng, n)?;
                let us = start.elapsed().as_micros() as u64;
                longest[phase.load(Ordering::Relaxed) as usize].fetch_max(us, Ordering::Relaxed);
            }
            Ok(())
        });
        for (i, live) in [false, true].into_iter().enumerate() {
            std::thread::sleep(Duration::from_millis(300));
            phase.store(i as u64 + 1, Ordering::Relaxed);
            let start = Instant::now();
            if live {
                engine.snapshot_live()?;
            } else {
                engine.snapshot()?;
            }
            took[i] = start.elapsed();
            phase.store(0, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        writer
            .join()
            .map_err(|_| anyhow::anyhow!("writer panicked"))?
    })?;
    let ms = |us: &AtomicU64| us.load(Ordering::Relaxed) as f64 / 1000.0;
    println!(
        "snapshot-pause: {stored} stored rows; longest commit idle {:.1} ms; exact snapshot {:.0} ms, longest commit during it {:.1} ms; live snapshot {:.0} ms, longest commit during it {:.1} ms",
        ms(&longest[0]),
        took[0].as_secs_f64() * 1000.0,
        ms(&longest[1]),
        took[1].as_secs_f64() * 1000.0,
        ms(&longest[2]),
    );
    Ok(())
}

/// One native writer of `engine-batch`: `rows` rows into prefixes `first`, `first + step`,
/// ... (`prefixes` of them), one transaction per `batch` rows.
fn batch_writer(
    engine: &Engine,
    def: &TableDef,
    first: u64,
    step: u64,
    prefixes: u64,
    rows: u64,
    batch: u64,
) -> anyhow::Result<()> {
    let mut s = engine.session();
    let mut rng = Rng::new(7 + first);
    let prefix = |rng: &mut Rng| (first + rng.below(prefixes.max(1)) * step) as i64;
    // Rows to send, built once: formatting a payload per row was 6% of the run, and the
    // writer copies what it is given anyway. (Payloads are all the same size.)
    let mut pool: Vec<[(usize, Value); 2]> = (0..256)
        .map(|n| [(0, Value::Null), (PAYLOAD, payload(n))])
        .collect();
    let mut done = 0;
    while done < rows {
        s.begin()?;
        let mut w = RingWriter::new(&mut s, def)?;
        let n = batch.min(rows - done);
        // Consecutive rows of one prefix form one batch, as an application sending events
        // per entity would.
        let user = prefix(&mut rng);
        for i in 0..n {
            let u = if i % 8 == 0 { prefix(&mut rng) } else { user };
            let row = &mut pool[((done + i) % 256) as usize];
            row[0].1 = Value::Int(u);
            w.add_row(row)?;
        }
        w.flush()?;
        s.commit()?;
        done += n;
    }
    Ok(())
}

fn payload(n: u64) -> Value {
    Value::Text(integration::peers::payload(n))
}

/// Resident memory of this process in bytes (Linux), for memory-per-row figures.
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let tmp = tempfile::tempdir()?;
    match cli.command {
        Command::Peers(args) => {
            let PeersArgs {
                systems,
                clients,
                prefixes,
                warmup,
                seconds,
                backlog,
                dir,
                mariadb_primary,
                mariadb_replica,
                redis_primary,
                redis_replica,
                json,
            } = *args;
            let exe = std::env::current_exe()?;
            let opts = integration::peers::PeersOptions {
                systems,
                clients,
                warmup: Duration::from_secs(warmup),
                measure: Duration::from_secs(seconds),
                backlog: Duration::from_secs(backlog),
                prefixes,
                dir,
                bin_dir: exe.parent().map(Path::to_path_buf).unwrap_or_default(),
                mariadb: (mariadb_primary, mariadb_replica),
                redis: (redis_primary, redis_replica),
            };
            let report = integration::peers::run(&opts, &mut |line| eprintln!("{line}"))?;
            println!("{}", integration::peers::markdown(&report));
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
            }
        }
        Command::Kafka {
            brokers,
            txs,
            rate,
            seconds,
        } => kafka_bench(tmp.path(), brokers, txs, rate, seconds)?,
        Command::Fsync { seconds } => println!(
            "fsync: {:.0} fsyncs/s (200-byte appends, fdatasync each)",
            integration::peers::fsync_rate(tmp.path(), Duration::from_secs(seconds))?
        ),
        Command::EngineBatch {
            prefixes,
            rows,
            batch,
            writers,
        } => {
            let rss_before = rss_bytes();
            let (engine, def) = open(tmp.path(), 1, SyncPolicy::Never, false)?;
            let writers = writers.clamp(1, prefixes.max(1));
            let start = Instant::now();
            std::thread::scope(|scope| -> anyhow::Result<()> {
                let handles: Vec<_> = (0..writers)
                    .map(|w| {
                        let (engine, def) = (&engine, &def);
                        // Rows split as evenly as they go; prefixes w, w + WRITERS, ...
                        let share = rows / writers + u64::from(w < rows % writers);
                        let mine = prefixes / writers + u64::from(w < prefixes % writers);
                        scope.spawn(move || {
                            batch_writer(engine, def, w, writers, mine, share, batch)
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
                }
                Ok(())
            })?;
            let secs = start.elapsed().as_secs_f64();
            let (stored, encoded): (u64, u64) = engine.with_state(|st| {
                st.table("test", "user_events").map_or((0, 0), |t| {
                    (
                        t.len() as u64,
                        t.stored().map(|r| r.encoded().len() as u64).sum(),
                    )
                })
            });
            println!("engine-batch: {rows} rows into {prefixes} rings of 64 in {secs:.2} s = {:.0} rows/s ({} rows per transaction, {writers} writers)", rows as f64 / secs, batch);
            let grown = rss_bytes().saturating_sub(rss_before);
            println!(
                "stored {stored} rows, {:.0} encoded bytes per row; resident memory grew {:.0} bytes per stored row ({:.2} x encoded)",
                encoded as f64 / stored.max(1) as f64,
                grown as f64 / stored.max(1) as f64,
                grown as f64 / encoded.max(1) as f64
            );
        }
        Command::SnapshotPause { rows } => snapshot_pause(tmp.path(), rows)?,
        Command::EngineAutocommit {
            writers,
            seconds,
            sync,
            committers: Committers::Tasks,
            threads,
        } => {
            let (engine, def) = open(tmp.path(), 1, sync.parse()?, false)?;
            let rate = autocommit_tasks(engine, def, writers, threads, seconds)?;
            println!(
                "engine-autocommit: {writers} writer tasks on {threads} threads, sync={sync}: {rate:.0} commits/s"
            );
        }
        Command::EngineAutocommit {
            writers,
            seconds,
            sync,
            committers: Committers::Threads,
            ..
        } => {
            let (engine, def) = open(tmp.path(), 1, sync.parse()?, false)?;
            let shared = Writers::new(engine, def);
            let handles: Vec<_> = (0..writers)
                .map(|w| {
                    let shared = shared.clone();
                    std::thread::spawn(move || -> anyhow::Result<()> {
                        let mut s = shared.engine.session();
                        let mut rng = Rng::new(w as u64);
                        let mut n = 0;
                        while !shared.stop.load(Ordering::Relaxed) {
                            n += 1;
                            match shared.insert(&mut s, &mut rng, n) {
                                Ok(_) => {
                                    shared.commits.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) if e.is_lock_conflict() => {}
                                Err(e) => return Err(e.into()),
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            let start = Instant::now();
            std::thread::sleep(Duration::from_secs(seconds));
            shared.stop.store(true, Ordering::Relaxed);
            for h in handles {
                h.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
            }
            let secs = start.elapsed().as_secs_f64();
            println!(
                "engine-autocommit: {writers} writer threads, sync={sync}: {:.0} commits/s",
                shared.commits.load(Ordering::Relaxed) as f64 / secs
            );
        }
        Command::Catchup { txs } => {
            let (primary, def) = open(&tmp.path().join("p"), 1, SyncPolicy::Never, false)?;
            let mut s = primary.session();
            let start = Instant::now();
            for n in 0..txs {
                s.statement(|s| {
                    s.insert(
                        &def,
                        &[0, PAYLOAD],
                        vec![vec![Value::Int((n % 10_000) as i64), payload(n)]],
                        InsertMode::Insert,
                    )
                })?;
            }
            let write_secs = start.elapsed().as_secs_f64();
            primary.sync()?;
            let (replica, _) = open(&tmp.path().join("r"), 2, SyncPolicy::EveryCommit, true)?;
            let mut applier = Applier::new(&replica)?;
            let mut source = BinlogDirSource::open(&primary.binlog_dir(), 1, None);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (_tx, stop) = tokio::sync::watch::channel(false);
            let start = Instant::now();
            let last = rt.block_on(applier.run(
                &mut source,
                Some(primary.last_seq()),
                false,
                Duration::from_secs(5),
                &mut |_, _| {},
                &stop,
            ))?;
            let secs = start.elapsed().as_secs_f64();
            println!("catchup: primary wrote {txs} single-writer autocommit transactions (sync never) at {:.0} tx/s", txs as f64 / write_secs);
            println!("catchup: replica applied {last} transactions (durable, group commit) at {:.0} tx/s", last as f64 / secs);
        }
        Command::Lag { rate, seconds } => {
            let (primary, def) = open(&tmp.path().join("p"), 1, SyncPolicy::EveryCommit, false)?;
            let (replica, _) = open(&tmp.path().join("r"), 2, SyncPolicy::EveryCommit, true)?;
            let source = BinlogDirSource::open(&primary.binlog_dir(), 1, primary.notifier());
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()?;
            let applier = steady_rate(
                &rt,
                &primary,
                &def,
                &replica,
                Box::new(source),
                rate,
                seconds,
            )?;
            let ms = |v: Option<i64>| v.map_or(0.0, |us| us as f64 / 1000.0);
            println!(
                "lag: {rate} inserts/s for {seconds} s, durable on both sides: p50 {:.2} ms, p99 {:.2} ms over {} transactions",
                ms(applier.lag.percentile(50.0)),
                ms(applier.lag.percentile(99.0)),
                applier.lag.count()
            );
        }
        Command::Verify { rows } => {
            let (a, def) = open(&tmp.path().join("a"), 1, SyncPolicy::Never, false)?;
            let mut s = a.session();
            let mut done = 0;
            while done < rows {
                s.begin()?;
                let mut w = RingWriter::new(&mut s, &def)?;
                for i in 0..10_000.min(rows - done) {
                    w.add_row(&[
                        (0, Value::Int(((done + i) / 64) as i64)),
                        (PAYLOAD, payload(done + i)),
                    ])?;
                }
                w.flush()?;
                s.commit()?;
                done += 10_000.min(rows - done);
            }
            a.sync()?;
            drop(s);
            drop(a);
            // Copy the data directory: the copy is an exact replica.
            let copy = tmp.path().join("b");
            std::fs::create_dir_all(copy.join("binlog"))?;
            for e in std::fs::read_dir(tmp.path().join("a/binlog"))? {
                let e = e?;
                std::fs::copy(e.path(), copy.join("binlog").join(e.file_name()))?;
            }
            let (p, _) = Engine::open_read_only(&tmp.path().join("a"))?;
            let (r, _) = Engine::open_read_only(&copy)?;
            let start = Instant::now();
            let report = verify(&p, &r, &VerifyOptions::default(), &mut |_| {});
            let secs = start.elapsed().as_secs_f64();
            println!(
                "verify: {} rows compared in {secs:.2} s = {:.0} rows/s, converged: {}",
                report.rows_compared,
                report.rows_compared as f64 / secs,
                report.converged
            );
        }
    }
    Ok(())
}

/// Settings for one phase of the Kafka benchmark, its topics created up front on the mock
/// cluster (which has no CreateTopics).
/// What the autocommit writers share.
#[derive(Clone)]
struct Writers {
    engine: Engine,
    def: TableDef,
    stop: Arc<AtomicBool>,
    commits: Arc<AtomicU64>,
}

impl Writers {
    fn new(engine: Engine, def: TableDef) -> Writers {
        Writers {
            engine,
            def,
            stop: Arc::new(AtomicBool::new(false)),
            commits: Arc::new(AtomicU64::new(0)),
        }
    }

    /// One single-row autocommit insert into one of 10,000 prefixes.
    fn insert(&self, s: &mut Session, rng: &mut Rng, n: u64) -> ringrep_engine::Result<u64> {
        let row = vec![Value::Int(rng.below(10_000) as i64), payload(n)];
        s.statement(|s| s.insert(&self.def, &[0, PAYLOAD], vec![row], InsertMode::Insert))
    }
}

/// Runs `writers` autocommit tasks for `seconds` and returns commits/s. A commit counts once
/// it is durable: the task awaits `wait_durable_async` before its next insert, as a server
/// connection awaits it before replying.
fn autocommit_tasks(
    engine: Engine,
    def: TableDef,
    writers: usize,
    threads: usize,
    seconds: u64,
) -> anyhow::Result<f64> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()?;
    let shared = Writers::new(engine, def);
    rt.block_on(async move {
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let mut s = shared.engine.session();
                    s.defer_durability = true;
                    let mut rng = Rng::new(w as u64);
                    let mut n = 0;
                    while !shared.stop.load(Ordering::Relaxed) {
                        n += 1;
                        match shared.insert(&mut s, &mut rng, n) {
                            Ok(_) => {
                                let lsn = s.take_pending_lsn().ok_or_else(|| {
                                    anyhow::anyhow!("an autocommit insert left nothing to sync")
                                })?;
                                shared.engine.wait_durable_async(lsn).await?;
                                shared.commits.fetch_add(1, Ordering::Relaxed);
                                // Without an fsync to await (sync policy other than every
                                // commit) the task would otherwise never let the others run.
                                tokio::task::consume_budget().await;
                            }
                            // Lock waits end in a retriable error; let the holder run.
                            Err(e) if e.is_lock_conflict() => tokio::task::yield_now().await,
                            Err(e) => return Err(anyhow::Error::from(e)),
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let start = Instant::now();
        // A thread of its own keeps time: the runtime's timer needs an idle worker.
        let timer = Arc::clone(&shared.stop);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(seconds));
            timer.store(true, Ordering::Relaxed);
        });
        for t in tasks {
            t.await??;
        }
        Ok(shared.commits.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64())
    })
}

fn kafka_settings(
    brokers: &str,
    mock: Option<
        &rdkafka::mocking::MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    >,
    phase: &str,
) -> anyhow::Result<ringrep_kafka::KafkaSettings> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let prefix = format!("bench-{phase}-{nanos}");
    if let Some(m) = mock {
        m.create_topic(&format!("{prefix}.replication"), 1, 1)?;
        m.create_topic(&format!("{prefix}.test.user_events"), 6, 1)?;
    }
    Ok(ringrep_kafka::KafkaSettings {
        brokers: brokers.to_string(),
        topic_prefix: prefix,
        partitions: 6,
        replication_factor: 1,
        tombstones: false,
        options: vec![],
    })
}

fn kafka_bench(
    tmp: &Path,
    brokers: Option<String>,
    txs: u64,
    rate: u64,
    seconds: u64,
) -> anyhow::Result<()> {
    use ringrep_relay::Relay;
    let mock = match &brokers {
        Some(_) => None,
        None => Some(rdkafka::mocking::MockCluster::new(1)?),
    };
    let servers = match (&brokers, &mock) {
        (Some(b), _) => b.clone(),
        (None, Some(m)) => m.bootstrap_servers(),
        (None, None) => unreachable!("one of the two is set"),
    };
    let broker_name = if mock.is_some() {
        "librdkafka mock cluster (in process)"
    } else {
        servers.as_str()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    // Throughput: a backlog relayed from scratch.
    let (primary, def) = open(&tmp.join("p1"), 1, SyncPolicy::Never, false)?;
    let mut s = primary.session();
    for n in 0..txs {
        s.statement(|s| {
            s.insert(
                &def,
                &[0, PAYLOAD],
                vec![vec![Value::Int((n % 10_000) as i64), payload(n)]],
                InsertMode::Insert,
            )
        })?;
    }
    primary.sync()?;
    let last = primary.last_seq();
    let settings = kafka_settings(&servers, mock.as_ref(), "throughput")?;
    let relay = Relay::new(settings, &primary.binlog_dir(), None);
    let stats = relay.stats.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let start = Instant::now();
    let task = rt.spawn(relay.run(stop_rx));
    while stats.acked_seq.load(Ordering::Acquire) < last {
        if task.is_finished() {
            rt.block_on(task)??;
            anyhow::bail!("the relay stopped before relaying seq {last}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let secs = start.elapsed().as_secs_f64();
    let _ = stop_tx.send(true);
    rt.block_on(task)??;
    let (t, c) = (
        stats.transactions.load(Ordering::Relaxed),
        stats.change_records.load(Ordering::Relaxed),
    );
    println!("kafka: broker {broker_name}");
    println!(
        "relay throughput: {t} transactions and {c} change records in {secs:.2} s = {:.0} tx/s, {:.0} records/s (startup and topic lookups included)",
        t as f64 / secs,
        (t + c) as f64 / secs
    );
    drop(s);

    // Lag: primary -> relay -> broker -> Kafka source -> replica, durable on both sides.
    let (primary, def) = open(&tmp.join("p2"), 1, SyncPolicy::EveryCommit, false)?;
    let (replica, _) = open(&tmp.join("r2"), 2, SyncPolicy::EveryCommit, true)?;
    let settings = kafka_settings(&servers, mock.as_ref(), "lag")?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let relay = rt.spawn(
        Relay::new(settings.clone(), &primary.binlog_dir(), primary.notifier()).run(stop_rx),
    );
    let k = settings.clone();
    let source = rt.block_on(async {
        tokio::task::spawn_blocking(move || ringrep_applier::KafkaSource::open(&k, 1)).await
    })??;
    let applier = steady_rate(
        &rt,
        &primary,
        &def,
        &replica,
        Box::new(source),
        rate,
        seconds,
    )?;
    let _ = stop_tx.send(true);
    rt.block_on(relay)??;
    let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
    let ms = |v: Option<i64>| v.map_or(0.0, |us| us as f64 / 1000.0);
    println!(
        "lag through Kafka: {rate} inserts/s for {seconds} s, durable on both sides: p50 {:.2} ms, p99 {:.2} ms over {} transactions; converged: {}",
        ms(applier.lag.percentile(50.0)),
        ms(applier.lag.percentile(99.0)),
        applier.lag.count(),
        report.converged
    );
    Ok(())
}

/// Ring inserts into `primary` at `rate` per second for `seconds`, applied to `replica` from
/// `source` as they come; returns the applier (with its lag figures) once the replica holds
/// the primary's last transaction.
fn steady_rate(
    rt: &tokio::runtime::Runtime,
    primary: &Engine,
    def: &TableDef,
    replica: &Engine,
    mut source: Box<dyn ringrep_applier::EventSource>,
    rate: u64,
    seconds: u64,
) -> anyhow::Result<Applier> {
    let mut applier = Applier::new(replica)?;
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let task = rt.spawn(async move {
        let r = applier
            .run(
                source.as_mut(),
                None,
                false,
                Duration::from_millis(20),
                &mut |_, _| {},
                &stop,
            )
            .await;
        (applier, r)
    });
    let mut s = primary.session();
    let start = Instant::now();
    for n in 0..rate * seconds {
        let due = start + Duration::from_secs_f64(n as f64 / rate as f64);
        if let Some(w) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
        s.statement(|s| {
            s.insert(
                def,
                &[0, PAYLOAD],
                vec![vec![Value::Int((n % 10_000) as i64), payload(n)]],
                InsertMode::Insert,
            )
        })?;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while ringrep_applier::applier::read_position(replica, 1).map_or(0, |p| p.last_seq)
        < primary.last_seq()
    {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the replica did not catch up within 120 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = stop_tx.send(true);
    let (applier, r) = rt.block_on(task)?;
    r?;
    Ok(applier)
}
