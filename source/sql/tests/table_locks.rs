//! LOCK TABLES between sessions: a WRITE lock keeps others out until it is given back, a
//! READ lock lets them read and holds their writes (1205 after `innodb_lock_wait_timeout`),
//! conflicting LOCK TABLES wait for each other, and a session's end gives its locks back.

use std::time::Duration;

use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

fn open(dir: &std::path::Path) -> Engine {
    Engine::open(dir, EngineConfig::new(1)).expect("open").0
}

fn ok(s: &mut SqlSession, sql: &str) {
    s.execute(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

fn count(s: &mut SqlSession, sql: &str) -> usize {
    match s.execute(sql) {
        Ok(Outcome::Rows(rs)) => rs.rows.len(),
        other => panic!("{sql}: {other:?}"),
    }
}

fn session(engine: &Engine) -> SqlSession {
    let mut s = SqlSession::new(engine);
    ok(&mut s, "USE lt");
    s
}

/// Runs `sql` in a new session on another thread; the handle gives its outcome.
fn in_another_session(
    engine: &Engine,
    sql: &'static [&'static str],
) -> std::thread::JoinHandle<Vec<Result<Outcome, ringrep_engine::Error>>> {
    let engine = engine.clone();
    std::thread::spawn(move || {
        let mut s = session(&engine);
        sql.iter().map(|q| s.execute(q)).collect()
    })
}

/// Whether `h` is still running after a moment (it is waiting).
fn still_waiting<T>(h: &std::thread::JoinHandle<T>) -> bool {
    std::thread::sleep(Duration::from_millis(150));
    !h.is_finished()
}

#[test]
fn write_locks_exclude_and_read_locks_hold_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    let mut setup = SqlSession::new(&engine);
    ok(&mut setup, "CREATE DATABASE lt");
    ok(&mut setup, "CREATE TABLE lt.t (id INT PRIMARY KEY)");
    ok(&mut setup, "CREATE TABLE lt.free (id INT PRIMARY KEY)");

    // WRITE: another session's read waits until UNLOCK TABLES, then sees the holder's insert.
    let mut a = session(&engine);
    ok(&mut a, "LOCK TABLES t WRITE");
    let reader = in_another_session(&engine, &["SELECT * FROM t", "INSERT INTO free VALUES (1)"]);
    assert!(
        still_waiting(&reader),
        "a read of a WRITE-locked table waits"
    );
    ok(&mut a, "INSERT INTO t VALUES (1)");
    ok(&mut a, "UNLOCK TABLES");
    let out = reader.join().expect("reader");
    match &out[0] {
        Ok(Outcome::Rows(rs)) => assert_eq!(rs.rows.len(), 1, "the holder's insert"),
        other => panic!("{other:?}"),
    }
    assert!(out[1].is_ok(), "{:?}", out[1]);

    // READ: others read at once; their writes wait, and give up with 1205.
    ok(&mut a, "LOCK TABLES t READ");
    let mut b = session(&engine);
    assert_eq!(count(&mut b, "SELECT * FROM t"), 1);
    ok(&mut b, "SET innodb_lock_wait_timeout = 1");
    let e = b
        .execute("INSERT INTO t VALUES (2)")
        .expect_err("held back");
    assert_eq!(e.code, 1205, "{e:?}");
    // A table nobody locked is open to everyone else.
    ok(&mut b, "INSERT INTO free VALUES (2)");
    // Two READ locks share; a WRITE lock waits for both to go.
    ok(&mut b, "LOCK TABLES t READ");
    let writer = in_another_session(
        &engine,
        &["LOCK TABLES t WRITE", "INSERT INTO t VALUES (3)"],
    );
    assert!(still_waiting(&writer), "WRITE waits for the READ locks");
    ok(&mut a, "UNLOCK TABLES");
    assert!(still_waiting(&writer), "one READ lock is still held");
    // The end of a session gives its locks back.
    drop(b);
    let out = writer.join().expect("writer");
    assert!(out.iter().all(Result::is_ok), "{out:?}");
    // The writer's session ended too: the table is open again.
    assert_eq!(count(&mut a, "SELECT * FROM t"), 2);
    assert!(!engine.table_locks().any_held());
}

/// LOCK TABLES waits for the transactions that wrote the table before it was asked for, as
/// MySQL's metadata locks do: their next statements on it go through meanwhile (no wait on a
/// lock that waits for them), and the locker sees what they committed.
#[test]
fn lock_tables_waits_for_open_transactions_that_wrote_the_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    let mut setup = SqlSession::new(&engine);
    ok(&mut setup, "CREATE DATABASE lt");
    ok(&mut setup, "CREATE TABLE lt.t (id INT PRIMARY KEY)");

    let mut b = session(&engine);
    ok(&mut b, "BEGIN");
    ok(&mut b, "INSERT INTO t VALUES (1)");
    let locker = in_another_session(
        &engine,
        &[
            "SET innodb_lock_wait_timeout = 30",
            "LOCK TABLES t READ",
            "SELECT * FROM t",
        ],
    );
    assert!(
        still_waiting(&locker),
        "LOCK TABLES waits for the open transaction that wrote t"
    );
    ok(&mut b, "INSERT INTO t VALUES (2)");
    ok(&mut b, "SELECT * FROM t");
    ok(&mut b, "COMMIT");
    let out = locker.join().expect("locker");
    match &out[2] {
        Ok(Outcome::Rows(rs)) => assert_eq!(rs.rows.len(), 2, "both committed rows"),
        other => panic!("{other:?}"),
    }

    // A dump's LOCK TABLES of two tables, while a transaction that wrote one goes on to
    // write the other: the transaction never waits for the lock that waits for it.
    ok(&mut setup, "CREATE TABLE lt.u (id INT PRIMARY KEY)");
    ok(&mut b, "BEGIN");
    ok(&mut b, "INSERT INTO t VALUES (10)");
    let dump = in_another_session(
        &engine,
        &[
            "SET innodb_lock_wait_timeout = 30",
            "LOCK TABLES t READ, u READ",
            "SELECT * FROM u",
        ],
    );
    assert!(still_waiting(&dump), "it waits for the transaction");
    ok(&mut b, "SET innodb_lock_wait_timeout = 1");
    ok(&mut b, "INSERT INTO u VALUES (1)");
    ok(&mut b, "COMMIT");
    let out = dump.join().expect("dump");
    match &out[2] {
        Ok(Outcome::Rows(rs)) => assert_eq!(rs.rows.len(), 1, "the transaction's row of u"),
        other => panic!("{other:?}"),
    }

    // With no wait left, LOCK TABLES gives up with 1205 and holds nothing.
    ok(&mut b, "BEGIN");
    ok(&mut b, "INSERT INTO t VALUES (3)");
    let mut a = session(&engine);
    ok(&mut a, "SET innodb_lock_wait_timeout = 1");
    let e = a.execute("LOCK TABLES t WRITE").expect_err("timed out");
    assert_eq!(e.code, 1205, "{e:?}");
    assert!(!engine.table_locks().any_held());
    ok(&mut b, "COMMIT");
}
