//! Snapshots: the whole committed state at one sequence number, in `snapshots/`, written to a
//! temporary file, synced and renamed, so a snapshot on disk is always whole. Recovery loads
//! the newest one whose checksums hold and replays the binlog after its sequence number.
//!
//! File: frames (see docs/format.md) one after another, so that no state is too large for
//! one frame's 4 GiB:
//! 1. the header: the 8 bytes `RRSNAP02`, then the bincode of [`Header`];
//! 2. the rows: [`Part::Rows`], each up to [`CHUNK_BYTES`] of rows of one table (tables in
//!    the header's order, rows in key order);
//! 3. the end: [`Part::End`] with the number of rows, so a file that lost frames is never
//!    taken for a whole one.
//!
//! Files from before (one frame holding [`SnapshotV1`]) still load.

use std::fs;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use binlog_format::codec;
use binlog_format::format::FRAME_HEADER_LEN;
use binlog_format::frame::{scan_frame, write_frame_with, FrameScan};
use binlog_format::schema::TableDef;

use super::{Row, State, Table};
use crate::error::Result;

const MAGIC: &[u8; 8] = b"RRSNAP02";

/// Rows per frame are cut at this many encoded bytes.
const CHUNK_BYTES: usize = 16 << 20;

#[derive(bincode::Decode)]
struct Header {
    last_seq: u64,
    next_table_id: u64,
    databases: Vec<String>,
    tables: Vec<TableDef>,
}

/// The same bytes as [`Header`], borrowing from the state.
#[derive(bincode::Encode)]
struct HeaderOut<'a> {
    last_seq: u64,
    next_table_id: u64,
    databases: Vec<&'a str>,
    tables: Vec<&'a TableDef>,
}

#[derive(bincode::Decode)]
enum Part {
    /// Rows of the header's table number `table`.
    Rows {
        table: u32,
        rows: Vec<Row>,
    },
    End {
        rows: u64,
    },
}

/// The same bytes as [`Part`], with rows copied from their stored encoding.
#[derive(bincode::Encode)]
enum PartOut<'a> {
    Rows { table: u32, rows: StoredRows<'a> },
    End { rows: u64 },
}

/// Encodes like a `Vec<Row>` by copying each row's stored encoding, without decoding it.
struct StoredRows<'a>(&'a [&'a [u8]]);

impl bincode::Encode for StoredRows<'_> {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        e: &mut E,
    ) -> std::result::Result<(), bincode::error::EncodeError> {
        use bincode::enc::write::Writer;
        (self.0.len() as u64).encode(e)?;
        for r in self.0 {
            e.writer().write(r)?;
        }
        Ok(())
    }
}

/// The file of the first version: the whole state in one frame.
#[derive(bincode::Decode)]
struct SnapshotV1 {
    last_seq: u64,
    next_table_id: u64,
    databases: Vec<String>,
    tables: Vec<(TableDef, Vec<Row>)>,
}

fn snapshot_dir(dir: &Path) -> PathBuf {
    dir.join("snapshots")
}

fn name(seq: u64) -> String {
    format!("snapshot.{seq:020}")
}

/// A snapshot of the committed state, encoded: the file's bytes and the sequence number it
/// is taken at.
pub struct Encoded {
    pub seq: u64,
    bytes: Vec<u8>,
}

/// Encodes the committed state as a snapshot file. This is the only part that needs the
/// state: it copies each row's stored encoding into one buffer, which is cheaper than cloning
/// the state (an allocation per row, and as many frees later).
pub fn encode(st: &State) -> Result<Encoded> {
    encode_in_chunks(st, CHUNK_BYTES)
}

fn encode_in_chunks(st: &State, chunk_bytes: usize) -> Result<Encoded> {
    let tables: Vec<&Table> = st.tables.values().collect();
    let header = HeaderOut {
        last_seq: st.last_seq,
        next_table_id: st.next_table_id,
        databases: st.databases.iter().map(String::as_str).collect(),
        tables: tables.iter().map(|t| &t.def).collect(),
    };
    let mut bytes = Vec::new();
    write_frame_with(&mut bytes, |p| {
        p.extend_from_slice(MAGIC);
        codec::encode_into(&header, p)
    })?;
    let mut total = 0u64;
    let mut chunk: Vec<&[u8]> = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        let table =
            u32::try_from(i).map_err(|_| crate::error::Error::internal("too many tables"))?;
        let mut size = 0;
        let mut rows = t.stored().peekable();
        while let Some(r) = rows.next() {
            chunk.push(r.encoded());
            size += r.encoded().len();
            if size >= chunk_bytes || rows.peek().is_none() {
                let part = PartOut::Rows {
                    table,
                    rows: StoredRows(&chunk),
                };
                write_frame_with(&mut bytes, |p| codec::encode_into(&part, p))?;
                total += chunk.len() as u64;
                chunk.clear();
                size = 0;
            }
        }
    }
    write_frame_with(&mut bytes, |p| {
        codec::encode_into(&PartOut::End { rows: total }, p)
    })?;
    Ok(Encoded {
        seq: st.last_seq,
        bytes,
    })
}

/// Writes the committed state as a snapshot in `dir`.
pub fn write(dir: &Path, st: &State) -> Result<()> {
    write_encoded(dir, &encode(st)?)
}

/// Writes an encoded snapshot in `dir`: to a temporary file, synced, then renamed.
pub fn write_encoded(dir: &Path, snap: &Encoded) -> Result<()> {
    let sdir = snapshot_dir(dir);
    fs::create_dir_all(&sdir)?;
    let tmp = sdir.join(format!("{}.tmp", name(snap.seq)));
    fs::write(&tmp, &snap.bytes)?;
    fs::File::open(&tmp)?.sync_all()?;
    fs::rename(&tmp, sdir.join(name(snap.seq)))?;
    fs::File::open(&sdir)?.sync_all()?;
    // Keep the two newest; older ones only cost space.
    let mut all = list(&sdir)?;
    all.sort_unstable();
    while all.len() > 2 {
        let old = all.remove(0);
        let _ = fs::remove_file(sdir.join(name(old)));
    }
    Ok(())
}

fn list(sdir: &Path) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    if !sdir.exists() {
        return Ok(out);
    }
    for e in fs::read_dir(sdir)? {
        let e = e?;
        if let Some(seq) = e
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix("snapshot."))
            .and_then(|s| s.parse::<u64>().ok())
        {
            out.push(seq);
        }
    }
    Ok(out)
}

/// The newest snapshot that reads back whole, if any. One that does not (a bad checksum, a
/// missing frame) is skipped for the one before it.
pub fn load_newest(dir: &Path) -> Result<Option<State>> {
    let sdir = snapshot_dir(dir);
    let mut all = list(&sdir)?;
    all.sort_unstable_by(|a, b| b.cmp(a));
    for seq in all {
        let path = sdir.join(name(seq));
        match read(&path)? {
            Some(st) => return Ok(Some(st)),
            None => tracing::warn!(
                "snapshot {} does not read back whole; skipped",
                path.display()
            ),
        }
    }
    Ok(None)
}

/// Reads frames from a file one at a time, so that loading needs one frame's memory, not the
/// file's.
struct Frames {
    file: BufReader<fs::File>,
    buf: Vec<u8>,
}

enum Next<'a> {
    Frame(&'a [u8]),
    /// The file ends where a frame would start.
    End,
    /// A frame cut short or failing its checksum.
    Bad,
}

impl Frames {
    fn next(&mut self) -> Result<Next<'_>> {
        self.buf.resize(FRAME_HEADER_LEN, 0);
        match read_full(&mut self.file, &mut self.buf)? {
            0 => return Ok(Next::End),
            FRAME_HEADER_LEN => {}
            _ => return Ok(Next::Bad),
        }
        let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        // Grown as the bytes arrive, so a damaged length costs no large allocation.
        let got = (&mut self.file)
            .take(u64::from(len))
            .read_to_end(&mut self.buf)?;
        if got != len as usize {
            return Ok(Next::Bad);
        }
        Ok(match scan_frame(&self.buf, u32::MAX) {
            FrameScan::Frame { payload, .. } => Next::Frame(payload),
            _ => Next::Bad,
        })
    }
}

/// Reads until `buf` is full or the file ends; returns how many bytes were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(at)
}

/// One snapshot file as a state; `None` when it does not read back whole.
fn read(path: &Path) -> Result<Option<State>> {
    let mut frames = Frames {
        file: BufReader::new(fs::File::open(path)?),
        buf: Vec::new(),
    };
    let Next::Frame(first) = frames.next()? else {
        return Ok(None);
    };
    let Some(header) = first.strip_prefix(MAGIC) else {
        let Ok(data) = codec::decode::<SnapshotV1>(first) else {
            return Ok(None);
        };
        // A first-version file is its one frame and nothing after it.
        if !matches!(frames.next()?, Next::End) {
            return Ok(None);
        }
        let tables = data
            .tables
            .into_iter()
            .map(|(def, rows)| Table::with_rows(def, rows))
            .collect();
        return Ok(Some(state(
            data.last_seq,
            data.next_table_id,
            data.databases,
            tables,
        )));
    };
    let Ok(header) = codec::decode::<Header>(header) else {
        return Ok(None);
    };
    let mut tables: Vec<Table> = header.tables.into_iter().map(Table::new).collect();
    let mut total = 0u64;
    loop {
        let Next::Frame(payload) = frames.next()? else {
            return Ok(None);
        };
        match codec::decode::<Part>(payload) {
            Ok(Part::Rows { table, rows }) => {
                let Some(t) = tables.get_mut(table as usize) else {
                    return Ok(None);
                };
                total += rows.len() as u64;
                for r in rows {
                    t.put(&r);
                }
            }
            Ok(Part::End { rows }) if rows == total => break,
            _ => return Ok(None),
        }
    }
    if !matches!(frames.next()?, Next::End) {
        return Ok(None);
    }
    Ok(Some(state(
        header.last_seq,
        header.next_table_id,
        header.databases,
        tables,
    )))
}

fn state(last_seq: u64, next_table_id: u64, databases: Vec<String>, tables: Vec<Table>) -> State {
    let mut st = State {
        next_table_id,
        last_seq,
        ..Default::default()
    };
    st.databases = databases.into_iter().collect();
    for t in tables {
        st.tables.insert(t.def.id, t);
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state with a ring table (meta rows included), a plain table and an empty table.
    fn sample_state() -> State {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, mut s) = crate::sql::test_session(
            dir.path(),
            &[
                "CREATE TABLE r (u INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
             ring_meta VARBINARY(64), v VARCHAR(40), PRIMARY KEY (u, ring_idx)) \
             COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'",
                "CREATE TABLE p (id INT PRIMARY KEY, v TEXT)",
                "CREATE TABLE e (id INT PRIMARY KEY)",
            ],
        );
        for i in 0..40 {
            s.execute(&format!(
                "INSERT INTO r (u, v) VALUES ({}, 'row {i}')",
                i % 7
            ))
            .expect("insert");
            s.execute(&format!("INSERT INTO p VALUES ({i}, '{}')", "x".repeat(i)))
                .expect("insert");
        }
        let st = engine.read();
        let mut copy = State {
            last_seq: st.last_seq,
            next_table_id: st.next_table_id,
            databases: st.databases.clone(),
            ..Default::default()
        };
        for (id, t) in &st.tables {
            copy.tables.insert(
                *id,
                Table::with_rows(t.def.clone(), t.stored().map(|r| r.row())),
            );
        }
        copy
    }

    /// Everything a state holds, rows as their stored bytes, in a comparable form.
    fn contents(st: &State) -> Vec<(u64, TableDef, Vec<Vec<u8>>)> {
        let mut out: Vec<_> = st
            .tables
            .iter()
            .map(|(id, t)| {
                let rows = t.stored().map(|r| r.encoded().to_vec()).collect();
                (*id, t.def.clone(), rows)
            })
            .collect();
        out.sort_by_key(|(id, _, _)| *id);
        out
    }

    fn assert_same(a: &State, b: &State) {
        assert_eq!(a.last_seq, b.last_seq);
        assert_eq!(a.next_table_id, b.next_table_id);
        assert_eq!(a.databases, b.databases);
        assert_eq!(contents(a), contents(b));
    }

    fn frame_count(bytes: &[u8]) -> usize {
        let (mut at, mut n) = (0, 0);
        while let FrameScan::Frame { len, .. } = scan_frame(&bytes[at..], u32::MAX) {
            at += len;
            n += 1;
        }
        assert_eq!(at, bytes.len(), "the file is whole frames");
        n
    }

    /// Rows cut into many frames (as a state over 4 GiB must be) read back as they were.
    #[test]
    fn a_state_in_many_frames_reads_back_whole() {
        let st = sample_state();
        let rows: usize = st.tables.values().map(Table::len).sum();
        for chunk in [1, 100, CHUNK_BYTES] {
            let snap = encode_in_chunks(&st, chunk).expect("encode");
            let frames = frame_count(&snap.bytes);
            if chunk == 1 {
                // Header, one frame per row, end.
                assert_eq!(frames, rows + 2);
            }
            let dir = tempfile::tempdir().expect("tempdir");
            write_encoded(dir.path(), &snap).expect("write");
            let back = load_newest(dir.path()).expect("load").expect("a snapshot");
            assert_same(&back, &st);
        }
    }

    /// A file that lost its end, or has a damaged frame, is not taken: the snapshot before
    /// it is.
    #[test]
    fn a_damaged_or_short_file_falls_back_to_the_one_before() {
        let mut st = sample_state();
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), &st).expect("older snapshot");
        let older = st.last_seq;
        st.last_seq += 10;
        let snap = encode_in_chunks(&st, 100).expect("encode");
        let path = snapshot_dir(dir.path()).join(name(st.last_seq));
        let full = snap.bytes.clone();
        let end_frame = {
            let mut end = Vec::new();
            write_frame_with(&mut end, |p| {
                codec::encode_into(&PartOut::End { rows: 0 }, p)
            })
            .expect("frame");
            end.len()
        };
        let damaged = {
            let mut b = full.clone();
            let mid = b.len() / 2;
            b[mid] ^= 0x55;
            b
        };
        let mut extra = full.clone();
        extra.extend_from_slice(&full[..20]);
        let short_by_end = full[..full.len() - end_frame].to_vec();
        for bytes in [
            short_by_end,
            full[..full.len() - 1].to_vec(),
            damaged,
            extra,
        ] {
            fs::write(&path, &bytes).expect("write");
            let back = load_newest(dir.path()).expect("load").expect("a snapshot");
            assert_eq!(back.last_seq, older);
        }
        fs::write(&path, &full).expect("write");
        let back = load_newest(dir.path()).expect("load").expect("a snapshot");
        assert_same(&back, &st);
    }

    /// Snapshot files of the first version (the whole state in one frame) still load.
    #[test]
    fn first_version_files_still_load() {
        #[derive(bincode::Encode)]
        struct V1Out {
            last_seq: u64,
            next_table_id: u64,
            databases: Vec<String>,
            tables: Vec<(TableDef, Vec<Row>)>,
        }
        let st = sample_state();
        let v1 = V1Out {
            last_seq: st.last_seq,
            next_table_id: st.next_table_id,
            databases: st.databases.iter().cloned().collect(),
            tables: st
                .tables
                .values()
                .map(|t| (t.def.clone(), t.stored().map(|r| r.row()).collect()))
                .collect(),
        };
        let mut bytes = Vec::new();
        write_frame_with(&mut bytes, |p| codec::encode_into(&v1, p)).expect("frame");
        let dir = tempfile::tempdir().expect("tempdir");
        let sdir = snapshot_dir(dir.path());
        fs::create_dir_all(&sdir).expect("mkdir");
        fs::write(sdir.join(name(st.last_seq)), &bytes).expect("write");
        let back = load_newest(dir.path()).expect("load").expect("a snapshot");
        assert_same(&back, &st);
    }
}
