//! The replication stream in MySQL's encoding, for MySQL replicas' protocol as CDC tools speak
//! it (Debezium, Maxwell, Canal, go-mysql, python-mysql-replication, ZongJi): COM_BINLOG_DUMP
//! with a binlog file name and position, answered with binlog v4 events
//! ([`binlog_format::mysql_binlog`]).
//!
//! The client names where to start as MySQL's do: a file of `SHOW BINARY LOGS` (ringrep's
//! segment names) and a position in it (4, the start of a file, or a position an event of this
//! stream carried, which is where the next transaction starts; a position inside a
//! transaction starts that transaction again). An empty file name starts at the oldest file.
//! The stream begins with an artificial ROTATE naming the file and position and a
//! FORMAT_DESCRIPTION, sends every durable transaction from there (a ROTATE and a new
//! FORMAT_DESCRIPTION where a file ends), and heartbeats when idle
//! (`SET @master_heartbeat_period`, in nanoseconds; 30 s otherwise). Events end with a CRC32
//! when the client announced it reads them (`SET @master_binlog_checksum =
//! @@global.binlog_checksum`). With BINLOG_DUMP_NON_BLOCK the stream ends with EOF once it
//! caught up. The node's own bookkeeping (the `mysql` schema) is not sent.

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use binlog_format::mysql_binlog::{Encoder, EventWriter};
use binlog_format::segment::{parse_segment_name, segment_name};
use binlog_format::{BinlogReader, DdlEvent, Event, Position, ReaderOptions, Record, Schema};
use tokio::io::{AsyncRead, AsyncWrite};

use super::stream::{pump, start_reader, Encode, Pumping, Streaming};
use super::Shared;
use ringrep_engine::error::{code, Error};
use ringrep_protocol::Packets;

/// MySQL's default heartbeat period (half of `replica_net_timeout`).
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(30);

/// `BIN_LOG_HEADER_SIZE`: where the first event of a MySQL binlog file is.
const FILE_START: u64 = 4;

/// A MySQL replica's COM_BINLOG_DUMP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MysqlDump {
    /// The binlog file to start in; empty for the oldest.
    pub(crate) file: String,
    /// The position in it.
    pub(crate) pos: u64,
    /// BINLOG_DUMP_NON_BLOCK: end with EOF once caught up instead of waiting.
    pub(crate) non_block: bool,
    /// The replica's server id.
    pub(crate) replica_id: u32,
}

/// What the client set on its session before asking (MySQL's replica protocol).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientSettings {
    /// `@master_binlog_checksum` set to something other than NONE.
    pub(crate) checksum: bool,
    /// `@master_heartbeat_period`; `None`: the default.
    pub(crate) heartbeat: Option<Duration>,
}

/// Where a dump starts: the transaction, and the schema before it.
struct Start {
    segment: u64,
    seq: u64,
    schema: Schema,
    /// The position in the file the stream stands at (the one asked, or where the
    /// transaction that covers it starts).
    pos: u64,
}

fn not_there(why: String) -> Error {
    Error::new(code::ER_MASTER_FATAL_ERROR_READING_BINLOG, why)
}

/// Finds where `(file, pos)` is in the binlog (blocking: reads the file up to there).
fn locate(engine: &ringrep_engine::Engine, file: &str, pos: u64) -> Result<Start, Error> {
    let dir = engine.binlog_dir();
    let segments =
        binlog_format::segment::list_segments(&dir).map_err(|e| Error::internal(e.to_string()))?;
    let segment = if file.is_empty() {
        *segments
            .first()
            .ok_or_else(|| not_there("Binary log is not open".into()))?
    } else {
        parse_segment_name(file)
            .filter(|n| segments.contains(n))
            .ok_or_else(|| {
                not_there(format!(
                    "Could not find first log file name in binary log index file (asked for '{file}')"
                ))
            })?
    };
    let path = dir.join(segment_name(segment));
    let len = std::fs::metadata(&path)
        .map_err(|e| Error::internal(e.to_string()))?
        .len();
    if pos > len {
        return Err(not_there(format!(
            "Client requested source to start replication from position > file size (position {pos}, {} is {len} bytes)",
            segment_name(segment)
        )));
    }
    scan_segment(&path, segment, pos, len)
}

/// Scans segment file `path` (`len` bytes) for where position `pos` starts.
fn scan_segment(path: &Path, segment: u64, pos: u64, len: u64) -> Result<Start, Error> {
    let mut reader = BinlogReader::open(
        path,
        ReaderOptions {
            check_sequence: false,
            ..Default::default()
        },
    )
    .map_err(|e| Error::internal(e.to_string()))?;
    let mut schema = None;
    let mut next_seq = None;
    // The transaction read last: where it starts, its seq, the schema before it.
    let mut last: Option<(u64, u64, Schema)> = None;
    while let Some(item) = reader.next() {
        let (at, record) = item.map_err(|e| Error::internal(e.to_string()))?;
        let schema = schema.get_or_insert_with(|| {
            reader
                .current_header()
                .map(|h| Schema::from_header(&h.databases, &h.tables))
                .unwrap_or_default()
        });
        let Record::Transaction(tx) = record else {
            continue;
        };
        if at.offset >= pos {
            // `pos` is this transaction, or inside the one before it: start that one again.
            return Ok(match last {
                Some((start, seq, before)) if pos > start && pos < at.offset => Start {
                    segment,
                    seq,
                    schema: before,
                    pos: start,
                },
                _ => Start {
                    segment,
                    seq: tx.seq,
                    schema: schema.clone(),
                    pos: pos.max(FILE_START),
                },
            });
        }
        let before = schema.clone();
        for ev in &tx.events {
            if let Event::Ddl(d) = ev {
                schema.apply(d);
            }
        }
        next_seq = Some(tx.seq + 1);
        last = Some((at.offset, tx.seq, before));
    }
    // Inside the file's last transaction: that one again.
    if let Some((start, seq, before)) = last.filter(|(start, _, _)| pos > *start && pos < len) {
        return Ok(Start {
            segment,
            seq,
            schema: before,
            pos: start,
        });
    }
    let header = reader.current_header();
    let schema = schema.unwrap_or_else(|| {
        header
            .map(|h| Schema::from_header(&h.databases, &h.tables))
            .unwrap_or_default()
    });
    // Past the file's last transaction: the next one, wherever it is written.
    let seq = next_seq
        .or_else(|| header.map(|h| h.first_seq))
        .unwrap_or(1);
    Ok(Start {
        segment,
        seq,
        schema,
        pos: pos.max(FILE_START),
    })
}

/// Whether an event is the node's own (its `mysql` schema, its node-local tables).
fn system(ev: &Event, system_tables: &HashSet<u64>) -> bool {
    let mysql = |db: &str| db.eq_ignore_ascii_case(ringrep_engine::SYSTEM_DB);
    if ringrep_engine::is_node_local_event(ev) {
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

/// The MySQL encoding on the stream's reading thread: the schema as of the transaction being
/// encoded, and the file the client was last told it is in.
struct MysqlEncoding {
    encoder: Encoder,
    schema: Schema,
    segment: u64,
    /// Where the stream stands (segment, position), for heartbeats.
    at: Arc<Mutex<(u64, u64)>>,
    /// The binlog folder (a ROTATE names where the old file ended).
    dir: std::path::PathBuf,
}

/// A stream packet: the OK byte, then the event.
fn packet(event: Vec<u8>) -> Vec<u8> {
    let mut p = Vec::with_capacity(event.len() + 1);
    p.push(0);
    p.extend_from_slice(&event);
    p
}

impl Encode for MysqlEncoding {
    fn transaction(
        &mut self,
        at: Position,
        end: Position,
        tx: binlog_format::Transaction,
    ) -> Result<Vec<Vec<u8>>, Error> {
        let mut out = Vec::new();
        if at.segment != self.segment {
            // The file ended: where the stream goes on, and the new file's format.
            let w = &self.encoder.writer;
            let from_end = std::fs::metadata(self.dir_file(self.segment))
                .map_or(0, |m| m.len().min(u64::from(u32::MAX)) as u32);
            out.push(packet(w.rotate(
                &segment_name(at.segment),
                FILE_START,
                false,
                from_end,
            )));
            out.push(packet(w.format_description(0, 0)));
            self.segment = at.segment;
        }
        let mut system_tables: HashSet<u64> = self
            .schema
            .tables
            .values()
            .filter(|t| t.database.eq_ignore_ascii_case(ringrep_engine::SYSTEM_DB))
            .map(|t| t.id)
            .collect();
        for ev in &tx.events {
            if let Event::Ddl(DdlEvent::CreateTable { table }) = ev {
                if table
                    .database
                    .eq_ignore_ascii_case(ringrep_engine::SYSTEM_DB)
                {
                    system_tables.insert(table.id);
                }
            }
        }
        let keep = |e: &Event| !system(e, &system_tables);
        let events = self
            .encoder
            .transaction(&mut self.schema, &tx, at.offset, end.offset, &keep);
        out.extend(events.into_iter().map(packet));
        if let Ok(mut a) = self.at.lock() {
            *a = (end.segment, end.offset);
        }
        Ok(out)
    }
}

impl MysqlEncoding {
    fn dir_file(&self, segment: u64) -> std::path::PathBuf {
        self.dir.join(segment_name(segment))
    }
}

/// Streams MySQL binlog events to the client from where it asked until the connection ends
/// (or, with NON_BLOCK, until it caught up).
pub(crate) async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send>(
    shared: &Arc<Shared>,
    packets: &mut Packets<S>,
    req: MysqlDump,
    settings: ClientSettings,
    (conn_id, peer): (u32, std::net::SocketAddr),
    kill: Option<Arc<super::processes::Kill>>,
) -> io::Result<()> {
    let engine = shared.engine.clone();
    let e = engine.clone();
    let (file, pos) = (req.file.clone(), req.pos);
    let start = tokio::task::spawn_blocking(move || locate(&e, &file, pos))
        .await
        .map_err(io::Error::other)?;
    let start = match start {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(
                connection = conn_id,
                replica = req.replica_id,
                "{}",
                e.message
            );
            packets.write(&super::wire::error(&e)).await?;
            return packets.flush().await;
        }
    };
    let hold = engine.hold_binlog(start.seq);
    let writer = EventWriter {
        server_id: engine.config().server_id,
        checksum: settings.checksum,
        server_version: super::conn::version(),
    };
    let file = segment_name(start.segment);
    // Where the client is: an artificial ROTATE, then the file's format.
    packets
        .write(&packet(writer.rotate(&file, start.pos, true, 0)))
        .await?;
    packets
        .write(&packet(writer.format_description(0, 0)))
        .await?;
    packets.flush().await?;
    if let Ok(mut r) = shared.replicas.lock() {
        r.insert(
            conn_id,
            Streaming {
                server_id: req.replica_id,
                peer,
                sent_seq: start.seq.saturating_sub(1),
            },
        );
    }
    let _registered = super::stream::Registered(shared, conn_id);
    tracing::info!(
        connection = conn_id,
        replica = req.replica_id,
        file = %file,
        position = start.pos,
        from_seq = start.seq,
        checksum = settings.checksum,
        "MySQL-protocol client streaming binlog events"
    );
    let at = Arc::new(Mutex::new((start.segment, start.pos)));
    let encoding = MysqlEncoding {
        encoder: Encoder {
            writer: writer.clone(),
        },
        schema: start.schema,
        segment: start.segment,
        at: at.clone(),
        dir: engine.binlog_dir(),
    };
    let rx = start_reader(
        &engine,
        start.seq,
        Box::new(encoding),
        req.non_block,
        conn_id,
    )?;
    let every = match settings.heartbeat {
        // 0 turns heartbeats off in MySQL; a day stands for never.
        Some(d) if d.is_zero() => Duration::from_secs(86_400),
        Some(d) => d.max(Duration::from_millis(1)),
        None => DEFAULT_HEARTBEAT,
    };
    pump(
        shared,
        packets,
        rx,
        Pumping {
            conn_id,
            kill,
            hold: &hold,
            every,
        },
        &mut || {
            let (segment, pos) = at.lock().map(|a| *a).unwrap_or((start.segment, start.pos));
            Ok(packet(writer.heartbeat(
                &segment_name(segment),
                pos.min(u64::from(u32::MAX)) as u32,
            )))
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::SyncPolicy;
    use ringrep_engine::{Engine, EngineConfig};

    /// The offsets of the transactions in segment 1, by seq.
    fn offsets(path: &Path) -> Vec<(u64, u64)> {
        BinlogReader::open(path, ReaderOptions::default())
            .expect("reader")
            .filter_map(|r| match r.expect("record") {
                (at, Record::Transaction(t)) => Some((t.seq, at.offset)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn positions_name_transactions_as_a_client_stores_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = EngineConfig::new(1);
        cfg.sync = SyncPolicy::Never;
        let (engine, _) = Engine::open(dir.path(), cfg).expect("engine");
        let mut s = ringrep_sql::SqlSession::new(&engine);
        for sql in [
            "CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR(10))",
            "INSERT INTO t VALUES (1, 'x')",
            "INSERT INTO t VALUES (2, 'y')",
        ] {
            s.execute(sql).expect(sql);
        }
        let path = engine.binlog_dir().join(segment_name(1));
        let txs = offsets(&path);
        let (last_seq, last_at) = *txs.last().expect("transactions");
        let len = std::fs::metadata(&path).expect("segment").len();
        // The start of the file: its first transaction.
        let start = scan_segment(&path, 1, FILE_START, len).expect("scan");
        assert_eq!((start.seq, start.pos), (txs[0].0, FILE_START));
        assert!(start.schema.tables.is_empty());
        // Where a transaction starts (the position the one before it ended with): that one,
        // with the schema the CREATE before it made.
        let at = scan_segment(&path, 1, last_at, len).expect("scan");
        assert_eq!((at.seq, at.pos), (last_seq, last_at));
        assert!(at.schema.tables.values().any(|t| t.name == "t"));
        // Inside it: that transaction again, from its start.
        let inside = scan_segment(&path, 1, last_at + 2, len).expect("scan");
        assert_eq!((inside.seq, inside.pos), (last_seq, last_at));
        // The end of the file: the next transaction, wherever it will be written.
        let end = scan_segment(&path, 1, len, len).expect("scan");
        assert_eq!((end.seq, end.pos), (last_seq + 1, len));
        // Beyond the file and unknown files are MySQL's 1236.
        assert_eq!(
            locate(&engine, "binlog.000001", len + 1)
                .err()
                .map(|e| e.code),
            Some(1236)
        );
        assert_eq!(
            locate(&engine, "binlog.000042", 4).err().map(|e| e.code),
            Some(1236)
        );
        assert_eq!(locate(&engine, "", 4).map(|s| s.segment).ok(), Some(1));
    }
}
