//! Power loss, simulated at the file layer: writers commit transactions of three ring inserts
//! each; at a random moment every file operation is frozen (each failpoint paused), the data
//! directory is copied, and the copy loses what a power cut would: every binlog segment is cut
//! back to its last fsync (`binlog_format::failpoint::synced_lengths`), and in half the rounds
//! garbage stands where the unsynced tail was. The copy must then open with every
//! acknowledged commit, every transaction whole or absent, and every ring's meta row agreeing
//! with its rows.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use binlog_format::{failpoint, SyncPolicy};
use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

const WRITERS: usize = 4;
const RING: u32 = 4;
const ROWS_PER_TX: usize = 3;

fn config() -> EngineConfig {
    let mut c = EngineConfig::new(1);
    c.sync = SyncPolicy::EveryCommit;
    // Small segments and frequent snapshots: rotations and snapshot writes are in flight
    // when the power goes.
    c.segment_bytes = 16 << 10;
    c.snapshot_every = 60;
    c.snapshot_log_percent = 0;
    c
}

fn session(engine: &Engine) -> SqlSession {
    let mut s = SqlSession::new(engine);
    s.execute("CREATE DATABASE IF NOT EXISTS d")
        .expect("database");
    s.execute("USE d").expect("use");
    s
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else if entry.file_name() != "LOCK" {
            // A file may vanish while it is read (a temporary one renamed before the freeze).
            let _ = std::fs::copy(&path, &target);
        }
    }
}

/// Cuts each copied segment back to its last fsync; with `garble`, garbage follows the last
/// one's synced end (the write in flight, reaching the disk half-done). Returns the bytes cut.
fn lose_power(
    original: &Path,
    copy: &Path,
    synced: &HashMap<std::path::PathBuf, u64>,
    garble: bool,
    seed: u64,
) -> u64 {
    let binlog = copy.join("binlog");
    let mut segments: Vec<_> = std::fs::read_dir(&binlog)
        .expect("binlog dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            name.starts_with("binlog.") && !name.ends_with(".tmp") && name != "binlog.index"
        })
        .collect();
    segments.sort();
    let last = segments
        .iter()
        .rev()
        .find(|name| synced.contains_key(&original.join("binlog").join(name)))
        .cloned();
    let mut cut = 0;
    for name in segments {
        let path = binlog.join(&name);
        let len = std::fs::metadata(&path).expect("meta").len();
        match synced.get(&original.join("binlog").join(&name)) {
            // Never synced: its creation did not survive.
            None => std::fs::remove_file(&path).expect("remove"),
            Some(&keep) => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .expect("open");
                f.set_len(keep.min(len)).expect("cut");
                cut += len.saturating_sub(keep);
                if garble && last.as_deref() == Some(name.as_str()) {
                    let mut f = std::fs::OpenOptions::new()
                        .append(true)
                        .open(&path)
                        .expect("open");
                    let n = (len.saturating_sub(keep) as usize).clamp(13, 4096);
                    let mut x = seed | 1;
                    let junk: Vec<u8> = (0..n)
                        .map(|_| {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            x as u8
                        })
                        .collect();
                    f.write_all(&junk).expect("garble");
                }
            }
        }
    }
    cut
}

fn rows(s: &mut SqlSession, sql: &str) -> Vec<Vec<Option<String>>> {
    match s.execute(sql) {
        Ok(Outcome::Rows(rs)) => rs.text_rows(),
        other => panic!("{sql}: {other:?}"),
    }
}

/// The rows of ring `u` and its meta row's counters, checked against the writer's history:
/// the transactions kept are 0..=m with m at least the last acknowledged one; the ring holds
/// the last four of their inserts, and the meta row counts them.
fn check_ring(s: &mut SqlSession, u: usize, acked: i64, label: &str) {
    let present: Vec<String> = rows(s, &format!("SELECT v FROM r WHERE u = {u} ORDER BY v"))
        .into_iter()
        .map(|r| r[0].clone().expect("v"))
        .collect();
    if present.is_empty() {
        assert!(
            acked < 0,
            "{label}: ring {u} empty, but transaction {acked} was acknowledged"
        );
        return;
    }
    let tx_of = |v: &str| -> i64 { v.split('-').nth(1).expect("tx").parse().expect("tx") };
    let m = present.iter().map(|v| tx_of(v)).max().expect("a row");
    assert!(
        m >= acked,
        "{label}: ring {u} ends at transaction {m}, but {acked} was acknowledged"
    );
    let history: Vec<String> = (0..=m)
        .flat_map(|n| (0..ROWS_PER_TX).map(move |k| format!("{u}-{n:06}-{k}")))
        .collect();
    let mut want: Vec<String> = history[history.len().saturating_sub(RING as usize)..].to_vec();
    want.sort();
    assert_eq!(
        present, want,
        "{label}: ring {u} (a transaction kept in part?)"
    );
    s.execute("SET ndb_ring_buffer_show_meta = 1")
        .expect("show meta");
    let meta = rows(
        s,
        &format!("SELECT HEX(ring_meta) FROM r WHERE u = {u} AND ring_idx = 0"),
    );
    s.execute("SET ndb_ring_buffer_show_meta = 0")
        .expect("hide meta");
    let hex = meta[0][0].clone().expect("meta");
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    let occupied = u32::from_le_bytes(bytes[8..12].try_into().expect("4"));
    let total = u64::from_le_bytes(bytes[16..24].try_into().expect("8"));
    assert_eq!(
        total,
        history.len() as u64,
        "{label}: ring {u}'s meta row counts inserts"
    );
    assert_eq!(
        occupied as usize,
        want.len(),
        "{label}: ring {u}'s meta row counts rows"
    );
}

fn round(n: u64, garble: bool) {
    let label = format!(
        "round {n} ({})",
        if garble { "garbled tail" } else { "tail lost" }
    );
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), config()).expect("open").0;
    session(&engine)
        .execute(&format!(
            "CREATE TABLE r (u INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
             ring_meta VARBINARY(64), v VARCHAR(64), PRIMARY KEY (u, ring_idx)) \
             COMMENT='NDB_TABLE=MAX_ROWS_PER_PK={RING}'"
        ))
        .expect("create");
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Vec<AtomicI64>> = Arc::new((0..WRITERS).map(|_| AtomicI64::new(-1)).collect());
    let writers: Vec<_> = (0..WRITERS)
        .map(|u| {
            let (engine, stop, acked) = (engine.clone(), stop.clone(), acked.clone());
            std::thread::spawn(move || {
                let mut s = session(&engine);
                let mut n = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    s.execute("BEGIN").expect("begin");
                    for k in 0..ROWS_PER_TX {
                        s.execute(&format!(
                            "INSERT INTO r (u, v) VALUES ({u}, '{u}-{n:06}-{k}')"
                        ))
                        .expect("insert");
                    }
                    if s.execute("COMMIT").is_ok() {
                        acked[u].store(n, Ordering::SeqCst);
                    }
                    n += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50 + (n * 37) % 300));
    // The power goes: every file operation stops where it is.
    for point in failpoint::POINTS {
        fail::cfg(*point, "pause").expect("pause");
    }
    std::thread::sleep(Duration::from_millis(100));
    let acked_at_loss: Vec<i64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
    let synced = failpoint::synced_lengths();
    let copy = tempfile::tempdir().expect("tempdir");
    copy_dir(dir.path(), copy.path());
    stop.store(true, Ordering::Relaxed);
    scenario.teardown();
    for w in writers {
        w.join().expect("writer");
    }
    drop(engine);
    let cut = lose_power(dir.path(), copy.path(), &synced, garble, n);

    let (engine, report) = Engine::open(copy.path(), config()).unwrap_or_else(|e| {
        panic!("{label}: the directory does not open after the power loss: {e}")
    });
    eprintln!(
        "{label}: acknowledged {acked_at_loss:?}; {cut} unsynced bytes lost; reopened at seq {}, torn tail cut: {:?}",
        report.last_seq, report.torn_tail_cut
    );
    if garble {
        assert!(
            report.torn_tail_cut.is_some(),
            "{label}: the garbage was not cut"
        );
    }
    let mut s = session(&engine);
    for (u, &a) in acked_at_loss.iter().enumerate() {
        check_ring(&mut s, u, a, &label);
    }
    // And the node goes on from there.
    s.execute("INSERT INTO r (u, v) VALUES (0, 'after')")
        .unwrap_or_else(|e| panic!("{label}: a write after recovery: {e}"));
}

#[test]
fn every_acknowledged_commit_survives_a_power_loss_and_no_transaction_is_torn() {
    for n in 0..10 {
        round(n, n % 2 == 1);
    }
}
