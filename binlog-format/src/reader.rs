//! Reading a whole binlog directory, oldest record first, with each record's position.

use std::path::{Path, PathBuf};

use crate::error::{Error, Position, Result};
use crate::events::Record;
use crate::format::DEFAULT_MAX_FRAME;
use crate::segment::{list_segments, Next, SegmentCursor};

/// What to do with a last segment that ends inside a record (a write the crash interrupted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Stop at the last whole record and report the torn tail; the writer cuts it off. This is
    /// right for a crash, where the torn record was never acknowledged.
    #[default]
    TolerateTornTail,
    /// Treat a torn tail like any other corruption.
    Strict,
}

/// A torn tail found at the end of the last segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// Where the last whole record ends: the start of the partial or damaged bytes.
    pub position: Position,
    /// How many bytes follow `position` to the end of the segment file.
    pub bytes: u64,
}

/// How a [`BinlogReader`] reads. The default reads frames of up to
/// [`DEFAULT_MAX_FRAME`] bytes, tolerates a torn tail and checks sequence numbers.
#[derive(Debug, Clone)]
pub struct ReaderOptions {
    /// Largest frame payload accepted, in bytes; a frame announcing more is treated as
    /// corrupt before anything is read or allocated.
    pub max_frame: u32,
    /// What to do with a last segment that ends inside a record.
    pub recovery: RecoveryMode,
    /// Check that transaction sequence numbers are gapless.
    pub check_sequence: bool,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            max_frame: DEFAULT_MAX_FRAME,
            recovery: RecoveryMode::default(),
            check_sequence: true,
        }
    }
}

/// Iterates over the records of a binlog directory (or of one segment file), oldest first,
/// each with its [`Position`]. After the first error it yields nothing more. It reads what the
/// files hold when it gets to them and stops at the end; to follow a growing binlog, use a
/// [`Tailer`](crate::Tailer).
#[derive(Debug)]
pub struct BinlogReader {
    dir: PathBuf,
    segments: Vec<u64>,
    next_segment: usize,
    cursor: Option<SegmentCursor>,
    opts: ReaderOptions,
    expected_seq: Option<u64>,
    torn: Option<TornTail>,
    failed: bool,
    records: u64,
    /// Where a bad frame was found in the last segment once: judged at a second look.
    suspect: Option<Position>,
}

impl BinlogReader {
    /// Reads every segment of `dir`, or the one segment file `path` names.
    pub fn open(path: &Path, opts: ReaderOptions) -> Result<BinlogReader> {
        let (dir, segments) = if path.is_dir() {
            (path.to_path_buf(), list_segments(path)?)
        } else {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let number = crate::segment::parse_segment_name(name).ok_or_else(|| {
                Error::Invalid(format!(
                    "{} is not a binlog segment name (binlog.NNNNNN)",
                    path.display()
                ))
            })?;
            let dir = path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."));
            (
                if dir.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    dir
                },
                vec![number],
            )
        };
        Ok(BinlogReader {
            dir,
            segments,
            next_segment: 0,
            cursor: None,
            opts,
            expected_seq: None,
            torn: None,
            failed: false,
            records: 0,
            suspect: None,
        })
    }

    /// Starts at the segment that holds `seq` (the last whose first sequence is at or below
    /// it) instead of the first: the segments before it hold only older transactions, which
    /// a caller resuming after `seq - 1` (recovery after a snapshot) need not read. The
    /// iterator still returns the older transactions of that segment.
    pub fn start_at_seq(mut self, seq: u64) -> Result<BinlogReader> {
        let infos = crate::segment::segment_infos(&self.dir)?;
        let start = infos.iter().rposition(|i| i.first_seq <= seq).unwrap_or(0);
        let keep: Vec<u64> = infos[start..].iter().map(|i| i.number).collect();
        self.segments.retain(|n| keep.contains(n));
        Ok(self)
    }

    /// The torn tail found at the end, once iteration has reached it.
    pub fn torn_tail(&self) -> Option<TornTail> {
        self.torn
    }

    /// The numbers of the segments being read, oldest first (one, when opened on a segment
    /// file).
    pub fn segments(&self) -> &[u64] {
        &self.segments
    }

    /// The header of the segment being read.
    pub fn current_header(&self) -> Option<&crate::events::SegmentHeader> {
        self.cursor.as_ref().map(|c| &c.header)
    }

    /// The position just after the last record returned (where an append would go).
    pub fn end_position(&self) -> Option<Position> {
        self.cursor.as_ref().map(|c| Position {
            segment: c.number(),
            offset: c.offset(),
        })
    }

    /// How many records the iterator has returned so far.
    pub fn records_read(&self) -> u64 {
        self.records
    }

    fn step(&mut self) -> Result<Option<(Position, Record)>> {
        loop {
            if self.cursor.is_none() {
                let Some(&number) = self.segments.get(self.next_segment) else {
                    return Ok(None);
                };
                self.next_segment += 1;
                let cursor = SegmentCursor::open(&self.dir, number, self.opts.max_frame)?;
                let position = Position {
                    segment: number,
                    offset: 0,
                };
                if self.opts.check_sequence {
                    if let Some(expected) = self.expected_seq {
                        if cursor.prelude.first_seq != expected {
                            return Err(Error::SequenceGap {
                                position,
                                expected,
                                found: cursor.prelude.first_seq,
                            });
                        }
                    }
                }
                self.expected_seq = Some(cursor.prelude.first_seq);
                self.cursor = Some(cursor);
            }
            let is_last = self.next_segment == self.segments.len();
            let Some(cursor) = self.cursor.as_mut() else {
                continue;
            };
            match cursor.read_next()? {
                Next::Record {
                    position, record, ..
                } => {
                    if let Record::Transaction(tx) = &record {
                        if let Some(expected) = self.expected_seq {
                            if self.opts.check_sequence && tx.seq != expected {
                                return Err(Error::SequenceGap {
                                    position,
                                    expected,
                                    found: tx.seq,
                                });
                            }
                        }
                        self.expected_seq = Some(tx.seq + 1);
                    }
                    self.records += 1;
                    return Ok(Some((position, record)));
                }
                Next::End { trailing: 0, .. } => {
                    if is_last {
                        return Ok(None);
                    }
                    self.cursor = None;
                }
                Next::End { position, trailing } => {
                    return self.tail(
                        is_last,
                        position,
                        trailing,
                        "the segment ends inside a record".into(),
                    );
                }
                // The space a writer keeps ahead of its records, in the segment it was writing.
                Next::Unwritten { .. } if is_last => return Ok(None),
                Next::Unwritten { position } => {
                    return Err(Error::Corruption {
                        position,
                        reason:
                            "zero bytes where records were expected, and a later segment follows"
                                .into(),
                    })
                }
                Next::Bad {
                    position,
                    reason,
                    tail_like,
                    trailing,
                } => {
                    if tail_like {
                        return self.tail(is_last, position, trailing, reason);
                    }
                    // Past what a live writer has made durable, a read may catch a write
                    // half done (a later page before an earlier one, in the space the
                    // writer keeps ahead of its records): what is readable ends there.
                    if is_last {
                        let verdict = crate::durable::DurableEnd::new(&self.dir)
                            .check(position.segment, position.offset + 1)?;
                        if verdict == crate::durable::Verdict::NotYet {
                            return Ok(None);
                        }
                        // The writer may have written and published the place between the
                        // look at the file and the look at its published end: believed at a
                        // second look only.
                        if self.suspect != Some(position) {
                            self.suspect = Some(position);
                            cursor.seek(position.offset)?;
                            continue;
                        }
                    }
                    return Err(Error::Corruption { position, reason });
                }
            }
        }
    }

    fn tail(
        &mut self,
        is_last: bool,
        position: Position,
        bytes: u64,
        reason: String,
    ) -> Result<Option<(Position, Record)>> {
        if !is_last {
            return Err(Error::Corruption {
                position,
                reason: format!("{reason}, and a later segment follows"),
            });
        }
        match self.opts.recovery {
            RecoveryMode::Strict => Err(Error::TornTail { position, bytes }),
            RecoveryMode::TolerateTornTail => {
                self.torn = Some(TornTail { position, bytes });
                Ok(None)
            }
        }
    }
}

impl Iterator for BinlogReader {
    type Item = Result<(Position, Record)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.step() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
