//! `retention-soak`: a primary's disk use under a steady write load with binlog retention on,
//! applied every 10 s as the server's retention task does. Prints the binlog's and the
//! snapshots' size over time; with retention working they stay flat while the transactions
//! written grow without bound.

use std::path::Path;
use std::time::{Duration, Instant};

use binlog_format::{SyncPolicy, Value};
use ringrep_engine::{Engine, EngineConfig, InsertMode, Retention};

use crate::engine::rss_bytes;

/// Bytes in the files directly under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The soak's settings.
pub(crate) struct Soak {
    pub(crate) minutes: u64,
    pub(crate) rate: u64,
    pub(crate) prefixes: u64,
    pub(crate) segment_bytes: u64,
    pub(crate) retention_bytes: u64,
    pub(crate) sync: String,
}

pub(crate) fn retention_soak(dir: &Path, soak: &Soak) -> anyhow::Result<()> {
    let mut cfg = EngineConfig::new(1);
    cfg.sync = soak.sync.parse::<SyncPolicy>()?;
    cfg.segment_bytes = soak.segment_bytes;
    cfg.retention = Retention {
        expire: None,
        max_bytes: Some(soak.retention_bytes),
        hard_cap_bytes: Some(soak.retention_bytes * 2),
    };
    let (engine, _) = Engine::open(dir, cfg)?;
    let mut s = engine.session();
    s.create_table(super::table(), true)?;
    let def = engine
        .table_def("test", "user_events")
        .unwrap_or_else(super::table);
    println!(
        "retention-soak: {} min at {} inserts/s into {} rings of 64, --sync {}, segments of {} KiB, retention {} MiB (hard cap {} MiB), snapshot every {} transactions",
        soak.minutes,
        soak.rate,
        soak.prefixes,
        soak.sync,
        soak.segment_bytes >> 10,
        soak.retention_bytes >> 20,
        (soak.retention_bytes * 2) >> 20,
        engine.config().snapshot_every
    );
    println!("| minute | transactions | binlog MiB | segments | snapshots MiB | resident MiB | segments purged |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let start = Instant::now();
    let end = start + Duration::from_secs(soak.minutes * 60);
    let mut next_retention = start + Duration::from_secs(10);
    let mut next_report = start;
    let mut n: u64 = 0;
    let mut peak_binlog = [0u64; 2];
    let report = |engine: &Engine, n: u64| -> anyhow::Result<u64> {
        let binlog = dir_bytes(&engine.binlog_dir());
        let snaps = dir_bytes(&dir.join("snapshots"));
        println!(
            "| {:.1} | {n} | {:.1} | {} | {:.1} | {:.0} | {} |",
            start.elapsed().as_secs_f64() / 60.0,
            binlog as f64 / (1 << 20) as f64,
            engine.binlog_segments()?.len(),
            snaps as f64 / (1 << 20) as f64,
            rss_bytes() as f64 / (1 << 20) as f64,
            engine.purged_segments()
        );
        Ok(binlog)
    };
    while Instant::now() < end {
        // Paced: row n is due at n / rate seconds.
        let due = start + Duration::from_secs_f64(n as f64 / soak.rate as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        s.statement(|s| {
            s.insert(
                &def,
                &[0, super::PAYLOAD],
                vec![vec![
                    Value::Int((n % soak.prefixes) as i64),
                    super::payload(n),
                ]],
                InsertMode::Insert,
            )
        })?;
        n += 1;
        let now = Instant::now();
        if now >= next_retention {
            engine.enforce_retention(&engine.config().retention, None)?;
            next_retention = now + Duration::from_secs(10);
        }
        if now >= next_report {
            let b = report(&engine, n)?;
            let half = usize::from(now.duration_since(start) * 2 >= end.duration_since(start));
            peak_binlog[half] = peak_binlog[half].max(b);
            next_report = now + Duration::from_secs(30);
        }
    }
    let b = report(&engine, n)?;
    peak_binlog[1] = peak_binlog[1].max(b);
    let written = engine.last_seq();
    println!(
        "retention-soak: {written} transactions; binlog peak {:.1} MiB in the first half, {:.1} MiB in the second (retention {} MiB); {} segments purged",
        peak_binlog[0] as f64 / (1 << 20) as f64,
        peak_binlog[1] as f64 / (1 << 20) as f64,
        soak.retention_bytes >> 20,
        engine.purged_segments()
    );
    Ok(())
}
