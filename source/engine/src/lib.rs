//! # ringrep-engine
//!
//! The ring engine of a ringrep node: the catalog, rows, transactions with row locks, the ring
//! protocol of `rondb-ring-buffer-tables.md` (meta rows, overwrites, TTL visibility and purge),
//! the binlog as write-ahead log, snapshots, the native batch writer and the privileged apply path
//! a replica writes through.
//!
//! Every change reaches the state through `State::apply_event`, whether it comes from a
//! committing session, from replaying the binlog at start-up, or from the replica applier.
//! That one function is what makes the replay invariant hold: the binlog replayed from the
//! start gives exactly the state the commits produced, meta rows included.
//!
//! Starting points: [`Engine::open`] opens a data directory (recovering it), [`Engine::session`]
//! gives a [`Session`] that stages and commits changes, [`ddl::prepare_table`] turns a table
//! definition with its `NDB_TABLE=` comment into a ring or TTL table, [`writer::RingWriter`]
//! inserts batches into ring tables without SQL, and [`Error`] carries MySQL's code, SQLSTATE
//! and retry class. The SQL front end (`ringrep-sql`) is built on these calls.
//!
//! # Example
//!
//! A ring of two rows per `user_id`: the third insert overwrites the oldest row, and the
//! binlog records the overwrite as a row write (with the meta row's new state).
//!
//! ```
//! use binlog_format::schema::{ColumnDef, ColumnDefault, ColumnType, IntWidth, TableDef};
//! use binlog_format::{BinlogReader, Event, ReaderOptions, Record, RowChange, Value};
//! use ringrep_engine::{ddl::prepare_table, Engine, EngineConfig, InsertMode};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let (engine, _) = Engine::open(dir.path(), EngineConfig::new(1))?;
//! let mut s = engine.session();
//! s.create_database("app", false)?;
//!
//! let int = ColumnType::Integer { width: IntWidth::Int, unsigned: false };
//! let col = |name: &str, ty: ColumnType, nullable: bool, default: ColumnDefault| ColumnDef {
//!     name: name.into(), ty, nullable, default, on_update_now: false, auto_increment: false,
//!     comment: String::new(),
//! };
//! let def = prepare_table(
//!     TableDef {
//!         id: 0,
//!         database: "app".into(),
//!         name: "user_events".into(),
//!         columns: vec![
//!             col("user_id", int.clone(), false, ColumnDefault::None),
//!             col("ring_idx", int, false, ColumnDefault::Value(Value::Int(0))),
//!             col("ring_meta", ColumnType::VarBinary { len: 64 }, true, ColumnDefault::None),
//!             col("payload", ColumnType::VarChar { len: 64 }, true, ColumnDefault::None),
//!         ],
//!         primary_key: vec![0, 1],
//!         indexes: vec![],
//!         ring: None,
//!         ttl: None,
//!         partitioning: None,
//!         comment: Some("NDB_TABLE=MAX_ROWS_PER_PK=2".into()),
//!     },
//!     None,
//!     false,
//! )?;
//! s.create_table(def, false)?;
//! let def = engine.table_def("app", "user_events").expect("created");
//!
//! for payload in ["a", "b", "c"] {
//!     let row = vec![Value::Int(7), Value::Text(payload.into())];
//!     // user_id and payload; the ring assigns ring_idx and keeps ring_meta.
//!     s.statement(|s| s.insert(&def, &[0, 3], vec![row], InsertMode::Insert))?;
//! }
//! let payloads: Vec<Value> = s.scan(&def, &[Value::Int(7)])?.into_iter().map(|r| r[3].clone()).collect();
//! assert_eq!(payloads, [Value::Text("c".into()), Value::Text("b".into())]);
//!
//! // The binlog: the CREATEs, then one transaction per insert, each writing a slot and the
//! // meta row. The third wrote slot 1 again: an overwrite is a row write.
//! let mut slots = Vec::new();
//! for item in BinlogReader::open(&engine.binlog_dir(), ReaderOptions::default())? {
//!     if let (_, Record::Transaction(tx)) = item? {
//!         for ev in &tx.events {
//!             if let Event::Row(r) = ev {
//!                 if let RowChange::Write { row } = &r.change {
//!                     slots.push(row[1].clone());
//!                 }
//!             }
//!         }
//!     }
//! }
//! assert_eq!(slots.iter().filter(|s| **s == Value::Int(1)).count(), 2);
//! # Ok(())
//! # }
//! ```

pub mod background;
pub mod clock;
pub mod ddl;
pub mod error;
pub mod named_locks;
pub mod ring;
pub mod table_locks;
pub mod types;
pub mod writer;

mod chunk;
mod durable;
#[cfg(test)]
mod fixtures;
mod keybytes;
mod locks;
mod overlay;
mod own;
mod purge;
mod retention;
mod session;
mod snapshot;
mod store;
mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use binlog_format::codec::EncodedEvents;
use binlog_format::schema::TableDef;
use binlog_format::writer::SyncHandle;
use binlog_format::{
    BinlogReader, BinlogWriter, DdlEvent, Event, Key, ReaderOptions, Record, RowChange, SyncPolicy,
    Transaction, WriterOptions,
};

pub use chunk::TableChunk;
pub use error::{Error, Result};
pub(crate) use locks::{LockKey, LockTable};
pub use own::is_bookkeeping;
pub use retention::{BinlogHold, PurgeOutcome, Retention};
pub use session::{InsertMode, Session, SessionVars, StagedChange, UpdateOutcome, MAX_WARNINGS};
pub use snapshot::SnapshotRows;
pub use table::{Row, StoredRow, Table, HIDDEN_ROW_ID};

use crate::clock::{Clock, SystemClock};

/// Database that holds ringrep's own tables on a replica.
pub const SYSTEM_DB: &str = "mysql";
/// Table ids at or above this are ringrep's own system tables, never a primary's.
pub(crate) const SYSTEM_TABLE_ID_BASE: u64 = 1 << 62;

/// Whether a replicated event belongs to the source's own bookkeeping (its apply status,
/// in the id range of node-local tables, or a DROP of database `mysql`), which a replica
/// keeps for itself and never takes from its source.
pub fn is_node_local_event(ev: &Event) -> bool {
    let local = |id: u64| id >= SYSTEM_TABLE_ID_BASE;
    match ev {
        Event::Row(r) => local(r.table_id),
        Event::Ddl(DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table }) => {
            local(table.id)
        }
        Event::Ddl(DdlEvent::DropTable { table_id, .. } | DdlEvent::TruncateTable { table_id }) => {
            local(*table_id)
        }
        Event::Ddl(DdlEvent::DropDatabase { name }) => name.eq_ignore_ascii_case(SYSTEM_DB),
        Event::Ddl(DdlEvent::CreateDatabase { .. }) => false,
    }
}

/// The file that marks a promoted replica's data directory (see [`Engine::promote`]).
const PROMOTED: &str = "PROMOTED";

/// The file beside a backup's snapshot naming its origin (see [`Engine::backup_origin`]).
const BACKUP_ORIGIN: &str = "backup.json";

fn write_backup_origin(to: &Path, server_id: u32, seq: u64) -> Result<()> {
    let text = format!("{{\"server_id\": {server_id}, \"seq\": {seq}}}\n");
    let tmp = to.join(format!("{BACKUP_ORIGIN}.tmp"));
    fs::write(&tmp, text)?;
    fs::File::open(&tmp)?.sync_all()?;
    fs::rename(&tmp, to.join(BACKUP_ORIGIN))?;
    fs::File::open(to)?.sync_all()?;
    Ok(())
}

/// Whether `db.name` is one node's own table, never replicated: a replica's apply status
/// (`mysql.ringrep_apply_status` and the like). Such tables take their ids from a range of
/// their own (`SYSTEM_TABLE_ID_BASE` up), so that the tables a replica receives, which keep
/// their primary's ids, never collide with them; the verifier leaves them out. The other
/// tables of `mysql` (the accounts) replicate like any.
pub fn is_node_local_table(db: &str, name: &str) -> bool {
    db.eq_ignore_ascii_case(SYSTEM_DB) && name.to_ascii_lowercase().starts_with("ringrep_apply")
}

/// `SET GLOBAL read_only` and `super_read_only`: who may still write on a node. A replica
/// refuses client writes whatever this says ([`Engine::is_read_only`]); this fences a primary,
/// as a failover fences the old one before promoting another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// Writable (both variables OFF).
    Open = 0,
    /// `read_only`: sessions without SUPER may not write; the TTL purge stops.
    ReadOnly = 1,
    /// `super_read_only`: no session may write, SUPER or not; the TTL purge stops.
    SuperReadOnly = 2,
}

/// How an engine is opened: its identity, durability and limits.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The server id written into every binlog record this engine commits (its origin).
    pub server_id: u32,
    /// When a commit is durable: after its own fsync (shared by a group), on a timer, or never.
    pub sync: SyncPolicy,
    /// The size at which the binlog rotates to a new segment file.
    pub segment_bytes: u64,
    /// How long a statement waits for a row lock before error 1205.
    pub lock_wait_timeout: Duration,
    /// Take a snapshot after this many transactions (0: never automatically)...
    pub snapshot_every: u64,
    /// ...and once the binlog written since the last snapshot is at least this share of
    /// that snapshot's size, in percent (0: by the count alone). Snapshots of a large state
    /// then cost at most as much writing as the binlog itself (100, the default), and a
    /// restart replays at most about one state's worth of binlog on top of the count (Redis
    /// rewrites its AOF by the same rule, `auto-aof-rewrite-percentage`).
    pub snapshot_log_percent: u64,
    /// Clients may read but not write (a replica); only the applier writes.
    pub read_only: bool,
    /// The clock for TTL expiry and CURRENT_TIMESTAMP.
    pub clock: Arc<dyn Clock>,
    /// How much binlog the node keeps (applied by the server's retention task, shown as
    /// `binlog_expire_logs_seconds` and `binlog_retention_size`).
    pub retention: Retention,
    /// The largest binlog record this node writes, in bytes: a transaction is one record, and
    /// one whose record would be larger fails with 1197 and leaves nothing (MySQL's
    /// `max_binlog_cache_size`). At most `DEFAULT_MAX_FRAME`, the most every reader accepts.
    pub max_transaction_bytes: u32,
}

impl EngineConfig {
    /// The defaults: fsync every commit, 64 MiB segments, a 2 s lock wait, a snapshot every
    /// 100,000 transactions, writable, the system clock.
    pub fn new(server_id: u32) -> EngineConfig {
        EngineConfig {
            server_id,
            sync: SyncPolicy::EveryCommit,
            segment_bytes: binlog_format::format::DEFAULT_SEGMENT_BYTES,
            lock_wait_timeout: Duration::from_secs(2),
            snapshot_every: 100_000,
            snapshot_log_percent: 100,
            read_only: false,
            clock: Arc::new(SystemClock),
            retention: Retention::default(),
            max_transaction_bytes: binlog_format::format::DEFAULT_MAX_FRAME,
        }
    }
}

thread_local! {
    /// The events a committing thread last encoded (see `Engine::commit_events_into`).
    static ENCODED: std::cell::RefCell<EncodedEvents> = std::cell::RefCell::new(Default::default());
}

/// Everything committed.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// The databases, by name.
    pub databases: BTreeSet<String>,
    /// The tables, by table id.
    pub tables: BTreeMap<u64, Table>,
    /// The id the next CREATE TABLE takes.
    pub next_table_id: u64,
    /// The sequence number of the last transaction applied (0 for none).
    pub last_seq: u64,
}

impl State {
    /// The id of table `db.name` (names compare case-insensitively, as MySQL's on Linux do not;
    /// ringrep folds them).
    pub fn table_id(&self, db: &str, name: &str) -> Option<u64> {
        self.tables
            .values()
            .find(|t| {
                t.def.database.eq_ignore_ascii_case(db) && t.def.name.eq_ignore_ascii_case(name)
            })
            .map(|t| t.def.id)
    }

    /// Table `db.name`, if it exists.
    pub fn table(&self, db: &str, name: &str) -> Option<&Table> {
        self.table_id(db, name).and_then(|id| self.tables.get(&id))
    }

    /// Whether database `db` exists. [`SYSTEM_DB`] always does, as `mysql` does in MySQL
    /// from its initialization: tables may be created there on a fresh node (RonDB's
    /// `mysql.ndb_replication`), before any account or other system table made it.
    pub fn has_database(&self, db: &str) -> bool {
        db.eq_ignore_ascii_case(SYSTEM_DB)
            || self.databases.iter().any(|d| d.eq_ignore_ascii_case(db))
    }

    /// Applies one committed transaction of a binlog or a stream over this state (what recovery
    /// does, for a copy of the state kept outside an engine: an online backup).
    pub fn apply_transaction(&mut self, tx: &binlog_format::Transaction) -> Result<()> {
        for ev in &tx.events {
            self.apply_event(ev)?;
        }
        self.last_seq = tx.seq;
        Ok(())
    }

    /// Applies one committed event. Writes are upserts; deleting an absent row is not an
    /// error; `AlterTable` replaces the definition and the rows (the rows it keeps follow
    /// as writes in the same transaction).
    pub(crate) fn apply_event(&mut self, ev: &Event) -> Result<()> {
        self.apply_encoded(ev, None)
    }

    /// [`State::apply_event`], given for a `Write` its row's encoding when the caller has it
    /// (from the binlog frame it wrote), which the table copies instead of encoding the row.
    fn apply_encoded(&mut self, ev: &Event, encoded: Option<&[u8]>) -> Result<()> {
        match ev {
            Event::Row(r) => {
                let table = self.tables.get_mut(&r.table_id).ok_or_else(|| {
                    Error::internal(format!("row event for unknown table id {}", r.table_id))
                })?;
                match &r.change {
                    RowChange::Write { row } => {
                        check_width(table, row)?;
                        table.put_encoded(row, encoded);
                    }
                    RowChange::Update { key, after, .. } => {
                        check_width(table, after)?;
                        table.remove(&Key(key.clone()));
                        table.put(after);
                    }
                    RowChange::Delete { key } => {
                        table.remove(&Key(key.clone()));
                    }
                }
            }
            Event::Ddl(d) => match d {
                DdlEvent::CreateDatabase { name } => {
                    self.databases.insert(name.clone());
                }
                DdlEvent::DropDatabase { name } => {
                    self.databases.retain(|d| !d.eq_ignore_ascii_case(name));
                    self.tables
                        .retain(|_, t| !t.def.database.eq_ignore_ascii_case(name));
                }
                DdlEvent::CreateTable { table } => {
                    self.databases.insert(table.database.clone());
                    if table.id < SYSTEM_TABLE_ID_BASE {
                        self.next_table_id = self.next_table_id.max(table.id + 1);
                    }
                    self.tables.insert(table.id, Table::new(table.clone()));
                }
                DdlEvent::AlterTable { table } => {
                    self.tables.insert(table.id, Table::new(table.clone()));
                }
                DdlEvent::DropTable { table_id, .. } => {
                    self.tables.remove(table_id);
                }
                DdlEvent::TruncateTable { table_id } => {
                    if let Some(t) = self.tables.get_mut(table_id) {
                        t.clear();
                    }
                }
            },
        }
        Ok(())
    }
}

fn check_width(table: &Table, row: &[binlog_format::Value]) -> Result<()> {
    if row.len() != table.def.columns.len() {
        return Err(Error::internal(format!(
            "row of {} values for {} with {} columns",
            row.len(),
            table.def.qualified_name(),
            table.def.columns.len()
        )));
    }
    Ok(())
}

/// The durable LSN when the last snapshot began, and that snapshot's size in bytes. Until the
/// first snapshot since the engine opened: the snapshot it opened from (0 bytes without one),
/// and the binlog it replayed after that one (`carried`), which counts as written since it,
/// so that the first automatic snapshot after a start follows the same rule as the others
/// (by the count alone, it came after `snapshot_every` transactions whatever the state's size:
/// a 1.9 GB snapshot after a restart of a 10 M-row node, BENCHMARKS.md, "Costs as the data
/// grows").
#[derive(Default)]
pub(crate) struct SnapshotMark {
    lsn: AtomicU64,
    bytes: AtomicU64,
    carried: AtomicU64,
}

impl SnapshotMark {
    /// The mark of an engine that opened from a snapshot of `bytes` and replayed `replayed`
    /// bytes of binlog after it.
    fn opened(bytes: u64, replayed: u64) -> SnapshotMark {
        SnapshotMark {
            lsn: AtomicU64::new(0),
            bytes: AtomicU64::new(bytes),
            carried: AtomicU64::new(replayed),
        }
    }

    /// A snapshot that began at durable LSN `lsn` was written, `bytes` long.
    fn written(&self, lsn: u64, bytes: usize) {
        self.lsn.store(lsn, Ordering::Relaxed);
        self.bytes.store(bytes as u64, Ordering::Relaxed);
        self.carried.store(0, Ordering::Relaxed);
    }

    /// Binlog bytes written since the snapshot, given the durable LSN now.
    fn logged_since(&self, durable_lsn: u64) -> u64 {
        durable_lsn
            .saturating_sub(self.lsn.load(Ordering::Relaxed))
            .saturating_add(self.carried.load(Ordering::Relaxed))
    }
}

pub(crate) struct Shared {
    pub dir: PathBuf,
    pub cfg: EngineConfig,
    /// Shared with a live snapshot's thread, which reads it a frame at a time.
    pub state: Arc<RwLock<State>>,
    pub locks: LockTable,
    /// LOCK TABLES' locks (`table_locks.rs`).
    pub table_locks: table_locks::TableLocks,
    /// GET_LOCK's locks (`named_locks.rs`).
    pub named_locks: named_locks::NamedLocks,
    pub binlog: Option<BinlogWriter>,
    pub next_txn: AtomicU64,
    pub since_snapshot: AtomicU64,
    /// Where the last snapshot since the engine opened began, and its size.
    pub last_snapshot: Arc<SnapshotMark>,
    /// Rows the TTL purge deleted since the engine opened.
    pub purged_rows: AtomicU64,
    /// Binlog segments retention and PURGE BINARY LOGS removed since the engine opened.
    pub purged_segments: AtomicU64,
    /// The retention in force: the configuration's, until SET GLOBAL changes it.
    pub retention: Mutex<Retention>,
    /// The last AUTO_INCREMENT value (or hidden row id) handed out, by (table id, column),
    /// shared by every session; found from the table's rows on first use, forgotten when DDL
    /// changes the table.
    pub auto_inc: Mutex<std::collections::HashMap<(u64, usize), u64>>,
    /// Clients may not write (a replica); turned off when the replica is promoted.
    pub read_only: AtomicBool,
    /// `SET GLOBAL read_only` / `super_read_only` ([`Fence`] as a byte); not kept across a
    /// restart, as MySQL's SET GLOBAL is not.
    pub fence: std::sync::atomic::AtomicU8,
    /// Readers of the binlog (replicas' streams, online backups) and the sequence each
    /// reads next, by hold id; a purge keeps what they need and holds this lock while it
    /// removes files, so a reader registers either before (and is kept) or after (and sees
    /// the binlog as purged).
    pub holds: Mutex<std::collections::BTreeMap<u64, u64>>,
    pub next_hold: AtomicU64,
    /// Times retention removed segments a reader still needed (past the hard cap).
    pub readers_overtaken: AtomicU64,
    /// The background writer of the last automatic snapshot. One snapshot is written at a
    /// time (they share a temporary file name); dropping the engine waits for it.
    pub snapshot_writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Durability for sessions that defer it (the server's connections).
    pub durability: durable::AsyncDurability,
    /// The LSN of the last commit applied to the state: a reader may have seen anything up
    /// to it (see [`Engine::wait_read_async`]).
    pub applied_lsn: AtomicU64,
    /// Heals that took applied transactions back out of the state: a statement that ran
    /// across one may have read them.
    pub taken_back: AtomicU64,
    /// Held for the life of the engine: a second engine on the same directory is refused.
    _dir_lock: File,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The directory lock is released after this: no snapshot may still be writing then.
        if let Some(h) = self.snapshot_writer.get_mut().ok().and_then(Option::take) {
            let _ = h.join();
        }
    }
}

/// A handle on an open engine; cheap to clone and share between threads.
#[derive(Clone)]
pub struct Engine {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("dir", &self.shared.dir)
            .field("last_seq", &self.last_seq())
            .finish_non_exhaustive()
    }
}

/// Taken before a statement runs ([`Engine::begin_read`]) and awaited before its result goes
/// out ([`Engine::wait_read_async`]): no reader is shown a commit that is not durable.
#[derive(Debug, Clone, Copy)]
pub struct ReadFence {
    taken_back: u64,
}

/// What opening a data directory found and did.
#[derive(Debug, Clone, Default)]
pub struct OpenReport {
    /// The sequence number of the snapshot loaded, if one was.
    pub snapshot_seq: Option<u64>,
    /// How many binlog transactions were replayed after it.
    pub replayed: u64,
    /// The snapshot's size in bytes (0 without one).
    pub snapshot_bytes: u64,
    /// About how many bytes of binlog those transactions took (from their positions).
    pub replayed_bytes: u64,
    /// The last sequence number once open.
    pub last_seq: u64,
    /// Bytes cut from a torn last record of the binlog, if the tail was torn.
    pub torn_tail_cut: Option<u64>,
}

/// How long a lock held by someone else is tried again before the directory is reported in
/// use. A process that forks keeps a copy of every descriptor, this lock's too, until the child
/// runs `exec`: a node closed a moment ago (in a process that starts others, such as a test
/// binary or the demo) may still hold it for that long.
const LOCK_RETRY: Duration = Duration::from_millis(500);

fn lock_dir(dir: &Path, exclusive: bool) -> Result<File> {
    let path = dir.join("LOCK");
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    let deadline = std::time::Instant::now() + LOCK_RETRY;
    loop {
        let got = if exclusive {
            f.try_lock()
        } else {
            f.try_lock_shared()
        };
        match got {
            Ok(()) => return Ok(f),
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(Error::internal(format!(
                    "data directory {} is in use by a running ringrep node (stop it first, or point at another directory)",
                    dir.display()
                )))
            }
            Err(fs::TryLockError::Error(e)) => return Err(e.into()),
        }
    }
}

impl Engine {
    /// Opens (creating if needed) a data directory: loads the newest valid snapshot, then
    /// replays the binlog after it. A torn binlog tail is cut back first.
    pub fn open(dir: &Path, cfg: EngineConfig) -> Result<(Engine, OpenReport)> {
        fs::create_dir_all(dir)?;
        let dir_lock = lock_dir(dir, true)?;
        let binlog_dir = dir.join("binlog");
        // Loaded once: a large state takes a while to read.
        let snap = snapshot::load_newest(dir)?;
        // A restored directory has a snapshot and no binlog yet: the binlog starts after it.
        let first_seq = match &snap {
            Some(s) if !binlog_dir.join(binlog_format::segment::INDEX_FILE).exists() => {
                if !s.exact {
                    return Err(Error::internal(format!(
                        "{} has no binlog, and its newest snapshot (seq {}) was taken while \
                         writing: it is only whole with the binlog after it",
                        dir.display(),
                        s.state.last_seq
                    )));
                }
                s.state.last_seq + 1
            }
            _ => 1,
        };
        let wopts = WriterOptions {
            sync: cfg.sync,
            segment_bytes: cfg.segment_bytes,
            first_seq,
            max_frame: cfg
                .max_transaction_bytes
                .min(binlog_format::format::DEFAULT_MAX_FRAME),
            ..WriterOptions::new(cfg.server_id)
        };
        let (writer, recovered) = BinlogWriter::open(&binlog_dir, wopts)?;
        if let Some(t) = &recovered.cut {
            tracing::warn!(
                "cut a torn tail of {} bytes at {} from the binlog of {} (a write a crash or power loss interrupted; it was never acknowledged)",
                t.bytes,
                t.position,
                dir.display()
            );
        }
        let mut report = OpenReport {
            torn_tail_cut: recovered.cut.map(|t| t.bytes),
            ..Default::default()
        };
        let state = Self::recover_state(dir, snap, &mut report)?;
        if state.last_seq != recovered.last_seq {
            return Err(Error::internal(format!(
                "binlog ends at seq {} but replay reached {}: the binlog of {} is incomplete",
                recovered.last_seq,
                state.last_seq,
                dir.display()
            )));
        }
        report.last_seq = state.last_seq;
        // A replica's data directory (it holds the apply status) is read-only to clients
        // whoever opens it; only the applier writes there. A promoted one is a primary.
        let mut cfg = cfg;
        if state.table(SYSTEM_DB, "ringrep_apply_status").is_some() && !Engine::is_promoted(dir) {
            cfg.read_only = true;
        }
        let read_only = AtomicBool::new(cfg.read_only);
        let retention = Mutex::new(cfg.retention);
        let engine = Engine {
            shared: Arc::new(Shared {
                dir: dir.to_path_buf(),
                retention,
                read_only,
                fence: Default::default(),
                holds: Mutex::default(),
                auto_inc: Mutex::default(),
                next_hold: AtomicU64::new(1),
                cfg,
                state: Arc::new(RwLock::new(state)),
                locks: LockTable::default(),
                table_locks: Default::default(),
                named_locks: Default::default(),
                binlog: Some(writer),
                next_txn: AtomicU64::new(1),
                since_snapshot: AtomicU64::new(report.replayed),
                last_snapshot: Arc::new(SnapshotMark::opened(
                    report.snapshot_bytes,
                    report.replayed_bytes,
                )),
                purged_rows: AtomicU64::new(0),
                purged_segments: AtomicU64::new(0),
                readers_overtaken: AtomicU64::new(0),
                snapshot_writer: Mutex::new(None),
                durability: durable::AsyncDurability::default(),
                applied_lsn: AtomicU64::new(0),
                taken_back: AtomicU64::new(0),
                _dir_lock: dir_lock,
            }),
        };
        let mut s = engine.session();
        s.ensure_database("test")?;
        Ok((engine, report))
    }

    /// Opens a data directory for reading only (the verifier): no binlog writer, a shared lock
    /// that fails while a node holds the directory, and nothing written.
    pub fn open_read_only(dir: &Path) -> Result<(Engine, OpenReport)> {
        if !dir.join("binlog").is_dir() {
            return Err(Error::internal(format!(
                "{} is not a ringrep data directory (no binlog/)",
                dir.display()
            )));
        }
        let dir_lock = lock_dir(dir, false)?;
        let mut report = OpenReport::default();
        let state = Self::recover_state(dir, snapshot::load_newest(dir)?, &mut report)?;
        report.last_seq = state.last_seq;
        // The server id is the one the binlog was written with.
        let server_id = binlog_format::segment::list_segments(&dir.join("binlog"))?
            .first()
            .map(|&n| {
                binlog_format::segment::SegmentCursor::open(
                    &dir.join("binlog"),
                    n,
                    binlog_format::format::DEFAULT_MAX_FRAME,
                )
                .map(|c| c.prelude.server_id)
            })
            .transpose()?
            .unwrap_or(1);
        let mut cfg = EngineConfig::new(server_id);
        cfg.read_only = true;
        Ok((
            Engine {
                shared: Arc::new(Shared {
                    dir: dir.to_path_buf(),
                    retention: Mutex::new(cfg.retention),
                    read_only: AtomicBool::new(true),
                    fence: Default::default(),
                    holds: Mutex::default(),
                    auto_inc: Mutex::default(),
                    next_hold: AtomicU64::new(1),
                    cfg,
                    state: Arc::new(RwLock::new(state)),
                    locks: LockTable::default(),
                    table_locks: Default::default(),
                    named_locks: Default::default(),
                    binlog: None,
                    next_txn: AtomicU64::new(1),
                    since_snapshot: AtomicU64::new(0),
                    last_snapshot: Arc::default(),
                    purged_rows: AtomicU64::new(0),
                    purged_segments: AtomicU64::new(0),
                    readers_overtaken: AtomicU64::new(0),
                    snapshot_writer: Mutex::new(None),
                    durability: durable::AsyncDurability::default(),
                    applied_lsn: AtomicU64::new(0),
                    taken_back: AtomicU64::new(0),
                    _dir_lock: dir_lock,
                }),
            },
            report,
        ))
    }

    /// The state at the end of the binlog: `snap` (the newest snapshot) plus the binlog after
    /// it.
    fn recover_state(
        dir: &Path,
        snap: Option<snapshot::Loaded>,
        report: &mut OpenReport,
    ) -> Result<State> {
        let mut state = match snap {
            Some(s) => {
                report.snapshot_seq = Some(s.state.last_seq);
                report.snapshot_bytes = s.bytes;
                s.state
            }
            None => State {
                next_table_id: 1,
                ..Default::default()
            },
        };
        // Segments purged by retention held only transactions the snapshot has; reading starts
        // at the segment that holds the first one after it.
        let binlog = dir.join("binlog");
        let infos = binlog_format::segment::segment_infos(&binlog)?;
        if let Some(first) = infos.first() {
            if first.first_seq > state.last_seq + 1 {
                return Err(Error::internal(format!(
                    "the binlog of {} starts at seq {} but {} ends at seq {}: transactions {} to {} are missing",
                    dir.display(),
                    first.first_seq,
                    if report.snapshot_seq.is_some() { "the snapshot" } else { "an empty state (no snapshot)" },
                    state.last_seq,
                    state.last_seq + 1,
                    first.first_seq - 1
                )));
            }
        }
        let reader = BinlogReader::open(&binlog, ReaderOptions::default())?
            .start_at_seq(state.last_seq + 1)?;
        let (mut first, mut last) = (None, None);
        for item in reader {
            let (at, record) = item?;
            if let Record::Transaction(tx) = record {
                if tx.seq <= state.last_seq {
                    continue;
                }
                for ev in &tx.events {
                    state.apply_event(ev)?;
                }
                state.last_seq = tx.seq;
                report.replayed += 1;
                first.get_or_insert(at);
                last = Some(at);
            }
        }
        // From the first replayed record to the last one's start: whole segments between
        // (sealed, so their files' lengths are their records'), the first one's rest.
        if let (Some(first), Some(last)) = (first, last) {
            report.replayed_bytes = if first.segment == last.segment {
                last.offset - first.offset
            } else {
                infos
                    .iter()
                    .filter(|i| i.number >= first.segment && i.number < last.segment)
                    .map(|i| i.bytes)
                    .sum::<u64>()
                    .saturating_sub(first.offset)
                    + last.offset
            };
        }
        Ok(state)
    }

    /// A new session (one per client connection): its own variables and transaction.
    pub fn session(&self) -> Session {
        Session::new(self.clone())
    }

    /// The configuration the engine was opened with.
    pub fn config(&self) -> &EngineConfig {
        &self.shared.cfg
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The binlog directory inside the data directory.
    pub fn binlog_dir(&self) -> PathBuf {
        self.shared.dir.join("binlog")
    }

    /// What tailing readers wait on for new durable records (none for a read-only engine).
    pub fn notifier(&self) -> Option<Arc<binlog_format::Notifier>> {
        self.shared.binlog.as_ref().map(|w| w.notifier())
    }

    /// The engine clock's time, in microseconds since 1970-01-01 UTC.
    pub fn now_us(&self) -> i64 {
        self.shared.cfg.clock.now_us()
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State> {
        self.shared.state.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.shared.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The committed state, for reads that need a consistent view (the verifier).
    pub fn with_state<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.read())
    }

    /// Rows the TTL purge deleted since the engine opened.
    pub fn purged_rows(&self) -> u64 {
        self.shared.purged_rows.load(Ordering::Relaxed)
    }

    /// Whether clients may not write (a replica, until promoted). The configuration's
    /// `read_only` is what the engine opened with.
    pub fn is_read_only(&self) -> bool {
        self.shared.read_only.load(Ordering::SeqCst)
    }

    /// What `SET GLOBAL read_only` and `super_read_only` last made of this node.
    pub fn fence(&self) -> Fence {
        match self.shared.fence.load(Ordering::SeqCst) {
            0 => Fence::Open,
            1 => Fence::ReadOnly,
            _ => Fence::SuperReadOnly,
        }
    }

    /// Sets the fence, and returns once every commit that began under the old one has ended:
    /// a commit checks the fence under the state's lock, which this takes after the change,
    /// so after it returns no client transaction the fence refuses is written (MySQL's SET
    /// GLOBAL read_only waits for commits in progress likewise).
    pub fn set_fence(&self, fence: Fence) {
        self.shared.fence.store(fence as u8, Ordering::SeqCst);
        drop(self.write());
        tracing::info!(
            "{}: SET GLOBAL read_only: {fence:?}",
            self.shared.dir.display()
        );
    }

    /// Whether the data directory `dir` belongs to a promoted replica (a primary now).
    pub fn is_promoted(dir: &Path) -> bool {
        dir.join(PROMOTED).exists()
    }

    /// Makes a replica a primary: clients may write from now on, and the data directory says
    /// so (the `PROMOTED` file, synced) for every later open. Its apply positions (the origin
    /// and sequence of what it applied from each source) stay, so that replicas of the old
    /// primary can follow it.
    pub fn promote(&self) -> Result<()> {
        if self.shared.binlog.is_none() {
            return Err(Error::read_only());
        }
        let path = self.shared.dir.join(PROMOTED);
        let text = format!(
            "promoted at {} (server id {})\n",
            binlog_format::value::format_timestamp(self.now_us(), 6),
            self.shared.cfg.server_id
        );
        // What it applied and has not yet synced (the applier defers its fsyncs) is durable
        // before any client may build on it; a deferred fsync that failed is healed first
        // (nothing else would: a stopped replica commits nothing).
        if self
            .shared
            .binlog
            .as_ref()
            .is_some_and(BinlogWriter::is_stopped)
        {
            self.heal()?;
        }
        self.sync()?;
        fs::write(&path, text)?;
        fs::File::open(&path)?.sync_all()?;
        fs::File::open(&self.shared.dir)?.sync_all()?;
        self.shared.read_only.store(false, Ordering::SeqCst);
        tracing::info!("{} promoted: writable", self.shared.dir.display());
        Ok(())
    }

    /// Makes a promoted node a replica again (CHANGE REPLICATION SOURCE TO on it): read-only
    /// to clients, the `PROMOTED` file gone.
    pub fn demote(&self) -> Result<()> {
        self.shared.read_only.store(true, Ordering::SeqCst);
        match fs::remove_file(self.shared.dir.join(PROMOTED)) {
            Ok(()) => fs::File::open(&self.shared.dir)?.sync_all()?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }

    /// The binlog retention in force (see [`Engine::set_retention`]).
    pub fn retention(&self) -> Retention {
        *self
            .shared
            .retention
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the binlog retention until the engine closes (SET GLOBAL
    /// binlog_expire_logs_seconds and binlog_retention_size); the next retention run applies it.
    pub fn set_retention(&self, r: Retention) {
        *self
            .shared
            .retention
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = r;
    }

    /// Binlog segments removed (retention, PURGE BINARY LOGS) since the engine opened.
    pub fn purged_segments(&self) -> u64 {
        self.shared.purged_segments.load(Ordering::Relaxed)
    }

    /// LOCK TABLES' table locks, shared by every session of this engine.
    pub fn table_locks(&self) -> &table_locks::TableLocks {
        &self.shared.table_locks
    }

    /// GET_LOCK's user-level locks, shared by every session of this engine.
    pub fn named_locks(&self) -> &named_locks::NamedLocks {
        &self.shared.named_locks
    }

    /// The binlog's fsyncs since it opened (see [`BinlogWriter::fsyncs`]); 0 without one.
    pub fn binlog_fsyncs(&self) -> u64 {
        self.shared.binlog.as_ref().map_or(0, BinlogWriter::fsyncs)
    }

    /// Times retention removed binlog a connected reader still needed (past the hard cap).
    pub fn readers_overtaken(&self) -> u64 {
        self.shared.readers_overtaken.load(Ordering::Relaxed)
    }

    /// The binlog's segment files, oldest first, with their sizes in bytes (SHOW BINARY LOGS).
    pub fn binlog_files(&self) -> Result<Vec<(String, u64)>> {
        let dir = self.binlog_dir();
        let mut out = Vec::new();
        if !dir.exists() {
            return Ok(out);
        }
        for n in binlog_format::segment::list_segments(&dir)? {
            let name = binlog_format::segment::segment_name(n);
            let len = match self.written_len(n) {
                Some(len) => len,
                None => fs::metadata(dir.join(&name))?.len(),
            };
            out.push((name, len));
        }
        Ok(out)
    }

    /// The length of segment `number`'s records when it is the one this engine's writer is
    /// writing: its file is longer by the space set aside for the next records.
    pub(crate) fn written_len(&self, number: u64) -> Option<u64> {
        let end = self.shared.binlog.as_ref()?.end_position();
        (end.segment == number).then_some(end.offset)
    }

    /// The shared AUTO_INCREMENT counters ([`Shared::auto_inc`]).
    pub(crate) fn auto_inc_counters(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<(u64, usize), u64>> {
        self.shared
            .auto_inc
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// FLUSH BINARY LOGS: the binlog goes on in a new segment file (nothing to do without a
    /// writer).
    pub fn flush_binary_logs(&self) -> Result<()> {
        match &self.shared.binlog {
            Some(b) => Ok(b.rotate_now()?),
            None => Ok(()),
        }
    }

    /// Where the next record goes: the current segment's file name and the offset after its
    /// last record (SHOW BINARY LOG STATUS); `None` without a writer.
    pub fn binlog_end(&self) -> Option<(String, u64)> {
        let b = self.shared.binlog.as_ref()?;
        let p = b.end_position();
        Some((binlog_format::segment::segment_name(p.segment), p.offset))
    }

    /// The last transaction a replica may be sent: durable on this node's binlog. With
    /// `SyncPolicy::Never`, where no commit waits for an fsync, the last one written.
    pub fn durable_seq(&self) -> u64 {
        match &self.shared.binlog {
            Some(b) if b.options().sync != SyncPolicy::Never => b.durable_seq(),
            Some(b) => b.last_seq(),
            None => self.last_seq(),
        }
    }

    /// The sequence number of the last committed transaction.
    pub fn last_seq(&self) -> u64 {
        self.read().last_seq
    }

    /// The definition of table `db.name`, if it exists.
    pub fn table_def(&self, db: &str, name: &str) -> Option<TableDef> {
        self.shared_table_def(db, name).map(|d| TableDef::clone(&d))
    }

    /// [`Engine::table_def`] without the copy: the definition the table holds now (a DDL
    /// gives the table a new one).
    pub fn shared_table_def(&self, db: &str, name: &str) -> Option<Arc<TableDef>> {
        self.read().table(db, name).map(|t| Arc::clone(&t.def))
    }

    /// Every database, in name order, [`SYSTEM_DB`] included (it always exists; see
    /// [`State::has_database`]).
    pub fn databases(&self) -> Vec<String> {
        let st = self.read();
        let mut dbs: Vec<String> = st.databases.iter().cloned().collect();
        if !dbs.iter().any(|d| d.eq_ignore_ascii_case(SYSTEM_DB)) {
            let at = dbs.partition_point(|d| d.as_str() < SYSTEM_DB);
            dbs.insert(at, SYSTEM_DB.to_string());
        }
        dbs
    }

    /// Every table's definition.
    pub fn tables(&self) -> Vec<TableDef> {
        self.read()
            .tables
            .values()
            .map(|t| TableDef::clone(&t.def))
            .collect()
    }

    /// Commits a transaction's events: validates, appends the binlog record, applies, then
    /// waits for durability per the sync policy. Returns the sequence number.
    pub(crate) fn commit_events(
        &self,
        events: Vec<Event>,
        origin: Option<binlog_format::Origin>,
        validate: impl FnOnce(&State, &[Event]) -> Result<()>,
    ) -> Result<u64> {
        let (seq, lsn) = self.commit_events_nowait(events, origin, validate)?;
        self.wait_durable(lsn)?;
        Ok(seq)
    }

    /// Makes everything up to `lsn` (from a commit that did not wait) as durable as the sync
    /// policy promises. Many commits can share one wait: that is the replica's group commit.
    pub fn wait_durable(&self, lsn: u64) -> Result<()> {
        let writer = self
            .shared
            .binlog
            .as_ref()
            .ok_or_else(|| Error::internal("engine opened read-only"))?;
        if let Err(e) = writer.commit(lsn) {
            // Nobody may read what did not become durable: take it back now (or, if that
            // fails too, at the next commit). The heal keeps what was written whole before
            // a failed write: this commit may be among it, and durable after all.
            if !writer.is_stopped() {
                return Err(e.into());
            }
            if let Err(h) = self.heal() {
                tracing::error!("the binlog could not be healed after a failure: {h}");
                return Err(e.into());
            }
            writer.commit(lsn)?;
        }
        self.count_durable_commit();
        Ok(())
    }

    /// After a binlog write or fsync failed: cuts the binlog back to what is durable and, if
    /// the state holds commits that were cut, rebuilds the state from the disk, so that no
    /// reader sees a transaction whose commit failed. The state's lock is held throughout:
    /// nobody reads or commits meanwhile. Returns whether there was anything to heal; an
    /// error leaves the node refusing commits (and reads that could see a failed one) until a
    /// later heal succeeds.
    pub fn heal(&self) -> Result<bool> {
        let mut st = self.write();
        self.heal_locked(&mut st)
    }

    fn heal_locked(&self, st: &mut State) -> Result<bool> {
        let Some(writer) = self.shared.binlog.as_ref() else {
            return Ok(false);
        };
        let Some(healed) = writer.heal()? else {
            return Ok(false);
        };
        let dropped = st.last_seq.saturating_sub(healed.last_seq);
        if st.last_seq != healed.last_seq {
            let mut report = OpenReport::default();
            let snap = snapshot::load_newest(&self.shared.dir)?;
            let rebuilt = Self::recover_state(&self.shared.dir, snap, &mut report)?;
            if rebuilt.last_seq != healed.last_seq {
                return Err(Error::internal(format!(
                    "heal: the binlog ends at seq {} but the state rebuilt from it at {}",
                    healed.last_seq, rebuilt.last_seq
                )));
            }
            *st = rebuilt;
            self.shared.taken_back.fetch_add(1, Ordering::AcqRel);
        }
        // Everything the state holds now is durable (the heal synced it): a reader has
        // nothing to wait for until the next commit. (A reader that saw what was taken back
        // learns it from `taken_back`.)
        self.shared.applied_lsn.store(0, Ordering::Release);
        self.shared.durability.healed(writer.durable_lsn());
        if dropped > 0 {
            tracing::warn!(
                "binlog healed after a failed write or fsync: cut {} bytes back to seq {}; {} \
                 applied transaction(s) taken back (their commits failed)",
                healed.cut_bytes,
                healed.last_seq,
                dropped
            );
        } else {
            // A commit refused before it was applied (a full disk, while appends write
            // through): one line per refused commit would flood the log.
            tracing::debug!(
                "binlog healed: cut {} bytes back to seq {}",
                healed.cut_bytes,
                healed.last_seq
            );
        }
        Ok(true)
    }

    /// How many times the binlog was healed (see [`Engine::heal`]): a reader holding records
    /// not yet durable drops them and reads again when this moves.
    pub fn binlog_heals(&self) -> u64 {
        self.shared.binlog.as_ref().map_or(0, BinlogWriter::heals)
    }

    /// Marks the start of a statement whose result may show committed data, for
    /// [`Engine::wait_read_async`].
    pub fn begin_read(&self) -> ReadFence {
        ReadFence {
            taken_back: self.shared.taken_back.load(Ordering::Acquire),
        }
    }

    /// Counts a durable commit towards the next automatic snapshot.
    fn count_durable_commit(&self) {
        let every = self.shared.cfg.snapshot_every;
        let n = self.shared.since_snapshot.fetch_add(1, Ordering::Relaxed) + 1;
        if every > 0 && n >= every && self.logged_enough_since_snapshot() {
            self.snapshot_in_background(every);
        }
    }

    /// Logs and applies a transaction without waiting for durability: the state shows it at
    /// once; it is acknowledged only after [`Engine::wait_durable`] for the returned LSN.
    pub(crate) fn commit_events_nowait(
        &self,
        mut events: Vec<Event>,
        origin: Option<binlog_format::Origin>,
        validate: impl FnOnce(&State, &[Event]) -> Result<()>,
    ) -> Result<(u64, u64)> {
        self.commit_events_into(&mut events, origin, validate)
    }

    /// As [`Engine::commit_events_nowait`], handing the events back in `events` once
    /// committed: they are dropped after the state's lock is released, and the list's memory
    /// can serve the next transaction.
    pub(crate) fn commit_events_into(
        &self,
        events: &mut Vec<Event>,
        origin: Option<binlog_format::Origin>,
        validate: impl FnOnce(&State, &[Event]) -> Result<()>,
    ) -> Result<(u64, u64)> {
        let writer = self
            .shared
            .binlog
            .as_ref()
            .ok_or_else(|| Error::internal("engine opened read-only"))?;
        // The events are encoded before the state's lock is taken (it orders commits): under
        // it, only the record's head is added.
        ENCODED.with(|cell| cell.borrow_mut().encode(events));
        let (seq, lsn) = {
            let mut st = self.write();
            if writer.is_stopped() {
                let (applied, taken_back) = (
                    self.shared.applied_lsn.load(Ordering::Acquire),
                    self.shared.taken_back.load(Ordering::Acquire),
                );
                self.heal_locked(&mut st)?;
                // A replicated transaction was checked against the position the state held
                // before the heal: with applied transactions taken back, that position is
                // gone and this one would leave a gap. Its applier starts again from the
                // position the state holds now.
                if origin.is_some() && self.shared.taken_back.load(Ordering::Acquire) != taken_back
                {
                    writer.check_commit(applied)?;
                    let mut e = Error::internal(
                        "the binlog was cut back after a failed write or fsync: the applier \
                         resumes from its stored position",
                    );
                    e.kind = error::ErrorKind::Transient;
                    return Err(e);
                }
            }
            validate(&st, events)?;
            let seq = st.last_seq + 1;
            let tx = Transaction {
                server_id: self.shared.cfg.server_id,
                seq,
                commit_time_us: self.now_us(),
                origin,
                events: std::mem::take(events),
            };
            // Log first: if the append fails, the state has not changed. Rows are stored from
            // their encoding made for the log, not encoded a second time.
            let record = Record::Transaction(tx);
            let Record::Transaction(tx) = &record else {
                unreachable!("built above")
            };
            let (lsn, scratch) = ENCODED.with(|cell| -> Result<(u64, Option<Error>)> {
                let encoded = &mut *cell.borrow_mut();
                let lsn = writer.append_transaction(&record, encoded)?;
                let mut scratch = None;
                for (at, ev) in tx.events.iter().enumerate() {
                    if let Err(e) = st.apply_encoded(ev, encoded.row(at)) {
                        // The record is in the log, so the state must follow it; a failure
                        // here is a bug in validation. Keep going so state and log stay equal.
                        scratch.get_or_insert(e);
                    }
                }
                // A huge transaction's encoding is not kept for the thread's next commit.
                encoded.shrink(16 << 20);
                Ok((lsn, scratch))
            })?;
            st.last_seq = seq;
            self.shared.applied_lsn.store(lsn, Ordering::Release);
            let Record::Transaction(tx) = record else {
                unreachable!("built above")
            };
            *events = tx.events;
            if let Some(e) = scratch {
                return Err(Error::internal(format!(
                    "applying committed seq {seq}: {}",
                    e.message
                )));
            }
            (seq, lsn)
        };
        Ok((seq, lsn))
    }

    /// Writes an exact snapshot of the committed state (atomically), bounding recovery time.
    /// Writers wait while the rows are copied.
    pub fn snapshot(&self) -> Result<u64> {
        self.snapshot_now(false)
    }

    /// Writes a live snapshot (the kind automatic snapshots are): rows are copied a frame at
    /// a time, so writers wait for a frame's copy at most, not for the whole state's. It is
    /// only good with the binlog after its sequence number, which recovery always replays;
    /// use [`Engine::backup`] for a copy to restore from.
    pub fn snapshot_live(&self) -> Result<u64> {
        self.snapshot_now(true)
    }

    /// Whether the binlog written since the last snapshot is `snapshot_log_percent` of that
    /// snapshot's size.
    fn logged_enough_since_snapshot(&self) -> bool {
        let percent = self.shared.cfg.snapshot_log_percent;
        let Some(w) = self.shared.binlog.as_ref() else {
            return true;
        };
        let mark = &self.shared.last_snapshot;
        let logged = mark.logged_since(w.durable_lsn());
        let last = mark.bytes.load(Ordering::Relaxed);
        u128::from(logged) * 100 >= u128::from(last) * u128::from(percent)
    }

    /// The durable LSN now, for a snapshot about to begin.
    fn snapshot_start(&self) -> u64 {
        self.shared.binlog.as_ref().map_or(0, |w| w.durable_lsn())
    }

    /// A snapshot in the caller's thread, after any automatic one still being written (they
    /// share a temporary file name).
    fn snapshot_now(&self, live: bool) -> Result<u64> {
        let mut writer = self
            .shared
            .snapshot_writer
            .lock()
            .map_err(|_| Error::internal("a snapshot writer panicked"))?;
        if let Some(h) = writer.take() {
            let _ = h.join();
        }
        self.shared.since_snapshot.store(0, Ordering::Relaxed);
        let lsn = self.snapshot_start();
        let snap = if live {
            snapshot::encode_live(&self.shared.state)?
        } else {
            snapshot::encode(&self.read())?
        };
        snapshot::write_encoded(&self.shared.dir, &snap, self.binlog_sync().as_ref())?;
        self.shared.last_snapshot.written(lsn, snap.len());
        Ok(snap.seq)
    }

    /// A copy of the whole state for a replica being provisioned: the bytes of a snapshot file
    /// (docs/format.md) and the sequence number it stands at. It is taken while writers go on
    /// (a frame of rows at a time, as automatic snapshots are), so rows may come from later
    /// transactions; applying the binlog after the sequence number over it gives the state
    /// exactly, as recovery does. The binlog is synced after the copy, so every transaction
    /// in it is durable before it leaves.
    ///
    /// Returns the sequence number the snapshot stands at, the last one whose rows it may
    /// hold (commits went on while it was copied: applying the binlog up to there makes it
    /// exact), and the bytes.
    pub fn snapshot_for_replica(&self) -> Result<(u64, u64, Vec<u8>)> {
        let snap = snapshot::encode_live(&self.shared.state)?;
        let covered = self.last_seq();
        if let Some(sync) = self.binlog_sync() {
            sync.sync()?;
        }
        Ok((snap.seq, covered, snap.into_bytes()))
    }

    /// [`Engine::snapshot_for_replica`] without the whole copy in memory: each frame of the
    /// snapshot goes to `send` as soon as it is made (the bytes, in order, are those of a
    /// snapshot file), so a replica can load the first rows while the rest is still being
    /// copied. `send` is called with no lock held; an error from it ends the copy. The binlog
    /// is synced once the copy is done, before this returns: the caller sends whatever marks
    /// the snapshot whole only then, so a replica never completes a snapshot holding rows of
    /// a transaction the primary could still lose.
    ///
    /// Returns the sequence number the snapshot stands at and the last one whose rows it may
    /// hold, as [`Engine::snapshot_for_replica`] does.
    pub fn stream_snapshot_for_replica(
        &self,
        mut send: impl FnMut(Vec<u8>) -> Result<()>,
    ) -> Result<(u64, u64)> {
        let snap =
            snapshot::encode_live_into(&self.shared.state, |frame| send(std::mem::take(frame)))?;
        let covered = self.last_seq();
        if let Some(sync) = self.binlog_sync() {
            sync.sync()?;
        }
        Ok((snap.seq, covered))
    }

    /// Reads back the bytes [`Engine::snapshot_for_replica`] made (or a reader giving them
    /// as they arrive): the state they hold.
    pub fn decode_snapshot(bytes: impl std::io::Read) -> Result<State> {
        snapshot::read_from(bytes)?
            .map(|l| l.state)
            .ok_or_else(|| Error::internal("the snapshot received does not read back whole"))
    }

    /// What a snapshot of this engine's state must sync first (see `snapshot::write_encoded`).
    fn binlog_sync(&self) -> Option<SyncHandle> {
        self.shared.binlog.as_ref().map(BinlogWriter::sync_handle)
    }

    /// The automatic snapshot after `every` commits, taken on a thread of its own while
    /// writers go on: it copies the rows a frame at a time under the read lock (a live
    /// snapshot, see `snapshot`), then writes and syncs the file. Committers that find a
    /// snapshot still in progress go on without one. The commit that triggered it is already
    /// durable, so a failed snapshot is only logged: recovery then replays more binlog.
    fn snapshot_in_background(&self, every: u64) {
        let Ok(mut writer) = self.shared.snapshot_writer.try_lock() else {
            return;
        };
        if writer.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        if self.shared.since_snapshot.load(Ordering::Relaxed) < every {
            return;
        }
        if let Some(h) = writer.take() {
            let _ = h.join();
        }
        self.shared.since_snapshot.store(0, Ordering::Relaxed);
        let dir = self.shared.dir.clone();
        let state = Arc::clone(&self.shared.state);
        let binlog = self.binlog_sync();
        let lsn = self.snapshot_start();
        let mark = Arc::clone(&self.shared.last_snapshot);
        let spawned = background::spawn("snapshot", move || {
            let written = snapshot::write_live(&dir, &state, binlog.as_ref())
                .map(|(_, len)| mark.written(lsn, len as usize));
            if let Err(e) = written {
                tracing::warn!("automatic snapshot failed (commits unaffected): {e}");
            }
        });
        match spawned {
            Ok(h) => *writer = Some(h),
            Err(e) => tracing::warn!("automatic snapshot not started: {e}"),
        }
    }

    /// Writes a backup of the committed state (data rows and meta rows) into `to`, which
    /// `restore` turns into a new data directory whose rings continue where they were.
    pub fn backup(&self, to: &Path) -> Result<u64> {
        let snap = snapshot::encode(&self.read())?;
        fs::create_dir_all(to)?;
        snapshot::write_encoded(to, &snap, self.binlog_sync().as_ref())?;
        write_backup_origin(to, self.shared.cfg.server_id, snap.seq)?;
        Ok(snap.seq)
    }

    /// Writes `state` as a backup into `to` (an online backup's copy, built from a node's
    /// stream), with the server id whose binlog its sequence number counts.
    pub fn write_backup(state: &State, server_id: u32, to: &Path) -> Result<u64> {
        let snap = snapshot::encode(state)?;
        fs::create_dir_all(to)?;
        snapshot::write_encoded(to, &snap, None)?;
        write_backup_origin(to, server_id, snap.seq)?;
        Ok(snap.seq)
    }

    /// The server id and sequence number a backup stands at (`backup.json`), if it says:
    /// what a replica seeded from it resumes the stream after.
    pub fn backup_origin(backup: &Path) -> Result<Option<(u32, u64)>> {
        let path = backup.join(BACKUP_ORIGIN);
        match fs::read_to_string(&path) {
            Ok(text) => {
                let v: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| Error::internal(format!("{}: {e}", path.display())))?;
                let id = v["server_id"].as_u64().and_then(|i| u32::try_from(i).ok());
                let seq = v["seq"].as_u64();
                match (id, seq) {
                    (Some(id), Some(seq)) => Ok(Some((id, seq))),
                    _ => Err(Error::internal(format!(
                        "{}: no server_id and seq in it",
                        path.display()
                    ))),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates data directory `dir` from a backup made by [`Engine::backup`].
    pub fn restore(backup: &Path, dir: &Path) -> Result<u64> {
        let loaded = snapshot::load_newest(backup)?.ok_or_else(|| {
            Error::internal(format!("{} holds no readable backup", backup.display()))
        })?;
        if !loaded.exact {
            return Err(Error::internal(format!(
                "{} holds an automatic snapshot, taken while writing, not a backup: make one \
                 with `ringrep-source backup`",
                backup.display()
            )));
        }
        let st = loaded.state;
        if dir.join("binlog").exists() {
            return Err(Error::internal(format!(
                "{} already holds a data directory; restore into a new one",
                dir.display()
            )));
        }
        fs::create_dir_all(dir)?;
        snapshot::write(dir, &st)?;
        Ok(st.last_seq)
    }

    /// Makes everything committed durable (used at shutdown).
    pub fn sync(&self) -> Result<()> {
        if let Some(w) = &self.shared.binlog {
            w.sync()?;
        }
        Ok(())
    }

    /// Whether a heal cut off the commit that ended at `lsn` (its failure was reported to
    /// whoever waited for it, or to the next commit).
    pub fn is_commit_lost(&self, lsn: u64) -> bool {
        self.shared.binlog.as_ref().is_some_and(|w| w.is_lost(lsn))
    }

    /// Whether the commit that ended at `lsn` is durable; fails, healing the binlog, when a
    /// write or fsync failed meanwhile and `lsn` was cut off by it, as
    /// [`Engine::wait_durable`] does. It never waits for an fsync in flight.
    pub fn check_durable(&self, lsn: u64) -> Result<bool> {
        let writer = self
            .shared
            .binlog
            .as_ref()
            .ok_or_else(|| Error::internal("engine opened read-only"))?;
        if writer.is_stopped() || writer.is_lost(lsn) {
            self.wait_durable(lsn)?;
            return Ok(true);
        }
        Ok(writer.durable_lsn() >= lsn)
    }

    /// Has everything committed so far fsynced within `delay`, in the background (a
    /// replica's applier: see [`binlog_format::BinlogWriter::sync_within`]), once per commit
    /// that ended at `lsn`. Returns and fails as [`Engine::check_durable`].
    pub fn sync_within(&self, lsn: u64, delay: Duration) -> Result<bool> {
        // The commit counts towards the next automatic snapshot as a waited-for one does (a
        // snapshot syncs the binlog before it is written, so it never holds more than that).
        self.count_durable_commit();
        if self.check_durable(lsn)? {
            return Ok(true);
        }
        if let Some(writer) = &self.shared.binlog {
            writer.sync_within(delay);
        }
        Ok(false)
    }

    pub(crate) fn next_txn_id(&self) -> u64 {
        self.shared.next_txn.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use binlog_format::SyncPolicy;

    use super::{snapshot, Engine, EngineConfig};
    use crate::fixtures::{create_ids, insert_ids};

    /// A lock that a forked child still holds for a moment (a copy of the descriptor, kept until
    /// its `exec`) is waited out; one held for longer is reported as a node in use.
    #[test]
    fn a_lock_held_a_moment_longer_is_waited_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, _) = Engine::open(dir.path(), EngineConfig::new(1)).expect("open");
        let lock_copy = engine
            .shared
            ._dir_lock
            .try_clone()
            .expect("copy of the lock");
        drop(engine);
        let err = Engine::open(dir.path(), EngineConfig::new(1)).expect_err("still held");
        assert!(
            err.to_string().contains("in use by a running ringrep node"),
            "{err}"
        );
        let holder = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(lock_copy);
        });
        Engine::open(dir.path(), EngineConfig::new(1)).expect("open once the copy is closed");
        holder.join().expect("holder");
    }

    /// After the first, an automatic snapshot waits until the binlog written since the last one
    /// is as large as that snapshot (`snapshot_log_percent` = 100), not only for the count.
    #[test]
    fn automatic_snapshots_wait_for_a_snapshots_worth_of_binlog() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = EngineConfig::new(1);
        cfg.sync = SyncPolicy::EveryCommit;
        cfg.snapshot_every = 10;
        let (engine, _) = Engine::open(dir.path(), cfg).expect("open");
        let mut s = engine.session();
        s.create_database("d", false).expect("create database");
        create_ids(&mut s, "e");
        let settled = |e: &Engine| {
            let h = e.shared.snapshot_writer.lock().expect("writer").take();
            if let Some(h) = h {
                h.join().expect("snapshot thread");
            }
            snapshot::newest_seq(dir.path()).expect("snapshots")
        };
        // A state of 5,000 rows, then commits until the first snapshot (by the count alone).
        insert_ids(&mut s, "e", &(0..5000).collect::<Vec<_>>());
        let mut id = 5000;
        let mut one = |s: &mut super::Session| {
            id += 1;
            insert_ids(s, "e", &[id]);
        };
        for _ in 0..10 {
            one(&mut s);
        }
        let first = settled(&engine).expect("the first snapshot, after 10 commits");
        // Far more than 10 small commits log much less than the snapshot holds: none taken.
        for _ in 0..40 {
            one(&mut s);
            assert_eq!(
                settled(&engine),
                Some(first),
                "no snapshot for a little binlog"
            );
        }
        // Once as much was logged as the snapshot holds, the count decides again.
        insert_ids(&mut s, "e", &(10_000..16_000).collect::<Vec<_>>());
        for _ in 0..10 {
            one(&mut s);
        }
        let second = settled(&engine).expect("snapshots");
        assert!(
            second > first,
            "a second snapshot once the binlog grew: {second} > {first}"
        );
        // After a restart the rule holds from the snapshot the node opened from: the first
        // automatic one waits for a snapshot's worth of binlog too, the binlog replayed after
        // that snapshot counted in.
        for _ in 0..5 {
            one(&mut s);
        }
        drop(s);
        drop(engine);
        let mut cfg = EngineConfig::new(1);
        cfg.sync = SyncPolicy::EveryCommit;
        cfg.snapshot_every = 10;
        let (engine, report) = Engine::open(dir.path(), cfg).expect("reopen");
        assert_eq!(report.snapshot_seq, Some(second));
        assert!(report.replayed >= 5, "{report:?}");
        assert!(
            report.snapshot_bytes > 0 && report.replayed_bytes > 0,
            "{report:?}"
        );
        assert!(
            report.replayed_bytes < report.snapshot_bytes / 10,
            "five one-row commits: {report:?}"
        );
        let mut s = engine.session();
        for _ in 0..40 {
            one(&mut s);
            assert_eq!(
                settled(&engine),
                Some(second),
                "no snapshot after a restart for a little binlog"
            );
        }
        insert_ids(&mut s, "e", &(20_000..32_000).collect::<Vec<_>>());
        for _ in 0..10 {
            one(&mut s);
        }
        let third = settled(&engine).expect("snapshots");
        assert!(
            third > second,
            "one once the binlog grew: {third} > {second}"
        );
    }
}
