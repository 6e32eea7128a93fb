//! `ringrep-source sql` as a user runs it.

use std::process::Command;

use ringrep_engine::{Engine, EngineConfig};

fn sql(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .arg("sql")
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("run ringrep-source");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn sql_prints_batch_results_and_errors_and_keeps_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let create = "CREATE TABLE user_events (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), \
                  event_type VARCHAR(64), payload VARCHAR(256), PRIMARY KEY (user_id, ring_idx)) ENGINE=NDB COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=2';
                  INSERT INTO user_events (user_id, event_type, payload) VALUES (1, 'a', 'x\ty'), (1, 'b', NULL), (1, 'c', 'z');";
    let (code, out, err) = sql(dir.path(), &["-e", create]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty());
    // A second run sees the data: the data directory is durable.
    let (code, out, _) = sql(
        dir.path(),
        &[
            "-e",
            "SELECT user_id, ring_idx, event_type, payload FROM user_events ORDER BY ring_idx",
        ],
    );
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "user_id\tring_idx\tevent_type\tpayload\n1\t1\tc\tz\n1\t2\tb\tNULL\n"
    );
    // Errors: MySQL's format on stderr, exit 1, stop at the first one unless --force.
    let (code, out, err) = sql(dir.path(), &["-e", "DELETE FROM user_events; SELECT 1"]);
    assert_eq!(code, 1);
    assert!(out.is_empty(), "stopped before SELECT: {out}");
    assert!(err.starts_with("ERROR 1031 (HY000): Table storage engine for 'DELETE on ring-buffer table must give every PK-prefix column"), "{err}");
    let (code, out, _) = sql(
        dir.path(),
        &[
            "--force",
            "-e",
            "SELECT nope FROM user_events; SELECT 2 AS two",
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(out, "two\n2\n");
    // Bad SQL is an error, never a panic.
    let (code, _, err) = sql(dir.path(), &["-e", "SELEKT ))) FROM"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("ERROR 1064 (42000)"), "{err}");
}

#[test]
fn sql_refuses_a_directory_a_running_node_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_engine, _) = Engine::open(dir.path(), EngineConfig::new(1)).expect("open");
    let (code, _, err) = sql(dir.path(), &["-e", "SELECT 1"]);
    assert_eq!(code, 1);
    assert!(err.contains("in use by a running ringrep node"), "{err}");
}

#[test]
fn backup_and_restore_continue_every_ring() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    let (code, _, err) = sql(&src, &["-e", "CREATE TABLE r (id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), v INT, PRIMARY KEY (id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'; INSERT INTO r (id, v) VALUES (1, 1), (1, 2), (1, 3), (1, 4)"]);
    assert_eq!(code, 0, "{err}");
    let run = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
            .args(args)
            .output()
            .expect("run")
    };
    let backup = dir.path().join("backup");
    let restored = dir.path().join("restored");
    let out = run(&[
        "backup".as_ref(),
        "--data-dir".as_ref(),
        src.as_os_str(),
        "--to".as_ref(),
        backup.as_os_str(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&[
        "restore".as_ref(),
        "--from".as_ref(),
        backup.as_os_str(),
        "--data-dir".as_ref(),
        restored.as_os_str(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The meta row came along: the next insert goes to slot 2, as it would have on the source.
    let (code, out, err) = sql(
        &restored,
        &[
            "-e",
            "INSERT INTO r (id, v) VALUES (1, 5); SELECT ring_idx, v FROM r ORDER BY ring_idx",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "ring_idx\tv\n1\t4\n2\t5\n3\t3\n");
    // Restoring over an existing data directory is refused.
    let out = run(&[
        "restore".as_ref(),
        "--from".as_ref(),
        backup.as_os_str(),
        "--data-dir".as_ref(),
        src.as_os_str(),
    ]);
    assert!(!out.status.success());
}

#[test]
fn a_data_directory_keeps_its_server_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, err) = sql(dir.path(), &["-e", "CREATE DATABASE d1"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = sql(
        dir.path(),
        &["--server-id", "7", "-e", "CREATE DATABASE d2"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("written by server id 1, not 7"), "{err}");
}
