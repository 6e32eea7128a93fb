//! Snapshots: every table's rows at one sequence number, sent as `read` records before the
//! changes after that number, so a consumer that starts from the topics gets each table from
//! its first row.
//!
//! Exactly once across a crash: the rows are taken once, written to a file of the relay's
//! (binlog frames, synced) before anything is sent, and marked begun on the schema topic
//! (`snapshot_start`); a run that finds a snapshot begun and not done reads the same rows
//! back from the file and sends them again numbered as before, so the producer skips what
//! each partition holds. Once all are acknowledged, `snapshot_end` goes to the schema topic
//! and the file is removed.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use binlog_format::events::{Cause, DdlEvent, Event, Record, RowChange, RowEvent, Transaction};
use binlog_format::frame::{scan_frame, write_frame_with, FrameScan};
use binlog_format::schema::{Schema, TableDef};
use binlog_format::{Position, Value};
use ringrep_cdc::kafka::schema::{snapshot_record, SnapshotMark};
use ringrep_cdc::kafka::{Snapshot, SourceInfo, TxPlace};
use ringrep_kafka::{kafka_error, Error, KafkaSettings, Result};

use crate::producer::Outbox;
use crate::tables::Tables;

/// Every table's rows at one sequence number.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableSnapshot {
    /// The sequence number the rows stand at: every transaction up to it, none after.
    pub seq: u64,
    /// The server whose binlog `seq` counts.
    pub server_id: u32,
    /// When the rows were taken, microseconds since the Unix epoch (the records' time).
    pub taken_us: i64,
    /// Each table with its rows (meta rows included), rows in key order.
    pub tables: Vec<(TableDef, Vec<Vec<Value>>)>,
}

/// What takes a snapshot of the node the relay follows, when asked (a primary's engine, or
/// the data directory read back); an error says why it could not.
pub type SnapshotFn = Arc<dyn Fn() -> std::result::Result<TableSnapshot, String> + Send + Sync>;

/// Rows per frame of the relay's snapshot file.
const ROWS_PER_FRAME: usize = 1024;

/// The file that keeps the snapshot at `seq` of the stream under `prefix` while it is sent.
pub(crate) fn file(dir: &Path, prefix: &str, seq: u64) -> PathBuf {
    dir.join(format!("{prefix}.snapshot.{seq}"))
}

/// A snapshot file that cannot be read back whole: no retry mends it.
fn io_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Config(format!("relay snapshot file {}: {e}", path.display()))
}

/// A snapshot file that could not be written (a full disk, an I/O error): the run is tried
/// again.
fn write_error(path: &Path, e: impl std::fmt::Display) -> Error {
    kafka_error(
        &format!("writing the relay's file {}", path.display()),
        e.to_string(),
    )
}

/// Writes `snap` to `path` (a temporary file, synced, then renamed): one frame per table's
/// definition and per [`ROWS_PER_FRAME`] rows, each a transaction record at the snapshot's
/// sequence number.
pub(crate) fn save(path: &Path, snap: &TableSnapshot) -> Result<()> {
    let mut out = Vec::new();
    let tx = |events: Vec<Event>| Transaction {
        server_id: snap.server_id,
        seq: snap.seq,
        commit_time_us: snap.taken_us,
        origin: None,
        events,
    };
    let mut frame = |t: Transaction| {
        write_frame_with(&mut out, |p| {
            binlog_format::codec::encode_transaction_record_into(&t, p)
        })
    };
    for (def, rows) in &snap.tables {
        frame(tx(vec![Event::Ddl(DdlEvent::CreateTable {
            table: def.clone(),
        })]))?;
        for chunk in rows.chunks(ROWS_PER_FRAME) {
            let events = chunk
                .iter()
                .map(|row| {
                    Event::Row(RowEvent {
                        table_id: def.id,
                        change: RowChange::Write { row: row.clone() },
                        cause: Cause::Insert,
                    })
                })
                .collect();
            frame(tx(events))?;
        }
    }
    write_synced(path, &out)
}

/// Writes `bytes` to `path` through a temporary file beside it (`<name>.part`), synced, then
/// renamed over it: a crash leaves the old file or the new one whole, never a torn one.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    let tmp = path.with_file_name(name);
    let mut f = fs::File::create(&tmp).map_err(|e| write_error(&tmp, e))?;
    f.write_all(bytes).map_err(|e| write_error(&tmp, e))?;
    f.sync_all().map_err(|e| write_error(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| write_error(path, e))?;
    Ok(())
}

/// Reads back what [`save`] wrote; a torn or corrupt file is an error naming its offset.
pub(crate) fn load(path: &Path) -> Result<TableSnapshot> {
    let bytes = fs::read(path).map_err(|e| io_error(path, e))?;
    let mut snap = TableSnapshot::default();
    let mut at = 0;
    while at < bytes.len() {
        let (payload, len) =
            match scan_frame(&bytes[at..], binlog_format::format::DEFAULT_MAX_FRAME) {
                FrameScan::Frame { payload, len } => (payload, len),
                FrameScan::Incomplete { .. } => {
                    return Err(io_error(path, format!("torn at offset {at}")))
                }
                FrameScan::Corrupt { reason, .. } => {
                    return Err(io_error(path, format!("corrupt at offset {at}: {reason}")))
                }
            };
        let Record::Transaction(tx) = binlog_format::codec::decode_record(payload)? else {
            return Err(io_error(path, format!("not a transaction at offset {at}")));
        };
        (snap.seq, snap.server_id, snap.taken_us) = (tx.seq, tx.server_id, tx.commit_time_us);
        for ev in tx.events {
            match ev {
                Event::Ddl(DdlEvent::CreateTable { table }) => snap.tables.push((table, vec![])),
                Event::Row(RowEvent {
                    change: RowChange::Write { row },
                    ..
                }) => match snap.tables.last_mut() {
                    Some((_, rows)) => rows.push(row),
                    None => return Err(io_error(path, format!("rows before a table at {at}"))),
                },
                _ => return Err(io_error(path, format!("unexpected event at offset {at}"))),
            }
        }
        at += len;
    }
    Ok(snap)
}

/// Sends `snap`: `snapshot_start` on the schema topic, every row as a `read` record (skipping
/// what the partitions hold), waits for all to be acknowledged, then `snapshot_end`. Returns
/// the rows sent (skipped ones included), or `None` when `stop` turned true first: the relay
/// then stops without the end mark, and its next run sends the snapshot on from its file.
pub(crate) async fn send(
    settings: &KafkaSettings,
    outbox: &mut Outbox,
    tables: &mut Tables,
    snap: &TableSnapshot,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Result<Option<u64>> {
    let prefix = &settings.topic_prefix;
    let rows: u64 = snap.tables.iter().map(|(_, r)| r.len() as u64).sum();
    let count = snap.tables.len() as u64;
    let mark = |m| snapshot_record(prefix, m, snap.server_id, snap.seq, count, rows);
    tables
        .announce_record(outbox, mark(SnapshotMark::Start))
        .await?;
    // The mark must be in before any row: a run that finds rows of a snapshot in a partition
    // and no mark would take them for changes and skip the changes they cover.
    outbox.drain().await?;
    let mut schema = Schema::default();
    for (def, _) in &snap.tables {
        schema.apply(&DdlEvent::CreateTable { table: def.clone() });
    }
    tables.reset(schema);
    let mut n = 0;
    for (def, table_rows) in &snap.tables {
        for row in table_rows {
            let ev = RowEvent {
                table_id: def.id,
                change: RowChange::Write { row: row.clone() },
                cause: Cause::Insert,
            };
            let src = SourceInfo {
                server_id: snap.server_id,
                seq: snap.seq,
                position: Position::default(),
                commit_time_us: snap.taken_us,
                index: 0,
                place: TxPlace::default(),
                snapshot: Snapshot::Initial,
            };
            tables
                .relay_read_row(settings, outbox, &ev, &src, n)
                .await?;
            n += 1;
            // A snapshot of millions of rows must not hold a stopping node for minutes, nor
            // one Kafka transaction open past its timeout.
            if n.is_multiple_of(ROWS_PER_FRAME as u64) {
                if *stop.borrow() {
                    return Ok(None);
                }
                outbox.boundary().await?;
            }
        }
    }
    outbox.drain().await?;
    tables
        .announce_record(outbox, mark(SnapshotMark::End))
        .await?;
    outbox.drain().await?;
    if n != rows {
        return Err(kafka_error("snapshot", format!("sent {n} of {rows} rows")));
    }
    Ok(Some(rows))
}
