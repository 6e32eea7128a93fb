//! The `ringrep-binlog` tool: `dump` (text and JSON), `check` and `stats` on a binlog written
//! by binlog-format's writer, including a torn tail and a flipped byte.

use std::fs;
use std::path::Path;
use std::process::Command;

use binlog_format::segment::{list_segments, segment_name};
use binlog_format::{
    BinlogWriter, Cause, Event, Record, RowChange, RowEvent, SyncPolicy, Transaction, Value,
    WriterOptions,
};

/// A typical ring insert: the data row and the meta row, about 150 bytes of user data (as
/// binlog-format's tests write them).
fn ring_insert(seq: u64) -> Record {
    let payload = "x".repeat(140);
    let slot = (seq % 64 + 1) as i64;
    Record::Transaction(Transaction {
        server_id: 1,
        seq,
        commit_time_us: 1_700_000_000_000_000 + seq as i64,
        origin: None,
        events: vec![
            Event::Row(RowEvent {
                table_id: 1,
                change: RowChange::Write {
                    row: vec![
                        Value::Int((seq % 10_000) as i64),
                        Value::Int(slot),
                        Value::Null,
                        Value::Timestamp(1_700_000_000_000_000),
                        Value::Text(payload),
                    ],
                },
                cause: if seq > 64 {
                    Cause::Overwrite
                } else {
                    Cause::Insert
                },
            }),
            Event::Row(RowEvent {
                table_id: 1,
                change: RowChange::Write {
                    row: vec![
                        Value::Int((seq % 10_000) as i64),
                        Value::Int(0),
                        Value::Bytes(vec![1u8; 32]),
                        Value::Timestamp(i64::from(i32::MAX) * 1_000_000),
                        Value::Null,
                    ],
                },
                cause: Cause::MetaUpdate,
            }),
        ],
    })
}

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

fn tool(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringrep-binlog"))
        .args(args)
        .output()
        .expect("run ringrep-binlog");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn tool_dump_check_and_stats() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_n(dir.path(), 1, 30, opts(4096, SyncPolicy::Never));
    let d = dir.path().to_str().expect("utf8");
    let (code, out) = tool(&["check", d]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("30 records, last seq 30"), "{out}");
    let (code, out) = tool(&["dump", "--json", "--from-seq", "5", "--to-seq", "7", d]);
    assert_eq!(code, 0, "{out}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(
        lines
            .iter()
            .map(|l| l["seq"].as_u64().expect("seq"))
            .collect::<Vec<_>>(),
        vec![5, 6, 7]
    );
    assert_eq!(lines[0]["events"][1]["cause"], "meta_update");
    let (code, out) = tool(&["dump", d]);
    assert_eq!(code, 0);
    assert!(out.contains("#transaction seq=1 server_id=1"), "{out}");
    let (code, out) = tool(&["stats", d]);
    assert_eq!(code, 0);
    assert!(out.contains("transactions 30 (seq 1..30)"), "{out}");

    // A torn tail is a warning; a flipped byte is corruption named by file and offset.
    let last = *list_segments(dir.path())
        .expect("list")
        .last()
        .expect("seg");
    let seg = dir.path().join(segment_name(last));
    let mut bytes = fs::read(&seg).expect("read");
    let keep = bytes.len() - 3;
    bytes.truncate(keep);
    fs::write(&seg, &bytes).expect("write");
    let (code, out) = tool(&["check", d]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("warning: torn tail"), "{out}");
    let first = dir.path().join(segment_name(1));
    let mut bytes = fs::read(&first).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    fs::write(&first, &bytes).expect("write");
    let (code, out) = tool(&["check", d]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("binlog.000001 at byte offset"), "{out}");
}
