//! The replica's apply commit under injected I/O errors (TiKV's `fail` crate, in test
//! builds): the commit fails with the engine's error for it, retriable; the replica's state
//! and stored position go back to what is durable; a new run from that position (what the
//! replica channel does after its pause) applies the rest exactly once and converges.

use ringrep_testkit::engine as common;

use std::time::Duration;

use binlog_format::{SyncPolicy, Value};
use common::*;
use ringrep_applier::verify::{verify, VerifyOptions};
use ringrep_applier::{Applier, BinlogDirSource, Error};
use ringrep_engine::clock::ManualClock;
use ringrep_engine::{Engine, InsertMode};

fn replica(dir: &std::path::Path, clock: &ManualClock) -> Engine {
    let mut cfg = config(clock);
    cfg.server_id = 2;
    cfg.read_only = true;
    // Every commit fsynced: the point where an fsync fails is the commit.
    cfg.sync = SyncPolicy::EveryCommit;
    Engine::open(dir, cfg).expect("open replica").0
}

/// Runs the applier from `from` until the source has nothing more (or `until`).
async fn run(
    applier: &mut Applier,
    primary: &Engine,
    from: u64,
    until: Option<u64>,
) -> Result<u64, Error> {
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let mut source = BinlogDirSource::open(&primary.binlog_dir(), from, None);
    applier
        .run(
            &mut source,
            until,
            true,
            Duration::from_millis(100),
            &mut |_, _| {},
            &stop,
        )
        .await
}

async fn apply_through(point: &str, action: &str, code: u16) {
    let scenario = fail::FailScenario::setup();
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let primary = open(pdir.path(), &clock);
    let mut s = primary.session();
    let def = create(&mut s, ring_table("events", 3, None, false));
    for i in 0..60i64 {
        let rows = vec![vec![Value::Int(i % 5), Value::Text(format!("e{i}"))]];
        s.statement(|s| s.insert(&def, &[0, 4], rows, InsertMode::Insert))
            .expect("insert");
    }
    primary.sync().expect("sync");
    let replica = replica(rdir.path(), &clock);
    let mut applier = Applier::new(&replica).expect("applier");
    run(&mut applier, &primary, 1, Some(30))
        .await
        .expect("the first half");

    let armed = fail::FailGuard::new(point, action).expect("arm");
    let e = run(&mut applier, &primary, 31, None)
        .await
        .expect_err("the apply commit fails");
    drop(armed);
    match &e {
        Error::Engine(e) => assert_eq!(e.code, code, "{point}: {e}"),
        other => panic!("{point}: not the engine's error: {other}"),
    }
    assert!(e.is_retriable(), "{point}: {e}");
    // The stored position is what the state holds: nothing applied past it survives.
    let at = ringrep_applier::applier::read_position(&replica, 1).map_or(0, |p| p.last_seq);
    assert!((30..60).contains(&at), "{point}: position {at}");

    // As the channel resumes after its pause: a new run from the stored position.
    drop(applier);
    let mut applier = Applier::new(&replica).expect("applier");
    let last = run(&mut applier, &primary, at + 1, None)
        .await
        .expect("the rest");
    assert_eq!(last, primary.last_seq(), "{point}");
    let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
    assert!(report.converged, "{point}: {}", report.text());
    drop(applier);
    drop(replica);
    let replica = self::replica(rdir.path(), &clock);
    let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
    assert!(report.converged, "{point}, reopened: {}", report.text());
    scenario.teardown();
}

#[tokio::test]
async fn an_apply_commit_whose_fsync_fails_is_taken_back_and_applied_again() {
    apply_through("binlog::fsync", "1*return(eio)", 1105).await;
}

#[tokio::test]
async fn an_apply_commit_on_a_full_disk_is_1021_and_applied_again() {
    apply_through("binlog::write", "1*return(enospc)", 1021).await;
    apply_through("binlog::write", "1*return(short)", 1021).await;
}
