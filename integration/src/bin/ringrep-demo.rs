//! `ringrep-demo`: the whole pipeline on one machine with embedded defaults.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use integration::pipeline::{run_demo, DemoOptions};

#[derive(Parser)]
#[command(
    name = "ringrep-demo",
    version,
    about = "Run a primary, a replica, a ring-buffer workload and the verifier, and print a summary"
)]
struct Cli {
    /// Distinct users (ring prefixes).
    #[arg(long, default_value_t = 1000)]
    users: u64,
    /// Events inserted per user on average.
    #[arg(long, default_value_t = 40)]
    events_per_user: u64,
    /// Ring size (MAX_ROWS_PER_PK).
    #[arg(long, default_value_t = 16)]
    ring_size: u32,
    /// Inserts per second across all writers (0: as fast as possible).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// TTL of events in seconds (0: no TTL).
    #[arg(long, default_value_t = 0)]
    ttl: u32,
    /// Concurrent writer sessions.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Seed of the workload.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Binlog sync policy: commit (durable, group commit), never, or milliseconds.
    #[arg(long, default_value = "commit")]
    sync: String,
    /// Keep the data directories here instead of a temporary directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ringrep-demo: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<bool> {
    let tmp = tempfile::tempdir()?;
    let data_dir = cli
        .data_dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let opts = DemoOptions {
        users: cli.users,
        events_per_user: cli.events_per_user,
        ring_size: cli.ring_size,
        rate: cli.rate,
        ttl_secs: (cli.ttl > 0).then_some(cli.ttl),
        writers: cli.writers,
        seed: cli.seed,
        sync: cli.sync.parse()?,
        data_dir: data_dir.clone(),
        progress: true,
    };
    println!(
        "ringrep demo: primary and replica in {}",
        data_dir.display()
    );
    println!(
        "workload: {} users x {} events into user_events (MAX_ROWS_PER_PK={}{}), {} writers, sync={}",
        opts.users,
        opts.events_per_user,
        opts.ring_size,
        opts.ttl_secs.map(|t| format!(", TTL={t}s")).unwrap_or_default(),
        opts.writers,
        cli.sync
    );
    let summary = run_demo(&opts)?;
    print!("{}", summary.report.text());
    print!("{}", summary.text());
    if cli.data_dir.is_some() {
        println!("data kept in {}; verify again with: ringrep-applier verify --primary {}/primary --replica {}/replica", data_dir.display(), data_dir.display(), data_dir.display());
    }
    Ok(summary.report.converged)
}
