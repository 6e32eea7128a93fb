//! The affected-row counts clients see, as MySQL's. REPLACE: 1 for a new row, one more for
//! each row it replaced (on the primary key or a unique index), with the duplicates in the
//! info line. INSERT ... ON DUPLICATE KEY UPDATE: 1 per row inserted, 2 per row changed, 0
//! (1 under CLIENT_FOUND_ROWS) per row left as it was.

use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

fn affected(s: &mut SqlSession, sql: &str) -> (u64, Option<String>) {
    match s.execute(sql) {
        Ok(Outcome::Affected { rows, info, .. }) => (rows, info),
        other => panic!("{sql}: {other:?}"),
    }
}

fn rows(s: &mut SqlSession, sql: &str) -> Vec<Vec<Option<String>>> {
    match s.execute(sql) {
        Ok(Outcome::Rows(rs)) => rs.text_rows(),
        other => panic!("{sql}: {other:?}"),
    }
}

#[test]
fn replace_counts_the_rows_it_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineConfig::new(1))
        .expect("open")
        .0;
    let mut s = SqlSession::new(&engine);
    s.execute("CREATE TABLE rp (k VARCHAR(5) PRIMARY KEY, v INT)")
        .expect("create");
    assert_eq!(
        affected(&mut s, "REPLACE INTO rp VALUES ('a', 1)"),
        (1, None)
    );
    assert_eq!(
        affected(&mut s, "REPLACE INTO rp VALUES ('a', 2)"),
        (2, None)
    );
    // A key equal under the collation replaces too.
    assert_eq!(
        affected(&mut s, "REPLACE INTO rp VALUES ('A', 3)"),
        (2, None)
    );
    assert_eq!(
        affected(&mut s, "REPLACE INTO rp VALUES ('a', 4), ('b', 5)"),
        (
            3,
            Some("Records: 2  Duplicates: 1  Warnings: 0".to_string())
        )
    );
    // A clash on a unique index replaces that row too, as MySQL's REPLACE does.
    s.execute("CREATE TABLE ru (id INT PRIMARY KEY, email VARCHAR(20), UNIQUE KEY (email))")
        .expect("create");
    s.execute("INSERT INTO ru VALUES (1, 'a@x'), (2, 'b@x'), (3, NULL)")
        .expect("insert");
    assert_eq!(
        affected(&mut s, "REPLACE INTO ru VALUES (4, 'A@X')"),
        (2, None)
    );
    // One row on the key and another on the unique value: both go.
    assert_eq!(
        affected(&mut s, "REPLACE INTO ru VALUES (2, 'a@x')"),
        (3, None)
    );
    assert_eq!(
        affected(&mut s, "REPLACE INTO ru VALUES (5, NULL)"),
        (1, None)
    );
    // Rows of one statement replace each other in order.
    assert_eq!(
        affected(
            &mut s,
            "REPLACE INTO ru VALUES (8, 'x@x'), (8, 'y@x'), (9, 'Y@X')"
        ),
        (
            5,
            Some("Records: 3  Duplicates: 2  Warnings: 0".to_string())
        )
    );
    assert_eq!(affected(&mut s, "DELETE FROM ru WHERE id = 9"), (1, None));
    assert_eq!(
        rows(&mut s, "SELECT id, email FROM ru ORDER BY id"),
        [
            [Some("2".to_string()), Some("a@x".to_string())],
            [Some("3".to_string()), None],
            [Some("5".to_string()), None],
        ]
    );
    assert_eq!(
        rows(&mut s, "SELECT k, v FROM rp ORDER BY k"),
        [
            [Some("a".to_string()), Some("4".to_string())],
            [Some("b".to_string()), Some("5".to_string())],
        ]
    );
}

#[test]
fn on_duplicate_key_update_counts_as_mysql() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineConfig::new(1))
        .expect("open")
        .0;
    let mut s = SqlSession::new(&engine);
    s.execute("CREATE TABLE od (id INT PRIMARY KEY, v INT)")
        .expect("create");
    let outcome = |s: &mut SqlSession, sql: &str| match s.execute(sql) {
        Ok(Outcome::Affected { rows, info, found }) => (rows, info, found),
        other => panic!("{sql}: {other:?}"),
    };
    let upsert = "INSERT INTO od VALUES (1, 5) ON DUPLICATE KEY UPDATE v = VALUES(v)";
    // Inserted: 1.
    assert_eq!(outcome(&mut s, upsert), (1, None, None));
    // The same row again changes nothing: 0, and 1 for a client counting found rows.
    assert_eq!(outcome(&mut s, upsert), (0, None, Some(1)));
    // Changed: 2, for every client.
    assert_eq!(
        outcome(
            &mut s,
            "INSERT INTO od VALUES (1, 6) ON DUPLICATE KEY UPDATE v = VALUES(v)"
        ),
        (2, None, None)
    );
    // One new, one changed, one left as it was.
    s.execute("INSERT INTO od VALUES (2, 1)").expect("insert");
    assert_eq!(
        outcome(
            &mut s,
            "INSERT INTO od VALUES (1, 7), (2, 1), (3, 1) ON DUPLICATE KEY UPDATE v = VALUES(v)"
        ),
        (
            3,
            Some("Records: 3  Duplicates: 1  Warnings: 0".to_string()),
            Some(4)
        )
    );
    // An UPDATE tells matched rows to such a client.
    assert_eq!(
        outcome(&mut s, "UPDATE od SET v = 1 WHERE id >= 2"),
        (
            0,
            Some("Rows matched: 2  Changed: 0  Warnings: 0".to_string()),
            Some(2)
        )
    );
}
