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

#[test]
fn a_select_warns_where_a_write_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineConfig::new(1))
        .expect("open")
        .0;
    let mut s = SqlSession::new(&engine);
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
