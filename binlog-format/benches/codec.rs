//! Criterion benchmarks for the binlog: encode+frame, decode+verify, and appends under each
//! sync policy. Run: `cargo bench -p binlog-format --bench codec`. Figures go in BENCHMARKS.md.

use std::hint::black_box;

use binlog_format::frame::{scan_frame, write_frame, write_frame_with, FrameScan};
use binlog_format::{
    codec, BinlogWriter, Cause, Event, Record, RowChange, RowEvent, SyncPolicy, Transaction, Value,
    WriterOptions,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// A typical ring insert: data row (about 150 bytes of user data) and meta row.
fn ring_insert(seq: u64) -> Record {
    Record::Transaction(Transaction {
        server_id: 1,
        seq,
        commit_time_us: 1_700_000_000_000_000,
        origin: None,
        events: vec![
            Event::Row(RowEvent {
                table_id: 1,
                change: RowChange::Write {
                    row: vec![
                        Value::Int(4711),
                        Value::Int(17),
                        Value::Null,
                        Value::Timestamp(1_700_000_000_000_000),
                        Value::Text("e".repeat(140)),
                    ],
                },
                cause: Cause::Overwrite,
            }),
            Event::Row(RowEvent {
                table_id: 1,
                change: RowChange::Write {
                    row: vec![
                        Value::Int(4711),
                        Value::Int(0),
                        Value::Bytes(vec![7u8; 32]),
                        Value::Timestamp(2_147_483_647_000_000),
                        Value::Null,
                    ],
                },
                cause: Cause::MetaUpdate,
            }),
        ],
    })
}

fn codec_benches(c: &mut Criterion) {
    let rec = ring_insert(1);
    let mut framed = Vec::new();
    write_frame(&codec::encode(&rec).expect("encode"), &mut framed).expect("frame");
    let mut g = c.benchmark_group("ring_insert_tx");
    g.throughput(Throughput::Elements(1));
    let mut buf = Vec::with_capacity(4096);
    // `encode_record_into` is what the writer uses; `bincode_only` is the generic encoder it
    // falls back to.
    g.bench_function("encode_and_frame", |b| {
        b.iter(|| {
            buf.clear();
            write_frame_with(&mut buf, |p| codec::encode_record_into(black_box(&rec), p))
                .expect("encode");
            black_box(buf.len())
        })
    });
    g.bench_function("encode_and_frame_bincode_only", |b| {
        b.iter(|| {
            buf.clear();
            write_frame_with(&mut buf, |p| codec::encode_into(black_box(&rec), p)).expect("encode");
            black_box(buf.len())
        })
    });
    // `decode_record` is what readers use; `bincode_only` is the generic decoder it falls
    // back to, kept here to show what the fast path gains.
    g.bench_function("verify_and_decode", |b| {
        b.iter(|| match scan_frame(black_box(&framed), u32::MAX) {
            FrameScan::Frame { payload, .. } => {
                black_box(codec::decode_record(payload).expect("decode"))
            }
            _ => unreachable!("valid frame"),
        })
    });
    g.bench_function("verify_and_decode_bincode_only", |b| {
        b.iter(|| match scan_frame(black_box(&framed), u32::MAX) {
            FrameScan::Frame { payload, .. } => {
                black_box(codec::decode::<Record>(payload).expect("decode"))
            }
            _ => unreachable!("valid frame"),
        })
    });
    g.finish();
}

fn append_benches(c: &mut Criterion) {
    let rec = ring_insert(1);
    let size = {
        let mut v = Vec::new();
        write_frame(&codec::encode(&rec).expect("encode"), &mut v).expect("frame");
        v.len() as u64
    };
    let mut g = c.benchmark_group("append");
    g.throughput(Throughput::Bytes(size * 1000));
    g.sample_size(20);
    g.bench_function("sync_never_1000_tx", |b| {
        let dir = tempfile::tempdir().expect("tempdir");
        let (w, _) = BinlogWriter::open(
            dir.path(),
            WriterOptions {
                sync: SyncPolicy::Never,
                ..WriterOptions::new(1)
            },
        )
        .expect("writer");
        let mut rec = rec.clone();
        if let Record::Transaction(tx) = &mut rec {
            tx.seq = 0;
        }
        b.iter(|| {
            for _ in 0..1000 {
                if let Record::Transaction(tx) = &mut rec {
                    tx.seq += 1;
                }
                w.append(&rec).expect("append");
            }
            w.flush().expect("flush");
        })
    });
    g.finish();
    let mut g = c.benchmark_group("append");
    g.throughput(Throughput::Elements(1));
    g.sample_size(10);
    g.bench_function("sync_every_commit_1_writer", |b| {
        let dir = tempfile::tempdir().expect("tempdir");
        let (w, _) = BinlogWriter::open(dir.path(), WriterOptions::new(1)).expect("writer");
        let mut seq = 0;
        b.iter(|| {
            seq += 1;
            let Record::Transaction(mut tx) = rec.clone() else {
                unreachable!()
            };
            tx.seq = seq;
            w.append_commit(&Record::Transaction(tx)).expect("commit")
        })
    });
    g.finish();
}

criterion_group!(benches, codec_benches, append_benches);
criterion_main!(benches);
