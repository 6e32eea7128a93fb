//! A replica's figures, the applier in this process following the primary's binlog directory:
//! catching up from a backlog, and lag at a steady insert rate.

use std::path::Path;
use std::time::{Duration, Instant};

use binlog_format::schema::TableDef;
use binlog_format::SyncPolicy;
use ringrep_applier::{Applier, BinlogDirSource};
use ringrep_engine::Engine;

use crate::{insert_row, open};

/// `catchup`: a primary writes `txs` single-row transactions without syncing, then a replica
/// applies them from its binlog directory with durable commits; prints both rates.
pub(crate) fn catchup(dir: &Path, txs: u64) -> anyhow::Result<()> {
    let (primary, def) = open(&dir.join("p"), 1, SyncPolicy::Never, false)?;
    let mut s = primary.session();
    let start = Instant::now();
    for n in 0..txs {
        insert_row(&mut s, &def, n)?;
    }
    let write_secs = start.elapsed().as_secs_f64();
    primary.sync()?;
    let (replica, _) = open(&dir.join("r"), 2, SyncPolicy::EveryCommit, true)?;
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
    println!(
        "catchup: replica applied {last} transactions (durable, group commit) at {:.0} tx/s",
        last as f64 / secs
    );
    Ok(())
}

/// `lag`: replica lag at `rate` inserts/s for `seconds`, durable on both sides, the replica
/// woken by the primary's notifier; prints the median and 99th percentile.
pub(crate) fn lag(dir: &Path, rate: u64, seconds: u64) -> anyhow::Result<()> {
    let (primary, def) = open(&dir.join("p"), 1, SyncPolicy::EveryCommit, false)?;
    let (replica, _) = open(&dir.join("r"), 2, SyncPolicy::EveryCommit, true)?;
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
    Ok(())
}

/// Ring inserts into `primary` at `rate` per second for `seconds`, applied to `replica` from
/// `source` as they come; returns the applier (with its lag figures) once the replica holds
/// the primary's last transaction.
pub(crate) fn steady_rate(
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
        insert_row(&mut s, def, n)?;
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

/// `provision`: a primary holding ROWS rows (in rings of 64, ROWS / 16 prefixes) whose binlog
/// is purged, and a new replica in this process provisioned over the network stream while a
/// writer commits single-row transactions on the primary; prints the provisioning rate and
/// the writer's commit latency before and during it.
pub(crate) fn provision(dir: &Path, rows: u64) -> anyhow::Result<()> {
    use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
    use std::sync::Arc;
    let mut cfg = ringrep_engine::EngineConfig::new(1);
    cfg.sync = SyncPolicy::EveryCommit;
    cfg.snapshot_every = 0;
    cfg.segment_bytes = 1 << 20;
    let (primary, _) = Engine::open(&dir.join("p"), cfg)?;
    primary.session().create_table(crate::table(), true)?;
    let def = primary
        .table_def("test", "user_events")
        .unwrap_or_else(crate::table);
    let prefixes = (rows / 16).max(1);
    crate::engine::batch_writer(&primary, &def, 0, 1, prefixes, rows, 1000)?;
    primary.snapshot()?;
    let last = primary.binlog_segments()?.last().map_or(1, |s| s.number);
    primary.purge_binlogs_to(last, true)?;
    let stored: u64 = primary.with_state(|st| {
        st.table("test", "user_events")
            .map_or(0, |t| t.len() as u64)
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let server = rt.block_on(ringrep_server::Server::bind(
        primary.clone(),
        &ringrep_server::ServerSettings::local(0),
    ))?;
    let addr = server.local_addr()?;
    let (stop_server, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = rt.spawn(server.run(async move {
        let _ = stopped.await;
    }));
    // The writer: one durable autocommit insert after another, each latency tagged with the
    // phase it fell in (0 before provisioning, 1 during, 2 after).
    let phase = Arc::new(AtomicU8::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (primary, def, phase, done) =
            (primary.clone(), def.clone(), phase.clone(), done.clone());
        std::thread::spawn(move || -> anyhow::Result<[Vec<u64>; 3]> {
            let mut s = primary.session();
            let mut lat: [Vec<u64>; 3] = Default::default();
            let mut n = rows;
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                insert_row(&mut s, &def, n)?;
                n += 1;
                lat[usize::from(phase.load(Ordering::Relaxed))]
                    .push(t.elapsed().as_micros() as u64);
            }
            Ok(lat)
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    let mut rcfg = ringrep_engine::EngineConfig::new(2);
    rcfg.read_only = true;
    rcfg.snapshot_every = 0;
    let (replica, _) = Engine::open(&dir.join("r"), rcfg)?;
    let mut applier = Applier::new(&replica)?;
    let mut source = ringrep_applier::NetworkSource::new(
        ringrep_applier::NetworkConfig {
            address: addr.to_string(),
            user: "root".into(),
            password: String::new(),
            replica_id: 2,
            heartbeat: Duration::from_millis(500),
            connect_retry: Duration::from_secs(1),
            tls: None,
            ca_file: None,
        },
        1,
    );
    let (_tx, stop) = tokio::sync::watch::channel(false);
    phase.store(1, Ordering::Relaxed);
    let start = Instant::now();
    // Provisioning ends the run: the first transaction after the snapshot is past until_seq.
    let at = rt.block_on(applier.run(
        &mut source,
        Some(primary.last_seq()),
        false,
        Duration::from_millis(200),
        &mut |_, _| {},
        &stop,
    ))?;
    let secs = start.elapsed().as_secs_f64();
    phase.store(2, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(1));
    done.store(true, Ordering::Relaxed);
    let lat = writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer panicked"))??;
    let _ = stop_server.send(());
    let _ = rt.block_on(served);
    let bytes = primary.snapshot_for_replica()?.2.len();
    let pct = |v: &[u64], p: f64| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v.get(((v.len().saturating_sub(1)) as f64 * p) as usize)
            .map_or(0.0, |us| *us as f64 / 1000.0)
    };
    println!(
        "provision: {stored} rows ({:.0} MiB of snapshot) to a new replica over TCP in {secs:.2} s, to seq {at}: {:.0} rows/s, {:.1} MiB/s",
        bytes as f64 / (1 << 20) as f64,
        stored as f64 / secs,
        bytes as f64 / (1 << 20) as f64 / secs
    );
    for (name, l) in ["before", "during", "after"].iter().zip(&lat) {
        println!(
            "provision: primary commit latency {name}: p50 {:.2} ms, p99 {:.2} ms over {} commits",
            pct(l, 0.5),
            pct(l, 0.99),
            l.len()
        );
    }
    Ok(())
}
