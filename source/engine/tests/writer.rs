//! The native batch writer (the spec's NdbRingBufferWriter).

use ringrep_testkit::engine as common;

use binlog_format::schema::TableDef;
use binlog_format::{BinlogReader, Cause, Event, ReaderOptions, Record, Value};
use common::*;
use ringrep_engine::clock::ManualClock;
use ringrep_engine::ring::Meta;
use ringrep_engine::writer::RingWriter;
use ringrep_engine::Session;

fn meta_updates(dir: &std::path::Path) -> usize {
    BinlogReader::open(&dir.join("binlog"), ReaderOptions::default())
        .expect("reader")
        .map(|r| match r.expect("record") {
            (_, Record::Transaction(tx)) => tx
                .events
                .iter()
                .filter(|e| matches!(e, Event::Row(r) if r.cause == Cause::MetaUpdate))
                .count(),
            _ => 0,
        })
        .sum()
}

fn row(user: i64, payload: &str) -> Vec<(usize, Value)> {
    vec![
        (0, Value::Int(user)),
        (3, Value::Timestamp(T0)),
        (4, Value::Text(payload.into())),
        (5, Value::Null),
    ]
}

/// A session on a new engine in `dir` with a ring table of 3, in an open transaction.
fn ring_of_3(dir: &std::path::Path, clock: &ManualClock) -> (Session, TableDef) {
    let mut s = open(dir, clock).session();
    let def = create(&mut s, ring_table("w", 3, None, false));
    s.begin().expect("begin");
    (s, def)
}

#[test]
fn batches_read_and_write_each_meta_row_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let (mut s, def) = ring_of_3(dir.path(), &clock);
    let mut w = RingWriter::new(&mut s, &def).expect("writer");
    for p in ["a", "b", "c", "d"] {
        w.add_row(&row(1, p)).expect("add");
    }
    w.add_row(&row(2, "x")).expect("add");
    w.add_row(&row(1, "e")).expect("add");
    assert_eq!(w.flush().expect("flush"), 6);
    s.commit().expect("commit");
    // Batches: [1: a b c d], [2: x], [1: e] -> three meta-row writes.
    assert_eq!(meta_updates(dir.path()), 3);
    let rows = s.scan(&def, &[Value::Int(1)]).expect("scan");
    let got: Vec<String> = rows.iter().map(|r| r[4].to_string()).collect();
    assert_eq!(got, ["d", "e", "c"]);
}

#[test]
fn an_overwrite_keeps_columns_the_row_does_not_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path(), &ManualClock::new(T0));
    let mut s = engine.session();
    let def = create(&mut s, ring_table("w", 1, None, false));
    let mut w = RingWriter::new(&mut s, &def).expect("writer");
    w.add_row(&[
        (0, Value::Int(1)),
        (4, Value::Text("first".into())),
        (5, Value::Int(7)),
    ])
    .expect("add");
    w.flush().expect("flush");
    let mut w = RingWriter::new(&mut s, &def).expect("writer");
    w.add_row(&[(0, Value::Int(1)), (4, Value::Text("second".into()))])
        .expect("add");
    w.flush().expect("flush");
    s.commit().expect("commit");
    let rows = s.scan(&def, &[Value::Int(1)]).expect("scan");
    assert_eq!(rows[0][4], Value::Text("second".into()));
    assert_eq!(
        rows[0][5],
        Value::Int(7),
        "column 5 kept the overwritten row's value"
    );
}

/// The writer and the session reuse row vectors (the writer's batch, committed rows): a row
/// never carries values of the one whose vector it took, whatever columns each set.
#[test]
fn reused_rows_carry_nothing_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let (mut s, def) = ring_of_3(dir.path(), &clock);
    let mut w = RingWriter::new(&mut s, &def).expect("writer");
    // Every column, then fewer: a new mask sends the batch, and its vectors serve again.
    w.add_row(&[
        (0, Value::Int(1)),
        (3, Value::Timestamp(T0 - 5_000_000)),
        (4, Value::Text("all".into())),
        (5, Value::Int(7)),
    ])
    .expect("add");
    w.add_row(&[(0, Value::Int(2)), (4, Value::Text("some".into()))])
        .expect("add");
    w.flush().expect("flush");
    s.commit().expect("commit");
    clock.advance_secs(1);
    s.begin().expect("begin");
    let mut w = RingWriter::new(&mut s, &def).expect("writer");
    w.add_row(&[(0, Value::Int(3)), (4, Value::Text("later".into()))])
        .expect("add");
    w.flush().expect("flush");
    s.commit().expect("commit");
    let expect = |user: i64, ts: i64, payload: &str, code: Value| {
        let rows = s.scan(&def, &[Value::Int(user)]).expect("scan");
        assert_eq!(rows.len(), 1, "user {user}");
        assert_eq!(rows[0][3], Value::Timestamp(ts), "user {user}");
        assert_eq!(rows[0][4], Value::Text(payload.into()), "user {user}");
        assert_eq!(rows[0][5], code, "user {user}");
    };
    expect(1, T0 - 5_000_000, "all", Value::Int(7));
    // Columns not set take their defaults (the clock's time, NULL).
    expect(2, T0, "some", Value::Null);
    expect(3, T0 + 1_000_000, "later", Value::Null);
}

#[test]
fn wrong_arguments_are_error_4118_and_a_failed_writer_stays_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path(), &ManualClock::new(T0));
    let mut s = engine.session();
    let ring = create(&mut s, ring_table("w", 3, None, false));
    let mut plain = ring_table("p", 3, None, false);
    plain.comment = None;
    let plain = create(
        &mut s,
        ringrep_engine::ddl::prepare_table(plain, None, false).expect("plain"),
    );
    assert_eq!(
        RingWriter::new(&mut s, &plain).err().map(|e| e.code),
        Some(4118)
    );
    let mut w = RingWriter::new(&mut s, &ring).expect("writer");
    assert_eq!(
        w.add_row(&[(0, Value::Int(1)), (1, Value::Int(2))])
            .err()
            .map(|e| e.code),
        Some(4118),
        "slot column in the mask"
    );
    assert_eq!(
        w.add_row(&row(1, "ok")).err().map(|e| e.code),
        Some(4118),
        "a failed writer cannot be used again"
    );
}

#[test]
fn ttl_rings_need_every_column_and_refuse_delete_oldest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path(), &ManualClock::new(T0));
    let mut s = engine.session();
    let def = create(&mut s, ring_table("t", 3, Some(60), false));
    let mut w = RingWriter::new(&mut s, &def).expect("writer");
    assert_eq!(
        w.delete_oldest(&[Value::Int(1)], 1).err().map(|e| e.code),
        Some(4358)
    );
    w.add_row(&row(1, "full row"))
        .expect("every column set: accepted after 4358");
    assert_eq!(
        w.add_row(&[(0, Value::Int(1)), (4, Value::Text("partial".into()))])
            .err()
            .map(|e| e.code),
        Some(4359)
    );
}

#[test]
fn delete_oldest_frees_the_oldest_slots_and_inserts_refill_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path(), &ManualClock::new(T0));
    let mut s = engine.session();
    let def = create(&mut s, ring_table("d", 4, None, false));
    let mut w = RingWriter::new(&mut s, &def).expect("writer");
    for p in ["a", "b", "c", "d", "e", "f"] {
        w.add_row(&row(1, p)).expect("add");
    }
    w.flush().expect("flush");
    // Slots now: 1=e 2=f 3=c 4=d; oldest first: c, d.
    assert_eq!(w.delete_oldest(&[Value::Int(1)], 2).expect("delete"), 2);
    w.add_row(&row(1, "g")).expect("add");
    w.flush().expect("flush");
    s.commit().expect("commit");
    let rows = s.scan(&def, &[Value::Int(1)]).expect("scan");
    let got: Vec<(Value, String)> = rows
        .iter()
        .map(|r| (r[1].clone(), r[4].to_string()))
        .collect();
    assert_eq!(
        got,
        [
            (Value::Int(1), "e".to_string()),
            (Value::Int(2), "f".into()),
            (Value::Int(3), "g".into())
        ]
    );
    s.vars.show_meta = true;
    let meta = s.scan(&def, &[Value::Int(1), Value::Int(0)]).expect("scan");
    let Value::Bytes(b) = &meta[0][2] else {
        panic!("meta")
    };
    assert_eq!(
        Meta::decode(b),
        Some(Meta {
            next_slot: 4,
            count: 3,
            total: 7
        })
    );
}
