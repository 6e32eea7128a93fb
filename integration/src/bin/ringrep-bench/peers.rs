//! `ringrep-bench peers`: workload RB-1 run against ringrep and against what people run
//! instead (per-key ring buffers on MariaDB with binlog replication; Redis streams capped with
//! MAXLEN and a Redis replica), in one run, on one machine, with the same client code.
//!
//! RB-1: `prefixes` rings of 64 slots, 150-byte payloads; every operation writes one event for a
//! random prefix and commits it durably. Rings are filled before measuring, so every measured
//! operation is an overwrite, the steady state of a ring table. For each system and client count
//! the run reports operations/s, client-side latency, CPU time of the primary and replica
//! processes per operation, and replica lag; then, per system, how fast the replica catches up
//! from a backlog. The disk's fsync rate is probed before the first system and after the last,
//! and ringrep's one client is set against both.
//!
//! Lag is measured the same way everywhere: a probe writes a marker row to a prefix of its own
//! every 20 ms and polls the replica until it is visible; the lag is the time from the primary's
//! acknowledgement of the commit to the replica returning the row.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use mysql_async::prelude::Queryable;

use integration::workload::Rng;

/// Ring size of RB-1.
const RING: u64 = 64;

/// The systems the benchmark knows (`--systems` takes their [`SystemKind::name`]s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SystemKind {
    /// ringrep: a `ringrep-source` primary and a `ringrep-applier` replica that this run starts.
    Ringrep,
    /// MariaDB with binlog replication, per-key rings updated in place (started by `peers.sh`).
    Mariadb,
    /// Redis streams capped with MAXLEN, `appendfsync always`, and a Redis replica.
    RedisAlways,
    /// The same Redis pair with `appendfsync everysec`.
    RedisEverysec,
}

impl SystemKind {
    /// The system's name in `--systems` and in the report.
    fn name(self) -> &'static str {
        match self {
            SystemKind::Ringrep => "ringrep",
            SystemKind::Mariadb => "mariadb",
            SystemKind::RedisAlways => "redis-always",
            SystemKind::RedisEverysec => "redis-everysec",
        }
    }

    fn is_redis(self) -> bool {
        matches!(self, SystemKind::RedisAlways | SystemKind::RedisEverysec)
    }
}

impl std::str::FromStr for SystemKind {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        [
            SystemKind::Ringrep,
            SystemKind::Mariadb,
            SystemKind::RedisAlways,
            SystemKind::RedisEverysec,
        ]
        .into_iter()
        .find(|k| k.name() == s)
        .ok_or_else(|| {
            anyhow!("unknown system {s:?}: ringrep, mariadb, redis-always or redis-everysec")
        })
    }
}

/// What to run, and where the peers are.
#[derive(Debug, Clone)]
pub(crate) struct PeersOptions {
    /// The systems to measure, in this order.
    pub(crate) systems: Vec<SystemKind>,
    /// Client counts to measure each system at, in this order.
    pub(crate) clients: Vec<usize>,
    /// Load before each measured interval, not counted.
    pub(crate) warmup: Duration,
    /// Length of each measured interval.
    pub(crate) measure: Duration,
    /// How long the replica is paused while the primary builds a backlog.
    pub(crate) backlog: Duration,
    /// Rings written by the load (the lag probe has one more of its own).
    pub(crate) prefixes: u64,
    /// Data directories of ringrep's nodes (and the fsync probe) go here.
    pub(crate) dir: PathBuf,
    /// Where `ringrep-source` and `ringrep-applier` are.
    pub(crate) bin_dir: PathBuf,
    /// MariaDB's primary and replica, as `peers.sh` started them.
    pub(crate) mariadb: (SocketAddr, SocketAddr),
    /// Redis's primary and replica, as `peers.sh` started them.
    pub(crate) redis: (SocketAddr, SocketAddr),
    /// ringrep's replica follows its primary over the network (its replication stream) rather
    /// than by reading the primary's binlog directory.
    pub(crate) ringrep_network: bool,
}

/// One system at one client count.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Measurement {
    system: &'static str,
    clients: usize,
    /// Operations acknowledged in the measured interval.
    ops: u64,
    pub(crate) ops_per_sec: f64,
    /// Client-side latency of one operation: median, then 99th percentile.
    op_p50_ms: f64,
    pub(crate) op_p99_ms: f64,
    /// CPU time (user + system) per operation, microseconds: the primary's process, then the
    /// replica's, each with its children that ended in the interval (Redis rewrites its
    /// append-only file in a forked child; ringrep's snapshots run in a thread).
    pub(crate) cpu_primary_us: f64,
    pub(crate) cpu_replica_us: f64,
    /// The part of `cpu_primary_us` that the primary's children took.
    cpu_primary_children_us: f64,
    /// Replica lag seen by the probe: median, 99th percentile, number of probes.
    lag_p50_ms: f64,
    pub(crate) lag_p99_ms: f64,
    lag_samples: usize,
    /// Operations retried after a deadlock or lock-wait timeout.
    retries: u64,
}

/// A replica catching up from a backlog.
#[derive(Debug, Clone, serde::Serialize)]
struct Catchup {
    system: &'static str,
    /// Operations written while the replica was paused.
    backlog_ops: u64,
    /// From the replica's resumption to its showing a probe written after the backlog.
    secs: f64,
    /// The backlog and the probe over `secs`.
    ops_per_sec: f64,
}

/// Everything a run measured, for [`markdown`] and the JSON report.
#[derive(Debug, Default, serde::Serialize)]
pub(crate) struct PeersReport {
    /// The disk's fsync rate under [`PeersOptions::dir`], appending, before the first system.
    fsyncs_per_sec: f64,
    /// The same after the last system: a two-second probe varies by a sixth from one minute
    /// to the next here (BENCHMARKS.md, "One client: what bounds it"), so the report gives
    /// both ends of the run.
    fsyncs_per_sec_after: f64,
    /// The same, writing within the file's length (as ringrep's binlog writer does).
    fsyncs_per_sec_within: f64,
    /// One per system and client count, in the order run.
    measurements: Vec<Measurement>,
    /// One per system.
    catchups: Vec<Catchup>,
    /// One line per system: how the final state was checked on both sides.
    checks: Vec<String>,
}

/// Runs every system of `opts` in turn; `progress` gets a line whenever a phase starts.
pub(crate) fn run(
    opts: &PeersOptions,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<PeersReport> {
    let mut report = PeersReport {
        fsyncs_per_sec: fsync_rate(&opts.dir, Duration::from_secs(2), false)?,
        fsyncs_per_sec_within: fsync_rate(&opts.dir, Duration::from_secs(2), true)?,
        ..PeersReport::default()
    };
    progress(&format!(
        "disk: {:.0} fsyncs/s appending, {:.0} within the file's length, in {}",
        report.fsyncs_per_sec,
        report.fsyncs_per_sec_within,
        opts.dir.display()
    ));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut redis_filled = false;
    for &kind in &opts.systems {
        let mut target = rt.block_on(Target::start(kind, opts))?;
        let r = rt.block_on(async {
            let fill = !(kind.is_redis() && redis_filled);
            if fill {
                progress(&format!(
                    "{}: filling {} rings of {RING}",
                    kind.name(),
                    opts.prefixes
                ));
                target.fill(opts.prefixes).await?;
            }
            target.wait_replica().await?;
            for &clients in &opts.clients {
                progress(&format!("{}: {clients} clients", kind.name()));
                let m = target.measure(opts, clients).await?;
                progress(&format!(
                    "  {:.0} ops/s, lag p50 {:.2} ms p99 {:.2} ms",
                    m.ops_per_sec, m.lag_p50_ms, m.lag_p99_ms
                ));
                report.measurements.push(m);
            }
            let clients = opts.clients.iter().copied().max().unwrap_or(1);
            progress(&format!(
                "{}: catch-up from {:.0} s of backlog",
                kind.name(),
                opts.backlog.as_secs_f64()
            ));
            report.catchups.push(target.catchup(opts, clients).await?);
            report.checks.push(target.check().await?);
            anyhow::Ok(())
        });
        rt.block_on(target.stop())?;
        r.with_context(|| match kind {
            SystemKind::Ringrep => format!(
                "benchmark of ringrep (the nodes' logs: {}/ringrep/*.log)",
                opts.dir.display()
            ),
            _ => format!("benchmark of {}", kind.name()),
        })?;
        redis_filled |= kind.is_redis();
    }
    report.fsyncs_per_sec_after = fsync_rate(&opts.dir, Duration::from_secs(2), false)?;
    progress(&format!(
        "disk after the runs: {:.0} fsyncs/s appending",
        report.fsyncs_per_sec_after
    ));
    Ok(report)
}

/// The disk's fsync rate in `dir`: 200-byte writes one after the other, each followed by
/// fdatasync; appended to the file, or `within` its length (made 64 MiB long first, sparse,
/// as ringrep's binlog writer keeps the segment it writes): an append makes the fsync commit
/// the file system's journal too.
pub(crate) fn fsync_rate(dir: &Path, time: Duration, within: bool) -> anyhow::Result<f64> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let tmp = tempfile::tempdir_in(dir)?;
    let mut f = std::fs::File::create(tmp.path().join("fsync-probe"))?;
    if within {
        f.set_len(64 << 20)?;
        f.sync_all()?;
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < time {
        f.write_all(&[1u8; 200])?;
        f.sync_data()?;
        n += 1;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// The 150-byte payload of operation `n`.
pub(crate) fn payload(n: u64) -> String {
    use std::fmt::Write;
    // Built in one allocation: the engine benchmarks spent 9% of their time here with
    // `format!` and `repeat`.
    const FILL: &str = "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp";
    let mut s = String::with_capacity(20 + FILL.len());
    let _ = write!(s, "{n:020}");
    s.push_str(FILL);
    s
}

/// A system under test: how to reach its primary and replica, and their processes.
pub(crate) struct Target {
    kind: SystemKind,
    /// ringrep's table, `db.table` (RB-1's `test.rb1`; `scale` writes into its own).
    table: String,
    primary: SocketAddr,
    replica: SocketAddr,
    primary_pid: u32,
    replica_pid: u32,
    /// ringrep's node processes (peers are started by `peers.sh`).
    children: Vec<Child>,
    /// Successful writes, probes included (for the final check).
    writes: Arc<AtomicU64>,
    probe_seq: u64,
    probe_prefix: u64,
    bin_dir: PathBuf,
}

/// A client connection able to write one RB-1 operation.
enum Conn {
    Sql(mysql_async::Conn, mysql_async::Statement),
    Redis(redis::aio::MultiplexedConnection),
}

impl Target {
    async fn start(kind: SystemKind, opts: &PeersOptions) -> anyhow::Result<Target> {
        let mut children = Vec::new();
        let (primary, replica, primary_pid, replica_pid) = match kind {
            SystemKind::Ringrep => {
                let dir = opts.dir.join("ringrep");
                if dir.exists() {
                    std::fs::remove_dir_all(&dir)?;
                }
                let mut cmd = Command::new(opts.bin_dir.join("ringrep-source"));
                cmd.arg("serve")
                    .arg("--data-dir")
                    .arg(dir.join("primary"))
                    .args(["--listen", "127.0.0.1:0"]);
                std::fs::create_dir_all(&dir)?;
                let (p, paddr) = spawn_node(cmd, "listening on ", &dir.join("primary.log"))?;
                children.push(p);
                let mut cmd = Command::new(opts.bin_dir.join("ringrep-applier"));
                cmd.arg("serve")
                    .arg("--replica-dir")
                    .arg(dir.join("replica"))
                    .args(["--listen", "127.0.0.1:0"]);
                if opts.ringrep_network {
                    cmd.arg("--source").arg(format!("mysql://root@{paddr}"));
                } else {
                    cmd.arg("--source-binlog").arg(dir.join("primary/binlog"));
                }
                let (r, raddr) =
                    match spawn_node(cmd, "replica listening on ", &dir.join("replica.log")) {
                        Ok(started) => started,
                        Err(e) => {
                            // The primary must not outlive a failed start.
                            for mut c in children {
                                let _ = c.kill();
                                let _ = c.wait();
                            }
                            return Err(e);
                        }
                    };
                children.push(r);
                let (pp, rp) = (children[0].id(), children[1].id());
                (paddr, raddr, pp, rp)
            }
            SystemKind::Mariadb => {
                let (p, r) = opts.mariadb;
                let pp = mariadb_pid(p).await?;
                let rp = mariadb_pid(r).await?;
                (p, r, pp, rp)
            }
            SystemKind::RedisAlways | SystemKind::RedisEverysec => {
                let (p, r) = opts.redis;
                let fsync = if kind == SystemKind::RedisAlways {
                    "always"
                } else {
                    "everysec"
                };
                let mut pids = Vec::new();
                for addr in [p, r] {
                    let mut c = redis_connect(addr).await?;
                    redis::cmd("CONFIG")
                        .arg("SET")
                        .arg("appendfsync")
                        .arg(fsync)
                        .query_async::<()>(&mut c)
                        .await?;
                    let info: String = redis::cmd("INFO").arg("server").query_async(&mut c).await?;
                    pids.push(u32::try_from(info_field(&info, "process_id")?)?);
                }
                (p, r, pids[0], pids[1])
            }
        };
        Ok(Target {
            kind,
            table: "test.rb1".into(),
            primary,
            replica,
            primary_pid,
            replica_pid,
            children,
            writes: Arc::new(AtomicU64::new(0)),
            probe_seq: 0,
            probe_prefix: opts.prefixes,
            bin_dir: opts.bin_dir.clone(),
        })
    }

    /// ringrep's nodes started by the caller, writing RB-1's operation into `table` (columns
    /// `prefix` and `payload`, rings over prefixes below `probe_prefix`; the lag probe writes
    /// into `probe_prefix`). The caller stops the nodes.
    pub(crate) fn ringrep(
        (primary, primary_pid): (SocketAddr, u32),
        (replica, replica_pid): (SocketAddr, u32),
        table: &str,
        probe_prefix: u64,
    ) -> Target {
        Target {
            kind: SystemKind::Ringrep,
            table: table.into(),
            primary,
            replica,
            primary_pid,
            replica_pid,
            children: Vec::new(),
            writes: Arc::new(AtomicU64::new(0)),
            probe_seq: 0,
            probe_prefix,
            bin_dir: PathBuf::new(),
        }
    }

    async fn stop(&mut self) -> anyhow::Result<()> {
        for c in &self.children {
            // SIGTERM: both nodes shut down cleanly (binlog synced).
            let _ = signal(c.id(), "TERM");
        }
        for mut c in self.children.drain(..) {
            c.wait()?;
        }
        Ok(())
    }

    /// A client connection to `addr` (ringrep's or MariaDB's) as this system's user.
    async fn sql(&self, addr: SocketAddr) -> anyhow::Result<mysql_async::Conn> {
        let (user, password) = login(self.kind);
        mysql_connect(addr, user, password).await
    }

    /// A client connection to `addr` with `sql` prepared on it.
    async fn prepared(&self, addr: SocketAddr, sql: &str) -> anyhow::Result<Conn> {
        let mut c = self.sql(addr).await?;
        let st = c.prep(sql).await?;
        Ok(Conn::Sql(c, st))
    }

    /// A connection to the primary, ready to write.
    async fn writer(&self) -> anyhow::Result<Conn> {
        match self.kind {
            SystemKind::Ringrep => {
                self.prepared(
                    self.primary,
                    &format!("INSERT INTO {} (prefix, payload) VALUES (?, ?)", self.table),
                )
                .await
            }
            // The seed recipe's oldest-sequence UPDATE, one ring per prefix. The unique index
            // (prefix, sequence_no) finds the oldest slot; a writer that waited for another's
            // lock on that slot moves on to the next oldest.
            SystemKind::Mariadb => {
                self.prepared(
                    self.primary,
                    &format!(
                        "UPDATE bench.rb SET payload = ?, written_at = NOW(6), \
                         sequence_no = sequence_no + {RING} WHERE prefix = ? \
                         ORDER BY sequence_no LIMIT 1"
                    ),
                )
                .await
            }
            _ => Ok(Conn::Redis(redis_connect(self.primary).await?)),
        }
    }

    /// A connection to the replica, ready to look for a payload.
    async fn reader(&self) -> anyhow::Result<Conn> {
        let table = match self.kind {
            SystemKind::Ringrep => self.table.as_str(),
            SystemKind::Mariadb => "bench.rb",
            _ => return Ok(Conn::Redis(redis_connect(self.replica).await?)),
        };
        self.prepared(
            self.replica,
            &format!("SELECT COUNT(*) FROM {table} WHERE prefix = ? AND payload = ?"),
        )
        .await
    }

    /// Runs `setup` on the primary, then fills rings `0..rings` with multi-row inserts (16
    /// rings per statement, from 4 connections): `head` and one `row(prefix, slot)` per slot.
    async fn fill_sql(
        &self,
        setup: &[&str],
        rings: u64,
        head: &'static str,
        row: fn(u64, u64) -> String,
    ) -> anyhow::Result<()> {
        let mut c = self.sql(self.primary).await?;
        for stmt in setup {
            c.query_drop(*stmt).await?;
        }
        let (addr, (user, password)) = (self.primary, login(self.kind));
        fill_parallel(rings, 16, |from, to| async move {
            let rows: Vec<String> = (from..to)
                .flat_map(|p| (0..RING).map(move |i| row(p, i)))
                .collect();
            let mut c = mysql_connect(addr, user, password).await?;
            c.query_drop(format!("{head}{}", rows.join(","))).await?;
            anyhow::Ok(())
        })
        .await
    }

    /// Creates the table (or clears the keys) and fills every ring, probe prefix included.
    async fn fill(&mut self, prefixes: u64) -> anyhow::Result<()> {
        let all = prefixes + 1;
        match self.kind {
            SystemKind::Ringrep => {
                let create = format!(
                    "CREATE TABLE test.rb1 (\n  prefix INT NOT NULL,\n  ring_idx INT NOT NULL DEFAULT 0,\n  \
                     ring_meta VARBINARY(32),\n  written_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),\n  \
                     payload VARCHAR(255),\n  PRIMARY KEY (prefix, ring_idx)\n) ENGINE=NDB \
                     COMMENT='NDB_TABLE=MAX_ROWS_PER_PK={RING}' PARTITION BY KEY(prefix)"
                );
                self.fill_sql(
                    &[&create],
                    all,
                    "INSERT INTO test.rb1 (prefix, payload) VALUES ",
                    |p, i| format!("({p},'{}')", payload(i)),
                )
                .await?;
            }
            // The recipe preallocates every slot; here each holds a full-size payload so that
            // the table starts at its steady-state size.
            SystemKind::Mariadb => {
                self.fill_sql(
                    &[
                        "DROP DATABASE IF EXISTS bench",
                        "CREATE DATABASE bench",
                        "CREATE TABLE bench.rb (\n  prefix INT UNSIGNED NOT NULL,\n  \
                         slot_id TINYINT UNSIGNED NOT NULL,\n  sequence_no BIGINT UNSIGNED NOT NULL,\n  \
                         payload VARCHAR(255) NULL,\n  written_at TIMESTAMP(6) NULL,\n  \
                         PRIMARY KEY (prefix, slot_id),\n  UNIQUE KEY uq_rb_sequence (prefix, sequence_no)\n\
                         ) ENGINE=InnoDB",
                    ],
                    all,
                    "INSERT INTO bench.rb (prefix, slot_id, sequence_no, payload, written_at) VALUES ",
                    |p, i| format!("({p},{i},{i},'{}',NOW(6))", payload(i)),
                )
                .await?;
            }
            SystemKind::RedisAlways | SystemKind::RedisEverysec => {
                let mut c = redis_connect(self.primary).await?;
                redis::cmd("FLUSHALL").query_async::<()>(&mut c).await?;
                fill_parallel(all, 16, |from, to| {
                    let addr = self.primary;
                    async move {
                        let mut c = redis_connect(addr).await?;
                        let mut pipe = redis::pipe();
                        for p in from..to {
                            for i in 0..RING {
                                pipe.cmd("XADD")
                                    .arg(format!("rb:{p}"))
                                    .arg("MAXLEN")
                                    .arg(RING)
                                    .arg("*")
                                    .arg("p")
                                    .arg(payload(i))
                                    .ignore();
                            }
                        }
                        pipe.query_async::<()>(&mut c).await?;
                        anyhow::Ok(())
                    }
                })
                .await?;
            }
        }
        Ok(())
    }

    /// Waits until the replica has everything the primary has (a probe becomes visible).
    pub(crate) async fn wait_replica(&mut self) -> anyhow::Result<()> {
        let mut w = self.writer().await?;
        let mut r = self.reader().await?;
        self.probe(&mut w, &mut r, Duration::from_secs(600)).await?;
        Ok(())
    }

    /// Writes one probe and waits for it on the replica; the time from the write's
    /// acknowledgement to its visibility.
    async fn probe(
        &mut self,
        w: &mut Conn,
        r: &mut Conn,
        limit: Duration,
    ) -> anyhow::Result<Duration> {
        self.probe_seq += 1;
        let marker = format!("probe-{:012}{}", self.probe_seq, "q".repeat(132));
        write(self.kind, w, self.probe_prefix, &marker).await?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        let acked = Instant::now();
        while !visible(r, self.probe_prefix, &marker).await? {
            if acked.elapsed() > limit {
                bail!(
                    "{}: the replica did not show a write within {:.0} s",
                    self.kind.name(),
                    limit.as_secs_f64()
                );
            }
        }
        Ok(acked.elapsed())
    }

    /// RB-1 from `clients` writers: a warm-up, then a measured interval with the lag probe.
    pub(crate) async fn measure(
        &mut self,
        opts: &PeersOptions,
        clients: usize,
    ) -> anyhow::Result<Measurement> {
        let load = Load::start(self, clients, opts.prefixes).await?;
        tokio::time::sleep(opts.warmup).await;
        let (ops0, retries0) = load.counts();
        let cpu0 = (cpu_time(self.primary_pid)?, cpu_time(self.replica_pid)?);
        load.measuring.store(true, Ordering::Relaxed);
        let start = Instant::now();
        let mut w = self.writer().await?;
        let mut r = self.reader().await?;
        let mut lags = Vec::new();
        while start.elapsed() < opts.measure {
            let next = Instant::now() + Duration::from_millis(20);
            lags.push(self.probe(&mut w, &mut r, Duration::from_secs(60)).await?);
            tokio::time::sleep_until(next.into()).await;
        }
        let secs = start.elapsed().as_secs_f64();
        let (ops1, retries1) = load.counts();
        let cpu1 = (cpu_time(self.primary_pid)?, cpu_time(self.replica_pid)?);
        let mut latencies = load.stop().await?;
        let ops = ops1 - ops0;
        latencies.sort_unstable();
        lags.sort_unstable();
        let per_op = |a: Duration, b: Duration| (b - a).as_secs_f64() * 1e6 / ops.max(1) as f64;
        Ok(Measurement {
            system: self.kind.name(),
            clients,
            ops,
            ops_per_sec: ops as f64 / secs,
            op_p50_ms: percentile(&latencies, 50.0).as_secs_f64() * 1e3,
            op_p99_ms: percentile(&latencies, 99.0).as_secs_f64() * 1e3,
            cpu_primary_us: per_op(cpu0.0.all(), cpu1.0.all()),
            cpu_replica_us: per_op(cpu0.1.all(), cpu1.1.all()),
            cpu_primary_children_us: per_op(cpu0.0.children, cpu1.0.children),
            lag_p50_ms: percentile(&lags, 50.0).as_secs_f64() * 1e3,
            lag_p99_ms: percentile(&lags, 99.0).as_secs_f64() * 1e3,
            lag_samples: lags.len(),
            retries: retries1 - retries0,
        })
    }

    /// Pauses the replica process (SIGSTOP) while `clients` writers build a backlog, resumes
    /// it, and times how long it takes to show the last write.
    async fn catchup(&mut self, opts: &PeersOptions, clients: usize) -> anyhow::Result<Catchup> {
        self.wait_replica().await?;
        let mut r = self.reader().await?;
        let mut w = self.writer().await?;
        signal(self.replica_pid, "STOP")?;
        let paused = async {
            let load = Load::start(self, clients, opts.prefixes).await?;
            tokio::time::sleep(opts.backlog).await;
            let (ops, _) = load.counts();
            load.stop().await?;
            anyhow::Ok(ops)
        }
        .await;
        // Resume the replica whatever happened, then time its catch-up.
        signal(self.replica_pid, "CONT")?;
        let ops = paused?;
        let start = Instant::now();
        self.probe(&mut w, &mut r, Duration::from_secs(600)).await?;
        let secs = start.elapsed().as_secs_f64();
        Ok(Catchup {
            system: self.kind.name(),
            backlog_ops: ops,
            secs,
            ops_per_sec: (ops + 1) as f64 / secs,
        })
    }

    /// Checks that the replica ended equal to the primary, and that no write was lost.
    async fn check(&mut self) -> anyhow::Result<String> {
        self.wait_replica().await?;
        let writes = self.writes.load(Ordering::Relaxed);
        match self.kind {
            SystemKind::Ringrep => {
                // The project's own verifier, as a user would run it, over both servers.
                let url = |a: SocketAddr| format!("mysql://root@{a}");
                let out = Command::new(self.bin_dir.join("ringrep-applier"))
                    .arg("verify")
                    .arg("--primary")
                    .arg(url(self.primary))
                    .arg("--replica")
                    .arg(url(self.replica))
                    .output()
                    .context("running ringrep-applier verify")?;
                let text = String::from_utf8_lossy(&out.stdout);
                if !out.status.success() {
                    bail!(
                        "ringrep: the verifier found differences:\n{text}{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                Ok(format!(
                    "ringrep: `ringrep-applier verify` over both servers: {}; {writes} writes acknowledged",
                    text.lines().last().unwrap_or("converged").trim()
                ))
            }
            SystemKind::Mariadb => {
                let mut sums = Vec::new();
                for addr in [self.primary, self.replica] {
                    let mut c = self.sql(addr).await?;
                    let s: Option<String> = c
                        .query_first("SELECT CAST(SUM(sequence_no) AS CHAR) FROM bench.rb")
                        .await?;
                    sums.push(s.unwrap_or_default().parse::<u64>().unwrap_or(0));
                }
                // Every slot starts at its own index; every write adds RING to one slot.
                let slots = self.probe_prefix + 1;
                let expected = slots * (RING * (RING - 1) / 2) + RING * writes;
                if sums[0] != expected || sums[1] != expected {
                    bail!(
                        "mariadb: sum of sequence numbers: primary {}, replica {}, expected {expected} after {writes} writes",
                        sums[0],
                        sums[1]
                    );
                }
                Ok(format!("mariadb: sum of sequence numbers equal on both sides and equal to the {writes} acknowledged writes"))
            }
            _ => {
                let mut offsets = Vec::new();
                for (addr, field) in [
                    (self.primary, "master_repl_offset"),
                    (self.replica, "slave_repl_offset"),
                ] {
                    let mut c = redis_connect(addr).await?;
                    let info: String = redis::cmd("INFO")
                        .arg("replication")
                        .query_async(&mut c)
                        .await?;
                    offsets.push(info_field(&info, field)?);
                }
                if offsets[0] != offsets[1] {
                    bail!(
                        "{}: replication offsets differ: primary {}, replica {}",
                        self.kind.name(),
                        offsets[0],
                        offsets[1]
                    );
                }
                Ok(format!(
                    "{}: replica at the primary's replication offset {}; {writes} writes acknowledged",
                    self.kind.name(),
                    offsets[0]
                ))
            }
        }
    }
}

/// Runs `job(from, to)` over `0..n` in chunks of `chunk`, four at a time.
async fn fill_parallel<F, Fut>(n: u64, chunk: u64, job: F) -> anyhow::Result<()>
where
    F: Fn(u64, u64) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    let mut from = 0;
    while from < n {
        while tasks.len() >= 4 {
            if let Some(r) = tasks.join_next().await {
                r??;
            }
        }
        let to = (from + chunk).min(n);
        tasks.spawn(job(from, to));
        from = to;
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(())
}

/// `clients` writers, each with its own connection, writing until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    measuring: Arc<AtomicBool>,
    ops: Arc<AtomicU64>,
    retries: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<Vec<Duration>>>>,
}

impl Load {
    async fn start(target: &Target, clients: usize, prefixes: u64) -> anyhow::Result<Load> {
        let stop = Arc::new(AtomicBool::new(false));
        let measuring = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let retries = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for c in 0..clients {
            let mut conn = target.writer().await?;
            let (kind, writes) = (target.kind, Arc::clone(&target.writes));
            let (stop, measuring, ops, retries) = (
                Arc::clone(&stop),
                Arc::clone(&measuring),
                Arc::clone(&ops),
                Arc::clone(&retries),
            );
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng::new(0x5eed ^ c as u64);
                let mut latencies = Vec::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let prefix = rng.below(prefixes);
                    let began = Instant::now();
                    match write(kind, &mut conn, prefix, &payload(n)).await {
                        Ok(()) => {}
                        Err(e) if retriable(&e) => {
                            retries.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                    if measuring.load(Ordering::Relaxed) {
                        latencies.push(began.elapsed());
                    }
                    ops.fetch_add(1, Ordering::Relaxed);
                    writes.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
                Ok(latencies)
            }));
        }
        Ok(Load {
            stop,
            measuring,
            ops,
            retries,
            tasks,
        })
    }

    fn counts(&self) -> (u64, u64) {
        (
            self.ops.load(Ordering::Relaxed),
            self.retries.load(Ordering::Relaxed),
        )
    }

    /// Stops the writers and returns every latency recorded while measuring.
    async fn stop(self) -> anyhow::Result<Vec<Duration>> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for t in self.tasks {
            all.extend(t.await??);
        }
        Ok(all)
    }
}

/// One RB-1 operation: a durable write of `payload` into `prefix`'s ring.
async fn write(
    kind: SystemKind,
    conn: &mut Conn,
    prefix: u64,
    payload: &str,
) -> anyhow::Result<()> {
    match conn {
        Conn::Sql(c, st) => {
            if kind == SystemKind::Mariadb {
                c.exec_drop(&*st, (payload, prefix)).await?;
                if c.affected_rows() != 1 {
                    bail!("mariadb: the ring of prefix {prefix} has no slot to update");
                }
            } else {
                c.exec_drop(&*st, (prefix, payload)).await?;
            }
        }
        Conn::Redis(c) => {
            redis::cmd("XADD")
                .arg(format!("rb:{prefix}"))
                .arg("MAXLEN")
                .arg(RING)
                .arg("*")
                .arg("p")
                .arg(payload)
                .query_async::<String>(c)
                .await?;
        }
    }
    Ok(())
}

/// Whether the replica behind `conn` shows `payload` in `prefix`'s ring.
async fn visible(conn: &mut Conn, prefix: u64, payload: &str) -> anyhow::Result<bool> {
    Ok(match conn {
        Conn::Sql(c, st) => {
            let n: Option<u64> = c.exec_first(&*st, (prefix, payload)).await?;
            n.unwrap_or(0) > 0
        }
        Conn::Redis(c) => {
            let newest: Vec<(String, Vec<String>)> = redis::cmd("XREVRANGE")
                .arg(format!("rb:{prefix}"))
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1)
                .query_async(c)
                .await?;
            newest
                .first()
                .is_some_and(|(_, fields)| fields.get(1).map(String::as_str) == Some(payload))
        }
    })
}

/// Deadlocks and lock-wait timeouts (MySQL's 1213 and 1205): the operation is retried.
fn retriable(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<mysql_async::Error>(),
        Some(mysql_async::Error::Server(s)) if s.code == 1213 || s.code == 1205
    )
}

/// The account the benchmark uses on a MySQL-protocol system: ringrep's passwordless
/// loopback root, or the `bench` user that `peers.sh` creates on MariaDB.
fn login(kind: SystemKind) -> (&'static str, Option<&'static str>) {
    match kind {
        SystemKind::Ringrep => ("root", None),
        _ => ("bench", Some("bench")),
    }
}

pub(crate) async fn mysql_connect(
    addr: SocketAddr,
    user: &str,
    password: Option<&str>,
) -> anyhow::Result<mysql_async::Conn> {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(user))
        .pass(password)
        .prefer_socket(false);
    mysql_async::Conn::new(opts).await.with_context(|| {
        format!(
            "connecting to {addr} (are the peers started? integration/bench/peers.sh start DIR)"
        )
    })
}

async fn redis_connect(addr: SocketAddr) -> anyhow::Result<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(format!("redis://{addr}/"))?;
    client
        .get_multiplexed_async_connection()
        .await
        .with_context(|| format!("connecting to Redis at {addr} (are the peers started? integration/bench/peers.sh start DIR)"))
}

/// The process id of the MariaDB server at `addr`, from its pid file.
async fn mariadb_pid(addr: SocketAddr) -> anyhow::Result<u32> {
    let (user, password) = login(SystemKind::Mariadb);
    let mut c = mysql_connect(addr, user, password).await?;
    let file: Option<String> = c.query_first("SELECT @@pid_file").await?;
    let file = file.ok_or_else(|| anyhow!("MariaDB at {addr} has no pid file"))?;
    let pid = std::fs::read_to_string(&file).with_context(|| format!("reading {file}"))?;
    pid.trim()
        .parse()
        .with_context(|| format!("{file} holds no process id"))
}

/// A numeric `field:value` line of Redis's INFO output. (Replication offsets are byte counts
/// that pass 4 GiB after a few runs against the same peers.)
fn info_field(info: &str, field: &str) -> anyhow::Result<u64> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow!("Redis INFO has no numeric {field}"))
}

/// User plus system CPU time of process `pid` and all its threads.
/// A process's CPU time: its own, and that of its children it has waited for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cpu {
    own: Duration,
    children: Duration,
}

impl Cpu {
    pub(crate) fn all(self) -> Duration {
        self.own + self.children
    }
}

pub(crate) fn cpu_time(pid: u32) -> anyhow::Result<Cpu> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    // Fields after the command name (which may hold spaces) start at state, field 3;
    // utime and stime are fields 14 and 15, cutime and cstime (children waited for) 16 and
    // 17, in clock ticks of 1/100 s on Linux.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("/proc/{pid}/stat unreadable"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(Cpu {
        own: Duration::from_millis((ticks(14) + ticks(15)) * 10),
        children: Duration::from_millis((ticks(16) + ticks(17)) * 10),
    })
}

pub(crate) fn signal(pid: u32, sig: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()?;
    if !status.success() {
        bail!("kill -{sig} {pid} failed");
    }
    Ok(())
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p / 100.0).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Starts a ringrep node and reads its listening address from the log line containing
/// `marker`. The rest of its log is drained so that it never blocks on a full pipe, and all
/// of it goes on to `log`, so that a failed run can be looked into.
pub(crate) fn spawn_node(
    mut cmd: Command,
    marker: &str,
    log: &Path,
) -> anyhow::Result<(Child, SocketAddr)> {
    use std::io::{BufRead, BufReader, LineWriter, Write};
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut log_file = LineWriter::new(
        std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?,
    );
    let mut child = cmd
        .env("RINGREP_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| {
            format!("starting {program} (build it: cargo build --release --workspace)")
        })?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| anyhow!("{program}: no stderr"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(log_file, "{line}");
            // Once the address is read nobody listens; keep draining.
            let _ = tx.send(line);
        }
    });
    loop {
        let line = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                bail!("{program} printed no {marker:?} line within 60 s");
            }
        };
        if let Some(i) = line.find(marker) {
            let rest = &line[i + marker.len()..];
            let addr = rest.split_whitespace().next().unwrap_or_default();
            let addr = addr
                .parse()
                .with_context(|| format!("{program}: no address in {line:?}"))?;
            return Ok((child, addr));
        }
    }
}

/// The report as Markdown tables, for BENCHMARKS.md.
pub(crate) fn markdown(r: &PeersReport) -> String {
    let mut s = format!(
        "Disk: {:.0} fsyncs/s before the systems ran, {:.0} after them (200-byte appends, fdatasync each); {:.0} fsyncs/s writing within the file's length.\n\n",
        r.fsyncs_per_sec, r.fsyncs_per_sec_after, r.fsyncs_per_sec_within
    );
    s.push_str("| system | clients | ops/s | op p50 ms | op p99 ms | CPU µs/op primary | CPU µs/op replica | lag p50 ms | lag p99 ms | lag samples | retries |\n");
    s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for m in &r.measurements {
        s.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:.0} | {:.0} | {:.2} | {:.2} | {} | {} |\n",
            m.system,
            m.clients,
            m.ops_per_sec,
            m.op_p50_ms,
            m.op_p99_ms,
            m.cpu_primary_us,
            m.cpu_replica_us,
            m.lag_p50_ms,
            m.lag_p99_ms,
            m.lag_samples,
            m.retries
        ));
    }
    let children: Vec<String> = r
        .measurements
        .iter()
        .filter(|m| m.cpu_primary_children_us >= 0.5)
        .map(|m| {
            format!(
                "{} at {} clients {:.0}",
                m.system, m.clients, m.cpu_primary_children_us
            )
        })
        .collect();
    if !children.is_empty() {
        s.push_str(&format!(
            "\nOf the primary's CPU µs/op, its children's (Redis's append-only file rewrites): {}.\n",
            children.join(", ")
        ));
    }
    s.push_str("\n| system | backlog ops | catch-up s | catch-up ops/s |\n|---|---:|---:|---:|\n");
    for c in &r.catchups {
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.0} |\n",
            c.system, c.backlog_ops, c.secs, c.ops_per_sec
        ));
    }
    let ringrep: Vec<&Measurement> = r
        .measurements
        .iter()
        .filter(|m| m.system == "ringrep")
        .collect();
    let peers: Vec<&Measurement> = r
        .measurements
        .iter()
        .filter(|m| m.system != "ringrep")
        .collect();
    if !ringrep.is_empty() && !peers.is_empty() {
        s.push_str("\n| ringrep ÷ peer | clients | ops/s | CPU µs/op primary | lag p99 |\n|---|---:|---:|---:|---:|\n");
        for p in &peers {
            if let Some(m) = ringrep.iter().find(|m| m.clients == p.clients) {
                s.push_str(&format!(
                    "| {} | {} | {:.2}× | {:.2}× | {:.2}× |\n",
                    p.system,
                    p.clients,
                    ratio(m.ops_per_sec, p.ops_per_sec),
                    ratio(m.cpu_primary_us, p.cpu_primary_us),
                    ratio(m.lag_p99_ms, p.lag_p99_ms)
                ));
            }
        }
    }
    if let Some(one) = ringrep.iter().find(|m| m.clients == 1) {
        s.push_str(&one_client_line(one.ops_per_sec, r));
    }
    s.push('\n');
    for c in &r.checks {
        s.push_str(&format!("- {c}\n"));
    }
    s
}

/// ringrep's one client against the disk's appending fsync rate, at both ends of the run.
fn one_client_line(ops_per_sec: f64, r: &PeersReport) -> String {
    format!(
        "\nringrep at one client: {:.0} ops/s, {:.3}× the disk's appending fsync rate before the systems ran and {:.3}× the rate after them.\n",
        ops_per_sec,
        ratio(ops_per_sec, r.fsyncs_per_sec),
        ratio(ops_per_sec, r.fsyncs_per_sec_after)
    )
}

/// `a ÷ b`, finite when `b` is zero (a system that measured nothing).
fn ratio(a: f64, b: f64) -> f64 {
    a / b.max(f64::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_is_set_against_both_disk_probes() {
        let r = PeersReport {
            fsyncs_per_sec: 8000.0,
            fsyncs_per_sec_after: 6000.0,
            ..PeersReport::default()
        };
        let line = one_client_line(4800.0, &r);
        assert!(line.contains("4800 ops/s"), "{line}");
        assert!(
            line.contains("0.600× the disk's appending fsync rate before"),
            "{line}"
        );
        assert!(line.contains("0.800× the rate after"), "{line}");
    }

    #[test]
    fn payloads_are_150_bytes() {
        assert_eq!(payload(0).len(), 150);
        assert_eq!(payload(u64::MAX).len(), 150);
        assert_eq!(payload(7), format!("{:020}{}", 7, "p".repeat(130)));
    }

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(51));
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&[], 99.0), Duration::ZERO);
    }

    #[test]
    fn system_names_parse_back() {
        for k in [
            SystemKind::Ringrep,
            SystemKind::Mariadb,
            SystemKind::RedisAlways,
            SystemKind::RedisEverysec,
        ] {
            assert_eq!(k.name().parse::<SystemKind>().ok(), Some(k));
        }
        assert!("postgres".parse::<SystemKind>().is_err());
    }

    #[test]
    fn redis_info_fields_are_read() {
        let info = "# Server\r\nredis_version:7.0.15\r\nprocess_id:4242\r\n";
        assert_eq!(info_field(info, "process_id").ok(), Some(4242));
        assert!(info_field(info, "redis_version").is_err());
        assert!(info_field(info, "missing").is_err());
        let past_4_gib = "# Replication\r\nmaster_repl_offset:4919682434\r\n";
        assert_eq!(
            info_field(past_4_gib, "master_repl_offset").ok(),
            Some(4_919_682_434)
        );
    }

    #[test]
    fn cpu_time_counts_the_children_waited_for() {
        let before = cpu_time(std::process::id()).expect("cpu");
        // A child that spins for a few hundred milliseconds of CPU, then is waited for.
        let status = Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh");
        assert!(status.success());
        let after = cpu_time(std::process::id()).expect("cpu");
        assert!(after.children > before.children, "{before:?} -> {after:?}");
        assert!(after.all() >= after.own);
    }
}
