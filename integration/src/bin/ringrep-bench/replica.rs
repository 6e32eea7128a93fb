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
