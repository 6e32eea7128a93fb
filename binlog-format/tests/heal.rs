//! Tailers across a heal (`BinlogWriter::heal`) and a rotation, with an fsync, a write or a
//! directory sync made to fail: the whole workspace's test build has failpoints, `cargo test
//! -p binlog-format --features failpoints` runs them alone. Armed points are global to the
//! process, so the tests here take turns (`ARMED`).
#![cfg(feature = "failpoints")]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use binlog_format::failpoint::configure;
use binlog_format::{BinlogWriter, Record, StartAt, SyncPolicy, Tailer, Value, WriterOptions};
use common::ring_insert;

/// Held by each test while it arms points.
static ARMED: Mutex<()> = Mutex::new(());

fn armed() -> std::sync::MutexGuard<'static, ()> {
    ARMED.lock().unwrap_or_else(|p| p.into_inner())
}

fn writer_of(dir: &Path, segment_bytes: u64) -> BinlogWriter {
    let opts = WriterOptions {
        segment_bytes,
        sync: SyncPolicy::EveryCommit,
        ..WriterOptions::new(1)
    };
    BinlogWriter::open(dir, opts).expect("writer").0
}

fn writer(dir: &Path) -> BinlogWriter {
    writer_of(dir, 1 << 20)
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
    let _armed = armed();
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

/// A heal whose count cannot be written to `binlog.durable` (where readers in other
/// processes learn of it) still cuts, and says what it cut, but leaves the writer stopped:
/// nothing is appended over the cut record until a later heal has told those readers, and
/// that heal fails while it cannot.
#[test]
fn a_heal_readers_were_not_told_of_leaves_the_writer_stopped() {
    let _armed = armed();
    let dir = tempfile::tempdir().expect("tempdir");
    let w = writer(dir.path());
    w.append_commit(&ring_insert(1)).expect("commit");
    let cut = w.append(&ring_insert(2)).expect("append");
    w.flush().expect("written to the file, not fsynced");
    let mut tailer = Tailer::open(dir.path(), StartAt::Beginning);
    let (_, rec) = tailer
        .next_timeout(Duration::from_secs(5))
        .expect("tail")
        .expect("the durable record");
    assert_eq!(rec, ring_insert(1));

    configure("binlog::fsync=1*return(eio)").expect("arm");
    assert!(w.commit(cut).is_err(), "the commit whose fsync failed");
    configure("binlog::durable_write=return(eio)").expect("arm");
    let healed = w.heal().expect("the cut").expect("the writer was stopped");
    assert_eq!(healed.last_seq, 1);
    assert!(healed.cut_bytes > 0, "{healed:?}");
    assert!(w.is_lost(cut), "the commit whose fsync failed was cut");
    assert!(
        w.is_stopped(),
        "readers were not told: the writer stays stopped"
    );
    assert!(
        w.append(&same_length_other(2)).is_err(),
        "nothing is appended while readers were not told"
    );
    assert!(w.heal().is_err(), "a heal that still cannot tell them");
    assert!(w.is_stopped());
    configure("binlog::durable_write=off").expect("disarm");
    let told = w
        .heal()
        .expect("heal")
        .expect("the writer was still stopped");
    assert_eq!((told.last_seq, told.cut_bytes), (1, 0), "nothing more cut");
    assert!(!w.is_stopped());
    let written = same_length_other(2);
    w.append_commit(&written).expect("commit after the heal");
    let (_, rec) = tailer
        .next_timeout(Duration::from_secs(5))
        .expect("tail")
        .expect("the record written after the heal");
    assert_eq!(rec, written, "the bytes the heal cut were passed on");
}

/// A rotation that renamed the next segment into place and then failed (its directory sync)
/// fails that append; what comes next goes on in that file, which a tailer may have opened
/// meanwhile, instead of a new one renamed over it, and never into the closed segment, not
/// even a record small enough to fit there.
#[test]
fn a_rotation_that_failed_after_its_rename_goes_on_in_the_same_file() {
    let _armed = armed();
    let dir = tempfile::tempdir().expect("tempdir");
    let w = writer_of(dir.path(), 4096);
    let first = dir.path().join(binlog_format::segment::segment_name(1));
    let second = dir.path().join(binlog_format::segment::segment_name(2));
    for seq in 1..=5 {
        w.append_commit(&ring_insert(seq)).expect("commit");
    }
    assert!(!second.exists(), "five records fit in a 4 kB segment");
    // Too large for what is left of segment 1.
    let large = {
        let mut r = ring_insert(6);
        if let Record::Transaction(tx) = &mut r {
            if let binlog_format::Event::Row(binlog_format::RowEvent {
                change: binlog_format::RowChange::Write { row },
                ..
            }) = &mut tx.events[0]
            {
                row[4] = Value::Text("z".repeat(3000));
            }
        }
        r
    };
    configure("binlog::dir_sync=1*return(eio)").expect("arm");
    let failed = w.append_commit(&large);
    configure("binlog::dir_sync=off").expect("disarm");
    let failed = failed.expect_err("the rotation's directory sync failed");
    assert!(
        second.exists(),
        "the rotation failed after its rename: {failed}"
    );
    let inode = std::fs::metadata(&second).expect("segment 2").ino();
    let closed = std::fs::metadata(&first).expect("segment 1").len();

    let mut tailer = Tailer::open(dir.path(), StartAt::Beginning);
    for want in 1..=5 {
        let (_, rec) = tailer
            .next_timeout(Duration::from_secs(5))
            .expect("tail")
            .expect("a record of segment 1");
        assert_eq!(rec, ring_insert(want));
    }
    assert!(
        tailer
            .next_timeout(Duration::from_millis(50))
            .expect("tail")
            .is_none(),
        "the failed append is nowhere"
    );
    // A heartbeat would fit in segment 1; it goes to segment 2 all the same.
    let heartbeat = Record::Heartbeat(binlog_format::Heartbeat {
        server_id: 1,
        time_us: 1_700_000_000_000_000,
        last_seq: 5,
    });
    w.append(&heartbeat).expect("the rotation goes on");
    w.append_commit(&large).expect("a commit after it");
    assert_eq!(
        std::fs::metadata(&second).expect("segment 2").ino(),
        inode,
        "segment 2 was replaced"
    );
    assert_eq!(
        std::fs::metadata(&first).expect("segment 1").len(),
        closed,
        "nothing went into the closed segment"
    );
    for want in [heartbeat, large] {
        let (at, rec) = tailer
            .next_timeout(Duration::from_secs(5))
            .expect("tail")
            .expect("what was written in segment 2");
        assert_eq!((at.segment, rec), (2, want));
    }
}
