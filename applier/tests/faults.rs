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

    // As the channel resumes after its pause: a new run of the same applier from the stored
    // position, once nothing of the failed run is left to wait for. The channel pauses and
    // tries again; so does this, for at most 5 s (the heal of the failed write may still be
    // under way the moment the run returns).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while let Err(e) = applier.flush() {
        assert!(
            std::time::Instant::now() < deadline,
            "{point}: still failing 5 s after the failed run: {e}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The stored position is what the state holds once the failed commits were taken back:
    // nothing applied past it survives.
    let at = ringrep_applier::applier::read_position(&replica, 1).map_or(0, |p| p.last_seq);
    assert!((30..60).contains(&at), "{point}: position {at}");
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
    // The engines go before the scenario ends: a write of theirs after it would take the
    // failure the next scenario arms (failpoints are the process's).
    drop(replica);
    drop(primary);
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

/// A primary with a ring table and `n` inserts into it.
fn primary_with_inserts(dir: &std::path::Path, clock: &ManualClock, n: i64) -> Engine {
    let primary = open(dir, clock);
    let mut s = primary.session();
    let def = create(&mut s, ring_table("events", 3, None, false));
    for i in 0..n {
        let rows = vec![vec![Value::Int(i % 5), Value::Text(format!("e{i}"))]];
        s.statement(|s| s.insert(&def, &[0, 4], rows, InsertMode::Insert))
            .expect("insert");
    }
    primary.sync().expect("sync");
    primary
}

/// Applies the first `durable` of `txs` waiting for each fsync, and the rest without, as the
/// applier does with a sync delay; then fails the fsync that would have covered the rest (as
/// the background syncer's would).
fn apply_then_fail_the_deferred_fsync(
    applier: &mut Applier,
    txs: &[(binlog_format::Position, binlog_format::Transaction)],
    durable: usize,
) {
    for (pos, tx) in &txs[..durable] {
        applier.apply(tx, *pos).expect("durable");
    }
    for (pos, tx) in &txs[durable..] {
        applier
            .apply_nowait(tx, *pos)
            .expect("applied, not yet synced");
    }
    let _armed = fail::FailGuard::new("binlog::fsync", "1*return(eio)").expect("arm");
    applier
        .engine()
        .sync()
        .expect_err("the deferred fsync fails");
}

/// The applier checks a transaction's sequence number against the position the state holds,
/// then commits it. When a background fsync fails in between (the applier defers its fsyncs),
/// the commit heals the binlog first and takes applied transactions back: the position they
/// left is gone, and the transaction must be refused rather than applied after a hole.
#[tokio::test]
async fn a_transaction_applied_after_a_failed_background_fsync_is_refused_not_left_after_a_gap() {
    let scenario = fail::FailScenario::setup();
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let primary = primary_with_inserts(pdir.path(), &clock, 12);
    let txs = binlog_transactions(pdir.path());
    let replica = replica(rdir.path(), &clock);
    let mut applier = Applier::new(&replica).expect("applier");
    apply_then_fail_the_deferred_fsync(&mut applier, &txs[..8], 4);
    let (pos, tx) = &txs[8];
    let e = applier
        .apply_nowait(tx, *pos)
        .expect_err("refused: the transactions before it were taken back");
    assert!(e.is_retriable(), "{e}");
    let at = ringrep_applier::applier::read_position(&replica, 1).map_or(0, |p| p.last_seq);
    assert_eq!(at, txs[3].1.seq, "the position is the last durable one");

    // The channel goes on with the same applier: nothing of the refused commit's run is
    // waited for again.
    applier.flush().expect("nothing pending");
    let last = run(&mut applier, &primary, at + 1, None)
        .await
        .expect("the rest");
    assert_eq!(last, primary.last_seq());
    let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
    assert!(report.converged, "{}", report.text());
    scenario.teardown();
}

/// With a sync delay the apply does not wait for the replica's disk: what it applied is
/// visible before it is durable, and the background syncer makes it durable without the
/// applier waiting (here, while the applier sits idle on a source with nothing more).
#[tokio::test]
async fn a_deferred_sync_does_not_hold_the_apply_and_still_makes_everything_durable() {
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let primary = primary_with_inserts(pdir.path(), &clock, 40);
    let replica = replica(rdir.path(), &clock);

    // A delay longer than the test: nothing the run applies is fsynced until it returns.
    let mut applier = Applier::new(&replica).expect("applier");
    applier.set_sync_delay(Duration::from_secs(3600));
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let mut source = BinlogDirSource::open(&primary.binlog_dir(), 1, None);
    let mut unsynced_seen = 0;
    let last = applier
        .run(
            &mut source,
            Some(20),
            false,
            Duration::from_millis(100),
            &mut |a, _| {
                let e = a.engine();
                if e.durable_seq() < e.last_seq() {
                    unsynced_seen += 1;
                }
            },
            &stop,
        )
        .await
        .expect("run");
    assert_eq!(last, 20);
    assert_eq!(unsynced_seen, 20, "every apply went on before its fsync");
    assert_eq!(
        replica.durable_seq(),
        replica.last_seq(),
        "durable when the run returns"
    );

    // A short delay, and a run that stays up with nothing more to apply: the background
    // syncer makes the rest durable on its own.
    applier.set_sync_delay(Duration::from_millis(20));
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let engine = replica.clone();
    let end = primary.last_seq();
    let watcher = tokio::spawn(async move {
        for _ in 0..3000 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if ringrep_applier::applier::read_position(&engine, 1).map(|p| p.last_seq) == Some(end)
                && engine.durable_seq() == engine.last_seq()
            {
                break;
            }
        }
        let durable = engine.durable_seq() == engine.last_seq();
        stop_tx.send(true).expect("stop");
        durable
    });
    let mut source = BinlogDirSource::open(&primary.binlog_dir(), 21, None);
    applier
        .run(
            &mut source,
            None,
            false,
            Duration::from_millis(50),
            &mut |_, _| {},
            &stop,
        )
        .await
        .expect("run");
    assert!(
        watcher.await.expect("watcher"),
        "the background syncer made the applied transactions durable"
    );
    let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
    assert!(report.converged, "{}", report.text());
}

/// Copies a replica's data directory as a power cut would leave it: each binlog segment cut
/// back to its last fsync (`failpoint::synced_lengths`), one never fsynced gone.
fn copy_as_after_power_loss(from: &std::path::Path, to: &std::path::Path) {
    let synced = binlog_format::failpoint::synced_lengths();
    std::fs::create_dir_all(to.join("binlog")).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        if entry.path().is_file() && entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
    for entry in std::fs::read_dir(from.join("binlog"))
        .expect("binlog")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("binlog.") || name.ends_with(".tmp") {
            continue;
        }
        let target = to.join("binlog").join(&name);
        std::fs::copy(entry.path(), &target).expect("copy");
        if name == "binlog.index" || name == "binlog.durable" {
            continue;
        }
        match synced.get(&entry.path()) {
            Some(&len) => std::fs::OpenOptions::new()
                .write(true)
                .open(&target)
                .and_then(|f| f.set_len(len))
                .expect("cut"),
            None => std::fs::remove_file(&target).expect("remove"),
        }
    }
}

/// A power cut on a replica whose fsyncs are deferred takes back what the delay had not yet
/// covered, the stored position with it (they are one record): the replica fetches those
/// transactions again, each exactly once.
#[tokio::test]
async fn a_power_cut_takes_back_unsynced_applies_with_their_position_and_they_are_fetched_again() {
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let cut = tempfile::tempdir().expect("tempdir");
    let primary = primary_with_inserts(pdir.path(), &clock, 30);
    let txs = binlog_transactions(pdir.path());
    let replica = replica(rdir.path(), &clock);
    let mut applier = Applier::new(&replica).expect("applier");
    for (pos, tx) in &txs[..10] {
        applier.apply(tx, *pos).expect("durable");
    }
    for (pos, tx) in &txs[10..] {
        applier
            .apply_nowait(tx, *pos)
            .expect("applied, its fsync deferred");
    }
    let applied = ringrep_applier::applier::read_position(&replica, 1).map(|p| p.last_seq);
    assert_eq!(applied, Some(txs.last().expect("txs").1.seq));
    copy_as_after_power_loss(rdir.path(), cut.path());

    let replica = self::replica(cut.path(), &clock);
    let at = ringrep_applier::applier::read_position(&replica, 1).map_or(0, |p| p.last_seq);
    assert_eq!(at, txs[9].1.seq, "the position the last fsync covered");
    let mut applier = Applier::new(&replica).expect("applier");
    let last = run(&mut applier, &primary, at + 1, None)
        .await
        .expect("the rest");
    assert_eq!(last, primary.last_seq());
    let origins: Vec<u64> = binlog_transactions(cut.path())
        .into_iter()
        .filter_map(|(_, tx)| tx.origin.map(|o| o.seq))
        .collect();
    assert_eq!(
        origins,
        (1..=last).collect::<Vec<_>>(),
        "each primary transaction exactly once in the replica's binlog"
    );
    let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
    assert!(report.converged, "{}", report.text());
}

/// A replica whose deferred fsync failed while nothing was applying (its channel stopped) is
/// still promotable: promotion heals the binlog, takes back what the fsync did not cover, and
/// makes the rest durable before the node takes writes.
#[tokio::test]
async fn a_replica_whose_deferred_fsync_failed_is_healed_when_promoted() {
    let scenario = fail::FailScenario::setup();
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let primary = primary_with_inserts(pdir.path(), &clock, 8);
    let txs = binlog_transactions(pdir.path());
    let replica = replica(rdir.path(), &clock);
    let mut applier = Applier::new(&replica).expect("applier");
    apply_then_fail_the_deferred_fsync(&mut applier, &txs, 3);
    replica
        .promote()
        .expect("promoted despite the failed fsync");
    let at = ringrep_applier::applier::read_position(&replica, 1).map_or(0, |p| p.last_seq);
    assert_eq!(
        at, txs[2].1.seq,
        "what the fsync did not cover is taken back"
    );
    assert_eq!(
        replica.durable_seq(),
        replica.last_seq(),
        "the rest is durable"
    );
    drop(primary);
    scenario.teardown();
}
