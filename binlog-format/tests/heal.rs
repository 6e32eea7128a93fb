//! Tailers across a heal (`BinlogWriter::heal`), with an fsync made to fail: the whole
//! workspace's test build has failpoints, `cargo test -p binlog-format --features failpoints`
//! runs them alone. One test in this file: armed points are global to the process.
#![cfg(feature = "failpoints")]

mod common;

use std::path::Path;
use std::time::Duration;

use binlog_format::failpoint::configure;
use binlog_format::{BinlogWriter, Record, StartAt, SyncPolicy, Tailer, Value, WriterOptions};
use common::ring_insert;

fn writer(dir: &Path) -> BinlogWriter {
    let opts = WriterOptions {
        segment_bytes: 1 << 20,
        sync: SyncPolicy::EveryCommit,
        ..WriterOptions::new(1)
    };
    BinlogWriter::open(dir, opts).expect("writer").0
}

/// `ring_insert(seq)` with another payload of the same length: its frame ends where that
/// record's does.
fn same_length_other(seq: u64) -> Record {
    let mut r = ring_insert(seq);
    if let Record::Transaction(tx) = &mut r {
        if let binlog_format::Event::Row(binlog_format::RowEvent {
            change: binlog_format::RowChange::Write { row },
            ..
        }) = &mut tx.events[0]
        {
            row[4] = Value::Text("y".repeat(140));
        }
    }
    r
}

/// A tailer reads a record past the durable end along with the one before it, and passes
/// on only the earlier one; that record's fsync fails, the heal cuts it, and another of the
/// same length is written and fsynced in its place. The tailer passes on the new one, not
/// the bytes it read before the heal: in the writer's process (the end and the heal count
/// from the notifier) and as a reader in another (from `binlog.durable`).
#[test]
fn a_tailer_passes_on_what_a_heal_wrote_not_what_it_cut() {
    for local in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = writer(dir.path());
        w.append_commit(&ring_insert(1)).expect("commit");
        let cut = w.append(&ring_insert(2)).expect("append");
        w.flush().expect("written to the file, not fsynced");
        let mut tailer = Tailer::open(dir.path(), StartAt::Beginning);
        if local {
            tailer = tailer.with_notifier(w.notifier());
        }
        let (_, rec) = tailer
            .next_timeout(Duration::from_secs(5))
            .expect("tail")
            .expect("the durable record");
        assert_eq!(rec, ring_insert(1), "local {local}");

        configure("binlog::fsync=1*return(eio)").expect("arm");
        let failed = w.commit(cut);
        configure("binlog::fsync=off").expect("disarm");
        assert!(failed.is_err(), "the commit whose fsync failed");
        let healed = w.heal().expect("heal").expect("the writer was stopped");
        assert_eq!(healed.last_seq, 1);
        let written = same_length_other(2);
        assert_ne!(written, ring_insert(2));
        w.append_commit(&written).expect("commit after the heal");

        let (_, rec) = tailer
            .next_timeout(Duration::from_secs(5))
            .expect("tail")
            .expect("the record written after the heal");
        assert_eq!(
            rec, written,
            "local {local}: the bytes the heal cut were passed on"
        );
        assert!(
            tailer
                .next_timeout(Duration::from_millis(20))
                .expect("tail")
                .is_none(),
            "local {local}: nothing more"
        );
    }
}
