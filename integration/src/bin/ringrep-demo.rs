//! `ringrep-demo`: the whole pipeline on one machine with embedded defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use integration::pipeline::{run_demo_with, DemoOptions, Endpoints};

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
    /// Where the primary serves the MySQL protocol (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    primary_listen: SocketAddr,
    /// Where the replica serves reads.
    #[arg(long, default_value = "127.0.0.1:0")]
    replica_listen: SocketAddr,
    /// After the summary, keep both nodes serving until Ctrl-C, to look around with a client.
    #[arg(long)]
    keep_serving: bool,
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
        primary_listen: cli.primary_listen,
        replica_listen: cli.replica_listen,
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
    let mut on_listen = |e: &Endpoints| {
        println!(
            "primary serving MySQL on {}, replica (read-only) on {}",
            e.primary, e.replica
        );
        if cli.keep_serving {
            println!(
                "  try: mariadb -h {} -P {} -u root test -e 'SELECT * FROM user_events LIMIT 5'",
                e.replica.ip(),
                e.replica.port()
            );
        }
    };
    let keep: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>> =
        cli.keep_serving.then(|| {
            Box::pin(async {
                println!("workload done and replica caught up; serving until Ctrl-C");
                let _ = tokio::signal::ctrl_c().await;
            }) as _
        });
    let summary = run_demo_with(&opts, &mut on_listen, keep)?;
    print!("{}", summary.report.text());
    print!("{}", summary.text());
    if cli.data_dir.is_some() {
        println!("data kept in {}; verify again with: ringrep-applier verify --primary {}/primary --replica {}/replica", data_dir.display(), data_dir.display(), data_dir.display());
    }
    Ok(summary.report.converged)
}
