//! The project's own SQL tests: transcripts in integration/suite, statement by statement,
//! with no deviations allowed. Regenerate one after a deliberate change with
//! `ringrep-mysqltest --record integration/suite/NAME.result` and review the diff.

use std::path::PathBuf;

use integration::mysqltest::run_file;

#[test]
fn project_suite_passes_every_statement() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("suite");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("suite folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "result"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no transcripts in {}", dir.display());
    let mut failures = Vec::new();
    let mut passed = 0;
    for f in &files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let report = run_file(f, &name, &[]).expect("run transcript");
        passed += report.passed;
        for m in report.mismatches {
            failures.push(format!(
                "{name}:{}: {}\n  expected: {:?}\n  actual:   {:?}",
                m.line,
                m.statement.lines().next().unwrap_or(""),
                m.expected,
                m.actual
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} statements differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        passed > 100,
        "the suite holds the spec's examples ({passed} statements)"
    );
}
