//! The group commit's fsync run by a runtime worker that has run out of work
//! (`Engine::sync_when_workers_idle`, tokio's `on_thread_park`), and the leader a commit
//! starts when no worker goes idle.

use binlog_format::{SyncPolicy, Value};
use ringrep_engine::clock::ManualClock;
use ringrep_engine::{Engine, InsertMode};
use ringrep_testkit::engine::{config, create, ring_table, T0};

/// An engine that fsyncs every commit, its table `t` (rings of 3), with idle syncs on.
fn engine(dir: &std::path::Path) -> (Engine, binlog_format::schema::TableDef) {
    let clock = ManualClock::new(T0);
    let mut cfg = config(&clock);
    cfg.sync = SyncPolicy::EveryCommit;
    let (engine, _) = Engine::open(dir, cfg).expect("open");
    let def = create(&mut engine.session(), ring_table("t", 3, None, false));
    engine.sync_when_workers_idle();
    (engine, def)
}

/// Commits `n` inserts one after another as the server does (durability deferred, then
/// awaited), each acknowledged only once durable.
async fn commit_one_by_one(engine: &Engine, def: &binlog_format::schema::TableDef, n: i64) {
    let mut s = engine.session();
    s.defer_durability = true;
    for i in 0..n {
        s.statement(|s| {
            s.insert(
                def,
                &[0, 4],
                vec![vec![Value::Int(i % 5), Value::Text(format!("r{i}"))]],
                InsertMode::Insert,
            )
        })
        .expect("insert");
        let lsn = s.take_pending_lsn().expect("a commit to wait for");
        engine.wait_durable_async(lsn).await.expect("durable");
    }
}

/// Commits `n` inserts from each of `tasks` tasks at once on `runtime`; every one
/// acknowledged only once durable.
fn commit_concurrently(
    runtime: &tokio::runtime::Runtime,
    engine: &Engine,
    def: &binlog_format::schema::TableDef,
    tasks: usize,
    n: i64,
) {
    runtime.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let (engine, def) = (engine.clone(), def.clone());
                tokio::spawn(async move { commit_one_by_one(&engine, &def, n).await })
            })
            .collect();
        for h in handles {
            h.await.expect("committer");
        }
    });
}

fn runtime(hook: Option<&Engine>) -> tokio::runtime::Runtime {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(2).enable_all();
    if let Some(engine) = hook {
        let idle = engine.clone();
        b.on_thread_park(move || idle.sync_when_idle());
    }
    b.build().expect("runtime")
}

#[test]
fn a_lone_committer_fsyncs_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, def) = engine(dir.path());
    let idle = engine.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(move || idle.sync_when_idle())
        .build()
        .expect("runtime");
    let before = engine.binlog_fsyncs();
    runtime.block_on(commit_one_by_one(&engine, &def, 20));
    // Each commit was the only one waiting, as the one before it: it fsynced right where it
    // ran, once per commit, and left nothing to the worker's hook.
    assert_eq!(engine.binlog_fsyncs() - before, 20);
    assert_eq!(engine.binlog_fsyncs_when_idle(), 0);
    assert_eq!(engine.durable_seq(), engine.last_seq());
}

#[test]
fn concurrent_commits_are_fsynced_by_the_workers_when_idle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, def) = engine(dir.path());
    let runtime = runtime(Some(&engine));
    // Commits overlap once two workers run them (how soon depends on the machine): from then
    // on groups form, and the worker that runs out of work fsyncs for them.
    for _ in 0..50 {
        commit_concurrently(&runtime, &engine, &def, 16, 20);
        assert_eq!(engine.durable_seq(), engine.last_seq());
        if engine.binlog_fsyncs_when_idle() > 0 {
            return;
        }
    }
    panic!("16 committers on two workers never left an fsync to an idle worker");
}

#[test]
fn without_the_hook_commits_fsync_themselves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, def) = engine(dir.path());
    // The runtime never calls `sync_when_idle` (as a worker that never runs out of work):
    // a commit waits out its patience, then fsyncs for its group itself.
    let runtime = runtime(None);
    let before = engine.last_seq();
    commit_concurrently(&runtime, &engine, &def, 16, 20);
    assert_eq!(engine.binlog_fsyncs_when_idle(), 0);
    assert_eq!(engine.last_seq(), before + 16 * 20);
    assert_eq!(engine.durable_seq(), engine.last_seq());
}
