//! Segment files on disk: round trips across rotation, torn tails, corruption, tailing and
//! group commit. (The `ringrep-binlog` tool is tested in ringrep-cdc's `tests/tool.rs`.)

mod common;

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use binlog_format::segment::{list_segments, segment_name};
use binlog_format::{
    BinlogReader, BinlogWriter, Error, ReaderOptions, Record, RecoveryMode, StartAt, SyncPolicy,
    Tailer, WriterOptions,
};
use common::ring_insert;

fn opts(segment_bytes: u64, sync: SyncPolicy) -> WriterOptions {
    WriterOptions {
        segment_bytes,
        sync,
        ..WriterOptions::new(1)
    }
}

fn write_n(dir: &Path, from: u64, to: u64, o: WriterOptions) {
    let (w, _) = BinlogWriter::open(dir, o).expect("open writer");
    for seq in from..=to {
        w.append_commit(&ring_insert(seq)).expect("append");
    }
}

fn read_all(dir: &Path) -> (Vec<Record>, Option<binlog_format::reader::TornTail>) {
    let mut r = BinlogReader::open(dir, ReaderOptions::default()).expect("open reader");
    let recs = r.by_ref().map(|x| x.expect("record").1).collect();
    (recs, r.torn_tail())
}

#[test]
fn records_round_trip_across_rotation_with_positions() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_n(dir.path(), 1, 300, opts(4096, SyncPolicy::Never));
    let segments = list_segments(dir.path()).expect("list");
    assert!(segments.len() > 5, "4 KiB segments rotate: {segments:?}");
    let index = fs::read_to_string(dir.path().join("binlog.index")).expect("index");
    assert_eq!(index.lines().count(), segments.len());
    let mut r = BinlogReader::open(dir.path(), ReaderOptions::default()).expect("reader");
    let mut expected = 1;
    let mut last_pos = None;
    for item in r.by_ref() {
        let (pos, rec) = item.expect("record");
        assert_eq!(rec, ring_insert(expected));
        assert!(Some(pos) > last_pos, "positions increase");
        last_pos = Some(pos);
        expected += 1;
    }
    assert_eq!(expected, 301);
    // Every segment is readable on its own, with the schema in its header.
    let last = *segments.last().expect("segment");
    let single = BinlogReader::open(
        &dir.path().join(segment_name(last)),
        ReaderOptions::default(),
    )
    .expect("one segment");
    assert!(single.count() > 0);
}

#[test]
fn reopening_continues_the_sequence() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_n(dir.path(), 1, 10, opts(1 << 20, SyncPolicy::EveryCommit));
    let (w, rec) =
        BinlogWriter::open(dir.path(), opts(1 << 20, SyncPolicy::EveryCommit)).expect("reopen");
    assert_eq!(rec.last_seq, 10);
    assert!(rec.cut.is_none());
    assert!(w.append(&ring_insert(12)).is_err(), "a gap is refused");
    w.append_commit(&ring_insert(11)).expect("next seq");
    drop(w);
    assert_eq!(read_all(dir.path()).0.len(), 11);
}

#[test]
fn torn_tail_at_every_offset_is_cut_back_and_appends_continue() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_n(dir.path(), 1, 5, opts(1 << 20, SyncPolicy::Never));
    let seg = dir.path().join(segment_name(1));
    let full = fs::read(&seg).expect("read");
    let mut r = BinlogReader::open(dir.path(), ReaderOptions::default()).expect("reader");
    let last_start = r
        .by_ref()
        .map(|x| x.expect("rec").0.offset)
        .last()
        .expect("records") as usize;
    for cut in last_start..full.len() {
        let case = tempfile::tempdir().expect("tempdir");
        fs::write(case.path().join(segment_name(1)), &full[..cut]).expect("write");
        let (recs, torn) = read_all(case.path());
        assert_eq!(recs.len(), 4, "cut at {cut}: the four whole records stay");
        assert_eq!(torn.is_some(), cut > last_start, "cut at {cut}");
        let strict = BinlogReader::open(
            case.path(),
            ReaderOptions {
                recovery: RecoveryMode::Strict,
                ..Default::default()
            },
        )
        .expect("reader")
        .find_map(|x| x.err());
        assert_eq!(
            strict.is_some(),
            cut > last_start,
            "strict mode refuses a torn tail"
        );
        let (w, rec) = BinlogWriter::open(case.path(), opts(1 << 20, SyncPolicy::EveryCommit))
            .expect("recover");
        assert_eq!(rec.last_seq, 4);
        assert_eq!(rec.cut.is_some(), cut > last_start);
        w.append_commit(&ring_insert(5))
            .expect("append after recovery");
        drop(w);
        let (recs, torn) = read_all(case.path());
        assert_eq!(recs, (1..=5).map(ring_insert).collect::<Vec<_>>());
        assert!(torn.is_none());
    }
}

#[test]
fn zeros_after_the_records_are_space_not_yet_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_n(dir.path(), 1, 3, opts(1 << 20, SyncPolicy::Never));
    let seg = dir.path().join(segment_name(1));
    let records = fs::metadata(&seg).expect("meta").len();
    let mut bytes = fs::read(&seg).expect("read");
    bytes.extend_from_slice(&[0u8; 4096]);
    fs::write(&seg, bytes).expect("write");
    // What a writer that crashed leaves: readers stop at the zeros, nothing is torn.
    let (recs, torn) = read_all(dir.path());
    assert_eq!(recs.len(), 3);
    assert!(torn.is_none());
    let strict = ReaderOptions {
        recovery: RecoveryMode::Strict,
        ..Default::default()
    };
    let read: Vec<_> = BinlogReader::open(dir.path(), strict)
        .expect("reader")
        .collect::<Result<_, _>>()
        .expect("strict recovery has nothing to refuse");
    assert_eq!(read.len(), 3);
    // A writer goes on where the records end, over the zeros.
    let (w, rec) =
        BinlogWriter::open(dir.path(), opts(1 << 20, SyncPolicy::EveryCommit)).expect("reopen");
    assert_eq!((rec.last_seq, rec.cut), (3, None));
    assert_eq!(rec.end.offset, records);
    w.append_commit(&ring_insert(4)).expect("append");
    drop(w);
    let (recs, torn) = read_all(dir.path());
    assert_eq!(recs, (1..=4).map(ring_insert).collect::<Vec<_>>());
    assert!(torn.is_none());
}

#[test]
fn the_segment_being_written_is_longer_than_its_records_until_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (w, _) =
        BinlogWriter::open(dir.path(), opts(64 << 20, SyncPolicy::EveryCommit)).expect("open");
    for seq in 1..=20 {
        w.append_commit(&ring_insert(seq)).expect("append");
    }
    let seg = dir.path().join(segment_name(1));
    let end = w.end_position().offset;
    let len = fs::metadata(&seg).expect("meta").len();
    assert!(
        len > end,
        "the open segment has space set aside: {len} vs {end}"
    );
    // Readers of the live directory see every record and no damage.
    let (recs, torn) = read_all(dir.path());
    assert_eq!(recs, (1..=20).map(ring_insert).collect::<Vec<_>>());
    assert!(torn.is_none());
    let mut t = Tailer::open(dir.path(), StartAt::Beginning);
    let mut seen = 0;
    while let Some((_, r)) = t.next_timeout(Duration::from_millis(200)).expect("tail") {
        if matches!(r, Record::Transaction(_)) {
            seen += 1;
        }
    }
    assert_eq!(seen, 20);
    // The power loss a copy of the directory now stands for: it opens with nothing cut.
    let copy = tempfile::tempdir().expect("tempdir");
    for entry in fs::read_dir(dir.path()).expect("list") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            fs::copy(entry.path(), copy.path().join(entry.file_name())).expect("copy");
        }
    }
    let (w2, rec) = BinlogWriter::open(copy.path(), opts(64 << 20, SyncPolicy::EveryCommit))
        .expect("open the copy");
    assert_eq!((rec.last_seq, rec.cut, rec.end.offset), (20, None, end));
    w2.append_commit(&ring_insert(21))
        .expect("append to the copy");
    drop(w2);
    let (recs, _) = read_all(copy.path());
    assert_eq!(recs.len(), 21);
    // Closed, a segment is exactly its records; so is one that rotation closed.
    w.append_commit(&ring_insert(21)).expect("append");
    w.rotate_now().expect("rotate");
    let sealed = fs::metadata(&seg).expect("meta").len();
    assert_eq!(sealed, end + frame_len_after(&seg, end));
    w.append_commit(&ring_insert(22)).expect("append");
    let end2 = w.end_position().offset;
    assert!(
        fs::metadata(dir.path().join(segment_name(2)))
            .expect("meta")
            .len()
            > end2
    );
    drop(w);
    let last = dir.path().join(segment_name(2));
    assert_eq!(fs::metadata(&last).expect("meta").len(), end2);
}

/// The length of the one record that starts at `at` in `seg` (header included).
fn frame_len_after(seg: &Path, at: u64) -> u64 {
    let bytes = fs::read(seg).expect("read");
    let len = u32::from_le_bytes(bytes[at as usize..at as usize + 4].try_into().expect("4"));
    8 + u64::from(len)
}

#[test]
fn a_follower_reports_zeros_where_durable_records_were() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let (w, _) =
        BinlogWriter::open(dir.path(), opts(64 << 20, SyncPolicy::EveryCommit)).expect("open");
    let mut ends = Vec::new();
    for seq in 1..=10 {
        w.append_commit(&ring_insert(seq)).expect("append");
        ends.push(w.end_position().offset);
    }
    // The disk loses the last three records the writer made durable (and published).
    let seg = fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(segment_name(1)))
        .expect("segment");
    seg.write_all_at(&vec![0; (ends[9] - ends[6]) as usize], ends[6])
        .expect("zero");
    let mut t = Tailer::open(dir.path(), StartAt::Beginning);
    let mut seen = 0;
    let err = loop {
        match t.next_timeout(Duration::from_millis(300)) {
            Ok(Some((_, Record::Transaction(_)))) => seen += 1,
            Ok(Some(_)) => {}
            Ok(None) => panic!("the follower waited at zeros the writer had made durable"),
            Err(e) => break e,
        }
    };
    assert_eq!(seen, 7);
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    drop(w);
}

#[test]
fn zeros_in_a_closed_segment_are_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_n(dir.path(), 1, 300, opts(4096, SyncPolicy::Never));
    let seg = dir.path().join(segment_name(1));
    let mut bytes = fs::read(&seg).expect("read");
    let n = bytes.len();
    bytes[n - 200..].fill(0);
    fs::write(&seg, bytes).expect("write");
    let err = BinlogReader::open(dir.path(), ReaderOptions::default())
        .expect("reader")
        .find_map(Result::err)
        .expect("an error");
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    let mut t = Tailer::open(dir.path(), StartAt::Beginning);
    let err = loop {
        match t.next_timeout(Duration::from_millis(200)) {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the tailer waited at damage in a closed segment"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
}

#[test]
fn flipped_byte_in_the_middle_is_corruption_with_position() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_n(dir.path(), 1, 20, opts(1 << 20, SyncPolicy::Never));
    let mut r = BinlogReader::open(dir.path(), ReaderOptions::default()).expect("reader");
    let positions: Vec<u64> = r.by_ref().map(|x| x.expect("rec").0.offset).collect();
    let target = positions[10];
    let seg = dir.path().join(segment_name(1));
    for delta in [0u64, 3, 5, 9, 40] {
        let mut bytes = fs::read(&seg).expect("read");
        bytes[(target + delta) as usize] ^= 0x5a;
        let case = tempfile::tempdir().expect("tempdir");
        fs::write(case.path().join(segment_name(1)), bytes).expect("write");
        let mut r = BinlogReader::open(case.path(), ReaderOptions::default()).expect("reader");
        let mut good = 0;
        let mut err = None;
        for item in r.by_ref() {
            match item {
                Ok(_) => good += 1,
                Err(e) => err = Some(e),
            }
        }
        match err {
            Some(Error::Corruption { position, .. }) => {
                assert_eq!(
                    (position.segment, position.offset),
                    (1, target),
                    "delta {delta}"
                );
            }
            other => panic!("delta {delta}: expected corruption, got {other:?}"),
        }
        assert_eq!(good, 10, "nothing after the corrupt record is yielded");
        assert!(r.next().is_none());
        // The writer refuses to append after corruption rather than cutting good data.
        assert!(BinlogWriter::open(case.path(), opts(1 << 20, SyncPolicy::Never)).is_err());
    }
}

#[test]
fn tailer_follows_rotation_and_resumes_from_a_sequence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    let (w, _) = BinlogWriter::open(&path, opts(2048, SyncPolicy::Never)).expect("writer");
    let w = Arc::new(w);
    let mut tailer = Tailer::open(&path, StartAt::Beginning).with_notifier(w.notifier());
    let writer = {
        let w = Arc::clone(&w);
        std::thread::spawn(move || {
            for seq in 1..=200 {
                w.append_commit(&ring_insert(seq)).expect("append");
                if seq % 50 == 0 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        })
    };
    let mut seen = 0;
    while seen < 200 {
        let (_, rec) = tailer
            .next_timeout(Duration::from_secs(10))
            .expect("tail")
            .expect("a record");
        seen += 1;
        assert_eq!(rec, ring_insert(seen));
        // The frame the stream passes on as it is: the bytes the record encodes to.
        let mut framed = Vec::new();
        binlog_format::frame::write_frame_with(&mut framed, |b| {
            binlog_format::codec::encode_record_into(&rec, b)
        })
        .expect("frame");
        assert_eq!(tailer.last_frame(), Some(&framed[..]), "seq {seen}");
    }
    writer.join().expect("writer thread");
    assert!(tailer
        .next_timeout(Duration::from_millis(20))
        .expect("tail")
        .is_none());
    assert_eq!(tailer.last_frame(), None, "after a look that found nothing");
    // A tailer in "another process" (no notifier) starting in the middle.
    let mut from_150 = Tailer::open(&path, StartAt::Seq(150));
    let (_, rec) = from_150
        .next_timeout(Duration::from_secs(5))
        .expect("tail")
        .expect("record");
    assert_eq!(rec, ring_insert(150));
}

/// A tailer of heads (the replication stream's) reads the same records at the same places
/// with the same frames as a whole one, across rotations, with the transactions' events left
/// out.
#[test]
fn a_tailer_of_heads_reads_what_a_whole_one_reads_without_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    let (w, _) = BinlogWriter::open(&path, opts(2048, SyncPolicy::Never)).expect("writer");
    for seq in 1..=120 {
        w.append_commit(&ring_insert(seq)).expect("append");
    }
    let mut whole = Tailer::open(&path, StartAt::Seq(3)).with_notifier(w.notifier());
    let mut heads = Tailer::open(&path, StartAt::Seq(3))
        .with_notifier(w.notifier())
        .heads_only();
    for seq in 3..=120 {
        let (at, rec) = whole
            .next_timeout(Duration::from_secs(5))
            .expect("tail")
            .expect("record");
        let (head_at, head) = heads
            .next_timeout(Duration::from_secs(5))
            .expect("tail")
            .expect("record");
        assert_eq!(head_at, at, "seq {seq}");
        assert_eq!(heads.last_end(), whole.last_end(), "seq {seq}");
        assert_eq!(heads.last_frame(), whole.last_frame(), "seq {seq}");
        let Record::Transaction(mut tx) = rec else {
            panic!("seq {seq}: {rec:?}");
        };
        assert_eq!(tx.seq, seq);
        assert!(!tx.events.is_empty());
        tx.events.clear();
        assert_eq!(head, Record::Transaction(tx), "seq {seq}");
    }
    assert!(list_segments(&path).expect("segments").len() > 2, "rotated");
    assert!(heads.next_timeout(Duration::ZERO).expect("tail").is_none());
}

/// A tailer passes on only what the writer has fsynced: a record written to the OS and not
/// yet synced (lost to a power cut, or cut back by a heal) waits, in this process (with the
/// notifier) and in another (without); once the writer is gone, what the files hold is read.
#[test]
fn a_tailer_waits_for_the_fsync_of_a_live_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    let (w, _) = BinlogWriter::open(&path, opts(1 << 20, SyncPolicy::EveryCommit)).expect("writer");
    assert!(
        BinlogWriter::open(&path, opts(1 << 20, SyncPolicy::EveryCommit)).is_err(),
        "one writer per directory"
    );
    w.append_commit(&ring_insert(1)).expect("commit");
    let mut local = Tailer::open(&path, StartAt::Beginning).with_notifier(w.notifier());
    let mut other = Tailer::open(&path, StartAt::Beginning);
    for t in [&mut local, &mut other] {
        let (_, rec) = t
            .next_timeout(Duration::from_secs(5))
            .expect("tail")
            .expect("the durable record");
        assert_eq!(rec, ring_insert(1));
    }
    // Written to the OS, not synced.
    w.append(&ring_insert(2)).expect("append");
    w.flush().expect("flush");
    for t in [&mut local, &mut other] {
        assert!(
            t.next_timeout(Duration::from_millis(100))
                .expect("tail")
                .is_none(),
            "a record not yet fsynced was passed on"
        );
    }
    w.sync().expect("sync");
    for t in [&mut local, &mut other] {
        let (_, rec) = t
            .next_timeout(Duration::from_secs(5))
            .expect("tail")
            .expect("the record, once synced");
        assert_eq!(rec, ring_insert(2));
    }
    // A writer that is gone leaves the files as recovery will find them.
    w.append(&ring_insert(3)).expect("append");
    w.flush().expect("flush");
    drop(w);
    let (_, rec) = other
        .next_timeout(Duration::from_secs(5))
        .expect("tail")
        .expect("the record the writer left");
    assert_eq!(rec, ring_insert(3));
    // The reader holds no lock between calls: a writer opens again.
    let (w, recovered) =
        BinlogWriter::open(&path, opts(1 << 20, SyncPolicy::EveryCommit)).expect("reopen");
    assert_eq!(recovered.last_seq, 3);
    w.append(&ring_insert(4)).expect("append");
    w.flush().expect("flush");
    assert!(other
        .next_timeout(Duration::from_millis(100))
        .expect("tail")
        .is_none());
    w.sync().expect("sync");
    assert_eq!(
        other
            .next_timeout(Duration::from_secs(5))
            .expect("tail")
            .expect("record")
            .1,
        ring_insert(4)
    );
}

/// With no fsync per commit, a growing segment is still fsynced in the background (so that
/// closing it does not stall commits): the durable position moves without anyone syncing.
#[test]
fn a_growing_segment_is_synced_in_the_background() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (w, _) = BinlogWriter::open(dir.path(), opts(1 << 30, SyncPolicy::Never)).expect("writer");
    let mut seq = 0;
    let mut appended = 0;
    // Past 8 MiB (the step) in big records.
    while appended < 9 << 20 {
        seq += 1;
        let Record::Transaction(mut tx) = ring_insert(seq) else {
            unreachable!("a transaction")
        };
        if let binlog_format::Event::Row(r) = &mut tx.events[0] {
            if let binlog_format::RowChange::Write { row } = &mut r.change {
                row[4] = binlog_format::Value::Text("x".repeat(256 << 10));
            }
        }
        appended = w.append(&Record::Transaction(tx)).expect("append");
    }
    wait_durable(&w, 8 << 20, "no background fsync");
}

/// Waits (a minute at most) until `w` is durable up to `lsn`, with nobody else syncing.
fn wait_durable(w: &BinlogWriter, lsn: u64, failure: &str) {
    let waited = std::time::Instant::now();
    while w.durable_lsn() < lsn {
        assert!(waited.elapsed() < Duration::from_secs(60), "{failure}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// With `--sync MS` a commit returns once written to the OS, and the background syncer makes
/// it durable on its timer.
#[test]
fn every_millis_syncs_on_its_timer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (w, _) =
        BinlogWriter::open(dir.path(), opts(1 << 20, SyncPolicy::EveryMillis(5))).expect("writer");
    let lsn = w.append_commit(&ring_insert(1)).expect("append");
    wait_durable(&w, lsn, "no timed fsync");
}

#[test]
fn concurrent_commits_share_fsyncs_and_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (w, _) =
        BinlogWriter::open(dir.path(), opts(1 << 16, SyncPolicy::EveryCommit)).expect("writer");
    let w = Arc::new(w);
    let next = Arc::new(std::sync::Mutex::new(0u64));
    // Enough committers that fsyncs overlap appends all the time, so followers wait for the
    // fsync in flight and for the next one (a lost wake-up would hang this test).
    let threads: Vec<_> = (0..32)
        .map(|_| {
            let (w, next) = (Arc::clone(&w), Arc::clone(&next));
            std::thread::spawn(move || {
                for _ in 0..60 {
                    // Sequence order is the append order, as in the engine.
                    let lsn = {
                        let mut n = next.lock().expect("lock");
                        *n += 1;
                        w.append(&ring_insert(*n)).expect("append")
                    };
                    w.commit(lsn).expect("commit");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    drop(w);
    assert_eq!(read_all(dir.path()).0.len(), 32 * 60);
}

/// The durable sequence number follows the fsyncs: what a replica may be sent. Appended but
/// not committed transactions are not durable; a commit covers everything before its LSN; a
/// reopened directory is durable up to its last record.
#[test]
fn durable_seq_follows_the_fsyncs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (w, _) =
        BinlogWriter::open(dir.path(), opts(1 << 20, SyncPolicy::EveryCommit)).expect("open");
    assert_eq!(w.durable_seq(), 0);
    let l1 = w.append(&ring_insert(1)).expect("append");
    let l2 = w.append(&ring_insert(2)).expect("append");
    let _l3 = w.append(&ring_insert(3)).expect("append");
    assert_eq!(w.durable_seq(), 0, "nothing committed yet");
    w.commit(l1).expect("commit");
    assert!(w.durable_seq() >= 1);
    w.commit(l2).expect("commit");
    assert!((2..=3).contains(&w.durable_seq()), "{}", w.durable_seq());
    w.sync().expect("sync");
    assert_eq!(w.durable_seq(), 3);
    drop(w);
    let (w, _) =
        BinlogWriter::open(dir.path(), opts(1 << 20, SyncPolicy::EveryCommit)).expect("reopen");
    assert_eq!(w.durable_seq(), 3);
}

/// The tailer's next record, which must come within `secs` seconds.
fn next_record(t: &mut Tailer, secs: u64, what: &str) -> (binlog_format::Position, Record) {
    t.next_timeout(Duration::from_secs(secs))
        .expect("tail")
        .unwrap_or_else(|| panic!("{what} within {secs} s"))
}

/// Nothing more for the tailer within `ms` milliseconds.
fn assert_nothing_new(t: &mut Tailer, ms: u64, why: &str) {
    let next = t.next_timeout(Duration::from_millis(ms)).expect("tail");
    assert!(next.is_none(), "{why}: {next:?}");
}

/// A follower sizes its reads to what its last one gained (most of a read past the records
/// is the space the writer sets aside): a large group after a run of single records, and a
/// group larger than any one read, still arrive whole and in order.
#[test]
fn a_tailer_reads_groups_larger_than_its_last_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    let (w, _) = BinlogWriter::open(&path, opts(8 << 20, SyncPolicy::EveryCommit)).expect("writer");
    let mut tailer = Tailer::open(&path, StartAt::Beginning).with_notifier(w.notifier());
    let mut seq = 0;
    let mut seen = 0;
    for group in [1, 1, 1, 60, 1, 1, 1200, 1, 5, 1] {
        let mut lsn = 0;
        for _ in 0..group {
            seq += 1;
            lsn = w.append(&ring_insert(seq)).expect("append");
        }
        w.commit(lsn).expect("commit");
        while seen < seq {
            let (_, rec) = next_record(&mut tailer, 10, "a record");
            seen += 1;
            assert_eq!(rec, ring_insert(seen));
        }
        assert_nothing_new(&mut tailer, 5, "nothing more");
    }
}

/// A tailer in the writer's process goes by the durable end the writer publishes: records a
/// rotation made durable (no fsync of their own, the timed one not yet due) are passed on
/// without waiting for a later commit.
#[test]
fn a_local_tailer_passes_on_what_a_rotation_made_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    let (w, _) = BinlogWriter::open(&path, opts(8 << 20, SyncPolicy::EveryMillis(3_600_000)))
        .expect("writer");
    let mut tailer = Tailer::open(&path, StartAt::Beginning).with_notifier(w.notifier());
    for seq in 1..=3 {
        w.append_commit(&ring_insert(seq)).expect("append");
    }
    assert_nothing_new(&mut tailer, 20, "written, not yet fsynced");
    w.rotate_now().expect("rotate");
    for seq in 1..=3 {
        let (pos, rec) = next_record(&mut tailer, 5, "durable after the rotation");
        assert_eq!(rec, ring_insert(seq));
        assert_eq!(pos.segment, 1);
    }
    assert_nothing_new(&mut tailer, 20, "nothing more");
}

/// A record larger than a follower's first read, with zeros where that read ends (a zero
/// value inside it), is read whole, not taken for the end of the records.
#[test]
fn a_tailer_reads_a_large_record_with_zeros_inside() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    let (w, _) = BinlogWriter::open(&path, opts(8 << 20, SyncPolicy::EveryCommit)).expect("writer");
    let mut tailer = Tailer::open(&path, StartAt::Beginning).with_notifier(w.notifier());
    // Small records first: the follower's reads shrink to their size (4 KiB).
    for seq in 1..=3 {
        w.append_commit(&ring_insert(seq)).expect("append");
        let (_, rec) = next_record(&mut tailer, 5, "small record");
        assert_eq!(rec, ring_insert(seq));
    }
    let mut big = ring_insert(4);
    if let Record::Transaction(tx) = &mut big {
        if let binlog_format::Event::Row(binlog_format::RowEvent {
            change: binlog_format::RowChange::Write { row },
            ..
        }) = &mut tx.events[0]
        {
            row[4] = binlog_format::Value::Bytes(vec![0; 100_000]);
        }
    }
    w.append_commit(&big).expect("append the large record");
    let (_, rec) = next_record(&mut tailer, 5, "the large record, whole");
    assert_eq!(rec, big);
    w.append_commit(&ring_insert(5)).expect("append");
    let (_, rec) = next_record(&mut tailer, 5, "the record after it");
    assert_eq!(rec, ring_insert(5));
}

/// `sync_within`: what was appended and not committed is fsynced by the background syncer once
/// the earliest requested deadline passes, with nobody waiting, and not before.
#[test]
fn a_deferred_sync_makes_appends_durable_in_the_background() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (w, _) =
        BinlogWriter::open(dir.path(), opts(1 << 20, SyncPolicy::EveryCommit)).expect("open");
    let mut last = 0;
    for seq in 1..=5 {
        last = w.append(&ring_insert(seq)).expect("append");
    }
    w.sync_within(Duration::from_secs(3600));
    std::thread::sleep(Duration::from_millis(50));
    assert!(w.durable_lsn() < last, "fsynced before its deadline");
    assert_eq!(w.durable_seq(), 0);
    // An earlier deadline replaces the later one.
    w.sync_within(Duration::from_millis(1));
    for _ in 0..1000 {
        if w.durable_lsn() >= last {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(w.durable_lsn() >= last, "the syncer did not fsync");
    assert_eq!(w.durable_seq(), 5);
    assert_eq!(read_all(dir.path()).0.len(), 5);
}
