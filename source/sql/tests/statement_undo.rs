//! The engine's statement undo inside a transaction, driven through SQL.

use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

/// An engine in `dir` and a session on it in database `d`, after `statements`.
fn test_session(dir: &std::path::Path, statements: &[&str]) -> (Engine, SqlSession) {
    let (engine, _) = Engine::open(dir, EngineConfig::new(1)).expect("open");
    let mut s = SqlSession::new(&engine);
    for sql in ["CREATE DATABASE d", "USE d"].iter().chain(statements) {
        s.execute(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
    (engine, s)
}

/// Each row of a query's result as one line of text.
fn rows(s: &mut SqlSession, sql: &str) -> Vec<String> {
    match s.execute(sql) {
        Ok(Outcome::Rows(rs)) => rs
            .text_rows()
            .into_iter()
            .map(|r| r.into_iter().flatten().collect::<Vec<_>>().join(" "))
            .collect(),
        other => panic!("{sql}: {other:?}"),
    }
}

/// A failing statement inside a transaction is undone alone: keys it wrote for the first
/// time disappear, keys it wrote over (even twice) show what the earlier statements left.
#[test]
fn a_failing_statement_is_undone_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_engine, mut s) = test_session(
        dir.path(),
        &[
            "CREATE TABLE r (u INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
             ring_meta VARBINARY(64), v VARCHAR(4), PRIMARY KEY (u, ring_idx)) \
             COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=2'",
            "SET ndb_ring_buffer_show_meta = 1",
        ],
    );
    s.execute("BEGIN").expect("begin");
    s.execute("INSERT INTO r (u, v) VALUES (1, 'a')")
        .expect("insert");
    let before = rows(&mut s, "SELECT u, ring_idx, v FROM r ORDER BY u, ring_idx");
    // Slot 2, then slot 1 (written by the statement before), then slot 2 again, then a
    // value too long for the column.
    let e = s
        .execute("INSERT INTO r (u, v) VALUES (1, 'b'), (1, 'c'), (1, 'd'), (1, 'eeeee')")
        .expect_err("too long");
    assert_eq!(e.code, 1406, "{e:?}");
    assert_eq!(
        rows(&mut s, "SELECT u, ring_idx, v FROM r ORDER BY u, ring_idx"),
        before
    );
    assert_eq!(before.len(), 2, "the meta row and slot 1: {before:?}");
    // The transaction goes on from there (its next event takes the place the failed
    // statement's first one had), and commits what the other statements did.
    s.execute("UPDATE r SET v = 'x' WHERE ring_idx = 1")
        .expect("update");
    let data = "SELECT u, ring_idx, v FROM r WHERE ring_idx > 0 ORDER BY ring_idx";
    assert_eq!(rows(&mut s, data), ["1 1 x"]);
    s.execute("INSERT INTO r (u, v) VALUES (1, 'f')")
        .expect("insert");
    s.execute("COMMIT").expect("commit");
    assert_eq!(rows(&mut s, data), ["1 1 x", "1 2 f"]);
}
