//! The change stream in MySQL's binlog protocol, read by CDC tools written by others:
//! python-mysql-replication (`integration/clients/cdc.py`) and ZongJi (`cdc.js`), against a
//! primary under a workload of inserts, ring overwrites, updates (logged as writes, and as
//! updates with `ndb_log_update_as_write = 0`), prefix deletes, TTL purges and DDL. Each tool
//! reads part of the stream, stops at a commit, and resumes from the position it stored; what
//! it saw in all must be exactly the primary's own binlog (`ringrep-binlog dump --json`),
//! change for change, in order. A tool that is not installed is skipped with a message, or
//! fails the test under `RINGREP_REQUIRE_CLIENTS=1` (`.ci/run`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use ringrep_testkit::node::{self, Node};
use serde_json::Value as Json;

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration/clients")
}

fn start_primary(data_dir: &Path) -> Node {
    node::primary(Path::new(env!("CARGO_BIN_EXE_ringrep-source")), data_dir)
}

/// One value as text both sides agree on: numbers by value (a DECIMAL's "3.00" is 3),
/// date-times to the millisecond with a space (ZongJi's dates hold milliseconds), JSON
/// canonically.
fn norm(v: &Json) -> String {
    match v {
        Json::Null => "NULL".into(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => f.to_string(),
            _ => n.to_string(),
        },
        Json::String(s) => {
            let b = s.as_bytes();
            let datetime =
                b.len() >= 19 && b[4] == b'-' && b[7] == b'-' && (b[10] == b' ' || b[10] == b'T');
            if datetime {
                let s = s.replace('T', " ");
                let s = s.trim_end_matches('Z');
                let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
                let frac: String = frac.chars().chain(std::iter::repeat('0')).take(3).collect();
                return format!("{whole}.{frac}");
            }
            // A TIME with six fraction digits (ZongJi gives the column's own).
            if let Some(t) = time_text(s) {
                return t;
            }
            if (s.starts_with('{') || s.starts_with('[')) && serde_json::from_str::<Json>(s).is_ok()
            {
                return serde_json::from_str::<Json>(s)
                    .map(|j| j.to_string())
                    .unwrap_or_default();
            }
            // Integers exactly (one tool gives BIGINT UNSIGNED as text), decimal text by
            // value (another gives DECIMAL as a number); anything else as it is.
            if let Ok(i) = s.parse::<i128>() {
                return i.to_string();
            }
            let decimal = s.chars().all(|c| c.is_ascii_digit() || ".-+".contains(c));
            match s.parse::<f64>() {
                Ok(f) if decimal => f.to_string(),
                _ => s.clone(),
            }
        }
        other => other.to_string(),
    }
}

/// `[-]HH:MM:SS[.f]` with exactly six fraction digits; `None` for other text.
fn time_text(s: &str) -> Option<String> {
    let body = s.strip_prefix('-').unwrap_or(s);
    let (clock, frac) = body.split_once('.').unwrap_or((body, ""));
    let parts: Vec<&str> = clock.split(':').collect();
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if parts.len() != 3
        || !parts.iter().all(|p| digits(p))
        || parts[1].len() != 2
        || parts[2].len() != 2
        || frac.len() > 6
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let sign = if s.starts_with('-') { "-" } else { "" };
    Some(format!("{sign}{clock}.{frac:0<6}"))
}

fn list(values: &[Json]) -> String {
    values.iter().map(norm).collect::<Vec<_>>().join(",")
}

/// What the primary's binlog says a MySQL-protocol client must see: each change, each DDL
/// statement's first two words, and a commit after each transaction with changes; the
/// node's own `mysql` schema left out.
fn expected(binlog_tool: &Path, dir: &Path) -> Vec<String> {
    let out = Command::new(binlog_tool)
        .args(["dump", "--json"])
        .arg(dir)
        .output()
        .expect("ringrep-binlog");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut items = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let rec: Json = serde_json::from_str(line).expect("json line");
        if rec["type"] != "transaction" {
            continue;
        }
        let mut rows = false;
        for ev in rec["events"].as_array().into_iter().flatten() {
            if ev["kind"] == "ddl" {
                let detail = &ev["detail"];
                let db = ev["table"]["database"]
                    .as_str()
                    .or_else(|| detail["DropTable"]["database"].as_str())
                    .or_else(|| detail["CreateDatabase"]["name"].as_str())
                    .or_else(|| detail["DropDatabase"]["name"].as_str())
                    .unwrap_or("");
                if db == "mysql" {
                    continue;
                }
                let words = match ev["ddl"].as_str().unwrap_or("") {
                    "create_database" => vec!["CREATE DATABASE"],
                    "drop_database" => vec!["DROP DATABASE"],
                    "create_table" => vec!["CREATE TABLE"],
                    "alter_table" => vec!["DROP TABLE", "CREATE TABLE"],
                    "drop_table" => vec!["DROP TABLE"],
                    "truncate_table" => vec!["TRUNCATE TABLE"],
                    other => panic!("unknown DDL {other}"),
                };
                if rows {
                    items.push("commit".to_string());
                    rows = false;
                }
                items.extend(words.iter().map(|w| format!("ddl {w}")));
                continue;
            }
            let table = ev["table"].as_str().unwrap_or("");
            if table.starts_with("mysql.") {
                continue;
            }
            rows = true;
            let vals = |k: &str| ev[k].as_array().cloned().unwrap_or_default();
            items.push(match ev["op"].as_str().unwrap_or("") {
                "write" => format!("write {table} {}", list(&vals("row"))),
                "update" => format!(
                    "update {table} {} -> {}",
                    list(&vals("before")),
                    list(&vals("after"))
                ),
                "delete" => format!("delete {table} {}", list(&vals("key"))),
                other => panic!("unknown op {other}"),
            });
        }
        if rows {
            items.push("commit".to_string());
        }
    }
    items
}

/// A tool's lines as the same items, and where it stopped (file, position of its last commit).
fn seen(output: &str) -> (Vec<String>, Option<(String, u64)>) {
    let mut items = Vec::new();
    let mut last = None;
    for line in output.lines().filter(|l| l.starts_with('{')) {
        let o: Json = serde_json::from_str(line).expect("json line");
        if o.get("begin").is_some() {
            continue;
        }
        if let Some(q) = o["query"].as_str() {
            let words: Vec<&str> = q.split_whitespace().take(2).collect();
            items.push(format!("ddl {}", words.join(" ").to_uppercase()));
        } else if o.get("commit").is_some() {
            items.push("commit".into());
            last = Some((
                o["file"].as_str().unwrap_or("").to_string(),
                o["pos"].as_u64().unwrap_or(0),
            ));
        } else {
            let table = o["table"].as_str().unwrap_or("");
            let vals = |k: &str| o[k].as_array().cloned().unwrap_or_default();
            items.push(match o["op"].as_str().unwrap_or("") {
                "write" => format!("write {table} {}", list(&vals("values"))),
                "update" => format!(
                    "update {table} {} -> {}",
                    list(&vals("before")),
                    list(&vals("after"))
                ),
                // A delete carries the primary key; the other columns are absent (NULL).
                "delete" => {
                    let key: Vec<Json> = vals("values")
                        .into_iter()
                        .filter(|v| !v.is_null())
                        .collect();
                    format!("delete {table} {}", list(&key))
                }
                other => panic!("unknown op {other} in {line}"),
            });
        }
    }
    (items, last)
}

/// Runs a reader; `None` (having said why) when it is not installed and that is allowed.
fn run_reader(
    program: &str,
    script: &str,
    port: u16,
    from: (&str, u64),
    max: Option<u32>,
) -> Option<String> {
    let mut cmd = Command::new(program);
    cmd.current_dir(clients_dir())
        .arg(script)
        .arg(port.to_string())
        .arg(from.0)
        .arg(from.1.to_string())
        .env("TZ", "UTC");
    if let Some(m) = max {
        cmd.arg(m.to_string());
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => {
            assert!(
                std::env::var_os("RINGREP_REQUIRE_CLIENTS").is_none(),
                "{program}: {e}"
            );
            eprintln!("skipped {script}: {program}: {e}");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.code() == Some(2) {
        assert!(
            std::env::var_os("RINGREP_REQUIRE_CLIENTS").is_none(),
            "{script}: {text}"
        );
        eprintln!("skipped {script}: {}", text.trim());
        return None;
    }
    assert!(
        out.status.success(),
        "{script} failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(text)
}

/// The changes, then (after the TTL purge removed the expired row) the DDL.
const CHANGES: &[&str] = &[
        "CREATE DATABASE cdc",
        "CREATE TABLE cdc.events (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), ts TIMESTAMP(3) NULL, kind VARCHAR(20), amount DECIMAL(8,2), doc JSON, note TEXT, PRIMARY KEY (user_id, ring_idx)) COMMENT='NDB_TABLE=TTL=60@ts,MAX_ROWS_PER_PK=3'",
        "CREATE TABLE cdc.accounts (id INT NOT NULL PRIMARY KEY, name VARCHAR(40), balance BIGINT UNSIGNED, seen DATETIME(3), code CHAR(4), tag BINARY(3), ratio DOUBLE, state ENUM('open', 'closed', 'frozen'), perms SET('admin', 'read', 'write'), since YEAR)",
        "INSERT INTO cdc.events (user_id, ts, kind, amount, doc, note) VALUES (1, NOW(3), 'click', 1.50, '{\"a\": [1, \"x\", null]}', 'first')",
        "INSERT INTO cdc.events (user_id, ts, kind, amount, doc, note) VALUES (1, NOW(3), 'view', -2.25, '[true, false]', 'second'), (1, NOW(3), 'buy', 3, NULL, NULL)",
        // Two overwrites of the ring of three.
        "INSERT INTO cdc.events (user_id, ts, kind, amount) VALUES (1, NOW(3), 'again', 4), (1, NOW(3), 'more', 5)",
        // Already expired: the TTL purge removes it (a row delete).
        "INSERT INTO cdc.events (user_id, ts, kind) VALUES (2, NOW(3) - INTERVAL 2 HOUR, 'old')",
        "INSERT INTO cdc.accounts VALUES (1, 'ann', 18446744073709551615, '2026-12-01 10:11:12.345', 'ab', x'010203', 0.25, 'closed', 'read,ADMIN', 2024), (2, 'bob', 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        // TIME2 and BIT as MySQL 8 writes them. (A negative time with a fraction, or with
        // 0 seconds, is left out: both libraries misread those from MySQL too.)
        "CREATE TABLE cdc.clocks (id INT NOT NULL PRIMARY KEY, t TIME, t3 TIME(3), flag BIT(1), bits BIT(12), wide BIT(64))",
        "INSERT INTO cdc.clocks VALUES (1, '-838:59:59', '837:59:59.999', b'1', b'101000000001', 18446744073709551615), (2, '12:34:56', '00:00:00.5', 0, 4095, 0), (3, NULL, NULL, NULL, NULL, NULL), (4, '-1 02:03:04', '123456.789', 1, x'0a', 1)",
    // A new file mid-stream: a ROTATE and the next file's format.
    "FLUSH BINARY LOGS",
        "UPDATE cdc.accounts SET name = 'ANN', state = 'FROZEN' WHERE id = 1",
        "SET ndb_log_update_as_write = 0",
        "UPDATE cdc.accounts SET balance = 7 WHERE id = 2",
        "UPDATE cdc.events SET kind = 'edited' WHERE user_id = 1 AND ring_idx = 2",
        "SET ndb_log_update_as_write = 1",
        "DELETE FROM cdc.events WHERE user_id = 1",
        "DELETE FROM cdc.accounts WHERE id = 2",
        "UPDATE cdc.clocks SET t = '-00:00:01', bits = bits - 1 WHERE id = 2",
        "DELETE FROM cdc.clocks WHERE id = 3",
];

const DDL: &[&str] = &[
    "ALTER TABLE cdc.accounts ADD COLUMN tier INT DEFAULT 1",
    "INSERT INTO cdc.accounts (id, name, balance, seen, tier) VALUES (3, 'cy', 5, NOW(3), 9)",
    "FLUSH BINARY LOGS",
    "TRUNCATE TABLE cdc.events",
    // ZongJi names columns from information_schema when it reads, so a dropped table's rows
    // cannot be read by it afterwards (on MySQL too): the table dropped here never had rows.
    "CREATE TABLE cdc.scratch (id INT PRIMARY KEY)",
    "DROP TABLE cdc.scratch",
];

async fn run_all(c: &mut mysql_async::Conn, statements: &[&str]) {
    for s in statements {
        c.query_drop(*s)
            .await
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

#[test]
fn cdc_tools_read_every_change_in_order_and_resume_from_a_stored_position() {
    let binlog_tool =
        Path::new(env!("CARGO_BIN_EXE_ringrep-source")).with_file_name("ringrep-binlog");
    if !binlog_tool.exists() {
        assert!(
            std::env::var_os("RINGREP_REQUIRE_CLIENTS").is_none(),
            "ringrep-binlog is not built next to ringrep-source (run cargo test --workspace)"
        );
        eprintln!("skipped: ringrep-binlog is not built next to ringrep-source (run cargo test --workspace)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let primary = start_primary(dir.path());
    let rt = node::runtime();
    let mut c = rt.block_on(node::connect(primary.addr, None));
    rt.block_on(run_all(&mut c, CHANGES));
    // The TTL purge runs every 100 ms: wait for the expired row's delete.
    let binlog = dir.path().join("binlog");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !expected(&binlog_tool, &binlog)
        .iter()
        .any(|i| i.starts_with("delete cdc.events 2,"))
    {
        assert!(Instant::now() < deadline, "no TTL purge within 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    rt.block_on(run_all(&mut c, DDL));
    let want = expected(&binlog_tool, &binlog);
    assert!(
        want.iter().any(|i| i.starts_with("update cdc.accounts")),
        "{want:#?}"
    );
    let mut tools = Vec::new();
    for (program, script) in [("python3", "cdc.py"), ("node", "cdc.js")] {
        // Part of the stream, up to the third commit, then on from the position stored there.
        let Some(first) = run_reader(
            program,
            script,
            primary.addr.port(),
            ("binlog.000001", 4),
            Some(3),
        ) else {
            continue;
        };
        let (mut got, last) = seen(&first);
        let (file, pos) = last.unwrap_or_else(|| panic!("{script} saw no commit:\n{first}"));
        assert_eq!(
            got.iter().filter(|i| *i == "commit").count(),
            3,
            "{script}:\n{first}"
        );
        let rest = run_reader(program, script, primary.addr.port(), (&file, pos), None)
            .expect("the reader ran a moment ago");
        got.extend(seen(&rest).0);
        assert_eq!(
            got, want,
            "{script} (resumed at {file}:{pos}) saw something else than the binlog holds"
        );
        if script == "cdc.py" {
            // Positions are a file's: each transaction starts (position - size of its BEGIN,
            // Debezium's restart point) where the one before it ended, and restarting there
            // gives the same stream as resuming after the commit.
            let begins: Vec<(String, u64)> = rest
                .lines()
                .filter_map(|l| serde_json::from_str::<Json>(l).ok())
                .filter_map(|o| Some((o["file"].as_str()?.to_string(), o["begin"].as_u64()?)))
                .collect();
            let (bfile, bpos) = begins.first().cloned().expect("a BEGIN after the resume");
            assert_eq!(
                (bfile.as_str(), bpos),
                (file.as_str(), pos),
                "the next BEGIN starts where the commit ended"
            );
            let again = run_reader(program, script, primary.addr.port(), (&bfile, bpos), None)
                .expect("the reader ran a moment ago");
            assert_eq!(
                seen(&again).0,
                seen(&rest).0,
                "restarting at a BEGIN's start"
            );
            // A position inside the transaction starts it again (tools resume from
            // transactions).
            let inside = run_reader(
                program,
                script,
                primary.addr.port(),
                (&bfile, bpos + 7),
                None,
            )
            .expect("the reader ran a moment ago");
            assert_eq!(
                seen(&inside).0,
                seen(&rest).0,
                "a position inside a transaction"
            );
        }
        tools.push(script);
    }
    eprintln!("CDC readers that saw the whole stream: {tools:?}");
}
