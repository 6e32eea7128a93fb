//! `ringrep-bench scale`: what a primary costs as its data grows (issue 50, item 3).
//!
//! For each size, a fresh `ringrep-source serve` process (the release binary beside this one)
//! is loaded with that many rows of ~200 bytes into one ring table with rings of [`RING`]
//! (one prefix per ring, at most [`MAX_PREFIXES`]) by multi-row INSERTs over several
//! connections, as `peers` fills its rings. Then, in this order, each step on the state the
//! one before left:
//!
//! 1. resident memory (VmRSS from /proc) after the load;
//! 2. a restart that replays the whole binlog (no snapshot exists yet): the time from SIGTERM's
//!    exit to the node answering a query, and its memory afterwards;
//! 3. a snapshot on demand: `FLUSH BINARY LOGS` then `PURGE BINARY LOGS TO` the new segment,
//!    which takes a live snapshot first because recovery would otherwise need the segments
//!    (the PURGE's time is the snapshot's); its file's size is the rows' encoded size;
//! 4. a restart from that snapshot (the binlog after it is empty), and memory afterwards;
//! 5. a new `ringrep-applier serve` replica from empty: the primary's binlog is purged, so it
//!    is provisioned with a snapshot over its replication connection; timed until it shows a
//!    row written just before it started, while one client commits durable single-row writes
//!    on the primary (their latency before and during);
//! 6. `ringrep-applier verify` over both running nodes, as a user runs it;
//! 7. RB-1's operation (`peers`: a durable single-row insert into a random ring, prepared,
//!    one connection per client) from `clients` clients over all the rings, with the replica
//!    attached: ops/s, CPU per operation of both processes, lag.
//!
//! The report is printed as Markdown and, on request, written as JSON and CSV. Goals are
//! reported against, never asserted.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use mysql_async::prelude::Queryable;

use crate::peers::{self, Target};
use integration::workload::Rng;

/// Rows per ring.
pub(crate) const RING: u64 = 10;
/// The most rings the load writes; beyond `RING × MAX_PREFIXES` rows, rings overwrite.
pub(crate) const MAX_PREFIXES: u64 = 1_000_000;
/// The table loaded and written.
const TABLE: &str = "test.scale";
/// Payload bytes of a loaded row: with its key, slot, timestamp and the engine's framing, a
/// stored row of about 200 bytes.
const PAYLOAD_LEN: usize = 170;
/// Rows per INSERT statement of the load (a transaction of ~200 KB of binlog).
const BATCH_ROWS: u64 = 1000;
/// Connections loading at once: enough to keep the server's two cores busy while the client
/// builds the next statements.
const LOADERS: usize = 4;

/// What `scale` runs.
#[derive(Debug, Clone)]
pub(crate) struct ScaleOptions {
    /// Rows to load, one run per size, in this order.
    pub(crate) sizes: Vec<u64>,
    /// Data directories of the nodes go here (each size's removed before it starts).
    pub(crate) dir: PathBuf,
    /// The replica's data directories go here instead, when given (another disk: a replica
    /// on a machine of its own).
    pub(crate) replica_dir: Option<PathBuf>,
    /// Where `ringrep-source` and `ringrep-applier` are.
    pub(crate) bin_dir: PathBuf,
    /// Clients of the workload step.
    pub(crate) clients: usize,
    /// Warm-up before the workload's measured interval.
    pub(crate) warmup: Duration,
    /// The workload's measured interval.
    pub(crate) measure: Duration,
    /// Run the verifier step. Over both servers it holds a few pages of each; with `--live`
    /// it holds both nodes' copies (at 10 M rows more than this machine has to spare).
    pub(crate) verify: bool,
    /// Run `verify --live` in the verifier step.
    pub(crate) verify_live: bool,
}

/// Rings a load of `rows` rows fills.
pub(crate) fn prefixes(rows: u64) -> u64 {
    rows.div_ceil(RING).clamp(1, MAX_PREFIXES)
}

/// Rows a table holds after a load of `rows` (rings overwrite past `RING` rows each).
pub(crate) fn stored_rows(rows: u64) -> u64 {
    rows.min(prefixes(rows) * RING)
}

/// Everything measured at one size.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct SizeReport {
    /// Rows inserted by the load, rows the table then holds, and its rings.
    pub(crate) rows: u64,
    pub(crate) stored_rows: u64,
    pub(crate) prefixes: u64,
    pub(crate) load_secs: f64,
    pub(crate) load_rows_per_sec: f64,
    /// The binlog's size after the load.
    pub(crate) binlog_bytes: u64,
    /// Resident memory of the primary, bytes: started and empty, after the load, after the
    /// restart replaying the binlog, after the restart from the snapshot.
    pub(crate) rss_empty: u64,
    pub(crate) rss_loaded: u64,
    pub(crate) rss_restarted_binlog: u64,
    pub(crate) rss_restarted_snapshot: u64,
    /// The snapshot file: the state's encoded size (data rows and one meta row per ring).
    pub(crate) snapshot_bytes: u64,
    /// The PURGE that took the snapshot.
    pub(crate) snapshot_secs: f64,
    /// SIGTERM to exit (a clean stop syncs the binlog).
    pub(crate) stop_secs: f64,
    /// Start to the first query answered: replaying the whole binlog, then from the snapshot.
    pub(crate) restart_binlog_secs: f64,
    pub(crate) restart_snapshot_secs: f64,
    /// A new replica from start to showing the row written before it started.
    pub(crate) provision_secs: f64,
    pub(crate) provision_rows_per_sec: f64,
    /// One client's durable commits on the primary, ms: before the replica started, then
    /// while it was provisioned.
    pub(crate) commit_p50_before_ms: f64,
    pub(crate) commit_p99_before_ms: f64,
    pub(crate) commit_p50_during_ms: f64,
    pub(crate) commit_p99_during_ms: f64,
    /// Resident memory of the primary and the replica once the replica is provisioned, after
    /// the verifier read both (through SELECT, then also with `--live`), and after the
    /// workload step.
    pub(crate) rss_primary_provisioned: u64,
    pub(crate) rss_replica_provisioned: u64,
    pub(crate) rss_primary_verified_select: u64,
    pub(crate) rss_replica_verified_select: u64,
    pub(crate) rss_primary_verified: u64,
    pub(crate) rss_replica_verified: u64,
    pub(crate) rss_primary_end: u64,
    pub(crate) rss_replica_end: u64,
    /// `ringrep-applier verify` over both servers: the whole command, and the time it
    /// reports (reading and comparing, which run at once since the verifier streams both
    /// nodes a page at a time; before, the comparison alone after reading both whole).
    pub(crate) verify_secs: f64,
    pub(crate) verify_compare_secs: f64,
    pub(crate) verify_rows: u64,
    pub(crate) verify_rows_per_sec: f64,
    pub(crate) verify_compare_rows_per_sec: f64,
    pub(crate) verify_converged: bool,
    /// The same with `--live` (each node read through its replication stream).
    pub(crate) verify_live_secs: f64,
    pub(crate) verify_live_compare_secs: f64,
    pub(crate) verify_live_rows_per_sec: f64,
    pub(crate) verify_live_converged: bool,
    /// RB-1's operation from `clients` clients over all the rings.
    pub(crate) clients: usize,
    pub(crate) ops_per_sec: f64,
    pub(crate) op_p99_ms: f64,
    pub(crate) cpu_primary_us: f64,
    pub(crate) cpu_replica_us: f64,
    pub(crate) lag_p99_ms: f64,
}

impl SizeReport {
    /// Encoded bytes per stored row (the snapshot over the rows).
    pub(crate) fn encoded_per_row(&self) -> f64 {
        self.snapshot_bytes as f64 / self.stored_rows.max(1) as f64
    }

    /// Resident bytes per stored row, from a resident size.
    pub(crate) fn rss_per_row(&self, rss: u64) -> f64 {
        rss as f64 / self.stored_rows.max(1) as f64
    }

    /// A resident size against the encoded rows: 1.0 when memory holds exactly the snapshot.
    pub(crate) fn memory_ratio(&self, rss: u64) -> f64 {
        rss as f64 / self.snapshot_bytes.max(1) as f64
    }

    /// The same without what the node held empty (its code, buffers and runtime), which
    /// dominates small sizes.
    pub(crate) fn net_memory_ratio(&self, rss: u64) -> f64 {
        rss.saturating_sub(self.rss_empty) as f64 / self.snapshot_bytes.max(1) as f64
    }
}

/// One of the goals, as the run measured it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Goal {
    pub(crate) goal: String,
    pub(crate) met: bool,
    pub(crate) measured: String,
}

/// The goals against `sizes` (in the order run): memory ≤ 2× the encoded rows (after a
/// restart, at every size), restart of 10 M rows ≤ 10 s (the largest size, whatever it is:
/// said so when it is smaller), provisioning ≥ 1 M rows/s with the commit p99 during it ≤ 2×
/// before, verification ≥ 3 M rows/s, and ops/s and CPU/op at the largest size within 10% of
/// the smallest.
pub(crate) fn goals(sizes: &[SizeReport]) -> Vec<Goal> {
    let mut out = Vec::new();
    let (Some(small), Some(large)) = (sizes.first(), sizes.last()) else {
        return out;
    };
    for s in sizes {
        let ratio = s.memory_ratio(s.rss_restarted_snapshot);
        out.push(Goal {
            goal: format!("memory ≤ 2× the encoded rows at {} rows", s.rows),
            met: ratio <= 2.0,
            measured: format!(
                "{ratio:.2}× after a restart ({:.2}× without the empty node's {} MiB), {:.2}× after the load",
                s.net_memory_ratio(s.rss_restarted_snapshot),
                s.rss_empty >> 20,
                s.memory_ratio(s.rss_loaded)
            ),
        });
    }
    let restart = large.restart_binlog_secs.max(large.restart_snapshot_secs);
    out.push(Goal {
        goal: format!(
            "restart ≤ 10 s at 10 M rows (largest run: {} rows)",
            large.rows
        ),
        met: large.restart_snapshot_secs <= 10.0 && large.rows >= 10_000_000,
        measured: format!(
            "{:.2} s from the snapshot, {:.2} s replaying the binlog (slowest {restart:.2} s)",
            large.restart_snapshot_secs, large.restart_binlog_secs
        ),
    });
    for s in sizes {
        out.push(Goal {
            goal: format!("provisioning ≥ 1 M rows/s at {} rows", s.rows),
            met: s.provision_rows_per_sec >= 1e6,
            measured: format!("{:.0} rows/s", s.provision_rows_per_sec),
        });
        out.push(Goal {
            goal: format!(
                "commit p99 during provisioning ≤ 2× without at {} rows",
                s.rows
            ),
            met: s.commit_p99_during_ms <= 2.0 * s.commit_p99_before_ms,
            measured: format!(
                "{:.2} ms during, {:.2} ms before ({:.1}×)",
                s.commit_p99_during_ms,
                s.commit_p99_before_ms,
                s.commit_p99_during_ms / s.commit_p99_before_ms.max(f64::MIN_POSITIVE)
            ),
        });
        if s.verify_rows == 0 {
            // The verifier step did not run (`--no-verify`).
            continue;
        }
        out.push(Goal {
            goal: format!("verification ≥ 3 M rows/s at {} rows", s.rows),
            met: s.verify_rows_per_sec.max(s.verify_live_rows_per_sec) >= 3e6,
            measured: format!(
                "{:.0} rows/s over both servers, {} ({:.0} rows/s comparing alone)",
                s.verify_rows_per_sec,
                if s.verify_live_rows_per_sec > 0.0 {
                    format!("{:.0} with --live", s.verify_live_rows_per_sec)
                } else {
                    "--live not run".to_string()
                },
                s.verify_compare_rows_per_sec
            ),
        });
    }
    if sizes.len() > 1 {
        let ops = large.ops_per_sec / small.ops_per_sec.max(f64::MIN_POSITIVE);
        let cpu = large.cpu_primary_us / small.cpu_primary_us.max(f64::MIN_POSITIVE);
        out.push(Goal {
            goal: format!(
                "ops/s and primary CPU/op at {} rows within 10% of {} rows",
                large.rows, small.rows
            ),
            met: (0.9..=1.1).contains(&ops) && (0.9..=1.1).contains(&cpu),
            measured: format!("ops/s {ops:.2}×, CPU/op {cpu:.2}×"),
        });
    }
    out
}

/// Runs every size of `opts`; `progress` gets a line whenever a step starts or ends.
pub(crate) fn run(
    opts: &ScaleOptions,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<Vec<SizeReport>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut out = Vec::new();
    for &rows in &opts.sizes {
        let dir = opts.dir.join(format!("scale-{rows}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let replica_data = match &opts.replica_dir {
            Some(d) => d.join(format!("scale-{rows}-replica")),
            None => dir.join("replica"),
        };
        if replica_data.exists() {
            std::fs::remove_dir_all(&replica_data)?;
        }
        let mut nodes = Nodes {
            dir: dir.clone(),
            replica_data: replica_data.clone(),
            bin_dir: opts.bin_dir.clone(),
            primary: None,
            replica: None,
            starts: 0,
        };
        let r = rt.block_on(one_size(opts, rows, &mut nodes, progress));
        nodes.stop_all();
        let report = r.with_context(|| {
            format!(
                "scale run of {rows} rows (the nodes' logs: {}/*.log)",
                dir.display()
            )
        })?;
        out.push(report);
        // The next size needs the disk space more than this one's data is worth; the nodes'
        // logs stay, to look into afterwards (snapshots taken, provisioning's own figures).
        for data in [dir.join("primary"), replica_data] {
            if data.exists() {
                std::fs::remove_dir_all(data)?;
            }
        }
    }
    Ok(out)
}

/// The node processes of one size.
struct Nodes {
    dir: PathBuf,
    /// The replica's data directory.
    replica_data: PathBuf,
    bin_dir: PathBuf,
    primary: Option<(Child, SocketAddr)>,
    replica: Option<(Child, SocketAddr)>,
    /// Primary starts so far, to name each start's log.
    starts: u32,
}

impl Nodes {
    /// Starts the primary; returns its address once it answers a query.
    async fn start_primary(&mut self) -> anyhow::Result<SocketAddr> {
        self.starts += 1;
        let mut cmd = Command::new(self.bin_dir.join("ringrep-source"));
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(self.dir.join("primary"))
            .args(["--listen", "127.0.0.1:0"]);
        let log = self.dir.join(format!("primary-{}.log", self.starts));
        let (child, addr) = peers::spawn_node(cmd, "listening on ", &log)?;
        self.primary = Some((child, addr));
        let mut c = connect(addr).await?;
        c.query_drop("SELECT 1").await?;
        Ok(addr)
    }

    /// Stops the primary cleanly (SIGTERM); returns how long it took to exit.
    fn stop_primary(&mut self) -> anyhow::Result<Duration> {
        let (mut child, _) = self
            .primary
            .take()
            .ok_or_else(|| anyhow!("no primary running"))?;
        let t = Instant::now();
        peers::signal(child.id(), "TERM")?;
        let status = child.wait()?;
        if !status.success() {
            bail!("the primary exited with {status}");
        }
        Ok(t.elapsed())
    }

    fn primary_pid(&self) -> anyhow::Result<u32> {
        self.primary
            .as_ref()
            .map(|(c, _)| c.id())
            .ok_or_else(|| anyhow!("no primary running"))
    }

    /// Stops whatever still runs, replica first (after an error too).
    fn stop_all(&mut self) {
        for (mut child, _) in [self.replica.take(), self.primary.take()]
            .into_iter()
            .flatten()
        {
            let _ = peers::signal(child.id(), "TERM");
            let _ = child.wait();
        }
    }
}

async fn one_size(
    opts: &ScaleOptions,
    rows: u64,
    nodes: &mut Nodes,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<SizeReport> {
    let prefixes = prefixes(rows);
    let mut r = SizeReport {
        rows,
        stored_rows: stored_rows(rows),
        prefixes,
        clients: opts.clients,
        ..SizeReport::default()
    };
    let mut addr = nodes.start_primary().await?;
    r.rss_empty = rss(nodes.primary_pid()?)?;
    connect(addr).await?.query_drop(create_table()).await?;

    progress(&format!(
        "{rows} rows: loading into {prefixes} rings of {RING}"
    ));
    let t = Instant::now();
    load(addr, rows, prefixes, progress).await?;
    r.load_secs = t.elapsed().as_secs_f64();
    r.load_rows_per_sec = rows as f64 / r.load_secs;
    r.rss_loaded = rss(nodes.primary_pid()?)?;
    r.binlog_bytes = dir_bytes(&nodes.dir.join("primary/binlog"))?;
    progress(&format!(
        "  loaded in {:.1} s ({:.0} rows/s), {} MiB resident, {} MiB of binlog",
        r.load_secs,
        r.load_rows_per_sec,
        r.rss_loaded >> 20,
        r.binlog_bytes >> 20
    ));

    progress("  restart replaying the binlog");
    r.stop_secs = nodes.stop_primary()?.as_secs_f64();
    let t = Instant::now();
    addr = nodes.start_primary().await?;
    r.restart_binlog_secs = t.elapsed().as_secs_f64();
    r.rss_restarted_binlog = rss(nodes.primary_pid()?)?;
    progress(&format!(
        "  stopped in {:.2} s, served again after {:.2} s, {} MiB resident",
        r.stop_secs,
        r.restart_binlog_secs,
        r.rss_restarted_binlog >> 20
    ));

    progress("  snapshot (FLUSH BINARY LOGS, PURGE BINARY LOGS TO the new segment)");
    r.snapshot_secs = snapshot(addr).await?.as_secs_f64();
    r.snapshot_bytes = newest_snapshot_bytes(&nodes.dir.join("primary/snapshots"))?;
    progress(&format!(
        "  snapshot of {} MiB in {:.2} s",
        r.snapshot_bytes >> 20,
        r.snapshot_secs
    ));

    progress("  restart from the snapshot");
    nodes.stop_primary()?;
    let t = Instant::now();
    addr = nodes.start_primary().await?;
    r.restart_snapshot_secs = t.elapsed().as_secs_f64();
    r.rss_restarted_snapshot = rss(nodes.primary_pid()?)?;
    progress(&format!(
        "  served again after {:.2} s, {} MiB resident",
        r.restart_snapshot_secs,
        r.rss_restarted_snapshot >> 20
    ));

    progress("  provisioning a new replica");
    let raddr = provision(opts, nodes, addr, prefixes, &mut r).await?;
    progress(&format!(
        "  provisioned in {:.2} s ({:.0} rows/s); commit p99 {:.2} ms before, {:.2} ms during",
        r.provision_secs, r.provision_rows_per_sec, r.commit_p99_before_ms, r.commit_p99_during_ms
    ));

    let replica_pid = nodes
        .replica
        .as_ref()
        .map(|(c, _)| c.id())
        .ok_or_else(|| anyhow!("no replica running"))?;
    let mut target = Target::ringrep(
        (addr, nodes.primary_pid()?),
        (raddr, replica_pid),
        TABLE,
        prefixes,
    );
    target.wait_replica().await?;
    r.rss_primary_provisioned = rss(nodes.primary_pid()?)?;
    r.rss_replica_provisioned = rss(replica_pid)?;
    if opts.verify {
        verify_both(opts, nodes, (addr, raddr), replica_pid, &mut r, progress)?;
    }

    progress(&format!("  RB-1 from {} clients", opts.clients));
    let popts = peers::PeersOptions {
        systems: vec![peers::SystemKind::Ringrep],
        clients: vec![opts.clients],
        warmup: opts.warmup,
        measure: opts.measure,
        backlog: Duration::ZERO,
        prefixes,
        dir: nodes.dir.clone(),
        bin_dir: opts.bin_dir.clone(),
        mariadb: (unused_addr(), unused_addr()),
        redis: (unused_addr(), unused_addr()),
        ringrep_network: true,
    };
    let m = target.measure(&popts, opts.clients).await?;
    r.ops_per_sec = m.ops_per_sec;
    r.op_p99_ms = m.op_p99_ms;
    r.cpu_primary_us = m.cpu_primary_us;
    r.cpu_replica_us = m.cpu_replica_us;
    r.lag_p99_ms = m.lag_p99_ms;
    r.rss_primary_end = rss(nodes.primary_pid()?)?;
    r.rss_replica_end = rss(replica_pid)?;
    progress(&format!(
        "  {:.0} ops/s, CPU {:.0} µs/op primary, {:.0} replica; lag p99 {:.2} ms",
        r.ops_per_sec, r.cpu_primary_us, r.cpu_replica_us, r.lag_p99_ms
    ));
    Ok(r)
}

/// The verifier step: `ringrep-applier verify` over both servers, then with `--live`;
/// fills the verifier's fields of `r` and the memory after it.
fn verify_both(
    opts: &ScaleOptions,
    nodes: &Nodes,
    (primary, replica): (SocketAddr, SocketAddr),
    replica_pid: u32,
    r: &mut SizeReport,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<()> {
    progress("  ringrep-applier verify over both servers");
    let v = verify(&opts.bin_dir, primary, replica, false)?;
    (r.verify_rows, r.verify_secs, r.verify_compare_secs) = (v.rows, v.secs, v.compare_secs);
    r.verify_rows_per_sec = v.rows as f64 / v.secs;
    r.verify_compare_rows_per_sec = v.rows as f64 / v.compare_secs.max(1e-9);
    r.verify_converged = v.converged;
    progress(&format!(
        "  verified {} rows in {:.2} s ({:.0} rows/s; comparing alone {:.2} s), converged: {}",
        r.verify_rows,
        r.verify_secs,
        r.verify_rows_per_sec,
        r.verify_compare_secs,
        r.verify_converged
    ));
    r.rss_primary_verified_select = rss(nodes.primary_pid()?)?;
    r.rss_replica_verified_select = rss(replica_pid)?;
    if !opts.verify_live {
        r.rss_primary_verified = r.rss_primary_verified_select;
        r.rss_replica_verified = r.rss_replica_verified_select;
        return Ok(());
    }
    progress("  ringrep-applier verify --live over both servers");
    let v = verify(&opts.bin_dir, primary, replica, true)?;
    (r.verify_live_secs, r.verify_live_compare_secs) = (v.secs, v.compare_secs);
    r.verify_live_rows_per_sec = v.rows as f64 / v.secs;
    r.verify_live_converged = v.converged;
    r.rss_primary_verified = rss(nodes.primary_pid()?)?;
    r.rss_replica_verified = rss(replica_pid)?;
    progress(&format!(
        "  verified {} rows in {:.2} s ({:.0} rows/s; comparing alone {:.2} s), converged: {}",
        v.rows, v.secs, r.verify_live_rows_per_sec, v.compare_secs, v.converged
    ));

    Ok(())
}

/// An address `PeersOptions` needs for peers this run never reaches.
fn unused_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// The loaded table: RB-1's columns (`peers`) with rings of [`RING`].
fn create_table() -> String {
    format!(
        "CREATE TABLE {TABLE} (\n  prefix INT NOT NULL,\n  ring_idx INT NOT NULL DEFAULT 0,\n  \
         ring_meta VARBINARY(32),\n  written_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),\n  \
         payload VARCHAR(255),\n  PRIMARY KEY (prefix, ring_idx)\n) ENGINE=NDB \
         COMMENT='NDB_TABLE=MAX_ROWS_PER_PK={RING}' PARTITION BY KEY(prefix)"
    )
}

/// The payload of loaded row `n`: its number, then filler, [`PAYLOAD_LEN`] bytes in all.
pub(crate) fn load_payload(n: u64) -> String {
    let mut s = format!("{n:020}");
    s.extend(std::iter::repeat_n('r', PAYLOAD_LEN - s.len()));
    s
}

/// Inserts rows `from..to` as one statement: row `n` goes into ring `(n / RING) % prefixes`,
/// so that each ring gets its rows in a row and the first `prefixes × RING` rows fill every
/// ring exactly.
pub(crate) fn insert_statement(from: u64, to: u64, prefixes: u64) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(64 + (to - from) as usize * (PAYLOAD_LEN + 16));
    let _ = write!(s, "INSERT INTO {TABLE} (prefix, payload) VALUES ");
    for n in from..to {
        if n > from {
            s.push(',');
        }
        let _ = write!(s, "({},'{}')", (n / RING) % prefixes, load_payload(n));
    }
    s
}

/// Loads `rows` rows from [`LOADERS`] connections, each taking the next [`BATCH_ROWS`] rows
/// as one statement until none are left.
async fn load(
    addr: SocketAddr,
    rows: u64,
    prefixes: u64,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<()> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..LOADERS {
        let next = Arc::clone(&next);
        tasks.spawn(async move {
            let mut c = connect(addr).await?;
            loop {
                let from = next.fetch_add(BATCH_ROWS, Ordering::Relaxed);
                if from >= rows {
                    return anyhow::Ok(());
                }
                let to = (from + BATCH_ROWS).min(rows);
                c.query_drop(insert_statement(from, to, prefixes)).await?;
            }
        });
    }
    let start = Instant::now();
    let mut reported = Instant::now();
    loop {
        match tokio::time::timeout(Duration::from_secs(1), tasks.join_next()).await {
            Ok(Some(r)) => r??,
            Ok(None) => return Ok(()),
            Err(_) => {}
        }
        if reported.elapsed() >= Duration::from_secs(10) {
            let done = next.load(Ordering::Relaxed).min(rows);
            progress(&format!(
                "  {done} rows in {:.0} s",
                start.elapsed().as_secs_f64()
            ));
            reported = Instant::now();
        }
    }
}

/// Takes a snapshot through SQL: a new binlog segment, then a purge of every segment before
/// it, which snapshots first since recovery would otherwise need them. Returns the PURGE's
/// time.
async fn snapshot(addr: SocketAddr) -> anyhow::Result<Duration> {
    let mut c = connect(addr).await?;
    c.query_drop("FLUSH BINARY LOGS").await?;
    let logs: Vec<mysql_async::Row> = c.query("SHOW BINARY LOGS").await?;
    let last: String = logs
        .last()
        .and_then(|r| r.get(0))
        .ok_or_else(|| anyhow!("SHOW BINARY LOGS listed nothing"))?;
    let t = Instant::now();
    c.query_drop(format!("PURGE BINARY LOGS TO '{last}'"))
        .await?;
    let took = t.elapsed();
    let warnings: Vec<mysql_async::Row> = c.query("SHOW WARNINGS").await?;
    if !warnings.is_empty() {
        bail!("PURGE BINARY LOGS TO '{last}' left segments: {warnings:?}");
    }
    Ok(took)
}

/// Provisions a new replica from empty while one client writes to the primary; fills the
/// provisioning fields of `r` and returns the replica's address.
async fn provision(
    opts: &ScaleOptions,
    nodes: &mut Nodes,
    addr: SocketAddr,
    prefixes: u64,
    r: &mut SizeReport,
) -> anyhow::Result<SocketAddr> {
    // The writer: durable single-row inserts into random rings, each latency tagged with the
    // phase it fell in (0 before the replica started, 1 while it was provisioned).
    let phase = Arc::new(AtomicU8::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (phase, stop) = (Arc::clone(&phase), Arc::clone(&stop));
        let mut c = connect(addr).await?;
        let st = c
            .prep(format!(
                "INSERT INTO {TABLE} (prefix, payload) VALUES (?, ?)"
            ))
            .await?;
        tokio::spawn(async move {
            let mut rng = Rng::new(0x5ca1e);
            let mut lat: [Vec<Duration>; 2] = Default::default();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                c.exec_drop(&st, (rng.below(prefixes), peers::payload(n)))
                    .await?;
                n += 1;
                lat[usize::from(phase.load(Ordering::Relaxed).min(1))].push(t.elapsed());
            }
            anyhow::Ok(lat)
        })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The row the replica must show: written before it starts.
    let marker = format!("provisioned-{}", "m".repeat(130));
    let mut c = connect(addr).await?;
    c.exec_drop(
        format!("INSERT INTO {TABLE} (prefix, payload) VALUES (?, ?)"),
        (prefixes, marker.as_str()),
    )
    .await?;
    let marker_seq: u64 = c
        .query_first("SELECT @@ringrep_last_seq")
        .await?
        .ok_or_else(|| anyhow!("no @@ringrep_last_seq"))?;
    phase.store(1, Ordering::Relaxed);
    let start = Instant::now();
    let mut cmd = Command::new(opts.bin_dir.join("ringrep-applier"));
    cmd.arg("serve")
        .arg("--replica-dir")
        .arg(&nodes.replica_data)
        .arg("--source")
        .arg(format!("mysql://root@{addr}"))
        .args(["--listen", "127.0.0.1:0"]);
    let started = peers::spawn_node(cmd, "replica listening on ", &nodes.dir.join("replica.log"));
    let raddr = match started {
        Ok((child, raddr)) => {
            nodes.replica = Some((child, raddr));
            raddr
        }
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
    };
    let shown = wait_for_row(
        raddr,
        prefixes,
        &marker,
        marker_seq,
        Duration::from_secs(1800),
    )
    .await;
    r.provision_secs = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let lat = writer.await??;
    shown?;
    r.provision_rows_per_sec = r.stored_rows as f64 / r.provision_secs;
    let [mut before, mut during] = lat;
    before.sort_unstable();
    during.sort_unstable();
    let ms = |v: &[Duration], p: f64| peers::percentile(v, p).as_secs_f64() * 1e3;
    r.commit_p50_before_ms = ms(&before, 50.0);
    r.commit_p99_before_ms = ms(&before, 99.0);
    r.commit_p50_during_ms = ms(&during, 50.0);
    r.commit_p99_during_ms = ms(&during, 99.0);
    Ok(raddr)
}

/// Waits until the node at `addr` is provisioned and has applied the primary's `seq` (its
/// position for server 1 stored: a snapshot's rows show before its loading ends) and shows
/// `payload` in ring `prefix`. Until it is provisioned the table or the position is missing
/// there: that is waited out as well.
async fn wait_for_row(
    addr: SocketAddr,
    prefix: u64,
    payload: &str,
    seq: u64,
    limit: Duration,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let sql = format!(
        "SELECT COUNT(*) FROM {TABLE} WHERE prefix = ? AND payload = ? AND (SELECT last_seq \
         FROM mysql.ringrep_apply_status WHERE server_id = 1) >= ?"
    );
    let mut conn: Option<mysql_async::Conn> = None;
    loop {
        if conn.is_none() {
            conn = connect(addr).await.ok();
        }
        if let Some(c) = conn.as_mut() {
            match c
                .exec_first::<u64, _, _>(sql.as_str(), (prefix, payload, seq))
                .await
            {
                Ok(Some(n)) if n > 0 => return Ok(()),
                // A server error (the table not there yet) keeps the connection; anything
                // else drops it.
                Ok(_) | Err(mysql_async::Error::Server(_)) => {}
                Err(_) => conn = None,
            }
        }
        if start.elapsed() > limit {
            bail!(
                "the replica at {addr} did not show the row within {:.0} s",
                limit.as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One run of the verifier.
struct Verified {
    rows: u64,
    /// The whole command, then the comparison alone.
    secs: f64,
    compare_secs: f64,
    converged: bool,
}

/// Runs `ringrep-applier verify` over both servers (with `--live` when `live`), timing the
/// whole command; the comparison's own time and row count come from its last line on stderr.
fn verify(
    bin_dir: &Path,
    primary: SocketAddr,
    replica: SocketAddr,
    live: bool,
) -> anyhow::Result<Verified> {
    let url = |a: SocketAddr| format!("mysql://root@{a}");
    let t = Instant::now();
    let mut cmd = Command::new(bin_dir.join("ringrep-applier"));
    cmd.arg("verify")
        .arg("--primary")
        .arg(url(primary))
        .arg("--replica")
        .arg(url(replica));
    if live {
        cmd.arg("--live");
    }
    let out = cmd.output().context("running ringrep-applier verify")?;
    let secs = t.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (rows, compare) = stderr
        .lines()
        .rev()
        .find_map(compared_line)
        .ok_or_else(|| {
            anyhow!(
                "ringrep-applier verify printed no `compared N rows in T` line:\n{}{stderr}",
                String::from_utf8_lossy(&out.stdout)
            )
        })?;
    Ok(Verified {
        rows,
        secs,
        compare_secs: compare.as_secs_f64(),
        converged: out.status.success(),
    })
}

/// Reads the verifier's `compared N rows in T` line (`T` as Rust prints a duration with
/// `{:.2?}`: `1.23s`, `456.78ms`, `12.00µs`).
pub(crate) fn compared_line(line: &str) -> Option<(u64, Duration)> {
    let rest = line.trim().strip_prefix("compared ")?;
    let (rows, time) = rest.split_once(" rows in ")?;
    let rows = rows.parse().ok()?;
    let time = time.trim();
    let (number, scale) = [("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .into_iter()
        .find_map(|(unit, scale)| Some((time.strip_suffix(unit)?, scale)))?;
    let secs = number.parse::<f64>().ok()? * scale;
    Some((rows, Duration::from_secs_f64(secs)))
}

async fn connect(addr: SocketAddr) -> anyhow::Result<mysql_async::Conn> {
    peers::mysql_connect(addr, "root", None).await
}

/// Resident memory of process `pid`, bytes (VmRSS).
fn rss(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("process {pid} is gone"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kb| kb << 10)
        .ok_or_else(|| anyhow!("/proc/{pid}/status has no VmRSS"))
}

/// Bytes of the files directly in `dir`.
fn dir_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let m = e?.metadata()?;
        if m.is_file() {
            total += m.len();
        }
    }
    Ok(total)
}

/// Size of the newest snapshot file (`snapshot.<seq>`) in `dir`.
fn newest_snapshot_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut newest: Option<(u64, u64)> = None;
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        let name = e.file_name();
        let Some(seq) = name
            .to_str()
            .and_then(|n| n.strip_prefix("snapshot."))
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        if newest.is_none_or(|(s, _)| seq > s) {
            newest = Some((seq, e.metadata()?.len()));
        }
    }
    newest
        .map(|(_, len)| len)
        .ok_or_else(|| anyhow!("no snapshot in {}", dir.display()))
}

const MIB: f64 = (1u64 << 20) as f64;

/// The report as Markdown, for BENCHMARKS.md: the tables, then the goals.
pub(crate) fn markdown(sizes: &[SizeReport]) -> String {
    let mut s = String::from(
        "| rows | rings | load rows/s | binlog MiB | snapshot MiB | encoded B/row | RSS MiB empty | RSS MiB loaded | B/row | × encoded | RSS MiB restarted | B/row | × encoded | × encoded net of empty |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in sizes {
        s.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.0} | {:.0} | {:.2} | {:.2} |\n",
            r.stored_rows,
            r.prefixes,
            r.load_rows_per_sec,
            r.binlog_bytes as f64 / MIB,
            r.snapshot_bytes as f64 / MIB,
            r.encoded_per_row(),
            r.rss_empty as f64 / MIB,
            r.rss_loaded as f64 / MIB,
            r.rss_per_row(r.rss_loaded),
            r.memory_ratio(r.rss_loaded),
            r.rss_restarted_snapshot as f64 / MIB,
            r.rss_per_row(r.rss_restarted_snapshot),
            r.memory_ratio(r.rss_restarted_snapshot),
            r.net_memory_ratio(r.rss_restarted_snapshot),
        ));
    }
    s.push_str(
        "\n| rows | stop s | restart s (binlog replay) | RSS MiB after it | snapshot s | restart s (snapshot) | provision s | provision rows/s | commit p50/p99 ms before | during | verify s | verify rows/s | comparing alone rows/s | verify --live s | --live rows/s |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|\n",
    );
    for r in sizes {
        s.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} | {:.0} | {:.0} | {:.2} | {:.0} |\n",
            r.stored_rows,
            r.stop_secs,
            r.restart_binlog_secs,
            r.rss_restarted_binlog as f64 / MIB,
            r.snapshot_secs,
            r.restart_snapshot_secs,
            r.provision_secs,
            r.provision_rows_per_sec,
            r.commit_p50_before_ms,
            r.commit_p99_before_ms,
            r.commit_p50_during_ms,
            r.commit_p99_during_ms,
            r.verify_secs,
            r.verify_rows_per_sec,
            r.verify_compare_rows_per_sec,
            r.verify_live_secs,
            r.verify_live_rows_per_sec,
        ));
    }
    s.push_str(
        "\n| rows | clients | ops/s | op p99 ms | CPU µs/op primary | CPU µs/op replica | lag p99 ms | RSS MiB primary / replica provisioned | verified | at the end |\n\
         |---:|---:|---:|---:|---:|---:|---:|---|---|---|\n",
    );
    for r in sizes {
        s.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.0} | {:.0} | {:.2} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} / {:.0} |\n",
            r.stored_rows,
            r.clients,
            r.ops_per_sec,
            r.op_p99_ms,
            r.cpu_primary_us,
            r.cpu_replica_us,
            r.lag_p99_ms,
            r.rss_primary_provisioned as f64 / MIB,
            r.rss_replica_provisioned as f64 / MIB,
            r.rss_primary_verified as f64 / MIB,
            r.rss_replica_verified as f64 / MIB,
            r.rss_primary_end as f64 / MIB,
            r.rss_replica_end as f64 / MIB,
        ));
    }
    s.push('\n');
    for g in goals(sizes) {
        s.push_str(&format!(
            "- {} {}: {}\n",
            if g.met { "met:" } else { "missed:" },
            g.goal,
            g.measured
        ));
    }
    for r in sizes.iter().filter(|r| {
        // `verify --live` left out (--no-verify-live) ran nothing that could differ.
        let live_ran = r.verify_live_rows_per_sec > 0.0;
        r.verify_rows > 0 && !(r.verify_converged && (r.verify_live_converged || !live_ran))
    }) {
        s.push_str(&format!(
            "- the verifier found differences at {} rows\n",
            r.rows
        ));
    }
    s
}

/// The report as CSV: a header, then one line per size with every field of [`SizeReport`].
pub(crate) fn csv(sizes: &[SizeReport]) -> anyhow::Result<String> {
    let mut out = String::new();
    for (i, r) in sizes.iter().enumerate() {
        let serde_json::Value::Object(fields) = serde_json::to_value(r)? else {
            bail!("a size's report is not an object");
        };
        if i == 0 {
            out.push_str(&fields.keys().cloned().collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        out.push_str(
            &fields
                .values()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
        );
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_of_ten_up_to_a_million() {
        assert_eq!(prefixes(100_000), 10_000);
        assert_eq!(prefixes(10_000_000), 1_000_000);
        assert_eq!(prefixes(20_000_000), 1_000_000);
        assert_eq!(prefixes(5), 1);
        assert_eq!(stored_rows(10_000_000), 10_000_000);
        assert_eq!(stored_rows(20_000_000), 10_000_000);
    }

    #[test]
    fn statements_fill_rings_in_turn() {
        let s = insert_statement(8, 12, 100);
        assert!(s.starts_with("INSERT INTO test.scale (prefix, payload) VALUES (0,'"));
        assert_eq!(s.matches("(0,'").count(), 2);
        assert_eq!(s.matches("(1,'").count(), 2);
        assert_eq!(load_payload(7).len(), PAYLOAD_LEN);
        assert!(load_payload(7).starts_with("00000000000000000007r"));
    }

    #[test]
    fn the_verifiers_line_is_read() {
        assert_eq!(
            compared_line("compared 1000000 rows in 1.50s"),
            Some((1_000_000, Duration::from_millis(1500)))
        );
        assert_eq!(
            compared_line("compared 12 rows in 456.00ms"),
            Some((12, Duration::from_millis(456)))
        );
        assert_eq!(
            compared_line("compared 3 rows in 12.00µs"),
            Some((3, Duration::from_micros(12)))
        );
        assert_eq!(compared_line("verifying: 1/2 tables, 5 rows"), None);
    }

    fn size(rows: u64, ops: f64, cpu: f64) -> SizeReport {
        SizeReport {
            rows,
            stored_rows: rows,
            snapshot_bytes: rows * 200,
            rss_loaded: rows * 500,
            rss_restarted_snapshot: rows * 300,
            restart_snapshot_secs: 4.0,
            restart_binlog_secs: 30.0,
            provision_rows_per_sec: 500_000.0,
            commit_p99_before_ms: 1.0,
            commit_p99_during_ms: 1.5,
            verify_rows: rows,
            verify_rows_per_sec: 4e6,
            ops_per_sec: ops,
            cpu_primary_us: cpu,
            ..SizeReport::default()
        }
    }

    #[test]
    fn goals_are_computed_from_the_figures() {
        let sizes = [
            size(100_000, 20_000.0, 30.0),
            size(10_000_000, 19_000.0, 34.0),
        ];
        assert_eq!(sizes[0].encoded_per_row(), 200.0);
        assert_eq!(sizes[0].memory_ratio(sizes[0].rss_loaded), 2.5);
        let g = goals(&sizes);
        let met = |prefix: &str| {
            g.iter()
                .find(|g| g.goal.starts_with(prefix))
                .map(|g| g.met)
                .unwrap_or_else(|| panic!("no goal {prefix:?} in {g:?}"))
        };
        // 1.5× after a restart counts, not the 2.5× after the load.
        assert!(met("memory ≤ 2× the encoded rows at 100000"));
        assert!(met("restart ≤ 10 s"));
        assert!(!met("provisioning ≥ 1 M rows/s at 100000"));
        assert!(met("commit p99 during provisioning ≤ 2× without at 100000"));
        assert!(met("verification ≥ 3 M rows/s at 10000000"));
        // CPU/op 34 against 30 is 1.13×: out of 10%.
        assert!(!met("ops/s and primary CPU/op"));
        // A largest run under 10 M rows cannot meet the restart goal.
        assert!(!goals(&sizes[..1])
            .iter()
            .any(|g| g.goal.starts_with("restart") && g.met));
    }

    #[test]
    fn csv_has_a_header_and_a_line_per_size() {
        let text = csv(&[size(1, 1.0, 1.0), size(2, 1.0, 1.0)]).expect("csv");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        let header: Vec<&str> = lines[0].split(',').collect();
        assert!(header.contains(&"stored_rows") && header.contains(&"ops_per_sec"));
        assert_eq!(
            lines[0].split(',').count(),
            lines[1].split(',').count(),
            "{text}"
        );
    }
}
