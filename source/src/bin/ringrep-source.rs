//! `ringrep-source`: the primary node (`serve`), SQL against a data directory, backup and
//! restore. The Kafka relay (`relay`) is not built yet.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use binlog_format::SyncPolicy;
use clap::{Parser, Subcommand};
use ringrep_source::server::config::FileConfig;
use ringrep_source::server::{ServeArgs, Server, ServerSettings};
use ringrep_source::sql::{client_error_line, Outcome, SqlSession};
use ringrep_source::{Engine, EngineConfig};

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
    /// Write a backup (data rows and meta rows) of a stopped node's data directory.
    Backup {
        #[arg(long)]
        data_dir: PathBuf,
        #[arg(long)]
        to: PathBuf,
    },
    /// Create a new data directory from a backup; inserts continue each ring.
    Restore {
        #[arg(long)]
        from: PathBuf,
        #[arg(long)]
        data_dir: PathBuf,
    },
    /// Run the primary: the MySQL-protocol server over a data directory. Stops cleanly on
    /// SIGTERM or Ctrl-C (open transactions rolled back, binlog synced).
    Serve {
        /// The data directory (created if missing) [config: data_dir].
        #[arg(long, env = "RINGREP_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// This node's server id, written into its binlog (default 1) [config: server_id].
        #[arg(long, env = "RINGREP_SERVER_ID")]
        server_id: Option<u32>,
        /// Binlog sync policy: commit, never, or milliseconds (default commit) [config: sync].
        #[arg(long, env = "RINGREP_SYNC")]
        sync: Option<String>,
        #[command(flatten)]
        server: ServeArgs,
    },
    /// The Kafka relay (not built yet: issue 7).
    Relay {
        #[arg(long)]
        data_dir: PathBuf,
    },
}

fn main() -> ExitCode {
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
            for stmt in ringrep_source::sql::split_statements(&script) {
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
        Command::Backup { data_dir, to } => {
            let (engine, _) = Engine::open(&data_dir, EngineConfig::new(1))
                .with_context(|| format!("opening {}", data_dir.display()))?;
            let seq = engine.backup(&to)?;
            println!(
                "backup of {} at seq {seq} written to {}",
                data_dir.display(),
                to.display()
            );
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
        } => serve(data_dir, server_id, sync, server),
        Command::Relay { .. } => anyhow::bail!("relay: the Kafka relay is not built yet (issue 7)"),
    }
}

fn serve(
    data_dir: Option<PathBuf>,
    server_id: Option<u32>,
    sync: Option<String>,
    args: ServeArgs,
) -> anyhow::Result<ExitCode> {
    ringrep_source::server::init_logging();
    let file = match &args.config {
        Some(path) => FileConfig::load(path).map_err(anyhow::Error::msg)?,
        None => FileConfig::default(),
    };
    let settings = ServerSettings::resolve(&args, &file, ServerSettings::DEFAULT_PRIMARY_LISTEN)
        .map_err(anyhow::Error::msg)?;
    let data_dir = data_dir
        .or(file.data_dir.clone())
        .context("--data-dir (or data_dir in the config file) is required")?;
    let mut cfg = EngineConfig::new(server_id.or(file.server_id).unwrap_or(1));
    cfg.sync = sync
        .or(file.sync.clone())
        .as_deref()
        .unwrap_or("commit")
        .parse::<SyncPolicy>()?;
    let (engine, report) =
        Engine::open(&data_dir, cfg).with_context(|| format!("opening {}", data_dir.display()))?;
    tracing::info!(
        "primary {} open at seq {} (server id {}, replayed {})",
        data_dir.display(),
        report.last_seq,
        engine.config().server_id,
        report.replayed
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let server = Server::bind(engine.clone(), &settings).await?;
        tracing::info!("listening on {}", server.local_addr()?);
        let purge = ringrep_source::server::spawn_ttl_purge(engine.clone());
        let report = server.run(ringrep_source::server::stop_signal()).await?;
        purge.abort();
        tracing::info!(
            "stopped: {} connection(s) served, {} closed at shutdown; binlog synced at seq {}",
            report.connections_accepted,
            report.connections_closed_at_shutdown,
            engine.last_seq()
        );
        Ok(ExitCode::SUCCESS)
    })
}
