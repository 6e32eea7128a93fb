//! Feeds arbitrary bytes to the frame scanner, both record decoders (and the head-only one)
//! and the segment reader.
//! None may panic, allocate a frame larger than the maximum, or loop forever, and the fast
//! decoder must give what bincode gives.
#![no_main]

use binlog_format::frame::scan_frame;
use binlog_format::{BinlogReader, ReaderOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = scan_frame(data, 1 << 16);
    // The fast decoder must agree with bincode's on anything (compared by encoding, so
    // that a NaN equals itself).
    use binlog_format::codec;
    let same = |a: Option<Vec<u8>>, b: Option<Vec<u8>>| assert_eq!(a, b, "decoders disagree on {data:?}");
    same(
        codec::decode_record(data).ok().and_then(|r| codec::encode(&r).ok()),
        codec::decode::<binlog_format::Record>(data).ok().and_then(|r| codec::encode(&r).ok()),
    );
    // The head the replication stream reads is the whole record's, its events left out.
    let head = codec::decode_record_head(data);
    if let Ok(binlog_format::Record::Transaction(mut tx)) = codec::decode_record(data) {
        tx.events.clear();
        assert_eq!(head.ok(), Some(binlog_format::Record::Transaction(tx)), "head of {data:?}");
    }
    same(
        codec::decode_row(data).ok().and_then(|r| codec::encode(&r).ok()),
        codec::decode::<Vec<binlog_format::Value>>(data).ok().and_then(|r| codec::encode(&r).ok()),
    );
    let Ok(dir) = std::env::temp_dir().join(format!("ringrep-fuzz-{}", std::process::id())).canonicalize().or_else(|_| {
        let d = std::env::temp_dir().join(format!("ringrep-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&d).map(|_| d)
    }) else { return };
    let seg = dir.join("binlog.000001");
    if std::fs::write(&seg, data).is_err() {
        return;
    }
    if let Ok(reader) = BinlogReader::open(&seg, ReaderOptions { max_frame: 1 << 16, ..Default::default() }) {
        for item in reader {
            if item.is_err() {
                break;
            }
        }
    }
});
