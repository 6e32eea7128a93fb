//! Feeds arbitrary bytes to the frame scanner and the segment reader. Neither may panic,
//! allocate a frame larger than the maximum, or loop forever.
#![no_main]

use binlog_format::frame::scan_frame;
use binlog_format::{BinlogReader, ReaderOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = scan_frame(data, 1 << 16);
    let _ = binlog_format::codec::decode::<binlog_format::Record>(data);
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
