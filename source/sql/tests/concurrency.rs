//! Many sessions inserting into shared and private prefixes at once: no insert lost, no slot
//! given twice, meta rows consistent, and each ring holds exactly the newest rows in commit
//! order (the binlog's order).

use ringrep_testkit::engine as common;

use std::collections::HashMap;
use std::sync::Arc;

use binlog_format::{BinlogReader, Event, ReaderOptions, Record, RowChange, Value};
use common::*;
use ringrep_engine::clock::ManualClock;
use ringrep_engine::ring::Meta;
use ringrep_engine::InsertMode;

#[test]
fn concurrent_inserts_keep_every_ring_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let engine = open(dir.path(), &clock);
    let def = create(&mut engine.session(), ring_table("events", 5, None, false));
    let threads = 8;
    let per_thread = 150;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (engine, def) = (engine.clone(), def.clone());
            std::thread::spawn(move || {
                let mut s = engine.session();
                let mut retries = 0;
                for i in 0..per_thread {
                    // Half the inserts go to 4 shared prefixes, half to this thread's own.
                    let prefix = if i % 2 == 0 { (i / 2) % 4 } else { 100 + t };
                    let row = vec![Value::Int(prefix), Value::Text(format!("t{t}-{i}"))];
                    loop {
                        match s.statement(|s| {
                            s.insert(&def, &[0, 4], vec![row.clone()], InsertMode::Insert)
                        }) {
                            Ok(_) => break,
                            Err(e) if e.is_lock_conflict() => retries += 1,
                            Err(e) => panic!("insert failed: {e}"),
                        }
                    }
                }
                retries
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread");
    }
    let engine = Arc::new(engine);
    // The commit order of each prefix, from the binlog.
    let mut order: HashMap<i64, Vec<String>> = HashMap::new();
    for item in
        BinlogReader::open(&dir.path().join("binlog"), ReaderOptions::default()).expect("reader")
    {
        if let (_, Record::Transaction(tx)) = item.expect("record") {
            for ev in &tx.events {
                if let Event::Row(r) = ev {
                    if let RowChange::Write { row } = &r.change {
                        if let (Value::Int(p), Value::Text(v)) = (&row[0], &row[4]) {
                            order.entry(*p).or_default().push(v.clone());
                        }
                    }
                }
            }
        }
    }
    let total: usize = order.values().map(Vec::len).sum();
    assert_eq!(
        total,
        (threads * per_thread) as usize,
        "every insert committed once"
    );
    let mut s = engine.session();
    for (prefix, inserted) in &order {
        let rows = s.scan(&def, &[Value::Int(*prefix)]).expect("scan");
        let slots: Vec<i64> = rows
            .iter()
            .map(|r| if let Value::Int(x) = r[1] { x } else { -1 })
            .collect();
        let mut dedup = slots.clone();
        dedup.dedup();
        assert_eq!(slots, dedup, "no slot twice in prefix {prefix}");
        let mut got: Vec<String> = rows.iter().map(|r| r[4].to_string()).collect();
        let mut want: Vec<String> = inserted[inserted.len().saturating_sub(5)..].to_vec();
        got.sort();
        want.sort();
        assert_eq!(got, want, "prefix {prefix} holds the 5 newest rows");
        s.vars.show_meta = true;
        let meta = s
            .scan(&def, &[Value::Int(*prefix), Value::Int(0)])
            .expect("scan");
        s.vars.show_meta = false;
        let Value::Bytes(b) = &meta[0][2] else {
            panic!("meta column")
        };
        let m = Meta::decode(b).expect("meta");
        assert_eq!(
            m.total,
            inserted.len() as u64,
            "total inserts of prefix {prefix}"
        );
        assert_eq!(m.count, inserted.len().min(5) as u32);
        assert_eq!(m.next_slot, (inserted.len() % 5) as u32 + 1);
    }
}

/// Automatic snapshots triggered by many committers at once: one is written at a time, no
/// commit reports an error for them (each is durable before its snapshot is tried), and a
/// restart from the newest snapshot gives back every ring.
#[test]
fn automatic_snapshots_under_concurrent_commits_fail_no_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let mut cfg = config(&clock);
    cfg.snapshot_every = 7;
    cfg.snapshot_log_percent = 0;
    let (engine, _) = ringrep_engine::Engine::open(dir.path(), cfg.clone()).expect("open");
    let def = create(&mut engine.session(), ring_table("snapped", 4, None, false));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (engine, def) = (engine.clone(), def.clone());
            std::thread::spawn(move || {
                let mut s = engine.session();
                for i in 0..60 {
                    let row = vec![Value::Int(t), Value::Text(format!("t{t}-{i}"))];
                    s.statement(|s| s.insert(&def, &[0, 4], vec![row], InsertMode::Insert))
                        .unwrap_or_else(|e| panic!("insert {i} of thread {t} failed: {e}"));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread");
    }
    let s = engine.session();
    let before: Vec<_> = (0..8)
        .map(|t| s.scan(&def, &[Value::Int(t)]).expect("scan"))
        .collect();
    drop(s);
    drop(engine);
    let (engine, report) = ringrep_engine::Engine::open(dir.path(), cfg).expect("reopen");
    assert!(report.snapshot_seq.is_some(), "a snapshot was written");
    let s = engine.session();
    for (t, rows) in before.iter().enumerate() {
        assert_eq!(&s.scan(&def, &[Value::Int(t as i64)]).expect("scan"), rows);
        assert_eq!(rows.len(), 4, "ring of thread {t} full");
    }
}

/// Two transactions that each hold one prefix and then ask for the other's: exactly one is
/// chosen as the deadlock victim (1213, whole transaction rolled back, at once rather than
/// after the lock wait timeout), the other goes on and commits both of its rows.
#[test]
fn crossed_prefix_locks_are_a_deadlock_with_one_victim() {
    use ringrep_engine::error::code;
    use ringrep_sql::{Outcome, SqlSession};
    use std::time::Duration;

    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let mut cfg = config(&clock);
    // Long enough that a 1205 here would mean the cycle was not detected.
    cfg.lock_wait_timeout = Duration::from_secs(30);
    let (engine, _) = ringrep_engine::Engine::open(dir.path(), cfg).expect("open");
    let mut setup = SqlSession::new(&engine);
    setup
        .execute("CREATE DATABASE d")
        .and_then(|_| setup.execute("USE d"))
        .and_then(|_| {
            setup.execute(
                "CREATE TABLE r (p INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
                 ring_meta VARBINARY(64), who VARCHAR(8), PRIMARY KEY (p, ring_idx)) \
                 ENGINE=NDB COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'",
            )
        })
        .expect("setup");

    let start = |who: &'static str, first: i64| {
        let mut s = SqlSession::new(&engine);
        for sql in [
            "USE d".to_string(),
            "BEGIN".to_string(),
            format!("INSERT INTO r (p, who) VALUES ({first}, '{who}')"),
        ] {
            s.execute(&sql).expect("first insert");
        }
        s
    };
    let mut a = start("a", 1);
    let mut b = start("b", 2);
    // Each now asks for the prefix the other holds.
    let second = |mut s: SqlSession, who: &'static str, other: i64| {
        std::thread::spawn(move || {
            let r = s.execute(&format!("INSERT INTO r (p, who) VALUES ({other}, '{who}')"));
            (s, r)
        })
    };
    let ta = second(a, "a", 2);
    let tb = second(b, "b", 1);
    let (sa, ra) = ta.join().expect("a");
    let (sb, rb) = tb.join().expect("b");
    (a, b) = (sa, sb);
    let (winner, mut ws, victim_err) = match (ra, rb) {
        (Ok(_), Err(e)) => ("a", a, e),
        (Err(e), Ok(_)) => ("b", b, e),
        other => panic!("expected exactly one deadlock victim, got {other:?}"),
    };
    assert_eq!(victim_err.code, code::ER_LOCK_DEADLOCK, "{victim_err}");
    ws.execute("COMMIT").expect("winner commits");
    let rows = match setup
        .execute("SELECT p, who FROM r ORDER BY p")
        .expect("select")
    {
        Outcome::Rows(rs) => rs.text_rows(),
        other => panic!("{other:?}"),
    };
    let w = Some(winner.to_string());
    assert_eq!(
        rows,
        vec![vec![Some("1".into()), w.clone()], vec![Some("2".into()), w]],
        "only the winner's rows remain"
    );
}

/// Sessions that defer durability (as the server's connections do) commit on blocking
/// threads and await durability on a tokio runtime: every waiter returns, nothing is lost, and
/// the binlog holds every commit.
#[test]
fn deferred_commits_all_become_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let mut cfg = config(&clock);
    cfg.sync = binlog_format::SyncPolicy::EveryCommit;
    let engine = ringrep_engine::Engine::open(dir.path(), cfg)
        .expect("open")
        .0;
    let def = create(&mut engine.session(), ring_table("d", 1000, None, false));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (tasks, per_task) = (32i64, 40);
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let (engine, def) = (engine.clone(), def.clone());
                tokio::spawn(async move {
                    let mut session = engine.session();
                    session.defer_durability = true;
                    for i in 0..per_task {
                        let def = def.clone();
                        let (back, lsn) = tokio::task::spawn_blocking(move || {
                            let row = vec![Value::Int(t), Value::Text(format!("t{t}-{i}"))];
                            session
                                .statement(|s| {
                                    s.insert(&def, &[0, 4], vec![row], InsertMode::Insert)
                                })
                                .expect("insert");
                            let lsn = session.take_pending_lsn();
                            (session, lsn)
                        })
                        .await
                        .expect("join");
                        session = back;
                        let lsn = lsn.expect("a deferred commit leaves an LSN to wait for");
                        engine.wait_durable_async(lsn).await.expect("durable");
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.expect("task");
        }
    });
    let rows = engine.with_state(|st| st.tables.get(&def.id).map_or(0, |t| t.len()));
    // Every prefix's rows and its meta row.
    assert_eq!(rows, (tasks * (per_task + 1)) as usize);
    drop(engine);
    let transactions = BinlogReader::open(&dir.path().join("binlog"), ReaderOptions::default())
        .expect("reader")
        .filter(|r| matches!(r, Ok((_, Record::Transaction(tx))) if tx.events.iter().all(|e| matches!(e, Event::Row(_)))))
        .count();
    assert_eq!(transactions, (tasks * per_task) as usize);
}
