//! A copying ALTER TABLE drops the expired rows the TTL purge has not reached yet. Replicas
//! replace the table's rows with the ALTER's writes; a change stream's consumer only sees
//! records, so each row dropped is also a delete in the ALTER's transaction, else consumers
//! keep it for ever.

use ringrep_testkit::engine as common;

use binlog_format::{BinlogReader, Cause, Event, ReaderOptions, Record, RowChange};
use common::*;
use ringrep_engine::clock::ManualClock;
use ringrep_sql::SqlSession;

#[test]
fn an_alter_that_drops_expired_rows_logs_their_deletes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let engine = open(dir.path(), &clock);
    let mut s = SqlSession::new(&engine);
    s.execute("CREATE TABLE test.t (k INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(32), created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), v INT, PRIMARY KEY (k, ring_idx)) COMMENT='NDB_TABLE=TTL=10@created_at,MAX_ROWS_PER_PK=4'")
        .expect("create");
    for i in 0..6 {
        s.execute(&format!(
            "INSERT INTO test.t (k, v) VALUES ({}, {i})",
            i % 2
        ))
        .expect("insert");
    }
    // Those six expire; two more do not.
    clock.advance_secs(20);
    for i in 6..8 {
        s.execute(&format!(
            "INSERT INTO test.t (k, v) VALUES ({}, {i})",
            i % 2
        ))
        .expect("insert");
    }
    s.execute("ALTER TABLE test.t ADD COLUMN extra INT")
        .expect("alter");
    let alter = BinlogReader::open(&dir.path().join("binlog"), ReaderOptions::default())
        .expect("reader")
        .filter_map(|r| match r.expect("record") {
            (_, Record::Transaction(tx)) => Some(tx),
            _ => None,
        })
        .last()
        .expect("the ALTER's transaction");
    let (mut writes, mut purged) = (0, 0);
    for ev in &alter.events {
        match ev {
            Event::Row(r) => match (&r.change, r.cause) {
                (RowChange::Write { .. }, _) => writes += 1,
                (RowChange::Delete { .. }, Cause::TtlPurge) => purged += 1,
                other => panic!("unexpected event in the ALTER: {other:?}"),
            },
            Event::Ddl(_) => {}
        }
    }
    // Two prefixes, rings of 4, four inserts each (no overwrite): each keeps its meta row and
    // its live row and drops its three expired rows.
    assert_eq!(writes, 4, "two meta rows and the two live rows are kept");
    assert_eq!(
        purged, 6,
        "the rows the ALTER drops as expired, each a delete"
    );
}
