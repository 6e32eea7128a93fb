//! The applier and the verifier against real engines.

use ringrep_testkit::engine as common;

use std::time::Duration;

use binlog_format::Value;
use common::*;
use ringrep_applier::verify::{verify, Difference, VerifyOptions};
use ringrep_applier::{Applier, ApplyOutcome, BinlogDirSource, Error};
use ringrep_engine::clock::ManualClock;
use ringrep_engine::{Engine, InsertMode};

fn replica(dir: &std::path::Path, clock: &ManualClock) -> Engine {
    let mut cfg = config(clock);
    cfg.server_id = 2;
    cfg.read_only = true;
    Engine::open(dir, cfg).expect("open replica").0
}

/// Runs the applier until the source has nothing more.
async fn run_to_end(applier: &mut Applier, source: &mut BinlogDirSource) -> Result<u64, Error> {
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    applier
        .run(
            source,
            None,
            true,
            Duration::from_millis(100),
            &mut |_, _| {},
            &stop,
        )
        .await
}

/// Applies every transaction of a primary's binlog, one by one.
fn apply_all(applier: &mut Applier, primary_dir: &std::path::Path) {
    for (pos, tx) in binlog_transactions(primary_dir) {
        applier.apply(&tx, pos).expect("apply");
    }
}

/// A primary with a ring table, a TTL ring with a unique index, some wraps, an update, a
/// prefix delete, expiry and a purge.
fn primary_with_workload(dir: &std::path::Path, clock: &ManualClock) -> Engine {
    let engine = open(dir, clock);
    let mut s = engine.session();
    let a = create(&mut s, ring_table("events", 3, None, false));
    let b = create(&mut s, ring_table("ttl_events", 4, Some(60), true));
    for i in 0..20i64 {
        let rows = vec![vec![
            Value::Int(i % 3),
            Value::Text(format!("e{i}")),
            Value::Int(i),
        ]];
        s.statement(|s| s.insert(&a, &[0, 4, 5], rows.clone(), InsertMode::Insert))
            .expect("insert a");
        s.statement(|s| s.insert(&b, &[0, 4, 5], rows, InsertMode::Insert))
            .expect("insert b");
        clock.advance_secs(5);
    }
    s.statement(|s| {
        s.update(
            &a,
            &[4],
            &mut |r| Ok(r[0] == Value::Int(1)),
            &mut |_| Ok(vec![Value::Text("updated".into())]),
            None,
        )
    })
    .expect("update");
    s.statement(|s| s.delete_prefixes(&a, vec![vec![Value::Int(2)]]))
        .expect("delete");
    engine.purge_all(100).expect("purge");
    engine
}

#[tokio::test]
async fn replica_converges_and_duplicates_change_nothing() {
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let primary = primary_with_workload(pdir.path(), &clock);
    let replica = replica(rdir.path(), &clock);
    let mut applier = Applier::new(&replica).expect("applier");
    let mut source = BinlogDirSource::open(&primary.binlog_dir(), 1, primary.notifier());
    let last = run_to_end(&mut applier, &mut source).await.expect("run");
    assert_eq!(last, primary.last_seq());
    let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
    assert!(report.converged, "{}", report.text());
    assert_eq!(report.replica_applied_seq, Some(primary.last_seq()));
    assert!(report.tables.iter().any(|t| t.primary_rows > 0));

    // Delivering everything again changes nothing.
    let before = dump(&replica);
    let replica_seq = replica.last_seq();
    for (pos, tx) in binlog_transactions(pdir.path()) {
        assert_eq!(
            applier.apply(&tx, pos).expect("apply"),
            ApplyOutcome::Skipped { seq: tx.seq }
        );
    }
    assert_eq!(dump(&replica), before);
    assert_eq!(
        replica.last_seq(),
        replica_seq,
        "skipped transactions are not re-logged"
    );
}

#[test]
fn a_gap_stops_the_applier_naming_the_missing_sequence() {
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let _primary = primary_with_workload(pdir.path(), &clock);
    let replica = replica(rdir.path(), &clock);
    let mut applier = Applier::new(&replica).expect("applier");
    let txs = binlog_transactions(pdir.path());
    applier.apply(&txs[0].1, txs[0].0).expect("first");
    let before = dump(&replica);
    match applier.apply(&txs[2].1, txs[2].0) {
        Err(Error::Gap { missing, found, .. }) => assert_eq!((missing, found), (2, 3)),
        other => panic!("expected a gap, got {other:?}"),
    }
    assert_eq!(dump(&replica), before, "nothing applied after a gap");
}

#[test]
fn the_replica_refuses_client_writes_and_raw_writes_need_the_privilege() {
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let primary = primary_with_workload(pdir.path(), &clock);
    let replica = replica(rdir.path(), &clock);
    let mut applier = Applier::new(&replica).expect("applier");
    apply_all(&mut applier, pdir.path());
    let def = replica.table_def("test", "events").expect("table");
    let mut client = replica.session();
    let err = client
        .statement(|s| s.insert(&def, &[0], vec![vec![Value::Int(9)]], InsertMode::Insert))
        .expect_err("read only");
    assert_eq!(err.code, 1290);
    // On the primary, a raw write without the applier privilege is error 940 and changes nothing.
    let pdef = primary.table_def("test", "events").expect("table");
    let mut s = primary.session();
    let before = dump(&primary);
    let row = vec![
        Value::Int(1),
        Value::Int(1),
        Value::Null,
        Value::Timestamp(T0),
        Value::Text("x".into()),
        Value::Null,
    ];
    assert_eq!(s.raw_write(&pdef, row).expect_err("940").code, 940);
    assert_eq!(
        s.raw_delete(&pdef, vec![Value::Int(1), Value::Int(1)])
            .expect_err("940")
            .code,
        940
    );
    assert_eq!(
        s.raw_delete(&pdef, vec![Value::Int(1), Value::Int(0)])
            .expect_err("940")
            .code,
        940
    );
    assert_eq!(dump(&primary), before);
}

#[test]
fn the_verifier_names_every_injected_difference() {
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let primary = primary_with_workload(pdir.path(), &clock);
    let replica = replica(rdir.path(), &clock);
    let mut applier = Applier::new(&replica).expect("applier");
    apply_all(&mut applier, pdir.path());
    let opts = VerifyOptions {
        chunk_rows: 2,
        ..Default::default()
    };
    assert!(verify(&primary, &replica, &opts, &mut |_| {}).converged);

    let def = replica.table_def("test", "events").expect("table");
    let mut s = replica.session();
    s.vars.applier = true;
    let rows = s.scan(&def, &[Value::Int(0)]).expect("scan");
    let mut changed = rows[0].clone();
    changed[4] = Value::Text("tampered".into());
    s.raw_write(&def, changed).expect("change a row");
    s.raw_delete(&def, def.key_of(&rows[1]))
        .expect("delete a row");
    let extra = vec![
        Value::Int(7),
        Value::Int(1),
        Value::Null,
        Value::Timestamp(T0),
        Value::Text("extra".into()),
        Value::Null,
    ];
    s.raw_write(&def, extra).expect("extra row");
    s.vars.show_meta = true;
    let meta = s
        .scan(&def, &[Value::Int(1), Value::Int(0)])
        .expect("scan")
        .into_iter()
        .find(|r| r[1] == Value::Int(0))
        .expect("meta row");
    let mut bad_meta = meta.clone();
    bad_meta[2] = Value::Bytes(
        ringrep_engine::ring::Meta {
            next_slot: 1,
            count: 1,
            total: 99,
        }
        .encode(),
    );
    s.raw_write(&def, bad_meta).expect("change meta");

    let report = verify(&primary, &replica, &opts, &mut |_| {});
    assert!(!report.converged);
    let t = report
        .tables
        .iter()
        .find(|t| t.table == "test.events")
        .expect("table report");
    assert_eq!(
        (t.missing, t.extra, t.different),
        (1, 1, 2),
        "{}",
        report.text()
    );
    assert!(
        t.differences.contains(&Difference::Extra {
            key: "(user_id=7, ring_idx=1)".into()
        }),
        "{:?}",
        t.differences
    );
    assert!(t.differences.iter().any(|d| matches!(d, Difference::Different { meta_row: true, columns, .. } if columns == &["ring_meta".to_string()])));
    assert!(t.differences.iter().any(|d| matches!(d, Difference::Different { meta_row: false, columns, .. } if columns == &["payload".to_string()])));
    let other = report
        .tables
        .iter()
        .find(|t| t.table == "test.ttl_events")
        .expect("other table");
    assert!(other.converged(), "untouched tables still agree");
}

#[tokio::test]
async fn a_corrupt_record_stops_the_applier_with_its_position_and_applies_nothing_after_it() {
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let primary = primary_with_workload(pdir.path(), &clock);
    primary.sync().expect("sync");
    let txs = binlog_transactions(pdir.path());
    drop(primary);
    // Flip a byte inside the 10th transaction's frame.
    let (bad_pos, bad_tx) = (txs[9].0, txs[9].1.seq);
    let seg = pdir
        .path()
        .join("binlog")
        .join(binlog_format::segment::segment_name(bad_pos.segment));
    let mut bytes = std::fs::read(&seg).expect("read");
    bytes[bad_pos.offset as usize + 12] ^= 0x55;
    std::fs::write(&seg, bytes).expect("write");

    let replica = replica(rdir.path(), &clock);
    let mut applier = Applier::new(&replica).expect("applier");
    let mut source = BinlogDirSource::open(&pdir.path().join("binlog"), 1, None);
    let err = run_to_end(&mut applier, &mut source)
        .await
        .expect_err("corruption stops the applier");
    // The message names the segment and byte offset, as an operator reads it.
    assert!(err.to_string().contains(&bad_pos.to_string()), "{err}");
    match err {
        Error::Binlog(binlog_format::Error::Corruption { position, .. }) => {
            assert_eq!(position, bad_pos)
        }
        other => panic!("expected corruption at {bad_pos}, got {other}"),
    }
    let applied = ringrep_applier::applier::read_position(&replica, 1).map_or(0, |p| p.last_seq);
    assert_eq!(
        applied,
        bad_tx - 1,
        "everything before the corrupt record, nothing from it on"
    );
}

/// `SET GLOBAL read_only` stops the TTL purge: a fenced primary writes nothing that the node
/// replacing it would not have. Opened again, it purges what expired meanwhile.
#[test]
fn a_fenced_primary_does_not_purge() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path(), &clock);
    let mut s = engine.session();
    let t = create(&mut s, ring_table("ttl_events", 4, Some(60), false));
    let rows = vec![vec![Value::Int(1), Value::Text("e".into()), Value::Int(1)]];
    s.statement(|s| s.insert(&t, &[0, 4, 5], rows, InsertMode::Insert))
        .expect("insert");
    clock.advance_secs(120);
    let last = engine.last_seq();
    for fence in [
        ringrep_engine::Fence::ReadOnly,
        ringrep_engine::Fence::SuperReadOnly,
    ] {
        engine.set_fence(fence);
        assert_eq!(engine.purge_all(100).expect("purge"), 0, "{fence:?}");
        assert_eq!(engine.last_seq(), last, "{fence:?} wrote nothing");
    }
    engine.set_fence(ringrep_engine::Fence::Open);
    assert!(engine.purge_all(100).expect("purge") > 0);
    assert!(engine.last_seq() > last);
}
