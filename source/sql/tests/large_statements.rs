//! Statements that write many rows. One that writes into a ring table takes each row's
//! prefix's next slot exactly as the same rows inserted one statement at a time would: same
//! rows, same slots, same meta rows, for prefixes met in any order, text prefixes that differ
//! only in case (one ring), and more rows than a ring holds. A transaction too large for one
//! binlog record fails as MySQL's does when its binlog cache is full, and leaves nothing; one
//! of 75 MB (larger than a segment) commits and is replayed whole.

use ringrep_sql::{Outcome, SqlSession};

const TABLE: &str = "(k VARCHAR(8) NOT NULL, n INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
    ring_meta VARBINARY(64), v INT, PRIMARY KEY (k, n, ring_idx)) \
    COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'";

/// A fresh node's engine in `dir`, or the one there reopened (`what` names the step).
fn open(dir: &std::path::Path, what: &str) -> ringrep_engine::Engine {
    ringrep_engine::Engine::open(dir, ringrep_engine::EngineConfig::new(1))
        .expect(what)
        .0
}

/// What a SELECT returns, as text.
fn select(s: &mut SqlSession, sql: &str) -> Vec<Vec<Option<String>>> {
    let Outcome::Rows(rs) = s.execute(sql).expect(sql) else {
        panic!("a SELECT returns rows: {sql}");
    };
    rs.text_rows()
}

/// Every row of `table`, meta rows included, as text, in key order. A meta row's prefix is
/// read in lower case: it keeps the spelling of the statement that wrote it last (the first
/// row of its prefix in that statement), and 'ab' and 'AB' are one key.
fn rows(s: &mut SqlSession, table: &str) -> Vec<Vec<Option<String>>> {
    s.execute("SET ndb_ring_buffer_show_meta = 1")
        .expect("show meta");
    select(
        s,
        &format!(
            "SELECT IF(ring_idx = 0, LOWER(k), k), n, ring_idx, HEX(ring_meta), v \
             FROM test.{table} ORDER BY k, n, ring_idx"
        ),
    )
}

#[test]
fn a_multi_row_insert_fills_rings_as_single_inserts_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path(), "engine");
    let mut s = SqlSession::new(&engine);
    s.execute(&format!("CREATE TABLE test.batched {TABLE}"))
        .expect("create");
    s.execute(&format!("CREATE TABLE test.single {TABLE}"))
        .expect("create");
    // 400 rows over 60 prefixes in a scrambled order; 'ab' and 'AB' are one prefix.
    let mut values = Vec::new();
    let mut x: u64 = 12345;
    for v in 0..400 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let p = (x >> 33) % 60;
        let k = match p % 3 {
            0 => "ab",
            1 => "AB",
            _ => "cd",
        };
        values.push(format!("('{k}', {}, {v})", p / 3));
    }
    let Outcome::Affected { rows: n, .. } = s
        .execute(&format!(
            "INSERT INTO test.batched (k, n, v) VALUES {}",
            values.join(",")
        ))
        .expect("one statement")
    else {
        panic!("INSERT reports affected rows");
    };
    assert_eq!(n, 400);
    for row in &values {
        s.execute(&format!("INSERT INTO test.single (k, n, v) VALUES {row}"))
            .expect("one row");
    }
    let batched = rows(&mut s, "batched");
    assert_eq!(batched, rows(&mut s, "single"));
    // 40 rings ('ab'/'AB' and 'cd' for each n of 0..20) of 3 rows, and a meta row each.
    assert_eq!(batched.len(), 40 * 4);
}

#[test]
fn a_transaction_too_large_for_the_binlog_fails_with_1197_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A node that lowered its limit to 8 MiB: the same path as the default's 1 GiB, without
    // a gigabyte of rows in a test.
    let open = |what: &str| {
        let mut cfg = ringrep_engine::EngineConfig::new(1);
        cfg.max_transaction_bytes = 8 << 20;
        ringrep_engine::Engine::open(dir.path(), cfg).expect(what).0
    };
    let engine = open("engine");
    let mut s = SqlSession::new(&engine);
    assert_eq!(
        select(&mut s, "SELECT @@max_binlog_cache_size"),
        vec![vec![Some((8 << 20).to_string())]]
    );
    s.execute("CREATE TABLE test.big (id INT NOT NULL PRIMARY KEY, v MEDIUMTEXT)")
        .expect("create");
    s.execute("INSERT INTO test.big VALUES (0, 'kept')")
        .expect("small");
    // Five rows of 3 MB: 15 MB, more than the 8 MiB a binlog record holds here.
    let rows: Vec<String> = (1..=5)
        .map(|i| format!("({i}, REPEAT('x', 3000000))"))
        .collect();
    let e = s
        .execute(&format!("INSERT INTO test.big VALUES {}", rows.join(",")))
        .expect_err("too large for one binlog record");
    assert_eq!((e.code, e.sqlstate), (1197, "HY000"), "{e}");
    assert!(e.message.contains("max_binlog_cache_size"), "{e}");
    let count = |s: &mut SqlSession| select(s, "SELECT COUNT(*), MAX(id) FROM test.big");
    let one = vec![vec![Some("1".to_string()), Some("0".to_string())]];
    assert_eq!(count(&mut s), one, "nothing of the statement stayed");
    // The binlog takes the next transaction, and a reopened node holds the same rows.
    s.execute("INSERT INTO test.big VALUES (6, 'after')")
        .expect("the writer goes on");
    drop(s);
    drop(engine);
    let engine = open("reopen");
    let mut s = SqlSession::new(&engine);
    assert_eq!(
        count(&mut s),
        vec![vec![Some("2".to_string()), Some("6".to_string())]]
    );
}

/// A transaction larger than a binlog segment (64 MiB) and than the 64 MiB a record held
/// before commits in one record of its own, and a restart replays it whole.
#[test]
fn a_transaction_of_75_mb_commits_and_a_restart_replays_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path(), "engine");
    let mut s = SqlSession::new(&engine);
    assert_eq!(
        select(&mut s, "SELECT @@max_binlog_cache_size"),
        vec![vec![Some(binlog_format_max().to_string())]]
    );
    s.execute("CREATE TABLE test.big (id INT NOT NULL PRIMARY KEY, v MEDIUMTEXT)")
        .expect("create");
    let rows: Vec<String> = (1..=5)
        .map(|i: u8| format!("({i}, REPEAT('{}', 15000000))", char::from(96 + i)))
        .collect();
    s.execute(&format!("INSERT INTO test.big VALUES {}", rows.join(",")))
        .expect("75 MB in one transaction");
    s.execute("INSERT INTO test.big VALUES (6, 'after')")
        .expect("the next transaction");
    let sums = "SELECT id, LENGTH(v), LEFT(v, 2), RIGHT(v, 1) FROM test.big ORDER BY id";
    let want: Vec<Vec<Option<String>>> = (1..=5)
        .map(|i: u8| {
            let c = char::from(96 + i).to_string();
            vec![
                Some(i.to_string()),
                Some("15000000".into()),
                Some(c.repeat(2)),
                Some(c),
            ]
        })
        .chain([vec![
            Some("6".into()),
            Some("5".into()),
            Some("af".into()),
            Some("r".into()),
        ]])
        .collect();
    assert_eq!(select(&mut s, sums), want);
    drop(s);
    drop(engine);
    let engine = open(dir.path(), "reopen");
    let mut s = SqlSession::new(&engine);
    assert_eq!(select(&mut s, sums), want, "after the restart");
}

/// The most a binlog record holds by default (the readers' limit too).
fn binlog_format_max() -> u32 {
    ringrep_engine::EngineConfig::new(1).max_transaction_bytes
}

/// A unique value is checked against the rows the transaction wrote as they stand now: a row
/// deleted, updated away or undone with its statement frees its value, a row written or
/// updated to it holds it, and within one statement the second row with a value fails.
#[test]
fn unique_values_are_checked_against_the_transactions_rows_as_they_stand() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path(), "engine");
    let mut s = SqlSession::new(&engine);
    s.execute("CREATE TABLE test.u (id INT NOT NULL PRIMARY KEY, u VARCHAR(8), UNIQUE KEY uk (u))")
        .expect("create");
    let dup = |s: &mut SqlSession, sql: &str| {
        let e = s.execute(sql).expect_err(sql);
        assert_eq!(e.code, 1062, "{sql}: {e}");
        e.message
    };
    // One statement, two rows with one value (the collation makes 'a' and 'A' one value).
    let m = dup(
        &mut s,
        "INSERT INTO test.u VALUES (1, 'a'), (2, 'x'), (3, 'A')",
    );
    assert_eq!(m, "Duplicate entry 'A' for key 'u.uk'");
    s.execute("BEGIN").expect("begin");
    s.execute("INSERT INTO test.u VALUES (1, 'a'), (2, 'b')")
        .expect("two values");
    dup(&mut s, "INSERT INTO test.u VALUES (3, 'b')");
    // Deleted: its value is free. Updated away: its old value is free, its new one taken.
    s.execute("DELETE FROM test.u WHERE id = 1")
        .expect("delete");
    s.execute("INSERT INTO test.u VALUES (3, 'a')")
        .expect("a is free");
    s.execute("UPDATE test.u SET u = 'c' WHERE id = 2")
        .expect("update");
    s.execute("INSERT INTO test.u VALUES (4, 'b')")
        .expect("b is free");
    dup(&mut s, "INSERT INTO test.u VALUES (5, 'c')");
    // A statement that fails is undone: the value its first row took is free again.
    dup(&mut s, "INSERT INTO test.u VALUES (6, 'd'), (7, 'c')");
    s.execute("INSERT INTO test.u VALUES (6, 'd')")
        .expect("d is free");
    // NULLs clash with nothing.
    s.execute("INSERT INTO test.u VALUES (8, NULL), (9, NULL)")
        .expect("nulls");
    s.execute("COMMIT").expect("commit");
    let got = select(&mut s, "SELECT id, u FROM test.u ORDER BY id");
    let text = |r: &[&str]| -> Vec<Option<String>> {
        r.iter()
            .map(|v| (*v != "NULL").then(|| v.to_string()))
            .collect()
    };
    assert_eq!(
        got,
        vec![
            text(&["2", "c"]),
            text(&["3", "a"]),
            text(&["4", "b"]),
            text(&["6", "d"]),
            text(&["8", "NULL"]),
            text(&["9", "NULL"]),
        ]
    );
}

/// An UPDATE that moves a row to another primary key keeps its unique values: they are the
/// moved row's own, whether the row was committed or written by the same transaction.
#[test]
fn an_update_that_moves_a_row_keeps_its_unique_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path(), "engine");
    let mut s = SqlSession::new(&engine);
    s.execute("CREATE TABLE test.m (id INT NOT NULL PRIMARY KEY, u INT, UNIQUE KEY uk (u))")
        .expect("create");
    s.execute("INSERT INTO test.m VALUES (1, 10), (2, 20)")
        .expect("insert");
    s.execute("UPDATE test.m SET id = 3 WHERE id = 2")
        .expect("a committed row moves with its value");
    s.execute("BEGIN").expect("begin");
    s.execute("INSERT INTO test.m VALUES (4, 40)")
        .expect("insert");
    s.execute("UPDATE test.m SET id = 5 WHERE id = 4")
        .expect("a staged row moves with its value");
    let e = s
        .execute("UPDATE test.m SET id = 6, u = 10 WHERE id = 5")
        .expect_err("10 is row 1's");
    assert_eq!(e.code, 1062, "{e}");
    s.execute("COMMIT").expect("commit");
    let got = select(&mut s, "SELECT id, u FROM test.m ORDER BY id");
    let rows: Vec<Vec<Option<String>>> = [["1", "10"], ["3", "20"], ["5", "40"]]
        .iter()
        .map(|r| r.iter().map(|v| Some(v.to_string())).collect())
        .collect();
    assert_eq!(got, rows);
}

/// A unique index another session creates while a transaction is open checks that
/// transaction's later rows against its earlier ones too.
#[test]
fn a_unique_index_created_meanwhile_checks_the_transactions_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path(), "engine");
    let mut a = SqlSession::new(&engine);
    let mut b = SqlSession::new(&engine);
    a.execute("CREATE TABLE test.c (id INT NOT NULL PRIMARY KEY, x INT, y INT, UNIQUE KEY ux (x))")
        .expect("create");
    a.execute("BEGIN").expect("begin");
    a.execute("INSERT INTO test.c VALUES (1, 1, 7)")
        .expect("first row");
    b.execute("CREATE UNIQUE INDEX uy ON test.c (y)")
        .expect("index on the committed rows (none)");
    let e = a
        .execute("INSERT INTO test.c VALUES (2, 2, 7)")
        .expect_err("y = 7 is row 1's");
    assert_eq!(e.code, 1062, "{e}");
    assert_eq!(e.message, "Duplicate entry '7' for key 'c.uy'");
}
