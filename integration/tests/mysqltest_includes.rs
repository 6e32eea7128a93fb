//! What the mysqltest runner provides to RonDB's suites, checked with scripts written in their
//! style (integration/tests/mysqltest/<suite>/t, recordings in .../r): the standard includes
//! (integration/conformance/include), MySQL 8's error names, mtr's variables with real ports
//! and folders, START BACKUP and ndb_restore. Each script must reproduce its recording with no
//! problem and no variable read unset. Then: an unknown include, error name and variable are
//! reported by name and line, and the script goes on.

use std::path::{Path, PathBuf};

use integration::mysqltest::{compare_run, run_script, RunEnv, RunOutput, Topology};

fn env() -> RunEnv {
    RunEnv {
        includes: vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance/include")],
        mysql_client: None,
        binlog_tool: None,
    }
}

fn run(script: &Path, topology: Topology) -> RunOutput {
    run_script(script, topology, &env()).unwrap_or_else(|e| panic!("{}: {e:#}", script.display()))
}

#[test]
fn scripts_in_rondbs_style_reproduce_their_recordings() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mysqltest");
    let mut ran = Vec::new();
    for suite in ["ndb_ring_buffer", "ndb_rpl"] {
        let mut scripts: Vec<PathBuf> = std::fs::read_dir(root.join(suite).join("t"))
            .expect("suite folder")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "test"))
            .collect();
        scripts.sort();
        for script in scripts {
            let name = script
                .file_stem()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let topology = if suite.contains("rpl") {
                Topology::SourceReplica
            } else {
                Topology::Single
            };
            let out = run(&script, topology);
            assert!(out.skipped.is_none(), "{name} skipped: {:?}", out.skipped);
            assert!(out.stopped.is_none(), "{name} stopped: {:?}", out.stopped);
            assert!(out.problems.is_empty(), "{name}: {:#?}", out.problems);
            assert!(out.notes.is_empty(), "{name}: {:#?}", out.notes);
            let rel = format!("{suite}/r/{name}.result");
            let recorded = std::fs::read_to_string(root.join(&rel)).expect("recording");
            let report = compare_run(&recorded, &out, &rel, &[]);
            assert!(
                report.mismatches.is_empty(),
                "{rel}: {:#?}",
                report.mismatches
            );
            assert!(report.passed > 10, "{rel}: {} statements", report.passed);
            ran.push(name);
        }
    }
    assert_eq!(
        ran,
        [
            "multi_server_backup",
            "node_restart",
            "regex_errors_asserts",
            "ndb_rpl_conflict_log",
            "ndb_rpl_includes",
            "ndb_rpl_restart"
        ]
    );
}

fn script(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.test");
    std::fs::write(&path, text).expect("script");
    (dir, path)
}

#[test]
fn unknown_includes_error_names_and_variables_are_named_with_their_lines() {
    let (_dir, path) = script(
        "--source include/have_ndb.inc\n\
         --source include/no_such_file.inc\n\
         --error ER_NO_SUCH_ERROR_NAME\n\
         SELECT * FROM test.no_such_table;\n\
         --error ER_NO_SUCH_ERROR_NAME\n\
         SELECT 1 AS succeeds;\n\
         --echo [$NO_SUCH_VARIABLE]\n\
         SELECT 2 AS still_runs;\n",
    );
    let out = run(&path, Topology::Single);
    let problems: Vec<(usize, &str)> = out
        .problems
        .iter()
        .map(|p| (p.script_line, p.text.as_str()))
        .collect();
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert_eq!(problems[0].0, 2);
    assert!(problems[0].1.contains("--source include/no_such_file.inc"));
    assert_eq!(problems[1].0, 3);
    assert!(problems[1].1.contains("ER_NO_SUCH_ERROR_NAME"));
    // The statement after an unknown name may fail with any error; one that succeeds is
    // a problem, as with any --error.
    assert_eq!(problems[2].0, 5);
    assert_eq!(problems[3].0, 6);
    assert!(problems[3]
        .1
        .contains("succeeded, but an error was expected"));
    assert_eq!(out.notes.len(), 1, "{:#?}", out.notes);
    assert_eq!(out.notes[0].script_line, 7);
    assert!(out.notes[0].text.contains("$NO_SUCH_VARIABLE"));
    let tail: Vec<&str> = out.lines.iter().rev().take(4).map(String::as_str).collect();
    assert_eq!(tail, ["2", "still_runs", "SELECT 2 AS still_runs;", "[]"]);
}

#[test]
fn problems_inside_an_include_name_it_and_belong_to_the_line_that_sourced_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("include")).expect("folder");
    std::fs::write(
        dir.path().join("include/broken.inc"),
        "--echo in the include\n--error ER_NOT_A_REAL_NAME\nSELECT 1;\n",
    )
    .expect("include");
    let path = dir.path().join("x.test");
    std::fs::write(&path, "SELECT 0;\n--source include/broken.inc\n").expect("script");
    let out = run(&path, Topology::Single);
    assert_eq!(out.problems[0].script_line, 2);
    assert!(
        out.problems[0]
            .text
            .starts_with("include/broken.inc:2: --error ER_NOT_A_REAL_NAME"),
        "{:?}",
        out.problems[0].text
    );
}

/// The ports are real: a MySQL server greets on each (protocol version 10), and commands
/// `--exec` and `--perl` run see mtr's variables in their environment.
#[test]
fn the_standard_ports_serve_mysql_and_reach_commands_through_the_environment() {
    let (_dir, path) = script(
        "--perl\n\
         use IO::Socket::INET;\n\
         for my $v (qw(MASTER_MYPORT MASTER_MYPORT1 SLAVE_MYPORT SLAVE_MYPORT1)) {\n\
         my $s = IO::Socket::INET->new(\"127.0.0.1:$ENV{$v}\") or die \"$v: $!\";\n\
         sysread($s, my $b, 5) == 5 or die \"$v: no greeting\";\n\
         print \"$v greets with protocol \", ord(substr($b, 4, 1)), \"\\n\";\n\
         }\n\
         EOF\n\
         --exec test -d \"$NDB_BACKUP_DIR\" && test -f \"$NDB_TOOLS_OUTPUT\" && test -d \"$MYSQLD_DATADIR\" && echo folders exist\n",
    );
    let out = run(&path, Topology::SourceReplica);
    assert!(out.problems.is_empty(), "{:#?}", out.problems);
    assert_eq!(
        out.lines,
        [
            "MASTER_MYPORT greets with protocol 10",
            "MASTER_MYPORT1 greets with protocol 10",
            "SLAVE_MYPORT greets with protocol 10",
            "SLAVE_MYPORT1 greets with protocol 10",
            "folders exist",
        ]
    );
    let names: Vec<&str> = out.variables.iter().map(|(k, _)| k.as_str()).collect();
    for v in [
        "MASTER_MYPORT",
        "MASTER_MYPORT1",
        "SLAVE_MYPORT",
        "SLAVE_MYPORT1",
        "MYSQLTEST_VARDIR",
        "MYSQL_TMP_DIR",
        "MYSQLD_DATADIR",
        "NDB_BACKUP_DIR",
        "NDB_BACKUPS",
        "NDB_TOOLS_OUTPUT",
        "NDB_MGM",
        "NDB_RESTORE",
        "NDB_WAITER",
        "NDB_CONNECTSTRING",
    ] {
        assert!(names.contains(&v), "{v} is not among {names:?}");
    }
}

#[test]
fn a_script_that_dies_stops_there_and_says_why() {
    let (_dir, path) = script("SELECT 1 AS before;\n--die enough of this\nSELECT 2 AS after;\n");
    let out = run(&path, Topology::Single);
    let why = out.stopped.expect("stopped");
    assert!(why.contains("line 2: die: enough of this"), "{why}");
    assert_eq!(out.lines, ["SELECT 1 AS before;", "before", "1"]);
}

/// `--error` takes a SQLSTATE as `S` and five characters: another SQLSTATE than the
/// statement's is a wrong error, and a malformed one is named with its line.
#[test]
fn a_wrong_or_malformed_sqlstate_is_a_problem_with_its_line() {
    let (_dir, path) = script(
        "--error S42S02\n\
         SELECT * FROM test.no_such_table;\n\
         --error S42S01\n\
         SELECT * FROM test.no_such_table;\n\
         --error S4202\n\
         SELECT 1 AS after_a_malformed_sqlstate;\n",
    );
    let out = run(&path, Topology::Single);
    let problems: Vec<(usize, &str)> = out
        .problems
        .iter()
        .map(|p| (p.script_line, p.text.as_str()))
        .collect();
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert_eq!(problems[0].0, 4);
    assert!(
        problems[0]
            .1
            .contains("wrong errno 1146 (42S02): 'Table 'test.no_such_table' doesn't exist', instead of S42S01"),
        "{}",
        problems[0].1
    );
    assert_eq!(problems[1].0, 5);
    assert!(
        problems[1]
            .1
            .contains("S4202: a SQLSTATE is S and exactly 5 characters"),
        "{}",
        problems[1].1
    );
    // The malformed entry takes any error, so the success after it is one.
    assert_eq!(problems[2].0, 6);
    assert!(problems[2]
        .1
        .contains("succeeded, but an error was expected"));
}

/// A failing `assert_grep.inc` prints what it found and is a problem of the run, which goes
/// on; a malformed `--replace_regex` is named with its line and the next statement's output
/// is left as it is.
#[test]
fn a_failing_assert_grep_and_a_malformed_replace_regex_are_problems() {
    let (dir, path) = script(
        "--let $assert_file = $MYSQLTEST_VARDIR/log/mysqld.1.1.err\n\
         --let $assert_select = not using conflict function\n\
         --let $assert_count_condition = >= 1\n\
         --let $assert_text = The server logged the dropped conflict function\n\
         --source include/assert_grep.inc\n\
         --replace_regex /unclosed/x\n\
         SELECT 'unclosed' AS still_runs;\n",
    );
    let out = run(&path, Topology::Single);
    drop(dir);
    let problems: Vec<(usize, &str)> = out
        .problems
        .iter()
        .map(|p| (p.script_line, p.text.as_str()))
        .collect();
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert_eq!(problems[0].0, 5);
    assert!(
        problems[0].1.starts_with("include/assert_grep.inc:"),
        "{}",
        problems[0].1
    );
    assert!(
        problems[0].1.contains("perl exited with 1"),
        "{}",
        problems[0].1
    );
    assert_eq!(problems[1].0, 6);
    assert!(
        problems[1]
            .1
            .contains("the replacement of \"/unclosed/x\" does not end with /"),
        "{}",
        problems[1].1
    );
    assert_eq!(
        out.lines,
        [
            "include/assert_grep.inc failed!",
            "assert_text: 'The server logged the dropped conflict function'",
            "assert_select: 'not using conflict function'",
            "number of matching lines: 0",
            "SELECT 'unclosed' AS still_runs;",
            "still_runs",
            "unclosed",
        ]
    );
    assert!(out.notes.is_empty(), "{:#?}", out.notes);
}
