//! Following a binlog directory as it grows and rotates, for appliers and the relay.
//!
//! In the writer's process a [`Notifier`] wakes the tailer as soon as records are written.
//! Across processes the tailer sleeps between looks, starting at 1 ms and backing off to
//! 20 ms while nothing arrives, so an idle follower costs about 50 wake-ups a second.
//!
//! A tailer passes on only what the writer has made durable (see [`crate::durable`]): a
//! record written and not yet fsynced could still be lost to a power cut or cut back by a
//! heal, and a replica or the relay must never receive it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::durable::{DurableEnd, Verdict};
use crate::error::{Error, Position, Result};
use crate::events::{Record, SegmentHeader};
use crate::format::DEFAULT_MAX_FRAME;
use crate::notifier::Notifier;
use crate::segment::{list_segments, segment_name, Next, SegmentCursor};

/// Where a tailer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// The first record of the oldest segment.
    Beginning,
    /// The first transaction with this sequence number or higher (heartbeats after it too).
    Seq(u64),
}

/// Follows a binlog directory as it is written: returns each record once, oldest first,
/// moving on to the next segment when the writer rotates, and waits for more at the end. A
/// partial record at the end is read again once it is whole; damage before the end is an
/// error; a record the writer has not yet fsynced is read again once it has. The directory
/// need not exist yet.
#[derive(Debug)]
pub struct Tailer {
    dir: PathBuf,
    start_seq: u64,
    cursor: Option<SegmentCursor>,
    notifier: Option<Arc<Notifier>>,
    max_frame: u32,
    idle: Duration,
    durable: DurableEnd,
    /// No writer held the directory at the last look: take the shared lock before reading.
    writerless: bool,
    /// Where the record last returned ends (the next one's position in its segment).
    last_end: Option<Position>,
    /// Where the last look found what looked like damage; judged at a second look (see
    /// [`Tailer::look_again`]).
    suspect: Option<Position>,
    /// Transactions are read to their head only (see [`Tailer::heads_only`]).
    heads_only: bool,
}

/// What [`Tailer::judge`] decided about a record.
#[derive(Debug, PartialEq, Eq)]
enum Judged {
    Pass,
    /// Read it again from the file now.
    Again,
    /// Read it again from the file once the writer has made more durable.
    NotYet,
}

const MIN_IDLE: Duration = Duration::from_millis(1);
const MAX_IDLE: Duration = Duration::from_millis(20);

impl Tailer {
    /// After zeros or a bad frame at `position`, `damaged` when they looked like damage: the
    /// writer may have written and published the place between this look at the file and
    /// the look at its published end, so only a second look that finds the same is believed
    /// (the published end it goes by was read before that look), and is an error. Otherwise
    /// the place is read again: at once and to the end of the file when it looked damaged,
    /// else after a wait. `Ok(true)` when the deadline has passed.
    fn look_again(
        &mut self,
        position: Position,
        damaged: bool,
        reason: impl FnOnce() -> String,
        deadline: Instant,
        seen: Option<u64>,
    ) -> Result<bool> {
        if damaged && self.suspect == Some(position) {
            return Err(Error::Corruption {
                position,
                reason: reason(),
            });
        }
        self.suspect = damaged.then_some(position);
        if let Some(cursor) = self.cursor.as_mut() {
            cursor.seek(position.offset)?;
            if damaged {
                cursor.set_follow(false);
                return Ok(false);
            }
        }
        if Instant::now() >= deadline {
            return Ok(true);
        }
        self.wait(deadline, seen);
        Ok(false)
    }

    /// Whether the record just read at `position`, `len` bytes long, may be passed on. A
    /// record is read again from the file when it is not durable yet (later), when the lock
    /// was taken for want of a writer (at once), and when the binlog was healed since its
    /// bytes were read (at once): its place is durable, but a heal cut what the cursor read
    /// there, and a record written over it since may end where that one did.
    fn judge(&mut self, position: Position, len: u64) -> Result<Judged> {
        let verdict = self
            .durable
            .check(position.segment, position.offset + len)?;
        let heals = self.durable.heal_changes();
        let cursor = self.cursor.as_mut().expect("a record was just read");
        let judged = match verdict {
            Verdict::Durable if cursor.epoch() == Some(heals) => return Ok(Judged::Pass),
            Verdict::Durable => Judged::Again,
            Verdict::NoWriter => {
                // A writer may have appended it between the read and the look at the lock.
                self.writerless = true;
                Judged::Again
            }
            Verdict::NotYet => Judged::NotYet,
        };
        cursor.seek(position.offset)?;
        Ok(judged)
    }

    /// A following cursor at the first record of segment `number`, stamped with the heal
    /// changes as of before its first read (opening reads past the header).
    fn open_segment(&self, number: u64) -> Result<SegmentCursor> {
        let heals = self.durable.heal_changes();
        let mut cursor = SegmentCursor::open(&self.dir, number, self.max_frame)?.follow();
        cursor.stamp(heals);
        cursor.set_heads_only(self.heads_only);
        Ok(cursor)
    }

    /// A tailer of `dir`, starting at `start`. Nothing is read until
    /// [`Tailer::next_timeout`], so this cannot fail; a missing directory or segment is
    /// waited for.
    pub fn open(dir: &Path, start: StartAt) -> Tailer {
        Tailer {
            dir: dir.to_path_buf(),
            start_seq: match start {
                StartAt::Beginning => 0,
                StartAt::Seq(s) => s,
            },
            cursor: None,
            notifier: None,
            max_frame: DEFAULT_MAX_FRAME,
            idle: MIN_IDLE,
            durable: DurableEnd::new(dir),
            writerless: false,
            last_end: None,
            suspect: None,
            heads_only: false,
        }
    }

    /// Uses the writer's notifier instead of sleeping, and the durable end it holds instead
    /// of `binlog.durable` (same process only): a look that finds everything durable read
    /// already reads nothing.
    pub fn with_notifier(mut self, notifier: Arc<Notifier>) -> Tailer {
        let durable = std::mem::replace(&mut self.durable, DurableEnd::new(&self.dir));
        self.durable = durable.with_notifier(Arc::clone(&notifier));
        self.notifier = Some(notifier);
        self
    }

    /// Transactions come back with their events unread (`events` empty; their sequence
    /// number, server id, commit time and origin are read), for a reader that passes each
    /// frame on as it is ([`Tailer::last_frame`]): see [`codec::decode_record_head`](crate::codec::decode_record_head).
    pub fn heads_only(mut self) -> Tailer {
        self.heads_only = true;
        if let Some(c) = self.cursor.as_mut() {
            c.set_heads_only(true);
        }
        self
    }

    /// [`Tailer::with_notifier`] when there is one (a reader that may or may not share the
    /// writer's process).
    pub fn with_notifier_if(self, notifier: Option<Arc<Notifier>>) -> Tailer {
        match notifier {
            Some(n) => self.with_notifier(n),
            None => self,
        }
    }

    /// The header of the segment being read, once one is open.
    pub fn header(&self) -> Option<&SegmentHeader> {
        self.cursor.as_ref().map(|c| &c.header)
    }

    /// Opens the segment that holds `start_seq`: the last one whose first sequence is at or
    /// below it. Returns false when the directory has no segment yet.
    fn open_first(&mut self) -> Result<bool> {
        if !self.dir.exists() {
            return Ok(false);
        }
        let segments = list_segments(&self.dir)?;
        let mut chosen = None;
        for &n in &segments {
            let c = self.open_segment(n)?;
            if chosen.is_none() || c.prelude.first_seq <= self.start_seq {
                chosen = Some(c);
            } else {
                break;
            }
        }
        // The transactions before the first segment are gone (retention): starting later
        // would skip them without a word.
        if let Some(c) = &chosen {
            if self.start_seq > 0 && c.prelude.first_seq > self.start_seq {
                return Err(Error::SequenceGap {
                    position: Position {
                        segment: c.number(),
                        offset: 0,
                    },
                    expected: self.start_seq,
                    found: c.prelude.first_seq,
                });
            }
        }
        self.cursor = chosen;
        Ok(self.cursor.is_some())
    }

    /// Waits for more until `deadline`: for the notifier to move past `seen` (its generation
    /// before the look that found nothing, so that a notification during the look ends the
    /// wait at once), else a sleep.
    fn wait(&mut self, deadline: Instant, seen: Option<u64>) {
        // A writer opening meanwhile must not wait for this reader; what is read after the
        // wait is checked again.
        self.durable.release();
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        match &self.notifier {
            Some(n) => {
                let g = seen.unwrap_or_else(|| n.generation());
                n.wait_past(g, left.min(MAX_IDLE));
            }
            None => {
                std::thread::sleep(self.idle.min(left));
                self.idle = (self.idle * 2).min(MAX_IDLE);
            }
        }
    }

    /// Where the record [`Tailer::next_timeout`] last returned ends in its segment: the
    /// position the next record of the segment starts at.
    pub fn last_end(&self) -> Option<Position> {
        self.last_end
    }

    /// The frame of the record [`Tailer::next_timeout`] just returned, header included, byte
    /// for byte as its segment holds it (see [`SegmentCursor::last_frame`]); `None` after a
    /// call that returned no record. Not to be asked after a call that failed.
    pub fn last_frame(&self) -> Option<&[u8]> {
        self.cursor.as_ref()?.last_frame()
    }

    /// The next record, waiting up to `timeout` for one to be written. `Ok(None)` means none
    /// arrived in time.
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<(Position, Record)>> {
        if self.writerless {
            self.writerless = self.durable.hold()?;
        }
        let next = self.next_durable(timeout);
        // Held only while records are read with no writer present (see `Verdict::NoWriter`).
        self.durable.release();
        next
    }

    fn next_durable(&mut self, timeout: Duration) -> Result<Option<(Position, Record)>> {
        let deadline = Instant::now() + timeout;
        loop {
            // Only a tailer that may wait needs it (the lock it takes is the writer's too).
            let seen = (timeout > Duration::ZERO)
                .then(|| self.notifier.as_ref().map(|n| n.generation()))
                .flatten();
            if self.cursor.is_none() && !self.open_first()? {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                self.wait(deadline, seen);
                continue;
            }
            let Some(cursor) = self.cursor.as_mut() else {
                continue;
            };
            // In the writer's process: at the durable end, the file has nothing to give yet
            // (what follows is the space set aside, or records not yet fsynced), and every
            // look after a commit group would read it, find zeros, and look for a later
            // segment and at the published end again.
            let at = Position {
                segment: cursor.number(),
                offset: cursor.offset(),
            };
            if self.suspect.is_none() && self.durable.is_end(at) {
                // What the cursor holds past the end is not durable: a heal may rewrite it,
                // so it is read from the file again once the end moves.
                cursor.seek(at.offset)?;
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                self.wait(deadline, seen);
                continue;
            }
            cursor.stamp(self.durable.heal_changes());
            let outcome = cursor.read_next()?;
            match outcome {
                Next::Record {
                    position,
                    record,
                    len,
                } => {
                    match self.judge(position, len)? {
                        Judged::Pass => {}
                        Judged::Again => continue,
                        Judged::NotYet => {
                            if Instant::now() >= deadline {
                                return Ok(None);
                            }
                            self.wait(deadline, seen);
                            continue;
                        }
                    }
                    if let Record::Transaction(tx) = &record {
                        if tx.seq < self.start_seq {
                            continue;
                        }
                    }
                    self.idle = MIN_IDLE;
                    self.suspect = None;
                    if let Some(cursor) = self.cursor.as_mut() {
                        cursor.set_follow(true);
                    }
                    self.last_end = Some(Position {
                        segment: position.segment,
                        offset: position.offset + len,
                    });
                    return Ok(Some((position, record)));
                }
                Next::End { position, trailing } => {
                    let next_number = position.segment + 1;
                    if self.dir.join(segment_name(next_number)).exists() {
                        // The writer finishes a segment before creating the next, so what
                        // is here now is all there will be.
                        if let Next::Record {
                            position,
                            record,
                            len,
                        } = cursor.read_next()?
                        {
                            if self.judge(position, len)? != Judged::Pass {
                                continue;
                            }
                            if matches!(&record, Record::Transaction(tx) if tx.seq < self.start_seq)
                            {
                                continue;
                            }
                            self.last_end = Some(Position {
                                segment: position.segment,
                                offset: position.offset + len,
                            });
                            return Ok(Some((position, record)));
                        }
                        if trailing > 0 {
                            return Err(Error::Corruption {
                                position,
                                reason: format!(
                                    "{trailing} bytes of a partial record before the next segment"
                                ),
                            });
                        }
                        self.cursor = Some(self.open_segment(next_number)?);
                        continue;
                    }
                    // No next segment, and this one is gone: retention removed both (only the
                    // segment being written is never removed), and what followed with them.
                    if !self.dir.join(segment_name(position.segment)).exists() {
                        return Err(Error::Invalid(format!(
                            "{} was removed by binlog retention while it was being read, and the segment after it too",
                            segment_name(position.segment)
                        )));
                    }
                    if trailing > 0 {
                        // A write in progress, or a torn tail the writer will cut on restart:
                        // forget the partial bytes and read them again from the file.
                        cursor.seek(position.offset)?;
                    }
                    if Instant::now() >= deadline {
                        return Ok(None);
                    }
                    self.wait(deadline, seen);
                }
                Next::Unwritten { position } => {
                    // A segment is cut to its records before the next one is made, and the
                    // writer never publishes space it has not written.
                    let later = self.dir.join(segment_name(position.segment + 1)).exists();
                    let damaged = later || self.durable.published_past(position)?;
                    // The second look reads to the end of the file: records written since
                    // the first, or after the zeros (damage), are found.
                    let reason = || {
                        if later {
                            "zero bytes where records were expected, and a later segment follows"
                        } else {
                            "zero bytes where the writer has made records durable"
                        }
                        .to_string()
                    };
                    if self.look_again(position, damaged, reason, deadline, seen)? {
                        return Ok(None);
                    }
                }
                Next::Bad {
                    position,
                    reason,
                    tail_like,
                    ..
                } => {
                    let later = self.dir.join(segment_name(position.segment + 1)).exists();
                    // Past what a live writer has made durable, bytes may be read while they
                    // are being written (within the space it keeps ahead of its records, a
                    // later page before an earlier one): they are judged once durable.
                    let in_progress = !later
                        && self.durable.check(position.segment, position.offset + 1)?
                            == Verdict::NotYet;
                    let damaged = (!tail_like && !in_progress) || later;
                    if self.look_again(position, damaged, || reason, deadline, seen)? {
                        return Ok(None);
                    }
                }
            }
        }
    }
}
