//! `ringrep-mysqltest`: replays mysqltest transcripts against a fresh ringrep engine and
//! compares every statement's output.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use integration::mysqltest::{load_deviations, record, run_file, RunReport};

#[derive(Parser)]
#[command(
    name = "ringrep-mysqltest",
    version,
    about = "Replay mysqltest .result transcripts against ringrep"
)]
struct Cli {
    /// Transcripts (.result files) or folders holding them (searched recursively).
    paths: Vec<PathBuf>,
    /// Deviations file (TOML): statements where the spec overrides a recording.
    #[arg(long)]
    deviations: Option<PathBuf>,
    /// Folder that deviation `file` entries are relative to (default: the first path).
    #[arg(long)]
    base: Option<PathBuf>,
    /// Rewrite each transcript with what ringrep prints now.
    #[arg(long)]
    record: bool,
    /// Print only the summary lines.
    #[arg(long, short)]
    quiet: bool,
}

fn transcripts(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for e in entries {
            transcripts(&e, out);
        }
    } else if p.extension().is_some_and(|e| e == "result") {
        out.push(p.to_path_buf());
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ringrep-mysqltest: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<bool> {
    let mut files = Vec::new();
    for p in &cli.paths {
        if !p.exists() {
            anyhow::bail!("{} does not exist", p.display());
        }
        transcripts(p, &mut files);
    }
    if cli.record {
        for f in &files {
            let text = std::fs::read_to_string(f)?;
            std::fs::write(f, record(&text)?)?;
            println!("recorded {}", f.display());
        }
        return Ok(true);
    }
    let deviations = match &cli.deviations {
        Some(d) => load_deviations(d)?,
        None => vec![],
    };
    let base = cli
        .base
        .clone()
        .or_else(|| cli.paths.first().filter(|p| p.is_dir()).cloned())
        .unwrap_or_default();
    let mut total = RunReport::default();
    for f in &files {
        let rel = f
            .strip_prefix(&base)
            .unwrap_or(f)
            .to_string_lossy()
            .into_owned();
        let report = run_file(f, &rel, &deviations)?;
        if !cli.quiet {
            for m in &report.mismatches {
                let tag = if m.deviation.is_some() {
                    "DEVIATION"
                } else {
                    "FAIL"
                };
                println!(
                    "{tag} {rel}:{}: {}",
                    m.line,
                    m.statement.lines().next().unwrap_or("")
                );
                if let Some(r) = &m.deviation {
                    println!("    reason: {r}");
                } else {
                    for l in &m.expected {
                        println!("    expected| {l}");
                    }
                    for l in &m.actual {
                        println!("    actual  | {l}");
                    }
                }
            }
        }
        println!(
            "{rel}: {} passed, {} failed, {} deviations",
            report.passed, report.failed, report.deviations
        );
        total.add(report);
    }
    for s in &total.stale_deviations {
        println!("stale deviation: {s}");
    }
    let pct = 100.0 * (total.passed as f64) / (total.total().max(1) as f64);
    println!("total: {} statements, {:.1}% pass", total.total(), pct);
    let kinds: Vec<String> = total
        .by_kind
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    println!("deviations: {} ({})", total.deviations, kinds.join(", "));
    println!(
        "{} passed, {} failed, {} deviations",
        total.passed, total.failed, total.deviations
    );
    Ok(total.failed == 0 && total.stale_deviations.is_empty())
}
