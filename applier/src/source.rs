//! Where transactions come from. Every source gives transactions of one primary in sequence
//! order, each with its position, and can start at any sequence number.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use binlog_format::{Notifier, Position, Record, StartAt, Tailer, Transaction};

use crate::error::{Error, Result};

/// One transaction from a source, with where it was found.
#[derive(Debug, Clone)]
pub struct SourcedTx {
    pub tx: Transaction,
    pub position: Position,
}

/// A stream of a primary's transactions.
///
/// Guarantees: transactions come in sequence order, each at most once per call sequence
/// (a restarted source may repeat transactions at or after its start; the applier skips
/// those it already applied). `next` waits at most `timeout` and returns `None` when nothing
/// arrived; a corrupt record is an error naming its position and nothing after it is given.
#[async_trait]
pub trait EventSource: Send {
    async fn next(&mut self, timeout: Duration) -> Result<Option<SourcedTx>>;
    /// A short description for logs ("binlog directory /x/binlog").
    fn describe(&self) -> String;
}

/// A primary's binlog directory, followed as it grows and rotates.
pub struct BinlogDirSource {
    dir: PathBuf,
    tailer: Option<Tailer>,
}

impl BinlogDirSource {
    /// Follows `dir` from sequence `from_seq`. With `notifier` (same process as the writer)
    /// new records wake the source at once; without it the source polls with backoff.
    pub fn open(dir: &Path, from_seq: u64, notifier: Option<Arc<Notifier>>) -> BinlogDirSource {
        let mut tailer = Tailer::open(dir, StartAt::Seq(from_seq));
        if let Some(n) = notifier {
            tailer = tailer.with_notifier(n);
        }
        BinlogDirSource {
            dir: dir.to_path_buf(),
            tailer: Some(tailer),
        }
    }
}

#[async_trait]
impl EventSource for BinlogDirSource {
    async fn next(&mut self, timeout: Duration) -> Result<Option<SourcedTx>> {
        let mut tailer = self
            .tailer
            .take()
            .ok_or_else(|| Error::Source("binlog source failed earlier".into()))?;
        // The tailer blocks; run it off the async threads.
        let (tailer, result) = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + timeout;
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                match tailer.next_timeout(left) {
                    Ok(Some((position, Record::Transaction(tx)))) => {
                        return (tailer, Ok(Some(SourcedTx { tx, position })))
                    }
                    Ok(Some((_, Record::Heartbeat(_)))) => continue,
                    Ok(None) => return (tailer, Ok(None)),
                    Err(e) => return (tailer, Err(Error::from(e))),
                }
            }
        })
        .await
        .map_err(|e| Error::Source(format!("binlog reader task: {e}")))?;
        if result.is_ok() {
            self.tailer = Some(tailer);
        }
        result
    }

    fn describe(&self) -> String {
        format!("binlog directory {}", self.dir.display())
    }
}
