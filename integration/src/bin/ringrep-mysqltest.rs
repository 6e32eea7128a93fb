//! `ringrep-mysqltest`: runs mysqltest `.test` scripts against fresh ringrep nodes and compares
//! what they print with their `.result` recordings, or replays `.result` transcripts on their
//! own; either way statement by statement.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use integration::mysqltest::{
    compare_run, load_deviations, record, run_file, run_script, RunEnv, RunReport, Topology,
};

fn is_script(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "test")
}

/// `suite/t/name.test` -> `suite/r/name.result` (mysqltest's layout); a script outside a
/// `t/` folder is recorded beside itself.
fn recording_of(script: &Path) -> anyhow::Result<PathBuf> {
    let name = script
        .file_stem()
        .ok_or_else(|| anyhow::anyhow!("{}: no file name", script.display()))?;
    let dir = script.parent().unwrap_or(Path::new("."));
    let r = match dir.file_name() {
        Some(t) if t == "t" => dir.with_file_name("r"),
        _ => dir.to_path_buf(),
    };
    Ok(r.join(name).with_extension("result"))
}

fn topology(cli: &Cli, script: &Path) -> Topology {
    // The suite is the folder above `t/` (mysqltest's layout) or the script's own folder.
    let rpl_suite = script
        .ancestors()
        .skip(1)
        .take(2)
        .filter_map(|s| s.file_name())
        .any(|n| n.to_string_lossy().contains("rpl"));
    if cli.replica || rpl_suite {
        Topology::SourceReplica
    } else {
        Topology::Single
    }
}

#[derive(Parser)]
#[command(
    name = "ringrep-mysqltest",
    version,
    about = "Run mysqltest .test scripts (or replay .result transcripts) against ringrep"
)]
struct Cli {
    /// Scripts (.test files, compared with the .result of the same name in the suite's `r/`
    /// folder), transcripts (.result files), or folders holding either (searched
    /// recursively; a folder's .result files are replayed unless --scripts).
    paths: Vec<PathBuf>,
    /// In folders, run the .test scripts rather than replaying the .result files.
    #[arg(long)]
    scripts: bool,
    /// Folders `--source` looks in after the script's own folder (repeatable); ringrep's own
    /// versions of the standard includes (integration/conformance/include) come last.
    #[arg(long = "include")]
    includes: Vec<PathBuf>,
    /// Run scripts with a replica fed from the source (`master` and `slave` connections);
    /// the default for scripts in a suite whose name holds `rpl`.
    #[arg(long)]
    replica: bool,
    /// The recording to compare a single script with (default: `../r/NAME.result` beside
    /// the script's `t/` folder).
    #[arg(long)]
    result: Option<PathBuf>,
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
    /// Also print what ringrep printed for each listed deviation.
    #[arg(long)]
    show_deviations: bool,
}

fn transcripts(p: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for e in entries {
            transcripts(&e, ext, out);
        }
    } else if p.extension().is_some_and(|e| e == ext) {
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
        let ext = if cli.scripts || p.extension().is_some_and(|e| e == "test") {
            "test"
        } else {
            "result"
        };
        transcripts(p, ext, &mut files);
    }
    let standard = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/conformance/include"));
    let env = RunEnv {
        includes: cli
            .includes
            .iter()
            .cloned()
            .chain(standard.is_dir().then_some(standard))
            .collect(),
        mysql_client: ["mariadb", "mysql"]
            .into_iter()
            .find(|c| {
                std::process::Command::new(c)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .map(str::to_string),
        binlog_tool: std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join("ringrep-binlog")))
            .filter(|p| p.is_file()),
    };
    if cli.record {
        for f in &files {
            if is_script(f) {
                let result = recording_of(f)?;
                let run = run_script(f, topology(&cli, f), &env)?;
                let problems: std::collections::BTreeSet<usize> =
                    run.problems.iter().map(|p| p.script_line).collect();
                println!(
                    "{}: {} statements run, {} script lines with problems, {} notes, {}",
                    f.display(),
                    run.statements.len(),
                    problems.len(),
                    run.notes.len(),
                    match &run.stopped {
                        Some(why) => format!("stopped: {why}"),
                        None => "ran to its end".to_string(),
                    }
                );
                let mut text = run.lines.join("\n");
                text.push('\n');
                std::fs::write(&result, text)?;
                for p in &run.problems {
                    println!("{}:{}: {}", f.display(), p.script_line, p.text);
                }
                println!("recorded {}", result.display());
            } else {
                let text = std::fs::read_to_string(f)?;
                std::fs::write(f, record(&text)?)?;
                println!("recorded {}", f.display());
            }
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
        let report = if is_script(f) {
            let result = match &cli.result {
                Some(r) if files.len() == 1 => r.clone(),
                Some(_) => anyhow::bail!("--result goes with a single script"),
                None => recording_of(f)?,
            };
            let rel = result
                .strip_prefix(&base)
                .unwrap_or(&result)
                .to_string_lossy()
                .into_owned();
            let recorded = std::fs::read_to_string(&result)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", result.display()))?;
            let run = run_script(f, topology(&cli, f), &env)?;
            for n in &run.notes {
                println!("note {}:{}: {}", f.display(), n.script_line, n.text);
            }
            if let Some(why) = &run.stopped {
                println!("{rel}: stopped before its end: {why}");
            }
            if let Some(why) = &run.skipped {
                println!("{rel}: skipped: {why}");
                continue;
            }
            compare_run(&recorded, &run, &rel, &deviations)
        } else {
            run_file(f, &rel, &deviations)?
        };
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
                    if cli.show_deviations {
                        for l in &m.actual {
                            println!("    actual  | {l}");
                        }
                    }
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
