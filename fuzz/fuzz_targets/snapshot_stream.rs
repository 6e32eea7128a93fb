//! A snapshot as a new replica receives it: a real one (several tables and frames) made by an
//! engine once, then its frames dropped, repeated, swapped, cut or changed as the fuzzer's
//! bytes say (or the bytes taken whole as a snapshot), and read through `SnapshotRows` in
//! pieces of the sizes the bytes give, as they arrive from a socket.
//! It must never panic, and it must agree with the whole decoder (`Engine::decode_snapshot`):
//! bytes that one reads back whole, the other hands out whole, as many rows for each table;
//! bytes the whole decoder refuses never reach `SnapshotRows`' end (but for two rows on one
//! key, which only the whole decoder can see). The real snapshot unchanged reads back as the
//! engine's rows, row for row.
#![no_main]

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::OnceLock;

use binlog_format::Value;
use libfuzzer_sys::fuzz_target;
use ringrep_engine::clock::ManualClock;
use ringrep_engine::{Engine, InsertMode, Row, SnapshotRows};
use ringrep_model::fixtures::{create, open, ring_table, T0};

/// The real snapshot, a frame per element, and the rows it holds by table id.
struct Real {
    frames: Vec<Vec<u8>>,
    rows: BTreeMap<u64, Vec<Row>>,
}

fn real() -> &'static Real {
    static REAL: OnceLock<Real> = OnceLock::new();
    REAL.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::new(T0);
        let engine = open(dir.path(), &clock);
        let mut s = engine.session();
        // Two rings and enough rows for several frames of the larger one (a frame holds
        // at most 1024 rows), so that frames of one table can be dropped and repeated.
        for (name, size, prefixes) in [("r3", 3, 2000i64), ("r1", 1, 7)] {
            let def = create(&mut s, ring_table(name, size, None, false));
            let rows: Vec<Vec<Value>> = (0..prefixes * i64::from(size) + 1)
                .map(|i| vec![Value::Int(i % prefixes), Value::Text(format!("p{i}"))])
                .collect();
            s.statement(|s| s.insert(&def, &[0, 4], rows, InsertMode::Insert))
                .expect("insert");
        }
        let mut frames = Vec::new();
        engine
            .stream_snapshot_for_replica(|frame| {
                frames.push(frame);
                Ok(())
            })
            .expect("snapshot");
        assert!(
            frames.len() > 4,
            "the real snapshot is too small to cut: {}",
            frames.len()
        );
        let rows = engine.with_state(|st| {
            st.tables
                .iter()
                .map(|(id, t)| (*id, t.iter().map(|(_, r)| r).collect()))
                .collect()
        });
        Real { frames, rows }
    })
}

/// Reads its bytes in pieces whose sizes come from the fuzzer, as a socket hands them over.
struct Pieces<'a> {
    bytes: &'a [u8],
    sizes: &'a [u8],
    at: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = match self.sizes.get(self.at % self.sizes.len().max(1)) {
            Some(&s) => usize::from(s).max(1),
            None => usize::MAX,
        };
        self.at += 1;
        let n = size.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// The real snapshot's frames edited as `ops` say, two bytes an edit.
fn edited(ops: &[u8]) -> Vec<u8> {
    let real = real();
    let mut frames: Vec<Vec<u8>> = real.frames.clone();
    for op in ops.chunks_exact(2) {
        let (what, arg) = (op[0], usize::from(op[1]));
        if frames.is_empty() {
            break;
        }
        let i = arg % frames.len();
        match what % 6 {
            0 => {
                frames.remove(i);
            }
            1 => {
                let f = frames[i].clone();
                frames.insert(i, f);
            }
            2 => {
                let j = (arg / 7) % frames.len();
                frames.swap(i, j);
            }
            3 => {
                let f = &mut frames[i];
                let cut = (usize::from(what) * 31 + arg) % f.len().max(1);
                f.truncate(cut);
            }
            4 => {
                let f = &mut frames[i];
                if !f.is_empty() {
                    let at = (usize::from(what) * 131 + arg * 17) % f.len();
                    f[at] ^= 1 << (what % 8);
                }
            }
            _ => frames.push(vec![what; arg % 9]),
        }
    }
    frames.concat()
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    // The piece sizes come first, as many as the mode's low bits say.
    let (sizes, rest) = rest.split_at(usize::from(mode & 0x0f).min(rest.len()));
    // The real snapshot, unedited (not the raw bytes of 0x40).
    let unchanged = mode & 0x70 == 0x30 && rest.is_empty();
    let bytes = if mode & 0x40 != 0 {
        rest.to_vec()
    } else {
        edited(rest)
    };

    let whole = Engine::decode_snapshot(&bytes[..]);
    let mut handed: BTreeMap<u64, Vec<Row>> = BTreeMap::new();
    let streamed = SnapshotRows::open(Pieces {
        bytes: &bytes,
        sizes,
        at: 0,
    })
    .and_then(|mut s| {
        let ids: Vec<u64> = s.tables.iter().map(|t| t.id).collect();
        while let Some((at, rows)) = s.next_rows()? {
            handed.entry(ids[at]).or_default().extend(rows);
        }
        Ok((s.last_seq, ids))
    });

    match (&whole, &streamed) {
        (Ok(state), Ok((last_seq, ids))) => {
            assert_eq!(state.last_seq, *last_seq, "last_seq");
            assert_eq!(
                state.tables.keys().copied().collect::<Vec<_>>(),
                {
                    let mut ids = ids.clone();
                    ids.sort_unstable();
                    ids
                },
                "tables"
            );
            // Frames of rows may come in another order than the encoder's and still read
            // back whole; the rows per table are the same either way.
            for (id, t) in &state.tables {
                let got = handed.get(id).map_or(0, Vec::len);
                assert_eq!(t.len(), got, "table {id}: rows handed out");
            }
        }
        // Only the whole decoder builds the rows into tables, and so refuses two rows on one
        // key (a frame repeated where another as long was dropped).
        (Err(e), Ok(_)) => assert!(
            e.to_string().contains("distinct primary keys"),
            "the whole decoder refused bytes SnapshotRows read to their end: {e}"
        ),
        (Ok(_), Err(e)) => panic!("SnapshotRows refused bytes that read back whole: {e}"),
        (Err(_), Err(_)) => {}
    }
    if unchanged {
        assert!(
            streamed.is_ok(),
            "the real snapshot did not read back: {streamed:?}"
        );
        assert!(handed == real().rows, "the real snapshot's rows differ");
    }
});
