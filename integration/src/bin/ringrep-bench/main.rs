//! `ringrep-bench`: end-to-end benchmark runs whose figures go in BENCHMARKS.md. Every run
//! prints what it measured and how; none asserts anything.
//!
//! One function per subcommand: the engine's own figures in `engine` (batch and autocommit
//! inserts, snapshot pauses, the verifier), a replica's in `replica` (catch-up, lag through the
//! binlog directory), the relay's in `kafka`, the side-by-side run against MariaDB and
//! Redis in `peers`, a primary's disk use with binlog retention in `retention`, a
//! primary and replica under a mixed workload for minutes in `soak`, the cost of one
//! statement as its rows grow in `statements`, and a primary's costs as its data grows in
//! `scale`.

mod engine;
mod kafka;
mod peers;
mod replica;
mod retention;
mod scale;
mod soak;
mod statements;

use std::path::Path;
use std::time::Duration;

use binlog_format::schema::TableDef;
use binlog_format::{SyncPolicy, Value};
use clap::{Parser, Subcommand};
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
        /// The change records' format, as the relay's `--kafka-format`: `ringrep`,
        /// `debezium` (with schemas) or `debezium-noschema`.
        #[arg(long, default_value = "ringrep")]
        format: String,
        /// Produce in Kafka transactions, as the relay's `--kafka-transactions`.
        #[arg(long)]
        transactions: bool,
        /// A librdkafka setting for the relay and the Kafka source, as their
        /// `--kafka-option KEY=VALUE` (repeatable): `linger.ms=1`, `fetch.wait.max.ms=1`.
        #[arg(long = "kafka-option")]
        kafka_options: Vec<String>,
    },
    /// Rows/s of one SQL statement writing n rows (INSERT ... SELECT, multi-row VALUES, LOAD
    /// DATA, UPDATE, DELETE; plain and ring tables) for each n of SIZES: whether a statement's
    /// cost grows faster than its rows.
    Statements {
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "1000,10000,100000,1000000"
        )]
        sizes: Vec<u64>,
        /// The largest multi-row INSERT ... VALUES measured (its text is ~210 bytes a row).
        #[arg(long, default_value_t = 100_000)]
        values_max: u64,
    },
    /// A primary's costs as its data grows: for each size of ROWS, a `ringrep-source serve`
    /// loaded with that many rows (rings of 10, at most 1 M rings, ~200-byte rows), then its
    /// memory per row against the rows' encoded size, restarts (binlog replay, snapshot), a
    /// snapshot, a new replica provisioned, the verifier, and RB-1 from CLIENTS clients.
    Scale(ScaleArgs),
    /// The verifier comparing two equal engines of ROWS rows.
    Verify {
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
    },
    /// A new replica provisioned over the network from a primary of ROWS rows whose binlog is
    /// purged, while a writer commits on the primary: the rate, and the commit latency.
    Provision {
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
    },
    /// A primary's disk use over MINUTES of RATE inserts/s into PREFIXES rings, with binlog
    /// retention (a size bound of RETENTION MiB on segments of SEGMENT KiB) applied every 10 s.
    /// A primary and its replica (processes, from the directory of this binary) for MINUTES
    /// under RATE mixed operations/s (ring inserts, updates, prefix deletes, a TTL ring, DDL each
    /// minute; the relay too with --kafka-brokers): memory, open files and binlog size every
    /// 30 s, then the verifier.
    Soak {
        #[arg(long, default_value_t = 10)]
        minutes: u64,
        #[arg(long, default_value_t = 500)]
        rate: u64,
        #[arg(long)]
        kafka_brokers: Option<String>,
    },
    RetentionSoak {
        #[arg(long, default_value_t = 10)]
        minutes: u64,
        #[arg(long, default_value_t = 2000)]
        rate: u64,
        #[arg(long, default_value_t = 1000)]
        prefixes: u64,
        #[arg(long, default_value_t = 4096)]
        segment_kib: u64,
        #[arg(long, default_value_t = 32)]
        retention_mib: u64,
        #[arg(long, default_value = "commit")]
        sync: String,
    },
}

#[derive(clap::Args)]
struct ScaleArgs {
    /// Rows to load, one run per size, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100000,1000000,10000000")]
    rows: Vec<u64>,
    /// Data directory for the nodes (default: a temporary one beside the system's others).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// Data directory for the new replica instead (default: beside the primary's): on
    /// another disk or a tmpfs, it stands in for a replica on a machine of its own, whose
    /// writes do not queue with the primary's fsyncs.
    #[arg(long)]
    replica_dir: Option<std::path::PathBuf>,
    /// Clients of RB-1's step.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Seconds of warm-up before RB-1's measured interval.
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Seconds RB-1 is measured.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Also write the report as CSV (a line per size) to this file.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
    /// Skip the verifier step.
    #[arg(long)]
    no_verify: bool,
    /// Skip `verify --live` in the verifier step (it holds both nodes' copies in scratch
    /// directories and memory: at 10 M rows, more than this machine has to spare).
    #[arg(long)]
    no_verify_live: bool,
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
    systems: Vec<peers::SystemKind>,
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
    /// How ringrep's replica follows its primary: `network` (its replication stream over TCP,
    /// as on two machines) or `directory` (reading the primary's binlog files).
    #[arg(long, default_value = "network", value_parser = ["network", "directory"])]
    ringrep_source: String,
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

/// Opens (or creates) the engine of node `id` in `dir` without automatic snapshots; unless
/// `read_only`, creates the bench [`table`] if it is missing. Returns the engine and the
/// table's definition as the engine holds it.
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

/// The 150-byte payload of row `n`, as a value.
fn payload(n: u64) -> Value {
    Value::Text(peers::payload(n))
}

/// Inserts row `n` into prefix `n % 10,000` (autocommit, one transaction): the primary's
/// workload of `catchup`, `lag` and `kafka`.
fn insert_row(s: &mut Session, def: &TableDef, n: u64) -> ringrep_engine::Result<u64> {
    s.statement(|s| {
        s.insert(
            def,
            &[0, PAYLOAD],
            vec![vec![Value::Int((n % 10_000) as i64), payload(n)]],
            InsertMode::Insert,
        )
    })
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path();
    match cli.command {
        Command::Peers(args) => run_peers(*args),
        Command::Scale(args) => run_scale(args, dir),
        Command::Kafka {
            brokers,
            txs,
            rate,
            seconds,
            format,
            transactions,
            kafka_options,
        } => {
            let format = ringrep_cdc::kafka::Format::parse(&format).ok_or_else(|| {
                anyhow::anyhow!(
                    "--format {format}: expected ringrep, debezium or debezium-noschema"
                )
            })?;
            let options = kafka_options
                .iter()
                .map(|o| {
                    o.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .ok_or_else(|| anyhow::anyhow!("--kafka-option {o}: expected KEY=VALUE"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            kafka::kafka_bench(
                dir,
                brokers,
                (txs, rate, seconds),
                (format, transactions, options),
            )
        }
        Command::Fsync { seconds } => fsync(dir, seconds),
        Command::EngineBatch {
            prefixes,
            rows,
            batch,
            writers,
        } => engine::engine_batch(dir, prefixes, rows, batch, writers),
        Command::SnapshotPause { rows } => engine::snapshot_pause(dir, rows),
        Command::EngineAutocommit {
            writers,
            seconds,
            sync,
            committers,
            threads,
        } => engine::engine_autocommit(dir, writers, seconds, &sync, committers, threads),
        Command::Catchup { txs } => replica::catchup(dir, txs),
        Command::Lag { rate, seconds } => replica::lag(dir, rate, seconds),
        Command::Statements { sizes, values_max } => {
            statements::statements(dir, &sizes, values_max)
        }
        Command::Verify { rows } => engine::verify_bench(dir, rows),
        Command::Provision { rows } => replica::provision(dir, rows),
        Command::Soak {
            minutes,
            rate,
            kafka_brokers,
        } => soak::soak(
            dir,
            &soak::Soak {
                minutes,
                rate,
                kafka_brokers,
                bin_dir: std::env::current_exe()?
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default(),
            },
        ),
        Command::RetentionSoak {
            minutes,
            rate,
            prefixes,
            segment_kib,
            retention_mib,
            sync,
        } => retention::retention_soak(
            dir,
            &retention::Soak {
                minutes,
                rate,
                prefixes,
                segment_bytes: segment_kib << 10,
                retention_bytes: retention_mib << 20,
                sync,
            },
        ),
    }
}

/// `fsync`: the disk's fsync rate in `dir`.
fn fsync(dir: &Path, seconds: u64) -> anyhow::Result<()> {
    println!(
        "fsync: {:.0} fsyncs/s (200-byte appends, fdatasync each); {:.0} fsyncs/s writing within the file's length (as the binlog writer does)",
        peers::fsync_rate(dir, Duration::from_secs(seconds), false)?,
        peers::fsync_rate(dir, Duration::from_secs(seconds), true)?
    );
    Ok(())
}

/// `scale`: the report goes to stdout as Markdown (and to `--json`, `--csv`), progress to
/// stderr as each step starts and ends.
fn run_scale(args: ScaleArgs, tmp: &Path) -> anyhow::Result<()> {
    let opts = scale::ScaleOptions {
        sizes: args.rows,
        dir: args.dir.unwrap_or_else(|| tmp.to_path_buf()),
        replica_dir: args.replica_dir,
        bin_dir: std::env::current_exe()?
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        clients: args.clients,
        warmup: Duration::from_secs(args.warmup),
        measure: Duration::from_secs(args.seconds),
        verify: !args.no_verify,
        verify_live: !args.no_verify_live,
    };
    let sizes = scale::run(&opts, &mut |line| eprintln!("{line}"))?;
    println!("{}", scale::markdown(&sizes));
    if let Some(path) = args.json {
        std::fs::write(&path, serde_json::to_string_pretty(&sizes)?)?;
    }
    if let Some(path) = args.csv {
        std::fs::write(&path, scale::csv(&sizes)?)?;
    }
    Ok(())
}

/// `peers`: RB-1 against every system of `args`; the report goes to stdout as Markdown (and
/// to `--json` as JSON), progress to stderr.
fn run_peers(args: PeersArgs) -> anyhow::Result<()> {
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
        ringrep_source,
        json,
    } = args;
    let exe = std::env::current_exe()?;
    let opts = peers::PeersOptions {
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
        ringrep_network: ringrep_source == "network",
    };
    let report = peers::run(&opts, &mut |line| eprintln!("{line}"))?;
    println!("{}", peers::markdown(&report));
    if let Some(path) = json {
        std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(())
}
