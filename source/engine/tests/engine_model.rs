//! The engine against a reference model under random operations, with the replay invariant
//! and restart checked at the end of every run.

use ringrep_testkit::engine as common;

use std::collections::HashMap;

use binlog_format::{BinlogReader, Origin, ReaderOptions, Record, Value};
use common::*;
use proptest::prelude::*;
use ringrep_engine::clock::ManualClock;
use ringrep_engine::ring::Meta;
use ringrep_engine::writer::RingWriter;
use ringrep_engine::{InsertMode, Session};

const TTL_SECS: i64 = 100;

#[derive(Debug, Clone)]
enum Op {
    /// Insert `n` rows into one prefix in one statement.
    Insert {
        table: usize,
        prefix: i64,
        n: usize,
    },
    /// A multi-row insert over several prefixes.
    InsertMany {
        table: usize,
        prefixes: Vec<i64>,
    },
    /// Rows through the native writer in one transaction, in this order of prefixes (runs of
    /// one prefix are its batches).
    Writer {
        table: usize,
        prefixes: Vec<i64>,
    },
    /// Insert, then roll back.
    RolledBack {
        table: usize,
        prefix: i64,
    },
    Update {
        table: usize,
        prefix: i64,
    },
    DeletePrefixes {
        table: usize,
        prefixes: Vec<i64>,
    },
    Truncate {
        table: usize,
    },
    Advance {
        secs: i64,
    },
    Purge,
}

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

/// One prefix of the model: slots 1..=N holding (payload, insert time), and the meta row.
#[derive(Debug, Clone, Default)]
struct Ring {
    slots: HashMap<u32, (String, i64)>,
    meta: Option<Meta>,
}

struct Model {
    sizes: Vec<u32>,
    ttl: Vec<bool>,
    rings: Vec<HashMap<i64, Ring>>,
    now: i64,
    counter: u64,
}

impl Model {
    fn expired(&self, table: usize, at: i64) -> bool {
        self.ttl[table] && at + TTL_SECS * 1_000_000 <= self.now
    }

    fn insert(&mut self, table: usize, prefix: i64, payload: String) {
        let size = self.sizes[table];
        let now = self.now;
        let ring = self.rings[table].entry(prefix).or_default();
        let mut meta = ring.meta.unwrap_or_else(Meta::empty);
        let (slot, _) = meta.advance(size);
        ring.meta = Some(meta);
        ring.slots.insert(slot, (payload, now));
    }

    fn visible(&self, table: usize, prefix: i64) -> Vec<(i64, String)> {
        let mut v: Vec<(i64, String)> = self.rings[table]
            .get(&prefix)
            .map(|r| {
                r.slots
                    .iter()
                    .filter(|(_, (_, at))| !self.expired(table, *at))
                    .map(|(s, (p, _))| (i64::from(*s), p.clone()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

fn check(
    s: &mut Session,
    model: &Model,
    defs: &[binlog_format::TableDef],
) -> Result<(), TestCaseError> {
    for (t, def) in defs.iter().enumerate() {
        for prefix in 0..4i64 {
            s.vars.show_meta = false;
            let rows = s.scan(def, &[Value::Int(prefix)]).expect("scan");
            let got: Vec<(i64, String)> = rows
                .iter()
                .map(|r| match (&r[1], &r[4]) {
                    (Value::Int(slot), Value::Text(p)) => (*slot, p.clone()),
                    other => panic!("unexpected row {other:?}"),
                })
                .collect();
            prop_assert_eq!(
                &got,
                &model.visible(t, prefix),
                "table {} prefix {}",
                def.name,
                prefix
            );
            s.vars.show_meta = true;
            let meta_rows: Vec<_> = s
                .scan(def, &[Value::Int(prefix), Value::Int(0)])
                .expect("scan")
                .into_iter()
                .filter(|r| r[1] == Value::Int(0))
                .collect();
            s.vars.show_meta = false;
            let got_meta = meta_rows.first().map(|r| match &r[2] {
                Value::Bytes(b) => Meta::decode(b).expect("meta layout"),
                other => panic!("meta column {other:?}"),
            });
            let want = model.rings[t].get(&prefix).and_then(|r| r.meta);
            prop_assert_eq!(
                got_meta,
                want,
                "meta of table {} prefix {}",
                def.name,
                prefix
            );
            if let Some(r) = meta_rows.first() {
                if def.ttl.is_some() {
                    prop_assert_eq!(
                        &r[3],
                        &Value::Timestamp(2_147_483_647_000_000),
                        "meta TTL column at its maximum"
                    );
                }
            }
        }
    }
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let engine = open(dir.path(), &clock);
    let mut s = engine.session();
    let defs = vec![
        create(&mut s, ring_table("r1", 1, None, false)),
        create(&mut s, ring_table("r3", 3, Some(TTL_SECS as u32), false)),
        // r5 has a ttl_index (the purge reads it), r3 has none (the purge scans).
        create(&mut s, {
            let mut d = ring_table("r5", 5, Some(TTL_SECS as u32), false);
            d.indexes.push(binlog_format::schema::IndexDef {
                name: "ttl_index".into(),
                kind: binlog_format::schema::IndexKind::Secondary,
                columns: vec![3],
            });
            d
        }),
    ];
    engine.with_state(|st| {
        assert!(st.table("test", "r5").is_some_and(|t| t.has_ttl_index()));
        assert!(st.table("test", "r3").is_some_and(|t| !t.has_ttl_index()));
    });
    let mut model = Model {
        sizes: vec![1, 3, 5],
        ttl: vec![false, true, true],
        rings: vec![HashMap::new(); 3],
        now: T0,
        counter: 0,
    };
    let cols = [0usize, 4];
    for op in ops {
        match op {
            Op::Insert { table, prefix, n } => {
                let rows: Vec<Vec<Value>> = (0..n)
                    .map(|_| {
                        model.counter += 1;
                        vec![
                            Value::Int(prefix),
                            Value::Text(format!("p{}", model.counter)),
                        ]
                    })
                    .collect();
                let payloads: Vec<String> = rows.iter().map(|r| r[1].to_string()).collect();
                let def = defs[table].clone();
                s.statement(|s| s.insert(&def, &cols, rows, InsertMode::Insert))
                    .expect("insert");
                for p in payloads {
                    model.insert(table, prefix, p);
                }
            }
            Op::InsertMany { table, prefixes } => {
                let rows: Vec<Vec<Value>> = prefixes
                    .iter()
                    .map(|p| {
                        model.counter += 1;
                        vec![Value::Int(*p), Value::Text(format!("p{}", model.counter))]
                    })
                    .collect();
                for r in &rows {
                    let Value::Int(p) = r[0] else { unreachable!() };
                    model.insert(table, p, r[1].to_string());
                }
                let def = defs[table].clone();
                s.statement(|s| s.insert(&def, &cols, rows, InsertMode::Insert))
                    .expect("insert many");
            }
            Op::Writer { table, prefixes } => {
                let def = defs[table].clone();
                s.begin().expect("begin");
                let mut w = RingWriter::new(&mut s, &def).expect("writer");
                for p in prefixes {
                    model.counter += 1;
                    let payload = format!("w{}", model.counter);
                    // Every user column: a TTL ring requires it (4359).
                    w.add_row(&[
                        (0, Value::Int(p)),
                        (3, Value::Timestamp(model.now)),
                        (4, Value::Text(payload.clone())),
                        (5, Value::Null),
                    ])
                    .expect("add_row");
                    model.insert(table, p, payload);
                }
                w.flush().expect("flush");
                s.commit().expect("commit");
            }
            Op::RolledBack { table, prefix } => {
                s.begin().expect("begin");
                let def = defs[table].clone();
                s.statement(|s| {
                    s.insert(
                        &def,
                        &cols,
                        vec![vec![Value::Int(prefix), Value::Text("rolled back".into())]],
                        InsertMode::Insert,
                    )
                })
                .expect("insert");
                s.rollback();
            }
            Op::Update { table, prefix } => {
                model.counter += 1;
                let new = format!("u{}", model.counter);
                let def = defs[table].clone();
                let newv = Value::Text(new.clone());
                s.statement(|s| {
                    s.update(
                        &def,
                        &[4],
                        &mut |r| Ok(r[0] == Value::Int(prefix)),
                        &mut |_| Ok(vec![newv.clone()]),
                        None,
                    )
                })
                .expect("update");
                let now = model.now;
                let ttl = model.ttl[table];
                if let Some(ring) = model.rings[table].get_mut(&prefix) {
                    for (p, at) in ring.slots.values_mut() {
                        if !(ttl && *at + TTL_SECS * 1_000_000 <= now) {
                            *p = new.clone();
                        }
                    }
                }
            }
            Op::DeletePrefixes { table, prefixes } => {
                let def = defs[table].clone();
                let keys = prefixes.iter().map(|p| vec![Value::Int(*p)]).collect();
                s.statement(|s| s.delete_prefixes(&def, keys))
                    .expect("delete");
                let now = model.now;
                let ttl = model.ttl[table];
                for p in prefixes {
                    if let Some(ring) = model.rings[table].get_mut(&p) {
                        ring.slots
                            .retain(|_, (_, at)| ttl && *at + TTL_SECS * 1_000_000 <= now);
                        ring.meta = None;
                    }
                }
            }
            Op::Truncate { table } => {
                s.truncate(&defs[table]).expect("truncate");
                model.rings[table].clear();
            }
            Op::Advance { secs } => {
                clock.advance_secs(secs);
                model.now += secs * 1_000_000;
            }
            Op::Purge => {
                engine.purge_all(1000).expect("purge");
                // The purge frees memory: no expired data row stays stored (checked by
                // scanning rows here, not through the engine's TTL index).
                let now = model.now;
                let left: usize = engine.with_state(|st| {
                    st.tables
                        .values()
                        .filter(|t| t.def.ttl.is_some())
                        .map(|t| {
                            t.iter()
                                .filter(|(k, r)| !t.is_meta_key(k) && matches!(r[3], Value::Timestamp(ts) if ts + TTL_SECS * 1_000_000 <= now))
                                .count()
                        })
                        .sum()
                });
                prop_assert_eq!(left, 0, "expired rows left after a purge");
                let now = model.now;
                for t in 0..3 {
                    let ttl = model.ttl[t];
                    for ring in model.rings[t].values_mut() {
                        ring.slots
                            .retain(|_, (_, at)| !(ttl && *at + TTL_SECS * 1_000_000 <= now));
                    }
                }
            }
        }
        check(&mut s, &model, &defs)?;
    }
    let before = dump(&engine);
    drop(s);

    // Replay invariant: the binlog applied through the privileged path to an empty engine
    // gives exactly the same rows, meta rows included.
    let replica_dir = tempfile::tempdir().expect("tempdir");
    let replica = open(replica_dir.path(), &clock);
    let mut r = replica.session();
    r.vars.applier = true;
    for item in
        BinlogReader::open(&dir.path().join("binlog"), ReaderOptions::default()).expect("reader")
    {
        let (_, rec) = item.expect("record");
        if let Record::Transaction(tx) = rec {
            r.apply_replicated(
                tx.events.clone(),
                vec![],
                Origin {
                    server_id: tx.server_id,
                    seq: tx.seq,
                },
            )
            .expect("apply");
        }
    }
    prop_assert_eq!(
        dump(&replica),
        before.clone(),
        "replay gives the same state"
    );

    // Restart: the binlog as write-ahead log restores the same state, and rings continue.
    drop(engine);
    let engine = open(dir.path(), &clock);
    prop_assert_eq!(dump(&engine), before, "restart gives the same state");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_the_reference_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops)?;
    }
}

#[test]
fn snapshots_bound_recovery_and_restore_the_same_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let mut cfg = config(&clock);
    cfg.snapshot_every = 10;
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
