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
//!
//! Automatic snapshots are taken while writers go on ([`encode_live`]): the state's lock is
//! held for one frame's rows at a time, so rows may come from transactions after the header's
//! sequence number. That is sound because recovery always replays the binlog after it, and
//! replaying is idempotent: a row event writes a whole row or deletes a key, and DDL rebuilds
//! the tables it touches. Such a file says so (`exact` is false) and is never used without the
//! binlog after it; backups and explicit snapshots hold the lock throughout and are exact.

use std::fs;
use std::io::{BufReader, Read};
use std::ops::{Bound, Deref};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use binlog_format::codec;
use binlog_format::failpoint;
use binlog_format::format::FRAME_HEADER_LEN;
use binlog_format::frame::{scan_frame, write_frame_with, FrameScan};
use binlog_format::schema::TableDef;
use binlog_format::writer::SyncHandle;

use super::{Row, State, Table};
use crate::error::Result;

const MAGIC: &[u8; 8] = b"RRSNAP02";

/// Rows per frame are cut at this many encoded bytes.
const CHUNK_BYTES: usize = 16 << 20;

/// Rows per frame of a live snapshot: writers wait at most for copying these (about a
/// quarter of a millisecond). 4096 held a committer up to about a millisecond (commit p99
/// during provisioning 1.3-1.7 ms against 0.5-1.1 with 1024); 256 made the copy no faster for
/// writers and a third slower (BENCHMARKS.md, "Snapshot copies: frames of 1024 rows").
const LIVE_CHUNK_ROWS: usize = 1024;

/// The pause between a live snapshot's frames.
const LIVE_GAP: std::time::Duration = std::time::Duration::from_micros(200);

#[derive(bincode::Decode)]
struct Header {
    last_seq: u64,
    next_table_id: u64,
    databases: Vec<String>,
    tables: Vec<TableDef>,
    /// The rows are the state at `last_seq` exactly; false for a live snapshot, whose rows
    /// may be newer.
    exact: bool,
}

/// The same bytes as [`Header`], borrowing from the state.
#[derive(bincode::Encode)]
struct HeaderOut<'a> {
    last_seq: u64,
    next_table_id: u64,
    databases: Vec<&'a str>,
    tables: Vec<&'a TableDef>,
    exact: bool,
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
pub(crate) struct Encoded {
    pub seq: u64,
    bytes: Vec<u8>,
}

impl Encoded {
    /// The file's size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The file's bytes.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// Encodes the committed state as an exact snapshot file, copying each row's stored encoding
/// into one buffer (cheaper than cloning the state: an allocation per row, and as many frees
/// later).
pub(crate) fn encode(st: &State) -> Result<Encoded> {
    encode_in_chunks(|| st, true, usize::MAX, CHUNK_BYTES, || {}, |_| Ok(()))
}

/// Encodes a snapshot while writers go on (see the module's notes): `state`'s read lock is
/// taken for the header and then once per frame of rows.
pub(crate) fn encode_live(state: &RwLock<State>) -> Result<Encoded> {
    encode_live_into(state, |_| Ok(()))
}

/// [`encode_live`], each frame handed to `sink` as it is made (which may take it out of the
/// buffer).
pub(crate) fn encode_live_into(
    state: &RwLock<State>,
    sink: impl FnMut(&mut Vec<u8>) -> Result<()>,
) -> Result<Encoded> {
    encode_in_chunks(
        || state.read().unwrap_or_else(|p| p.into_inner()),
        false,
        LIVE_CHUNK_ROWS,
        CHUNK_BYTES,
        // A committer woken when the lock was let go needs a moment to run; without a pause
        // this thread takes the read lock again first, every time, and the committer waits
        // for the whole snapshot after all.
        || std::thread::sleep(LIVE_GAP),
        sink,
    )
}

/// Takes a live snapshot of `state` into `dir`, each frame written to the file as it is
/// made instead of the whole file built in memory first (a second copy of the state, its
/// pages faulted in and zeroed: BENCHMARKS.md, "What a snapshot costs"). Returns the
/// snapshot's sequence number and size. `binlog` as for [`write_encoded`].
pub(crate) fn write_live(
    dir: &Path,
    state: &RwLock<State>,
    binlog: Option<&SyncHandle>,
) -> Result<(u64, u64)> {
    let sdir = snapshot_dir(dir);
    fs::create_dir_all(&sdir)?;
    // One automatic snapshot runs at a time; its name is known once its header is read.
    let tmp = sdir.join("snapshot.writing.tmp");
    let mut file = fs::File::create(&tmp)?;
    let mut len = 0u64;
    let written = encode_live_into(state, |frame| {
        failpoint::write_all("snapshot::write", &mut file, frame)?;
        len += frame.len() as u64;
        frame.clear();
        Ok(())
    });
    let seq = match written {
        Ok(snap) => snap.seq,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    install(&sdir, &tmp, file, seq, binlog)?;
    Ok((seq, len))
}

/// The encoder of both: `lock` gives the state, called once for the header and once per
/// frame of rows (each frame at most `chunk_rows` rows and about `chunk_bytes` bytes).
/// `between_frames` runs before each frame with no lock held (tests commit there).
/// `sink` gets the buffer after each frame; what it leaves there is the file's.
fn encode_in_chunks<G: Deref<Target = State>>(
    lock: impl Fn() -> G,
    exact: bool,
    chunk_rows: usize,
    chunk_bytes: usize,
    mut between_frames: impl FnMut(),
    mut sink: impl FnMut(&mut Vec<u8>) -> Result<()>,
) -> Result<Encoded> {
    let mut bytes = Vec::new();
    let (seq, tables) = {
        let st = lock();
        let tables: Vec<(u64, TableDef)> = st
            .tables
            .iter()
            .map(|(id, t)| (*id, TableDef::clone(&t.def)))
            .collect();
        let header = HeaderOut {
            last_seq: st.last_seq,
            next_table_id: st.next_table_id,
            databases: st.databases.iter().map(String::as_str).collect(),
            tables: tables.iter().map(|(_, def)| def).collect(),
            exact,
        };
        write_frame_with(&mut bytes, |p| {
            p.extend_from_slice(MAGIC);
            codec::encode_into(&header, p)
        })?;
        (st.last_seq, tables)
    };
    sink(&mut bytes)?;
    let mut total = 0u64;
    for (i, (id, def)) in tables.iter().enumerate() {
        let table =
            u32::try_from(i).map_err(|_| crate::error::Error::internal("too many tables"))?;
        // The key of the last row copied: the next frame starts after it.
        let mut after: Option<Vec<u8>> = None;
        loop {
            between_frames();
            let st = lock();
            // Dropped or altered since the header: the DDL is in the binlog after the
            // header's sequence number, and replaying it rebuilds the table.
            let Some(t) = st.tables.get(id).filter(|t| *t.def == *def) else {
                break;
            };
            let lower = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let mut rows: Vec<&[u8]> = Vec::new();
            let mut size = 0;
            let mut last = None;
            for r in t.stored_range(lower, Bound::Unbounded) {
                rows.push(r.encoded());
                size += r.encoded().len();
                last = Some(r.key_bytes());
                if rows.len() >= chunk_rows || size >= chunk_bytes {
                    break;
                }
            }
            let Some(last) = last else {
                break;
            };
            let part = PartOut::Rows {
                table,
                rows: StoredRows(&rows),
            };
            write_frame_with(&mut bytes, |p| codec::encode_into(&part, p))?;
            total += rows.len() as u64;
            let next = (rows.len() >= chunk_rows || size >= chunk_bytes).then(|| last.to_vec());
            // The frame goes to its sink with no lock held.
            drop(st);
            sink(&mut bytes)?;
            if next.is_none() {
                break;
            }
            after = next;
        }
    }
    write_frame_with(&mut bytes, |p| {
        codec::encode_into(&PartOut::End { rows: total }, p)
    })?;
    sink(&mut bytes)?;
    Ok(Encoded { seq, bytes })
}

/// Writes the committed state as a snapshot in `dir`, for a state with no binlog behind it
/// (a restore).
pub(crate) fn write(dir: &Path, st: &State) -> Result<()> {
    write_encoded(dir, &encode(st)?, None)
}

/// Writes an encoded snapshot in `dir`: to a temporary file, synced, then renamed.
///
/// `binlog` is the log the state was read from; it is synced first. A snapshot holds every
/// transaction applied to the state when it was read, and commits are applied before they
/// are durable (their callers wait for that after), so without the sync a crash could leave
/// a snapshot holding transactions that the binlog lost and nobody was told committed.
pub(crate) fn write_encoded(dir: &Path, snap: &Encoded, binlog: Option<&SyncHandle>) -> Result<()> {
    let sdir = snapshot_dir(dir);
    fs::create_dir_all(&sdir)?;
    let tmp = sdir.join(format!("{}.tmp", name(snap.seq)));
    let written = fs::File::create(&tmp)
        .and_then(|mut f| failpoint::write_all("snapshot::write", &mut f, &snap.bytes).map(|()| f));
    match written {
        Ok(f) => install(&sdir, &tmp, f, snap.seq, binlog),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e.into())
        }
    }
}

/// Makes the snapshot written to `tmp` (`file`) the one of `seq`: `binlog` synced, the file
/// synced and renamed into place, the directory synced, older snapshots but one removed.
fn install(
    sdir: &Path,
    tmp: &Path,
    file: fs::File,
    seq: u64,
    binlog: Option<&SyncHandle>,
) -> Result<()> {
    let renamed = match binlog.map_or(Ok(()), |b| b.sync()) {
        Ok(()) => file
            .sync_all()
            .and_then(|()| {
                failpoint::check("snapshot::rename")?;
                fs::rename(tmp, sdir.join(name(seq)))
            })
            .map_err(crate::error::Error::from),
        Err(e) => Err(e.into()),
    };
    if let Err(e) = renamed {
        // A half-written snapshot is never read (no final name), but on a full disk its
        // space is what the node needs back.
        let _ = fs::remove_file(tmp);
        return Err(e);
    }
    fs::File::open(sdir)?.sync_all()?;
    // Keep the two newest; older ones only cost space.
    let mut all = list(sdir)?;
    all.sort_unstable();
    while all.len() > 2 {
        let old = all.remove(0);
        let _ = fs::remove_file(sdir.join(name(old)));
    }
    Ok(())
}

/// The sequence number of the newest snapshot, if any.
pub(crate) fn newest_seq(dir: &Path) -> Result<Option<u64>> {
    Ok(list(&snapshot_dir(dir))?.into_iter().max())
}

/// Removes the snapshots older than `seq`: once the binlog after them is gone, recovery could
/// not use them.
pub(crate) fn remove_older_than(dir: &Path, seq: u64) -> Result<()> {
    let sdir = snapshot_dir(dir);
    for old in list(&sdir)?.into_iter().filter(|&s| s < seq) {
        match fs::remove_file(sdir.join(name(old))) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    if sdir.exists() {
        fs::File::open(&sdir)?.sync_all()?;
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

/// A snapshot read back.
pub(crate) struct Loaded {
    pub state: State,
    /// The snapshot's size in bytes (its file's, or the bytes it was read from).
    pub bytes: u64,
    /// The rows are exactly the state at `state.last_seq`. A live snapshot's may be newer:
    /// it is only good with the binlog after that sequence number replayed over it.
    pub exact: bool,
}

/// The newest snapshot that reads back whole, if any. One that does not (a bad checksum, a
/// missing frame) is skipped for the one before it.
pub(crate) fn load_newest(dir: &Path) -> Result<Option<Loaded>> {
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
struct Frames<R> {
    file: R,
    buf: Vec<u8>,
}

enum Next<'a> {
    Frame(&'a [u8]),
    /// The file ends where a frame would start.
    End,
    /// A frame cut short or failing its checksum.
    Bad,
}

impl<R: std::io::Read> Frames<R> {
    fn next(&mut self) -> Result<Next<'_>> {
        self.buf.clear();
        // Both reads grow the buffer as the bytes arrive, so a damaged length costs no large
        // allocation, and a short read tells a clean end from a cut frame.
        let head = (&mut self.file)
            .take(FRAME_HEADER_LEN as u64)
            .read_to_end(&mut self.buf)?;
        match head {
            0 => return Ok(Next::End),
            FRAME_HEADER_LEN => {}
            _ => return Ok(Next::Bad),
        }
        let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
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

/// One snapshot file as a state; `None` when it does not read back whole.
fn read(path: &Path) -> Result<Option<Loaded>> {
    let file = fs::File::open(path)?;
    let bytes = file.metadata()?.len();
    Ok(read_from(BufReader::new(file))?.map(|l| Loaded { bytes, ..l }))
}

/// A snapshot's bytes (as a file holds them) read back, or `None` when they do not read back
/// whole.
#[cfg(test)]
fn decode_bytes(bytes: &[u8]) -> Result<Option<Loaded>> {
    let len = bytes.len() as u64;
    Ok(read_from(bytes)?.map(|l| Loaded { bytes: len, ..l }))
}

/// A snapshot read back from `file` (a file's bytes, or a snapshot's given as they arrive:
/// what a point-in-time reader of a node loads), or `None` when they do not read back whole.
/// Its size is not counted here (`bytes` is 0).
pub(crate) fn read_from<R: std::io::Read>(file: R) -> Result<Option<Loaded>> {
    let mut frames = Frames {
        file,
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
        let mut tables = Vec::with_capacity(data.tables.len());
        for (def, rows) in data.tables {
            let n = rows.len() as u64;
            let t = Table::with_rows(def, rows);
            one_row_per_key(&t, n)?;
            tables.push(t);
        }
        // Written under the lock: exact.
        return Ok(Some(Loaded {
            state: state(data.last_seq, data.next_table_id, data.databases, tables),
            bytes: 0,
            exact: true,
        }));
    };
    let Ok(header) = codec::decode::<Header>(header) else {
        return Ok(None);
    };
    let mut tables: Vec<Table> = header.tables.into_iter().map(Table::new).collect();
    let mut per_table = vec![0u64; tables.len()];
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
                per_table[table as usize] += rows.len() as u64;
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
    for (t, n) in tables.iter().zip(per_table) {
        one_row_per_key(t, n)?;
    }
    Ok(Some(Loaded {
        state: state(
            header.last_seq,
            header.next_table_id,
            header.databases,
            tables,
        ),
        bytes: 0,
        exact: header.exact,
    }))
}

/// A snapshot (as [`crate::Engine::snapshot_for_replica`] and
/// [`crate::Engine::stream_snapshot_for_replica`] make it) read a frame at a time from `R`, its
/// rows handed out as they are decoded instead of built into a state first: a replica
/// provisioned over the network writes them into its own engine while the rest is still on
/// its way, and the state they make is built once, there. Each frame's checksum is checked as
/// it is read, and the end frame's row count at the end (nothing may follow it), so a
/// snapshot cut short or damaged is an error at the frame where it happens; what was handed
/// out before it is the caller's to discard.
pub struct SnapshotRows<R> {
    frames: Frames<R>,
    /// The sequence number the snapshot stands at.
    pub last_seq: u64,
    /// The databases, as the snapshot's header lists them.
    pub databases: Vec<String>,
    /// The tables, in the header's order (rows name their table by its place here).
    pub tables: Vec<TableDef>,
    /// Rows handed out so far, in all and per table.
    total: u64,
    per_table: Vec<u64>,
    ended: bool,
    /// A first-version snapshot (one frame) is decoded whole when opened; its tables' rows
    /// are handed out from here.
    legacy: Option<std::vec::IntoIter<Vec<Row>>>,
}

impl<R> std::fmt::Debug for SnapshotRows<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotRows")
            .field("last_seq", &self.last_seq)
            .field("tables", &self.tables.len())
            .field("rows", &self.total)
            .finish_non_exhaustive()
    }
}

impl<R: Read> SnapshotRows<R> {
    /// Reads the snapshot's first frame (its header) from `reader`; the rows follow with
    /// [`SnapshotRows::next_rows`]. An error when the bytes do not start a snapshot.
    pub fn open(reader: R) -> Result<SnapshotRows<R>> {
        let mut frames = Frames {
            file: reader,
            buf: Vec::new(),
        };
        let Next::Frame(first) = frames.next()? else {
            return Err(not_whole());
        };
        if let Some(header) = first.strip_prefix(MAGIC) {
            let header = codec::decode::<Header>(header).map_err(|_| not_whole())?;
            return Ok(SnapshotRows {
                frames,
                last_seq: header.last_seq,
                databases: header.databases,
                per_table: vec![0; header.tables.len()],
                tables: header.tables,
                total: 0,
                ended: false,
                legacy: None,
            });
        }
        let data = codec::decode::<SnapshotV1>(first).map_err(|_| not_whole())?;
        // A first-version snapshot is its one frame and nothing after it.
        if !matches!(frames.next()?, Next::End) {
            return Err(not_whole());
        }
        let (tables, rows): (Vec<TableDef>, Vec<Vec<Row>>) = data.tables.into_iter().unzip();
        Ok(SnapshotRows {
            frames,
            last_seq: data.last_seq,
            databases: data.databases,
            per_table: vec![0; tables.len()],
            tables,
            total: 0,
            ended: false,
            legacy: Some(rows.into_iter()),
        })
    }

    /// The next frame's rows and the place of their table in [`SnapshotRows::tables`], in
    /// the snapshot's order (each table's rows in key order); `None` once the end frame is
    /// read, the rows handed out are the rows it counts and nothing follows it.
    pub fn next_rows(&mut self) -> Result<Option<(usize, Vec<Row>)>> {
        if self.ended {
            return Ok(None);
        }
        if let Some(legacy) = self.legacy.as_mut() {
            let Some(rows) = legacy.next() else {
                self.ended = true;
                return Ok(None);
            };
            let at = self.tables.len() - legacy.len() - 1;
            return Ok(Some(self.handed_out(at, rows)));
        }
        let Next::Frame(payload) = self.frames.next()? else {
            return Err(not_whole());
        };
        match codec::decode::<Part>(payload) {
            Ok(Part::Rows { table, rows }) if (table as usize) < self.tables.len() => {
                Ok(Some(self.handed_out(table as usize, rows)))
            }
            Ok(Part::End { rows }) if rows == self.total => {
                if !matches!(self.frames.next()?, Next::End) {
                    return Err(not_whole());
                }
                self.ended = true;
                Ok(None)
            }
            _ => Err(not_whole()),
        }
    }

    fn handed_out(&mut self, at: usize, rows: Vec<Row>) -> (usize, Vec<Row>) {
        self.total += rows.len() as u64;
        self.per_table[at] += rows.len() as u64;
        (at, rows)
    }

    /// Rows handed out for the table at `index` in [`SnapshotRows::tables`].
    pub fn rows_of(&self, index: usize) -> u64 {
        self.per_table.get(index).copied().unwrap_or(0)
    }

    /// What the bytes are read from (to ask it why they stopped).
    pub fn reader(&self) -> &R {
        &self.frames.file
    }
}

/// A snapshot's bytes that do not read back as a whole snapshot.
fn not_whole() -> crate::error::Error {
    crate::error::Error::internal("the snapshot received does not read back whole")
}

/// Refuses a snapshot table whose `written` rows fell onto fewer keys: text keys compare
/// without case or accents (`binlog_format::collation`), and a snapshot written before they did
/// may hold rows whose keys differ only so. Loading it would keep one row of each such pair
/// and drop the other without a word.
fn one_row_per_key(t: &Table, written: u64) -> Result<()> {
    if t.len() as u64 == written {
        if let Some((idx, v)) = t.shared_unique_value() {
            return Err(crate::error::Error::internal(format!(
                "the snapshot's table {}.{} holds two rows with the value {:?} of its unique \
                 index {}: values that differ only in case or accents, written before text \
                 compared without them; load it with the ringrep that wrote it and change \
                 those values first",
                t.def.database, t.def.name, v.0, t.def.indexes[idx].name
            )));
        }
        return Ok(());
    }
    Err(crate::error::Error::internal(format!(
        "the snapshot's table {}.{} holds {written} rows but only {} distinct primary keys: \
         keys that differ only in case or accents, written before text keys compared without \
         them; load it with the ringrep that wrote it and rename those keys first",
        t.def.database,
        t.def.name,
        t.len()
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
    use crate::fixtures::*;
    use crate::Engine;
    use binlog_format::SyncPolicy;

    /// A state with a ring table (its meta rows included), a plain table and a table left
    /// empty (see `fixtures`), the first two filled.
    fn sample_state() -> State {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, mut s) = sample_engine(dir.path(), SyncPolicy::EveryCommit);
        for i in 0..40 {
            insert_r(&mut s, i % 7, &format!("row {i}"));
            insert_p(&mut s, i, &"x".repeat(i as usize));
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
                Table::with_rows(TableDef::clone(&t.def), t.stored().map(|r| r.row())),
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
                (*id, TableDef::clone(&t.def), rows)
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

    fn exact(st: &State, chunk_bytes: usize) -> Encoded {
        encode_in_chunks(|| st, true, usize::MAX, chunk_bytes, || {}, |_| Ok(())).expect("encode")
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
    /// A snapshot written when text keys compared by their bytes may hold two rows whose keys
    /// now are one: it is refused, naming the table, not loaded with one of them dropped.
    #[test]
    fn a_snapshot_with_keys_equal_under_the_collation_is_refused() {
        let st = sample_state();
        let p = st
            .tables
            .values()
            .find(|t| t.def.name == "p")
            .map(|t| TableDef::clone(&t.def))
            .expect("table p");
        // `p` keyed by its text column `v`.
        let mut by_v = p.clone();
        by_v.primary_key = vec![1];
        // A snapshot of `def` holding these (id, v) rows, as a build keyed by bytes wrote it.
        let snapshot_of = |def: &TableDef, pairs: &[(i64, &str)]| {
            let header = HeaderOut {
                last_seq: 1,
                next_table_id: def.id + 1,
                databases: vec!["d"],
                tables: vec![def],
                exact: true,
            };
            let rows: Vec<Vec<u8>> = pairs
                .iter()
                .map(|(id, v)| {
                    let mut enc = Vec::new();
                    codec::encode_row_into(
                        &[
                            binlog_format::Value::Int(*id),
                            binlog_format::Value::Text((*v).into()),
                        ],
                        &mut enc,
                    );
                    enc
                })
                .collect();
            let slices: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
            let mut bytes = Vec::new();
            write_frame_with(&mut bytes, |p| {
                p.extend_from_slice(MAGIC);
                codec::encode_into(&header, p)
            })
            .expect("header");
            let part = PartOut::Rows {
                table: 0,
                rows: StoredRows(&slices),
            };
            write_frame_with(&mut bytes, |p| codec::encode_into(&part, p)).expect("rows");
            let end = PartOut::End {
                rows: pairs.len() as u64,
            };
            write_frame_with(&mut bytes, |p| codec::encode_into(&end, p)).expect("end");
            bytes
        };
        let err = decode_bytes(&snapshot_of(&by_v, &[(1, "Bob"), (2, "bob")]))
            .err()
            .expect("refused");
        assert!(
            err.message
                .contains("d.p holds 2 rows but only 1 distinct primary keys"),
            "{}",
            err.message
        );
        // The same for a unique index over `v`.
        let mut unique_v = p.clone();
        unique_v.indexes = vec![binlog_format::schema::IndexDef {
            name: "v_u".into(),
            kind: binlog_format::schema::IndexKind::Unique,
            columns: vec![1],
        }];
        let err = decode_bytes(&snapshot_of(&unique_v, &[(1, "Ann"), (2, "ÁNN")]))
            .err()
            .expect("refused");
        assert!(err.message.contains("unique index v_u"), "{}", err.message);
        assert!(
            decode_bytes(&snapshot_of(&unique_v, &[(1, "Ann"), (2, "Anne")]))
                .expect("read")
                .is_some()
        );
        // Keys that differ in more than case load.
        let bytes = snapshot_of(&by_v, &[(1, "Bob"), (2, "Rob")]);
        let loaded = decode_bytes(&bytes).expect("read").expect("whole");
        assert_eq!(
            loaded.state.tables.values().map(Table::len).sum::<usize>(),
            2
        );
    }

    #[test]
    fn a_state_in_many_frames_reads_back_whole() {
        let st = sample_state();
        let rows: usize = st.tables.values().map(Table::len).sum();
        for chunk in [1, 100, CHUNK_BYTES] {
            let snap = exact(&st, chunk);
            let frames = frame_count(&snap.bytes);
            if chunk == 1 {
                // Header, one frame per row, end.
                assert_eq!(frames, rows + 2);
            }
            let dir = tempfile::tempdir().expect("tempdir");
            write_encoded(dir.path(), &snap, None).expect("write");
            let back = load_newest(dir.path()).expect("load").expect("a snapshot");
            assert!(back.exact);
            assert_same(&back.state, &st);
        }
    }

    /// A snapshot's bytes read a frame at a time give every table's rows in key order, as the
    /// state holds them; damaged, cut short or followed by more bytes, they are an error
    /// before the end is reported.
    #[test]
    fn snapshot_rows_are_the_state_frame_by_frame() {
        /// Every row of `bytes`, or the first error.
        fn read_all(bytes: &[u8]) -> Result<Vec<Vec<Row>>> {
            let mut reader = SnapshotRows::open(bytes)?;
            let mut got: Vec<Vec<Row>> = vec![Vec::new(); reader.tables.len()];
            while let Some((at, rows)) = reader.next_rows()? {
                got[at].extend(rows);
            }
            Ok(got)
        }
        let st = sample_state();
        for chunk in [1, 100, CHUNK_BYTES] {
            let snap = exact(&st, chunk);
            let mut reader = SnapshotRows::open(&snap.bytes[..]).expect("read");
            assert_eq!(reader.last_seq, st.last_seq);
            let mut got: Vec<Vec<Row>> = vec![Vec::new(); reader.tables.len()];
            while let Some((at, rows)) = reader.next_rows().expect("rows") {
                got[at].extend(rows);
            }
            assert_eq!(reader.next_rows().expect("after the end"), None);
            for (at, def) in reader.tables.iter().enumerate() {
                let t = st.tables.get(&def.id).expect("table");
                let want: Vec<Row> = t.iter().map(|(_, r)| r).collect();
                assert_eq!(got[at], want, "{} in frames of {chunk}", def.name);
                assert_eq!(reader.rows_of(at), want.len() as u64);
            }
            let mut damaged = snap.bytes.clone();
            let mid = damaged.len() / 2;
            damaged[mid] ^= 0xff;
            assert!(read_all(&damaged).is_err(), "damaged, frames of {chunk}");
            let short = &snap.bytes[..snap.bytes.len() - 3];
            assert!(read_all(short).is_err(), "cut short, frames of {chunk}");
            let mut longer = snap.bytes.clone();
            longer.extend_from_slice(&snap.bytes[..40]);
            assert!(read_all(&longer).is_err(), "bytes after the end");
            assert!(read_all(&[]).is_err(), "nothing");
        }
    }

    /// `st` as a first-version snapshot: one frame holding the whole state.
    fn first_version_bytes(st: &State) -> Vec<u8> {
        #[derive(bincode::Encode)]
        struct V1Out {
            last_seq: u64,
            next_table_id: u64,
            databases: Vec<String>,
            tables: Vec<(TableDef, Vec<Row>)>,
        }
        let v1 = V1Out {
            last_seq: st.last_seq,
            next_table_id: st.next_table_id,
            databases: st.databases.iter().cloned().collect(),
            tables: st
                .tables
                .values()
                .map(|t| (TableDef::clone(&t.def), t.iter().map(|(_, r)| r).collect()))
                .collect(),
        };
        let mut bytes = Vec::new();
        write_frame_with(&mut bytes, |p| codec::encode_into(&v1, p)).expect("frame");
        bytes
    }

    /// A first-version snapshot (one frame) read with [`SnapshotRows`] hands out its tables'
    /// rows as the current version does.
    #[test]
    fn snapshot_rows_read_a_first_version_snapshot() {
        let st = sample_state();
        let bytes = first_version_bytes(&st);
        let mut reader = SnapshotRows::open(&bytes[..]).expect("read");
        assert_eq!(reader.last_seq, st.last_seq);
        let mut seen = 0;
        while let Some((at, rows)) = reader.next_rows().expect("rows") {
            let t = st.tables.get(&reader.tables[at].id).expect("table");
            assert_eq!(rows, t.iter().map(|(_, r)| r).collect::<Vec<Row>>());
            assert_eq!(reader.rows_of(at), rows.len() as u64);
            seen += 1;
        }
        assert_eq!(seen, st.tables.len());
    }

    /// A live snapshot written frame by frame to its file is the file `encode_live` builds in
    /// memory, and reads back as the state; the temporary file is gone.
    #[test]
    fn a_live_snapshot_written_as_it_is_made_is_the_same_file() {
        let state = RwLock::new(sample_state());
        let dir = tempfile::tempdir().expect("tempdir");
        let (seq, len) = write_live(dir.path(), &state, None).expect("write");
        let built = encode_live(&state).expect("encode");
        assert_eq!(seq, built.seq);
        let sdir = snapshot_dir(dir.path());
        let file = fs::read(sdir.join(name(seq))).expect("the snapshot file");
        assert_eq!(len as usize, file.len());
        assert!(
            file == built.into_bytes(),
            "same bytes as the snapshot built in memory"
        );
        let back = load_newest(dir.path()).expect("load").expect("a snapshot");
        assert!(!back.exact);
        assert_same(&back.state, &state.read().expect("lock"));
        let names: Vec<String> = fs::read_dir(&sdir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [name(seq)]);
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
        let snap = exact(&st, 100);
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
            assert_eq!(back.state.last_seq, older);
        }
        fs::write(&path, &full).expect("write");
        let back = load_newest(dir.path()).expect("load").expect("a snapshot");
        assert_same(&back.state, &st);
    }

    /// Snapshot files of the first version (the whole state in one frame) still load.
    #[test]
    fn first_version_files_still_load() {
        let st = sample_state();
        let bytes = first_version_bytes(&st);
        let dir = tempfile::tempdir().expect("tempdir");
        let sdir = snapshot_dir(dir.path());
        fs::create_dir_all(&sdir).expect("mkdir");
        fs::write(sdir.join(name(st.last_seq)), &bytes).expect("write");
        let back = load_newest(dir.path()).expect("load").expect("a snapshot");
        assert!(back.exact);
        assert_same(&back.state, &st);
    }

    /// A live snapshot taken while transactions commit between its frames (inserts that
    /// overwrite ring slots, updates, deletes, an ALTER, a DROP and a CREATE), with the binlog
    /// after it replayed on reopening, gives back exactly the state the engine had.
    #[test]
    fn a_live_snapshot_with_the_binlog_after_it_gives_back_the_state() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, mut s) = sample_engine(dir.path(), SyncPolicy::EveryCommit);
        insert_ids(&mut s, "e", &[1, 2]);
        for i in 0..30 {
            insert_r(&mut s, i % 5, &format!("a{i}"));
            insert_p(&mut s, i, &format!("p{i}"));
        }
        let mut frames = 0;
        let snap = encode_in_chunks(
            || engine.read(),
            false,
            2,
            CHUNK_BYTES,
            || {
                frames += 1;
                match frames {
                    3 => {
                        for i in 0..12 {
                            insert_r(&mut s, i % 5, &format!("b{i}"));
                        }
                        update_p_below(&mut s, 10, "changed");
                        delete_p_from(&mut s, 25);
                        insert_p(&mut s, 100, "late");
                    }
                    9 => {
                        alter_p_add_z(&mut s);
                        drop_table(&mut s, "e");
                        create_ids(&mut s, "n");
                        insert_ids(&mut s, "n", &[5]);
                        insert_r(&mut s, 9, "c");
                    }
                    _ => {}
                }
            },
            |_| Ok(()),
        )
        .expect("encode");
        assert!(frames > 9, "the writes happened between frames");
        write_encoded(dir.path(), &snap, None).expect("write");
        let live = engine.read().clone();
        assert!(live.last_seq > snap.seq, "commits came after the header");
        drop(s);
        drop(engine);
        let loaded = load_newest(dir.path()).expect("load").expect("a snapshot");
        assert!(!loaded.exact);
        let (reopened, report) =
            Engine::open(dir.path(), crate::EngineConfig::new(1)).expect("reopen");
        assert_eq!(report.snapshot_seq, Some(snap.seq));
        assert_same(&reopened.read(), &live);
    }

    /// Rows at slots a ring never assigns (only the applier's raw path can write them) are
    /// kept in key order with the others, and come back from a snapshot and from the binlog.
    #[test]
    fn rows_at_odd_slots_keep_their_place_through_snapshot_and_replay() {
        use binlog_format::Value;
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, mut s) = sample_engine(dir.path(), SyncPolicy::EveryCommit);
        insert_r(&mut s, 1, "a");
        insert_r(&mut s, 1, "b");
        let def = engine.table_def("d", "r").expect("table r");
        let mut raw = engine.session();
        raw.vars.applier = true;
        let row =
            |slot: Value, v: &str| vec![Value::Int(1), slot, Value::Null, Value::Text(v.into())];
        for (slot, v) in [
            (Value::Int(-1), "minus one"),
            (Value::Int(7), "seven"),
            (Value::UInt(u64::MAX), "max"),
        ] {
            raw.raw_write(&def, row(slot, v)).expect("raw write");
        }
        let slots = |e: &Engine| -> Vec<String> {
            let st = e.read();
            let t = st.tables.get(&def.id).expect("table");
            t.iter().map(|(k, _)| k.0[1].to_string()).collect()
        };
        let expected = ["-1", "0", "1", "2", "7", "18446744073709551615"];
        assert_eq!(slots(&engine), expected);
        // The meta row says the ring holds two rows: inserts go on from there.
        insert_r(&mut s, 1, "c");
        let mut expected = expected.to_vec();
        expected.insert(4, "3");
        assert_eq!(slots(&engine), expected);
        let before = engine.read().clone();
        drop((s, raw));
        drop(engine);
        let (replayed, _) = Engine::open(dir.path(), crate::EngineConfig::new(1)).expect("reopen");
        assert_same(&replayed.read(), &before);
        replayed.snapshot().expect("snapshot");
        drop(replayed);
        let (loaded, report) =
            Engine::open(dir.path(), crate::EngineConfig::new(1)).expect("reopen");
        assert!(report.snapshot_seq.is_some());
        assert_same(&loaded.read(), &before);
        assert_eq!(slots(&loaded), expected);
    }

    /// Nothing reaches a snapshot file before the binlog holding it is durable: with the
    /// binlog unsynced (sync policy never), taking a snapshot syncs it first.
    #[test]
    fn a_snapshot_syncs_the_binlog_it_covers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, mut s) = sample_engine(dir.path(), SyncPolicy::Never);
        insert_p(&mut s, 1, "x");
        insert_p(&mut s, 2, "y");
        let binlog = engine.shared.binlog.as_ref().expect("a writer");
        for (live, id) in [(true, 3), (false, 4)] {
            insert_p(&mut s, id, "z");
            let before = binlog.durable_lsn();
            if live {
                engine.snapshot_live().expect("snapshot");
            } else {
                engine.snapshot().expect("snapshot");
            }
            let after = binlog.durable_lsn();
            assert!(after > before, "the snapshot synced the binlog");
            binlog.sync().expect("sync");
            assert_eq!(binlog.durable_lsn(), after, "nothing was left unsynced");
        }
    }

    /// A snapshot streamed a frame at a time is, frames put together, the snapshot a replica
    /// is sent whole, and reads back as the engine's state; the binlog it covers is durable
    /// before it returns, and an error from the receiver ends the copy with that error.
    #[test]
    fn a_streamed_snapshot_is_the_whole_one_in_frames() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, mut s) = sample_engine(dir.path(), SyncPolicy::Never);
        for i in 0..300 {
            insert_p(&mut s, 1000 + i, "streamed");
        }
        let mut frames: Vec<Vec<u8>> = Vec::new();
        let (seq, covered) = engine
            .stream_snapshot_for_replica(|f| {
                frames.push(f);
                Ok(())
            })
            .expect("stream");
        let binlog = engine.shared.binlog.as_ref().expect("a writer");
        let durable = binlog.durable_lsn();
        binlog.sync().expect("sync");
        assert_eq!(binlog.durable_lsn(), durable, "synced before it returned");
        let (whole_seq, whole_covered, whole) = engine.snapshot_for_replica().expect("whole");
        assert_eq!((seq, covered), (whole_seq, whole_covered));
        assert_eq!(seq, engine.last_seq());
        // A header, the rows' frames, the end.
        assert!(frames.len() >= 3, "{}", frames.len());
        assert_eq!(frames.concat(), whole);
        let back = Engine::decode_snapshot(&frames.concat()[..]).expect("decode");
        assert_same(&back, &engine.read());

        let mut calls = 0;
        let e = engine
            .stream_snapshot_for_replica(|_| {
                calls += 1;
                Err(crate::error::Error::internal("the replica went away"))
            })
            .expect_err("ended");
        assert_eq!(calls, 1);
        assert!(e.message.contains("went away"), "{}", e.message);
    }

    /// A live snapshot is never taken for a backup, nor used without the binlog after it.
    #[test]
    fn a_live_snapshot_is_not_a_backup() {
        let st = sample_state();
        let lock = RwLock::new(st);
        let snap = encode_live(&lock).expect("encode");
        let backup = tempfile::tempdir().expect("tempdir");
        write_encoded(backup.path(), &snap, None).expect("write");
        let target = tempfile::tempdir().expect("tempdir");
        let err = Engine::restore(backup.path(), &target.path().join("new")).expect_err("refused");
        assert!(err.message.contains("not a backup"), "{}", err.message);
        // A data directory whose binlog is gone does not open from it either.
        let Err(err) = Engine::open(backup.path(), crate::EngineConfig::new(1)) else {
            panic!("opened without the binlog");
        };
        assert!(err.message.contains("taken while"), "{}", err.message);
    }
}
