//! Segment files: naming, the index file, and a cursor that reads frames from a segment that
//! may still be growing.

use std::fmt;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::codec;
use crate::error::{Error, Result};
use crate::events::{Record, SegmentHeader};
use crate::format::{Prelude, FRAME_HEADER_LEN, PRELUDE_LEN};
use crate::frame::{scan_frame, FrameScan};
use crate::position::Position;
pub use crate::position::{parse_segment_name, segment_name};

/// Name of the index file that lists the segments, one file name a line, oldest first.
pub const INDEX_FILE: &str = "binlog.index";

/// The segments of a binlog directory, oldest first: those named in the index plus any segment
/// file the index does not name yet (a crash can fall between creating a segment and
/// rewriting the index).
pub fn list_segments(dir: &Path) -> Result<Vec<u64>> {
    let mut numbers = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        if let Some(n) = entry.file_name().to_str().and_then(parse_segment_name) {
            numbers.push(n);
        }
    }
    if let Ok(index) = fs::read_to_string(dir.join(INDEX_FILE)) {
        for line in index.lines() {
            let name = line.trim().rsplit('/').next().unwrap_or("");
            if let Some(n) = parse_segment_name(name) {
                if !dir.join(segment_name(n)).exists() {
                    return Err(Error::Invalid(format!(
                        "{} names {name}, which is missing from {}",
                        INDEX_FILE,
                        dir.display()
                    )));
                }
            }
        }
    }
    numbers.sort_unstable();
    numbers.dedup();
    Ok(numbers)
}

/// One segment file as retention sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Its number (`binlog.NNNNNN`).
    pub number: u64,
    /// The sequence number of its first transaction (from its prelude).
    pub first_seq: u64,
    /// Its file's length in bytes. The segment a writer has open is longer than its records
    /// by the space set aside for the next ones (`Engine::binlog_segments` gives its records' length).
    pub bytes: u64,
    /// When it was last written (its modification time, as MySQL's binlog expiry uses).
    pub modified: std::time::SystemTime,
}

/// The segments of `dir`, oldest first, with what each prelude and the file system say.
pub fn segment_infos(dir: &Path) -> Result<Vec<SegmentInfo>> {
    let mut out = Vec::new();
    for number in list_segments(dir)? {
        let path = dir.join(segment_name(number));
        let f = match File::open(&path) {
            Ok(f) => f,
            // Removed by a purge since the listing: it is gone, not an error.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        let meta = f.metadata().map_err(|e| Error::io(&path, e))?;
        let mut prelude = [0u8; PRELUDE_LEN as usize];
        f.read_exact_at(&mut prelude, 0)
            .map_err(|e| Error::io(&path, e))?;
        let prelude = Prelude::decode(&prelude).map_err(|reason| Error::Corruption {
            position: Position {
                segment: number,
                offset: 0,
            },
            reason,
        })?;
        out.push(SegmentInfo {
            number,
            first_seq: prelude.first_seq,
            bytes: meta.len(),
            modified: meta.modified().map_err(|e| Error::io(&path, e))?,
        });
    }
    Ok(out)
}

/// The server id a binlog directory was written by (from its first segment's prelude), or
/// `None` while the directory has no segment yet.
pub fn directory_server_id(dir: &Path) -> Result<Option<u32>> {
    if !dir.exists() {
        return Ok(None);
    }
    match list_segments(dir)?.first() {
        None => Ok(None),
        Some(&n) => Ok(Some(
            SegmentCursor::open(dir, n, crate::format::DEFAULT_MAX_FRAME)?
                .prelude
                .server_id,
        )),
    }
}

/// How many zero bytes `bytes` ends with, eight at a time (a follower's buffer ends in up to a
/// read's worth of them at every look).
fn trailing_zeros(bytes: &[u8]) -> usize {
    let words = bytes.rchunks_exact(8);
    let head = words.remainder();
    let mut n = 0;
    for w in words {
        if w != [0; 8] {
            return n + w.iter().rev().take_while(|&&b| b == 0).count();
        }
        n += 8;
    }
    n + head.iter().rev().take_while(|&&b| b == 0).count()
}

/// Whether `bytes` are all zero, a block at a time: a follower asks this of the space after
/// the last record at every look, and a byte-at-a-time loop over a read's worth of zeros was
/// most of the primary's own CPU per statement with one client (BENCHMARKS.md).
fn all_zero(bytes: &[u8]) -> bool {
    let blocks = bytes.chunks_exact(64);
    let tail = blocks.remainder();
    for block in blocks {
        // An OR over the whole block, without an early exit inside it, is vectorised.
        if block.iter().fold(0u8, |acc, &b| acc | b) != 0 {
            return false;
        }
    }
    tail.iter().all(|&b| b == 0)
}

/// What a cursor found next.
#[derive(Debug)]
pub enum Next {
    /// A whole frame with a good checksum, decoded. The cursor has moved past it.
    Record {
        /// Where the record's frame starts.
        position: Position,
        /// The decoded record.
        record: Record,
        /// The frame's size in bytes, header included: the next record starts at
        /// `position.offset + len`.
        len: u64,
    },
    /// Nothing but zero bytes from `position` to the end of what was read: space the writer
    /// set aside and has not written yet (it keeps the segment it writes longer than its
    /// records, docs/format.md), or, in a segment that has a successor, damage. The cursor
    /// stays at `position` and reads the place again next time.
    Unwritten {
        /// Where the next frame will start: the end of the last whole record.
        position: Position,
    },
    /// No whole frame follows; `trailing` bytes of a partial frame are after `position`.
    End {
        /// Where the next frame will start: the end of the last whole record.
        position: Position,
        /// Bytes in the file after `position` (0 at a clean end; more while a write is in
        /// progress, or for a torn tail).
        trailing: u64,
    },
    /// The frame at `position` cannot be trusted. `tail_like` is true when it looks like an
    /// interrupted write: a frame that fails its checksum and is followed by nothing but zero
    /// bytes (or by nothing), or nothing but zero bytes from `position` on. The cursor stays
    /// at `position`.
    Bad {
        /// Where the untrusted frame starts.
        position: Position,
        /// What is wrong with the frame.
        reason: String,
        /// Whether the bad bytes look like a write that a crash interrupted, rather than
        /// damage in the middle of the file.
        tail_like: bool,
        /// Bytes in the file from `position` to its end.
        trailing: u64,
    },
}

/// Reads the frames of one segment, from a file that may still be growing: what was not
/// whole at one read is read again at the next. Consumed bytes are dropped from its buffer
/// once they pass 1 MiB, so a long-lived cursor does not hold the whole file.
pub struct SegmentCursor {
    path: PathBuf,
    number: u64,
    file: File,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    buf_start: u64,
    /// Index into `buf` of the next frame.
    pos: usize,
    max_frame: u32,
    /// Stop reading at space the writer has not written yet (see [`SegmentCursor::follow`]).
    follow: bool,
    /// Bytes before the zeros that a follower's last read gained: the size of its next.
    gained: usize,
    /// The owner's stamp on what the cursor holds (see [`SegmentCursor::stamp`]).
    epoch: Option<u64>,
    /// The length of the frame [`SegmentCursor::read_next`] last returned, which ends at
    /// `pos`; 0 once anything else happened.
    last_frame: usize,
    /// Transactions are read to their head only ([`SegmentCursor::set_heads_only`]).
    heads_only: bool,
    /// The segment's fixed 24-byte prelude, checked (magic number, supported version).
    pub prelude: Prelude,
    /// The segment's first frame: the databases and tables as they were when the segment was
    /// created, which is the schema needed to read its first records. It agrees with
    /// `prelude` on server id and first sequence number.
    pub header: SegmentHeader,
}

impl fmt::Debug for SegmentCursor {
    /// The file, the next frame's offset and the prelude; not the buffered bytes or the
    /// header's table definitions.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentCursor")
            .field("path", &self.path)
            .field("number", &self.number)
            .field("offset", &self.offset())
            .field("buffered", &(self.buf.len() - self.pos))
            .field("max_frame", &self.max_frame)
            .field("prelude", &self.prelude)
            .finish_non_exhaustive()
    }
}

impl SegmentCursor {
    /// Opens segment `number` of `dir` and reads its prelude and header frame; the cursor is
    /// then at the segment's first record. Frames longer than `max_frame` bytes are refused
    /// as corrupt without being read. A prelude or header that is missing, damaged or
    /// inconsistent is [`Error::Corruption`].
    pub fn open(dir: &Path, number: u64, max_frame: u32) -> Result<SegmentCursor> {
        let path = dir.join(segment_name(number));
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let at = |offset| Position {
            segment: number,
            offset,
        };
        let mut cursor = SegmentCursor {
            path,
            number,
            file,
            buf: Vec::new(),
            buf_start: 0,
            pos: 0,
            max_frame,
            follow: false,
            gained: 0,
            epoch: None,
            last_frame: 0,
            heads_only: false,
            prelude: Prelude {
                version: 0,
                server_id: 0,
                first_seq: 0,
            },
            header: SegmentHeader {
                server_id: 0,
                first_seq: 0,
                created_us: 0,
                databases: vec![],
                tables: vec![],
            },
        };
        cursor.fill(PRELUDE_LEN as usize)?;
        cursor.prelude = Prelude::decode(&cursor.buf).map_err(|reason| Error::Corruption {
            position: at(0),
            reason,
        })?;
        cursor.pos = PRELUDE_LEN as usize;
        let header = match scan_frame(&cursor.buf[cursor.pos..], max_frame) {
            FrameScan::Frame { payload, len } => {
                let h: SegmentHeader = codec::decode(payload).map_err(|e| Error::Corruption {
                    position: at(PRELUDE_LEN),
                    reason: format!("segment header: {e}"),
                })?;
                cursor.pos += len;
                h
            }
            FrameScan::Incomplete { .. } => {
                return Err(Error::Corruption {
                    position: at(PRELUDE_LEN),
                    reason: "segment header frame is incomplete".into(),
                })
            }
            FrameScan::Corrupt { reason, .. } => {
                return Err(Error::Corruption {
                    position: at(PRELUDE_LEN),
                    reason: format!("segment header: {reason}"),
                })
            }
        };
        if header.first_seq != cursor.prelude.first_seq
            || header.server_id != cursor.prelude.server_id
        {
            return Err(Error::Corruption {
                position: at(PRELUDE_LEN),
                reason: "segment header disagrees with the prelude".into(),
            });
        }
        cursor.header = header;
        Ok(cursor)
    }

    /// Reads as a follower of a segment being written: a read stops where the file turns to
    /// zeros (the space the writer keeps ahead of its records) once the record it needs is
    /// whole, instead of reading that space to the end of the file at every look. A cursor
    /// that checks a whole file (recovery, [`crate::BinlogReader`]) reads to the end, so that
    /// records after zeros are found and reported as damage.
    pub fn follow(mut self) -> SegmentCursor {
        self.follow = true;
        self
    }

    /// Whether reads stop at zeros ([`SegmentCursor::follow`]); a follower that doubts the
    /// zeros it found reads the file to its end once.
    pub fn set_follow(&mut self, on: bool) {
        self.follow = on;
    }

    /// Whether [`SegmentCursor::read_next`] reads a transaction's head only, leaving its
    /// `events` empty (see [`codec::decode_record_head`]): for a reader that passes frames on
    /// as they are ([`SegmentCursor::last_frame`]).
    pub fn set_heads_only(&mut self, on: bool) {
        self.heads_only = on;
    }

    /// The segment number, as in its file name `binlog.NNNNNN`.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The path of the segment file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// After [`Next::Bad`]: whether a whole, checksummed frame starts anywhere after the bad
    /// one (within what was read). Damage in the middle of a segment is followed by the
    /// records after it; the tail a power loss garbles is not. Gives up (says yes, the
    /// cautious answer) after checksumming `budget` bytes of candidates.
    pub fn valid_frame_follows(&self, budget: u64) -> bool {
        let rest = &self.buf[self.pos..];
        let mut spent = 0u64;
        for start in 1..rest.len() {
            let candidate = &rest[start..];
            if candidate.len() < crate::format::FRAME_HEADER_LEN {
                break;
            }
            let len = u32::from_le_bytes([candidate[0], candidate[1], candidate[2], candidate[3]]);
            if len == 0
                || len > self.max_frame
                || len as usize > candidate.len() - crate::format::FRAME_HEADER_LEN
            {
                continue;
            }
            spent += u64::from(len);
            if spent > budget {
                return true;
            }
            if matches!(
                scan_frame(candidate, self.max_frame),
                FrameScan::Frame { .. }
            ) {
                return true;
            }
        }
        false
    }

    /// File offset of the next frame.
    pub fn offset(&self) -> u64 {
        self.buf_start + self.pos as u64
    }

    /// Moves to a file offset that is known to start a frame (a stored position).
    pub fn seek(&mut self, offset: u64) -> Result<()> {
        if offset < PRELUDE_LEN {
            return Err(Error::Invalid(format!(
                "offset {offset} is inside the segment prelude"
            )));
        }
        self.buf.clear();
        self.buf_start = offset;
        self.pos = 0;
        self.epoch = None;
        self.last_frame = 0;
        Ok(())
    }

    /// The frame of the record [`SegmentCursor::read_next`] just returned, header included,
    /// byte for byte as the segment holds it; `None` after anything else. A reader passing
    /// records on in their frames sends these bytes instead of encoding the record again.
    pub fn last_frame(&self) -> Option<&[u8]> {
        (self.last_frame > 0).then(|| &self.buf[self.pos - self.last_frame..self.pos])
    }

    /// Stamps what the cursor holds with `epoch`, unless it is stamped already: the first
    /// stamp after the cursor opened or moved ([`SegmentCursor::seek`]) stays, so it is no
    /// later than the read of any byte the cursor holds when the owner stamps before each
    /// read. The tailer stamps with the binlog's heal count, and reads again what a heal
    /// since may have rewritten.
    pub fn stamp(&mut self, epoch: u64) {
        self.epoch.get_or_insert(epoch);
    }

    /// The stamp (see [`SegmentCursor::stamp`]), `None` when there is none since the cursor
    /// opened or moved.
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// The bytes the frame at the cursor takes, header included, as far as its header is
    /// read and says (a length of zero, or over the limit, says nothing).
    fn frame_need(&self) -> usize {
        let rest = &self.buf[self.pos..];
        match rest.get(..4) {
            Some(&[a, b, c, d]) => {
                let len = u32::from_le_bytes([a, b, c, d]);
                if len == 0 || len > self.max_frame {
                    0
                } else {
                    FRAME_HEADER_LEN + len as usize
                }
            }
            _ => 0,
        }
    }

    /// Reads what the file has gained since the last read, at least until `need` bytes
    /// follow the next frame's start when the file has them. Returns the bytes read.
    fn fill(&mut self, need: usize) -> Result<usize> {
        // Drop consumed bytes so a long-lived tailer does not hold the whole file.
        if self.pos > (1 << 20) {
            self.buf.drain(..self.pos);
            self.buf_start += self.pos as u64;
            self.pos = 0;
        }
        // Zeros read at the end may have been space the writer had not written yet; they are
        // read again, or new records written over them would be missed.
        let zeros = trailing_zeros(&self.buf[self.pos..]);
        self.buf.truncate(self.buf.len() - zeros);
        // Plain reads until one comes back short: a tailer fills after every commit group,
        // and `read_to_end` also asked for the file's size and read once more to see nothing.
        // A follower's first read is sized to what the last one gained: the rest of it is
        // the zeros the writer set aside, copied, checked and dropped again at every look.
        const CHUNK: usize = 32 << 10;
        const FOLLOW_MIN: usize = 4 << 10;
        let before = self.buf.len();
        let mut chunk = if self.follow {
            (self.gained + need)
                .next_power_of_two()
                .clamp(FOLLOW_MIN, CHUNK)
        } else {
            CHUNK
        };
        loop {
            let at = self.buf.len();
            self.buf.resize(at + chunk, 0);
            // Positioned: the buffer's end is where the file is read next, with no seek.
            let n = match self
                .file
                .read_at(&mut self.buf[at..], self.buf_start + at as u64)
            {
                Ok(n) => n,
                Err(e) => {
                    self.buf.truncate(at);
                    if e.kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(Error::io(&self.path, e));
                }
            };
            self.buf.truncate(at + n);
            if n < chunk {
                break;
            }
            // A follower stops at zeros once the next frame is whole: zeros inside a record
            // (a zero value, NULLs) at the end of a read are not the end of the records.
            if self.follow
                && self.buf.len() - self.pos >= need.max(self.frame_need())
                && self.buf.ends_with(&[0; FRAME_HEADER_LEN])
            {
                break;
            }
            chunk = CHUNK;
        }
        let gained = self.buf.len() - before;
        if self.follow {
            self.gained = gained - trailing_zeros(&self.buf[before..]);
        }
        Ok(gained)
    }

    /// The next record, or where the readable part of the segment ends for now.
    pub fn read_next(&mut self) -> Result<Next> {
        self.last_frame = 0;
        let mut refilled = false;
        // Whether the last refill read past the end of what the buffer held.
        let mut grew = false;
        loop {
            let position = Position {
                segment: self.number,
                offset: self.offset(),
            };
            match scan_frame(&self.buf[self.pos..], self.max_frame) {
                FrameScan::Frame { payload: [], .. } => {
                    // No record encodes to nothing: zeros here are space not yet written, or
                    // were when they were read.
                    let rest = &self.buf[self.pos..];
                    if all_zero(rest) {
                        if !refilled {
                            refilled = true;
                            self.fill(FRAME_HEADER_LEN)?;
                            continue;
                        }
                        return Ok(Next::Unwritten { position });
                    }
                    return Ok(Next::Bad {
                        position,
                        reason: "empty frame".into(),
                        tail_like: false,
                        trailing: rest.len() as u64,
                    });
                }
                FrameScan::Frame { payload, len } => {
                    let decoded = if self.heads_only {
                        codec::decode_record_head(payload)
                    } else {
                        codec::decode_record(payload)
                    };
                    let record: Record = decoded.map_err(|e| Error::Corruption {
                        position,
                        reason: e.to_string(),
                    })?;
                    self.pos += len;
                    self.last_frame = len;
                    return Ok(Next::Record {
                        position,
                        record,
                        len: len as u64,
                    });
                }
                // Read again while reads gain bytes: a follower's read may stop at zeros
                // inside a large record (a zero value) before the record is whole.
                FrameScan::Incomplete { need } if !refilled || grew => {
                    refilled = true;
                    let had = self.buf.len();
                    let have = had - self.pos;
                    self.fill(have + need)?;
                    // Past what was held before (fill drops trailing zeros and reads them
                    // again: counting those would loop for ever at a torn tail of zeros).
                    grew = self.buf.len() > had;
                }
                FrameScan::Incomplete { .. } => {
                    return Ok(Next::End {
                        position,
                        trailing: (self.buf.len() - self.pos) as u64,
                    });
                }
                FrameScan::Corrupt { reason, complete } => {
                    if !refilled {
                        refilled = true;
                        self.fill(FRAME_HEADER_LEN)?;
                        continue;
                    }
                    let rest = &self.buf[self.pos..];
                    // Only an interrupted write counts as a tail: a bad frame that ends exactly
                    // at the end of the file (or is followed by zeros only), or zeros alone. A
                    // bad length in mid-file is corruption, never a reason to cut.
                    let tail_like = if complete {
                        let end =
                            8 + u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
                        rest.get(end..).is_some_and(all_zero)
                    } else {
                        all_zero(rest)
                    };
                    return Ok(Next::Bad {
                        position,
                        reason,
                        tail_like,
                        trailing: rest.len() as u64,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{all_zero, trailing_zeros};

    #[test]
    fn all_zero_finds_one_set_byte_anywhere() {
        for len in [0, 1, 63, 64, 65, 200, 4096] {
            assert!(all_zero(&vec![0u8; len]), "len {len}");
            for at in 0..len {
                let mut b = vec![0u8; len];
                b[at] = 0x80;
                assert!(!all_zero(&b), "len {len}, set at {at}");
            }
        }
    }

    #[test]
    fn trailing_zeros_counts_across_word_boundaries() {
        for len in 0..40 {
            for ones in 0..=len {
                // `ones` leading bytes of 1, then zeros.
                let mut b = vec![0u8; len];
                b[..ones].fill(1);
                assert_eq!(trailing_zeros(&b), len - ones, "len {len}, {ones} ones");
            }
        }
        assert_eq!(trailing_zeros(&[0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0]), 8);
    }
}
