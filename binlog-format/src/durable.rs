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
//! The file also carries a heal count, moved on by each heal and each writer's opening: a
//! heal cuts records a reader may have read past the durable end, and the records written
//! next may end where those did, so a reader reads again what it read before the count
//! changed (see [`DurableEnd::heal_changes`]).
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
// The published end is what the in-process notifier carries too; it is defined beside it.
pub use crate::notifier::Published;

/// The file in a binlog directory that holds the durable end (see the module's text).
pub const DURABLE_FILE: &str = "binlog.durable";

/// Bytes of the file: segment, length and a check word (the whole file as writers before the
/// heal count wrote it, and as their readers read it), then the heal count and a second check
/// word over all three; each a little-endian u64.
const LEN: usize = 40;
/// The part a reader of the earlier form reads.
const OLD_LEN: usize = 24;
/// Mixed into the check words, so that a file of zeros or a torn write does not pass.
const CHECK: u64 = 0x7269_6e67_7265_7064;

fn old_check_word(segment: u64, len: u64) -> u64 {
    segment ^ len.rotate_left(17) ^ CHECK
}

fn check_word(segment: u64, len: u64, heals: u64) -> u64 {
    old_check_word(segment, len) ^ heals.rotate_left(41)
}

fn encode(p: Published) -> [u8; LEN] {
    let (segment, len) = p.end;
    let mut b = [0u8; LEN];
    b[..8].copy_from_slice(&segment.to_le_bytes());
    b[8..16].copy_from_slice(&len.to_le_bytes());
    b[16..24].copy_from_slice(&old_check_word(segment, len).to_le_bytes());
    b[24..32].copy_from_slice(&p.heals.to_le_bytes());
    b[32..].copy_from_slice(&check_word(segment, len, p.heals).to_le_bytes());
    b
}

/// The file's contents, from `b` (the bytes one read returned); `None` for a torn read. A
/// file whose first 24 bytes check and whose count does not (a writer of the earlier form
/// rewrote only those, or a read caught a write half done) gives the count 0: a count
/// readers have not seen from this writer, so they read again what they hold.
fn decode(b: &[u8]) -> Option<Published> {
    if b.len() < OLD_LEN {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let (segment, len) = (word(0), word(1));
    if word(2) != old_check_word(segment, len) {
        return None;
    }
    let heals = if b.len() >= LEN && word(4) == check_word(segment, len, word(3)) {
        word(3)
    } else {
        0
    };
    Some(Published {
        end: (segment, len),
        heals,
    })
}

/// Reads the file's contents; `None` when they are torn (or unreadable).
fn read_published(file: &File) -> Option<Published> {
    let mut b = [0u8; LEN];
    let n = file.read_at(&mut b, 0).ok()?;
    decode(&b[..n])
}

/// The writer's side: the lock, and what it published last (also given to readers in the
/// writer's process through its notifier).
pub(crate) struct Publisher {
    file: File,
    path: PathBuf,
    /// The end last written to the file, and the heal count now.
    last: Mutex<Published>,
    local: Arc<Notifier>,
}

/// How long a writer opening waits for readers holding the shared lock. Readers hold it for
/// one read; longer means another writer has the directory.
const OPEN_WAIT: Duration = Duration::from_secs(2);

impl Publisher {
    /// Takes the directory's writer lock and publishes `(segment, len)`: what recovery found
    /// is what the files hold. The heal count goes on from the last writer's, plus one:
    /// recovery may have cut what a reader read from that writer past its durable end.
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
        let heals = read_published(&file).map_or(0, |p| p.heals.wrapping_add(1));
        let published = Published {
            end: (segment, len),
            heals,
        };
        file.write_all_at(&encode(published), 0)
            .map_err(|e| Error::io(&path, e))?;
        local.advance_published(published);
        Ok(Publisher {
            file,
            path,
            last: Mutex::new(published),
            local,
        })
    }

    /// Publishes that everything up to `len` bytes of `segment` is fsynced. An end behind
    /// the last one published is ignored (two fsyncs may finish out of order).
    pub(crate) fn publish(&self, segment: u64, len: u64) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if (segment, len) <= last.end {
            return;
        }
        // Not written: readers in other processes wait for the next publish; see `write`.
        let _ = self.write(&mut last, (segment, len));
    }

    /// Publishes a heal that cut the binlog back to `len` bytes of `segment` (and made that
    /// durable): the heal count moves on, so that a reader drops what it read past the
    /// durable end before (a record written over it since may end where that one did).
    ///
    /// An error means readers in other processes were not told: the heal must not be taken
    /// as done (a record written over the cut one could then pass as what they buffered).
    /// Readers in this process were told all the same.
    pub(crate) fn healed(&self, segment: u64, len: u64) -> std::io::Result<()> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.heals = last.heals.wrapping_add(1);
        let end = last.end.max((segment, len));
        self.write(&mut last, end)
    }

    /// The file it publishes in.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, last: &mut Published, end: (u64, u64)) -> std::io::Result<()> {
        let published = Published {
            end,
            heals: last.heals,
        };
        // A failed write leaves the old end: readers wait longer, nothing is lost; the heal
        // count goes with every later write. (The file is never extended after the writer
        // opens, so a full disk does not make it fail.)
        let written = crate::failpoint::check("binlog::durable_write")
            .and_then(|()| self.file.write_all_at(&encode(published), 0));
        if written.is_ok() {
            last.end = end;
        }
        // The fsync happened whatever became of the file's write: readers in this process
        // go by it (a reader at the old end would otherwise wait for the next publish).
        self.local.advance_published(published);
        written
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
    /// The heal count at the last look at what the writer published.
    last_heals: Option<u64>,
    /// How many times the looks found a heal count other than the look before (the first
    /// look counts): what [`DurableEnd::heal_changes`] gives, so that a count going back (a writer
    /// that could not read its predecessor's) is a change too.
    heal_changes: u64,
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
            last_heals: None,
            heal_changes: 0,
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

    /// What the open writer of this process last published, when there is one, taken in.
    fn local_end(&mut self) -> Option<(u64, u64)> {
        let published = self.local.as_ref().and_then(|n| n.published())?;
        self.observe(published);
        Some(published.end)
    }

    fn observe(&mut self, published: Published) {
        self.known = self.known.max(published.end);
        if self.last_heals != Some(published.heals) {
            self.last_heals = Some(published.heals);
            self.heal_changes += 1;
        }
    }

    /// How many times the heal count the writer publishes (see [`Published::heals`]) was
    /// found changed, as of the last look. A record read before a look that found it
    /// changed may have been rewritten since it was read, though its place is durable now:
    /// read it again.
    pub fn heal_changes(&self) -> u64 {
        self.heal_changes
    }

    /// Whether everything the open writer of this process has made durable ends exactly at
    /// `at`: nothing is there to read until it publishes more. False when that is not
    /// known (no writer here, or it is closed).
    pub fn is_end(&mut self, at: crate::Position) -> bool {
        match self.local_end() {
            Some(end) => end == (at.segment, at.offset),
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
        if self.local_end().is_some() {
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
        if let Some(published) = self.file.as_ref().and_then(read_published) {
            self.observe(published);
        }
    }

    /// Whether the record of `segment` that ends at byte `end` is durable.
    pub fn check(&mut self, segment: u64, end: u64) -> Result<Verdict> {
        if self.locked || self.covers(segment, end) {
            return Ok(Verdict::Durable);
        }
        if self.local_end().is_some() {
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
        let p = Published {
            end: (3, 4096),
            heals: 7,
        };
        let b = encode(p);
        assert_eq!(decode(&b), Some(p));
        let unknown = Published {
            end: (3, 4096),
            heals: 0,
        };
        for i in 0..LEN {
            let mut torn = b;
            torn[i] ^= 1;
            // The first 24 bytes are the end as readers of the earlier form read it; after
            // them a bad count is a count not seen before.
            let want = (i >= OLD_LEN).then_some(unknown);
            assert_eq!(decode(&torn), want, "byte {i} flipped");
        }
        assert_eq!(decode(&[0u8; LEN]), None);
        assert_eq!(decode(&b[..20]), None, "a short read");
        assert_eq!(
            decode(&b[..OLD_LEN]),
            Some(unknown),
            "as an old reader reads it"
        );
        // As a writer before the heal count wrote it.
        let mut old = [0u8; OLD_LEN];
        old[..8].copy_from_slice(&3u64.to_le_bytes());
        old[8..16].copy_from_slice(&4096u64.to_le_bytes());
        old[16..].copy_from_slice(&(3 ^ 4096u64.rotate_left(17) ^ CHECK).to_le_bytes());
        assert_eq!(decode(&old), Some(unknown));
        assert_eq!(&b[..OLD_LEN], &old[..], "old readers read the new file");
        // An old writer rewrote only the first 24 bytes of a new file.
        let mut rewritten = encode(Published {
            end: (2, 100),
            heals: 7,
        });
        rewritten[..OLD_LEN].copy_from_slice(&old);
        assert_eq!(decode(&rewritten), Some(unknown));
    }

    #[test]
    fn heals_and_writers_opening_move_the_heal_count_readers_see() {
        let dir = tempfile::tempdir().expect("tempdir");
        let notifier = Arc::new(Notifier::default());
        let mut remote = DurableEnd::new(dir.path());
        let mut local = DurableEnd::new(dir.path()).with_notifier(Arc::clone(&notifier));
        let writer = Publisher::open(dir.path(), 1, 100, Arc::clone(&notifier)).expect("writer");
        assert_eq!(remote.check(1, 100).expect("check"), Verdict::Durable);
        assert_eq!(local.check(1, 100).expect("check"), Verdict::Durable);
        let first = remote.heal_changes();
        assert_eq!(local.heal_changes(), first);
        // A heal that cuts back to the published end still moves the count on.
        writer.healed(1, 100).expect("published");
        writer.publish(1, 150);
        assert_eq!(remote.check(1, 150).expect("check"), Verdict::Durable);
        assert_eq!(local.check(1, 150).expect("check"), Verdict::Durable);
        assert_eq!(remote.heal_changes(), first + 1);
        assert_eq!(local.heal_changes(), first + 1);
        drop(writer);
        // The next writer goes on from there, one more: recovery may have cut bytes read.
        let _writer = Publisher::open(dir.path(), 1, 150, Arc::default()).expect("writer");
        let beyond = crate::Position {
            segment: 1,
            offset: 200,
        };
        assert!(!remote.published_past(beyond).expect("look"));
        assert_eq!(remote.heal_changes(), first + 2);
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
