//! RonDB's own ring-buffer suites (`../shared/conformance`), run as mysqltest runs them: each
//! recording's `.test` script against fresh ringrep nodes (the replication suite on a source
//! and a real replica with the applier between them), its output compared with the recording
//! statement by statement. Every statement must pass or be a listed deviation
//! (integration/conformance/deviations.toml) whose first line still matches.
//!
//! The script is the shared one when it belongs to the same revision as its recording, else
//! the project's (`integration/conformance/t/<suite>/<name>.test`, written for the
//! recording). Includes come from `integration/conformance/include`. Skips with a message
//! when the shared folder is absent.

use std::path::{Path, PathBuf};

use integration::mysqltest::{
    compare_run, load_deviations, run_script, RunEnv, RunReport, Topology,
};

fn conformance_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance");
    dir.is_dir().then_some(dir)
}

fn project_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance")
}

/// `ringrep-binlog`, which `cargo test --workspace` builds next to this test's folder.
fn binlog_tool() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let tool = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("ringrep-binlog"))
        .expect("target folder");
    assert!(
        tool.is_file(),
        "{} is not built: run `cargo test --workspace` (or `cargo build -p binlog-format`)",
        tool.display()
    );
    tool
}

/// The recordings of both suites, sorted.
fn recordings(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["ndb_ring_buffer/r", "ndb_rpl/r"]
        .iter()
        .flat_map(|d| {
            std::fs::read_dir(dir.join(d))
                .expect("suite folder")
                .flatten()
                .map(|e| e.path())
        })
        .filter(|p| p.extension().is_some_and(|e| e == "result"))
        .collect();
    files.sort();
    files
}

fn print_failures(rel: &str, report: &RunReport) {
    for m in report.mismatches.iter().filter(|m| m.deviation.is_none()) {
        eprintln!(
            "FAIL {rel}:{}: {}\n  expected: {:?}\n  actual:   {:?}",
            m.line,
            m.statement.lines().next().unwrap_or(""),
            m.expected,
            m.actual
        );
    }
}

fn check_total(total: &RunReport, what: &str) {
    eprintln!(
        "conformance ({what}): {} statements, {} passed ({:.1}%), {} listed deviations {:?}",
        total.total(),
        total.passed,
        100.0 * total.passed as f64 / total.total().max(1) as f64,
        total.deviations,
        total.by_kind
    );
    assert!(
        total.stale_deviations.is_empty(),
        "stale deviation entries: {:#?}",
        total.stale_deviations
    );
    assert_eq!(
        total.failed, 0,
        "statements that neither pass nor are listed deviations (see stderr)"
    );
    assert!(
        total.total() > 1000,
        "the recordings hold over 1000 statements"
    );
}

#[test]
fn rondb_test_scripts_reproduce_their_recordings_or_are_listed_deviations() {
    let Some(dir) = conformance_dir() else {
        eprintln!("skipping: ../shared/conformance is not present next to the checkout");
        return;
    };
    let deviations =
        load_deviations(&project_dir().join("deviations.toml")).expect("deviations.toml");
    // A deviation allows one output, the one it records, so that a change in what ringrep
    // does there is seen.
    let unrecorded: Vec<String> = deviations
        .iter()
        .filter(|d| d.prints.is_none())
        .map(|d| format!("{}:{}", d.file, d.line))
        .collect();
    assert!(
        unrecorded.is_empty(),
        "deviations without `prints`: {unrecorded:?}"
    );
    let env = RunEnv {
        includes: vec![project_dir().join("include")],
        mysql_client: ringrep_testkit::node::mysql_client().map(str::to_string),
        binlog_tool: Some(binlog_tool()),
    };
    let files = recordings(&dir);
    assert!(
        files.len() >= 13,
        "expected the 13 recorded transcripts, found {}",
        files.len()
    );
    let mut total = RunReport::default();
    for f in &files {
        let rel = f
            .strip_prefix(&dir)
            .expect("inside")
            .to_string_lossy()
            .into_owned();
        let suite = rel.split('/').next().expect("suite");
        let name = f.file_stem().expect("name").to_string_lossy().into_owned();
        let own = project_dir()
            .join("t")
            .join(suite)
            .join(format!("{name}.test"));
        let script = if own.is_file() {
            own
        } else {
            dir.join(suite).join("t").join(format!("{name}.test"))
        };
        let topology = if suite.contains("rpl") {
            Topology::SourceReplica
        } else {
            Topology::Single
        };
        let run = run_script(&script, topology, &env)
            .unwrap_or_else(|e| panic!("{}: {e:#}", script.display()));
        assert!(
            run.stopped.is_none(),
            "{} stopped: {:?}",
            script.display(),
            run.stopped
        );
        assert!(
            run.skipped.is_none(),
            "{} skipped itself: {:?}",
            script.display(),
            run.skipped
        );
        // Every variable the suites read is one mtr sets, or one they set themselves.
        assert!(
            run.notes.is_empty(),
            "{}: {:#?}",
            script.display(),
            run.notes
        );
        let recorded = std::fs::read_to_string(f).expect("recording");
        let report = compare_run(&recorded, &run, &rel, &deviations);
        print_failures(&rel, &report);
        total.add(report);
    }
    check_total(&total, "scripts");
    // What the runner cannot do and what ringrep did not support are gone from the list:
    // every deviation left is one where the spec overrides a recording.
    assert_eq!(
        total.by_kind.keys().collect::<Vec<_>>(),
        vec!["spec"],
        "deviation kinds {:?}",
        total.by_kind
    );
}
