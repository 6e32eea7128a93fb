//! # ringrep-model
//!
//! The reference model of ring buffer tables (the spec's rings: slots, the meta row, TTL) and
//! [`run`], which drives the engine and the model with the same operations and names the
//! first difference. The engine's property test generates the operations with proptest; the
//! `engine_model` fuzz target decodes them from the fuzzer's bytes ([`ops_from_bytes`]), as
//! redb's fuzzer drives its database against a model. [`fixtures`] are the engine fixtures
//! the engine's tests share (a manual clock, ring table definitions, a dump of every row).

pub mod fixtures;

use std::collections::HashMap;

use binlog_format::{BinlogReader, Origin, ReaderOptions, Record, Value};
use fixtures::*;
use ringrep_engine::clock::ManualClock;
use ringrep_engine::ring::Meta;
use ringrep_engine::writer::RingWriter;
use ringrep_engine::{InsertMode, Session};

/// Returns an error naming both sides when they differ.
macro_rules! same {
    ($a:expr, $b:expr, $($what:tt)+) => {{
        let (a, b) = (&$a, &$b);
        if a != b {
            return Err(format!("{}: engine {:?}, model {:?}", format!($($what)+), a, b));
        }
    }};
}

/// Operations decoded from arbitrary bytes (a fuzzer's input): a few bytes each, every byte
/// string a valid run.
pub fn ops_from_bytes(data: &[u8]) -> Vec<Op> {
    let mut bytes = data.iter().copied();
    let mut next = move || bytes.next();
    let mut ops = Vec::new();
    while let Some(kind) = next() {
        let table = usize::from(next().unwrap_or(0) % 3);
        let mut prefixes = |max: u8| -> Vec<i64> {
            let n = 1 + usize::from(next().unwrap_or(0) % max);
            (0..n).map(|_| i64::from(next().unwrap_or(0) % 4)).collect()
        };
        let op = match kind % 10 {
            0..=2 => {
                let p = prefixes(1);
                Op::Insert {
                    table,
                    prefix: p[0],
                    n: 1 + (p.len() * 3) % 5,
                }
            }
            3 => Op::InsertMany {
                table,
                prefixes: prefixes(5),
            },
            4 => Op::Writer {
                table,
                prefixes: prefixes(8),
            },
            5 => Op::RolledBack {
                table,
                prefix: prefixes(1)[0],
            },
            6 => Op::Update {
                table,
                prefix: prefixes(1)[0],
            },
            7 => Op::DeletePrefixes {
                table,
                prefixes: prefixes(2),
            },
            8 => match table {
                0 => Op::Truncate { table },
                1 => Op::Purge,
                _ => Op::Advance {
                    secs: 1 + i64::from(kind / 10) % 79,
                },
            },
            _ => Op::Advance {
                secs: 1 + i64::from(kind) % 79,
            },
        };
        ops.push(op);
        if ops.len() >= 200 {
            break;
        }
    }
    ops
}

/// The TTL of the model's TTL rings, in seconds.
pub const TTL_SECS: i64 = 100;

/// One operation of a run, on table `table` (0: a ring of 1; 1: of 3 with TTL; 2: of 5
/// with TTL and a ttl_index) and prefixes 0..4.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // The fields are what the variant's line says.
pub enum Op {
    /// Insert `n` rows into one prefix in one statement.
    Insert { table: usize, prefix: i64, n: usize },
    /// A multi-row insert over several prefixes.
    InsertMany { table: usize, prefixes: Vec<i64> },
    /// Rows through the native writer in one transaction, in this order of prefixes (runs of
    /// one prefix are its batches).
    Writer { table: usize, prefixes: Vec<i64> },
    /// Insert, then roll back.
    RolledBack { table: usize, prefix: i64 },
    /// Set the payload of every row of a prefix.
    Update { table: usize, prefix: i64 },
    /// Delete whole prefixes.
    DeletePrefixes { table: usize, prefixes: Vec<i64> },
    /// TRUNCATE the table.
    Truncate { table: usize },
    /// Move the clock on.
    Advance { secs: i64 },
    /// Run the TTL purge.
    Purge,
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

fn check(s: &mut Session, model: &Model, defs: &[binlog_format::TableDef]) -> Result<(), String> {
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
            same!(
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
            same!(
                got_meta,
                want,
                "meta of table {} prefix {}",
                def.name,
                prefix
            );
            if let Some(r) = meta_rows.first() {
                if def.ttl.is_some() {
                    same!(
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

/// Runs `ops` on a new engine and the model side by side, comparing every ring and meta row
/// after each; then checks that the binlog replayed through the privileged path, and the
/// engine reopened, give the same state. The first difference, said.
pub fn run(ops: Vec<Op>) -> Result<(), String> {
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
                same!(left, 0, "expired rows left after a purge");
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
    same!(
        dump(&replica),
        before.clone(),
        "replay gives the same state"
    );

    // Restart: the binlog as write-ahead log restores the same state, and rings continue.
    drop(engine);
    let engine = open(dir.path(), &clock);
    same!(dump(&engine), before, "restart gives the same state");
    Ok(())
}
