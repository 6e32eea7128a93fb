//! The affected-row counts clients see for REPLACE, as MySQL's: 1 for a new row, one more for
//! each row it replaced (on the primary key or a unique index), with the duplicates in the
//! info line.

use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

fn affected(s: &mut SqlSession, sql: &str) -> (u64, Option<String>) {
    match s.execute(sql) {
        Ok(Outcome::Affected { rows, info }) => (rows, info),
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
