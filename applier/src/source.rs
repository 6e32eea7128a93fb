//! Where transactions come from. Every source gives transactions of one primary in sequence
//! order, each with its position, and can start at any sequence number.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use binlog_format::{Notifier, Position, Record, StartAt, Tailer, Transaction};

use crate::error::{Error, Result};
use crate::snapshot_stream::SnapshotStream;

/// One transaction from a source, with where it was found.
#[derive(Debug, Clone)]
pub struct SourcedTx {
    /// The transaction, as the primary committed it.
    pub tx: Transaction,
    /// Where it was read (segment and offset in the source's binlog).
    pub position: Position,
}

/// The whole state of a primary, sent to a replica whose next transaction the primary no
/// longer has: the replica loads it in place of its own data as it arrives, then applies the
/// stream after the sequence number the snapshot stands at ([`SnapshotStream::end`] once it
/// is whole; the snapshot's own header says it from the start).
#[derive(Debug)]
pub struct Provision {
    /// The primary's server id.
    pub server_id: u32,
    /// The primary's clock when it took the snapshot, in microseconds since 1970-01-01 UTC.
    pub time_us: i64,
    /// The snapshot's bytes, as a snapshot file holds them, read as they arrive.
    pub snapshot: SnapshotStream,
}

/// A stream of a primary's transactions.
///
/// Guarantees: transactions come in sequence order, each at most once per call sequence
/// (a restarted source may repeat transactions at or after its start; the applier skips
/// those it already applied). `next` waits at most `timeout` and returns `None` when nothing
/// arrived; a corrupt record is an error naming its position and nothing after it is given.
#[async_trait]
pub trait EventSource: Send {
    /// The next transaction, or `None` when none arrived within `timeout`.
    async fn next(&mut self, timeout: Duration) -> Result<Option<SourcedTx>>;
    /// A short description for logs ("binlog directory /x/binlog").
    fn describe(&self) -> String;
    /// A snapshot to load before the transactions that follow, when the source sent one (the
    /// network stream does when the primary no longer has the next transaction). `next`
    /// returns `None` while one waits to be taken.
    fn take_provision(&mut self) -> Option<Provision> {
        None
    }
    /// Whether a `None` from `next` means the source had nothing more to give. A network
    /// source between connection attempts has asked nobody, so a run that ends once caught
    /// up (`exit_when_caught_up`) waits for it instead of taking its silence for the end.
    fn is_live(&self) -> bool {
        true
    }
    /// Where the stream starts in the source's numbering, when the source found it from the
    /// replica's positions of other servers (a failover): `(server id, seq)`, for the applier
    /// to store as applied up to `seq - 1`. `next` returns `None` while one waits.
    fn take_baseline(&mut self) -> Option<(u32, u64)> {
        None
    }
}

/// A primary's binlog directory, followed as it grows and rotates.
pub struct BinlogDirSource {
    dir: PathBuf,
    tailer: Option<Tailer>,
    /// Transactions read ahead, given out before reading more.
    ready: VecDeque<SourcedTx>,
    /// An error met while reading ahead, given out once `ready` is empty.
    failed: Option<Error>,
}

impl std::fmt::Debug for BinlogDirSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinlogDirSource")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Most transactions one trip to the blocking reader takes when they are there already.
/// Reading the tailer blocks, so it runs on tokio's blocking threads, and the hop there and
/// back cost more than applying a small transaction; a backlog is read in batches instead.
const READ_AHEAD: usize = 256;

impl BinlogDirSource {
    /// Follows `dir` from sequence `from_seq`. With `notifier` (same process as the writer)
    /// new records wake the source at once; without it the source polls with backoff.
    pub fn open(dir: &Path, from_seq: u64, notifier: Option<Arc<Notifier>>) -> BinlogDirSource {
        let tailer = Tailer::open(dir, StartAt::Seq(from_seq)).with_notifier_if(notifier);
        BinlogDirSource {
            dir: dir.to_path_buf(),
            tailer: Some(tailer),
            ready: VecDeque::new(),
            failed: None,
        }
    }

    /// The next transaction read ahead, else the error met while reading ahead, if any.
    fn take_ready(&mut self) -> Option<Result<Option<SourcedTx>>> {
        match self.ready.pop_front() {
            Some(tx) => Some(Ok(Some(tx))),
            None => self.failed.take().map(Err),
        }
    }
}

#[async_trait]
impl EventSource for BinlogDirSource {
    async fn next(&mut self, timeout: Duration) -> Result<Option<SourcedTx>> {
        if let Some(given) = self.take_ready() {
            return given;
        }
        let mut tailer = self
            .tailer
            .take()
            .ok_or_else(|| Error::Source("binlog source failed earlier".into()))?;
        // The tailer blocks; run it off the async threads. It waits up to `timeout` for the
        // first transaction, then takes whatever else is already there, up to READ_AHEAD.
        let (tailer, got, error) = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + timeout;
            let mut got = VecDeque::new();
            loop {
                let left = if got.is_empty() {
                    deadline.saturating_duration_since(std::time::Instant::now())
                } else {
                    Duration::ZERO
                };
                match tailer.next_timeout(left) {
                    Ok(Some((position, Record::Transaction(tx)))) => {
                        got.push_back(SourcedTx { tx, position });
                        if got.len() >= READ_AHEAD {
                            return (tailer, got, None);
                        }
                    }
                    Ok(Some((_, Record::Heartbeat(_)))) => continue,
                    Ok(None) => return (tailer, got, None),
                    Err(e) => return (tailer, got, Some(Error::from(e))),
                }
            }
        })
        .await
        .map_err(|e| Error::Source(format!("binlog reader task: {e}")))?;
        self.ready = got;
        match error {
            // The transactions before a bad record are whole: they go first, the error after
            // them, and nothing after it (the tailer is not kept).
            Some(e) => self.failed = Some(e),
            None => self.tailer = Some(tailer),
        }
        self.take_ready().unwrap_or(Ok(None))
    }

    fn describe(&self) -> String {
        format!("binlog directory {}", self.dir.display())
    }
}
