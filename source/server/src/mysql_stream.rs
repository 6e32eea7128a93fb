//! The replication stream in MySQL's encoding, for MySQL replicas' protocol as CDC tools speak
//! it (Debezium, Maxwell, Canal, go-mysql, python-mysql-replication, ZongJi): COM_BINLOG_DUMP
//! with a binlog file name and position, answered with binlog v4 events
//! ([`ringrep_cdc::mysql_binlog`]).
//!
//! The client names where to start as MySQL's do: a file of `SHOW BINARY LOGS` (ringrep's
//! segment names) and a position in the MySQL encoding of that file
//! ([`ringrep_cdc::mysql_positions`]): 4, the file's start; a position an event carried, or the
//! start of one (position - size); or `SHOW BINARY LOG STATUS`'s. A position inside a
//! transaction starts that transaction again, as tools resume from transactions. An empty
//! file name starts at the oldest file. The stream begins with an artificial ROTATE naming the
//! file and position and a FORMAT_DESCRIPTION, sends every durable transaction from there (a
//! ROTATE and a new FORMAT_DESCRIPTION where a file ends), and heartbeats when idle
//! (`SET @master_heartbeat_period`, in nanoseconds; 30 s otherwise) naming the position after
//! what was sent. Events end with a CRC32 when the client announced it reads them (`SET
//! @master_binlog_checksum = @@global.binlog_checksum`). With BINLOG_DUMP_NON_BLOCK the stream
//! ends with EOF once it
//! caught up. The node's own bookkeeping (the `mysql` schema) is not sent.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use binlog_format::segment::segment_name;
use binlog_format::{Position, Schema};
use ringrep_cdc::mysql_binlog::{
    rotate_len, Encoder, EventWriter, FILE_START, FORMAT_DESCRIPTION_LEN,
};
use ringrep_cdc::mysql_positions;
use tokio::io::{AsyncRead, AsyncWrite};

use super::stream::{pump, Encode, MysqlDump, Pumping, Reader, Streaming};
use super::Shared;
use ringrep_engine::error::Error;
use ringrep_protocol::Packets;

/// MySQL's default heartbeat period (half of `replica_net_timeout`).
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(30);

/// What the client set on its session before asking (MySQL's replica protocol).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientSettings {
    /// `@master_binlog_checksum` set to something other than NONE.
    pub(crate) checksum: bool,
    /// `@master_heartbeat_period`; `None`: the default.
    pub(crate) heartbeat: Option<Duration>,
}

/// The MySQL encoding in the stream's reader: the schema as of the transaction being
/// encoded, the file the client was last told it is in, and the position in it.
struct MysqlEncoding {
    encoder: Encoder,
    schema: Schema,
    segment: u64,
    /// The MySQL position after what was encoded.
    pos: u64,
}

/// A stream packet: the OK byte, then the event.
fn packet(event: Vec<u8>) -> Vec<u8> {
    let mut p = Vec::with_capacity(event.len() + 1);
    p.push(0);
    p.extend_from_slice(&event);
    p
}

/// The timestamp of a FORMAT_DESCRIPTION the stream sends: now. MySQL sends the one its file
/// starts with, stamped when the file was created; never 0, which Debezium takes for "no
/// time" (it skips the event's time and then fails on the first QUERY event it handles).
fn format_time() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs().clamp(1, u64::from(u32::MAX)) as u32)
}

fn log_pos(pos: u64) -> u32 {
    pos.min(u64::from(u32::MAX)) as u32
}

impl Encode for MysqlEncoding {
    fn transaction(
        &mut self,
        at: Position,
        _end: Position,
        tx: binlog_format::Transaction,
        _frame: &[u8],
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        if at.segment != self.segment {
            // The file ended with a ROTATE to the next, which starts with its format.
            let w = &self.encoder.writer;
            let next = segment_name(at.segment);
            let rotated = self.pos + rotate_len(&next);
            out.push(packet(w.rotate(&next, FILE_START, false, log_pos(rotated))));
            self.pos = FILE_START + FORMAT_DESCRIPTION_LEN;
            out.push(packet(
                w.format_description(format_time(), log_pos(self.pos)),
            ));
            self.segment = at.segment;
        }
        let (events, end) = mysql_positions::encode(
            &self.encoder,
            &ringrep_sql::NODE_OWN,
            &mut self.schema,
            &tx,
            self.pos,
        );
        self.pos = end;
        out.extend(events.into_iter().map(packet));
        Ok(())
    }

    fn position(&self) -> Option<(u64, u64)> {
        Some((self.segment, self.pos))
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
    let (file, pos) = (req.file.clone(), req.pos);
    let binlog = ringrep_sql::mysql_binlog(&engine);
    let start = tokio::task::spawn_blocking(move || {
        mysql_positions::locate(&binlog, &file, pos).map_err(ringrep_sql::position_error)
    })
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
        server_version: ringrep_sql::server_version(),
    };
    let file = segment_name(start.segment);
    // Where the client is: an artificial ROTATE (at the position it asked for), then the
    // file's format (with its place in the file when the client starts at the file's start).
    packets
        .write(&packet(writer.rotate(
            &file,
            req.pos.max(FILE_START),
            true,
            0,
        )))
        .await?;
    let fde_pos = if req.pos <= FILE_START {
        FILE_START + FORMAT_DESCRIPTION_LEN
    } else {
        0
    };
    packets
        .write(&packet(
            writer.format_description(format_time(), log_pos(fde_pos)),
        ))
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
        pos: start.pos,
    };
    let reader = Reader::new(&engine, start.seq, Box::new(encoding), req.non_block);
    let every = match settings.heartbeat {
        // 0 turns heartbeats off in MySQL; a day stands for never.
        Some(d) if d.is_zero() => Duration::from_secs(86_400),
        Some(d) => d.max(Duration::from_millis(1)),
        None => DEFAULT_HEARTBEAT,
    };
    pump(
        shared,
        packets,
        reader,
        Pumping {
            conn_id,
            kill,
            hold: &hold,
            every,
            sent_to: Some(at.clone()),
        },
        &mut || {
            let (segment, pos) = at.lock().map(|a| *a).unwrap_or((start.segment, start.pos));
            Ok(packet(
                writer.heartbeat(&segment_name(segment), log_pos(pos)),
            ))
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The FORMAT_DESCRIPTION a stream starts with carries a time (the event header's first
    /// four bytes), as MySQL's does: Debezium skips an event stamped 0 and then fails on the
    /// first QUERY event ("eventTimestamp is null").
    #[test]
    fn the_format_description_sent_carries_a_time() {
        let writer = EventWriter {
            server_id: 1,
            checksum: true,
            server_version: ringrep_sql::server_version(),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let event = writer.format_description(format_time(), 0);
        let stamp = u64::from(u32::from_le_bytes([event[0], event[1], event[2], event[3]]));
        assert!(stamp >= now && stamp <= now + 5, "{stamp} vs {now}");
    }
}
