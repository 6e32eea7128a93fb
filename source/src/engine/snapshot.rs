//! Snapshots: the whole committed state at one sequence number, in `snapshots/`, written to a
//! temporary file, synced and renamed, so a snapshot on disk is always whole. Recovery loads
//! the newest one whose checksum holds and replays the binlog after its sequence number.
//!
//! File: one frame (see docs/format.md) whose payload is the bincode of [`SnapshotData`].

use std::fs;
use std::path::{Path, PathBuf};

use binlog_format::frame::{scan_frame, write_frame_with, FrameScan};
use binlog_format::schema::TableDef;

use super::{Row, State, Table};
use crate::error::Result;

#[derive(bincode::Decode)]
struct SnapshotData {
    last_seq: u64,
    next_table_id: u64,
    databases: Vec<String>,
    tables: Vec<(TableDef, Vec<Row>)>,
}

/// The same bytes as [`SnapshotData`], written from the tables as they are stored.
#[derive(bincode::Encode)]
struct SnapshotOut<'a> {
    last_seq: u64,
    next_table_id: u64,
    databases: Vec<&'a str>,
    tables: Vec<(&'a TableDef, StoredRows<'a>)>,
}

/// Encodes like a `Vec<Row>` by copying each row's stored encoding, without decoding it.
struct StoredRows<'a>(&'a Table);

impl bincode::Encode for StoredRows<'_> {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        e: &mut E,
    ) -> std::result::Result<(), bincode::error::EncodeError> {
        use bincode::enc::write::Writer;
        (self.0.len() as u64).encode(e)?;
        for r in self.0.stored() {
            e.writer().write(r.encoded())?;
        }
        Ok(())
    }
}

fn snapshot_dir(dir: &Path) -> PathBuf {
    dir.join("snapshots")
}

fn name(seq: u64) -> String {
    format!("snapshot.{seq:020}")
}

/// A snapshot of the committed state, encoded: the file's bytes (one frame) and the sequence
/// number it is taken at.
pub struct Encoded {
    pub seq: u64,
    bytes: Vec<u8>,
}

/// Encodes the committed state as a snapshot file. This is the only part that needs the
/// state: it copies each row's stored encoding into one buffer, which is cheaper than cloning
/// the state (an allocation per row, and as many frees later). A state over 4 GiB encoded
/// does not fit the file's one frame and is refused (recovery then replays the binlog).
pub fn encode(st: &State) -> Result<Encoded> {
    let data = SnapshotOut {
        last_seq: st.last_seq,
        next_table_id: st.next_table_id,
        databases: st.databases.iter().map(String::as_str).collect(),
        tables: st
            .tables
            .values()
            .map(|t| (&t.def, StoredRows(t)))
            .collect(),
    };
    let mut bytes = Vec::new();
    write_frame_with(&mut bytes, |p| binlog_format::codec::encode_into(&data, p))?;
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

/// The newest snapshot that reads back whole, if any.
pub fn load_newest(dir: &Path) -> Result<Option<State>> {
    let sdir = snapshot_dir(dir);
    let mut all = list(&sdir)?;
    all.sort_unstable_by(|a, b| b.cmp(a));
    for seq in all {
        let bytes = fs::read(sdir.join(name(seq)))?;
        let FrameScan::Frame { payload, len } = scan_frame(&bytes, u32::MAX) else {
            continue;
        };
        if len != bytes.len() {
            continue;
        }
        let Ok(data) = binlog_format::codec::decode::<SnapshotData>(payload) else {
            continue;
        };
        let mut st = State {
            next_table_id: data.next_table_id,
            last_seq: data.last_seq,
            ..Default::default()
        };
        st.databases = data.databases.into_iter().collect();
        for (def, rows) in data.tables {
            st.tables.insert(def.id, Table::with_rows(def, rows));
        }
        return Ok(Some(st));
    }
    Ok(None)
}
