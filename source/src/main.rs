//! `ringrep-source`: the primary node (`serve`, with the TTL purge and, given Kafka brokers,
//! the relay beside it), the Kafka relay on its own (`relay`), SQL against a data directory
//! (`sql`), backup and restore.

mod backup;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use binlog_format::SyncPolicy;
use clap::{Parser, Subcommand};
use ringrep_engine::{Engine, EngineConfig};
use ringrep_kafka::KafkaArgs;
use ringrep_relay::{Relay, RelayStats};
use ringrep_server::config::FileConfig;
use ringrep_server::{ServeArgs, Server, ServerSettings};
use ringrep_sql::{client_error_line, Outcome, SqlSession};

#[derive(Parser)]
#[command(
    name = "ringrep-source",
    version,
    about = "ringrep primary: the MySQL-protocol server, SQL, backup and restore"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per run: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run SQL statements against a data directory (no server needed), printing results as
    /// the mysql client does in batch mode.
    Sql {
        #[arg(long)]
        data_dir: PathBuf,
        /// Statements to run (separated by `;`).
        #[arg(short = 'e', long = "execute")]
        execute: Option<String>,
        /// Keep going after an error (exit status 1 still reports it).
        #[arg(long)]
        force: bool,
        /// Server id for a new data directory.
        #[arg(long, default_value_t = 1)]
        server_id: u32,
        /// Binlog sync policy: commit, never, or milliseconds.
        #[arg(long, default_value = "commit")]
        sync: String,
        /// A file of statements (standard input when neither FILE nor -e is given).
        file: Option<PathBuf>,
    },
    /// Write a backup (data rows and meta rows): of a stopped node's data directory, or online
    /// of a serving node through its replication stream (--from).
    Backup {
        /// The data directory of a stopped node.
        #[arg(long, required_unless_present = "from", conflicts_with = "from")]
        data_dir: Option<PathBuf>,
        /// A serving node, mysql://USER:PASSWORD@HOST:PORT, read through its replication
        /// stream (the account needs REPLICATION SLAVE): an online backup.
        #[arg(long)]
        from: Option<String>,
        /// With --from: TLS to the node, verifying its certificate against this CA (PEM).
        #[arg(long, requires = "from")]
        ssl_ca: Option<PathBuf>,
        /// Where the backup goes (a directory, created if missing).
        #[arg(long)]
        to: PathBuf,
    },
    /// Create a new data directory from a backup; inserts continue each ring.
    Restore {
        /// The backup directory (`ringrep-source backup --to`).
        #[arg(long)]
        from: PathBuf,
        /// The new data directory (must not hold one yet).
        #[arg(long)]
        data_dir: PathBuf,
    },
    /// Run the primary: the MySQL-protocol server over a data directory. Stops cleanly on
    /// SIGTERM or Ctrl-C (open transactions rolled back, binlog synced).
    Serve {
        /// The data directory (created if missing) [config: data_dir].
        #[arg(long, env = "RINGREP_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// This node's server id, written into its binlog (default: the id the data directory
        /// was written with, else 1) [config: server_id].
        #[arg(long, env = "RINGREP_SERVER_ID")]
        server_id: Option<u32>,
        /// Binlog sync policy: commit, never, or milliseconds (default commit) [config: sync].
        #[arg(long, env = "RINGREP_SYNC")]
        sync: Option<String>,
        #[command(flatten)]
        server: ServeArgs,
        /// With --kafka-brokers, the node also relays its binlog to Kafka.
        #[command(flatten)]
        kafka: KafkaArgs,
    },
    /// Relay a primary's binlog to Kafka (docs/kafka.md), on its own; the primary may be
    /// running. Resumes after the last transaction in the replication topic.
    Relay {
        /// The primary's data directory (its binlog/ is read).
        #[arg(
            long,
            conflicts_with = "binlog_dir",
            required_unless_present = "binlog_dir"
        )]
        data_dir: Option<PathBuf>,
        /// The binlog directory itself.
        #[arg(long)]
        binlog_dir: Option<PathBuf>,
        #[command(flatten)]
        kafka: KafkaArgs,
    },
}

fn main() -> ExitCode {
    // A test build (failpoints compiled in) takes injected faults from FAILPOINTS.
    binlog_format::failpoint::setup_from_env();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ringrep-source: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// A field as mysql's batch mode prints it: tabs, newlines and backslashes escaped.
fn field(v: &Option<String>) -> String {
    match v {
        None => "NULL".into(),
        Some(s) => s
            .replace('\\', "\\\\")
            .replace('\t', "\\t")
            .replace('\n', "\\n")
            .replace('\0', "\\0"),
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Sql {
            data_dir,
            execute,
            force,
            server_id,
            sync,
            file,
        } => {
            let script = match (execute, file) {
                (Some(e), _) => e,
                (None, Some(f)) => std::fs::read_to_string(&f)
                    .with_context(|| format!("reading {}", f.display()))?,
                (None, None) => {
                    let mut s = String::new();
                    std::io::stdin().read_to_string(&mut s)?;
                    s
                }
            };
            let mut cfg = EngineConfig::new(server_id);
            cfg.sync = sync.parse::<SyncPolicy>()?;
            let (engine, _) = Engine::open(&data_dir, cfg)
                .with_context(|| format!("opening {}", data_dir.display()))?;
            let mut session = SqlSession::new(&engine);
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let mut failed = false;
            for stmt in ringrep_sql::split_statements(&script) {
                match session.execute(&stmt) {
                    Ok(Outcome::Rows(rs)) => {
                        writeln!(out, "{}", rs.columns.join("\t"))?;
                        for r in rs.text_rows() {
                            writeln!(
                                out,
                                "{}",
                                r.iter().map(field).collect::<Vec<_>>().join("\t")
                            )?;
                        }
                        // Each result reaches a pipe as soon as it exists.
                        out.flush()?;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        out.flush()?;
                        eprintln!("{}", client_error_line(&e));
                        failed = true;
                        if !force {
                            break;
                        }
                    }
                }
            }
            session.session.rollback();
            out.flush()?;
            Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Backup {
            data_dir,
            from,
            ssl_ca,
            to,
        } => {
            let (what, seq) = match (data_dir, from) {
                (_, Some(url)) => {
                    ringrep_server::init_logging();
                    let seq = backup::online(&url, ssl_ca.as_deref(), &to)?;
                    (ringrep_applier::network::redact(&url), seq)
                }
                (Some(dir), None) => {
                    let server_id =
                        binlog_format::segment::directory_server_id(&dir.join("binlog"))?
                            .unwrap_or(1);
                    let (engine, _) = Engine::open(&dir, EngineConfig::new(server_id))
                        .with_context(|| format!("opening {}", dir.display()))?;
                    (dir.display().to_string(), engine.backup(&to)?)
                }
                (None, None) => anyhow::bail!("give --data-dir or --from"),
            };
            println!("backup of {what} at seq {seq} written to {}", to.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Restore { from, data_dir } => {
            let seq = Engine::restore(&from, &data_dir)?;
            println!(
                "restored {} into {} (state at seq {seq}; its binlog continues at {})",
                from.display(),
                data_dir.display(),
                seq + 1
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve {
            data_dir,
            server_id,
            sync,
            server,
            kafka,
        } => serve(data_dir, server_id, sync, server, kafka),
        Command::Relay {
            data_dir,
            binlog_dir,
            kafka,
        } => relay(data_dir, binlog_dir, kafka),
    }
}

fn serve(
    data_dir: Option<PathBuf>,
    server_id: Option<u32>,
    sync: Option<String>,
    args: ServeArgs,
    kafka: KafkaArgs,
) -> anyhow::Result<ExitCode> {
    ringrep_server::init_logging();
    let kafka = kafka.settings()?;
    let file = FileConfig::for_args(&args).map_err(anyhow::Error::msg)?;
    let settings = ServerSettings::resolve(&args, &file, ServerSettings::DEFAULT_PRIMARY_LISTEN)
        .map_err(anyhow::Error::msg)?;
    let data_dir = data_dir
        .or(file.data_dir.clone())
        .context("--data-dir (or data_dir in the config file) is required")?;
    // Without --server-id, a data directory keeps the id its binlog was written with (a
    // directory restored from another node's backup, or a promoted replica's, is not 1).
    let dir_id = binlog_format::segment::directory_server_id(&data_dir.join("binlog"))
        .ok()
        .flatten();
    let mut cfg = EngineConfig::new(server_id.or(file.server_id).or(dir_id).unwrap_or(1));
    cfg.sync = sync
        .or(file.sync.clone())
        .as_deref()
        .unwrap_or("commit")
        .parse::<SyncPolicy>()?;
    if let Some(n) = args.snapshot_every(&file) {
        cfg.snapshot_every = n;
    }
    if let Some(p) = args.snapshot_log_percent(&file) {
        cfg.snapshot_log_percent = p;
    }
    (cfg.segment_bytes, cfg.retention) = args.binlog(&file).map_err(anyhow::Error::msg)?;
    let (engine, report) =
        Engine::open(&data_dir, cfg).with_context(|| format!("opening {}", data_dir.display()))?;
    tracing::info!(
        "primary {} open at seq {} (server id {}, replayed {})",
        data_dir.display(),
        report.last_seq,
        engine.config().server_id,
        report.replayed
    );
    // The workers fsync each group of commits when they run out of work, instead of a
    // leader on the blocking pool (Engine::sync_when_workers_idle).
    let idle = engine.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(move || idle.sync_when_idle())
        .build()?;
    engine.sync_when_workers_idle();
    runtime.block_on(async {
        let server = Server::bind(engine.clone(), &settings).await?;
        tracing::info!("listening on {}", server.local_addr()?);
        let purge = ringrep_server::spawn_ttl_purge(engine.clone());
        let mut holds: Vec<ringrep_server::BinlogHold> = Vec::new();
        let (stop_relay, relay_stop) = tokio::sync::watch::channel(false);
        let relay = kafka.map(|k| {
            tracing::info!("relaying to Kafka at {} (topic prefix {})", k.brokers, k.topic_prefix);
            let (durable_engine, healing_engine) = (engine.clone(), engine.clone());
            let (snapshot_engine, chunk_engine) = (engine.clone(), engine.clone());
            let relay = Relay::new(k, &engine.binlog_dir(), engine.notifier())
                .with_durable(std::sync::Arc::new(move || durable_engine.durable_seq()))
                .with_heals(std::sync::Arc::new(move || healing_engine.binlog_heals()))
                .with_snapshots(
                    std::sync::Arc::new(move || engine_snapshot(&snapshot_engine)),
                    &engine.dir().join("relay"),
                )
                .with_chunks(
                    std::sync::Arc::new(move |req| engine_chunk(&chunk_engine, req)),
                    &engine.dir().join("relay"),
                );
            let stats = relay.stats.clone();
            // Retention keeps what a restart of the relay would read again: the binlog after
            // the last replication record's `ringrep.acked_seq`.
            let acked = stats.clone();
            holds.push(std::sync::Arc::new(move || {
                Some(acked.checkpoint.load(std::sync::atomic::Ordering::Relaxed) + 1)
            }));
            tokio::spawn(stats.clone().log_every_second(relay_stop.clone()));
            let task = tokio::spawn(async move {
                let r = relay.run_with_retries(relay_stop).await;
                // A relay that stops for good leaves the node serving: say so loudly.
                if let Err(e) = &r {
                    tracing::error!("the Kafka relay stopped for good: {e}; the node keeps serving; SHOW STATUS LIKE 'Ringrep_relay%' shows it; restart the node or run `ringrep-source relay`");
                }
                r
            });
            (task, stats)
        });
        let server = match &relay {
            Some((_, stats)) => server.with_component(std::sync::Arc::new(RelayComponent(stats.clone()))),
            None => server,
        };
        let relay = relay.map(|(task, _)| task);
        if let Some(addr) = args.metrics_listen(&file) {
            tracing::info!("metrics on http://{}/metrics", server.serve_metrics(addr).await?);
        }
        let retention = ringrep_server::spawn_retention(engine.clone(), holds);
        let report = server.run(ringrep_server::stop_signal()).await?;
        purge.abort();
        retention.abort();
        if let Some(relay) = relay {
            let _ = stop_relay.send(true);
            match relay.await {
                Ok(Ok(seq)) => tracing::info!("relay stopped: Kafka acknowledged up to seq {seq}"),
                Ok(Err(_)) => {}
                Err(e) => tracing::error!("relay task: {e}"),
            }
        }
        tracing::info!(
            "stopped: {} connection(s) served, {} closed at shutdown; binlog synced at seq {}",
            report.connections_accepted,
            report.connections_closed_at_shutdown,
            engine.last_seq()
        );
        Ok(ExitCode::SUCCESS)
    })
}

fn relay(
    data_dir: Option<PathBuf>,
    binlog_dir: Option<PathBuf>,
    kafka: KafkaArgs,
) -> anyhow::Result<ExitCode> {
    ringrep_server::init_logging();
    let settings = kafka.settings()?.context("--kafka-brokers is required")?;
    let data_dir_for_snapshots = data_dir.clone();
    let dir = match (binlog_dir, data_dir) {
        (Some(b), _) => b,
        (None, Some(d)) => d.join("binlog"),
        (None, None) => anyhow::bail!("give --data-dir or --binlog-dir"),
    };
    tracing::info!(
        "relaying {} to Kafka at {} (topic prefix {})",
        dir.display(),
        settings.brokers,
        settings.topic_prefix
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut relay = Relay::new(settings, &dir, None);
        if let Some(data_dir) = data_dir_for_snapshots {
            let snapshot_dir = data_dir.join("relay");
            relay = relay.with_snapshots(
                std::sync::Arc::new(move || {
                    let (engine, _) = Engine::open_read_only(&data_dir).map_err(|e| {
                        format!("reading {} for a snapshot: {e}", data_dir.display())
                    })?;
                    engine_snapshot(&engine)
                }),
                &snapshot_dir,
            );
        }
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(relay.stats.clone().log_every_second(stop_rx.clone()));
        tokio::spawn(async move {
            ringrep_server::stop_signal().await;
            let _ = stop_tx.send(true);
        });
        let seq = relay.run_with_retries(stop_rx).await?;
        tracing::info!("relay stopped: Kafka acknowledged up to seq {seq}");
        Ok(ExitCode::SUCCESS)
    })
}

/// The relay's figures in SHOW STATUS (`Ringrep_relay_*`) and the metrics (`ringrep_relay_*`).
struct RelayComponent(std::sync::Arc<RelayStats>);

impl ringrep_server::Component for RelayComponent {
    fn status_prefix(&self) -> &'static str {
        "Ringrep_relay"
    }

    fn metrics_prefix(&self) -> &'static str {
        "ringrep_relay"
    }

    fn fields(&self, engine: &Engine) -> Vec<(&'static str, String)> {
        self.0.fields(engine.durable_seq(), engine.now_us())
    }
}

/// A chunk of a table for the relay's incremental snapshots ([`Engine::table_chunk`]: exact
/// at a durable sequence number).
fn engine_chunk(
    engine: &Engine,
    req: &ringrep_relay::ChunkRequest,
) -> Result<Option<ringrep_relay::Chunk>, String> {
    let taken_us = engine.now_us();
    let chunk = engine
        .table_chunk(&req.database, &req.table, req.after.as_deref(), req.limit)
        .map_err(|e| e.to_string())?;
    Ok(chunk.map(|c| ringrep_relay::Chunk {
        seq: c.seq,
        taken_us,
        def: c.def,
        rows: c.rows,
        last_key: c.last_key,
    }))
}

/// Every replicated table's rows at one sequence number, for the relay's snapshots: a copy taken
/// while writers go on (rows may be newer than its sequence number), then the binlog up to the
/// last commit it may hold applied over it, which makes it exact there. Nothing waits for it.
fn engine_snapshot(engine: &Engine) -> Result<ringrep_relay::TableSnapshot, String> {
    use binlog_format::{Record, StartAt, Tailer};
    let (seq, covered, bytes) = engine.snapshot_for_replica().map_err(|e| e.to_string())?;
    let taken_us = engine.now_us();
    let mut state = Engine::decode_snapshot(&bytes[..]).map_err(|e| e.to_string())?;
    if covered > seq {
        let mut t = Tailer::open(&engine.binlog_dir(), StartAt::Seq(seq + 1));
        while state.last_seq < covered {
            match t.next_timeout(std::time::Duration::from_secs(10)) {
                Ok(Some((_, Record::Transaction(tx)))) if tx.seq > state.last_seq => {
                    state.apply_transaction(&tx).map_err(|e| e.to_string())?
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    return Err(format!(
                        "the binlog did not bring seq {} to {covered} within 10 s",
                        state.last_seq + 1
                    ))
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    let tables = state
        .tables
        .values()
        .filter(|t| !ringrep_engine::is_node_local_table(&t.def.database, &t.def.name))
        .map(|t| {
            (
                t.def.as_ref().clone(),
                t.iter().map(|(_, row)| row).collect(),
            )
        })
        .collect();
    Ok(ringrep_relay::TableSnapshot {
        seq: state.last_seq,
        server_id: engine.config().server_id,
        taken_us,
        tables,
    })
}
