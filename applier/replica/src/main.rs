//! `ringrep-applier`: the replica node (`serve`), the verifier (`verify`) and `status`.

mod channel;
mod live;
mod paged;
mod remote;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use binlog_format::SyncPolicy;
use clap::{Parser, Subcommand};
use ringrep_applier::applier::read_positions;
use ringrep_applier::verify::{verify_with, VerifyOptions};
use ringrep_applier::{Applier, NetworkConfig};
use ringrep_engine::{Engine, EngineConfig};
use ringrep_kafka::KafkaArgs;
use ringrep_server::config::FileConfig;
use ringrep_server::{ServeArgs, Server, ServerSettings};

use channel::{SourceSpec, StoredSource};
use remote::Side;

#[derive(Parser)]
#[command(
    name = "ringrep-applier",
    version,
    about = "ringrep replica node, verifier and apply status"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per run: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run a replica: follow a primary over the network, its binlog directory, or its
    /// replication topic in Kafka, and apply it to DIR. Without a source flag, the source
    /// CHANGE REPLICATION SOURCE TO stored in DIR (none yet: the node waits for one, which
    /// needs --listen).
    Serve {
        /// The replica's data directory (created if missing).
        #[arg(long)]
        replica_dir: PathBuf,
        /// The primary's binlog directory (DATA_DIR/binlog of the primary), on this machine or
        /// a shared file system.
        #[arg(long, conflicts_with_all = ["kafka_brokers", "source"])]
        source_binlog: Option<PathBuf>,
        /// The primary over the network: mysql://USER:PASSWORD@HOST:PORT of its MySQL port;
        /// the replica pulls its replication stream with that account.
        #[arg(long, env = "RINGREP_SOURCE", conflicts_with = "kafka_brokers")]
        source: Option<String>,
        /// With --source: how often an idle primary sends a heartbeat (milliseconds); three
        /// silent periods end the link and the replica reconnects.
        #[arg(long, default_value_t = 1000)]
        source_heartbeat_ms: u64,
        /// With --source: the longest wait between attempts to reach the primary (seconds);
        /// attempts start 100 ms apart and double.
        #[arg(long, default_value_t = 10)]
        source_connect_retry: u64,
        /// With --source: TLS to the primary, verifying its certificate against this CA
        /// (PEM) and the host name of --source.
        #[arg(long, requires = "source")]
        source_ssl_ca: Option<PathBuf>,
        /// This replica's own server id, written into its binlog (default: the id its data
        /// directory was written with, else 2).
        #[arg(long)]
        server_id: Option<u32>,
        /// Stop after applying this sequence number.
        #[arg(long)]
        until_seq: Option<u64>,
        /// Exit once everything the source has now is applied.
        #[arg(long)]
        exit_when_caught_up: bool,
        /// With --exit-when-caught-up or --until-seq: how many failed attempts in a row to
        /// reach the source fail the run (exit 1, with the reason); a source that refuses the
        /// account (a wrong password, a missing privilege) fails it at once. Without them the
        /// replica retries for ever, as MySQL's does, and SHOW REPLICA STATUS says why.
        #[arg(long, default_value_t = 10)]
        source_retry_count: u32,
        /// Do not start replicating at start-up (as MySQL's --skip-replica-start): the node
        /// serves reads and waits for START REPLICA.
        #[arg(long)]
        skip_replica_start: bool,
        /// Sync policy of the replica's binlog: commit, never, or milliseconds.
        #[arg(long, default_value = "commit")]
        sync: String,
        /// With `--sync commit`: how long an applied transaction may stay unsynced, in
        /// milliseconds. The apply never waits for the disk; a background fsync covers what
        /// arrived meanwhile. A crash loses at most that much of what the replica applied,
        /// position included, and it fetches it again. 0 waits for an fsync each
        /// time the source runs dry. Client commits of a promoted replica always wait.
        #[arg(long, default_value_t = ringrep_applier::applier::DEFAULT_SYNC_DELAY.as_millis() as u64)]
        apply_sync_delay_ms: u64,
        /// Read the primary's replication topic from these Kafka brokers instead of a binlog
        /// directory.
        #[arg(long, env = "RINGREP_KAFKA_BROKERS")]
        kafka_brokers: Option<String>,
        /// Topic prefix the relay used (`<prefix>.replication`).
        #[arg(long, env = "RINGREP_KAFKA_TOPIC_PREFIX", default_value = ringrep_cdc::kafka::DEFAULT_TOPIC_PREFIX)]
        kafka_topic_prefix: String,
        /// A librdkafka client setting, KEY=VALUE, repeatable (SASL, TLS).
        #[arg(long = "kafka-option", value_name = "KEY=VALUE")]
        kafka_options: Vec<String>,
        /// Serve clients over the MySQL protocol (read-only) when --listen (or `listen` in the
        /// config file) is given; 127.0.0.1:3307 is the usual replica address.
        #[command(flatten)]
        server: ServeArgs,
    },
    /// Compare a primary and a replica. Exit 0 when converged, 1 when they differ, 2 on error.
    Verify {
        /// Primary: a data directory, or mysql://user:password@host:port of a running node.
        #[arg(long)]
        primary: String,
        /// Replica: a data directory, or mysql://user:password@host:port.
        #[arg(long)]
        replica: String,
        /// One JSON report instead of text.
        #[arg(long)]
        json: bool,
        /// Require both sides to be at this sequence number.
        #[arg(long)]
        at_seq: Option<u64>,
        /// Rows per checksum chunk.
        #[arg(long, default_value_t = 1000)]
        chunk_rows: usize,
        /// Both sides are running nodes (`mysql://` accounts with REPLICATION SLAVE) that may
        /// take writes meanwhile: each is read through its replication stream at one point,
        /// the primary's copy moved forward to exactly where the replica's stands, and the two
        /// compared there, with no writer stopped (docs/operations.md, "Verifying").
        #[arg(long)]
        live: bool,
    },
    /// Make a replica's data directory from a backup (`ringrep-source backup`): the backup's
    /// rows, and the position at its sequence number, so that `serve` resumes the stream
    /// after it instead of loading a whole snapshot.
    Seed {
        /// The backup directory.
        #[arg(long)]
        from: PathBuf,
        /// The new replica's data directory (must not exist yet).
        #[arg(long)]
        replica_dir: PathBuf,
        /// The replica's own server id.
        #[arg(long, default_value_t = 2)]
        server_id: u32,
    },
    /// Make a (stopped) replica a primary: clients may write, and its apply positions stay,
    /// so that the old primary's other replicas can follow it (`ringrep-source serve
    /// --data-dir DIR` or `ringrep-applier serve --replica-dir DIR --listen ...` then serves
    /// it). The same as STOP REPLICA; RESET REPLICA ALL on a running one.
    Promote {
        /// The replica's data directory (the replica stopped).
        #[arg(long)]
        replica_dir: PathBuf,
    },
    /// Show a replica's stored apply positions.
    Status {
        /// The replica's data directory.
        #[arg(long)]
        replica_dir: PathBuf,
    },
}

fn main() -> ExitCode {
    // A test build (failpoints compiled in) takes injected faults from FAILPOINTS.
    binlog_format::failpoint::setup_from_env();
    let cli = Cli::parse();
    match cli.command {
        Command::Verify {
            primary,
            replica,
            json,
            at_seq,
            chunk_rows,
            live,
        } => match run_verify(&primary, &replica, json, at_seq, chunk_rows, live) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("ringrep-applier verify: {e:#}");
                ExitCode::from(2)
            }
        },
        other => match run(other) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ringrep-applier: {e:#}");
                ExitCode::from(1)
            }
        },
    }
}

fn open_side(spec: &str, role: &str) -> anyhow::Result<Side> {
    if remote::is_url(spec) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        eprintln!("reading the {role} over the MySQL protocol");
        runtime
            .block_on(remote::snapshot(spec, 5))
            .with_context(|| format!("reading the {role}"))
    } else {
        remote::open_dir(Path::new(spec)).with_context(|| format!("opening {role} {spec}"))
    }
}

fn run_verify(
    primary: &str,
    replica: &str,
    json: bool,
    at_seq: Option<u64>,
    chunk_rows: usize,
    live: bool,
) -> anyhow::Result<bool> {
    let started = Instant::now();
    let mut last_print = Instant::now();
    let mut progress = |prog: ringrep_applier::verify::Progress| {
        if last_print.elapsed() > Duration::from_secs(1) {
            eprintln!(
                "verifying: {}/{} tables, {} rows",
                prog.tables_done, prog.tables_total, prog.rows
            );
            last_print = Instant::now();
        }
    };
    let report = if !live && remote::is_url(primary) && remote::is_url(replica) {
        // Two servers: both read at once a page at a time and compared as they arrive.
        eprintln!("reading both nodes over the MySQL protocol, a page at a time");
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(paged::verify_servers(
                primary,
                replica,
                &VerifyOptions {
                    chunk_rows,
                    ignore_table_ids: true,
                    ..Default::default()
                },
                5,
                &mut progress,
            ))
            .context("comparing the nodes")?
    } else {
        whole_sides(primary, replica, chunk_rows, live, &mut progress)?
    };
    if let Some(n) = at_seq {
        if report.primary_seq != n || report.replica_applied_seq != Some(n) {
            bail!(
                "--at-seq {n}: the primary is at seq {} and the replica applied {:?}; data directories at rest cannot be moved to another point",
                report.primary_seq,
                report.replica_applied_seq
            );
        }
    }
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.text());
        eprintln!(
            "compared {} rows in {:.2?}",
            report.rows_compared,
            started.elapsed()
        );
    }
    Ok(report.converged)
}

/// A verification of two sides each held whole by an engine: data directories, a data
/// directory and a server, or (`--live`) two servers read through their streams.
fn whole_sides(
    primary: &str,
    replica: &str,
    chunk_rows: usize,
    live: bool,
    progress: &mut dyn FnMut(ringrep_applier::verify::Progress),
) -> anyhow::Result<ringrep_applier::Report> {
    let (p, r) = if live {
        if !remote::is_url(primary) || !remote::is_url(replica) {
            bail!(
                "--live compares two running nodes: give both as mysql://user:password@host:port"
            );
        }
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(live::sides(primary, replica))
            .context("reading both nodes at one point")?
    } else {
        (
            open_side(primary, "primary")?,
            open_side(replica, "replica")?,
        )
    };
    if remote::is_url(primary) != remote::is_url(replica) {
        // A server's side names the rows of a table without a primary key by their values
        // (its hidden row id is not shown over the protocol), a directory's by that id.
        let dir = if remote::is_url(primary) { &r } else { &p };
        if let Some(t) = dir
            .engine
            .tables()
            .into_iter()
            .find(|t| t.column_index(ringrep_engine::HIDDEN_ROW_ID).is_some())
        {
            anyhow::bail!(
                "{} has no primary key: a data directory and a server name its rows differently; verify two servers or two data directories",
                t.qualified_name()
            );
        }
    }
    let replica_applied = r.applied_from(p.server_id);
    Ok(verify_with(
        &p.engine,
        &r.engine,
        p.last_seq,
        replica_applied,
        &VerifyOptions {
            chunk_rows,
            ignore_table_ids: p.is_remote() || r.is_remote(),
            ..Default::default()
        },
        progress,
    ))
}

fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Serve {
            replica_dir,
            source_binlog,
            source,
            source_heartbeat_ms,
            source_connect_retry,
            source_ssl_ca,
            server_id,
            until_seq,
            exit_when_caught_up,
            source_retry_count,
            skip_replica_start,
            sync,
            apply_sync_delay_ms,
            kafka_brokers,
            kafka_topic_prefix,
            kafka_options,
            server,
        } => {
            ringrep_server::init_logging();
            // A directory keeps the id it was written with (one made by `seed`, or promoted).
            let server_id = server_id
                .or(
                    binlog_format::segment::directory_server_id(&replica_dir.join("binlog"))
                        .ok()
                        .flatten(),
                )
                .unwrap_or(2);
            // A reader: the topic-creation settings do not apply.
            let kafka = KafkaArgs {
                kafka_brokers,
                kafka_topic_prefix,
                kafka_options,
                kafka_partitions: 1,
                kafka_replication_factor: 1,
                kafka_format: "ringrep".into(),
                kafka_cleanup_policy: "delete".into(),
                kafka_snapshot: "no_data".into(),
                ..Default::default()
            };
            let kafka = kafka.settings()?;
            let file = FileConfig::for_args(&server).map_err(anyhow::Error::msg)?;
            let metrics = server.metrics_listen(&file);
            let listen = server.listen.is_some() || file.listen.is_some();
            let settings =
                ServerSettings::resolve(&server, &file, ServerSettings::DEFAULT_REPLICA_LISTEN)
                    .map_err(anyhow::Error::msg)?;
            let mut cfg = EngineConfig::new(server_id);
            cfg.sync = sync.parse::<SyncPolicy>()?;
            // A promoted replica is a primary: writable, and it runs the TTL purge.
            let promoted = Engine::is_promoted(&replica_dir);
            cfg.read_only = !promoted;
            if let Some(n) = server.snapshot_every(&file) {
                cfg.snapshot_every = n;
            }
            if let Some(p) = server.snapshot_log_percent(&file) {
                cfg.snapshot_log_percent = p;
            }
            (cfg.segment_bytes, cfg.retention) =
                server.binlog(&file).map_err(anyhow::Error::msg)?;
            let (engine, report) = Engine::open(&replica_dir, cfg)
                .with_context(|| format!("opening replica {}", replica_dir.display()))?;
            eprintln!(
                "replica {} open at its own seq {} (replayed {})",
                replica_dir.display(),
                report.last_seq,
                report.replayed
            );
            let mut applier = Applier::new(&engine)?;
            applier.set_sync_delay(Duration::from_millis(apply_sync_delay_ms));
            let defers_sync = applier.defers_sync();
            let source = match (&source, &kafka, &source_binlog) {
                (Some(url), _, _) => Some(SourceSpec::Network(network_config(
                    url,
                    server_id,
                    Duration::from_millis(source_heartbeat_ms.max(1)),
                    Duration::from_secs(source_connect_retry.max(1)),
                    source_ssl_ca.as_deref(),
                )?)),
                (None, Some(k), _) => Some(SourceSpec::Kafka(k.clone())),
                (None, None, Some(dir)) => Some(SourceSpec::Directory(dir.clone())),
                (None, None, None) => match StoredSource::load(&replica_dir)? {
                    Some(stored) => {
                        eprintln!(
                            "source from {}: {}:{} as {}",
                            channel::SOURCE_FILE,
                            stored.host,
                            stored.port,
                            stored.user
                        );
                        Some(SourceSpec::Network(stored.network(server_id)?))
                    }
                    None if listen => {
                        if !promoted {
                            eprintln!("no source configured yet: waiting for CHANGE REPLICATION SOURCE TO and START REPLICA");
                        }
                        None
                    }
                    None => bail!("give --source, --source-binlog or --kafka-brokers, or --listen to configure the source with CHANGE REPLICATION SOURCE TO"),
                },
            };
            let limits = channel::RunLimits {
                server_id,
                until_seq,
                exit_when_caught_up,
                retry_count: source_retry_count,
                dir: replica_dir.clone(),
                steerable: listen,
            };
            let (control, driver) = channel::channel(applier, source, limits);
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
                let server = if listen {
                    let server = Server::bind(engine.clone(), &settings)
                        .await?
                        .with_replica(control.clone());
                    if let Some(addr) = metrics {
                        eprintln!(
                            "metrics on http://{}/metrics",
                            server.serve_metrics(addr).await?
                        );
                    }
                    // Tests and scripts read the address from this line.
                    eprintln!(
                        "replica listening on {} ({})",
                        server.local_addr()?,
                        if promoted {
                            "promoted: writable"
                        } else {
                            "read-only"
                        }
                    );
                    let mut stopped = stop_rx.clone();
                    Some(tokio::spawn(server.run(async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    })))
                } else {
                    None
                };
                // SIGINT or SIGTERM: stop between transactions, then sync and exit cleanly.
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
                let stop_tx_for_server = stop_tx.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                    eprintln!("stopping after the current transaction");
                    let _ = stop_tx.send(true);
                });
                // The replica's own binlog is kept as a primary's is (it may serve replicas, or
                // be promoted); only its server's streams hold it.
                let retention = ringrep_server::spawn_retention(engine.clone(), Vec::new());
                if promoted {
                    eprintln!("this node was promoted: it takes writes and purges expired rows");
                    ringrep_server::spawn_ttl_purge(engine.clone());
                }
                // Applying with deferred fsyncs blocks only now and then (through
                // `block_in_place`): it runs on a worker, where the stream's reading task
                // hands it each transaction without waking another thread. Waiting for an
                // fsync after every batch, it stays on this thread.
                let drive = driver.drive(!skip_replica_start, stop_rx);
                let last = if defers_sync {
                    tokio::spawn(drive)
                        .await
                        .unwrap_or_else(|e| Err(anyhow::anyhow!("the applier stopped: {e}")))
                } else {
                    drive.await
                };
                retention.abort();
                if let Some(server) = server {
                    // Also when the applier stopped on its own (--until-seq, caught up, error).
                    let _ = stop_tx_for_server.send(true);
                    server.await??;
                }
                let last = last?;
                engine.sync()?;
                eprintln!("stopped: last applied seq {last}");
                Ok(())
            })
        }
        Command::Seed {
            from,
            replica_dir,
            server_id,
        } => {
            let (source_id, seq) = Engine::backup_origin(&from)?.with_context(|| {
                format!(
                    "{} does not say which server and seq it is of (no backup.json): make it with ringrep-source backup",
                    from.display()
                )
            })?;
            if source_id == server_id {
                bail!("the replica's --server-id {server_id} equals the backup's server; give the replica its own id");
            }
            Engine::restore(&from, &replica_dir)?;
            let mut cfg = EngineConfig::new(server_id);
            cfg.read_only = true;
            let (engine, _) = Engine::open(&replica_dir, cfg)
                .with_context(|| format!("opening {}", replica_dir.display()))?;
            let mut applier = Applier::new(&engine)?;
            applier.seed_position(source_id, seq)?;
            println!(
                "replica {} seeded from {} at seq {seq} of server {source_id}; `ringrep-applier serve` resumes the stream after it",
                replica_dir.display(),
                from.display()
            );
            Ok(())
        }
        Command::Promote { replica_dir } => {
            let server_id =
                binlog_format::segment::directory_server_id(&replica_dir.join("binlog"))?
                    .context("not a data directory (no binlog)")?;
            let mut cfg = EngineConfig::new(server_id);
            cfg.read_only = true;
            let (engine, _) = Engine::open(&replica_dir, cfg)
                .with_context(|| format!("opening {}", replica_dir.display()))?;
            engine.promote()?;
            channel::StoredSource::remove_from(&replica_dir)?;
            println!(
                "{} promoted: server id {server_id}, at its own seq {}; positions kept:",
                replica_dir.display(),
                engine.last_seq()
            );
            for p in read_positions(&engine) {
                println!("  server {}: seq {}", p.server_id, p.last_seq);
            }
            Ok(())
        }
        Command::Status { replica_dir } => {
            let (engine, _) = Engine::open_read_only(&replica_dir)?;
            println!("server_id\tlast_seq\tbinlog_position\tapplied_at");
            for p in read_positions(&engine) {
                println!(
                    "{}\t{}\t{}\t{}",
                    p.server_id,
                    p.last_seq,
                    p.position,
                    binlog_format::value::format_timestamp(p.applied_us, 6)
                );
            }
            Ok(())
        }
        Command::Verify { .. } => unreachable!("handled in main"),
    }
}

/// The network source's settings from `--source mysql://USER:PASSWORD@HOST:PORT`.
fn network_config(
    url: &str,
    replica_id: u32,
    heartbeat: Duration,
    connect_retry: Duration,
    ca: Option<&Path>,
) -> anyhow::Result<NetworkConfig> {
    NetworkConfig::from_url(url, replica_id, heartbeat, connect_retry, ca)
        .map_err(|e| anyhow::anyhow!("--source: {e}"))
}
