//! The relay's reading side: the binlog tailer, read in batches on a blocking thread, and the
//! segment headers it passes on once each.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use binlog_format::{Notifier, Position, Record, StartAt, TableDef, Tailer};
use ringrep_kafka::{kafka_error, Result};

/// One record read from the binlog, with the segment header's table definitions when a new
/// segment began.
pub(crate) type Read = (Position, Record, Option<Vec<TableDef>>);

/// Most records in one batch.
const BATCH_RECORDS: usize = 512;

/// How long a batch waits for its first record.
const FIRST_RECORD_WAIT: Duration = Duration::from_millis(100);

/// The binlog followed from a sequence number, a batch at a time.
pub(crate) struct Batches {
    /// The tailer; `None` only while a batch is read on a blocking thread, or after that
    /// thread went away.
    tailer: Option<Tailer>,
    /// `first_seq` of the segment whose header was passed on last.
    last_header: Option<u64>,
}

impl Batches {
    /// Follows `dir` from the segment that begins at `start` (see `resume::segment_start`),
    /// woken by `notifier` when there is one.
    pub(crate) fn open(dir: &Path, start: u64, notifier: Option<Arc<Notifier>>) -> Batches {
        let mut tailer = Tailer::open(dir, StartAt::Seq(start));
        if let Some(n) = notifier {
            tailer = tailer.with_notifier(n);
        }
        Batches {
            tailer: Some(tailer),
            last_header: None,
        }
    }

    /// The next batch: waits up to [`FIRST_RECORD_WAIT`] for a first record, then takes what
    /// is already there, up to [`BATCH_RECORDS`]; it may be empty. A read error ends the batch
    /// and comes back beside the records read before it.
    pub(crate) async fn next_batch(&mut self) -> Result<(Vec<Read>, Option<binlog_format::Error>)> {
        let mut t = self
            .tailer
            .take()
            .ok_or_else(|| kafka_error("binlog", "reader lost after an error"))?;
        let mut last_header = self.last_header;
        let (t, batch) = tokio::task::spawn_blocking(move || {
            let batch = read_batch(&mut t, &mut last_header);
            (t, (batch, last_header))
        })
        .await
        .map_err(|e| kafka_error("binlog reader task", e))?;
        self.tailer = Some(t);
        let ((records, err), last_header) = batch;
        self.last_header = last_header;
        Ok((records, err))
    }
}

/// Reads one batch from `t` (blocking); `last_header` tells which segment's header was passed
/// on last, and is moved on when a record comes from a new segment.
fn read_batch(
    t: &mut Tailer,
    last_header: &mut Option<u64>,
) -> (Vec<Read>, Option<binlog_format::Error>) {
    let mut out: Vec<Read> = Vec::new();
    let mut err = None;
    let deadline = Instant::now() + FIRST_RECORD_WAIT;
    while out.len() < BATCH_RECORDS {
        // Wait only for the first record; after it, take what is already there,
        // so that a lone commit is relayed at once rather than after the wait.
        let left = if out.is_empty() {
            deadline.saturating_duration_since(Instant::now())
        } else {
            Duration::ZERO
        };
        match t.next_timeout(left) {
            Ok(Some((pos, rec))) => {
                let header = t.header().and_then(|h| {
                    (*last_header != Some(h.first_seq)).then(|| {
                        *last_header = Some(h.first_seq);
                        h.tables.clone()
                    })
                });
                out.push((pos, rec, header));
            }
            Ok(None) => break,
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    (out, err)
}
