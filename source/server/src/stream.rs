//! The replication stream: a replica registers (COM_REGISTER_SLAVE) and asks for the binlog
//! (COM_BINLOG_DUMP) on the node's MySQL port; the node sends its transactions from the one
//! after the replica's position, as ringrep frames, then waits for more.
//!
//! The request names ringrep's encoding in COM_BINLOG_DUMP's file name field:
//! `ringrep-frames:from_seq=N[,heartbeat_ms=M]` (the binlog position field is unused). Each
//! packet of the stream is `0x00` followed by one frame exactly as the segment files hold it
//! (`docs/format.md`: length, CRC32C, payload), so the replica checks the same checksum and
//! sequence continuity as a reader of the files. (A packet is `0x00 segment:8 offset:8 frame`:
//! where the record sits in the primary's binlog, for the replica's status; both are 0 for a
//! heartbeat.) Guarantees:
//! - transactions go out in sequence order, from `from_seq`, each once per stream;
//! - only durable transactions go out (`Engine::durable_seq`): a replica never holds a
//!   transaction the primary could lose in a crash;
//! - when nothing is written for `heartbeat_ms` (1000 by default) a heartbeat frame goes out,
//!   carrying the primary's time and last sequence number, so the replica knows its lag and
//!   notices a dead link;
//! - the stream follows segment rotation; it ends only when the connection does.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use binlog_format::codec;
use binlog_format::frame::write_frame_with;
use binlog_format::{Heartbeat, Position, Record, StartAt, Tailer};
use tokio::io::{AsyncRead, AsyncWrite};

use super::Shared;
use ringrep_engine::error::{code, Error};
use ringrep_protocol::{Cursor, Packets};

/// The file name prefix that asks for ringrep's own frames.
pub(crate) const FRAMES: &str = "ringrep-frames:";

/// The default heartbeat period of an idle stream.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(1);

/// How long one write to a replica may wait for it to take the bytes.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Packets a stream's look at the binlog gathers at most (and then the transaction it is in).
const BATCH: usize = 256;

/// The longest a stream at the binlog's end waits for the notifier before it looks again.
const IDLE_LOOK: Duration = Duration::from_millis(200);

/// How often a stream looks for more when the binlog has no notifier (it is not written
/// here).
const POLL: Duration = Duration::from_millis(1);

/// What a replica asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DumpRequest {
    /// The first sequence number wanted (the replica's applied position + 1).
    pub(crate) from_seq: u64,
    /// How long the stream may stay silent before a heartbeat.
    pub(crate) heartbeat: Duration,
    /// The replica's server id.
    pub(crate) replica_id: u32,
    /// When the primary no longer has `from_seq`: send a snapshot first, then the stream
    /// after it (`provision=1`), instead of error 1236.
    pub(crate) provision: bool,
    /// Send a snapshot first whatever `from_seq` is (`snapshot=1`: an online backup).
    pub(crate) snapshot: bool,
    /// The replica takes a snapshot as it is copied (`snapshot_stream=1`): each frame goes
    /// out as soon as it is made, instead of the whole snapshot being built before its first
    /// byte leaves (a replica that does not say so gets the whole form).
    pub(crate) snapshot_stream: bool,
    /// What the replica applied from other servers (`origin.ID=SEQ`): a replica of this
    /// node's old primary, re-pointed here after a failover, has no position in this node's
    /// numbering; where it starts is found from these.
    pub(crate) origins: Vec<(u32, u64)>,
    /// When this node committed seq `from_seq - 1`, as the replica has it
    /// (`last_commit_us=T`): a replica whose transaction there is not this node's diverged.
    pub(crate) last_commit_us: Option<u64>,
}

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

/// What COM_BINLOG_DUMP asks for: ringrep's frames (a ringrep replica) or MySQL's binlog
/// events (a MySQL replica or CDC tool), chosen by the file name field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dump {
    /// `ringrep-frames:...`.
    Frames(DumpRequest),
    /// A binlog file name (or none) and a position, as MySQL's replicas ask.
    Mysql(MysqlDump),
}

/// Parses COM_BINLOG_DUMP's body: `pos:4 flags:2 server_id:4 file`.
pub(crate) fn parse_dump(body: &[u8]) -> Result<Dump, Error> {
    let bad = |why: &str| Error::new(code::ER_WRONG_ARGUMENTS, format!("COM_BINLOG_DUMP: {why}"));
    let mut c = Cursor::new(body);
    let (Ok(pos), Ok(flags), Ok(replica_id)) = (c.u32(), c.u16(), c.u32()) else {
        return Err(bad("short packet"));
    };
    let file = String::from_utf8_lossy(c.rest())
        .trim_end_matches('\0')
        .to_string();
    let Some(args) = file.strip_prefix(FRAMES) else {
        return Ok(Dump::Mysql(MysqlDump {
            file,
            pos: u64::from(pos),
            non_block: flags & 0x01 != 0,
            replica_id,
        }));
    };
    let mut req = DumpRequest {
        from_seq: 0,
        heartbeat: DEFAULT_HEARTBEAT,
        replica_id,
        provision: false,
        snapshot: false,
        snapshot_stream: false,
        origins: Vec::new(),
        last_commit_us: None,
    };
    for part in args.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| bad(part))?;
        let n: u64 = v.trim().parse().map_err(|_| bad(part))?;
        if let Some(id) = k.trim().strip_prefix("origin.") {
            let id: u32 = id.parse().map_err(|_| bad(part))?;
            req.origins.push((id, n));
            continue;
        }
        match k.trim() {
            "from_seq" => req.from_seq = n,
            // At most a minute: a silent stream to a vanished replica must be written to, to
            // be noticed.
            "heartbeat_ms" => req.heartbeat = Duration::from_millis(n.clamp(1, 60_000)),
            "provision" => req.provision = n == 1,
            "snapshot" => req.snapshot = n == 1,
            "snapshot_stream" => req.snapshot_stream = n == 1,
            "last_commit_us" => req.last_commit_us = Some(n),
            // A newer replica's request: what this version does not know, it does without
            // (the replica is told nothing about it, and streams as before).
            other => tracing::debug!("COM_BINLOG_DUMP: unknown key {other} ignored"),
        }
    }
    if req.from_seq == 0 {
        return Err(bad("from_seq must be 1 or more"));
    }
    Ok(Dump::Frames(req))
}

/// A replica streaming from this node (SHOW REPLICAS).
#[derive(Debug, Clone)]
pub(crate) struct Streaming {
    /// The replica's server id.
    pub(crate) server_id: u32,
    /// Its address.
    pub(crate) peer: std::net::SocketAddr,
    /// The last sequence number sent to it.
    pub(crate) sent_seq: u64,
}

/// Takes a streaming replica off the list when its stream ends, however it ends.
pub(crate) struct Registered<'a>(pub(crate) &'a Shared, pub(crate) u32);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Ok(mut r) = self.0.replicas.lock() {
            r.remove(&self.1);
        }
    }
}

/// How a stream's transactions become packets: ringrep's frames or MySQL's events. Called
/// by the stream's [`Reader`] for each durable transaction, in sequence order, once.
pub(crate) trait Encode: Send {
    /// Appends to `out` the packets of `tx`, whose record starts at `at` and ends at `end` in
    /// the binlog; `frame` is the record's frame as the segment holds it. `tx` has its events
    /// only when [`Encode::needs_events`] says so.
    fn transaction(
        &mut self,
        at: Position,
        end: Position,
        tx: binlog_format::Transaction,
        frame: &[u8],
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error>;

    /// Whether [`Encode::transaction`] reads the transaction's events; without them the
    /// reader reads only each record's head (its sequence number).
    fn needs_events(&self) -> bool {
        true
    }

    /// Where the stream stands after what was encoded so far (segment, position), for the
    /// heartbeats of an encoding that has positions of its own.
    fn position(&self) -> Option<(u64, u64)> {
        None
    }
}

/// ringrep's own encoding: one packet per transaction, its frame as the files hold it.
struct Frames;

impl Encode for Frames {
    fn transaction(
        &mut self,
        at: Position,
        _end: Position,
        _tx: binlog_format::Transaction,
        frame: &[u8],
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        // The frame read from the segment is copied, not encoded again from the decoded
        // record: a third of the allocations of a write were the stream's (BENCHMARKS.md,
        // "The allocator, a fourth time"). Its checksum was checked when it was read; its
        // events are decoded by the replica, which applies them.
        let mut packet = packet_head(at, frame.len());
        packet.extend_from_slice(frame);
        out.push(packet);
        Ok(())
    }

    fn needs_events(&self) -> bool {
        false
    }
}

/// Streams transactions to the replica until the connection fails, the server stops or the
/// connection is killed (`kill`).
pub(crate) async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send>(
    shared: &Arc<Shared>,
    packets: &mut Packets<S>,
    req: DumpRequest,
    (conn_id, peer): (u32, std::net::SocketAddr),
    kill: Option<Arc<super::processes::Kill>>,
) -> io::Result<()> {
    let engine = shared.engine.clone();
    // Registered before anything is read: a purge from now on keeps what this stream needs
    // (up to the hard cap), and one under way finishes first.
    let hold = engine.hold_binlog(req.from_seq.max(1));
    // A replica whose next transaction retention removed cannot resume from the stream: it
    // must be provisioned again (MySQL's error and advice).
    let first = {
        let e = engine.clone();
        tokio::task::spawn_blocking(move || e.first_binlog_seq())
            .await
            .map_err(io::Error::other)?
    };
    let mut from = req.from_seq;
    // Set when the replica is not on this node's history: it must be provisioned.
    let mut off_history = false;
    // A replica that has nothing of this node's own numbering but has applied another
    // server's transactions (it followed this node's old primary): where it stands in this
    // node's binlog is found from the origins recorded there.
    if req.from_seq == 1 && !req.origins.is_empty() && !req.snapshot {
        let e = engine.clone();
        let origins = req.origins.clone();
        let found = tokio::task::spawn_blocking(move || resume_point(&e, &origins))
            .await
            .map_err(io::Error::other)?;
        match found {
            Ok(Some(seq)) => {
                tracing::info!(
                    connection = conn_id,
                    replica = req.replica_id,
                    "the replica's positions {:?} are this node's seq {}: streaming from there",
                    req.origins,
                    seq
                );
                let mut p = vec![0x04];
                p.extend_from_slice(&engine.config().server_id.to_le_bytes());
                p.extend_from_slice(&seq.to_le_bytes());
                packets.write(&p).await?;
                packets.flush().await?;
                hold.advance(seq);
                from = seq;
            }
            Ok(None) => {
                tracing::info!(
                    connection = conn_id,
                    replica = req.replica_id,
                    "the replica's positions {:?} are not in this node's history: it must be provisioned",
                    req.origins
                );
                off_history = true;
            }
            Err(e) => tracing::warn!(connection = conn_id, "finding the replica's position: {e}"),
        }
    }
    match first {
        Ok(first) if ((from < first || off_history) && req.provision) || req.snapshot => {
            // What the snapshot will not hold must stay: it is taken after this.
            hold.advance(engine.last_seq() + 1);
            from = provision(&engine, packets, &req, conn_id).await? + 1;
        }
        Ok(_) if off_history => {
            return refuse(
                packets,
                "The replica holds transactions this source does not have (it saw more of the old primary than this node did, or it is the old primary with commits that were never streamed here); provision it again".into(),
                conn_id,
                req.replica_id,
            )
            .await;
        }
        Ok(first) if from < first => {
            return refuse(
                packets,
                format!(
                    "Cannot replicate because the source purged required binary logs. Replicate the missing transactions from elsewhere, or provision a new replica from backup. Consider increasing the source's binary log expiration period. The replica asked for seq {}; the source's binlog starts at seq {first}.",
                    req.from_seq
                ),
                conn_id,
                req.replica_id,
            )
            .await;
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(connection = conn_id, "reading the binlog's segments: {e}"),
    }
    // Only where the replica asked to go on: a replica just provisioned holds this node's
    // snapshot, and its last commit is not the one before its request.
    if !req.snapshot && from == req.from_seq {
        let e = engine.clone();
        let (seq, commit) = (from - 1, req.last_commit_us);
        let diverged = tokio::task::spawn_blocking(move || divergence(&e, seq, commit))
            .await
            .map_err(io::Error::other)?;
        if let Some(why) = diverged {
            return refuse(packets, why, conn_id, req.replica_id).await;
        }
    }
    if let Ok(mut r) = shared.replicas.lock() {
        // A replica that comes back (STOP/START REPLICA, a reconnect) replaces its old entry,
        // as MySQL's new dump thread replaces the old one's; the old stream ends on its own.
        r.retain(|_, s| s.server_id != req.replica_id);
        r.insert(
            conn_id,
            Streaming {
                server_id: req.replica_id,
                peer,
                sent_seq: from - 1,
            },
        );
    }
    let _registered = Registered(shared, conn_id);
    tracing::info!(
        connection = conn_id,
        replica = req.replica_id,
        from_seq = from,
        "replica streaming"
    );
    let reader = Reader::new(&engine, from, Box::new(Frames), false);
    let heartbeat_engine = engine.clone();
    pump(
        shared,
        packets,
        reader,
        Pumping {
            conn_id,
            kill,
            hold: &hold,
            every: req.heartbeat,
            sent_to: None,
        },
        &mut || heartbeat(&heartbeat_engine),
    )
    .await
}

/// What [`pump`] needs of its stream.
pub(crate) struct Pumping<'a> {
    /// The connection's id (the SHOW REPLICAS entry).
    pub(crate) conn_id: u32,
    /// Set when the connection is killed.
    pub(crate) kill: Option<Arc<super::processes::Kill>>,
    /// The retention hold, moved on as transactions go out.
    pub(crate) hold: &'a ringrep_engine::BinlogHold,
    /// How long the stream may stay silent before a heartbeat.
    pub(crate) every: Duration,
    /// Set to where the stream stands once a batch is written (for the heartbeats).
    pub(crate) sent_to: Option<Arc<std::sync::Mutex<(u64, u64)>>>,
}

/// Sends what `reader` encodes until the connection fails, the server stops, the connection
/// is killed, or (when asked) the stream caught up; a heartbeat goes out when nothing did for
/// `every`.
///
/// At the binlog's end the reader reads what the last fsync covered, from the page cache,
/// here on the connection's task, woken by the binlog's notifier: an fsync that a commit ran
/// on this worker wakes the stream on the same worker, with no thread between. While it is
/// behind (its last look filled a batch) it reads on the blocking pool, where a read from
/// the disk stalls no other connection.
pub(crate) async fn pump<S: AsyncRead + AsyncWrite + Unpin + Send>(
    shared: &Arc<Shared>,
    packets: &mut Packets<S>,
    mut reader: Reader,
    p: Pumping<'_>,
    heartbeat: &mut (dyn FnMut() -> io::Result<Vec<u8>> + Send),
) -> io::Result<()> {
    let conn_id = p.conn_id;
    let mut quiet_since = tokio::time::Instant::now();
    loop {
        if p.kill
            .as_deref()
            .is_some_and(super::processes::Kill::is_killed)
        {
            return Ok(());
        }
        let step = if reader.behind() {
            let mut looking = tokio::task::spawn_blocking(move || {
                let step = reader.step();
                (reader, step)
            });
            // A look that reads a large transaction (hundreds of MB, from the disk) can take
            // longer than a replica waits in silence before it gives the link up: heartbeats
            // go out meanwhile, between what was sent and what this look will send.
            let (r, step) = loop {
                tokio::select! {
                    done = &mut looking => break done.map_err(io::Error::other)?,
                    () = tokio::time::sleep_until(quiet_since + p.every) => {
                        write_within(packets, &[heartbeat()?]).await?;
                        quiet_since = tokio::time::Instant::now();
                    }
                }
            };
            reader = r;
            step
        } else {
            reader.step()
        };
        let frames = match step {
            Step::Wait(seen) => {
                let notifier = reader.notifier();
                let more = async {
                    match (notifier, seen) {
                        // Bounded all the same: a look now and then costs little.
                        (Some(n), Some(g)) => {
                            let _ = tokio::time::timeout(IDLE_LOOK, n.past(g)).await;
                        }
                        _ => tokio::time::sleep(POLL).await,
                    }
                };
                tokio::select! {
                    () = more => continue,
                    () = tokio::time::sleep_until(quiet_since + p.every) => (vec![heartbeat()?], None),
                    () = super::processes::killed(p.kill.as_deref()) => return Ok(()),
                }
            }
            Step::Frames(frames, last, at) => {
                if let Some(r) = shared
                    .replicas
                    .lock()
                    .ok()
                    .as_mut()
                    .and_then(|r| r.get_mut(&conn_id))
                {
                    r.sent_seq = last;
                }
                p.hold.advance(last + 1);
                (frames, at)
            }
            Step::CaughtUp => {
                // MySQL's answer to BINLOG_DUMP_NON_BLOCK once nothing is left: EOF.
                packets.write(&[0xfe, 0, 0, 0, 0]).await?;
                return packets.flush().await;
            }
            Step::Failed(e) => {
                tracing::error!(connection = conn_id, "replication stream stopped: {e}");
                // MySQL's code for a binlog the source cannot serve (corruption, a gap): the
                // replica stops there. A failure that may pass keeps its own code, and the
                // replica reconnects.
                let sent = if e.is_retriable() {
                    e
                } else {
                    Error::new(
                        code::ER_MASTER_FATAL_ERROR_READING_BINLOG,
                        format!(
                            "Got fatal error from source when reading data from binary log: '{}'",
                            e.message
                        ),
                    )
                };
                packets.write(&super::wire::error(&sent)).await?;
                return packets.flush().await;
            }
        };
        let (frames, at) = frames;
        write_within(packets, &frames).await?;
        quiet_since = tokio::time::Instant::now();
        // Only now: a heartbeat never names a position the client has not been sent.
        if let (Some(to), Some(at)) = (&p.sent_to, at) {
            if let Ok(mut t) = to.lock() {
                *t = at;
            }
        }
    }
}

/// Writes `payloads` and sends them. A replica that vanished without closing the connection
/// fills the send buffer; the write then waits, but not for ever ([`WRITE_TIMEOUT`]).
async fn write_within<S: AsyncRead + AsyncWrite + Unpin>(
    packets: &mut Packets<S>,
    payloads: &[Vec<u8>],
) -> io::Result<()> {
    let sent = tokio::time::timeout(WRITE_TIMEOUT, async {
        for p in payloads {
            packets.write(p).await?;
        }
        packets.flush().await
    })
    .await;
    sent.unwrap_or_else(|_| {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the replica took nothing for 60 s",
        ))
    })
}

/// A heartbeat's stream packet: `0x00`, a position of zeros, and the record's frame.
fn heartbeat_packet(record: &Record) -> binlog_format::Result<Vec<u8>> {
    let at = Position {
        segment: 0,
        offset: 0,
    };
    let mut out = packet_head(at, 0);
    write_frame_with(&mut out, |buf| codec::encode_record_into(record, buf))?;
    Ok(out)
}

/// The start of a stream packet at `at` (`0x00` and the position), with room for a frame of
/// `frame_len` bytes after it.
fn packet_head(at: Position, frame_len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(17 + frame_len);
    out.push(0);
    out.extend_from_slice(&at.segment.to_le_bytes());
    out.extend_from_slice(&at.offset.to_le_bytes());
    out
}

/// Ends a replica's stream request with MySQL's error 1236 (`why`), logged: the replica
/// stops and shows it.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin + Send>(
    packets: &mut Packets<S>,
    why: String,
    conn_id: u32,
    replica_id: u32,
) -> io::Result<()> {
    let e = Error::new(code::ER_MASTER_FATAL_ERROR_READING_BINLOG, why);
    tracing::warn!(connection = conn_id, replica = replica_id, "{}", e.message);
    packets.write(&super::wire::error(&e)).await?;
    packets.flush().await
}

/// Whether a replica that applied this node's transactions up to `seq` (the last one committed
/// here at `commit_us`, as the replica has it) holds a history this node does not: it is
/// ahead of this node's binlog, or its `seq` is another transaction than this node's. That
/// happens when this node lost commits the replica had received (a power loss with
/// `--sync never`, a data directory restored from an older backup). Says how, or `None`.
fn divergence(engine: &ringrep_engine::Engine, seq: u64, commit_us: Option<u64>) -> Option<String> {
    if seq == 0 {
        return None;
    }
    let last = engine.last_seq();
    if seq > last {
        return Some(format!(
            "The replica has applied this source's transactions up to seq {seq}, but this source's binlog ends at seq {last}: the replica holds {} transaction(s) this source lost (a crash with --sync never, or a data directory restored from an older copy). Promote the replica, or provision it again",
            seq - last
        ));
    }
    let want = commit_us?;
    // Purged here: nothing to compare with.
    let reader = binlog_format::BinlogReader::open(
        &engine.binlog_dir(),
        binlog_format::ReaderOptions::default(),
    )
    .and_then(|r| r.start_at_seq(seq))
    .ok()?;
    for item in reader {
        match item {
            Ok((_, Record::Transaction(t))) if t.seq == seq => {
                return (t.commit_time_us as u64 != want).then(|| {
                    format!(
                        "The replica's seq {seq} is not this source's: the replica has it committed at {want} µs, this source at {} µs. The two diverged (this source lost commits the replica had received, then committed others under the same numbers); provision the replica again",
                        t.commit_time_us
                    )
                });
            }
            Ok((_, Record::Transaction(t))) if t.seq > seq => return None,
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Where in this node's binlog a replica with `origins` (what it applied, per server) goes
/// on: the first transaction it has not applied, judged by each record's origin (the server
/// and sequence where it first committed; this node's own for its own commits). `None` when
/// the replica is not on this node's history: it has transactions of a server beyond what
/// this binlog holds (asynchronous replication let it see more than this node did), or the
/// binlog no longer starts early enough; it must then be provisioned.
fn resume_point(
    engine: &ringrep_engine::Engine,
    origins: &[(u32, u64)],
) -> Result<Option<u64>, Error> {
    let me = engine.config().server_id;
    let had = |id: u32| origins.iter().find(|(o, _)| *o == id).map(|(_, s)| *s);
    let mut reader = binlog_format::BinlogReader::open(&engine.binlog_dir(), Default::default())
        .map_err(|e| Error::internal(e.to_string()))?;
    let mut start = None;
    // The highest sequence of each origin this binlog holds.
    let mut highest: Vec<(u32, u64)> = Vec::new();
    let mut first_of: Vec<(u32, u64)> = Vec::new();
    for item in &mut reader {
        let (_, record) = item.map_err(|e| Error::internal(e.to_string()))?;
        let Record::Transaction(t) = record else {
            continue;
        };
        // This node's own bookkeeping (creating its apply status when it was a replica) is
        // nothing a replica takes.
        if ringrep_engine::is_bookkeeping(&t) {
            continue;
        }
        let (oid, oseq) = t.origin.map_or((me, t.seq), |o| (o.server_id, o.seq));
        match highest.iter_mut().find(|(o, _)| *o == oid) {
            Some((_, s)) => *s = (*s).max(oseq),
            None => {
                highest.push((oid, oseq));
                first_of.push((oid, oseq));
            }
        }
        let applied = had(oid).is_some_and(|s| s >= oseq);
        if !applied && start.is_none() {
            start = Some(t.seq);
        }
    }
    for &(o, s) in origins {
        if o == me {
            continue;
        }
        match highest.iter().find(|(id, _)| *id == o) {
            // Transactions of `o` this node never had.
            Some((_, h)) if *h < s => return Ok(None),
            None => return Ok(None),
            _ => {}
        }
        // The binlog must still hold the transaction after the replica's position.
        if let Some((_, f)) = first_of.iter().find(|(id, _)| *id == o) {
            if *f > s + 1 {
                return Ok(None);
            }
        }
    }
    Ok(Some(start.unwrap_or(engine.last_seq() + 1)))
}

/// A heartbeat's packet: this node's clock and last durable sequence number.
fn heartbeat(engine: &ringrep_engine::Engine) -> io::Result<Vec<u8>> {
    let hb = Record::Heartbeat(Heartbeat {
        server_id: engine.config().server_id,
        time_us: engine.now_us(),
        last_seq: engine.durable_seq(),
    });
    heartbeat_packet(&hb).map_err(io::Error::other)
}

/// Snapshot bytes per stream packet while provisioning.
const SNAPSHOT_CHUNK: usize = 1 << 20;

/// Snapshot frames (each a few hundred KiB, see the engine's `snapshot`) made and not yet
/// written to a replica that takes the snapshot as it is copied: the copy waits for the
/// link beyond these.
const FRAMES_IN_FLIGHT: usize = 8;

/// Sends a replica the whole state (a snapshot taken now) for it to load in place of what it
/// has; returns the sequence number the snapshot stands at, after which the stream goes on.
/// Two forms (docs/architecture.md, "Provisioning"):
/// - streamed, to a replica that asked for it (`snapshot_stream=1`): `0x05 server_id:4
///   time_us:8`, then `0x02 chunk` packets as the snapshot is copied, then `0x03 seq:8
///   covered:8` once the copy is done and the binlog synced (`covered`: the last sequence
///   whose rows the snapshot may hold); the replica reads the sequence number from the
///   snapshot's own header too;
/// - whole, to any other: the snapshot is built first, with heartbeats meanwhile so the
///   replica keeps the link, then `0x01 server_id:4 seq:8 bytes:8 time_us:8 covered:8`,
///   `0x02 chunk` until `bytes` are sent, and `0x03`.
async fn provision<S: AsyncRead + AsyncWrite + Unpin + Send>(
    engine: &ringrep_engine::Engine,
    packets: &mut Packets<S>,
    req: &DumpRequest,
    conn_id: u32,
) -> io::Result<u64> {
    let started = std::time::Instant::now();
    tracing::info!(
        connection = conn_id,
        replica = req.replica_id,
        from_seq = req.from_seq,
        streamed = req.snapshot_stream,
        "sending a snapshot: {}",
        if req.snapshot {
            "asked for (an online backup)"
        } else {
            "the replica's next transaction is purged"
        }
    );
    let (seq, bytes) = if req.snapshot_stream {
        send_streamed(engine, packets, conn_id).await?
    } else {
        send_whole(engine, packets, req, conn_id).await?
    };
    tracing::info!(
        connection = conn_id,
        replica = req.replica_id,
        seq,
        bytes,
        "provisioned in {:.1?}; streaming from seq {}",
        started.elapsed(),
        seq + 1
    );
    Ok(seq)
}

/// The streamed form of [`provision`]: the engine copies the state on a background thread
/// ([`copy_in_background`]), handing each frame over as it is made, and this task writes the frames as they come.
/// Returns the snapshot's sequence number and its size.
async fn send_streamed<S: AsyncRead + AsyncWrite + Unpin + Send>(
    engine: &ringrep_engine::Engine,
    packets: &mut Packets<S>,
    conn_id: u32,
) -> io::Result<(u64, u64)> {
    let mut begin = vec![0x05];
    begin.extend_from_slice(&engine.config().server_id.to_le_bytes());
    begin.extend_from_slice(&engine.now_us().to_le_bytes());
    packets.write(&begin).await?;
    let (frames, mut made) = tokio::sync::mpsc::channel::<Vec<u8>>(FRAMES_IN_FLIGHT);
    let e = engine.clone();
    // A replica gone makes `made` go away, and the copy ends at its next frame.
    let copying = copy_in_background(move || {
        e.stream_snapshot_for_replica(|frame| {
            frames.blocking_send(frame).map_err(|_| {
                Error::internal("the replica's stream ended while its snapshot was copied")
            })
        })
    })?;
    let mut sent = 0u64;
    let mut logged = 0u64;
    let mut chunk = Vec::with_capacity(SNAPSHOT_CHUNK + 1);
    while let Some(frame) = made.recv().await {
        let written = async {
            for part in frame.chunks(SNAPSHOT_CHUNK) {
                chunk.clear();
                chunk.push(0x02);
                chunk.extend_from_slice(part);
                packets.write(&chunk).await?;
            }
            packets.flush().await
        };
        match tokio::time::timeout(WRITE_TIMEOUT, written).await {
            Ok(r) => r?,
            Err(_) => return Err(slow_replica()),
        }
        sent += frame.len() as u64;
        if sent - logged >= 64 << 20 {
            logged = sent;
            tracing::info!(
                connection = conn_id,
                "provisioning: {} MiB sent",
                sent >> 20
            );
        }
    }
    let (seq, covered) = copied(copying).await?;
    let mut end = vec![0x03];
    end.extend_from_slice(&seq.to_le_bytes());
    end.extend_from_slice(&covered.to_le_bytes());
    packets.write(&end).await?;
    packets.flush().await?;
    Ok((seq, sent))
}

/// Runs a snapshot's copy for a replica on a thread of its own at the lower priority of
/// background copies (`ringrep_engine::background`): the primary's committers, on the same
/// cores, go first. What it returns arrives on the receiver.
fn copy_in_background<T: Send + 'static>(
    copy: impl FnOnce() -> ringrep_engine::error::Result<T> + Send + 'static,
) -> io::Result<tokio::sync::oneshot::Receiver<ringrep_engine::error::Result<T>>> {
    let (done, copied) = tokio::sync::oneshot::channel();
    ringrep_engine::background::spawn("replica-snapshot", move || {
        // The connection gone, nobody waits for the result.
        let _ = done.send(copy());
    })?;
    Ok(copied)
}

/// What a copy of [`copy_in_background`] gave; a copy that stopped without an answer (its
/// thread panicked) is an error.
async fn copied<T>(
    copying: tokio::sync::oneshot::Receiver<ringrep_engine::error::Result<T>>,
) -> io::Result<T> {
    copying
        .await
        .map_err(|_| io::Error::other("the snapshot's copy stopped without an answer"))?
        .map_err(io::Error::other)
}

/// The whole form of [`provision`], for a replica that does not take a streamed snapshot.
/// Returns the snapshot's sequence number and its size.
async fn send_whole<S: AsyncRead + AsyncWrite + Unpin + Send>(
    engine: &ringrep_engine::Engine,
    packets: &mut Packets<S>,
    req: &DumpRequest,
    conn_id: u32,
) -> io::Result<(u64, u64)> {
    let e = engine.clone();
    let mut taking = std::pin::pin!(copied(copy_in_background(move || {
        e.snapshot_for_replica()
    })?));
    let (seq, covered, bytes) = loop {
        tokio::select! {
            r = &mut taking => break r?,
            _ = tokio::time::sleep(req.heartbeat) => {
                packets.write(&heartbeat(engine)?).await?;
                packets.flush().await?;
            }
        }
    };
    let mut begin = vec![0x01];
    begin.extend_from_slice(&engine.config().server_id.to_le_bytes());
    begin.extend_from_slice(&seq.to_le_bytes());
    begin.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    begin.extend_from_slice(&engine.now_us().to_le_bytes());
    begin.extend_from_slice(&covered.to_le_bytes());
    let mut chunk = Vec::with_capacity(SNAPSHOT_CHUNK + 1);
    let sent = async {
        packets.write(&begin).await?;
        for (i, part) in bytes.chunks(SNAPSHOT_CHUNK).enumerate() {
            chunk.clear();
            chunk.push(0x02);
            chunk.extend_from_slice(part);
            packets.write(&chunk).await?;
            packets.flush().await?;
            if i % 64 == 63 {
                tracing::info!(
                    connection = conn_id,
                    "provisioning: {} of {} MiB sent",
                    ((i + 1) * SNAPSHOT_CHUNK) >> 20,
                    bytes.len() >> 20
                );
            }
        }
        packets.write(&[0x03]).await?;
        packets.flush().await
    };
    // The time limit is per snapshot here: a slow link gets a minute per 64 MiB.
    let limit = WRITE_TIMEOUT * (1 + (bytes.len() / (64 << 20)) as u32);
    match tokio::time::timeout(limit, sent).await {
        Ok(r) => r?,
        Err(_) => return Err(slow_replica()),
    }
    Ok((seq, bytes.len() as u64))
}

/// A replica that stopped taking the snapshot's bytes.
fn slow_replica() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the replica took no snapshot bytes for too long",
    )
}

/// What one look at the binlog found.
pub(crate) enum Step {
    /// Packets of whole durable transactions, in order, the last one's sequence number, and
    /// where the stream stands after them (the encoder's, when it keeps one).
    Frames(Vec<Vec<u8>>, u64, Option<(u64, u64)>),
    /// Everything durable has been sent (only when the stream was asked to end there).
    CaughtUp,
    /// The binlog could not be read (corruption names its position).
    Failed(Error),
    /// Nothing to send now: more comes once the binlog's notifier moves past this generation
    /// (`None`: no notifier, look again shortly).
    Wait(Option<u64>),
}

/// A tailer of `engine`'s binlog from `seq`, told what is durable by the writer's
/// `notifier` (this process's) rather than by reading `binlog.durable` at every look.
fn tailer_at(
    engine: &ringrep_engine::Engine,
    seq: u64,
    notifier: Option<Arc<binlog_format::Notifier>>,
    events: bool,
) -> Tailer {
    let tailer = Tailer::open(&engine.binlog_dir(), StartAt::Seq(seq)).with_notifier_if(notifier);
    if events {
        tailer
    } else {
        tailer.heads_only()
    }
}

/// Reads a stream's binlog from a sequence number and encodes each transaction once it is
/// durable, a batch at a time, never waiting: the stream's task waits between looks, for the
/// binlog's notifier (docs/architecture.md, "The statement path").
pub(crate) struct Reader {
    engine: ringrep_engine::Engine,
    tailer: Tailer,
    notifier: Option<Arc<binlog_format::Notifier>>,
    /// The binlog's heal count when the tailer was opened: a heal cuts records off the end
    /// of the binlog that the tailer may have read (and rewrites where they were); it then
    /// reads again from the first one not yet sent.
    heals: u64,
    /// The next sequence number to send.
    expected: u64,
    /// The last durable sequence number the engine named.
    durable: u64,
    /// A transaction read before it was durable, with its frame, sent first once it is.
    held: Option<Held>,
    encoder: Box<dyn Encode>,
    end_when_caught_up: bool,
    /// Whether the last look filled a whole batch: the reader is behind the binlog's end.
    behind: bool,
}

/// A transaction the reader read: where its record starts and ends, the transaction (its
/// events only when the encoder needs them), and its frame once it is held back (before, the
/// tailer's last).
struct Held {
    at: Position,
    end: Position,
    tx: binlog_format::Transaction,
    frame: Option<Vec<u8>>,
}

impl Held {
    /// The same, with its frame copied out of the tailer (that has just read it).
    fn with_frame(mut self, tailer: &Tailer) -> Result<Held, Error> {
        if self.frame.is_none() {
            let frame = tailer.last_frame().ok_or_else(|| no_frame(self.at))?;
            self.frame = Some(frame.to_vec());
        }
        Ok(self)
    }
}

/// A transaction read whose frame the tailer does not have: a bug, never sent as something else.
fn no_frame(at: Position) -> Error {
    Error::internal(format!(
        "replication stream: the frame of the transaction at {at} is not at hand"
    ))
}

impl Reader {
    /// A reader from sequence number `from`; with `end_when_caught_up` it ends with
    /// [`Step::CaughtUp`] once nothing durable is left.
    pub(crate) fn new(
        engine: &ringrep_engine::Engine,
        from: u64,
        encoder: Box<dyn Encode>,
        end_when_caught_up: bool,
    ) -> Reader {
        let notifier = engine.notifier();
        Reader {
            tailer: tailer_at(engine, from, notifier.clone(), encoder.needs_events()),
            notifier,
            heals: engine.binlog_heals(),
            engine: engine.clone(),
            expected: from,
            durable: 0,
            held: None,
            encoder,
            end_when_caught_up,
            // Until a look says otherwise: a replica may come back from far behind.
            behind: true,
        }
    }

    /// The binlog's notifier, which moves on when there may be more to send.
    pub(crate) fn notifier(&self) -> Option<&binlog_format::Notifier> {
        self.notifier.as_deref()
    }

    /// Whether the last look filled a whole batch: the next may read from the disk.
    pub(crate) fn behind(&self) -> bool {
        self.behind
    }

    /// After a heal: read again from the first transaction not yet sent.
    fn reopen(&mut self) {
        self.heals = self.engine.binlog_heals();
        self.durable = 0;
        self.held = None;
        self.tailer = tailer_at(
            &self.engine,
            self.expected,
            self.notifier.clone(),
            self.encoder.needs_events(),
        );
    }

    /// Reads and encodes the durable transactions there are, until [`BATCH`] packets.
    pub(crate) fn step(&mut self) -> Step {
        // Taken before looking: a notification while this looks ends the wait that follows.
        let seen = self.notifier.as_ref().map(|n| n.generation());
        let mut batch = Vec::new();
        self.behind = false;
        // Counted in packets, as the channel's batches were: a transaction may be many.
        while batch.len() < BATCH {
            // A transaction held back, or the one the tailer reads now (whose frame is then
            // the tailer's last).
            let held = match self.held.take() {
                Some(held) => held,
                None => match self.tailer.next_timeout(Duration::ZERO) {
                    Ok(Some((_, Record::Heartbeat(_)))) => continue,
                    Ok(Some((pos, Record::Transaction(t)))) => {
                        if t.seq < self.expected {
                            continue;
                        }
                        if t.seq != self.expected {
                            return Step::Failed(Error::internal(format!(
                                "replication stream: seq {} at {pos} where {} was expected",
                                t.seq, self.expected
                            )));
                        }
                        let end = self.tailer.last_end().unwrap_or(pos);
                        Held {
                            at: pos,
                            end,
                            tx: t,
                            frame: None,
                        }
                    }
                    Ok(None) if self.end_when_caught_up && batch.is_empty() => {
                        return Step::CaughtUp;
                    }
                    Ok(None) => break,
                    Err(_) if self.engine.binlog_heals() != self.heals => {
                        self.reopen();
                        continue;
                    }
                    Err(e) => return Step::Failed(self.read_failed(e)),
                },
            };
            // Never ahead of what the primary has made durable. (Asked only when the last
            // answer does not cover this transaction: the answer takes the binlog writer's
            // lock, which committers need.)
            let seq = held.tx.seq;
            if self.durable < seq {
                self.durable = self.engine.durable_seq();
                if self.engine.binlog_heals() != self.heals {
                    self.reopen();
                    continue;
                }
                if self.durable < seq {
                    // What is durable already goes out now, not after the batch fills. The
                    // frame is kept: the tailer's next read replaces its last.
                    match held.with_frame(&self.tailer) {
                        Ok(held) => self.held = Some(held),
                        Err(e) => return Step::Failed(e),
                    }
                    break;
                }
            }
            self.expected += 1;
            let Held { at, end, tx, frame } = held;
            let frame = match &frame {
                Some(kept) => Some(kept.as_slice()),
                None => self.tailer.last_frame(),
            };
            let Some(frame) = frame else {
                return Step::Failed(no_frame(at));
            };
            if let Err(e) = self.encoder.transaction(at, end, tx, frame, &mut batch) {
                return Step::Failed(e);
            }
        }
        if batch.is_empty() {
            return Step::Wait(seen);
        }
        self.behind = batch.len() >= BATCH;
        Step::Frames(batch, self.expected - 1, self.encoder.position())
    }

    /// The error of a failed read; one of retention removing what the stream needs (the
    /// hard cap) may pass: the replica comes back and is provisioned, not stopped for good.
    fn read_failed(&self, e: binlog_format::Error) -> Error {
        let mut e: Error = e.into();
        if self
            .engine
            .first_binlog_seq()
            .is_ok_and(|first| first > self.expected)
        {
            e.kind = ringrep_engine::error::ErrorKind::Transient;
            e.message = format!(
                "binlog retention removed seq {} while it was being sent: {}",
                self.expected, e.message
            );
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a replica asking with `streamed` receives when provisioned from `engine`: the
    /// packets' kinds in order, the snapshot's bytes, and the seq of the end packet.
    fn provisioned(engine: &ringrep_engine::Engine, streamed: bool) -> (Vec<u8>, Vec<u8>, u64) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let (ours, theirs) = tokio::io::duplex(1 << 16);
            let req = DumpRequest {
                from_seq: 1,
                heartbeat: Duration::from_secs(30),
                replica_id: 2,
                provision: true,
                snapshot: false,
                snapshot_stream: streamed,
                origins: vec![],
                last_commit_us: None,
            };
            let sending = async {
                let mut packets = Packets::new(ours, 1 << 24);
                provision(engine, &mut packets, &req, 1).await
            };
            let receiving = async {
                let mut packets = Packets::new(theirs, 1 << 24);
                let (mut kinds, mut bytes, mut seq) = (Vec::new(), Vec::new(), None);
                let seq_at = |p: &[u8], at: usize| {
                    Some(u64::from_le_bytes(p[at..at + 8].try_into().expect("seq")))
                };
                loop {
                    let p = packets.read().await.expect("read").expect("a packet");
                    kinds.push(p[0]);
                    match p[0] {
                        // The whole form says the seq first, the streamed one at the end.
                        0x01 => seq = seq_at(&p, 5),
                        0x02 => bytes.extend_from_slice(&p[1..]),
                        0x03 => {
                            if p.len() > 1 {
                                seq = seq_at(&p, 1);
                            }
                            return (kinds, bytes, seq.expect("a seq"));
                        }
                        _ => {}
                    }
                }
            };
            let (sent, got) = tokio::join!(sending, receiving);
            assert_eq!(sent.expect("provision"), got.2);
            got
        })
    }

    #[test]
    fn both_forms_of_a_snapshot_carry_the_engines_rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = ringrep_engine::EngineConfig::new(1);
        cfg.sync = binlog_format::SyncPolicy::Never;
        let (engine, _) = ringrep_engine::Engine::open(dir.path(), cfg).expect("open");
        let mut sql = ringrep_sql::SqlSession::new(&engine);
        for stmt in [
            "CREATE DATABASE d",
            "CREATE TABLE d.r (k INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
             ring_meta VARBINARY(64), v INT, PRIMARY KEY (k, ring_idx)) \
             COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'",
            "INSERT INTO d.r (k, v) VALUES (1, 10), (1, 11), (2, 20), (1, 12), (1, 13)",
        ] {
            sql.execute(stmt).expect(stmt);
        }
        let rows = |st: &ringrep_engine::State| -> usize {
            st.tables
                .values()
                .filter(|t| t.def.database == "d")
                .map(|t| t.len())
                .sum()
        };
        // Two rings: 3 data rows and 1 data row, each with its meta row.
        let want = engine.with_state(rows);
        assert_eq!(want, 6);
        for streamed in [true, false] {
            let (kinds, bytes, seq) = provisioned(&engine, streamed);
            assert_eq!(kinds.first(), Some(&if streamed { 0x05 } else { 0x01 }));
            assert!(
                kinds[1..kinds.len() - 1].iter().all(|&k| k == 0x02),
                "{kinds:?}"
            );
            let state = ringrep_engine::Engine::decode_snapshot(&bytes[..]).expect("decode");
            assert_eq!(state.last_seq, seq, "streamed: {streamed}");
            assert_eq!(seq, engine.last_seq());
            assert_eq!(rows(&state), want, "streamed: {streamed}");
        }
    }

    fn body(file: &str) -> Vec<u8> {
        let mut b = vec![4, 0, 0, 0, 0, 0, 7, 0, 0, 0];
        b.extend_from_slice(file.as_bytes());
        b
    }

    #[test]
    fn dump_requests() {
        let r = parse_dump(&body("ringrep-frames:from_seq=12,heartbeat_ms=250")).expect("parse");
        assert_eq!(
            r,
            Dump::Frames(DumpRequest {
                from_seq: 12,
                heartbeat: Duration::from_millis(250),
                replica_id: 7,
                provision: false,
                snapshot: false,
                snapshot_stream: false,
                origins: vec![],
                last_commit_us: None,
            })
        );
        let r = parse_dump(&body(
            "ringrep-frames:from_seq=3,provision=1,snapshot_stream=1",
        ))
        .expect("parse");
        assert!(matches!(
            r,
            Dump::Frames(DumpRequest {
                provision: true,
                snapshot_stream: true,
                ..
            })
        ));
        let frames = |d: Dump| match d {
            Dump::Frames(r) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            frames(
                parse_dump(&body(
                    "ringrep-frames:from_seq=5,last_commit_us=1700000000000001"
                ))
                .expect("parse")
            )
            .last_commit_us,
            Some(1_700_000_000_000_001)
        );
        assert!(
            frames(parse_dump(&body("ringrep-frames:from_seq=1,provision=1")).expect("parse"))
                .provision
        );
        assert!(matches!(
            parse_dump(&body("binlog.000001")).expect("mysql"),
            Dump::Mysql(super::MysqlDump { ref file, pos: 4, .. }) if file == "binlog.000001"
        ));
        assert_eq!(
            parse_dump(&body("ringrep-frames:from_seq=0"))
                .expect_err("zero")
                .code,
            1210
        );
        assert!(
            parse_dump(&body("ringrep-frames:from_seq=3,later_feature=1")).is_ok(),
            "a newer replica's keys are ignored"
        );
        assert_eq!(
            parse_dump(&body("ringrep-frames:from_seq=x"))
                .expect_err("value")
                .code,
            1210
        );
        assert_eq!(parse_dump(&[1, 2]).expect_err("short").code, 1210);
    }
}
