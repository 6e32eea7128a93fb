//! The durable end of a binlog, published for readers in other processes.
//!
//! The files of a binlog hold records written to the operating system and not yet fsynced:
//! a power cut loses them, and a heal after a failed write or fsync cuts them back (see
//! [`crate::BinlogWriter::heal`]). The writer's process knows where the fsynced part ends; a
//! reader in another process (a replica following the directory, the relay on its own) sees
//! only the files. So after each fsync the writer stores the segment and length it covers in
//! [`DURABLE_FILE`], and it holds an exclusive lock on that file for as long as it is open.
//!
//! A reader passes a record on when one of these says it is durable:
//! - the published end covers it;
//! - a later segment exists (a rotation fsyncs a segment before it creates the next);
//! - no writer holds the lock: then the files are all there is, as recovery will find them.
//!   The reader holds a shared lock while it reads such records, so that a writer cannot
//!   start and append in between (a writer opening waits for it, and a reader lets go
//!   whenever it waits for more).
//!
//! The file is a hint for live readers and is never fsynced: after a crash its contents may
//! be stale, but a crash also frees the lock, and then the third rule applies.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::notifier::Notifier;

/// The file in a binlog directory that holds the durable end (see the module's text).
pub const DURABLE_FILE: &str = "binlog.durable";

/// Bytes of the file: segment, length and a check word, each a little-endian u64.
const LEN: usize = 24;
/// Mixed into the check word, so that a file of zeros or a torn write does not pass.
const CHECK: u64 = 0x7269_6e67_7265_7064;

fn encode(segment: u64, len: u64) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[..8].copy_from_slice(&segment.to_le_bytes());
    b[8..16].copy_from_slice(&len.to_le_bytes());
    b[16..].copy_from_slice(&(segment ^ len.rotate_left(17) ^ CHECK).to_le_bytes());
    b
}

fn decode(b: &[u8; LEN]) -> Option<(u64, u64)> {
    let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let (segment, len, check) = (word(0), word(1), word(2));
    (check == segment ^ len.rotate_left(17) ^ CHECK).then_some((segment, len))
}

/// The writer's side: the lock, and the end published last (also given to readers in the
/// writer's process through its notifier).
pub(crate) struct Publisher {
    file: File,
    last: Mutex<(u64, u64)>,
    local: Arc<Notifier>,
}

/// How long a writer opening waits for readers holding the shared lock. Readers hold it for
/// one read; longer means another writer has the directory.
const OPEN_WAIT: Duration = Duration::from_secs(2);

impl Publisher {
    /// Takes the directory's writer lock and publishes `(segment, len)`: what recovery found
    /// is what the files hold.
    pub(crate) fn open(
        dir: &Path,
        segment: u64,
        len: u64,
        local: Arc<Notifier>,
    ) -> Result<Publisher> {
        let path = dir.join(DURABLE_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let deadline = Instant::now() + OPEN_WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(Error::Invalid(format!(
                        "{} is in use by another binlog writer (one writer per directory)",
                        dir.display()
                    )))
                }
                Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
            }
        }
        file.write_all_at(&encode(segment, len), 0)
            .map_err(|e| Error::io(&path, e))?;
        local.advance_durable_end((segment, len));
        Ok(Publisher {
            file,
            last: Mutex::new((segment, len)),
            local,
        })
    }

    /// Publishes that everything up to `len` bytes of `segment` is fsynced. An end behind
    /// the last one published is ignored (two fsyncs may finish out of order).
    pub(crate) fn publish(&self, segment: u64, len: u64) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if (segment, len) <= *last {
            return;
        }
        // A failed write leaves the old end: readers wait longer, nothing is lost. (The file
        // is never extended, so a full disk does not make it fail.)
        if self.file.write_all_at(&encode(segment, len), 0).is_ok() {
            *last = (segment, len);
        }
        // The fsync happened whatever became of the file's write: readers in this process
        // go by it (a reader at the old end would otherwise wait for the next publish).
        self.local.advance_durable_end((segment, len));
    }

    /// The writer is closing: readers in its process go by the files from now on, as
    /// readers in other processes do once its lock is gone.
    pub(crate) fn close(&self) {
        self.local.clear_durable_end();
    }
}

/// What a reader may do with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It is durable: pass it on.
    Durable,
    /// A live writer has not fsynced it yet: read it again later, from the file (a heal may
    /// replace it).
    NotYet,
    /// No writer holds the directory: this reader now holds the shared lock, so that none
    /// starts; read the record again under it (it was read before the lock was taken), then
    /// [`DurableEnd::release`].
    NoWriter,
}

/// The reader's side: decides whether a record may be passed on (see the module's text).
#[derive(Debug)]
pub struct DurableEnd {
    dir: PathBuf,
    file: Option<File>,
    known: (u64, u64),
    locked: bool,
    /// The writer's notifier, for a reader in its process: the end it publishes is read
    /// from memory while the writer is open (no read of the file, no look at its lock).
    local: Option<Arc<Notifier>>,
}

impl DurableEnd {
    /// The durable end of the binlog in `dir` (which need not exist yet).
    pub fn new(dir: &Path) -> DurableEnd {
        DurableEnd {
            dir: dir.to_path_buf(),
            file: None,
            known: (0, 0),
            locked: false,
            local: None,
        }
    }

    /// Reads the end from the writer's `notifier` while it is open (the reader is in the
    /// writer's process).
    pub fn with_notifier(mut self, notifier: Arc<Notifier>) -> DurableEnd {
        self.local = Some(notifier);
        self
    }

    /// The end the open writer of this process last published, when there is one.
    fn local_end(&self) -> Option<(u64, u64)> {
        self.local.as_ref().and_then(|n| n.durable_end())
    }

    /// Whether everything the open writer of this process has made durable ends exactly at
    /// `at`: nothing is there to read until it publishes more. False when that is not
    /// known (no writer here, or it is closed).
    pub fn is_end(&mut self, at: crate::Position) -> bool {
        match self.local_end() {
            Some(end) => {
                self.known = self.known.max(end);
                end == (at.segment, at.offset)
            }
            None => false,
        }
    }

    /// Opens the file if it exists yet; false when it does not.
    fn open(&mut self) -> Result<bool> {
        if self.file.is_none() {
            let path = self.dir.join(DURABLE_FILE);
            match File::open(&path) {
                Ok(f) => self.file = Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        Ok(true)
    }

    /// Takes the shared lock if no writer holds the directory, for a reader that found none
    /// last time: what it reads under the lock needs no look at the published end. False
    /// when a writer holds it.
    pub fn hold(&mut self) -> Result<bool> {
        if self.locked {
            return Ok(true);
        }
        if !self.open()? {
            return Ok(false);
        }
        let file = self.file.as_ref().expect("opened above");
        match file.try_lock_shared() {
            Ok(()) => {
                self.locked = true;
                Ok(true)
            }
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Error(e)) => Err(Error::io(self.dir.join(DURABLE_FILE), e)),
        }
    }

    fn covers(&self, segment: u64, end: u64) -> bool {
        segment < self.known.0 || (segment == self.known.0 && end <= self.known.1)
    }

    /// Whether the writer has published a durable end past `at`: the byte there is part of
    /// a durable record. Takes no lock.
    pub fn published_past(&mut self, at: crate::Position) -> Result<bool> {
        if self.covers(at.segment, at.offset + 1) {
            return Ok(true);
        }
        if let Some(end) = self.local_end() {
            self.known = self.known.max(end);
            return Ok(self.covers(at.segment, at.offset + 1));
        }
        if !self.open()? {
            return Ok(false);
        }
        self.refresh();
        Ok(self.covers(at.segment, at.offset + 1))
    }

    /// Reads the published end into `known`.
    fn refresh(&mut self) {
        let Some(file) = self.file.as_ref() else {
            return;
        };
        let mut b = [0u8; LEN];
        if file.read_exact_at(&mut b, 0).is_ok() {
            if let Some(end) = decode(&b) {
                self.known = self.known.max(end);
            }
        }
    }

    /// Whether the record of `segment` that ends at byte `end` is durable.
    pub fn check(&mut self, segment: u64, end: u64) -> Result<Verdict> {
        if self.locked || self.covers(segment, end) {
            return Ok(Verdict::Durable);
        }
        if let Some(published) = self.local_end() {
            self.known = self.known.max(published);
            if self.covers(segment, end) || self.later_segment(segment) {
                return Ok(Verdict::Durable);
            }
            // The writer is open, so it holds the lock: no need to try it.
            return Ok(Verdict::NotYet);
        }
        if !self.open()? {
            // No writer ever opened this directory (or only one older than the file): what
            // the files hold is all there is.
            return Ok(Verdict::Durable);
        }
        self.refresh();
        if self.covers(segment, end) {
            return Ok(Verdict::Durable);
        }
        if self.later_segment(segment) {
            return Ok(Verdict::Durable);
        }
        Ok(if self.hold()? {
            Verdict::NoWriter
        } else {
            Verdict::NotYet
        })
    }

    /// Whether the segment after `segment` exists: a rotation fsyncs a segment before it
    /// creates the next.
    fn later_segment(&self, segment: u64) -> bool {
        self.dir
            .join(crate::segment::segment_name(segment + 1))
            .exists()
    }

    /// Lets a writer open again after [`Verdict::NoWriter`].
    pub fn release(&mut self) {
        if std::mem::take(&mut self.locked) {
            if let Some(f) = &self.file {
                let _ = f.unlock();
            }
        }
    }
}

impl Drop for DurableEnd {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_round_trips_and_a_torn_one_is_refused() {
        let b = encode(3, 4096);
        assert_eq!(decode(&b), Some((3, 4096)));
        let mut torn = b;
        torn[9] ^= 1;
        assert_eq!(decode(&torn), None);
        assert_eq!(decode(&[0u8; LEN]), None);
    }

    #[test]
    fn a_reader_waits_for_a_live_writer_and_not_for_a_gone_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut reader = DurableEnd::new(dir.path());
        assert_eq!(
            reader.check(1, 500).expect("check"),
            Verdict::Durable,
            "no file yet"
        );
        let writer = Publisher::open(dir.path(), 1, 100, Arc::default()).expect("writer");
        let mut reader = DurableEnd::new(dir.path());
        assert_eq!(reader.check(1, 100).expect("check"), Verdict::Durable);
        assert_eq!(reader.check(1, 101).expect("check"), Verdict::NotYet);
        writer.publish(1, 200);
        writer.publish(1, 150);
        assert_eq!(reader.check(1, 200).expect("check"), Verdict::Durable);
        assert_eq!(reader.check(2, 10).expect("check"), Verdict::NotYet);
        assert!(
            Publisher::open(dir.path(), 1, 200, Arc::default()).is_err(),
            "a second writer is refused"
        );
        drop(writer);
        assert_eq!(reader.check(2, 10).expect("check"), Verdict::NoWriter);
        assert_eq!(
            reader.check(2, 20).expect("check"),
            Verdict::Durable,
            "still held"
        );
        reader.release();
        assert!(reader.hold().expect("hold"));
        reader.release();
        let _writer = Publisher::open(dir.path(), 2, 20, Arc::default()).expect("writer");
        assert_eq!(reader.check(2, 30).expect("check"), Verdict::NotYet);
    }
}
