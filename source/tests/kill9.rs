//! kill -9 under load: a child process inserts with durable commits and prints an ack after
//! each; it is killed mid-stream. After recovery every acknowledged insert is there and the
//! rings continue where they were.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

#[test]
fn acknowledged_commits_survive_sigkill_and_rings_continue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let setup = Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .args(["sql", "--data-dir"])
        .arg(&data)
        .args(["-e", "CREATE TABLE r (id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), v INT, PRIMARY KEY (id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=100000'"])
        .output()
        .expect("setup");
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );
    let script: String = (0..20_000)
        .map(|i| {
            format!(
                "INSERT INTO r (id, v) VALUES ({}, {i}); SELECT {i} AS ack;\n",
                i % 7
            )
        })
        .collect();
    let script_path = dir.path().join("load.sql");
    std::fs::write(&script_path, script).expect("script");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .args(["sql", "--sync", "commit", "--data-dir"])
        .arg(&data)
        .arg(&script_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start writer");
    let mut acked = Vec::new();
    let stdout = child.stdout.take().expect("stdout");
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        if let Ok(i) = line.parse::<u64>() {
            acked.push(i);
            if acked.len() == 300 {
                child.kill().expect("SIGKILL");
                break;
            }
        }
    }
    let _ = child.wait();
    assert!(
        acked.len() >= 300,
        "the writer acknowledged {} inserts before the kill",
        acked.len()
    );

    let (engine, report) = Engine::open(&data, EngineConfig::new(1)).expect("recover");
    assert!(report.last_seq >= acked.len() as u64);
    let mut s = SqlSession::new(&engine);
    let present: Vec<u64> = match s.execute("SELECT v FROM r").expect("select") {
        Outcome::Rows(rs) => rs
            .text_rows()
            .into_iter()
            .filter_map(|r| r[0].as_deref().and_then(|v| v.parse().ok()))
            .collect(),
        other => panic!("{other:?}"),
    };
    for a in &acked {
        assert!(present.contains(a), "acknowledged insert {a} lost");
    }
    // The rings continue: each prefix's next insert takes the slot after its last row.
    let mut per_prefix: HashMap<u64, u64> = HashMap::new();
    for v in &present {
        *per_prefix.entry(v % 7).or_default() += 1;
    }
    for (prefix, n) in per_prefix {
        s.execute(&format!("INSERT INTO r (id, v) VALUES ({prefix}, 999999)"))
            .expect("insert after recovery");
        match s
            .execute(&format!(
                "SELECT ring_idx FROM r WHERE id = {prefix} AND v = 999999"
            ))
            .expect("select")
        {
            Outcome::Rows(rs) => assert_eq!(
                rs.text_rows()[0][0].as_deref(),
                Some((n + 1).to_string().as_str()),
                "prefix {prefix}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
