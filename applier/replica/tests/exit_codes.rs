//! What `ringrep-applier serve --exit-when-caught-up` tells a script: exit 0 only once it has
//! applied everything the primary has, exit 1 with the reason when the primary refuses the
//! account (at once) or cannot be reached (after `--source-retry-count` attempts); never the
//! "caught up" of a run that reached nobody.

use std::path::Path;
use std::process::Command;

use mysql_async::prelude::*;
use ringrep_testkit::{converge, node};

/// `serve --exit-when-caught-up` of a new replica in `dir` from `source`: exit code and stderr.
fn catch_up(dir: &Path, source: &str, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringrep-applier"))
        .args(["serve", "--replica-dir"])
        .arg(dir)
        .args(["--source", source, "--exit-when-caught-up"])
        .args(["--source-connect-retry", "1"])
        .args(extra)
        .env_remove("RINGREP_SOURCE")
        .output()
        .expect("run ringrep-applier serve");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn exit_when_caught_up_fails_on_a_refusing_or_absent_source_and_succeeds_only_caught_up() {
    let Some(source_bin) = node::source_next_to(Path::new(env!("CARGO_BIN_EXE_ringrep-applier")))
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let primary = node::primary(&source_bin, &dir.path().join("primary"));
    let addr = primary.addr;
    let rt = node::runtime();
    rt.block_on(async {
        let mut c = node::connect(addr, None).await;
        for sql in [
            "CREATE USER app IDENTIFIED BY 'apw'",
            "CREATE USER repl IDENTIFIED BY 'rpw'",
            "GRANT REPLICATION SLAVE ON *.* TO repl",
            "CREATE TABLE test.t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO test.t VALUES (1, 1), (2, 2)",
            "UPDATE test.t SET v = 3 WHERE id = 2",
        ] {
            c.query_drop(sql).await.expect(sql);
        }
    });
    let last = converge::last_seq(&rt, addr);

    // An account without REPLICATION SLAVE: refused at registration, 1227, at once.
    let (code, err) = catch_up(
        &dir.path().join("r1"),
        &format!("mysql://app:apw@{addr}"),
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("1227"), "{err}");
    assert!(!err.contains("stopped: last applied"), "{err}");

    // A wrong password: refused at login, 1045, at once.
    let (code, err) = catch_up(
        &dir.path().join("r2"),
        &format!("mysql://repl:wrong@{addr}"),
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("1045"), "{err}");
    assert!(err.contains("refused this replica"), "{err}");

    // Nobody listening: two attempts, then a failure naming them.
    let port = node::free_port();
    let (code, err) = catch_up(
        &dir.path().join("r3"),
        &format!("mysql://repl:rpw@127.0.0.1:{port}"),
        &["--source-retry-count", "2"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("gave up after 2 failed attempts"), "{err}");

    // The replication account: everything applied, then exit 0 at the primary's last seq; a
    // second run with nothing new ends at the same place.
    let r4 = dir.path().join("r4");
    let repl = format!("mysql://repl:rpw@{addr}");
    for round in 0..2 {
        let (code, err) = catch_up(&r4, &repl, &[]);
        assert_eq!(code, Some(0), "round {round}: {err}");
        assert!(
            err.contains(&format!("stopped: last applied seq {last}")),
            "round {round}: {err}"
        );
    }
    // And it holds the rows.
    let (code, report) = converge::verify_urls(
        Path::new(env!("CARGO_BIN_EXE_ringrep-applier")),
        &format!("mysql://root@{addr}"),
        r4.to_str().expect("utf-8 path"),
    );
    assert_eq!(code, Some(0), "{report}");
}
