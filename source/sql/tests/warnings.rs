//! What expressions warn about, as SHOW WARNINGS lists it after the statement: a division by
//! zero (1365) and a string an integer CAST reads only in part (1292) are warnings in a SELECT
//! and errors in a value an INSERT or UPDATE writes; the next statement's warnings replace them.

use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

fn rows(s: &mut SqlSession, sql: &str) -> Vec<Vec<Option<String>>> {
    match s.execute(sql) {
        Ok(Outcome::Rows(rs)) => rs.text_rows(),
        other => panic!("{sql}: {other:?}"),
    }
}

fn warnings(s: &mut SqlSession) -> Vec<String> {
    rows(s, "SHOW WARNINGS")
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(Option::unwrap_or_default)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// A session over a fresh engine in `dir` (the engine kept alive beside it).
fn session(dir: &tempfile::TempDir) -> (Engine, SqlSession) {
    let engine = Engine::open(dir.path(), EngineConfig::new(1))
        .expect("open")
        .0;
    let s = SqlSession::new(&engine);
    (engine, s)
}

#[test]
fn a_select_warns_where_a_write_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_engine, mut s) = session(&dir);
    assert_eq!(
        rows(
            &mut s,
            "SELECT 1/0, 7 DIV 0, MOD(3, 0), CAST('12abc' AS SIGNED), CAST(' 5 ' AS SIGNED)"
        ),
        [[None, None, None, Some("12".into()), Some("5".into())]]
    );
    assert_eq!(
        warnings(&mut s),
        [
            "Warning 1365 Division by 0",
            "Warning 1365 Division by 0",
            "Warning 1365 Division by 0",
            "Warning 1292 Truncated incorrect INTEGER value: '12abc'",
        ]
    );
    // SHOW WARNINGS leaves them, and so do the statements that count them; the next
    // statement replaces them.
    assert_eq!(warnings(&mut s).len(), 4);
    let count = [[Some("4".to_string())]];
    assert_eq!(rows(&mut s, "SELECT @@warning_count"), count);
    assert_eq!(rows(&mut s, "SHOW COUNT(*) WARNINGS"), count);
    assert_eq!(
        rows(&mut s, "SELECT @@session.error_count"),
        [[Some("0".into())]]
    );
    assert_eq!(warnings(&mut s).len(), 4);
    rows(&mut s, "SELECT 1");
    assert!(warnings(&mut s).is_empty());
    // A failed statement's error counts as one of each.
    assert!(s.execute("SELECT * FROM no_such_table").is_err());
    assert_eq!(
        rows(&mut s, "SELECT @@warning_count, @@error_count"),
        [[Some("1".into()), Some("1".into())]]
    );
    assert_eq!(rows(&mut s, "SHOW COUNT(*) ERRORS"), [[Some("1".into())]]);
    // One per row evaluated, as MySQL's.
    s.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        .expect("create");
    s.execute("INSERT INTO t VALUES (1, 0), (2, 0), (3, 1)")
        .expect("insert");
    rows(&mut s, "SELECT id, 10 / v FROM t");
    assert_eq!(warnings(&mut s).len(), 2);
    // Written, the same expressions fail and nothing is stored.
    let e = s
        .execute("INSERT INTO t VALUES (4, 1/0)")
        .expect_err("strict");
    assert_eq!(e.code, 1365);
    let e = s
        .execute("UPDATE t SET v = CAST('7x' AS SIGNED) WHERE id = 3")
        .expect_err("strict");
    assert_eq!(e.code, 1292);
    assert_eq!(
        rows(&mut s, "SELECT id, v FROM t ORDER BY id"),
        [
            [Some("1".into()), Some("0".into())],
            [Some("2".into()), Some("0".into())],
            [Some("3".into()), Some("1".into())],
        ]
    );
}

/// INSERT IGNORE stores what strict mode refuses, adjusted as MySQL adjusts it, each with
/// strict mode's code as a warning; cut trailing spaces and a rounded DECIMAL are notes in
/// any mode. The OK packet's count and SHOW WARNINGS agree.
#[test]
fn insert_ignore_adjusts_values_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_engine, mut s) = session(&dir);
    s.execute(
        "CREATE TABLE c (id INT PRIMARY KEY, s VARCHAR(3) NOT NULL, n TINYINT, d DECIMAL(5,2), k INT NOT NULL)",
    )
    .expect("create");
    let strict = [
        ("INSERT INTO c VALUES (1, 'abcd', 1, 1, 1)", 1406),
        ("INSERT INTO c VALUES (1, 'a', 300, 1, 1)", 1264),
        ("INSERT INTO c VALUES (1, 'a', 1, 1, NULL)", 1048),
        ("INSERT INTO c VALUES (1, 'a', '12x', 1, 1)", 1265),
        ("INSERT INTO c VALUES (1, 'a', 'abc', 1, 1)", 1366),
        ("INSERT INTO c (id) VALUES (1)", 1364),
    ];
    for (sql, code) in strict {
        assert_eq!(s.execute(sql).expect_err(sql).code, code, "{sql}");
    }
    assert!(rows(&mut s, "SELECT * FROM c").is_empty());
    let out = s
        .execute(
            "INSERT IGNORE INTO c VALUES (1, 'abcd', 300, 12345.6, NULL), (2, 'ab  ', '-7kg', 1.005, 'abc')",
        )
        .expect("insert ignore");
    assert!(
        matches!(&out, ringrep_sql::Outcome::Affected { rows: 2, info: Some(i), .. } if i == "Records: 2  Duplicates: 0  Warnings: 8"),
        "{out:?}"
    );
    assert_eq!(
        warnings(&mut s),
        [
            "Warning 1265 Data truncated for column 's' at row 1",
            "Warning 1264 Out of range value for column 'n' at row 1",
            "Warning 1264 Out of range value for column 'd' at row 1",
            "Warning 1048 Column 'k' cannot be null",
            "Note 1265 Data truncated for column 's' at row 2",
            "Warning 1265 Data truncated for column 'n' at row 2",
            "Note 1265 Data truncated for column 'd' at row 2",
            "Warning 1366 Incorrect integer value: 'abc' for column 'k' at row 2",
        ]
    );
    assert_eq!(
        rows(&mut s, "SELECT id, s, n, d, k FROM c ORDER BY id"),
        [
            ["1", "abc", "127", "999.99", "0"].map(|v| Some(v.to_string())),
            ["2", "ab ", "-7", "1.01", "0"].map(|v| Some(v.to_string())),
        ]
    );
    s.execute("INSERT IGNORE INTO c (id) VALUES (3)")
        .expect("no defaults");
    assert_eq!(
        warnings(&mut s),
        [
            "Warning 1364 Field 's' doesn't have a default value",
            "Warning 1364 Field 'k' doesn't have a default value",
        ]
    );
    // CAST AS DECIMAL warns as MySQL's does.
    assert_eq!(
        rows(
            &mut s,
            "SELECT CAST('1.5x' AS DECIMAL(5,2)), CAST(12345.6 AS DECIMAL(5,2))"
        ),
        [[Some("1.50".to_string()), Some("999.99".to_string())]]
    );
    assert_eq!(
        warnings(&mut s),
        [
            "Warning 1292 Truncated incorrect DECIMAL value: '1.5x'",
            "Warning 1264 Out of range value for column 'CAST(12345.6 AS DECIMAL(5,2))' at row 1",
        ]
    );
    // A note in strict mode too; UPDATE likewise.
    s.execute("UPDATE c SET s = 'xy   ', d = 2.555 WHERE id = 3")
        .expect("update");
    assert_eq!(
        warnings(&mut s),
        [
            "Note 1265 Data truncated for column 's' at row 1",
            "Note 1265 Data truncated for column 'd' at row 1",
        ]
    );
    assert_eq!(
        rows(&mut s, "SELECT s, d FROM c WHERE id = 3"),
        [[Some("xy ".to_string()), Some("2.56".to_string())]]
    );
}

/// Values adjusted as MySQL adjusts them, at the edges: DECIMAL(p,p)'s largest is 0.99..., an
/// exponent past any type's digits is out of range without a string of its size, a CHAR's
/// spaces are cut without a note, a one-row INSERT of NULL into NOT NULL stays 1048 out of
/// strict mode, and REPLACE takes what the session's mode takes.
#[test]
fn adjusted_values_at_the_edges() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_engine, mut s) = session(&dir);
    s.execute("CREATE TABLE e (id INT PRIMARY KEY, d DECIMAL(2,2), i INT, c CHAR(2), v VARCHAR(3) NOT NULL DEFAULT '')")
        .expect("create");
    s.execute("INSERT IGNORE INTO e (id, d) VALUES (1, 5)")
        .expect("insert ignore");
    assert_eq!(
        warnings(&mut s),
        ["Warning 1264 Out of range value for column 'd' at row 1"]
    );
    assert_eq!(
        rows(&mut s, "SELECT d FROM e WHERE id = 1"),
        [[Some("0.99".to_string())]]
    );
    let err = s
        .execute("INSERT INTO e (id, i) VALUES (2, '1e2147483647')")
        .expect_err("out of range");
    assert_eq!(err.code, 1264, "{err:?}");
    let err = s
        .execute("INSERT INTO e (id, d) VALUES (2, '1e999999999')")
        .expect_err("out of range");
    assert_eq!(err.code, 1264, "{err:?}");
    s.execute(
        "INSERT IGNORE INTO e (id, i, d) VALUES (2, '1e99999999999999999999x', '-1e-999999999')",
    )
    .expect("insert ignore");
    assert_eq!(
        rows(&mut s, "SELECT i, d FROM e WHERE id = 2"),
        [[Some("2147483647".to_string()), Some("0.00".to_string())]]
    );
    s.execute("INSERT INTO e (id, c) VALUES (3, 'ab   ')")
        .expect("char");
    assert!(warnings(&mut s).is_empty());
    s.execute("INSERT INTO e (id, v) VALUES (4, 'abc   ')")
        .expect("varchar");
    assert_eq!(
        warnings(&mut s),
        ["Note 1265 Data truncated for column 'v' at row 1"]
    );
    s.execute("SET sql_mode = ''").expect("non-strict");
    let err = s
        .execute("INSERT INTO e (id, v) VALUES (5, NULL)")
        .expect_err("one row");
    assert_eq!(err.code, 1048, "{err:?}");
    s.execute("INSERT INTO e (id, v) VALUES (5, NULL), (6, 'x')")
        .expect("two rows");
    assert_eq!(warnings(&mut s), ["Warning 1048 Column 'v' cannot be null"]);
    // Only a one-row VALUES (or SET) is a one-row INSERT: REPLACE of two rows and INSERT ...
    // SELECT store the type's zero, though they reach the engine a row at a time.
    s.execute("REPLACE INTO e (id, v) VALUES (7, NULL), (8, 'x')")
        .expect("replace of two rows");
    s.execute("INSERT INTO e (id, v) SELECT 9, NULL")
        .expect("insert select");
    assert_eq!(
        rows(&mut s, "SELECT id, v FROM e WHERE id IN (7, 9) ORDER BY id"),
        [
            [Some("7".to_string()), Some(String::new())],
            [Some("9".to_string()), Some(String::new())]
        ]
    );
    s.execute("REPLACE INTO e (id, v) VALUES (6, 'wxyz')")
        .expect("replace cuts");
    assert_eq!(
        rows(&mut s, "SELECT v FROM e WHERE id = 6"),
        [[Some("wxy".to_string())]]
    );
}

/// `@@warning_count` counts the warnings past the 1,024 kept, as MySQL's does.
#[test]
fn warning_count_counts_past_the_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_engine, mut s) = session(&dir);
    s.execute("CREATE TABLE w (id INT PRIMARY KEY)")
        .expect("create");
    let values: Vec<String> = (1..=1500).map(|i| format!("({i})")).collect();
    s.execute(&format!("INSERT INTO w VALUES {}", values.join(",")))
        .expect("insert");
    s.execute("SET sql_mode = 'ERROR_FOR_DIVISION_BY_ZERO'")
        .expect("mode");
    let _ = rows(&mut s, "SELECT 1 / 0 FROM w");
    assert_eq!(
        rows(&mut s, "SELECT @@warning_count"),
        [[Some("1500".to_string())]]
    );
    assert_eq!(warnings(&mut s).len(), 1024);
}

/// A table with triggers converts what INSERT IGNORE and UPDATE out of strict mode write as a
/// table without them does: adjusted, with the warning (it was strict mode's error).
#[test]
fn triggers_take_values_as_the_mode_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_engine, mut s) = session(&dir);
    s.execute("CREATE TABLE tg (id INT PRIMARY KEY, s VARCHAR(3), n INT)")
        .expect("create");
    s.execute("CREATE TRIGGER tg_bi BEFORE INSERT ON tg FOR EACH ROW SET NEW.n = 1")
        .expect("insert trigger");
    s.execute("CREATE TRIGGER tg_bu BEFORE UPDATE ON tg FOR EACH ROW SET NEW.n = 2")
        .expect("update trigger");
    let err = s
        .execute("INSERT INTO tg (id, s) VALUES (1, 'abcd')")
        .expect_err("strict");
    assert_eq!(err.code, 1406, "{err:?}");
    s.execute("INSERT IGNORE INTO tg (id, s) VALUES (1, 'abcd')")
        .expect("ignore");
    assert_eq!(
        warnings(&mut s),
        ["Warning 1265 Data truncated for column 's' at row 1"]
    );
    s.execute("SET sql_mode = ''").expect("non-strict");
    s.execute("UPDATE tg SET s = 'wxyz' WHERE id = 1")
        .expect("update");
    assert_eq!(
        warnings(&mut s),
        ["Warning 1265 Data truncated for column 's' at row 1"]
    );
    assert_eq!(
        rows(&mut s, "SELECT s, n FROM tg"),
        [[Some("wxy".to_string()), Some("2".to_string())]]
    );
}
