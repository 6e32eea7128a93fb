//! Error injection at the file operations of the binlog, snapshots, backups and purges (TiKV's
//! `fail` crate; one scenario at a time, each point armed by a guard that disarms it when
//! dropped, as raft-engine's failpoint suite does). For every point the
//! rules are the same: a commit whose write or fsync fails is refused with MySQL's error for
//! it (1021 for a full disk), nobody reads it, the node goes on without a restart once the
//! fault passes, and the data directory reopens with every acknowledged commit, nothing of
//! the failed one, and the very state the running node had.

use std::path::Path;

use binlog_format::SyncPolicy;
use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

const RING: &str = "CREATE TABLE r (u INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
                    ring_meta VARBINARY(64), v VARCHAR(32), PRIMARY KEY (u, ring_idx)) \
                    COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=4'";

fn config(segment_bytes: u64) -> EngineConfig {
    let mut c = EngineConfig::new(1);
    c.sync = SyncPolicy::EveryCommit;
    c.snapshot_every = 0;
    c.segment_bytes = segment_bytes;
    c
}

fn session(engine: &Engine) -> SqlSession {
    let mut s = SqlSession::new(engine);
    s.execute("CREATE DATABASE IF NOT EXISTS d")
        .expect("database");
    s.execute("USE d").expect("use");
    s
}

/// A new engine in `dir` with segments of `segment_bytes`, and a session on it with the ring
/// table created.
fn ring_engine(dir: &Path, segment_bytes: u64) -> (Engine, SqlSession) {
    let engine = Engine::open(dir, config(segment_bytes)).expect("open").0;
    let mut s = session(&engine);
    s.execute(RING).expect("create");
    (engine, s)
}

fn rows(s: &mut SqlSession, sql: &str) -> Vec<String> {
    match s.execute(sql) {
        Ok(Outcome::Rows(rs)) => rs
            .text_rows()
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|v| v.unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect(),
        other => panic!("{sql}: {other:?}"),
    }
}

/// Every stored row (meta rows included) of every user table, in key order.
fn dump(engine: &Engine) -> Vec<String> {
    let mut all: Vec<String> = engine.with_state(|st| {
        st.tables
            .values()
            .filter(|t| t.def.database == "d")
            .flat_map(|t| {
                t.iter()
                    .map(move |(k, v)| format!("{} {k:?} {v:?}", t.def.name))
            })
            .collect()
    });
    all.sort();
    all
}

/// What the ring should hold: the last four acknowledged values of each prefix, by slot.
fn expected(acked: &[(i64, String)]) -> Vec<String> {
    let mut by_prefix: std::collections::BTreeMap<i64, Vec<&str>> = Default::default();
    for (u, v) in acked {
        by_prefix.entry(*u).or_default().push(v);
    }
    let mut out: Vec<String> = by_prefix
        .into_iter()
        .flat_map(|(u, vs)| {
            let keep = vs.len().saturating_sub(4);
            vs[keep..]
                .iter()
                .map(move |v| format!("{u} {v}"))
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out
}

fn read(s: &mut SqlSession) -> Vec<String> {
    let mut got = rows(s, "SELECT u, v FROM r");
    got.sort();
    got
}

/// Runs `sql`, which an injected I/O error fails with MySQL's 1105 (`why`: what failed).
fn fails_with_1105(s: &mut SqlSession, sql: &str, why: &str) {
    let e = s.execute(sql).expect_err(why);
    assert_eq!(e.code, 1105, "{why}: {e}");
}

/// One case: `ok` acknowledged inserts, then the point armed with `action` and a statement
/// that must fail with `code`, then the point disarmed and more inserts that must succeed.
/// Checked after each step: what a session reads is exactly the acknowledged rows; and at
/// the end the directory reopens to the same state.
struct Case {
    point: &'static str,
    action: &'static str,
    code: u16,
    segment_bytes: u64,
}

fn run(case: &Case) {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().expect("tempdir");
    let label = format!("{}={}", case.point, case.action);
    let engine = Engine::open(dir.path(), config(case.segment_bytes))
        .expect("open")
        .0;
    let mut s = session(&engine);
    s.execute(RING).expect("create");
    let mut acked: Vec<(i64, String)> = Vec::new();
    let insert = |s: &mut SqlSession, acked: &mut Vec<(i64, String)>, n: usize| {
        let u = (n % 3) as i64;
        let v = format!("v{n:04}-{}", "x".repeat(16));
        let r = s.execute(&format!("INSERT INTO r (u, v) VALUES ({u}, '{v}')"));
        if r.is_ok() {
            acked.push((u, v));
        }
        r
    };
    for n in 0..40 {
        insert(&mut s, &mut acked, n).unwrap_or_else(|e| panic!("{label}: insert {n}: {e}"));
    }
    assert_eq!(read(&mut s), expected(&acked), "{label}: before the fault");

    let armed = fail::FailGuard::new(case.point, case.action).expect("arm");
    // The point fires on the first operation through it; inserts go on until one fails
    // (a rotation point needs a segment to fill first).
    let mut failed = None;
    for n in 40..400 {
        match insert(&mut s, &mut acked, n) {
            Ok(_) => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let e = failed.unwrap_or_else(|| panic!("{label}: no insert failed"));
    assert_eq!(e.code, case.code, "{label}: {e}");
    // Not seen: neither by this session nor by another one.
    assert_eq!(read(&mut s), expected(&acked), "{label}: after the failure");
    assert_eq!(
        read(&mut session(&engine)),
        expected(&acked),
        "{label}: another session after the failure"
    );
    drop(armed);

    // The node goes on, without a restart.
    for n in 400..440 {
        insert(&mut s, &mut acked, n).unwrap_or_else(|e| panic!("{label}: insert {n} after: {e}"));
    }
    assert_eq!(read(&mut s), expected(&acked), "{label}: after recovering");
    let live = dump(&engine);
    drop(s);
    drop(engine);

    let (engine, _) = Engine::open(dir.path(), config(case.segment_bytes))
        .unwrap_or_else(|e| panic!("{label}: reopen: {e}"));
    assert_eq!(
        dump(&engine),
        live,
        "{label}: the reopened state is the running one"
    );
    let mut s = session(&engine);
    assert_eq!(read(&mut s), expected(&acked), "{label}: after reopening");
    // The rings keep working from their meta rows.
    for n in 440..450 {
        insert(&mut s, &mut acked, n)
            .unwrap_or_else(|e| panic!("{label}: insert {n} reopened: {e}"));
    }
    assert_eq!(
        read(&mut s),
        expected(&acked),
        "{label}: writing after reopening"
    );
    scenario.teardown();
}

const SMALL_SEGMENTS: u64 = 4 << 10;
const BIG_SEGMENTS: u64 = 64 << 20;

#[test]
fn a_failed_binlog_write_is_refused_and_not_seen() {
    for (action, code) in [
        ("1*return(eio)", 1105),
        ("1*return(enospc)", 1021),
        ("1*return(short)", 1021),
    ] {
        run(&Case {
            point: "binlog::write",
            action,
            code,
            segment_bytes: BIG_SEGMENTS,
        });
    }
}

#[test]
fn a_failed_fsync_is_refused_and_not_seen() {
    for (action, code) in [("1*return(eio)", 1105), ("1*return(enospc)", 1021)] {
        run(&Case {
            point: "binlog::fsync",
            action,
            code,
            segment_bytes: BIG_SEGMENTS,
        });
    }
}

/// Every step of a rotation: the closing segment's fsync, the new segment's write and
/// rename, the directory sync, the index rewrite.
#[test]
fn a_failed_rotation_is_refused_and_not_seen() {
    for (point, action, code) in [
        ("binlog::fsync", "1*return(eio)", 1105),
        ("binlog::segment_create", "1*return(enospc)", 1021),
        ("binlog::segment_create", "1*return(short)", 1021),
        ("binlog::segment_rename", "1*return(eio)", 1105),
        ("binlog::dir_sync", "1*return(eio)", 1105),
        ("binlog::index_write", "1*return(enospc)", 1021),
    ] {
        run(&Case {
            point,
            action,
            code,
            segment_bytes: SMALL_SEGMENTS,
        });
    }
}

/// The heal itself can fail (the truncation): the node refuses commits until a later heal
/// succeeds, and nothing of the failed commits is seen meanwhile.
#[test]
fn a_failed_heal_is_retried() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, mut s) = ring_engine(dir.path(), BIG_SEGMENTS);
    s.execute("INSERT INTO r (u, v) VALUES (1, 'kept')")
        .expect("insert");
    let truncate = fail::FailGuard::new("binlog::truncate", "2*return(eio)").expect("arm");
    let _fsync = fail::FailGuard::new("binlog::fsync", "1*return(eio)").expect("arm");
    fails_with_1105(
        &mut s,
        "INSERT INTO r (u, v) VALUES (1, 'lost')",
        "the fsync fails",
    );
    // The heal after the fsync failed; so does the one the next commit tries.
    fails_with_1105(
        &mut s,
        "INSERT INTO r (u, v) VALUES (1, 'refused')",
        "the heal fails",
    );
    drop(truncate);
    s.execute("INSERT INTO r (u, v) VALUES (1, 'after')")
        .expect("healed");
    assert_eq!(read(&mut s), ["1 after", "1 kept"]);
    drop(s);
    drop(engine);
    let engine = Engine::open(dir.path(), config(BIG_SEGMENTS))
        .expect("reopen")
        .0;
    assert_eq!(read(&mut session(&engine)), ["1 after", "1 kept"]);
    scenario.teardown();
}

/// A heal that cuts the binlog back but cannot write its count to `binlog.durable` (where
/// readers in other processes learn that what they read past the durable end is gone) keeps
/// the writer stopped: commits are refused until a later heal has published it, nothing of
/// the failed commit is seen, and a node closed meanwhile reopens without it.
#[test]
fn a_heal_that_cannot_publish_its_count_is_retried() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, mut s) = ring_engine(dir.path(), BIG_SEGMENTS);
    s.execute("INSERT INTO r (u, v) VALUES (1, 'kept')")
        .expect("insert");
    // Armed only now: every fsync until here wrote binlog.durable. The failed fsync writes
    // nothing to it; its heal and the next commit's each try once.
    let publish = fail::FailGuard::new("binlog::durable_write", "2*return(eio)").expect("arm");
    let fsync = fail::FailGuard::new("binlog::fsync", "1*return(eio)").expect("arm");
    fails_with_1105(
        &mut s,
        "INSERT INTO r (u, v) VALUES (1, 'lost')",
        "the fsync fails",
    );
    drop(fsync);
    fails_with_1105(
        &mut s,
        "INSERT INTO r (u, v) VALUES (1, 'refused')",
        "the heal is not published yet",
    );
    assert_eq!(read(&mut s), ["1 kept"]);
    assert_eq!(read(&mut session(&engine)), ["1 kept"]);
    drop(publish);
    s.execute("INSERT INTO r (u, v) VALUES (1, 'after')")
        .expect("published, healed");
    assert_eq!(read(&mut s), ["1 after", "1 kept"]);

    // Closed while the heal is still unpublished: the directory reopens with what was
    // acknowledged.
    let publish = fail::FailGuard::new("binlog::durable_write", "return(eio)").expect("arm");
    let fsync = fail::FailGuard::new("binlog::fsync", "1*return(eio)").expect("arm");
    fails_with_1105(
        &mut s,
        "INSERT INTO r (u, v) VALUES (2, 'lost')",
        "the fsync fails",
    );
    drop(fsync);
    fails_with_1105(
        &mut s,
        "INSERT INTO r (u, v) VALUES (2, 'refused')",
        "the heal is not published",
    );
    drop(s);
    drop(engine);
    drop(publish);
    let engine = Engine::open(dir.path(), config(BIG_SEGMENTS))
        .expect("reopen")
        .0;
    let mut s = session(&engine);
    assert_eq!(read(&mut s), ["1 after", "1 kept"]);
    s.execute("INSERT INTO r (u, v) VALUES (2, 'reopened')")
        .expect("insert after reopening");
    assert_eq!(read(&mut s), ["1 after", "1 kept", "2 reopened"]);
    scenario.teardown();
}

/// The faults of a snapshot file's write (snapshots and backups are the same file).
const SNAPSHOT_FAULTS: &[(&str, &str)] = &[
    ("snapshot::write", "1*return(short)"),
    ("snapshot::write", "1*return(enospc)"),
    ("snapshot::rename", "1*return(eio)"),
];

/// A snapshot that cannot be written leaves no temporary file behind (on a full disk its
/// space is needed) and changes nothing: the node reopens from the binlog.
#[test]
fn a_failed_snapshot_leaves_nothing_behind() {
    for &(point, action) in SNAPSHOT_FAULTS {
        let scenario = fail::FailScenario::setup();
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, mut s) = ring_engine(dir.path(), BIG_SEGMENTS);
        s.execute("INSERT INTO r (u, v) VALUES (1, 'a')")
            .expect("insert");
        let armed = fail::FailGuard::new(point, action).expect("arm");
        let e = engine.snapshot().expect_err("the snapshot fails");
        assert!(e.is_retriable(), "{point}: {e}");
        assert!(
            !leftovers(dir.path()),
            "{point}: a temporary file was left in the snapshot directory"
        );
        drop(armed);
        s.execute("INSERT INTO r (u, v) VALUES (1, 'b')")
            .expect("insert");
        engine.snapshot().expect("a snapshot once the fault passed");
        drop(s);
        drop(engine);
        let engine = Engine::open(dir.path(), config(BIG_SEGMENTS))
            .expect("reopen")
            .0;
        assert_eq!(read(&mut session(&engine)), ["1 a", "1 b"], "{point}");
        scenario.teardown();
    }
}

fn leftovers(dir: &Path) -> bool {
    std::fs::read_dir(dir.join("snapshots"))
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        })
        .unwrap_or(false)
}

/// A purge that fails removing a file (after the index no longer names it) leaves a directory
/// that opens, and the next purge finishes the job.
#[test]
fn a_failed_purge_leaves_a_directory_that_opens() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, mut s) = ring_engine(dir.path(), SMALL_SEGMENTS);
    for n in 0..200 {
        s.execute(&format!("INSERT INTO r (u, v) VALUES ({}, 'v{n}')", n % 5))
            .expect("insert");
    }
    engine.snapshot().expect("snapshot");
    let files = engine.binlog_files().expect("files");
    assert!(files.len() > 3, "{files:?}");
    let keep = files[files.len() - 2].0.clone();
    let armed = fail::FailGuard::new("binlog::remove", "1*return(eio)").expect("arm");
    let e = s
        .execute(&format!("PURGE BINARY LOGS TO '{keep}'"))
        .expect_err("the removal fails");
    assert!(e.is_retriable() || e.code == 1105, "{e}");
    drop(armed);
    let want = read(&mut s);
    drop(s);
    drop(engine);
    let engine = Engine::open(dir.path(), config(SMALL_SEGMENTS))
        .expect("reopen")
        .0;
    let mut s = session(&engine);
    assert_eq!(read(&mut s), want);
    s.execute(&format!("PURGE BINARY LOGS TO '{keep}'"))
        .expect("the purge finishes");
    assert_eq!(
        engine.binlog_files().expect("files")[0].0,
        keep,
        "the files before {keep} are gone"
    );
    scenario.teardown();
}

/// A backup whose write fails is an error (retriable for I/O), leaves nothing that restores as
/// if it were whole, and the next backup is whole.
#[test]
fn a_failed_backup_is_an_error_and_never_half_restored() {
    for &(point, action) in SNAPSHOT_FAULTS {
        let scenario = fail::FailScenario::setup();
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, mut s) = ring_engine(dir.path(), BIG_SEGMENTS);
        for n in 0..30 {
            s.execute(&format!("INSERT INTO r (u, v) VALUES ({}, 'b{n}')", n % 3))
                .expect("insert");
        }
        let backup = tempfile::tempdir().expect("tempdir");
        let armed = fail::FailGuard::new(point, action).expect("arm");
        let e = engine
            .backup(&backup.path().join("b"))
            .expect_err("the backup fails");
        assert!(e.is_retriable(), "{point}: {e}");
        drop(armed);
        let restored = tempfile::tempdir().expect("tempdir");
        assert!(
            Engine::restore(&backup.path().join("b"), &restored.path().join("d")).is_err(),
            "{point}: a failed backup restored"
        );
        // The node goes on, and the next backup is whole.
        s.execute("INSERT INTO r (u, v) VALUES (0, 'after')")
            .expect("insert after");
        let want = read(&mut s);
        engine
            .backup(&backup.path().join("again"))
            .expect("a backup once the fault passed");
        let into = restored.path().join("again");
        Engine::restore(&backup.path().join("again"), &into).expect("restore");
        let copy = Engine::open(&into, config(BIG_SEGMENTS))
            .expect("open restored")
            .0;
        assert_eq!(read(&mut session(&copy)), want, "{point}");
        scenario.teardown();
    }
}
