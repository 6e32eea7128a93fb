//! Many sessions inserting into shared and private prefixes at once: no insert lost, no slot
//! given twice, meta rows consistent, and each ring holds exactly the newest rows in commit
//! order (the binlog's order).

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use binlog_format::{BinlogReader, Event, ReaderOptions, Record, RowChange, Value};
use common::*;
use ringrep_source::clock::ManualClock;
use ringrep_source::ring::Meta;
use ringrep_source::InsertMode;

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
                            Err(e) if e.is_retriable() => retries += 1,
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
