//! The applier: replays a primary's transactions on a replica engine through the privileged
//! path, storing its position in `mysql.ringrep_apply_status` in the same commit as the rows.
//!
//! Exactly once: a transaction at or below the stored sequence is skipped; the next one must
//! be exactly stored + 1, else the applier stops with the missing sequence. Rows and position
//! are one binlog record on the replica, so a crash leaves both or neither.

use std::time::Duration;

use binlog_format::schema::{ColumnDef, ColumnDefault, ColumnType, IntWidth, TableDef};
use binlog_format::{Cause, DdlEvent, Event, Key, Origin, Position, RowChange, RowEvent, Value};
use ringrep_engine::ddl::system_table;
use ringrep_engine::SYSTEM_DB;
use ringrep_engine::{Engine, Session};

use crate::error::{Error, Result};
use crate::source::{EventSource, Provision, SourcedTx};

/// How long an applied transaction may stay unsynced by default ([`Applier::set_sync_delay`]).
pub const DEFAULT_SYNC_DELAY: Duration = Duration::from_millis(10);

/// Rows per transaction while a snapshot is loaded ([`Applier::provision`]).
pub const PROVISION_ROWS: usize = 4096;

/// The replica's position table in database `mysql`: one row per source server, written in
/// the same commit as the rows it applied.
pub const STATUS_TABLE: &str = "ringrep_apply_status";

/// The stored position for one source server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedPosition {
    /// The source server (the origin of the transactions).
    pub server_id: u32,
    /// The sequence number of the last transaction applied from it.
    pub last_seq: u64,
    /// Where that transaction was read (segment and offset in the source's binlog).
    pub position: Position,
    /// When the source committed it, in microseconds since 1970-01-01 UTC.
    pub source_commit_us: i64,
    /// When the replica applied it, in microseconds since 1970-01-01 UTC.
    pub applied_us: i64,
}

/// What applying one transaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Applied, with its position, in one commit.
    Applied {
        /// The transaction's sequence number.
        seq: u64,
    },
    /// Already applied (a duplicate delivery): nothing changed.
    Skipped {
        /// The transaction's sequence number.
        seq: u64,
    },
}

/// Lag samples (commit on the primary to commit on the replica), in microseconds, as a
/// histogram of fixed size: a replica that runs for months records every transaction in the
/// same 30 KiB. Values below 128 µs are exact; above, each power of two is split into 64
/// buckets, so a percentile is within 1/64 (1.6%) of the sample it stands for.
#[derive(Debug, Default, Clone)]
pub struct LagStats {
    /// Samples per bucket (see `bucket`); empty until the first sample.
    counts: Vec<u64>,
    total: u64,
}

/// Buckets per power of two (above 2 * `SUB` µs).
const SUB: usize = 64;
/// Buckets for every `u64` value.
const BUCKETS: usize = (64 - 5) * SUB;

/// The bucket of `us`: the value itself below 128, then 64 buckets per power of two.
fn bucket(us: u64) -> usize {
    if us < 2 * SUB as u64 {
        return us as usize;
    }
    let p = 63 - us.leading_zeros() as usize;
    let shift = p - 6;
    (p - 5) * SUB + ((us >> shift) as usize - SUB)
}

/// The smallest value of bucket `i`, and the width of the bucket.
fn bucket_range(i: usize) -> (u64, u64) {
    if i < 2 * SUB {
        return (i as u64, 1);
    }
    let (group, mantissa) = (i / SUB, i % SUB);
    let shift = group - 1;
    (((SUB + mantissa) as u64) << shift, 1 << shift)
}

impl LagStats {
    /// Adds one sample (negative lags, from clock skew, count as 0).
    pub fn record(&mut self, us: i64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        self.counts[bucket(us.max(0) as u64)] += 1;
        self.total += 1;
    }

    /// The number of samples.
    pub fn count(&self) -> usize {
        self.total as usize
    }

    /// The `p`-th percentile (0..=100) in microseconds: the middle of the bucket that holds
    /// the sample of that rank.
    pub fn percentile(&self, p: f64) -> Option<i64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((p / 100.0) * (self.total - 1) as f64).round() as u64;
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                let (low, width) = bucket_range(i);
                return Some((low + width / 2) as i64);
            }
        }
        None
    }
}

fn status_def() -> TableDef {
    let col = |name: &str, ty, nullable| ColumnDef {
        name: String::from(name),
        ty,
        nullable,
        default: ColumnDefault::None,
        on_update_now: false,
        auto_increment: false,
        comment: String::new(),
    };
    let u = |w| ColumnType::Integer {
        width: w,
        unsigned: true,
    };
    system_table(
        STATUS_TABLE,
        vec![
            col("server_id", u(IntWidth::Int), false),
            col("last_seq", u(IntWidth::Big), false),
            col("binlog_segment", u(IntWidth::Big), false),
            col("binlog_offset", u(IntWidth::Big), false),
            col(
                "source_commit_us",
                ColumnType::Integer {
                    width: IntWidth::Big,
                    unsigned: false,
                },
                false,
            ),
            col("applied_at", ColumnType::Timestamp { fsp: 6 }, false),
        ],
        1,
    )
}

/// Replays a primary's transactions on a replica engine through the privileged path, exactly
/// once: each transaction and its source position commit together, and a transaction at or
/// below the stored position is skipped.
pub struct Applier {
    session: Session,
    /// LSN of the last applied transaction not yet synced (group commit on the replica).
    pending_lsn: Option<u64>,
    /// How long [`Applier::run`] lets an applied transaction stay unsynced.
    sync_delay: Duration,
    status: TableDef,
    /// Replica lag of the transactions applied in this run.
    pub lag: LagStats,
    /// Transactions applied in this run.
    pub applied: u64,
    /// Transactions skipped as already applied in this run.
    pub skipped: u64,
}

impl std::fmt::Debug for Applier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applier")
            .field("applied", &self.applied)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

impl Applier {
    /// Prepares a replica engine: the applier privilege, and the status table (created in the
    /// replica's own binlog the first time).
    pub fn new(engine: &Engine) -> Result<Applier> {
        let mut session = engine.session();
        session.vars.applier = true;
        session.vars.database = None;
        if !engine.with_state(|st| st.has_database(SYSTEM_DB)) {
            session.create_database(SYSTEM_DB, true)?;
        }
        let status = match engine.table_def(SYSTEM_DB, STATUS_TABLE) {
            Some(d) => d,
            None => {
                session.create_table(status_def(), true)?;
                engine
                    .table_def(SYSTEM_DB, STATUS_TABLE)
                    .ok_or_else(|| Error::Invalid("status table missing after create".into()))?
            }
        };
        Ok(Applier {
            session,
            pending_lsn: None,
            sync_delay: DEFAULT_SYNC_DELAY,
            status,
            lag: LagStats::default(),
            applied: 0,
            skipped: 0,
        })
    }

    /// How long [`Applier::run`] may leave an applied transaction unsynced
    /// ([`DEFAULT_SYNC_DELAY`] unless set). With a delay, the apply never waits for the disk:
    /// the engine's background syncer fsyncs what was applied within it, one fsync for all
    /// that arrived meanwhile. That is safe for exactly-once because a transaction and its
    /// position are one record: a crash (of the machine or the process) loses the last `delay`
    /// of applied transactions together with their position, and the replica fetches them
    /// again. Zero waits for an
    /// fsync whenever the source runs dry (and after 1000 transactions), as a primary's commit
    /// does. Only with the engine's `SyncPolicy::EveryCommit`: other policies do not wait
    /// for an fsync in any case.
    pub fn set_sync_delay(&mut self, delay: Duration) {
        self.sync_delay = delay;
    }

    /// Whether [`Applier::run`] defers its fsyncs (see [`Applier::set_sync_delay`]): then it
    /// blocks only now and then (on stop, at its limits, to load a snapshot), and may run on
    /// a tokio worker beside the source's reading task.
    pub fn defers_sync(&self) -> bool {
        !self.sync_delay.is_zero()
            && self.session.engine().config().sync == binlog_format::SyncPolicy::EveryCommit
    }

    /// Without waiting: with `request` (once per applied transaction), has what was applied
    /// fsynced within the sync delay; without, only looks whether it is durable yet. Fails as
    /// [`Applier::flush`] does when a write or fsync failed meanwhile.
    fn sync_soon(&mut self, request: bool) -> Result<()> {
        // Taken, as `flush` takes it: after a failure the commit is not waited for again
        // (the error was its report, and a heal may have cut it).
        let Some(lsn) = self.pending_lsn.take() else {
            return Ok(());
        };
        let engine = self.session.engine();
        let durable = if request {
            engine.sync_within(lsn, self.sync_delay)?
        } else {
            engine.check_durable(lsn)?
        };
        if !durable {
            self.pending_lsn = Some(lsn);
        }
        Ok(())
    }

    /// The replica engine.
    pub fn engine(&self) -> &Engine {
        self.session.engine()
    }

    /// The stored position for `server_id`, if this replica has applied anything from it.
    pub fn position(&self, server_id: u32) -> Option<AppliedPosition> {
        read_position(self.session.engine(), server_id)
    }

    /// Applies one transaction with its position and waits until it is durable, or skips it
    /// when already applied.
    pub fn apply(
        &mut self,
        tx: &binlog_format::Transaction,
        position: Position,
    ) -> Result<ApplyOutcome> {
        let outcome = self.apply_nowait(tx, position)?;
        self.flush()?;
        Ok(outcome)
    }

    /// Makes every transaction applied so far durable (one sync for all of them).
    pub fn flush(&mut self) -> Result<()> {
        if let Some(lsn) = self.pending_lsn.take() {
            let engine = self.session.engine();
            may_block(|| engine.wait_durable(lsn))?;
            crate::failpoint::hit("apply_after_sync");
        }
        Ok(())
    }

    /// Applies one transaction (visible at once) without waiting for durability; call
    /// [`Applier::flush`] before acknowledging. Skips transactions already applied.
    pub fn apply_nowait(
        &mut self,
        tx: &binlog_format::Transaction,
        position: Position,
    ) -> Result<ApplyOutcome> {
        self.apply_owned(tx.clone(), position)
    }

    /// [`Applier::apply_nowait`] of a transaction the caller gives up: its events are moved
    /// into the commit, not copied (the replica's loop; a copy of every row was a quarter of
    /// its allocations).
    fn apply_owned(
        &mut self,
        tx: binlog_format::Transaction,
        position: Position,
    ) -> Result<ApplyOutcome> {
        let last = self.position(tx.server_id).map_or(0, |p| p.last_seq);
        if tx.seq <= last {
            self.skipped += 1;
            return Ok(ApplyOutcome::Skipped { seq: tx.seq });
        }
        if tx.seq != last + 1 {
            return Err(Error::Gap {
                server_id: tx.server_id,
                missing: last + 1,
                found: tx.seq,
                position,
            });
        }
        // A transaction the source re-logged from where it first committed (a promoted
        // replica's history, a chain): the replica keeps that origin, and its position for
        // the first server moves too; one it already has from there changes no rows.
        let origin = tx.origin.unwrap_or(Origin {
            server_id: tx.server_id,
            seq: tx.seq,
        });
        let binlog_format::Transaction {
            server_id,
            seq,
            commit_time_us,
            mut events,
            ..
        } = tx;
        // The source's own apply status is its business: a replica keeps its own.
        events.retain(|e| !ringrep_engine::is_node_local_event(e));
        // This node's own transaction coming back (it was the primary once): never again.
        if origin.server_id == self.session.engine().config().server_id {
            events.clear();
        }
        let mut origin_position = None;
        if origin.server_id != server_id {
            let had = self.position(origin.server_id).map_or(0, |p| p.last_seq);
            if origin.seq <= had {
                events.clear();
            } else {
                origin_position = Some(self.position_event(
                    origin.server_id,
                    origin.seq,
                    position,
                    commit_time_us,
                ));
            }
        }
        // The stored positions go last, in the same record as the rows, in the vector the
        // events came in (one allocation less per transaction than a vector of their own).
        events.reserve_exact(1 + usize::from(origin_position.is_some()));
        events.push(self.position_event(server_id, seq, position, commit_time_us));
        events.extend(origin_position);
        crate::failpoint::hit("apply_before_commit");
        let committed = self
            .session
            .apply_replicated_nowait(events, Vec::new(), origin);
        let (_, lsn) = match committed {
            Ok(c) => c,
            Err(e) => {
                // A commit that heals first may have cut the one pending (reported by this
                // error): the next run must not wait for it and fail again.
                if let Some(p) = self.pending_lsn {
                    if self.session.engine().is_commit_lost(p) {
                        self.pending_lsn = None;
                    }
                }
                return Err(e.into());
            }
        };
        self.pending_lsn = Some(lsn);
        crate::failpoint::hit("apply_after_commit");
        self.applied += 1;
        self.lag
            .record(self.session.engine().now_us() - commit_time_us);
        Ok(ApplyOutcome::Applied { seq })
    }

    /// The write of the stored position: `seq` of `server_id`, read at `position`, committed
    /// there at `commit_us`.
    fn position_event(
        &self,
        server_id: u32,
        seq: u64,
        position: Position,
        commit_us: i64,
    ) -> Event {
        let row = vec![
            Value::UInt(u64::from(server_id)),
            Value::UInt(seq),
            Value::UInt(position.segment),
            Value::UInt(position.offset),
            Value::Int(commit_us),
            Value::Timestamp(self.session.engine().now_us()),
        ];
        Event::Row(RowEvent {
            table_id: self.status.id,
            change: RowChange::Write { row },
            cause: Cause::Update,
        })
    }

    /// What a source gives besides transactions, taken before the next one: a snapshot to
    /// load (provisioning) or where its stream starts (a failover). The snapshot's sequence
    /// number when one was loaded; `Some(0)` for a start point; `None` when there is neither.
    async fn take_from_source(&mut self, source: &mut dyn EventSource) -> Result<Option<u64>> {
        if let Some(mut p) = source.take_provision() {
            if !can_block_in_place() {
                // Loading reads the snapshot as it arrives, blocking for each piece: where
                // this thread may not block, the pieces are taken first.
                p.snapshot.receive_all().await;
            }
            return may_block(|| self.provision(p)).map(Some);
        }
        if let Some((id, seq)) = source.take_baseline() {
            self.set_baseline(id, seq)?;
            return Ok(Some(0));
        }
        Ok(None)
    }

    /// Stores `seq - 1` as applied from `server_id` when nothing is stored for it: the source
    /// found, from what this replica applied of other servers, that its stream starts at `seq`
    /// for this replica (a replica of the old primary re-pointed at a promoted one).
    pub fn set_baseline(&mut self, server_id: u32, seq: u64) -> Result<()> {
        match self.position(server_id) {
            Some(p) if p.last_seq + 1 == seq => Ok(()),
            Some(p) => Err(Error::Invalid(format!(
                "server {server_id} starts this replica at seq {seq} but it applied up to {}",
                p.last_seq
            ))),
            None if seq <= 1 => Ok(()),
            None => {
                tracing::info!(
                    "resuming server {server_id} at its seq {seq}, found from this replica's other positions"
                );
                self.seed_position(server_id, seq - 1)
            }
        }
    }

    /// Stores `seq` as the position applied from `server_id`, for a replica whose data came
    /// from a backup of that server at `seq` (`ringrep-applier seed`): it then resumes the
    /// stream after it. Refused when a position from that server is stored already.
    pub fn seed_position(&mut self, server_id: u32, seq: u64) -> Result<()> {
        if let Some(p) = self.position(server_id) {
            return Err(Error::Invalid(format!(
                "this replica has applied seq {} from server {server_id} already",
                p.last_seq
            )));
        }
        let now = self.session.engine().now_us();
        let event = self.position_event(
            server_id,
            seq,
            Position {
                segment: 0,
                offset: 0,
            },
            now,
        );
        let (_, lsn) =
            self.session
                .apply_replicated_nowait(vec![], vec![event], Origin { server_id, seq })?;
        self.pending_lsn = Some(lsn);
        self.flush()
    }

    /// Loads a primary's snapshot (sent because the primary no longer has this replica's next
    /// transaction) in place of everything the replica holds but its own tables, and stores
    /// the position at the snapshot's sequence number. The rows are written as the snapshot's
    /// bytes arrive, a frame at a time, so loading overlaps the primary's copy and the link.
    /// All of it goes through the replica's binlog, in order: a transaction dropping what is
    /// there, one with the definitions, the rows in transactions of [`PROVISION_ROWS`], and
    /// last the position, once the primary has said the snapshot is whole. A crash, or a
    /// snapshot cut short or damaged on its way, before the last leaves the old position, so
    /// the replica is sent a snapshot again and starts over; nothing is half-loaded for good.
    /// Returns the snapshot's sequence number.
    pub fn provision(&mut self, mut p: Provision) -> Result<u64> {
        self.flush()?;
        let started = std::time::Instant::now();
        let server_id = p.server_id;
        // Why the bytes stopped, when they did: the link's error rather than the reader's.
        let stopped = |stream: &crate::snapshot_stream::SnapshotStream,
                       e: ringrep_engine::Error| {
            match stream.failure() {
                Some(why) => Error::Source(format!(
                    "the snapshot from server {server_id} stopped after {} bytes: {why}",
                    stream.received()
                )),
                None => Error::from(e),
            }
        };
        let mut frames = match ringrep_engine::SnapshotRows::open(&mut p.snapshot) {
            Ok(f) => f,
            Err(e) => return Err(stopped(&p.snapshot, e)),
        };
        let databases = frames.databases.clone();
        let defs = frames.tables.clone();
        let seq = frames.last_seq;
        let origin = Origin { server_id, seq };
        let keep = |db: &str, name: &str| !ringrep_engine::is_node_local_table(db, name);
        // What is there goes, but the replica's own tables and database `mysql` itself.
        let (tables, existing) = self.engine().with_state(|st| {
            (
                st.tables
                    .values()
                    .map(|t| t.def.clone())
                    .collect::<Vec<_>>(),
                st.databases.iter().cloned().collect::<Vec<_>>(),
            )
        });
        let mut drops: Vec<Event> = tables
            .into_iter()
            .filter(|d| keep(&d.database, &d.name))
            .map(|d| {
                Event::Ddl(DdlEvent::DropTable {
                    table_id: d.id,
                    database: d.database.clone(),
                    name: d.name.clone(),
                })
            })
            .collect();
        drops.extend(
            existing
                .into_iter()
                .filter(|d| !d.eq_ignore_ascii_case(SYSTEM_DB))
                .map(|name| Event::Ddl(DdlEvent::DropDatabase { name })),
        );
        if !drops.is_empty() {
            self.session
                .apply_replicated_nowait(drops, vec![], origin)?;
        }
        let mut ddl: Vec<Event> = databases
            .iter()
            .filter(|d| {
                !d.eq_ignore_ascii_case(SYSTEM_DB)
                    || !self.engine().with_state(|st| st.has_database(d))
            })
            .map(|name| Event::Ddl(DdlEvent::CreateDatabase { name: name.clone() }))
            .collect();
        ddl.extend(
            defs.iter()
                .filter(|d| keep(&d.database, &d.name))
                .map(|d| Event::Ddl(DdlEvent::CreateTable { table: d.clone() })),
        );
        if !ddl.is_empty() {
            self.session.apply_replicated_nowait(ddl, vec![], origin)?;
        }
        let mut rows = 0u64;
        let mut batch = Vec::with_capacity(PROVISION_ROWS);
        loop {
            let next = frames.next_rows();
            let (at, part) = match next {
                Ok(Some(rows)) => rows,
                Ok(None) => break,
                Err(e) => return Err(stopped(frames.reader(), e)),
            };
            let def = &defs[at];
            if !keep(&def.database, &def.name) {
                continue;
            }
            for row in part {
                batch.push(Event::Row(RowEvent {
                    table_id: def.id,
                    change: RowChange::Write { row },
                    cause: Cause::Insert,
                }));
                if batch.len() == PROVISION_ROWS {
                    rows += batch.len() as u64;
                    let (_, lsn) = self.session.apply_replicated_nowait(
                        std::mem::take(&mut batch),
                        vec![],
                        origin,
                    )?;
                    self.pending_lsn = Some(lsn);
                }
            }
        }
        rows += batch.len() as u64;
        if !batch.is_empty() {
            let (_, lsn) =
                self.session
                    .apply_replicated_nowait(std::mem::take(&mut batch), vec![], origin)?;
            self.pending_lsn = Some(lsn);
        }
        // Rows whose keys fell together here (text keys compare without case or accents) would
        // be lost without a word: refused before the position is stored.
        for (at, def) in defs.iter().enumerate() {
            if !keep(&def.database, &def.name) {
                continue;
            }
            let held = self
                .engine()
                .with_state(|st| st.tables.get(&def.id).map_or(0, |t| t.len() as u64));
            if held != frames.rows_of(at) {
                return Err(Error::Invalid(format!(
                    "the snapshot's {} rows of {} fell onto {held} keys here",
                    frames.rows_of(at),
                    def.qualified_name()
                )));
            }
        }
        drop(frames);
        // The primary says where the snapshot stands once it is whole; its header said so
        // from the start.
        match p.snapshot.end() {
            Some((end, _)) if end == seq => {}
            said => {
                return Err(Error::Invalid(format!(
                    "the snapshot's header stands at seq {seq}, its end at {said:?}"
                )))
            }
        }
        let position = self.position_event(
            server_id,
            seq,
            Position {
                segment: 0,
                offset: 0,
            },
            p.time_us,
        );
        crate::failpoint::hit("provision_before_position");
        let (_, lsn) = self
            .session
            .apply_replicated_nowait(vec![], vec![position], origin)?;
        self.pending_lsn = Some(lsn);
        self.flush()?;
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        let bytes = p.snapshot.received();
        tracing::info!(
            "provisioned from server {server_id} at seq {seq}: {} tables, {rows} rows, {} MiB in {secs:.1} s ({:.0} rows/s, {:.1} MiB/s)",
            defs.len(),
            bytes >> 20,
            rows as f64 / secs,
            bytes as f64 / (1 << 20) as f64 / secs
        );
        Ok(seq)
    }

    /// Applies from `source` until `until_seq` is applied, or (with `exit_when_caught_up`)
    /// until the source has nothing new for `idle`. `on_progress` is called after each
    /// transaction, with its sequence number. Returns the last applied sequence.
    pub async fn run(
        &mut self,
        source: &mut dyn EventSource,
        until_seq: Option<u64>,
        exit_when_caught_up: bool,
        idle: Duration,
        on_progress: &mut (dyn FnMut(&Applier, u64) + Send),
        stop: &tokio::sync::watch::Receiver<bool>,
    ) -> Result<u64> {
        let mut last = 0;
        let mut unsynced = 0usize;
        let defer = self.defers_sync();
        loop {
            if *stop.borrow() {
                self.flush()?;
                return Ok(last);
            }
            // Take what is ready without waiting; sync once the source runs dry (or let the
            // background syncer do it, with a sync delay).
            let mut item = source.next(Duration::ZERO).await?;
            if item.is_none() {
                if defer {
                    // Asked for after each transaction: here only a failure is looked for.
                    self.sync_soon(false)?;
                } else {
                    self.flush()?;
                    unsynced = 0;
                }
                if let Some(seq) = self.take_from_source(source).await? {
                    last = seq.max(last);
                    continue;
                }
                item = source.next(idle).await?;
            }
            if item.is_none() {
                if let Some(seq) = self.take_from_source(source).await? {
                    last = seq.max(last);
                    continue;
                }
            }
            match item {
                Some(SourcedTx { tx, position }) => {
                    let seq = tx.seq;
                    if until_seq.is_some_and(|u| seq > u) {
                        self.flush()?;
                        return Ok(last);
                    }
                    self.apply_owned(tx, position)?;
                    if defer {
                        self.sync_soon(true)?;
                    } else {
                        unsynced += 1;
                        if unsynced >= 1000 {
                            self.flush()?;
                            unsynced = 0;
                        }
                    }
                    last = seq;
                    on_progress(self, seq);
                    if until_seq.is_some_and(|u| seq >= u) {
                        self.flush()?;
                        return Ok(last);
                    }
                }
                None if exit_when_caught_up && source.is_live() => {
                    self.flush()?;
                    return Ok(last);
                }
                None => {}
            }
        }
    }
}

/// Runs `f`, which may block for long (an fsync, loading a snapshot): only the blocking call
/// itself, since handing a worker's tasks over costs thread wake-ups. On a worker of a
/// multi-threaded tokio runtime (`ringrep-applier serve` runs [`Applier::run`] there when
/// it defers its fsyncs) it runs through `block_in_place`, which moves the worker's other
/// tasks (the source's reading, the replica's clients) to another thread meanwhile; anywhere
/// else it just runs. Public for the replica's channel, whose commands (a promotion's
/// fsync, its stored source) block too.
pub fn may_block<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Whether [`may_block`] may wait for other tasks of this thread's runtime: on a
/// multi-threaded one (they run on other threads meanwhile) or outside any runtime; not on a
/// runtime of one thread, whose tasks would wait for the blocked thread.
fn can_block_in_place() -> bool {
    match tokio::runtime::Handle::try_current() {
        Ok(h) => h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread,
        Err(_) => true,
    }
}

/// Reads a replica's stored position for `server_id` (committed state).
pub fn read_position(engine: &Engine, server_id: u32) -> Option<AppliedPosition> {
    engine.with_state(|st| {
        let t = st.table(SYSTEM_DB, STATUS_TABLE)?;
        let row = t.get(&Key(vec![Value::UInt(u64::from(server_id))]))?;
        let u = |v: &Value| match v {
            Value::UInt(u) => *u,
            Value::Int(i) => *i as u64,
            _ => 0,
        };
        let i = |v: &Value| match v {
            Value::Int(i) => *i,
            Value::Timestamp(t) => *t,
            _ => 0,
        };
        Some(AppliedPosition {
            server_id,
            last_seq: u(&row[1]),
            position: Position {
                segment: u(&row[2]),
                offset: u(&row[3]),
            },
            source_commit_us: i(&row[4]),
            applied_us: i(&row[5]),
        })
    })
}

/// All stored positions of a replica.
pub fn read_positions(engine: &Engine) -> Vec<AppliedPosition> {
    let ids: Vec<u32> = engine.with_state(|st| {
        st.table(SYSTEM_DB, STATUS_TABLE)
            .map(|t| {
                t.iter()
                    .filter_map(|(k, _)| match k.0.first() {
                        Some(Value::UInt(u)) => u32::try_from(*u).ok(),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    });
    ids.into_iter()
        .filter_map(|id| read_position(engine, id))
        .collect()
}

#[cfg(test)]
mod lag_tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for us in (0..5000u64).chain([1 << 20, (1 << 40) + 12345, u64::MAX]) {
            let b = bucket(us);
            assert!(b >= last && b < BUCKETS, "{us}");
            let (low, width) = bucket_range(b);
            assert!(low <= us && us - low < width, "{us} in [{low}, +{width})");
            last = b;
        }
    }

    #[test]
    fn percentiles_are_within_a_bucket_and_memory_is_fixed() {
        let mut l = LagStats::default();
        assert_eq!(l.percentile(50.0), None);
        for us in 1..=100_000 {
            l.record(us);
        }
        l.record(-5);
        assert_eq!(l.count(), 100_001);
        let p50 = l.percentile(50.0).expect("p50") as f64;
        let p99 = l.percentile(99.0).expect("p99") as f64;
        assert!((p50 - 50_000.0).abs() / 50_000.0 < 0.02, "{p50}");
        assert!((p99 - 99_000.0).abs() / 99_000.0 < 0.02, "{p99}");
        assert_eq!(l.percentile(0.0), Some(0));
        assert_eq!(l.counts.len(), BUCKETS, "no growth with samples");
    }
}
