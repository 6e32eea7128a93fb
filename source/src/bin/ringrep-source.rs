//! `ringrep-source`: SQL against a data directory, backup and restore. The server (`serve`)
//! and the Kafka relay (`relay`) are not built yet.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use binlog_format::SyncPolicy;
use clap::{Parser, Subcommand};
use ringrep_source::sql::{client_error_line, Outcome, SqlSession};
use ringrep_source::{Engine, EngineConfig};

#[derive(Parser)]
#[command(
    name = "ringrep-source",
    version,
    about = "ringrep primary: SQL, backup and restore"
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
    /// The MySQL-protocol server (not built yet: issue 6).
    Serve {
        #[arg(long)]
        data_dir: PathBuf,
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
        Command::Sql { data_dir, execute, force, server_id, sync, file } => {
            let script = match (execute, file) {
                (Some(e), _) => e,
                (None, Some(f)) => std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?,
                (None, None) => {
                    let mut s = String::new();
                    std::io::stdin().read_to_string(&mut s)?;
                    s
                }
            };
            let mut cfg = EngineConfig::new(server_id);
            cfg.sync = sync.parse::<SyncPolicy>()?;
            let (engine, _) = Engine::open(&data_dir, cfg).with_context(|| format!("opening {}", data_dir.display()))?;
            let mut session = SqlSession::new(&engine);
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let mut failed = false;
            for stmt in ringrep_source::sql::split_statements(&script) {
                match session.execute(&stmt) {
                    Ok(Outcome::Rows { columns, rows }) => {
                        writeln!(out, "{}", columns.join("\t"))?;
                        for r in rows {
                            writeln!(out, "{}", r.iter().map(field).collect::<Vec<_>>().join("\t"))?;
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
            Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
        Command::Backup { data_dir, to } => {
            let (engine, _) = Engine::open(&data_dir, EngineConfig::new(1)).with_context(|| format!("opening {}", data_dir.display()))?;
            let seq = engine.backup(&to)?;
            println!("backup of {} at seq {seq} written to {}", data_dir.display(), to.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Restore { from, data_dir } => {
            let seq = Engine::restore(&from, &data_dir)?;
            println!("restored {} into {} (state at seq {seq}; its binlog continues at {})", from.display(), data_dir.display(), seq + 1);
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { .. } => anyhow::bail!("serve: the MySQL-protocol server is not built yet (issue 6); use `ringrep-source sql` or ringrep-demo"),
        Command::Relay { .. } => anyhow::bail!("relay: the Kafka relay is not built yet (issue 7)"),
    }
}
