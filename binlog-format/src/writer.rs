//! The binlog writer: appends records, rotates segments by size, and makes commits durable
//! with group commit (many commits, one fsync).
//!
//! Durability protocol: `append` encodes and buffers a frame and returns its LSN (bytes
//! appended since open). `commit(lsn)` then does what the sync policy asks: with
//! `EveryCommit` it returns only once the file is fsynced past `lsn`. The thread that takes
//! the sync lock first writes and fsyncs everything appended so far, so every commit that
//! was waiting behind it is covered by that one fsync.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::codec;
use crate::durable::Publisher;
use crate::error::{Error, Position, Result};
use crate::events::{Event, Record, SegmentHeader};
use crate::failpoint;
use crate::format::{
    FormatVersion, Prelude, DEFAULT_MAX_FRAME, DEFAULT_SEGMENT_BYTES, PRELUDE_LEN,
};
use crate::frame::{write_frame, write_frame_with};
use crate::notifier::Notifier;
use crate::reader::{RecoveryMode, TornTail};
use crate::schema::Schema;
use crate::segment::{list_segments, segment_name, Next, SegmentCursor, INDEX_FILE};

/// When appended records reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// A commit returns after an fsync that covers it (shared by concurrent commits).
    EveryCommit,
    /// A background thread fsyncs every N milliseconds; a commit returns once written to the
    /// OS. A machine crash can lose up to N ms of acknowledged commits.
    EveryMillis(u64),
    /// Commits never wait for an fsync; a machine crash can lose acknowledged commits. A
    /// process crash loses nothing that `commit` acknowledged. (Segments are still fsynced
    /// when closed, and in the background as they grow: see `WRITEBACK_STEP`.)
    Never,
}

impl std::str::FromStr for SyncPolicy {
    type Err = Error;

    /// `commit`, `never`, or a number of milliseconds such as `10ms` or `10`.
    fn from_str(s: &str) -> Result<SyncPolicy> {
        match s {
            "commit" | "every-commit" => Ok(SyncPolicy::EveryCommit),
            "never" => Ok(SyncPolicy::Never),
            other => other
                .trim_end_matches("ms")
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .map(SyncPolicy::EveryMillis)
                .ok_or_else(|| {
                    Error::Invalid(format!(
                        "sync policy {other:?}: expected commit, never or a number of milliseconds"
                    ))
                }),
        }
    }
}

/// How a [`BinlogWriter`] writes. Start from [`WriterOptions::new`] and change fields.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// The id of the server that writes this binlog. It goes into every segment's prelude and
    /// header, and opening a directory whose last segment another server id wrote is refused.
    /// 0 is reserved.
    pub server_id: u32,
    /// Rotate to a new segment once the current one would grow past this size, in bytes. A
    /// segment holds at least one record, however large.
    pub segment_bytes: u64,
    /// When commits reach the disk.
    pub sync: SyncPolicy,
    /// Largest record payload accepted, in bytes: a larger record is refused when appended.
    /// Recovering the last segment reads frames up to this or [`DEFAULT_MAX_FRAME`],
    /// whichever is larger; a frame announcing more is corrupt.
    pub max_frame: u32,
    /// Whether a torn tail found when opening is cut off ([`RecoveryMode::TolerateTornTail`])
    /// or refused ([`RecoveryMode::Strict`]).
    pub recovery: RecoveryMode,
    /// The first sequence number of an empty binlog.
    pub first_seq: u64,
}

impl WriterOptions {
    /// The defaults for `server_id`: 64 MiB segments, frames up to [`DEFAULT_MAX_FRAME`], an
    /// fsync for every commit,
    /// torn tails cut off, sequence numbers starting at 1.
    pub fn new(server_id: u32) -> WriterOptions {
        WriterOptions {
            server_id,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            sync: SyncPolicy::EveryCommit,
            max_frame: DEFAULT_MAX_FRAME,
            recovery: RecoveryMode::TolerateTornTail,
            first_seq: 1,
        }
    }
}

/// What opening found.
#[derive(Debug, Clone)]
pub struct Recovered {
    /// The last sequence number in the binlog (first_seq - 1 when empty).
    pub last_seq: u64,
    /// A torn tail that was cut off, if there was one.
    pub cut: Option<TornTail>,
    /// Schema after the last record.
    pub schema: Schema,
    /// Where the next record goes.
    pub end: Position,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock leaves plain data behind; the poisoned flag below is what
    // records real write failures.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The most the end of a segment usually holds that no fsync has covered: one buffer written
/// out at once (1 MiB) plus one background writeback step, then the zeros set aside after
/// them. A bad frame within this distance of the end of the last segment is a torn tail when
/// opening (see `recover_last`).
const UNSYNCED_WINDOW: u64 = (1 << 20) + WRITEBACK_STEP + PREALLOCATE;

/// A background fsync is started each time a segment grows by this much. A segment is fsynced
/// before the next one starts (so that after a machine crash only the last one can be torn),
/// and that happens under the writer's lock: without these, closing a 64 MiB segment whose
/// every page was dirty stalled every commit for tens of milliseconds.
const WRITEBACK_STEP: u64 = 8 << 20;

struct State {
    file: Arc<File>,
    segment: u64,
    /// Bytes in the current segment, buffered ones included.
    segment_len: u64,
    /// The current segment file's length: its records, then zeros set aside for the next
    /// ones (see `PREALLOCATE`).
    allocated: u64,
    /// `segment_len` when the background syncer was last asked for an fsync.
    synced_from: u64,
    /// Records in the current segment.
    segment_records: u64,
    buf: Vec<u8>,
    appended: u64,
    written: u64,
    last_seq: u64,
    schema: Schema,
    /// Set after a failed write or fsync: nothing after it can be trusted to be on disk until
    /// [`BinlogWriter::heal`] cuts the file back to what can.
    poisoned: Option<Poison>,
    /// After a full disk, appends write through at once (see `WRITE_THROUGH`) until then.
    write_through_until: Option<std::time::Instant>,
    /// A rotation failed after it closed the segment (the next one may exist): nothing more
    /// goes into the closed one, whatever its size; the next append rotates first.
    rotation_pending: bool,
    /// Transactions appended and not yet known durable: (LSN at their end, seq), oldest
    /// first. Pruned as the durable LSN passes them, so it holds at most what is in flight.
    unsynced: std::collections::VecDeque<(u64, u64)>,
}

/// A failure that stopped the writer.
#[derive(Debug, Clone)]
struct Poison {
    /// The operating system's error kind (kept so that a full disk stays one upstream).
    kind: std::io::ErrorKind,
    message: String,
    /// The file it happened on.
    path: PathBuf,
    /// An fsync failed: after it, not even what was written to the OS can be trusted (the
    /// kernel may have dropped the pages it could not write), only what an fsync confirmed.
    sync: bool,
    /// A heal cut the binlog back and made it durable, but could not tell readers in other
    /// processes (`binlog.durable`): the next heal only tells them.
    unpublished: bool,
}

impl Poison {
    fn new(path: PathBuf, e: &std::io::Error, sync: bool) -> Poison {
        Poison {
            kind: e.kind(),
            message: e.to_string(),
            path,
            sync,
            unpublished: false,
        }
    }

    fn error(&self) -> Error {
        Error::io(
            &self.path,
            std::io::Error::new(
                self.kind,
                format!(
                    "the binlog writer stopped after an earlier failure ({}); it resumes once healed",
                    self.message
                ),
            ),
        )
    }
}

/// How far ahead of its records the writer makes the segment file long (zeros, in a sparse
/// file): an append that grows a file makes its fsync commit the file system's journal as
/// well, an append within the file's length does not, which on ext4 is a third fewer fsyncs'
/// worth of time (BENCHMARKS.md). Readers stop at the zeros (`Next::Unwritten`).
const PREALLOCATE: u64 = 1 << 20;

/// How long appends write through at once after a full disk: a commit that cannot be written
/// then fails before it is applied, instead of in the group commit after, which would make
/// the engine rebuild its state for every commit while the disk stays full.
const WRITE_THROUGH: Duration = Duration::from_secs(10);

/// What [`BinlogWriter::heal`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Healed {
    /// The sequence number of the last transaction kept: everything after it is gone.
    pub last_seq: u64,
    /// The LSNs (exclusive, inclusive) of the records cut off: a commit in this range failed.
    pub lost: (u64, u64),
    /// Bytes cut from the end of the segment.
    pub cut_bytes: u64,
}

/// Where the group commit stands.
struct SyncRound {
    /// The generation of the fsync in flight, or of the next one when none is.
    generation: u64,
    /// While an fsync is in flight: the LSN it makes durable.
    in_flight: Option<u64>,
    /// Threads waiting on each of `Inner::synced`: a round that ends with none waiting makes
    /// no system call to wake them.
    waiting: [usize; 2],
}

struct Inner {
    dir: PathBuf,
    opts: WriterOptions,
    state: Mutex<State>,
    /// The group commit's state; followers wait on `synced` instead of queueing on a mutex
    /// one by one.
    syncing: Mutex<SyncRound>,
    /// One condition variable per generation parity: followers covered by the fsync in
    /// flight wait on its generation's, those that appended after it started wait on the
    /// next one's. When an fsync ends, only its own followers are woken, plus one follower of
    /// the next generation to lead it. (With one condition variable, every fsync woke every
    /// waiting committer, and those it did not cover went back to sleep: with 64 committers
    /// on 2 cores that was most of the time spent switching threads.)
    synced: [Condvar; 2],
    durable: AtomicU64,
    /// The last transaction known durable (see [`BinlogWriter::durable_seq`]).
    durable_seq: AtomicU64,
    notifier: Arc<Notifier>,
    stop: AtomicBool,
    /// Wakes the background syncer (see `WRITEBACK_STEP` and [`BinlogWriter::sync_within`]).
    nudge: std::sync::mpsc::SyncSender<()>,
    /// A segment grew by `WRITEBACK_STEP`: the syncer fsyncs as soon as it wakes.
    writeback_due: AtomicBool,
    /// The deadline of the earliest [`BinlogWriter::sync_within`] request not yet served.
    sync_due: Mutex<Option<Instant>>,
    /// Segments below this were purged (or are being): a rotation's new index leaves them
    /// out even while their files are still being removed.
    purged_below: AtomicU64,
    /// LSN ranges (exclusive, inclusive) that heals cut off; LSNs are never reused, so a
    /// commit in one of them failed even though the durable LSN has passed it.
    lost: Mutex<Vec<(u64, u64, std::io::ErrorKind)>>,
    /// The end of the last lost range: commits above it need not look at `lost`.
    lost_through: AtomicU64,
    /// Heals so far: a reader holding records it has not yet been allowed to send compares
    /// this to know they may be gone.
    heals: AtomicU64,
    /// fsyncs of segment files that succeeded (commits, rotations, heals), for operators.
    fsyncs: AtomicU64,
    /// Everything up to this LSN is written to the OS (see [`BinlogWriter::acknowledged_lsn`]).
    written_lsn: AtomicU64,
    /// Whether `State::poisoned` is set, readable without the lock (every commit asks).
    stopped: AtomicBool,
    /// The durable end, for readers in other processes (see [`crate::durable`]).
    published: Publisher,
}

/// Appends records to a binlog directory. Safe to share between threads.
///
/// One writer per directory: a second one is refused while the first is open (see
/// [`crate::durable`]). Dropping the writer stops its background fsync thread and fsyncs
/// what was appended.
pub struct BinlogWriter {
    inner: Arc<Inner>,
    syncer: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for BinlogWriter {
    /// The directory, options and durable LSN; it takes no lock, so it shows nothing of the
    /// state behind one (buffered records, last sequence number).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinlogWriter")
            .field("dir", &self.inner.dir)
            .field("options", &self.inner.opts)
            .field("durable_lsn", &self.durable_lsn())
            .finish_non_exhaustive()
    }
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

fn sync_dir(dir: &Path) -> Result<()> {
    failpoint::check("binlog::dir_sync")
        .and_then(|()| File::open(dir))
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Creates a segment atomically: prelude and header are written to a temporary file, synced,
/// and renamed into place, so a segment on disk always has a whole header.
fn create_segment(
    dir: &Path,
    number: u64,
    server_id: u32,
    first_seq: u64,
    schema: &Schema,
    purged_below: u64,
) -> Result<(File, u64)> {
    let header = SegmentHeader {
        server_id,
        first_seq,
        created_us: now_us(),
        databases: schema.databases.iter().cloned().collect(),
        tables: schema.tables.values().cloned().collect(),
    };
    let mut bytes = Prelude {
        version: FormatVersion::CURRENT as u16,
        server_id,
        first_seq,
    }
    .encode()
    .to_vec();
    write_frame(&codec::encode(&header)?, &mut bytes)?;
    let path = dir.join(segment_name(number));
    if let Some(len) = left_by_a_failed_rotation(dir, number, server_id, first_seq)? {
        // An earlier attempt renamed this segment into place and then failed (its directory
        // sync or the index). Readers may have opened it since: it is kept, never renamed
        // over, or they would go on reading a file the writer no longer writes.
        sync_dir(dir)?;
        failpoint::synced(&path, len);
        write_index(dir, purged_below)?;
        let f = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        return Ok((f, len));
    }
    let tmp = dir.join(format!("{}.tmp", segment_name(number)));
    let written = File::create(&tmp).and_then(|mut f| {
        failpoint::write_all("binlog::segment_create", &mut f, &bytes)?;
        f.sync_all()
    });
    if let Err(e) = written {
        // A full disk must not be kept full by the attempt.
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(&tmp, e));
    }
    if let Err(e) =
        failpoint::check("binlog::segment_rename").and_then(|()| fs::rename(&tmp, &path))
    {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(&path, e));
    }
    sync_dir(dir)?;
    failpoint::synced(&path, bytes.len() as u64);
    write_index(dir, purged_below)?;
    let f = OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    Ok((f, bytes.len() as u64))
}

/// The length of segment `number` when an earlier rotation left it in place (renamed, then
/// failed): a prelude and header of this writer's `server_id` and `first_seq`, and no record.
/// `None` when there is no such file; any other file there is refused, not replaced.
fn left_by_a_failed_rotation(
    dir: &Path,
    number: u64,
    server_id: u32,
    first_seq: u64,
) -> Result<Option<u64>> {
    let path = dir.join(segment_name(number));
    let len = match fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    // The header was written with no frame limit but the format's (the writer's own may be
    // lower): it is read back with that limit too.
    let found = SegmentCursor::open(dir, number, u32::MAX).map(|c| {
        let ours = c.prelude.server_id == server_id && c.prelude.first_seq == first_seq;
        (ours, c.offset())
    });
    match found {
        Ok((true, header_end)) if header_end == len => Ok(Some(len)),
        Err(e @ Error::Io { .. }) => Err(e),
        Ok(_) | Err(_) => Err(Error::Invalid(format!(
            "{} exists already and is not the empty segment this writer would start \
             (server {server_id}, first seq {first_seq}): it is left as it is",
            path.display()
        ))),
    }
}

/// Rewrites the index file from the segments on disk (temporary file, rename, directory sync),
/// leaving out those below `purged_below` (a purge may still be removing their files).
fn write_index(dir: &Path, purged_below: u64) -> Result<()> {
    let numbers: Vec<u64> = list_segments(dir)?
        .into_iter()
        .filter(|&n| n >= purged_below)
        .collect();
    write_index_of(dir, &numbers)
}

/// Rewrites the index file naming `numbers`.
fn write_index_of(dir: &Path, numbers: &[u64]) -> Result<()> {
    let mut text = String::new();
    for &n in numbers {
        text.push_str(&segment_name(n));
        text.push('\n');
    }
    let tmp = dir.join(format!("{INDEX_FILE}.tmp"));
    let path = dir.join(INDEX_FILE);
    let written = File::create(&tmp).and_then(|mut f| {
        failpoint::write_all("binlog::index_write", &mut f, text.as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(&tmp, e));
    }
    fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    sync_dir(dir)
}

/// Scans the last segment: its schema, last sequence, and where whole records end.
fn recover_last(dir: &Path, number: u64, opts: &WriterOptions) -> Result<(Recovered, u64)> {
    // What was written under a larger limit (the default, before this node lowered its own)
    // is read back whole: the limit is the writer's, not the reader's.
    let read_max = opts.max_frame.max(DEFAULT_MAX_FRAME);
    let mut cursor = SegmentCursor::open(dir, number, read_max)?;
    if cursor.prelude.server_id != opts.server_id {
        return Err(Error::Invalid(format!(
            "{} was written by server id {}, not {}; open it with server id {}",
            dir.display(),
            cursor.prelude.server_id,
            opts.server_id,
            cursor.prelude.server_id
        )));
    }
    let mut schema = Schema::from_header(&cursor.header.databases, &cursor.header.tables);
    let mut last_seq = cursor.prelude.first_seq - 1;
    let mut records = 0;
    let cut = loop {
        match cursor.read_next()? {
            Next::Record {
                position, record, ..
            } => {
                records += 1;
                if let Record::Transaction(tx) = record {
                    if tx.seq != last_seq + 1 {
                        return Err(Error::SequenceGap {
                            position,
                            expected: last_seq + 1,
                            found: tx.seq,
                        });
                    }
                    last_seq = tx.seq;
                    for ev in &tx.events {
                        if let Event::Ddl(ddl) = ev {
                            schema.apply(ddl);
                        }
                    }
                }
            }
            // The space the writer kept ahead of its records (it crashed with it there).
            Next::End { trailing: 0, .. } | Next::Unwritten { .. } => break None,
            Next::End { position, trailing } => {
                break Some(TornTail {
                    position,
                    bytes: trailing,
                })
            }
            // Garbage at the end of the last segment, no longer than what the writer can have
            // had unsynced and followed by no whole record, is a write a power loss
            // interrupted (the disk kept part of it, or other blocks): nothing there was
            // acknowledged with `EveryCommit`. Longer, or with records after it, it is damage
            // to what was acknowledged, and opening refuses it.
            Next::Bad {
                position,
                tail_like,
                trailing,
                ..
            } if tail_like
                || (trailing <= UNSYNCED_WINDOW && !cursor.valid_frame_follows(64 << 20)) =>
            {
                break Some(TornTail {
                    position,
                    bytes: trailing,
                })
            }
            Next::Bad {
                position, reason, ..
            } => return Err(Error::Corruption { position, reason }),
        }
    };
    let end = Position {
        segment: number,
        offset: cursor.offset(),
    };
    if let Some(torn) = cut {
        if opts.recovery == RecoveryMode::Strict {
            return Err(Error::TornTail {
                position: torn.position,
                bytes: torn.bytes,
            });
        }
        let path = dir.join(segment_name(number));
        let f = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        failpoint::check("binlog::truncate")
            .and_then(|()| f.set_len(end.offset))
            .and_then(|_| f.sync_all())
            .map_err(|e| Error::io(&path, e))?;
        failpoint::synced_cut(&path, end.offset);
    }
    Ok((
        Recovered {
            last_seq,
            cut,
            schema,
            end,
        },
        records,
    ))
}

impl BinlogWriter {
    /// Opens (creating if needed) a binlog directory for appending. A torn tail of the last
    /// segment is cut back to the last whole record, as `opts.recovery` allows.
    pub fn open(dir: &Path, opts: WriterOptions) -> Result<(BinlogWriter, Recovered)> {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        if opts.server_id == 0 {
            return Err(Error::Invalid("server id 0 is reserved".into()));
        }
        // Before recovery touches a file: readers in other processes go by this lock.
        let notifier = Arc::new(Notifier::default());
        let published = Publisher::open(dir, 0, 0, Arc::clone(&notifier))?;
        let segments = list_segments(dir)?;
        let (file, segment, segment_len, segment_records, recovered) = match segments.last() {
            None => {
                let schema = Schema::default();
                let (f, len) = create_segment(dir, 1, opts.server_id, opts.first_seq, &schema, 0)?;
                let end = Position {
                    segment: 1,
                    offset: len,
                };
                (
                    f,
                    1,
                    len,
                    0,
                    Recovered {
                        last_seq: opts.first_seq - 1,
                        cut: None,
                        schema,
                        end,
                    },
                )
            }
            Some(&last) => {
                let (rec, records) = recover_last(dir, last, &opts)?;
                let path = dir.join(segment_name(last));
                let f = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| Error::io(&path, e))?;
                (f, last, rec.end.offset, records, rec)
            }
        };
        published.publish(segment, segment_len);
        let allocated = file
            .metadata()
            .map_err(|e| Error::io(dir.join(segment_name(segment)), e))?
            .len()
            .max(segment_len);
        let state = State {
            file: Arc::new(file),
            segment,
            segment_len,
            allocated,
            synced_from: segment_len,
            segment_records,
            buf: Vec::with_capacity(64 << 10),
            appended: 0,
            written: 0,
            last_seq: recovered.last_seq,
            schema: recovered.schema.clone(),
            poisoned: None,
            write_through_until: None,
            rotation_pending: false,
            unsynced: std::collections::VecDeque::new(),
        };
        let (nudge, nudged) = std::sync::mpsc::sync_channel(1);
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            opts,
            state: Mutex::new(state),
            syncing: Mutex::new(SyncRound {
                generation: 0,
                in_flight: None,
                waiting: [0; 2],
            }),
            synced: [Condvar::new(), Condvar::new()],
            durable: AtomicU64::new(0),
            // What recovery found is what the files hold.
            durable_seq: AtomicU64::new(recovered.last_seq),
            notifier,
            stop: AtomicBool::new(false),
            nudge,
            writeback_due: AtomicBool::new(false),
            sync_due: Mutex::new(None),
            purged_below: AtomicU64::new(0),
            lost: Mutex::new(Vec::new()),
            lost_through: AtomicU64::new(0),
            heals: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            written_lsn: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            published,
        });
        // The background syncer: every N ms with that policy, whenever a segment has grown by
        // `WRITEBACK_STEP`, and when a deferred sync falls due.
        let period = match inner.opts.sync {
            SyncPolicy::EveryMillis(ms) => Some(Duration::from_millis(ms)),
            SyncPolicy::EveryCommit | SyncPolicy::Never => None,
        };
        let syncer = {
            let inner = Arc::clone(&inner);
            std::thread::Builder::new()
                .name("binlog-sync".into())
                .spawn(move || inner.run_syncer(&nudged, period))
                .map_err(|e| Error::io(dir, e))?
        };
        Ok((
            BinlogWriter {
                inner,
                syncer: Some(syncer),
            },
            recovered,
        ))
    }

    /// Removes the segments numbered below `keep_from` (whole files; never the segment being
    /// written), oldest first, and returns their numbers. The index is rewritten without them
    /// before any file goes, and files go oldest first, so a crash at any point leaves a
    /// directory that opens: an index naming only files that exist, and segments that still
    /// follow each other (a file the crash left is listed again, and removed next time).
    /// Readers that have a removed segment open keep reading it; one that asks for it later
    /// finds the binlog starting after it.
    pub fn purge_before(&self, keep_from: u64) -> Result<Vec<u64>> {
        // Under the lock: the index without them, and the floor below which a rotation's
        // index leaves files out. The files go after it, so commits do not wait for them.
        let gone = {
            let st = lock(&self.inner.state);
            let keep_from = keep_from.min(st.segment);
            let all = list_segments(&self.inner.dir)?;
            let (gone, kept): (Vec<u64>, Vec<u64>) = all.into_iter().partition(|&n| n < keep_from);
            if gone.is_empty() {
                return Ok(gone);
            }
            self.inner
                .purged_below
                .fetch_max(keep_from, Ordering::SeqCst);
            write_index_of(&self.inner.dir, &kept)?;
            gone
        };
        for &n in &gone {
            let path = self.inner.dir.join(segment_name(n));
            match failpoint::check("binlog::remove").and_then(|()| fs::remove_file(&path)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        sync_dir(&self.inner.dir)?;
        Ok(gone)
    }

    /// The binlog directory this writer appends to.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the writer was opened with.
    pub fn options(&self) -> &WriterOptions {
        &self.inner.opts
    }

    /// Wakes in-process tailers after each write.
    pub fn notifier(&self) -> Arc<Notifier> {
        Arc::clone(&self.inner.notifier)
    }

    /// The sequence number of the last transaction appended (committed or not), or
    /// `first_seq - 1` while the binlog has none. The next transaction must carry this plus 1.
    pub fn last_seq(&self) -> u64 {
        lock(&self.inner.state).last_seq
    }

    /// The schema as of the last appended record.
    pub fn schema(&self) -> Schema {
        lock(&self.inner.state).schema.clone()
    }

    /// Where the next record will go (buffered records included).
    pub fn end_position(&self) -> Position {
        let st = lock(&self.inner.state);
        Position {
            segment: st.segment,
            offset: st.segment_len,
        }
    }

    /// Buffers one record and returns its LSN; a transaction must carry the next sequence
    /// number. Nothing is durable until [`BinlogWriter::commit`] says so.
    pub fn append(&self, record: &Record) -> Result<u64> {
        self.append_encoded(record, |buf| codec::encode_record_into(record, buf))
    }

    /// [`BinlogWriter::append`] of a transaction whose events the caller encoded ahead (see
    /// [`codec::EncodedEvents`]).
    pub fn append_transaction(
        &self,
        record: &Record,
        events: &codec::EncodedEvents,
    ) -> Result<u64> {
        self.append_encoded(record, |buf| match record {
            Record::Transaction(tx) => events.encode_record(tx, buf),
            Record::Heartbeat(_) => codec::encode_record_into(record, buf),
        })
    }

    /// Frames `record` as `encode` writes it, outside the lock, in a buffer this thread
    /// reuses (so concurrent appends only serialise on the copy), and appends the frame.
    fn append_encoded(
        &self,
        record: &Record,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<u64> {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        SCRATCH.with(|cell| {
            let mut frame = cell.borrow_mut();
            frame.clear();
            write_frame_with(&mut frame, encode)?;
            let lsn = self.append_framed(record, &frame);
            // A huge record's buffer is not kept for the thread's next append.
            if frame.capacity() > 16 << 20 {
                *frame = Vec::new();
            }
            lsn
        })
    }

    /// Appends one whole frame (header, checksum and payload already computed, outside the
    /// lock) holding `record`.
    fn append_framed(&self, record: &Record, frame: &[u8]) -> Result<u64> {
        let payload_len = frame.len() - crate::format::FRAME_HEADER_LEN;
        if payload_len > self.inner.opts.max_frame as usize {
            return Err(Error::TooLarge {
                bytes: payload_len as u64,
                max: self.inner.opts.max_frame,
            });
        }
        let mut st = lock(&self.inner.state);
        if let Some(p) = &st.poisoned {
            return Err(p.error());
        }
        if let Record::Transaction(tx) = record {
            if tx.seq != st.last_seq + 1 {
                return Err(Error::Invalid(format!(
                    "transaction seq {} does not follow {}",
                    tx.seq, st.last_seq
                )));
            }
        }
        let len = frame.len() as u64;
        if st.rotation_pending
            || (st.segment_records > 0 && st.segment_len + len > self.inner.opts.segment_bytes)
        {
            self.inner.rotate(&mut st)?;
        }
        st.buf.extend_from_slice(frame);
        st.segment_len += len;
        if st.segment_len >= st.synced_from + WRITEBACK_STEP {
            st.synced_from = st.segment_len;
            self.inner.writeback_due.store(true, Ordering::Release);
            // Full means a nudge is pending already.
            let _ = self.inner.nudge.try_send(());
        }
        st.segment_records += 1;
        st.appended += len;
        if let Record::Transaction(tx) = record {
            st.last_seq = tx.seq;
            self.inner.prune_unsynced(&mut st);
            let end = st.appended;
            st.unsynced.push_back((end, tx.seq));
            for ev in &tx.events {
                if let Event::Ddl(ddl) = ev {
                    st.schema.apply(ddl);
                }
            }
        }
        let write_through = st
            .write_through_until
            .is_some_and(|until| std::time::Instant::now() < until);
        if write_through || st.buf.len() >= (1 << 20) {
            self.inner.write_out(&mut st)?;
        }
        Ok(st.appended)
    }

    /// Closes the current segment and starts the next one (FLUSH BINARY LOGS), so that what
    /// comes next is in a file of its own. A segment that holds no record yet is already
    /// such a file and is kept.
    pub fn rotate_now(&self) -> Result<()> {
        let mut st = lock(&self.inner.state);
        if let Some(p) = &st.poisoned {
            return Err(p.error());
        }
        if st.segment_records == 0 {
            return Ok(());
        }
        self.inner.rotate(&mut st)
    }

    /// Makes everything up to `lsn` as durable as the sync policy promises, and visible to
    /// readers.
    /// A commit whose record a [`BinlogWriter::heal`] cut off fails, with the error that
    /// stopped the writer, even after the durable LSN has moved past it.
    pub fn commit(&self, lsn: u64) -> Result<()> {
        self.inner.check_lost(lsn)?;
        let r = match self.inner.opts.sync {
            SyncPolicy::EveryCommit => self.inner.sync_to(lsn),
            SyncPolicy::EveryMillis(_) | SyncPolicy::Never => self.flush(),
        };
        // A heal may have run while this commit waited.
        self.inner.check_lost(lsn)?;
        r
    }

    /// Whether a failed write or fsync stopped the writer: appends and commits fail until
    /// [`BinlogWriter::heal`] succeeds.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::Acquire)
    }

    /// How many times [`BinlogWriter::heal`] has cut the binlog back. A reader that holds
    /// records not yet durable must drop them and read again when this moves.
    pub fn heals(&self) -> u64 {
        self.inner.heals.load(Ordering::Acquire)
    }

    /// The fsyncs of segment files that succeeded since this writer opened: one per commit
    /// group, rotation and heal, and one per period or deferred sync that had something to
    /// make durable (MySQL's `Innodb_os_log_fsyncs`, for the binlog).
    pub fn fsyncs(&self) -> u64 {
        self.inner.fsyncs.load(Ordering::Relaxed)
    }

    /// The LSN up to which a reader may be shown what was committed: what the sync policy
    /// acknowledges to committers (fsynced with `EveryCommit`, written to the OS otherwise).
    pub fn acknowledged_lsn(&self) -> u64 {
        match self.inner.opts.sync {
            SyncPolicy::EveryCommit => self.durable_lsn(),
            SyncPolicy::EveryMillis(_) | SyncPolicy::Never => {
                self.inner.written_lsn.load(Ordering::Acquire)
            }
        }
    }

    /// Whether the commit whose record ends at `lsn` was cut off by a heal (it failed).
    pub fn is_lost(&self, lsn: u64) -> bool {
        self.inner.check_lost(lsn).is_err()
    }

    /// After a failed write or fsync, cuts the current segment back to the last byte that can
    /// be trusted, fsyncs it, and lets the writer go on; `None` when it was not stopped.
    ///
    /// After a failed write, trusted is what was written before it (whole, in the page cache),
    /// which the heal then fsyncs; after a failed fsync only what an earlier fsync confirmed
    /// (the kernel may already have dropped pages it could not write, so what reads back
    /// from the file proves nothing: PostgreSQL's lesson). Every commit after that point
    /// fails, including those still waiting, and its LSN is never reused; a commit before it
    /// that was waiting is durable once the heal returns. The caller that applied the failed
    /// commits to any state must take them back ([`Healed::last_seq`] says up to where).
    ///
    /// The heal is published in `binlog.durable` for readers in other processes (a record
    /// written next may end where a cut one did). If that write fails, the cut stands (and
    /// is returned) but the writer stays stopped, [`BinlogWriter::is_stopped`], until a
    /// later heal has published it; that one cuts nothing and fails while it cannot.
    pub fn heal(&self) -> Result<Option<Healed>> {
        let inner = &*self.inner;
        // No fsync may run on the old file while it is cut, nor a new one start.
        let mut round = lock(&inner.syncing);
        while round.in_flight.is_some() {
            let generation = round.generation;
            round.waiting[parity(generation)] += 1;
            round = inner.synced[parity(generation)]
                .wait(round)
                .unwrap_or_else(|p| p.into_inner());
            round.waiting[parity(generation)] -= 1;
        }
        let mut st = lock(&inner.state);
        let Some(poison) = st.poisoned.clone() else {
            return Ok(None);
        };
        if poison.unpublished {
            inner
                .published
                .healed(st.segment, st.segment_len)
                .map_err(|e| Error::io(inner.published.path(), e))?;
            st.poisoned = None;
            inner.stopped.store(false, Ordering::Release);
            let healed = Healed {
                last_seq: st.last_seq,
                lost: (st.appended, st.appended),
                cut_bytes: 0,
            };
            drop(st);
            drop(round);
            inner.notifier.notify();
            return Ok(Some(healed));
        }
        let trusted = if poison.sync {
            inner.durable.load(Ordering::Acquire)
        } else {
            st.written
        };
        // Rotation makes everything before a new segment durable, so what is cut lies in the
        // current one.
        let cut = st.appended - trusted;
        let offset = st.segment_len.checked_sub(cut).ok_or_else(|| {
            Error::Invalid(format!(
                "heal: {cut} bytes to cut but the segment holds {}",
                st.segment_len
            ))
        })?;
        let path = inner.dir.join(segment_name(st.segment));
        let cut_and_synced = failpoint::check("binlog::truncate")
            .and_then(|()| OpenOptions::new().write(true).open(&path))
            .and_then(|f| {
                f.set_len(offset)?;
                failpoint::check("binlog::fsync")?;
                f.sync_all()
            });
        if let Err(e) = cut_and_synced {
            // What was written before cannot be known on disk now: the next heal trusts only
            // what an fsync confirmed.
            inner.poison(&mut st, Poison::new(path.clone(), &e, true));
            return Err(Error::io(&path, e));
        }
        inner.fsyncs.fetch_add(1, Ordering::Relaxed);
        failpoint::synced_cut(&path, offset);
        let reopened =
            recover_last(&inner.dir, st.segment, &inner.opts).and_then(|(rec, records)| {
                if rec.end.offset != offset {
                    return Err(Error::Corruption {
                        position: rec.end,
                        reason: format!(
                        "heal: the segment cut at offset {offset} holds whole records only to {}",
                        rec.end.offset
                    ),
                    });
                }
                let file = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| Error::io(&path, e))?;
                Ok((rec, records, file))
            });
        let (rec, records, file) = match reopened {
            Ok(r) => r,
            Err(e) => {
                // Commits past the durable point may have been told they failed: the next
                // heal keeps nothing that an fsync did not confirm.
                if let Some(p) = st.poisoned.as_mut() {
                    p.sync = true;
                }
                return Err(e);
            }
        };
        st.file = Arc::new(file);
        st.buf.clear();
        st.segment_len = offset;
        st.allocated = offset;
        st.synced_from = offset;
        st.segment_records = records;
        st.last_seq = rec.last_seq;
        st.schema = rec.schema;
        st.unsynced.clear();
        let lost = (trusted, st.appended);
        // LSNs go on from where they were: a waiter for a lost one must not find it durable
        // because a later commit reused it.
        st.written = st.appended;
        if matches!(
            poison.kind,
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
        ) {
            st.write_through_until = Some(std::time::Instant::now() + WRITE_THROUGH);
        }
        if lost.1 > lost.0 {
            lock(&inner.lost).push((lost.0, lost.1, poison.kind));
            inner.lost_through.fetch_max(lost.1, Ordering::AcqRel);
        }
        inner.written_lsn.store(st.written, Ordering::Release);
        inner.durable.fetch_max(st.appended, Ordering::AcqRel);
        inner.durable_seq.store(rec.last_seq, Ordering::Release);
        // Before any later fsync can publish an end past what was cut: a reader that read
        // the cut records sees the count move with the end that covers their places.
        let published = inner.published.healed(st.segment, offset);
        inner.heals.fetch_add(1, Ordering::AcqRel);
        match published {
            Ok(()) => {
                st.poisoned = None;
                inner.stopped.store(false, Ordering::Release);
            }
            Err(e) => {
                // The cut is durable and every commit's fate known, but readers in other
                // processes were not told: nothing may be written over what was cut (nor
                // a rotation pass it) until they are.
                let mut p = Poison::new(inner.published.path().to_path_buf(), &e, true);
                p.unpublished = true;
                st.poisoned = Some(p);
            }
        }
        drop(st);
        drop(round);
        inner.notifier.notify();
        Ok(Some(Healed {
            last_seq: rec.last_seq,
            lost,
            cut_bytes: cut,
        }))
    }

    /// Appends a record and commits it.
    pub fn append_commit(&self, record: &Record) -> Result<u64> {
        let lsn = self.append(record)?;
        self.commit(lsn)?;
        Ok(lsn)
    }

    /// Writes buffered records to the OS (visible to readers, not yet durable).
    pub fn flush(&self) -> Result<()> {
        let mut st = lock(&self.inner.state);
        self.inner.write_out(&mut st)
    }

    /// The LSN up to which everything appended is fsynced (with sync policy every commit).
    pub fn durable_lsn(&self) -> u64 {
        self.inner.durable.load(Ordering::Acquire)
    }

    /// The sequence number of the last transaction that is durable (fsynced, as
    /// [`BinlogWriter::durable_lsn`] counts it): what may leave the primary for a replica.
    /// With [`SyncPolicy::Never`] nothing is fsynced per commit, so this trails the written
    /// records until the background syncer or a rotation catches up.
    pub fn durable_seq(&self) -> u64 {
        let mut st = lock(&self.inner.state);
        self.inner.prune_unsynced(&mut st);
        self.inner.durable_seq.load(Ordering::Acquire)
    }

    /// Writes and fsyncs everything appended so far.
    pub fn sync(&self) -> Result<()> {
        self.inner.sync_appended()
    }

    /// Has the background syncer write and fsync everything appended so far within `delay`,
    /// without waiting for it: a replica's applier uses it so that its apply never waits for
    /// the disk, and its fsyncs are one per `delay` at most however its transactions arrive.
    /// Requests before that fsync starts share it (the earliest deadline holds). A failure
    /// stops the writer as any fsync's does: the next append, commit or
    /// [`BinlogWriter::is_stopped`] shows it, and [`BinlogWriter::heal`] cuts back what it
    /// did not cover.
    pub fn sync_within(&self, delay: Duration) {
        let due = Instant::now() + delay;
        {
            let mut pending = lock(&self.inner.sync_due);
            if pending.is_some_and(|d| d <= due) {
                return;
            }
            *pending = Some(due);
        }
        // Full means a nudge is pending already; the syncer reads the deadline when it wakes.
        let _ = self.inner.nudge.try_send(());
    }

    /// Fails, with the error that stopped the writer, when a heal cut off the commit whose
    /// record ends at `lsn` (see [`BinlogWriter::is_lost`]).
    pub fn check_commit(&self, lsn: u64) -> Result<()> {
        self.inner.check_lost(lsn)
    }

    /// A handle that makes everything appended so far durable, for a thread that does not
    /// own the writer (the engine's snapshot thread).
    pub fn sync_handle(&self) -> SyncHandle {
        SyncHandle {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// Makes a writer's appended records durable from another thread; see
/// [`BinlogWriter::sync_handle`]. Once the writer is dropped (which syncs everything), a sync
/// through the handle finds nothing left to do.
pub struct SyncHandle {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SyncHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncHandle")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl SyncHandle {
    /// What [`BinlogWriter::sync`] does.
    pub fn sync(&self) -> Result<()> {
        self.inner.sync_appended()
    }
}

impl Inner {
    /// Stops the writer after a failed write or fsync (see [`BinlogWriter::heal`]).
    fn poison(&self, st: &mut State, poison: Poison) {
        st.poisoned = Some(poison);
        self.stopped.store(true, Ordering::Release);
    }

    /// Fails a commit whose record a heal cut off, with the kind of error that caused it.
    fn check_lost(&self, lsn: u64) -> Result<()> {
        if lsn > self.lost_through.load(Ordering::Acquire) {
            return Ok(());
        }
        let lost = lock(&self.lost);
        match lost.iter().find(|&&(from, to, _)| lsn > from && lsn <= to) {
            None => Ok(()),
            Some(&(_, _, kind)) => Err(Error::io(
                &self.dir,
                std::io::Error::new(
                    kind,
                    "the commit was not made durable: a binlog write or fsync failed, and the \
                     binlog was cut back to before it (the transaction did not happen)",
                ),
            )),
        }
    }

    /// Drops the transactions the durable LSN has passed, moving `durable_seq` up to them.
    fn prune_unsynced(&self, st: &mut State) {
        let durable = self.durable.load(Ordering::Acquire);
        while let Some(&(end, seq)) = st.unsynced.front() {
            if end > durable {
                break;
            }
            self.durable_seq.fetch_max(seq, Ordering::AcqRel);
            st.unsynced.pop_front();
        }
    }

    fn sync_appended(&self) -> Result<()> {
        let target = lock(&self.state).appended;
        self.sync_to(target)
    }

    fn write_out(&self, st: &mut State) -> Result<()> {
        if let Some(p) = &st.poisoned {
            return Err(p.error());
        }
        if st.buf.is_empty() {
            return Ok(());
        }
        let file = Arc::clone(&st.file);
        let at = st.segment_len - st.buf.len() as u64;
        let written = self
            .preallocate(st)
            .and_then(|()| failpoint::write_all_at("binlog::write", &file, &st.buf, at));
        if let Err(e) = written {
            let path = self.dir.join(segment_name(st.segment));
            self.poison(st, Poison::new(path.clone(), &e, false));
            return Err(Error::io(path, e));
        }
        st.written += st.buf.len() as u64;
        self.written_lsn.store(st.written, Ordering::Release);
        st.buf.clear();
        if self.opts.sync == SyncPolicy::Never {
            // Nothing is ever fsynced for a commit: what is written is what readers get, as
            // the engine's durable position counts it.
            self.published.publish(st.segment, st.segment_len);
            self.notifier.notify();
        }
        // Otherwise readers pass on only what an fsync covered, and the fsync notifies: a
        // wake-up here would find nothing new for them (one per commit group, for nothing).
        Ok(())
    }

    /// Makes the segment file long enough for what is buffered, and `PREALLOCATE` more (up
    /// to the segment's size): writes within a file's length change no metadata, so their
    /// fsync is one flush of data instead of a journal commit too (docs/format.md).
    fn preallocate(&self, st: &mut State) -> std::io::Result<()> {
        if st.segment_len <= st.allocated {
            return Ok(());
        }
        let to = (st.segment_len + PREALLOCATE).min(self.opts.segment_bytes.max(st.segment_len));
        st.file.set_len(to)?;
        st.allocated = to;
        Ok(())
    }

    /// Cuts the segment file back to its records (before it is closed: a closed segment is
    /// exactly its records).
    fn cut_preallocated(&self, st: &mut State) -> std::io::Result<()> {
        if st.allocated > st.segment_len {
            failpoint::check("binlog::truncate")?;
            st.file.set_len(st.segment_len)?;
            st.allocated = st.segment_len;
        }
        Ok(())
    }

    /// The background syncer's loop (see [`BinlogWriter::open`]): it fsyncs every `period`
    /// with [`SyncPolicy::EveryMillis`], when a segment has grown by `WRITEBACK_STEP`, and when
    /// a [`BinlogWriter::sync_within`] deadline passes; until the writer is dropped.
    fn run_syncer(&self, nudged: &std::sync::mpsc::Receiver<()>, period: Option<Duration>) {
        let mut tick = period.map(|p| Instant::now() + p);
        loop {
            let due = *lock(&self.sync_due);
            let wake = match (tick, due) {
                (Some(t), Some(d)) => Some(t.min(d)),
                (t, d) => t.or(d),
            };
            let timeout = wake.map_or(Duration::MAX, |w| {
                w.saturating_duration_since(Instant::now())
            });
            let woke = nudged.recv_timeout(timeout);
            if self.stop.load(Ordering::Acquire)
                || woke == Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
            {
                break;
            }
            let now = Instant::now();
            let ticked = tick.is_some_and(|t| t <= now);
            let fell_due = {
                let mut due = lock(&self.sync_due);
                let passed = due.is_some_and(|d| d <= now);
                if passed {
                    *due = None;
                }
                passed
            };
            let writeback = self.writeback_due.swap(false, Ordering::AcqRel);
            if !(ticked || fell_due || writeback) {
                // A nudge for a deadline still ahead: sleep until it.
                continue;
            }
            let target = lock(&self.state).appended;
            // A failure poisons the writer; the next commit reports it.
            let _ = self.sync_to(target);
            // The period runs from the end of the last fsync, whatever caused it: a slow
            // fsync is not followed by another at once.
            tick = period.map(|p| Instant::now() + p);
        }
    }

    fn sync_to(&self, lsn: u64) -> Result<()> {
        if self.durable.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        let mut round = lock(&self.syncing);
        loop {
            if self.durable.load(Ordering::Acquire) >= lsn {
                return Ok(());
            }
            let Some(target) = round.in_flight else {
                break;
            };
            // The fsync in flight covers this commit, or the next one will: everything
            // appended before it starts (this commit was appended before we got here).
            let generation = if lsn <= target {
                round.generation
            } else {
                round.generation + 1
            };
            round.waiting[parity(generation)] += 1;
            round = self.synced[parity(generation)]
                .wait(round)
                .unwrap_or_else(|p| p.into_inner());
            round.waiting[parity(generation)] -= 1;
        }
        // This thread leads: it writes out everything appended so far and fsyncs it. Writing
        // out under the round's lock lets followers know what the fsync will cover.
        let generation = round.generation;
        let result = match self.write_out_for_sync() {
            Ok((file, target, segment, len)) => {
                round.in_flight = Some(target);
                drop(round);
                // The fsync runs without any lock: appends continue meanwhile, and the next
                // leader covers them.
                match failpoint::check("binlog::fsync").and_then(|()| file.sync_data()) {
                    Ok(()) => {
                        self.fsyncs.fetch_add(1, Ordering::Relaxed);
                        if failpoint::ENABLED {
                            failpoint::synced(&self.dir.join(segment_name(segment)), len);
                        }
                        self.durable.fetch_max(target, Ordering::AcqRel);
                        // Before the round ends, so that fsyncs publish in order; readers in
                        // this process wait on the notifier for it.
                        self.published.publish(segment, len);
                        self.notifier.notify();
                        Ok(())
                    }
                    Err(e) => {
                        let path = self.dir.join(segment_name(segment));
                        self.poison(&mut lock(&self.state), Poison::new(path.clone(), &e, true));
                        Err(Error::io(path, e))
                    }
                }
            }
            Err(e) => {
                drop(round);
                Err(e)
            }
        };
        // Whatever happened, the round ends here and the waiters hear of it: those this
        // fsync covered return (or, after a failure, try again themselves), and one of those
        // waiting for the next generation leads it.
        let mut round = lock(&self.syncing);
        round.in_flight = None;
        round.generation = generation + 1;
        let (followers, next) = (
            round.waiting[parity(generation)],
            round.waiting[parity(generation + 1)],
        );
        drop(round);
        if followers > 0 {
            self.synced[parity(generation)].notify_all();
        }
        if next > 0 {
            self.synced[parity(generation + 1)].notify_one();
        }
        result
    }

    /// Writes out the buffer; returns the file, the LSN everything up to which it holds, its
    /// segment number and its length.
    fn write_out_for_sync(&self) -> Result<(Arc<File>, u64, u64, u64)> {
        let mut st = lock(&self.state);
        self.write_out(&mut st)?;
        // Written out, the buffer is empty: the segment's length is the file's.
        Ok((Arc::clone(&st.file), st.written, st.segment, st.segment_len))
    }

    /// Closes the current segment (written and synced) and starts the next one with the
    /// current schema in its header.
    fn rotate(&self, st: &mut State) -> Result<()> {
        self.write_out(st)?;
        let path = self.dir.join(segment_name(st.segment));
        // The cut is synced with the records: a closed segment never ends in zeros.
        let closed = self.cut_preallocated(st).and_then(|()| {
            failpoint::check("binlog::fsync")?;
            st.file.sync_all()
        });
        if let Err(e) = closed {
            self.poison(st, Poison::new(path.clone(), &e, true));
            return Err(Error::io(&path, e));
        }
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        failpoint::synced(&path, st.segment_len);
        // Everything in the closing segment is on disk now, whatever happens next; readers
        // may pass all of it on (those in this process go by the published end alone).
        self.durable.fetch_max(st.written, Ordering::AcqRel);
        self.published.publish(st.segment, st.segment_len);
        let number = st.segment + 1;
        // Readers may pass to the next segment as soon as it exists, and it may exist from
        // here on even if this fails: the closed one takes no more records.
        st.rotation_pending = true;
        let (file, len) = create_segment(
            &self.dir,
            number,
            self.opts.server_id,
            st.last_seq + 1,
            &st.schema,
            self.purged_below.load(Ordering::SeqCst),
        )?;
        st.rotation_pending = false;
        st.file = Arc::new(file);
        st.segment = number;
        st.segment_len = len;
        st.allocated = len;
        st.synced_from = len;
        st.segment_records = 0;
        self.notifier.notify();
        Ok(())
    }
}

fn parity(generation: u64) -> usize {
    usize::from(generation % 2 == 1)
}

impl Drop for BinlogWriter {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Release);
        let _ = self.inner.nudge.try_send(());
        if let Some(h) = self.syncer.take() {
            let _ = h.join();
        }
        // Best effort: a clean close leaves nothing unsynced, and the segment exactly its
        // records. Errors here have no caller to go to; the records were never acknowledged
        // as durable unless commit said so.
        if self.sync().is_ok() {
            let mut st = lock(&self.inner.state);
            if st.poisoned.is_none() && st.allocated > st.segment_len {
                let _ = self
                    .inner
                    .cut_preallocated(&mut st)
                    .and_then(|()| st.file.sync_all());
            }
        }
        self.inner.published.close();
        self.inner.notifier.notify();
    }
}

/// The position where a segment's first record starts, for a freshly created segment.
pub fn first_record_offset(dir: &Path, segment: u64) -> Result<u64> {
    let c = SegmentCursor::open(dir, segment, DEFAULT_MAX_FRAME)?;
    Ok(c.offset().max(PRELUDE_LEN))
}
