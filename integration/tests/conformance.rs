//! RonDB's own ring-buffer suite (`../shared/conformance`), replayed statement by statement.
//! Every statement must pass or be a listed deviation (integration/conformance/deviations.toml)
//! whose first line still matches. Skips with a message when the shared folder is absent.

use std::path::PathBuf;

use integration::mysqltest::{load_deviations, run_file, RunReport};

fn conformance_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance");
    dir.is_dir().then_some(dir)
}

#[test]
fn rondb_transcripts_pass_or_are_listed_deviations() {
    let Some(dir) = conformance_dir() else {
        eprintln!("skipping: ../shared/conformance is not present next to the checkout");
        return;
    };
    let deviations = load_deviations(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance/deviations.toml"),
    )
    .expect("deviations.toml");
    let mut total = RunReport::default();
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
    assert!(
        files.len() >= 13,
        "expected the 13 recorded transcripts, found {}",
        files.len()
    );
    for f in &files {
        let rel = f
            .strip_prefix(&dir)
            .expect("inside")
            .to_string_lossy()
            .into_owned();
        let report = run_file(f, &rel, &deviations).expect("run transcript");
        for m in report.mismatches.iter().filter(|m| m.deviation.is_none()) {
            eprintln!(
                "FAIL {rel}:{}: {}\n  expected: {:?}\n  actual:   {:?}",
                m.line,
                m.statement.lines().next().unwrap_or(""),
                m.expected,
                m.actual
            );
        }
        total.add(report);
    }
    eprintln!(
        "conformance: {} statements, {} passed ({:.1}%), {} listed deviations {:?}",
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
        "the transcripts hold over 1000 statements"
    );
}
