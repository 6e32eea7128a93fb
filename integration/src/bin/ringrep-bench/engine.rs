//! The engine's own figures, in this process: batch inserts through the native writer,
//! autocommit inserts with a durable group commit, a writer's pause during snapshots, and the
//! verifier's speed.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use binlog_format::schema::TableDef;
use binlog_format::{SyncPolicy, Value};
use integration::workload::Rng;
use ringrep_applier::verify::{verify, VerifyOptions};
use ringrep_engine::writer::RingWriter;
use ringrep_engine::{Engine, InsertMode, Session};

use crate::{open, payload, Committers, PAYLOAD};

/// `engine-batch`: `rows` rows into `prefixes` rings through `writers` native batch writers,
/// one transaction per `batch` rows; prints rows/s, the encoded size of a stored row and how
/// much resident memory grew per stored row.
pub(crate) fn engine_batch(
    dir: &Path,
    prefixes: u64,
    rows: u64,
    batch: u64,
    writers: u64,
) -> anyhow::Result<()> {
    let rss_before = rss_bytes();
    let (engine, def) = open(dir, 1, SyncPolicy::Never, false)?;
    let writers = writers.clamp(1, prefixes.max(1));
    let start = Instant::now();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let (engine, def) = (&engine, &def);
                // Rows split as evenly as they go; prefixes w, w + WRITERS, ...
                let share = rows / writers + u64::from(w < rows % writers);
                let mine = prefixes / writers + u64::from(w < prefixes % writers);
                scope.spawn(move || batch_writer(engine, def, w, writers, mine, share, batch))
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
    Ok(())
}

/// One native writer of `engine-batch`: `rows` rows into prefixes `first`, `first + step`,
/// ... (`prefixes` of them), one transaction per `batch` rows.
pub(crate) fn batch_writer(
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

/// Resident memory of this process in bytes (Linux), for memory-per-row figures.
pub(crate) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// `snapshot-pause`: one autocommit writer records its longest commit while nothing else
/// runs, during an exact snapshot and during a live one.
pub(crate) fn snapshot_pause(dir: &Path, rows: u64) -> anyhow::Result<()> {
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

/// `engine-autocommit`: single-row autocommit inserts from `writers` writers for `seconds`,
/// with sync policy `sync`, waiting for durability as `committers` says; prints commits/s.
pub(crate) fn engine_autocommit(
    dir: &Path,
    writers: usize,
    seconds: u64,
    sync: &str,
    committers: Committers,
    threads: usize,
) -> anyhow::Result<()> {
    let (engine, def) = open(dir, 1, sync.parse()?, false)?;
    match committers {
        Committers::Tasks => {
            let rate = autocommit_tasks(engine, def, writers, threads, seconds)?;
            println!(
                "engine-autocommit: {writers} writer tasks on {threads} threads, sync={sync}: {rate:.0} commits/s"
            );
        }
        Committers::Threads => {
            let rate = autocommit_threads(engine, def, writers, seconds)?;
            println!(
                "engine-autocommit: {writers} writer threads, sync={sync}: {rate:.0} commits/s"
            );
        }
    }
    Ok(())
}

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

/// Runs `writers` autocommit threads for `seconds` and returns commits/s. Each thread sleeps
/// in the group commit (`Session::commit`) until its commit is durable.
fn autocommit_threads(
    engine: Engine,
    def: TableDef,
    writers: usize,
    seconds: u64,
) -> anyhow::Result<f64> {
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
    Ok(shared.commits.load(Ordering::Relaxed) as f64 / secs)
}

/// `verify`: the verifier comparing an engine of `rows` rows (64 per prefix, written in
/// transactions of 10,000) with an exact copy of its data directory; prints rows/s.
pub(crate) fn verify_bench(dir: &Path, rows: u64) -> anyhow::Result<()> {
    let (a, def) = open(&dir.join("a"), 1, SyncPolicy::Never, false)?;
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
    let copy = dir.join("b");
    std::fs::create_dir_all(copy.join("binlog"))?;
    for e in std::fs::read_dir(dir.join("a/binlog"))? {
        let e = e?;
        std::fs::copy(e.path(), copy.join("binlog").join(e.file_name()))?;
    }
    let (p, _) = Engine::open_read_only(&dir.join("a"))?;
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
    Ok(())
}
