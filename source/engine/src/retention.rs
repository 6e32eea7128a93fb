//! Binlog retention: which whole segments may go, by MySQL's rules (an age,
//! `binlog_expire_logs_seconds`, and a size bound of ringrep's own) and by ringrep's: never
//! a segment that recovery still needs after the newest snapshot, never the segment being
//! written, and not one that a reader (a connected replica, the Kafka relay) still has to read
//! unless the binlog has grown past a hard cap. The older snapshot the engine keeps beside the
//! newest goes once the binlog after it does (recovery could not use it any more).
//!
//! Removing is the binlog writer's ([`binlog_format::BinlogWriter::purge_before`]): the index
//! first, then the files oldest first, so a crash at any point leaves a directory that opens.

use std::time::{Duration, SystemTime};

use binlog_format::segment::{segment_infos, segment_name, SegmentInfo};

use crate::error::{Error, Result};
use crate::{snapshot, Engine};

/// How much binlog a node keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Segments last written longer ago than this go (`--binlog-expire-logs-seconds`; MySQL's
    /// default is 30 days). `None`: no age limit.
    pub expire: Option<Duration>,
    /// While the binlog is larger than this, its oldest segments go (`--binlog-retention-size`).
    /// `None`: no size limit.
    pub max_bytes: Option<u64>,
    /// Segments a reader still needs are kept until the binlog is larger than this; then they
    /// go too, and that reader has to be provisioned again.
    pub hard_cap_bytes: Option<u64>,
}

impl Default for Retention {
    /// 30 days, as MySQL's `binlog_expire_logs_seconds`, and 8 GiB, with readers' segments
    /// kept up to 16 GiB: a busy primary (about 200 bytes per single-row transaction) fills
    /// 8 GiB in hours, so the size bound is the one that usually acts.
    fn default() -> Retention {
        Retention {
            expire: Some(Duration::from_secs(30 * 24 * 3600)),
            max_bytes: Some(8 << 30),
            hard_cap_bytes: Some(16 << 30),
        }
    }
}

/// What a purge did, and what held it back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeOutcome {
    /// The segments removed (`binlog.NNNNNN`), oldest first.
    pub removed: Vec<String>,
    /// Segments that could have gone but recovery needs them (none is after the oldest
    /// snapshot kept): the segment they start at.
    pub kept_for_recovery: Option<String>,
    /// Segments kept because a reader still needs them: the segment they start at.
    pub kept_for_readers: Option<String>,
    /// A reader's segments went because the binlog passed the hard cap: that reader cannot
    /// resume from the stream any more.
    pub readers_overtaken: bool,
}

/// A reader's claim on the binlog from a sequence number on (a replica's stream, an online
/// backup): retention and PURGE BINARY LOGS keep the segments it needs, up to the hard cap.
/// Released when dropped.
pub struct BinlogHold {
    engine: Engine,
    id: u64,
}

impl std::fmt::Debug for BinlogHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinlogHold").field("id", &self.id).finish()
    }
}

impl BinlogHold {
    /// The reader reads `next_seq` next now (it never moves back).
    pub fn advance(&self, next_seq: u64) {
        let mut holds = lock_holds(&self.engine);
        if let Some(h) = holds.get_mut(&self.id) {
            *h = (*h).max(next_seq);
        }
    }
}

impl Drop for BinlogHold {
    fn drop(&mut self) {
        lock_holds(&self.engine).remove(&self.id);
    }
}

fn lock_holds(engine: &Engine) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<u64, u64>> {
    engine
        .shared
        .holds
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The first segment that must stay for a reader resuming at `seq`: the last whose first
/// sequence is at or below it.
fn segment_holding(infos: &[SegmentInfo], seq: u64) -> usize {
    infos.iter().rposition(|i| i.first_seq <= seq).unwrap_or(0)
}

impl Engine {
    /// The binlog's segments, oldest first, with their first sequence numbers, sizes and
    /// modification times.
    pub fn binlog_segments(&self) -> Result<Vec<SegmentInfo>> {
        let mut infos = segment_infos(&self.binlog_dir())?;
        for info in &mut infos {
            if let Some(len) = self.written_len(info.number) {
                info.bytes = len;
            }
        }
        Ok(infos)
    }

    /// Registers a reader that reads `from_seq` next; what it needs is kept while the hold
    /// lives. A purge in progress finishes first, so the reader sees the binlog as it is after.
    pub fn hold_binlog(&self, from_seq: u64) -> BinlogHold {
        let id = self
            .shared
            .next_hold
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock_holds(self).insert(id, from_seq);
        BinlogHold {
            engine: self.clone(),
            id,
        }
    }

    /// The lowest sequence number a registered reader reads next.
    pub fn readers_from(&self) -> Option<u64> {
        lock_holds(self).values().min().copied()
    }

    /// The first sequence number the binlog still holds (what a replica can resume from).
    pub fn first_binlog_seq(&self) -> Result<u64> {
        Ok(self
            .binlog_segments()?
            .first()
            .map_or(self.last_seq() + 1, |s| s.first_seq))
    }

    /// The index (into `infos`) of the first segment recovery needs: the one holding the
    /// transaction after the newest snapshot.
    fn recovery_floor(&self, infos: &[SegmentInfo]) -> Result<usize> {
        match snapshot::newest_seq(self.dir())? {
            None => Ok(0),
            Some(seq) => Ok(segment_holding(infos, seq + 1)),
        }
    }

    /// Removes the segments before `keep_from` (a segment number; `PURGE BINARY LOGS TO`),
    /// except those recovery needs and those a registered reader still needs (as MySQL keeps
    /// the files a replica reads). With `snapshot_if_needed`, a snapshot is taken first when
    /// recovery would hold segments back, so that they can go.
    pub fn purge_binlogs_to(
        &self,
        keep_from: u64,
        snapshot_if_needed: bool,
    ) -> Result<PurgeOutcome> {
        self.purge_to(keep_from, snapshot_if_needed, true, None)
    }

    /// [`Engine::purge_binlogs_to`]; with `respect_readers` false (past the hard cap) the
    /// registered readers' segments go too. `extra_reader` is a reader that is not registered
    /// (the Kafka relay's position).
    fn purge_to(
        &self,
        keep_from: u64,
        snapshot_if_needed: bool,
        respect_readers: bool,
        extra_reader: Option<u64>,
    ) -> Result<PurgeOutcome> {
        let Some(writer) = self.shared.binlog.as_ref() else {
            return Err(Error::read_only());
        };
        let mut infos = self.binlog_segments()?;
        let Some(last) = infos.last() else {
            return Ok(PurgeOutcome::default());
        };
        // Never the segment being written.
        let want = keep_from.min(last.number);
        let mut floor = self.recovery_floor(&infos)?;
        if snapshot_if_needed && infos.get(floor).is_some_and(|s| s.number < want) {
            self.snapshot_live()?;
            infos = self.binlog_segments()?;
            floor = self.recovery_floor(&infos)?;
        }
        let mut outcome = PurgeOutcome::default();
        let floor_number = infos.get(floor).map_or(u64::MAX, |s| s.number);
        if floor_number < want {
            outcome.kept_for_recovery = Some(segment_name(floor_number));
        }
        let mut keep = want.min(floor_number);
        // Readers are read, and files removed, under the holds' lock: one registering now
        // waits, then finds the binlog as purged.
        let holds = lock_holds(self);
        if respect_readers {
            if let Some(seq) = holds.values().copied().chain(extra_reader).min() {
                let hold = infos[segment_holding(&infos, seq)].number;
                if hold < keep {
                    outcome.kept_for_readers = Some(segment_name(hold));
                    keep = hold;
                }
            }
        }
        // Snapshots whose next transaction goes with these segments go first: a recovery
        // falling back to one would find its binlog missing.
        if let Some(next) = infos.iter().find(|s| s.number >= keep) {
            snapshot::remove_older_than(self.dir(), next.first_seq.saturating_sub(1))?;
        }
        outcome.removed = writer
            .purge_before(keep)?
            .into_iter()
            .map(segment_name)
            .collect();
        drop(holds);
        if !outcome.removed.is_empty() {
            self.shared.purged_segments.fetch_add(
                outcome.removed.len() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
            tracing::info!(
                "binlog purged: {} segment(s), {} to {}",
                outcome.removed.len(),
                outcome.removed.first().map_or("", String::as_str),
                outcome.removed.last().map_or("", String::as_str)
            );
        }
        Ok(outcome)
    }

    /// Removes the segments last written before `before` (`PURGE BINARY LOGS BEFORE`), except
    /// those readers need; a snapshot is taken first when recovery would keep them.
    pub fn purge_binlogs_before(&self, before: SystemTime) -> Result<PurgeOutcome> {
        let infos = self.binlog_segments()?;
        let keep_from = infos
            .iter()
            .find(|s| s.modified >= before)
            .or(infos.last())
            .map_or(0, |s| s.number);
        self.purge_binlogs_to(keep_from, true)
    }

    /// Applies `policy`: the oldest segments go while they are older than its age or the
    /// binlog is over its size, but not those from the one holding `readers_from` (the
    /// lowest sequence number a connected reader resumes at) unless the binlog is over the
    /// hard cap. Takes a snapshot first when recovery would hold segments back.
    pub fn enforce_retention(
        &self,
        policy: &Retention,
        readers_from: Option<u64>,
    ) -> Result<PurgeOutcome> {
        let infos = self.binlog_segments()?;
        if infos.len() < 2 {
            return Ok(PurgeOutcome::default());
        }
        let total: u64 = infos.iter().map(|s| s.bytes).sum();
        let now = SystemTime::now();
        // Candidates: a prefix of the closed segments.
        let mut cut = 0;
        let mut left = total;
        for s in &infos[..infos.len() - 1] {
            let expired = policy
                .expire
                .is_some_and(|e| now.duration_since(s.modified).unwrap_or_default() > e);
            let oversize = policy.max_bytes.is_some_and(|m| left > m);
            if !(expired || oversize) {
                break;
            }
            cut += 1;
            left -= s.bytes;
        }
        let mut outcome = PurgeOutcome::default();
        let readers = self.readers_from().into_iter().chain(readers_from).min();
        let mut respect = true;
        if let Some(seq) = readers {
            let hold = segment_holding(&infos, seq);
            if hold < cut {
                let over_cap = policy.hard_cap_bytes.is_some_and(|c| total > c);
                if over_cap {
                    respect = false;
                    outcome.readers_overtaken = true;
                    self.shared
                        .readers_overtaken
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::warn!(
                        "binlog over its hard cap ({total} bytes): removing segments a reader still needs (from seq {seq}); it will have to be provisioned again"
                    );
                } else {
                    outcome.kept_for_readers = Some(segment_name(infos[hold].number));
                    cut = hold;
                }
            }
        }
        if cut == 0 {
            return Ok(outcome);
        }
        let purged = self.purge_to(infos[cut].number, true, respect, readers_from)?;
        outcome.removed = purged.removed;
        outcome.kept_for_recovery = purged.kept_for_recovery;
        if purged.kept_for_readers.is_some() {
            outcome.kept_for_readers = purged.kept_for_readers;
        }
        Ok(outcome)
    }
}
