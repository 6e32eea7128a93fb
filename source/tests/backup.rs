//! Online backup of a serving primary (`ringrep-source backup --from mysql://...`) while it
//! takes writes: the backup is the primary's state at one sequence number; restored, it opens
//! there; a replica seeded from it (`ringrep-applier seed`) resumes the stream after it, with no
//! snapshot sent, and converges.

use ringrep_testkit::{converge, node};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use node::{connect, runtime};

fn applier_bin() -> Option<PathBuf> {
    node::applier_next_to(Path::new(env!("CARGO_BIN_EXE_ringrep-source")))
}

fn insert(rt: &tokio::runtime::Runtime, addr: SocketAddr, from: u32, n: u32) {
    rt.block_on(async {
        let mut c = connect(addr, Some("test")).await;
        for i in from..from + n {
            c.exec_drop(
                "INSERT INTO ue (user_id, payload) VALUES (?, ?)",
                (i % 9, format!("row {i}")),
            )
            .await
            .expect("insert");
        }
    });
}

#[test]
fn an_online_backup_seeds_a_replica_that_resumes_the_stream() {
    let Some(applier) = applier_bin() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let primary = serve(&dir.path().join("p"));
    let paddr = primary.addr;
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(paddr, Some("test")).await;
        c.query_drop("CREATE TABLE ue (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), payload VARCHAR(64), PRIMARY KEY (user_id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=5'")
            .await
            .expect("create");
    });
    insert(&rt, paddr, 0, 200);

    // The backup while a writer goes on, and on after it: the backup must end all the same.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let rt = runtime();
            let mut n = 200;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                insert(&rt, paddr, n, 20);
                n += 20;
            }
            n
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let backup = dir.path().join("backup");
    let out = Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .args(["backup", "--from", &format!("mysql://root@{paddr}"), "--to"])
        .arg(&backup)
        .output()
        .expect("backup");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let seq: u64 = text
        .split("at seq ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no seq in {text}"));
    assert!(seq >= 201, "{text}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().expect("writer");
    assert!(
        u64::from(written) > seq - 1,
        "the writer kept going past the backup"
    );

    // Restored, it opens at that sequence number.
    let restored = dir.path().join("restored");
    let out = Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .args(["restore", "--from"])
        .arg(&backup)
        .arg("--data-dir")
        .arg(&restored)
        .output()
        .expect("restore");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .args(["sql", "--data-dir"])
        .arg(&restored)
        .args(["-e", "SELECT @@ringrep_last_seq"])
        .output()
        .expect("sql");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        shown.lines().nth(1).map(str::trim),
        Some(seq.to_string().as_str()),
        "{shown}"
    );

    // A replica seeded from it resumes the stream after it: no snapshot, converged.
    let rdir = dir.path().join("replica");
    let out = Command::new(&applier)
        .args(["seed", "--from"])
        .arg(&backup)
        .arg("--replica-dir")
        .arg(&rdir)
        .output()
        .expect("seed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replica = node::replica(&applier, &rdir, paddr);
    let mut saw_start = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match replica.log.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                assert!(
                    !line.contains("provisioning"),
                    "a snapshot was sent: {line}"
                );
                if line.contains(&format!("at seq {}", seq + 1)) {
                    saw_start = true;
                }
            }
            Err(_) if saw_start => break,
            Err(_) => {}
        }
    }
    assert!(
        saw_start,
        "the seeded replica did not start at seq {}",
        seq + 1
    );
    let want = converge::last_seq(&rt, paddr);
    converge::wait_applied(&rt, replica.addr, want, Duration::from_secs(30), "seeded");
    let (code, report) = converge::verify(&applier, paddr, replica.addr);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains("CONVERGED"), "{report}");
    // An account without REPLICATION SLAVE is refused at once, with MySQL's error.
    rt.block_on(async {
        let mut c = connect(paddr, None).await;
        c.query_drop("CREATE USER app IDENTIFIED BY 'apw'")
            .await
            .expect("create user");
    });
    let refused = Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .args([
            "backup",
            "--from",
            &format!("mysql://app:apw@{paddr}"),
            "--to",
        ])
        .arg(dir.path().join("refused"))
        .output()
        .expect("backup");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{err}");
    assert!(err.contains("1227"), "{err}");
    // Refused as such, not after the minute a silent node is given.
    assert!(err.contains("refused the backup"), "{err}");
    // A second seed into the same directory is refused.
    let again = Command::new(&applier)
        .args(["seed", "--from"])
        .arg(&backup)
        .arg("--replica-dir")
        .arg(&rdir)
        .output()
        .expect("seed again");
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already holds a data directory"), "{err}");
}

fn serve(data_dir: &Path) -> node::Node {
    node::primary(Path::new(env!("CARGO_BIN_EXE_ringrep-source")), data_dir)
}

/// `ringrep-binlog dump --sql` of one binlog file, piped into the `mariadb` client of
/// another node, as `mysqlbinlog | mysql` is used for point-in-time recovery: plain tables
/// come back row for row (updates, deletes and a copying ALTER included; a table without a
/// primary key takes its inserts), and a ring buffer table is refused
/// as the spec says (the row writes name the slot column and replay as REPLACE), leaving it
/// empty.
#[test]
fn a_binlog_file_replays_through_a_client_except_into_ring_tables() {
    let binlog_tool =
        Path::new(env!("CARGO_BIN_EXE_ringrep-source")).with_file_name("ringrep-binlog");
    if !binlog_tool.exists() {
        eprintln!("skipped: ringrep-binlog is not built next to ringrep-source (run cargo test --workspace)");
        return;
    }
    let Some(client) = node::mysql_client() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let source = serve(&dir.path().join("source"));
    let target = serve(&dir.path().join("target"));
    let run = |addr, sql: &str| {
        let (ok, out, err) = node::run_client(client, addr, None, sql);
        assert!(ok, "{sql}: {err}");
        out
    };
    run(
        source.addr,
        "CREATE TABLE test.before_flush (a INT PRIMARY KEY)",
    );
    run(source.addr, "FLUSH BINARY LOGS");
    let file = run(source.addr, "SHOW BINARY LOG STATUS");
    let file = file
        .lines()
        .nth(1)
        .and_then(|l| l.split('\t').next())
        .expect("File column")
        .to_string();
    run(
        source.addr,
        "CREATE DATABASE pitr;
         CREATE TABLE pitr.plain (id INT PRIMARY KEY, name VARCHAR(40), note TEXT, bin VARBINARY(8), ts TIMESTAMP(3) NULL, d DECIMAL(8,2));
         INSERT INTO pitr.plain VALUES (1, 'it''s', 'line\\none', x'00ff', '2026-12-01 10:00:00.125', -12.50), (2, 'two', NULL, NULL, NULL, 0), (3, 'three', '\\\\', x'', NULL, 1);
         UPDATE pitr.plain SET name = 'TWO' WHERE id = 2;
         DELETE FROM pitr.plain WHERE id = 3;
         ALTER TABLE pitr.plain ADD COLUMN extra INT DEFAULT 7;
         UPDATE pitr.plain SET extra = 8 WHERE id = 1;
         CREATE TABLE pitr.nopk (x INT);
         INSERT INTO pitr.nopk VALUES (1), (1), (2);",
    );
    let plain = "SELECT id, name, note, HEX(bin), ts, d, extra FROM pitr.plain ORDER BY id; SELECT x FROM pitr.nopk ORDER BY x";
    let expected = run(source.addr, plain);
    run(source.addr, "FLUSH BINARY LOGS");
    let segment = dir.path().join("source/binlog").join(&file);
    let port = target.addr.port().to_string();
    let replay = |seg: &Path| {
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "\"$0\" dump --sql \"$1\" | {client} -h 127.0.0.1 -P {port} -u root"
            ))
            .arg(&binlog_tool)
            .arg(seg)
            .output()
            .expect("replay")
    };
    let out = replay(&segment);
    assert!(
        out.status.success(),
        "plain replay: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(run(target.addr, plain), expected);
    // The statement before the flush is in the earlier file, not replayed.
    let tables = run(target.addr, "SHOW TABLES FROM test");
    assert!(!tables.contains("before_flush"), "{tables}");

    run(
        source.addr,
        "CREATE TABLE pitr.rb (client_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), v VARCHAR(20), PRIMARY KEY (client_id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=2';
         INSERT INTO pitr.rb (client_id, v) VALUES (1, 'a'), (1, 'b'), (1, 'c');",
    );
    let file2 = run(source.addr, "SHOW BINARY LOG STATUS");
    let file2 = file2
        .lines()
        .nth(1)
        .and_then(|l| l.split('\t').next())
        .expect("File column")
        .to_string();
    run(source.addr, "FLUSH BINARY LOGS");
    let out = replay(&dir.path().join("source/binlog").join(&file2));
    assert!(!out.status.success(), "a ring table's replay must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("REPLACE is not allowed on ring-buffer tables"),
        "{err}"
    );
    let count = run(
        target.addr,
        "SET ndb_ring_buffer_show_meta = ON; SELECT COUNT(*) FROM pitr.rb",
    );
    assert_eq!(count.lines().nth(1), Some("0"), "{count}");
}
