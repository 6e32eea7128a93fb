//! The engine against the reference model (`ringrep-model`) under random operations, with
//! the replay invariant and restart checked at the end of every run; and snapshots.

use ringrep_testkit::engine as common;

use binlog_format::Value;
use common::*;
use proptest::prelude::*;
use ringrep_engine::clock::ManualClock;
use ringrep_engine::InsertMode;
use ringrep_model::Op;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3usize, 0..4i64, 1..6usize).prop_map(|(table, prefix, n)| Op::Insert { table, prefix, n }),
        2 => (0..3usize, proptest::collection::vec(0..4i64, 1..6)).prop_map(|(table, prefixes)| Op::InsertMany { table, prefixes }),
        2 => (0..3usize, proptest::collection::vec((0..4i64, 1..4usize), 1..5)).prop_map(|(table, runs)| Op::Writer {
            table,
            prefixes: runs.into_iter().flat_map(|(p, n)| std::iter::repeat_n(p, n)).collect(),
        }),
        1 => (0..3usize, 0..4i64).prop_map(|(table, prefix)| Op::RolledBack { table, prefix }),
        2 => (0..3usize, 0..4i64).prop_map(|(table, prefix)| Op::Update { table, prefix }),
        2 => (0..3usize, proptest::collection::vec(0..4i64, 1..3)).prop_map(|(table, prefixes)| Op::DeletePrefixes { table, prefixes }),
        1 => (0..3usize).prop_map(|table| Op::Truncate { table }),
        2 => (1..80i64).prop_map(|secs| Op::Advance { secs }),
        1 => Just(Op::Purge),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_the_reference_model(ops in proptest::collection::vec(op(), 1..60)) {
        ringrep_model::run(ops).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn snapshots_bound_recovery_and_restore_the_same_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let mut cfg = config(&clock);
    cfg.snapshot_every = 10;
    cfg.snapshot_log_percent = 0;
    let (engine, _) = ringrep_engine::Engine::open(dir.path(), cfg.clone()).expect("open");
    let mut s = engine.session();
    let def = create(&mut s, ring_table("snap", 3, None, false));
    for i in 0..34 {
        s.statement(|s| {
            s.insert(
                &def,
                &[0, 4],
                vec![vec![Value::Int(i % 4), Value::Text(format!("r{i}"))]],
                InsertMode::Insert,
            )
        })
        .expect("insert");
    }
    let before = dump(&engine);
    let last = engine.last_seq();
    drop(s);
    drop(engine);
    let (engine, report) = ringrep_engine::Engine::open(dir.path(), cfg).expect("reopen");
    let snap = report.snapshot_seq.expect("a snapshot was written");
    // Snapshots are written in the background and one at a time, so which of the later ones
    // exist depends on timing; the first is always taken, and dropping the engine waits for
    // any being written.
    assert!(
        (10..=last).contains(&snap),
        "snapshot at {snap}, last seq {last}"
    );
    assert_eq!(
        report.replayed,
        last - snap,
        "only the binlog after the snapshot is replayed"
    );
    assert_eq!(dump(&engine), before);
}
