//! Positions in the MySQL encoding of the binlog (the one CDC tools read,
//! [`crate::mysql_binlog`]): where each transaction of a segment is in the MySQL file
//! of the same name, found by encoding the segment from its start. The server's stream starts
//! a client there (`COM_BINLOG_DUMP` with a file and position), and SHOW BINARY LOGS and SHOW
//! BINARY LOG STATUS give sizes and positions in the same terms, so what a tool stores from
//! either resumes where it should.
//!
//! This module reads binlog directories and knows nothing of the engine: the engine's side
//! (where its binlog is, its server id, which events are the node's own) comes in a
//! [`NodeBinlog`], and errors are MySQL's error numbers in a [`PositionError`].

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::mysql_binlog::{rotate_len, Encoder, EventWriter, FILE_START, FORMAT_DESCRIPTION_LEN};
use binlog_format::segment::{list_segments, parse_segment_name, segment_name};
use binlog_format::{BinlogReader, DdlEvent, Event, ReaderOptions, Record, Schema};

/// Which events are the node's own bookkeeping, never sent to MySQL-protocol clients. The
/// engine says (its `SYSTEM_DB` and `is_node_local_event`); this crate does not depend on it.
#[derive(Debug, Clone, Copy)]
pub struct NodeOwn {
    /// The schema of the node's system tables (`mysql`).
    pub system_db: &'static str,
    /// Whether an event is node-local (the id range of node-local tables, a DROP of the
    /// system schema).
    pub node_local: fn(&Event) -> bool,
}

/// A node's binlog as MySQL-protocol clients see it.
#[derive(Debug, Clone)]
pub struct NodeBinlog {
    /// The binlog directory (its segments and index).
    pub dir: PathBuf,
    /// The node's server id, in the events it adds itself (FORMAT_DESCRIPTION, ROTATE).
    pub server_id: u32,
    /// Which events are the node's own.
    pub own: NodeOwn,
}

/// MySQL's error 1236, ER_MASTER_FATAL_ERROR_READING_BINLOG.
pub const ER_MASTER_FATAL_ERROR_READING_BINLOG: u16 = 1236;
/// MySQL's error 1220, ER_ERROR_WHEN_EXECUTING_COMMAND.
pub const ER_ERROR_WHEN_EXECUTING_COMMAND: u16 = 1220;
/// MySQL's error 1105, ER_UNKNOWN_ERROR (a binlog that cannot be read).
pub const ER_UNKNOWN_ERROR: u16 = 1105;

/// Why a position or a file's events could not be given, as the MySQL error a client is
/// sent (SQLSTATE `HY000` for all of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionError {
    /// MySQL's error number: [`ER_MASTER_FATAL_ERROR_READING_BINLOG`],
    /// [`ER_ERROR_WHEN_EXECUTING_COMMAND`] or [`ER_UNKNOWN_ERROR`].
    pub code: u16,
    /// The SQLSTATE that goes with it.
    pub sqlstate: &'static str,
    /// The message text.
    pub message: String,
}

impl PositionError {
    fn new(code: u16, message: impl Into<String>) -> PositionError {
        PositionError {
            code,
            sqlstate: "HY000",
            message: message.into(),
        }
    }

    fn internal(message: impl Into<String>) -> PositionError {
        PositionError::new(ER_UNKNOWN_ERROR, message)
    }
}

impl fmt::Display for PositionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.sqlstate, self.message)
    }
}

impl std::error::Error for PositionError {}

/// What this module's functions return.
pub type Result<T> = std::result::Result<T, PositionError>;

type Error = PositionError;

/// Whether an event is the node's own (its system schema, its node-local tables), which
/// MySQL-protocol clients are not sent. `system_tables` are the ids of tables in the system
/// schema.
pub fn is_system(ev: &Event, own: &NodeOwn, system_tables: &HashSet<u64>) -> bool {
    let mysql = |db: &str| db.eq_ignore_ascii_case(own.system_db);
    if (own.node_local)(ev) {
        return true;
    }
    match ev {
        Event::Row(r) => system_tables.contains(&r.table_id),
        Event::Ddl(d) => match d {
            DdlEvent::CreateDatabase { name } | DdlEvent::DropDatabase { name } => mysql(name),
            DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table } => {
                mysql(&table.database)
            }
            DdlEvent::DropTable { database, .. } => mysql(database),
            DdlEvent::TruncateTable { table_id } => system_tables.contains(table_id),
        },
    }
}

/// The ids of the system schema's tables as of `schema` and `tx`'s own CREATEs.
pub fn system_tables(
    schema: &Schema,
    tx: &binlog_format::Transaction,
    own: &NodeOwn,
) -> HashSet<u64> {
    let mut ids: HashSet<u64> = schema
        .tables
        .values()
        .filter(|t| t.database.eq_ignore_ascii_case(own.system_db))
        .map(|t| t.id)
        .collect();
    for ev in &tx.events {
        if let Event::Ddl(DdlEvent::CreateTable { table }) = ev {
            if table.database.eq_ignore_ascii_case(own.system_db) {
                ids.insert(table.id);
            }
        }
    }
    ids
}

/// The events a MySQL-protocol client gets for `tx`, from `start`, and the position after
/// them (the node's own events left out); `schema` moves past the transaction.
pub fn encode(
    encoder: &Encoder,
    own: &NodeOwn,
    schema: &mut Schema,
    tx: &binlog_format::Transaction,
    start: u64,
) -> (Vec<Vec<u8>>, u64) {
    let system = system_tables(schema, tx, own);
    encoder.transaction(schema, tx, start, &|e| !is_system(e, own, &system))
}

/// Where a position is in a segment: the transaction that starts there (or that holds it,
/// started again from its beginning), the schema before it and its MySQL position.
#[derive(Debug, Clone)]
pub struct Start {
    /// The segment number.
    pub segment: u64,
    /// The transaction to send first.
    pub seq: u64,
    /// The schema before it.
    pub schema: Schema,
    /// Its position in the MySQL file.
    pub pos: u64,
}

fn sizing_encoder() -> Encoder {
    // Only the sizes matter here; the server id and version do not change them.
    Encoder {
        writer: EventWriter {
            server_id: 1,
            checksum: true,
            server_version: String::new(),
        },
    }
}

/// What a segment's MySQL layout comes to: where `pos` starts (when asked) and where the
/// file's transactions end.
struct Scan {
    start: Option<Start>,
    end: u64,
    schema: Schema,
    next_seq: u64,
}

/// A reader of one segment file (sequence gaps are not this walk's business).
fn open_segment(path: &Path) -> Result<BinlogReader> {
    BinlogReader::open(
        path,
        ReaderOptions {
            check_sequence: false,
            ..Default::default()
        },
    )
    .map_err(|e| Error::internal(e.to_string()))
}

/// The schema a segment starts with, from its header.
fn header_schema(reader: &BinlogReader) -> Schema {
    reader
        .current_header()
        .map(|h| Schema::from_header(&h.databases, &h.tables))
        .unwrap_or_default()
}

fn scan(path: &Path, own: &NodeOwn, segment: u64, want: Option<u64>) -> Result<Scan> {
    let mut reader = open_segment(path)?;
    let encoder = sizing_encoder();
    let mut schema: Option<Schema> = None;
    let mut pos = FILE_START + FORMAT_DESCRIPTION_LEN;
    let mut next_seq = None;
    while let Some(item) = reader.next() {
        let (_, record) = item.map_err(|e| Error::internal(e.to_string()))?;
        let schema = schema.get_or_insert_with(|| header_schema(&reader));
        let Record::Transaction(tx) = record else {
            continue;
        };
        let before = schema.clone();
        let (_, end) = encode(&encoder, own, schema, &tx, pos);
        // The transaction that starts at `want` or holds it (a position inside one starts it
        // again: tools resume from transactions).
        if let Some(w) = want {
            if end > pos && w < end {
                return Ok(Scan {
                    start: Some(Start {
                        segment,
                        seq: tx.seq,
                        schema: before,
                        pos,
                    }),
                    end,
                    schema: schema.clone(),
                    next_seq: tx.seq + 1,
                });
            }
        }
        pos = end;
        next_seq = Some(tx.seq + 1);
    }
    let schema = schema.unwrap_or_else(|| header_schema(&reader));
    let header = reader.current_header();
    let next_seq = next_seq
        .or_else(|| header.map(|h| h.first_seq))
        .unwrap_or(1);
    // Past the file's last transaction: the next one, wherever it is written.
    let start = want.map(|_| Start {
        segment,
        seq: next_seq,
        schema: schema.clone(),
        pos,
    });
    Ok(Scan {
        start,
        end: pos,
        schema,
        next_seq,
    })
}

fn fatal(why: String) -> Error {
    Error::new(ER_MASTER_FATAL_ERROR_READING_BINLOG, why)
}

/// Finds `(file, pos)` in the binlog: the transaction to start with. An empty file name is
/// the oldest file; a file the binlog does not have, or a position past a file's end, is
/// MySQL's 1236.
pub fn locate(binlog: &NodeBinlog, file: &str, pos: u64) -> Result<Start> {
    let dir = &binlog.dir;
    let segments = list_segments(dir).map_err(|e| Error::internal(e.to_string()))?;
    let segment = if file.is_empty() {
        *segments
            .first()
            .ok_or_else(|| fatal("Binary log is not open".into()))?
    } else {
        parse_segment_name(file)
            .filter(|n| segments.contains(n))
            .ok_or_else(|| {
                fatal(format!(
                    "Could not find first log file name in binary log index file (asked for '{file}')"
                ))
            })?
    };
    let sealed = segments.last() != Some(&segment);
    let s = scan(
        &dir.join(segment_name(segment)),
        &binlog.own,
        segment,
        Some(pos),
    )?;
    let size = s.end
        + if sealed {
            rotate_len(&segment_name(segment + 1))
        } else {
            0
        };
    if pos > size {
        return Err(fatal(format!(
            "Client requested source to start replication from position > file size (position {pos}, {} is {size} bytes)",
            segment_name(segment)
        )));
    }
    Ok(s.start.unwrap_or(Start {
        segment,
        seq: s.next_seq,
        schema: s.schema,
        pos: s.end,
    }))
}

/// A full segment: its binlog folder, number and ringrep size.
type SealedKey = (std::path::PathBuf, u64, u64);

/// MySQL sizes of full segments: they never change.
static SEALED: Mutex<Option<HashMap<SealedKey, u64>>> = Mutex::new(None);

/// The MySQL size of segment `segment`: its transactions' events after the magic number and
/// FORMAT_DESCRIPTION, and the ROTATE that ends a full file (`sealed`).
pub fn file_size(binlog: &NodeBinlog, segment: u64, sealed: bool) -> Result<u64> {
    let dir = &binlog.dir;
    let path = dir.join(segment_name(segment));
    let len = std::fs::metadata(&path)
        .map_err(|e| Error::internal(e.to_string()))?
        .len();
    let key = (dir.clone(), segment, len);
    if sealed {
        if let Some(&size) = SEALED
            .lock()
            .ok()
            .and_then(|c| c.as_ref().and_then(|m| m.get(&key).copied()))
            .as_ref()
        {
            return Ok(size);
        }
    }
    let end = scan(&path, &binlog.own, segment, None)?.end;
    let size = end
        + if sealed {
            rotate_len(&segment_name(segment + 1))
        } else {
            0
        };
    if sealed {
        if let Ok(mut c) = SEALED.lock() {
            c.get_or_insert_with(HashMap::new).insert(key, size);
        }
    }
    Ok(size)
}

/// SHOW BINARY LOGS in MySQL's terms: each file's name and MySQL size. `files` are the
/// binlog's file names, oldest first (the engine lists them); all but the last are full.
pub fn binary_logs(binlog: &NodeBinlog, files: Vec<String>) -> Result<Vec<(String, u64)>> {
    let last = files.len().saturating_sub(1);
    files
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let segment = parse_segment_name(&name).unwrap_or(0);
            Ok((name, file_size(binlog, segment, i != last)?))
        })
        .collect()
}

/// One row of SHOW BINLOG EVENTS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// The file.
    pub log_name: String,
    /// Where the event starts.
    pub pos: u64,
    /// MySQL's name of its type (`Query`, `Table_map`, `Write_rows`, ...).
    pub event_type: &'static str,
    /// The server that wrote it.
    pub server_id: u32,
    /// Where the next one starts.
    pub end_log_pos: u64,
    /// What it is about, as MySQL describes it.
    pub info: String,
}

fn type_name(ty: u8) -> &'static str {
    use crate::mysql_binlog::event_type as t;
    match ty {
        t::QUERY => "Query",
        t::ROTATE => "Rotate",
        t::FORMAT_DESCRIPTION => "Format_desc",
        t::XID => "Xid",
        t::TABLE_MAP => "Table_map",
        t::WRITE_ROWS => "Write_rows",
        t::UPDATE_ROWS => "Update_rows",
        t::DELETE_ROWS => "Delete_rows",
        _ => "Unknown",
    }
}

/// MySQL's Info column for an event (with its CRC32 footer).
fn info(event: &[u8]) -> String {
    use crate::mysql_binlog::{event_type as t, HEADER_LEN};
    let body = &event[HEADER_LEN.min(event.len())..event.len().saturating_sub(4)];
    let u48 = |b: &[u8]| {
        let mut x = [0u8; 8];
        x[..6].copy_from_slice(&b[..6.min(b.len())]);
        u64::from_le_bytes(x)
    };
    match event.get(4).copied().unwrap_or(0) {
        t::QUERY if body.len() >= 13 => {
            let db_len = body[8] as usize;
            let status_len = u16::from_le_bytes([body[11], body[12]]) as usize;
            let at = 13 + status_len + db_len + 1;
            let sql = String::from_utf8_lossy(body.get(at..).unwrap_or(&[])).into_owned();
            let db = String::from_utf8_lossy(
                body.get(13 + status_len..13 + status_len + db_len)
                    .unwrap_or(&[]),
            )
            .into_owned();
            if db.is_empty() {
                sql
            } else {
                format!("use `{db}`; {sql}")
            }
        }
        t::TABLE_MAP if body.len() > 9 => {
            let db_len = body[8] as usize;
            let db = String::from_utf8_lossy(body.get(9..9 + db_len).unwrap_or(&[])).into_owned();
            let at = 9 + db_len + 1;
            let name_len = body.get(at).copied().unwrap_or(0) as usize;
            let name = String::from_utf8_lossy(body.get(at + 1..at + 1 + name_len).unwrap_or(&[]))
                .into_owned();
            format!("table_id: {} ({db}.{name})", u48(body))
        }
        t::WRITE_ROWS | t::UPDATE_ROWS | t::DELETE_ROWS if body.len() >= 8 => {
            let end = u16::from_le_bytes([body[6], body[7]]) & 1 == 1;
            format!(
                "table_id: {}{}",
                u48(body),
                if end { " flags: STMT_END_F" } else { "" }
            )
        }
        t::XID if body.len() >= 8 => {
            let mut x = [0u8; 8];
            x.copy_from_slice(&body[..8]);
            format!("COMMIT /* xid={} */", u64::from_le_bytes(x))
        }
        _ => String::new(),
    }
}

/// SHOW BINLOG EVENTS [IN file] [FROM pos]: the MySQL events of a file (the first by
/// default) from an event's start, at most `limit` of them after skipping `offset`.
/// `server_version` is what the FORMAT_DESCRIPTION row names.
pub fn binlog_events(
    binlog: &NodeBinlog,
    server_version: &str,
    file: Option<&str>,
    from: u64,
    offset: usize,
    limit: Option<usize>,
) -> Result<Vec<EventRow>> {
    let dir = &binlog.dir;
    let segments = list_segments(dir).map_err(|e| Error::internal(e.to_string()))?;
    let segment = match file {
        None => *segments
            .first()
            .ok_or_else(|| fatal("Binary log is not open".into()))?,
        Some(f) => parse_segment_name(f)
            .filter(|n| segments.contains(n))
            .ok_or_else(|| {
                Error::new(
                    ER_ERROR_WHEN_EXECUTING_COMMAND,
                    "Error when executing command SHOW BINLOG EVENTS: Could not find target log",
                )
            })?,
    };
    let name = segment_name(segment);
    let server_id = binlog.server_id;
    let encoder = sizing_encoder();
    let mut rows = vec![EventRow {
        log_name: name.clone(),
        pos: FILE_START,
        event_type: "Format_desc",
        server_id,
        end_log_pos: FILE_START + FORMAT_DESCRIPTION_LEN,
        info: format!("Server ver: {server_version}, Binlog ver: 4"),
    }];
    let mut reader = open_segment(&dir.join(&name))?;
    let mut schema: Option<Schema> = None;
    let mut pos = FILE_START + FORMAT_DESCRIPTION_LEN;
    while let Some(item) = reader.next() {
        let (_, record) = item.map_err(|e| Error::internal(e.to_string()))?;
        let schema = schema.get_or_insert_with(|| header_schema(&reader));
        let Record::Transaction(tx) = record else {
            continue;
        };
        let (events, end) = encode(&encoder, &binlog.own, schema, &tx, pos);
        for e in events {
            let size = e.len() as u64;
            rows.push(EventRow {
                log_name: name.clone(),
                pos,
                event_type: type_name(e[4]),
                server_id: tx.server_id,
                end_log_pos: pos + size,
                info: info(&e),
            });
            pos += size;
        }
        debug_assert_eq!(pos, end);
    }
    if segments.last() != Some(&segment) {
        let next = segment_name(segment + 1);
        rows.push(EventRow {
            log_name: name.clone(),
            pos,
            event_type: "Rotate",
            server_id,
            end_log_pos: pos + rotate_len(&next),
            info: format!("{next};pos=4"),
        });
    }
    if from > FILE_START && !rows.iter().any(|r| r.pos == from) {
        return Err(Error::new(
            ER_ERROR_WHEN_EXECUTING_COMMAND,
            "Error when executing command SHOW BINLOG EVENTS: Wrong offset or I/O error",
        ));
    }
    Ok(rows
        .into_iter()
        .filter(|r| r.pos >= from)
        .skip(offset)
        .take(limit.unwrap_or(usize::MAX))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::{
        BinlogWriter, Cause, RowChange, RowEvent, SyncPolicy, Transaction, Value, WriterOptions,
    };

    /// The engine's rule, as the tests need it: node-local tables have ids from 2^62.
    fn node_local(ev: &Event) -> bool {
        matches!(ev, Event::Row(r) if r.table_id >= 1 << 62)
    }

    fn tx(seq: u64, events: Vec<Event>) -> Record {
        Record::Transaction(Transaction {
            server_id: 1,
            seq,
            commit_time_us: 1_700_000_000_000_000 + seq as i64,
            origin: None,
            events,
        })
    }

    fn insert(table_id: u64, a: i64, b: &str) -> Event {
        Event::Row(RowEvent {
            table_id,
            change: RowChange::Write {
                row: vec![
                    Value::Int(a),
                    Value::Int(1),
                    Value::Null,
                    Value::Timestamp(1_700_000_000_000_000),
                    Value::Text(b.into()),
                ],
            },
            cause: Cause::Insert,
        })
    }

    #[test]
    fn positions_name_transactions_as_tools_store_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let binlog = NodeBinlog {
            dir: dir.path().to_path_buf(),
            server_id: 1,
            own: NodeOwn {
                system_db: "mysql",
                node_local,
            },
        };
        let table = binlog_format::events::samples::table();
        let (writer, _) = BinlogWriter::open(
            dir.path(),
            WriterOptions {
                sync: SyncPolicy::Never,
                ..WriterOptions::new(1)
            },
        )
        .expect("writer");
        for record in [
            tx(
                1,
                vec![
                    Event::Ddl(DdlEvent::CreateDatabase {
                        name: table.database.clone(),
                    }),
                    Event::Ddl(DdlEvent::CreateTable {
                        table: table.clone(),
                    }),
                ],
            ),
            // The node's own bookkeeping: nothing for MySQL-protocol clients.
            tx(2, vec![insert(1 << 62, 1, "own")]),
            tx(3, vec![insert(table.id, 1, "x")]),
            tx(4, vec![insert(table.id, 2, "y")]),
        ] {
            writer.append_commit(&record).expect("append");
        }
        let last = 4;
        let first = locate(&binlog, "binlog.000001", FILE_START).expect("start");
        assert_eq!(first.pos, FILE_START + FORMAT_DESCRIPTION_LEN);
        assert!(first.schema.tables.is_empty());
        // Walk the transactions: each one's start is the one before's end.
        let encoder = sizing_encoder();
        let mut schema = first.schema.clone();
        let mut at = first.pos;
        let path = dir.path().join(segment_name(1));
        let mut starts = Vec::new();
        for item in BinlogReader::open(&path, ReaderOptions::default()).expect("reader") {
            if let (_, Record::Transaction(tx)) = item.expect("record") {
                let (events, end) = encode(&encoder, &binlog.own, &mut schema, &tx, at);
                if !events.is_empty() {
                    starts.push((tx.seq, at, end));
                }
                at = end;
            }
        }
        assert_eq!(
            starts.iter().map(|s| s.0).collect::<Vec<_>>(),
            vec![1, 3, 4],
            "the node's own transaction has no events"
        );
        let (seq, start, end) = *starts.last().expect("the inserts");
        assert_eq!(seq, last);
        let found = locate(&binlog, "binlog.000001", start).expect("at a start");
        assert_eq!((found.seq, found.pos), (last, start));
        assert!(found.schema.tables.values().any(|t| t.name == table.name));
        let inside = locate(&binlog, "binlog.000001", start + 10).expect("inside");
        assert_eq!((inside.seq, inside.pos), (last, start));
        let past = locate(&binlog, "binlog.000001", end).expect("the end");
        assert_eq!((past.seq, past.pos), (last + 1, end));
        // SHOW BINARY LOG STATUS's position is that end.
        assert_eq!(file_size(&binlog, 1, false).expect("size"), end);
        assert_eq!(
            locate(&binlog, "binlog.000001", end + 1)
                .err()
                .map(|e| e.code),
            Some(1236)
        );
        assert_eq!(
            locate(&binlog, "binlog.000042", 4).err().map(|e| e.code),
            Some(1236)
        );
        assert_eq!(locate(&binlog, "", 4).map(|s| s.segment).ok(), Some(1));
        // SHOW BINLOG EVENTS: the file's format, then each event where the walk put it.
        let rows = binlog_events(&binlog, "8.0.40", None, 0, 0, None).expect("events");
        assert_eq!(rows[0].event_type, "Format_desc");
        assert_eq!(rows[0].info, "Server ver: 8.0.40, Binlog ver: 4");
        assert_eq!(rows.last().map(|r| r.end_log_pos), Some(end));
        let from = binlog_events(&binlog, "8.0.40", Some("binlog.000001"), start, 0, Some(1))
            .expect("from a start");
        assert_eq!((from.len(), from[0].event_type), (1, "Query"));
        assert_eq!(
            binlog_events(&binlog, "8.0.40", None, start + 1, 0, None)
                .err()
                .map(|e| e.code),
            Some(ER_ERROR_WHEN_EXECUTING_COMMAND)
        );
        // A full file ends with its ROTATE.
        writer.rotate_now().expect("flush");
        assert_eq!(
            file_size(&binlog, 1, true).expect("sealed"),
            end + rotate_len("binlog.000002")
        );
        assert_eq!(
            binary_logs(
                &binlog,
                vec!["binlog.000001".into(), "binlog.000002".into()]
            )
            .expect("logs"),
            vec![
                (
                    "binlog.000001".to_string(),
                    end + rotate_len("binlog.000002")
                ),
                (
                    "binlog.000002".to_string(),
                    FILE_START + FORMAT_DESCRIPTION_LEN
                )
            ]
        );
    }
}
