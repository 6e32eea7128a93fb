//! The relay's reading side: the binlog tailer, read in batches on a blocking thread, and the
//! segment headers it passes on once each.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use binlog_format::schema::Schema;
use binlog_format::{Notifier, Position, Record, StartAt, Tailer};
use ringrep_kafka::{kafka_error, Result};

/// One record read from the binlog, with the segment header's schema when a new segment began.
pub(crate) type Read = (Position, Record, Option<Schema>);

/// Most records in one batch.
const BATCH_RECORDS: usize = 512;

/// How long a batch waits for its first record.
const FIRST_RECORD_WAIT: Duration = Duration::from_millis(100);

/// What tells the relay how far the binlog is durable (the writing engine's `durable_seq`).
pub(crate) type DurableSeq = Arc<dyn Fn() -> u64 + Send + Sync>;

/// How many times the writing engine cut its binlog back after a failed write (its
/// `binlog_heals`): a record held while not durable may be gone when this moves.
pub(crate) type Heals = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The binlog followed from a sequence number, a batch at a time.
pub(crate) struct Batches {
    dir: std::path::PathBuf,
    notifier: Option<Arc<Notifier>>,
    /// When set, a transaction is relayed only once durable.
    durable: Option<DurableSeq>,
    /// When set, a held record is dropped and read again after a heal.
    heals: Option<Heals>,
    /// The tailer; `None` only while a batch is read on a blocking thread, or after that
    /// thread went away.
    tailer: Option<Tailer>,
    /// `first_seq` of the segment whose header was passed on last.
    last_header: Option<u64>,
    /// A record read but not yet durable, held for the next batch.
    held: Option<Read>,
}

impl Batches {
    /// Follows `dir` from the segment that begins at `start` (see `resume::segment_start`),
    /// woken by `notifier` when there is one.
    pub(crate) fn open(
        dir: &Path,
        start: u64,
        notifier: Option<Arc<Notifier>>,
        durable: Option<DurableSeq>,
        heals: Option<Heals>,
    ) -> Batches {
        Batches {
            tailer: Some(tailer_at(dir, start, notifier.clone())),
            dir: dir.to_path_buf(),
            notifier,
            durable,
            heals,
            last_header: None,
            held: None,
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
        let mut held = self.held.take();
        let durable = self.durable.clone();
        let heals = self.heals.clone();
        let (t, batch) = tokio::task::spawn_blocking(move || {
            let seen = heals.as_ref().map(|h| h());
            let cut = || matches!((&heals, seen), (Some(h), Some(s)) if h() != s);
            let mut reread = None;
            let batch = read_batch(
                &mut t,
                &mut last_header,
                &mut held,
                durable.as_deref(),
                (&cut, &mut reread),
            );
            (t, (batch, last_header, held, reread))
        })
        .await
        .map_err(|e| kafka_error("binlog reader task", e))?;
        let ((records, err), last_header, held, reread) = batch;
        // A heal cut the binlog back under the record held: read again from it.
        self.tailer = Some(match reread {
            Some(seq) => tailer_at(&self.dir, seq, self.notifier.clone()),
            None => t,
        });
        self.last_header = last_header;
        self.held = held;
        Ok((records, err))
    }
}

fn tailer_at(dir: &Path, seq: u64, notifier: Option<Arc<Notifier>>) -> Tailer {
    Tailer::open(dir, StartAt::Seq(seq)).with_notifier_if(notifier)
}

/// Reads one batch from `t` (blocking); `last_header` tells which segment's header was passed
/// on last, and is moved on when a record comes from a new segment.
/// With `durable`, a transaction past the durable position ends the batch (it is kept in
/// `held`): nothing leaves for Kafka that the primary could still lose. When `cut` says the
/// binlog was healed while a transaction waited to become durable, that transaction is
/// dropped and its sequence number put in `reread`: the caller reads again from there.
fn read_batch(
    t: &mut Tailer,
    last_header: &mut Option<u64>,
    held: &mut Option<Read>,
    durable: Option<&(dyn Fn() -> u64 + Send + Sync)>,
    (cut, reread): (&dyn Fn() -> bool, &mut Option<u64>),
) -> (Vec<Read>, Option<binlog_format::Error>) {
    let mut out: Vec<Read> = Vec::new();
    let mut err = None;
    let deadline = Instant::now() + FIRST_RECORD_WAIT;
    let mut durable_seq = 0;
    let mut is_durable = |rec: &Record| match (rec, durable) {
        (Record::Transaction(tx), Some(f)) => {
            if durable_seq < tx.seq {
                durable_seq = f();
            }
            durable_seq >= tx.seq
        }
        _ => true,
    };
    while out.len() < BATCH_RECORDS {
        // The record held back last time comes first. Wait only for the first record; after
        // it, take what is already there, so that a lone commit is relayed at once rather than
        // after the wait.
        let next = match held.take() {
            Some(r) => r,
            None => {
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
                                Schema::from_header(&h.databases, &h.tables)
                            })
                        });
                        (pos, rec, header)
                    }
                    Ok(None) => break,
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
        };
        if !is_durable(&next.1) {
            if !out.is_empty() {
                // Send what is durable; this one starts the next batch.
                *held = Some(next);
                break;
            }
            // Nothing to send yet: wait for its fsync (in flight) within this batch's time.
            while !is_durable(&next.1) {
                if cut() {
                    if let Record::Transaction(tx) = &next.1 {
                        *reread = Some(tx.seq);
                    }
                    return (out, None);
                }
                if Instant::now() >= deadline {
                    *held = Some(next);
                    return (out, None);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        out.push(next);
    }
    (out, err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::{BinlogWriter, SyncPolicy, Transaction, WriterOptions};
    use std::sync::atomic::{AtomicU64, Ordering};

    fn empty_tx(seq: u64) -> Record {
        Record::Transaction(Transaction {
            server_id: 1,
            seq,
            commit_time_us: 0,
            origin: None,
            events: vec![],
        })
    }

    /// A binlog in a new directory holding empty transactions 1..=`n`, written out.
    fn binlog_of(n: u64) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opts = WriterOptions::new(1);
        opts.sync = SyncPolicy::Never;
        let (w, _) = BinlogWriter::open(dir.path(), opts).expect("writer");
        for seq in 1..=n {
            w.append(&empty_tx(seq)).expect("append");
        }
        w.flush().expect("flush");
        dir
    }

    fn seqs(batch: &[Read]) -> Vec<u64> {
        batch
            .iter()
            .filter_map(|(_, r, _)| match r {
                Record::Transaction(t) => Some(t.seq),
                Record::Heartbeat(_) => None,
            })
            .collect()
    }

    /// With a durable position, a batch stops before the first transaction past it, and that
    /// transaction comes in a later batch once durable: nothing reaches Kafka that the primary
    /// could still lose.
    #[test]
    fn only_durable_transactions_are_read() {
        let dir = binlog_of(3);
        let durable = Arc::new(AtomicU64::new(2));
        let d = durable.clone();
        let f = move || d.load(Ordering::SeqCst);
        let mut t = Tailer::open(dir.path(), StartAt::Seq(1));
        let (mut header, mut held) = (None, None);
        let (batch, err) = read_batch(
            &mut t,
            &mut header,
            &mut held,
            Some(&f),
            (&|| false, &mut None),
        );
        assert!(err.is_none());
        assert_eq!(seqs(&batch), [1, 2]);
        let (batch, _) = read_batch(
            &mut t,
            &mut header,
            &mut held,
            Some(&f),
            (&|| false, &mut None),
        );
        assert!(batch.is_empty(), "seq 3 is not durable yet");
        durable.store(3, Ordering::SeqCst);
        let (batch, _) = read_batch(
            &mut t,
            &mut header,
            &mut held,
            Some(&f),
            (&|| false, &mut None),
        );
        assert_eq!(seqs(&batch), [3]);
    }

    /// A transaction held until durable is dropped when a heal cuts the binlog back under
    /// it, and its sequence number comes back to be read again: the one that takes its number
    /// after the heal is another transaction.
    #[test]
    fn a_held_transaction_cut_by_a_heal_is_read_again() {
        let dir = binlog_of(2);
        let f = || 1;
        let mut t = Tailer::open(dir.path(), StartAt::Seq(1));
        let (mut header, mut held) = (None, None);
        let mut reread = None;
        let (batch, _) = read_batch(
            &mut t,
            &mut header,
            &mut held,
            Some(&f),
            (&|| false, &mut reread),
        );
        assert_eq!(seqs(&batch), [1]);
        assert!(held.is_some(), "seq 2 waits to be durable");
        let (batch, _) = read_batch(
            &mut t,
            &mut header,
            &mut held,
            Some(&f),
            (&|| true, &mut reread),
        );
        assert!(batch.is_empty());
        assert!(held.is_none(), "the cut transaction is not kept");
        assert_eq!(reread, Some(2));
    }
}
