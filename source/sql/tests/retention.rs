//! Binlog retention: PURGE BINARY LOGS and the retention policy remove whole segments, never
//! one that recovery needs after the oldest snapshot, and keep what a reader still needs up to
//! the hard cap; a directory purged (or cut short by a crash in the middle of a purge) opens
//! with every transaction.

use std::path::Path;
use std::time::Duration;

use binlog_format::SyncPolicy;
use ringrep_engine::{Engine, EngineConfig, Retention};
use ringrep_sql::{Outcome, SqlSession};

fn config() -> EngineConfig {
    let mut cfg = EngineConfig::new(1);
    cfg.sync = SyncPolicy::Never;
    cfg.snapshot_every = 0;
    cfg.segment_bytes = 4096;
    cfg
}

fn open(dir: &Path) -> (Engine, ringrep_engine::OpenReport) {
    Engine::open(dir, config()).expect("open")
}

fn rows(s: &mut SqlSession, sql: &str) -> Vec<Vec<Option<String>>> {
    match s.execute(sql) {
        Ok(Outcome::Rows(rs)) => rs.text_rows(),
        other => panic!("{sql}: {other:?}"),
    }
}

fn fill(s: &mut SqlSession, from: u32, n: u32) {
    for i in from..from + n {
        s.execute(&format!(
            "INSERT INTO test.t VALUES ({i}, '{}')",
            "x".repeat(100)
        ))
        .expect("insert");
    }
}

fn count(s: &mut SqlSession) -> String {
    rows(s, "SELECT COUNT(*) FROM test.t")[0][0]
        .clone()
        .unwrap_or_default()
}

fn names(engine: &Engine) -> Vec<String> {
    engine
        .binlog_segments()
        .expect("segments")
        .into_iter()
        .map(|s| binlog_format::segment::segment_name(s.number))
        .collect()
}

#[test]
fn purge_takes_the_snapshot_recovery_needs_and_the_directory_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = open(dir.path());
    let mut s = SqlSession::new(&engine);
    s.execute("CREATE TABLE test.t (id INT PRIMARY KEY, v VARCHAR(200))")
        .expect("create");
    fill(&mut s, 0, 300);
    let before = names(&engine);
    assert!(before.len() > 5, "{before:?}");
    assert_eq!(
        rows(&mut s, "SELECT @@max_binlog_size")[0][0].as_deref(),
        Some("4096")
    );

    // No snapshot yet: PURGE takes one, so that recovery no longer needs the segments, and
    // everything before the one asked for goes (the segment being written stays).
    let last = before.last().expect("a segment").clone();
    assert_eq!(
        s.execute("PURGE BINARY LOGS TO 'binlog.999999'")
            .expect_err("unknown file")
            .code,
        1373
    );
    s.execute(&format!("PURGE BINARY LOGS TO '{last}'"))
        .expect("purge");
    let after = names(&engine);
    assert_eq!(after, vec![last.clone()], "the segment being written stays");
    let snap = engine.last_seq();
    assert!(engine.first_binlog_seq().expect("first") <= snap + 1);
    let shown = rows(&mut s, "SHOW BINARY LOGS");
    assert_eq!(shown.len(), after.len());
    assert_eq!(
        engine.purged_segments(),
        (before.len() - after.len()) as u64
    );
    // Recovery still has what it needs: the snapshot PURGE took, and the binlog after it.
    let snapshots = std::fs::read_dir(dir.path().join("snapshots"))
        .expect("snapshots")
        .count();
    assert!(snapshots >= 1);

    fill(&mut s, 300, 50);
    let last_seq = engine.last_seq();
    drop(s);
    drop(engine);
    let (engine, report) = open(dir.path());
    assert_eq!(report.last_seq, last_seq);
    assert!(
        report.replayed < 100,
        "recovery replays only what follows the snapshot: {}",
        report.replayed
    );
    let mut s = SqlSession::new(&engine);
    assert_eq!(count(&mut s), "350");
    // A purge by date: everything last written before now (but the segment being written
    // and what recovery needs) goes.
    engine.snapshot().expect("snapshot");
    s.execute("PURGE BINARY LOGS BEFORE NOW() + INTERVAL 1 DAY")
        .expect("purge before");
    assert_eq!(names(&engine).len(), 1, "{:?}", names(&engine));
    drop(s);
    drop(engine);
    let (engine, _) = open(dir.path());
    assert_eq!(count(&mut SqlSession::new(&engine)), "350");
}

#[test]
fn retention_by_size_keeps_readers_until_the_hard_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = open(dir.path());
    let mut s = SqlSession::new(&engine);
    s.execute("CREATE TABLE test.t (id INT PRIMARY KEY, v VARCHAR(200))")
        .expect("create");
    fill(&mut s, 0, 400);
    let total: u64 = engine
        .binlog_segments()
        .expect("segments")
        .iter()
        .map(|s| s.bytes)
        .sum();
    let policy = Retention {
        expire: None,
        max_bytes: Some(total / 2),
        hard_cap_bytes: Some(total * 2),
    };
    // A reader at seq 1 holds everything while the binlog is under the hard cap.
    let held = engine
        .enforce_retention(&policy, Some(1))
        .expect("retention");
    assert!(held.removed.is_empty(), "{held:?}");
    assert_eq!(held.kept_for_readers.as_deref(), Some("binlog.000001"));
    // Without readers, the oldest go until the binlog is within its size; a snapshot is taken
    // so that recovery no longer needs them.
    let done = engine.enforce_retention(&policy, None).expect("retention");
    assert!(!done.removed.is_empty(), "{done:?}");
    let left: u64 = engine
        .binlog_segments()
        .expect("segments")
        .iter()
        .map(|s| s.bytes)
        .sum();
    assert!(left <= total / 2 + 4096, "{left} of {total}");
    // Past the hard cap, a reader's segments go too, and that is counted.
    fill(&mut s, 400, 400);
    let first = engine.first_binlog_seq().expect("first");
    let tight = Retention {
        expire: None,
        max_bytes: Some(8192),
        hard_cap_bytes: Some(16384),
    };
    let over = engine
        .enforce_retention(&tight, Some(first))
        .expect("retention");
    assert!(over.readers_overtaken, "{over:?}");
    assert!(engine.first_binlog_seq().expect("first") > first);
    assert_eq!(engine.readers_overtaken(), 1);
    // By age: segments older than the limit go.
    fill(&mut s, 800, 100);
    std::thread::sleep(Duration::from_millis(20));
    let by_age = Retention {
        expire: Some(Duration::from_millis(1)),
        max_bytes: None,
        hard_cap_bytes: None,
    };
    engine.enforce_retention(&by_age, None).expect("retention");
    assert_eq!(names(&engine).len(), 1);
    let last_seq = engine.last_seq();
    drop(s);
    drop(engine);
    let (engine, report) = open(dir.path());
    assert_eq!(report.last_seq, last_seq);
    assert_eq!(count(&mut SqlSession::new(&engine)), "900");
}

/// A crash in the middle of a purge: the index was rewritten, and none, or only the oldest, of
/// the files went. The directory opens with every transaction, and the next purge finishes.
#[test]
fn a_purge_cut_short_by_a_crash_leaves_a_directory_that_opens() {
    for removed_before_crash in [0usize, 1] {
        let dir = tempfile::tempdir().expect("tempdir");
        let saved = tempfile::tempdir().expect("tempdir");
        let (engine, _) = open(dir.path());
        let mut s = SqlSession::new(&engine);
        s.execute("CREATE TABLE test.t (id INT PRIMARY KEY, v VARCHAR(200))")
            .expect("create");
        fill(&mut s, 0, 200);
        engine.snapshot().expect("snapshot");
        let binlog = engine.binlog_dir();
        let before = names(&engine);
        for n in &before {
            std::fs::copy(binlog.join(n), saved.path().join(n)).expect("save");
        }
        let last = before.last().expect("segment").clone();
        let purged = engine.purge_binlogs_to(
            binlog_format::segment::parse_segment_name(&last).expect("name"),
            false,
        );
        let purged = purged.expect("purge").removed;
        assert!(purged.len() >= 2, "{purged:?}");
        let last_seq = engine.last_seq();
        drop(s);
        drop(engine);
        // What the crash left: the purged files after the first `removed_before_crash`.
        for n in &purged[removed_before_crash..] {
            std::fs::copy(saved.path().join(n), binlog.join(n)).expect("restore");
        }
        let (engine, report) = open(dir.path());
        assert_eq!(report.last_seq, last_seq);
        assert_eq!(count(&mut SqlSession::new(&engine)), "200");
        let listed = names(&engine);
        assert_eq!(
            listed.first(),
            purged.get(removed_before_crash),
            "{listed:?}"
        );
        for item in binlog_format::BinlogReader::open(&binlog, Default::default()).expect("reader")
        {
            item.expect("every segment reads, in sequence");
        }
        engine
            .purge_binlogs_to(
                binlog_format::segment::parse_segment_name(&last).expect("name"),
                false,
            )
            .expect("purge again");
        assert_eq!(names(&engine), vec![last.clone()]);
    }
}

/// The retention settings are MySQL's global variables: SET GLOBAL changes them until the
/// node stops, SET SESSION is MySQL's error 1229, the segment size is read-only.
#[test]
fn retention_variables_are_set_with_set_global() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = open(dir.path());
    let mut s = SqlSession::new(&engine);
    s.execute("SET GLOBAL binlog_retention_size = 8192")
        .expect("set global");
    s.execute("SET @@global.binlog_expire_logs_seconds = 3600")
        .expect("set global");
    let r = engine.retention();
    assert_eq!(r.max_bytes, Some(8192));
    assert_eq!(r.hard_cap_bytes, Some(16384));
    assert_eq!(r.expire, Some(Duration::from_secs(3600)));
    assert_eq!(
        rows(&mut s, "SELECT @@binlog_retention_size")[0][0].as_deref(),
        Some("8192")
    );
    s.execute("SET GLOBAL binlog_expire_logs_seconds = 0")
        .expect("no age limit");
    assert_eq!(engine.retention().expire, None);
    let code = |s: &mut SqlSession, sql: &str| s.execute(sql).expect_err(sql).code;
    assert_eq!(code(&mut s, "SET binlog_expire_logs_seconds = 5"), 1229);
    assert_eq!(code(&mut s, "SET SESSION binlog_retention_size = 5"), 1229);
    assert_eq!(code(&mut s, "SET GLOBAL max_binlog_size = 4096"), 1238);
    assert_eq!(
        code(&mut s, "SET GLOBAL binlog_retention_size = 'big'"),
        1232
    );
}

/// A reader registered with the engine (a replica's stream, an online backup) keeps what it
/// needs through PURGE BINARY LOGS (note 1867) and retention, until the hard cap; a tailer
/// asked for a purged transaction says so instead of starting later.
#[test]
fn readers_keep_their_segments_and_a_tailer_never_skips_purged_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = open(dir.path());
    let mut s = SqlSession::new(&engine);
    s.execute("CREATE TABLE test.t (id INT PRIMARY KEY, v VARCHAR(200))")
        .expect("create");
    fill(&mut s, 0, 300);
    engine.snapshot().expect("snapshot");
    let before = names(&engine);
    let last = before.last().expect("a segment").clone();
    let hold = engine.hold_binlog(1);
    s.execute(&format!("PURGE BINARY LOGS TO '{last}'"))
        .expect("purge");
    assert_eq!(names(&engine), before, "the reader's segments stay");
    let warnings = rows(&mut s, "SHOW WARNINGS");
    assert!(
        warnings.iter().any(|w| w[1].as_deref() == Some("1867")),
        "{warnings:?}"
    );
    // It moves on: what it has read goes.
    hold.advance(200);
    s.execute(&format!("PURGE BINARY LOGS TO '{last}'"))
        .expect("purge");
    let after = names(&engine);
    assert!(after.len() < before.len() && after.len() > 1, "{after:?}");
    assert!(engine.first_binlog_seq().expect("first") <= 200);
    // Past the hard cap it goes too.
    let tight = Retention {
        expire: None,
        max_bytes: Some(4096),
        hard_cap_bytes: Some(8192),
    };
    let over = engine.enforce_retention(&tight, None).expect("retention");
    assert!(over.readers_overtaken, "{over:?}");
    drop(hold);
    assert_eq!(engine.readers_from(), None);
    // A tailer from seq 1 finds the binlog purged, and says so.
    let first = engine.first_binlog_seq().expect("first");
    assert!(first > 1);
    let mut tailer =
        binlog_format::Tailer::open(&engine.binlog_dir(), binlog_format::StartAt::Seq(1));
    let err = tailer
        .next_timeout(Duration::from_millis(100))
        .expect_err("seq 1 is purged");
    assert!(
        err.to_string().contains("gap") || err.to_string().contains("expected"),
        "{err}"
    );
}
