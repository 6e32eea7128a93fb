//! Sessions: one client's variables and transaction.
//!
//! A transaction's changes live in its overlay until commit, so other sessions read only
//! committed rows (read committed). Each statement can be undone on its own: when one fails,
//! the transaction is as it was before the statement. Commit validates unique indexes against
//! what committed meanwhile, logs the transaction and applies it (see `Engine::commit_events`).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use binlog_format::schema::{ColumnType, IndexKind, RingOptions, TableDef};
use binlog_format::{Cause, DdlEvent, Event, Key, RowChange, RowEvent, Value};

use super::overlay::{key_hash, key_hash_iter, FastMap, Overlay};
use super::table::HIDDEN_ROW_ID;
use super::{Engine, LockKey, Row, State, Table, SYSTEM_TABLE_ID_BASE};
use crate::error::{code, Error, Result};
use crate::ring::Meta;
use crate::types::{self, convert, default_value, expiry_us, ttl_max, zero_value};

/// The most warnings a statement keeps for SHOW WARNINGS, as MySQL's `max_error_count`.
pub const MAX_WARNINGS: usize = 1024;

/// Session variables that change what the engine does.
#[derive(Debug, Clone)]
pub struct SessionVars {
    /// The current database (`USE`).
    pub database: Option<String>,
    /// `ndb_ring_buffer_show_meta`: reads return meta rows.
    pub show_meta: bool,
    /// `ttl_expired_rows_visible_in_delete`: a prefix DELETE also removes expired rows.
    pub ttl_expired_visible_in_delete: bool,
    /// `ndb_log_update_as_write`: UPDATE is logged as a full-row write (NDB's default).
    pub log_update_as_write: bool,
    /// `autocommit`: each statement commits on its own.
    pub autocommit: bool,
    /// The applier privilege: direct writes to ring tables are allowed.
    pub applier: bool,
    /// The session's account holds SUPER: `read_only` (not `super_read_only`) lets it write.
    pub super_user: bool,
    /// Session time zone as seconds east of UTC.
    pub tz_offset: i64,
    /// `SET timestamp = N`: the session's NOW(), in epoch microseconds.
    pub timestamp_us: Option<i64>,
    /// `innodb_lock_wait_timeout`: how long a row lock is waited for before error 1205; the
    /// engine's `lock_wait_timeout` when not set.
    pub lock_wait_timeout: Option<std::time::Duration>,
    /// `sql_mode` has STRICT_TRANS_TABLES or STRICT_ALL_TABLES: a value a column cannot
    /// hold fails the write; without it the value is adjusted with a warning, as INSERT
    /// IGNORE adjusts it.
    pub strict: bool,
    /// `sql_mode` has NO_AUTO_VALUE_ON_ZERO: a 0 written to an AUTO_INCREMENT column is
    /// stored as 0 (dumps restore such rows so); only NULL generates a value.
    pub no_auto_value_on_zero: bool,
}

impl Default for SessionVars {
    fn default() -> Self {
        SessionVars {
            database: Some("test".into()),
            show_meta: false,
            ttl_expired_visible_in_delete: false,
            log_update_as_write: true,
            autocommit: true,
            applier: false,
            super_user: true,
            tz_offset: 0,
            timestamp_us: None,
            lock_wait_timeout: None,
            strict: true,
            no_auto_value_on_zero: false,
        }
    }
}

/// Error 1290 when `SET GLOBAL read_only` or `super_read_only` refuses this session's writes
/// (never the applier's).
fn fenced(engine: &Engine, vars: &SessionVars) -> Result<()> {
    if vars.applier {
        return Ok(());
    }
    match engine.fence() {
        crate::Fence::Open => Ok(()),
        crate::Fence::ReadOnly if vars.super_user => Ok(()),
        crate::Fence::ReadOnly => Err(Error::read_only()),
        crate::Fence::SuperReadOnly => Err(Error::super_read_only()),
    }
}

/// How an INSERT treats a duplicate key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertMode {
    /// A duplicate key is error 1062.
    Insert,
    /// INSERT IGNORE: a duplicate key skips the row with a warning on plain tables; on ring
    /// tables the transaction fails at commit with error 125 (the spec).
    Ignore,
}

/// One row change a statement staged, as [`Session::changes_since`] gives it: the row
/// before and after (`None`: there was none, or it was deleted).
#[derive(Debug, Clone, PartialEq)]
pub struct StagedChange {
    /// The changed table's id.
    pub table_id: u64,
    /// The row before the change; `None` for an insert.
    pub before: Option<Row>,
    /// The row after the change; `None` for a delete.
    pub after: Option<Row>,
}

/// What an UPDATE did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UpdateOutcome {
    /// Rows that matched the condition.
    pub matched: u64,
    /// Rows whose values changed.
    pub changed: u64,
}

/// The row locks a transaction holds.
type LockSet = std::collections::HashSet<LockKey, foldhash::fast::RandomState>;

/// The row an event leaves at its key: the written row or the after image; `None` for a
/// delete.
fn staged_row(ops: &[Event], at: usize) -> Option<&Row> {
    match ops.get(at) {
        Some(Event::Row(RowEvent {
            change: RowChange::Write { row } | RowChange::Update { after: row, .. },
            ..
        })) => Some(row),
        _ => None,
    }
}

#[derive(Debug)]
struct Txn {
    id: u64,
    ops: Vec<Event>,
    overlay: Overlay,
    locks: LockSet,
    doomed: Option<Error>,
    explicit: bool,
    /// SAVEPOINTs, oldest first: name (as given), the events before it, and the overlay then.
    savepoints: Vec<(String, usize, Overlay)>,
}

/// One client's view of the engine: session variables, the open transaction with its row
/// locks and staged events, warnings. Not shared between threads.
pub struct Session {
    engine: Engine,
    /// The session variables.
    pub vars: SessionVars,
    /// The statement is a one-row INSERT (set by the SQL layer, which knows): out of strict
    /// mode its NULL for a NOT NULL column stays error 1048, as in MySQL.
    pub one_row_insert: bool,
    txn: Option<Txn>,
    /// The statement's undo log: for each event it staged (the events from `ops_mark` on,
    /// in order), the overlay entry its key had before, if any.
    undo: Vec<Option<usize>>,
    ops_mark: usize,
    stmt_explicit: bool,
    warnings: Vec<(u16, String)>,
    /// Warnings past [`MAX_WARNINGS`] this statement gave: counted, not kept.
    warnings_dropped: usize,
    /// The first AUTO_INCREMENT value generated since [`Session::take_generated_id`] last
    /// took it (what `LAST_INSERT_ID()` becomes).
    generated_id: Option<u64>,
    /// Commits return once logged and applied, without waiting for the disk; the caller
    /// takes [`Session::take_pending_lsn`] and awaits [`Engine::wait_durable_async`] before
    /// acknowledging anything (the server's connections do).
    pub defer_durability: bool,
    /// The highest LSN committed since the last `take_pending_lsn`, when deferring.
    pending_lsn: Option<u64>,
    /// Whether a row lock another transaction holds is waited for (up to the lock wait
    /// timeout). Off, the lock fails at once with [`Error::would_wait`] and the statement is
    /// undone like any failed one: the server runs a statement on its connection's task this
    /// way, where a wait would stall the other connections of that thread, and runs it again
    /// on a thread that may wait when it fails so.
    pub lock_wait: bool,
    /// At most how many stored rows one read of a table may take, for a statement that must
    /// stay brief (the server's connection task, as with `lock_wait` off): a read of more
    /// fails with [`Error::would_wait`], and the statement runs again where it may take long.
    /// `None` (the default): no limit.
    pub read_budget: Option<usize>,
    /// What the last commit left for the next transaction to reuse.
    spare: Spare,
    /// The engine's take-back count when the open transaction (or the statement that will
    /// open one) began: a transaction that read state a heal then took back must not commit
    /// what it computed from it.
    read_epoch: u64,
}

/// A committed transaction's emptied event list, lock list and overlay, kept so that the
/// next transaction does not grow new ones entry by entry.
#[derive(Default)]
struct Spare {
    ops: Vec<Event>,
    locks: LockSet,
    overlay: Overlay,
    /// A ring insert's kept columns, meta rows and row key (the native writer sends a batch
    /// every few rows).
    kept: Vec<usize>,
    metas: Vec<(Key, u64, Meta)>,
    /// The ring insert's index of its meta rows: see `MetaIndex`.
    meta_index: MetaIndex,
    key: Vec<Value>,
    /// Emptied vectors of written rows, for the next rows built (a few hundred kilobytes
    /// at most: see `SPARE_ROWS`).
    rows: Vec<Row>,
}

/// Where a ring insert keeps each prefix's meta row, found by the meta key's hash, so that a
/// statement of n rows over p prefixes costs n lookups, not n × p comparisons.
#[derive(Default)]
struct MetaIndex {
    /// The last meta (its index in the insert's list) whose key has this hash.
    last: FastMap<u64, usize>,
    /// For each meta, the one before it with the same hash (`usize::MAX`: none): 64-bit
    /// hashes of distinct prefixes collide almost never, but a collision must not merge rings.
    before: Vec<usize>,
}

impl MetaIndex {
    fn clear(&mut self) {
        self.last.clear();
        self.before.clear();
    }

    /// The index of the meta with hash `hash` that `is_it` accepts.
    fn find(&self, hash: u64, mut is_it: impl FnMut(usize) -> bool) -> Option<usize> {
        let mut at = *self.last.get(&hash)?;
        while at != usize::MAX {
            if is_it(at) {
                return Some(at);
            }
            at = self.before[at];
        }
        None
    }

    /// Records that meta number `at` (the next one: `at` metas are recorded) has `hash`.
    fn push(&mut self, hash: u64, at: usize) {
        debug_assert_eq!(at, self.before.len());
        self.before
            .push(self.last.insert(hash, at).unwrap_or(usize::MAX));
    }
}

/// How many emptied row vectors a session keeps.
const SPARE_ROWS: usize = 1024;

/// Rows [`Session::checksum`] reads under one hold of the state's lock: about a
/// millisecond's worth, so a commit waits no longer than that for it.
const CHECKSUM_PAGE_ROWS: usize = 4096;

/// Lists and maps with room for more than this many entries are not kept.
const SPARE_MAX: usize = 1 << 16;

/// A list emptied for the next transaction, or a new one if it grew too big to keep.
fn reusable<T>(mut list: Vec<T>) -> Vec<T> {
    list.clear();
    if list.capacity() <= SPARE_MAX {
        list
    } else {
        Vec::new()
    }
}

/// Error 1046: a table named without a database when the session has none.
fn no_database() -> Error {
    Error::new(code::ER_NO_DB_ERROR, "No database selected")
}

fn slot_value(def: &TableDef, slot: u32) -> Value {
    match def.ring.as_ref().map(|r| &def.columns[r.slot_column].ty) {
        Some(ColumnType::Integer { unsigned: true, .. }) => Value::UInt(u64::from(slot)),
        _ => Value::Int(i64::from(slot)),
    }
}

/// The primary key of a ring's slot (slot 0: its meta row) under a prefix given as its
/// values.
fn slot_key<'v>(
    def: &TableDef,
    prefix: impl ExactSizeIterator<Item = &'v Value>,
    slot: u32,
) -> Key {
    let mut key = Vec::with_capacity(prefix.len() + 1);
    key.extend(prefix.cloned());
    key.push(slot_value(def, slot));
    Key(key)
}

/// The meta a ring's meta row holds, when its meta column reads as one.
fn meta_of(ring: &RingOptions, row: &[Value]) -> Option<Meta> {
    row.get(ring.meta_column).and_then(meta_in)
}

/// The meta a meta row's meta column holds.
fn meta_in(v: &Value) -> Option<Meta> {
    match v {
        Value::Bytes(b) => Meta::decode(b),
        _ => None,
    }
}

/// The ring rules of an UPDATE's assignments: the slot, the meta column and the other key
/// columns of a ring table are not the statement's to set.
fn check_ring_assignments(def: &TableDef, assigned: &[usize]) -> Result<()> {
    let Some(ring) = &def.ring else {
        return Ok(());
    };
    for &c in assigned {
        let name = &def.columns[c].name;
        if c == ring.slot_column || c == ring.meta_column {
            return Err(Error::not_allowed(&format!(
                "Cannot update {name} on ring-buffer table"
            )));
        }
        if def.primary_key.contains(&c) {
            return Err(Error::not_allowed(&format!(
                "Cannot update primary key column {name} on ring-buffer table"
            )));
        }
    }
    Ok(())
}

/// The session's open transaction, opened if there is none. (A function of the two fields,
/// so that callers can still use the engine handle while holding the transaction.)
fn open_txn<'a>(txn: &'a mut Option<Txn>, engine: &Engine, spare: &mut Spare) -> &'a mut Txn {
    txn.get_or_insert_with(|| Txn {
        id: engine.next_txn_id(),
        ops: std::mem::take(&mut spare.ops),
        overlay: std::mem::take(&mut spare.overlay),
        locks: std::mem::take(&mut spare.locks),
        doomed: None,
        explicit: false,
        savepoints: Vec::new(),
    })
}

pub(crate) fn dup_text(values: &[Value]) -> String {
    values
        .iter()
        .map(types::text_of)
        .collect::<Vec<_>>()
        .join("-")
}

/// A session that goes away (a client disconnects) takes its open transaction with it.
impl Drop for Session {
    fn drop(&mut self) {
        self.rollback();
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("vars", &self.vars)
            .field("in_transaction", &self.in_transaction())
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(engine: Engine) -> Session {
        let read_epoch = engine.shared.taken_back.load(Ordering::Acquire);
        Session {
            read_epoch,
            engine,
            vars: SessionVars::default(),
            one_row_insert: false,
            txn: None,
            undo: Vec::new(),
            ops_mark: 0,
            stmt_explicit: false,
            warnings: Vec::new(),
            warnings_dropped: 0,
            generated_id: None,
            defer_durability: false,
            pending_lsn: None,
            lock_wait: true,
            read_budget: None,
            spare: Spare::default(),
        }
    }

    /// The LSN the commits since the last call must reach before they are acknowledged
    /// (only when deferring durability).
    pub fn take_pending_lsn(&mut self) -> Option<u64> {
        self.pending_lsn.take()
    }

    /// The engine this session works on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether a transaction is open.
    pub fn in_transaction(&self) -> bool {
        self.txn.as_ref().is_some_and(|t| t.explicit)
    }

    /// Whether another session's open transaction holds a row lock of table `table_id`.
    pub fn others_hold_rows_of(&self, table_id: u64) -> bool {
        self.engine
            .shared
            .locks
            .held_by_others(table_id, self.txn.as_ref().map(|t| t.id))
    }

    /// The warnings of the last statement (code, message), leaving none.
    pub fn take_warnings(&mut self) -> Vec<(u16, String)> {
        self.warnings_dropped = 0;
        std::mem::take(&mut self.warnings)
    }

    /// The warnings the last statement gave, as SHOW WARNINGS lists them.
    pub fn warnings(&self) -> &[(u16, String)] {
        &self.warnings
    }

    /// How many warnings and notes the last statement gave (SHOW WARNINGS lists at most
    /// [`MAX_WARNINGS`] of them).
    pub fn warning_count(&self) -> usize {
        self.warnings.len() + self.warnings_dropped
    }

    /// Adds a warning of `code` (a [`crate::error::Code`] or a bare number) for SHOW WARNINGS;
    /// past [`MAX_WARNINGS`] it is only counted (an INSERT IGNORE of a million bad rows keeps
    /// no million messages).
    pub fn warn(&mut self, code: impl Into<u16>, msg: impl Into<String>) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push((code.into(), msg.into()));
        } else {
            self.warnings_dropped += 1;
        }
    }

    /// Counts `n` warnings past those kept (made elsewhere and not kept there either), for
    /// `@@warning_count`.
    pub fn count_dropped_warnings(&mut self, n: u64) {
        self.warnings_dropped = self
            .warnings_dropped
            .saturating_add(usize::try_from(n).unwrap_or(usize::MAX));
    }

    /// Whether an INSERT of `mode` stores what strict mode refuses, adjusted, with a warning:
    /// with IGNORE, or in a session out of strict mode.
    pub fn inserts_leniently(&self, mode: InsertMode) -> bool {
        mode == InsertMode::Ignore || !self.vars.strict
    }

    /// [`Session::inserts_leniently`] for the value `v`: out of strict mode a NULL for a NOT
    /// NULL column of a one-row INSERT ([`Session::one_row_insert`]) stays error 1048, as in
    /// MySQL.
    pub fn inserts_leniently_value(&self, mode: InsertMode, v: &Value) -> bool {
        self.inserts_leniently(mode)
            && !(v.is_null() && mode == InsertMode::Insert && self.one_row_insert)
    }

    /// The session's current time: `SET timestamp` if given, else the engine clock.
    pub fn now_us(&self) -> i64 {
        self.vars
            .timestamp_us
            .unwrap_or_else(|| self.engine.now_us())
    }

    // ----- table lookup -------------------------------------------------------------

    /// The current database, or error 1046 when none is selected.
    pub fn current_db(&self) -> Result<String> {
        self.vars.database.clone().ok_or_else(no_database)
    }

    /// The definition of `db.name` (the session's database when `db` is `None`).
    pub fn table_def(&self, db: Option<&str>, name: &str) -> Result<TableDef> {
        self.shared_table_def(db, name).map(|d| TableDef::clone(&d))
    }

    /// [`Session::table_def`] as the table holds it, without a copy.
    pub fn shared_table_def(&self, db: Option<&str>, name: &str) -> Result<Arc<TableDef>> {
        let db = match db.or(self.vars.database.as_deref()) {
            Some(d) => d,
            None => return Err(no_database()),
        };
        self.engine
            .shared_table_def(db, name)
            .ok_or_else(|| Error::no_such_table(db, name))
    }

    // ----- transactions -------------------------------------------------------------

    fn txn(&mut self) -> &mut Txn {
        open_txn(&mut self.txn, &self.engine, &mut self.spare)
    }

    /// BEGIN / START TRANSACTION: commits any open transaction first, as MySQL does.
    pub fn begin(&mut self) -> Result<()> {
        self.commit()?;
        self.txn().explicit = true;
        Ok(())
    }

    /// Commits the open transaction; returns its sequence number when it changed anything.
    pub fn commit(&mut self) -> Result<Option<u64>> {
        let Some(mut txn) = self.txn.take() else {
            return Ok(None);
        };
        let result = match txn.doomed.take() {
            Some(e) => Err(e),
            None if txn.ops.is_empty() => Ok(None),
            None => {
                let overlay = &txn.overlay;
                let (shared, epoch) = (&self.engine.shared, self.read_epoch);
                let (engine, vars) = (&self.engine, &self.vars);
                let committed = self
                    .engine
                    .commit_events_into(&mut txn.ops, None, |st, ops| {
                        // Checked under the state's lock, which a heal holds while it works.
                        if shared.taken_back.load(Ordering::Acquire) != epoch {
                            return Err(Error::read_taken_back());
                        }
                        // And so is the fence, which `set_fence` waits for this lock after
                        // changing: nothing it refuses commits after it returns.
                        fenced(engine, vars)?;
                        validate_uniques(st, ops, overlay)
                    });
                match committed {
                    Ok((seq, lsn)) if self.defer_durability => {
                        self.pending_lsn = Some(self.pending_lsn.map_or(lsn, |p| p.max(lsn)));
                        Ok(Some(seq))
                    }
                    Ok((seq, lsn)) => self.engine.wait_durable(lsn).map(|()| Some(seq)),
                    Err(e) => Err(e),
                }
            }
        };
        let mut locks = txn.locks;
        self.engine.shared.locks.release_all(txn.id, locks.drain());
        self.undo.clear();
        // The next transaction reuses this one's memory (a big one's is let go).
        let mut overlay = txn.overlay;
        overlay.reset(SPARE_MAX);
        let mut ops = txn.ops;
        for op in ops.drain(..) {
            if let Event::Row(RowEvent {
                change: RowChange::Write { mut row },
                ..
            }) = op
            {
                if self.spare.rows.len() < SPARE_ROWS {
                    row.clear();
                    self.spare.rows.push(row);
                }
            }
        }
        self.spare.ops = reusable(ops);
        if locks.capacity() <= SPARE_MAX {
            self.spare.locks = locks;
        }
        self.spare.overlay = overlay;
        result
    }

    /// Rolls the open transaction back: nothing it staged is kept, its locks are released.
    pub fn rollback(&mut self) {
        if let Some(txn) = self.txn.take() {
            self.engine.shared.locks.release_all(txn.id, txn.locks);
        }
        self.undo.clear();
    }

    /// Runs one statement: on error its changes are undone; in autocommit mode it commits.
    pub fn statement<T>(&mut self, f: impl FnOnce(&mut Session) -> Result<T>) -> Result<T> {
        self.begin_statement();
        let r = f(self);
        self.end_statement(r)
    }

    /// `SAVEPOINT name`: a point in the open transaction to roll back to. One of the same
    /// name (compared case-insensitively) is replaced. Outside a transaction there is nothing
    /// to mark, as in MySQL (the next ROLLBACK TO finds no such savepoint).
    pub fn savepoint(&mut self, name: &str) {
        if !self.in_transaction() {
            if self.vars.autocommit {
                return;
            }
            // With autocommit off a transaction is open from the first statement on.
            self.txn().explicit = true;
        }
        let txn = self.txn();
        txn.savepoints
            .retain(|(n, ..)| !n.eq_ignore_ascii_case(name));
        let mark = txn.ops.len();
        let overlay = txn.overlay.clone();
        txn.savepoints.push((name.to_string(), mark, overlay));
    }

    fn savepoint_index(&self, name: &str) -> Result<usize> {
        self.txn
            .as_ref()
            .and_then(|t| {
                t.savepoints
                    .iter()
                    .position(|(n, ..)| n.eq_ignore_ascii_case(name))
            })
            .ok_or_else(|| {
                Error::new(
                    code::ER_SP_DOES_NOT_EXIST,
                    format!("SAVEPOINT {name} does not exist"),
                )
            })
    }

    /// `ROLLBACK TO SAVEPOINT name`: undoes what the transaction did after it (row locks taken
    /// since are kept, as InnoDB keeps them) and drops the savepoints set after it.
    pub fn rollback_to_savepoint(&mut self, name: &str) -> Result<()> {
        let at = self.savepoint_index(name)?;
        let txn = self.txn.as_mut().expect("a savepoint was found");
        txn.savepoints.truncate(at + 1);
        let (_, mark, overlay) = &txn.savepoints[at];
        txn.ops.truncate(*mark);
        txn.overlay = overlay.clone();
        Ok(())
    }

    /// `RELEASE SAVEPOINT name`: forgets it and the savepoints set after it.
    pub fn release_savepoint(&mut self, name: &str) -> Result<()> {
        let at = self.savepoint_index(name)?;
        if let Some(txn) = self.txn.as_mut() {
            txn.savepoints.truncate(at);
        }
        Ok(())
    }

    /// Marks the start of a statement (for callers that cannot pass a closure).
    pub fn begin_statement(&mut self) {
        if !self.in_transaction() {
            self.read_epoch = self.engine.shared.taken_back.load(Ordering::Acquire);
        }
        self.stmt_explicit = self.in_transaction();
        self.undo.clear();
        self.ops_mark = self.txn.as_ref().map_or(0, |t| t.ops.len());
    }

    /// Ends a statement begun with [`Session::begin_statement`]: undoes it on error, commits
    /// in autocommit mode.
    pub fn end_statement<T>(&mut self, r: Result<T>) -> Result<T> {
        let explicit = self.stmt_explicit;
        match r {
            Ok(v) => {
                if !explicit && self.vars.autocommit {
                    self.commit()?;
                } else if let Some(t) = self.txn.as_mut() {
                    // With autocommit off, the first statement opens a transaction that lasts
                    // until COMMIT or ROLLBACK.
                    t.explicit = true;
                }
                Ok(v)
            }
            Err(e) => {
                self.undo_statement();
                // A deadlock victim loses its whole transaction, as in MySQL: keeping its
                // locks would leave the other side of the cycle waiting.
                if (!explicit && self.vars.autocommit) || e.code == code::ER_LOCK_DEADLOCK {
                    self.rollback();
                }
                Err(e)
            }
        }
    }

    fn undo_statement(&mut self) {
        let mark = self.ops_mark;
        let undo = &self.undo;
        if let Some(txn) = self.txn.as_mut() {
            // An overlay entry the statement set points at one of its events; follow each
            // back through what its events replaced, to the entry from before the statement
            // (or to none). The log need not hold the keys: a failing statement is rare.
            txn.overlay.retain(|at| {
                while *at >= mark {
                    match undo.get(*at - mark) {
                        Some(&Some(before)) => *at = before,
                        _ => return false,
                    }
                }
                true
            });
            txn.ops.truncate(mark);
        }
        self.undo.clear();
    }

    fn check_writable(&self) -> Result<()> {
        if self.vars.applier {
            return Ok(());
        }
        if self.engine.is_read_only() {
            // A replica refuses every client, SUPER included: it shows super_read_only ON.
            return Err(Error::super_read_only());
        }
        fenced(&self.engine, &self.vars)
    }

    fn lock(&mut self, table: u64, key: &Key) -> Result<()> {
        self.lock_hashed(table, key_hash(&key.0))
    }

    /// [`Session::lock`] of the row whose key's `key_hash` is `hash`.
    fn lock_hashed(&mut self, table: u64, hash: u64) -> Result<()> {
        let key = LockKey::from_hash(table, hash);
        let timeout = self
            .vars
            .lock_wait_timeout
            .unwrap_or(self.engine.config().lock_wait_timeout);
        let txn = open_txn(&mut self.txn, &self.engine, &mut self.spare);
        // A lock the transaction holds already (its ring's meta row again, a slot it wrote
        // before) needs no trip to the shared table, whose mutex every writer takes.
        if txn.locks.contains(&key) {
            return Ok(());
        }
        if !self.lock_wait {
            if !self.engine.shared.locks.try_acquire(txn.id, key) {
                return Err(Error::would_wait());
            }
        } else {
            self.engine.shared.locks.acquire(txn.id, key, timeout)?;
        }
        txn.locks.insert(key);
        Ok(())
    }

    /// Records a change to a row of `def` in the transaction's events and its overlay (with
    /// undo); `hash` is the `key_hash` of the row's key.
    fn stage(&mut self, def: &TableDef, hash: u64, event: RowEvent) {
        let txn = open_txn(&mut self.txn, &self.engine, &mut self.spare);
        let at = txn.ops.len();
        txn.ops.push(Event::Row(event));
        let before = txn
            .overlay
            .insert(&txn.ops, def.id, &def.primary_key, hash, at);
        self.undo.push(before);
    }

    /// Stages a row delete and its binlog event.
    fn stage_delete(&mut self, def: &TableDef, key: Key, cause: Cause) {
        let hash = key_hash(&key.0);
        let event = RowEvent {
            table_id: def.id,
            change: RowChange::Delete { key: key.0 },
            cause,
        };
        self.stage(def, hash, event);
    }

    /// Stages a full-row write (an upsert) and its binlog event.
    fn stage_write(&mut self, def: &TableDef, key: &Key, row: Row, cause: Cause) {
        self.stage_write_hashed(def, key_hash(&key.0), row, cause);
    }

    /// [`Session::stage_write`] of a row whose key's `key_hash` is `hash`.
    fn stage_write_hashed(&mut self, def: &TableDef, hash: u64, row: Row, cause: Cause) {
        self.stage(
            def,
            hash,
            RowEvent {
                table_id: def.id,
                change: RowChange::Write { row },
                cause,
            },
        );
    }

    /// The row of `def` whose unique index number `index` (its position in `def.indexes`)
    /// holds `values`, as this session sees it (its transaction's rows first): a lookup in the
    /// index, not a scan. The SQL layer finds a FOREIGN KEY's parent row this way when the
    /// parent's columns are a unique index.
    pub fn find_unique(&self, def: &TableDef, index: usize, values: &[Value]) -> Option<Row> {
        let value = Key(values.to_vec());
        let holder = {
            let st = self.engine.read();
            let table = st.tables.get(&def.id)?;
            if let Some(txn) = &self.txn {
                for (_, at) in txn
                    .overlay
                    .staged_with_unique(&txn.ops, &table.def, index, values)
                {
                    if let Some(r) = staged_row(&txn.ops, at) {
                        if table.unique_value(index, r).as_ref() == Some(&value) {
                            return Some(r.clone());
                        }
                    }
                }
            }
            table.unique_holder(index, &value)?.clone()
        };
        // The committed holder, unless this transaction deleted it or changed its value.
        self.get_row(def.id, &holder)
            .filter(|r| def.index_value(index, r).as_ref() == Some(&value))
    }

    /// How many row events the open transaction has staged: a position to give
    /// [`Session::changes_since`] later (0 without a transaction).
    pub fn staged_len(&self) -> usize {
        self.txn.as_ref().map_or(0, |t| t.ops.len())
    }

    /// The row changes the running statement staged from position `from` on (a position
    /// [`Session::staged_len`] gave during the statement), each with the row as it was just
    /// before it and as it left it. The SQL layer checks and carries out foreign keys from
    /// these at the statement's end, whatever path wrote the rows (INSERT, REPLACE, UPDATE,
    /// DELETE, LOAD DATA, triggers): the before image comes from the statement's undo log
    /// (an earlier event of the transaction) or, when the transaction had not touched the
    /// key, from the committed table. A primary-key change, staged as a delete of the old
    /// key then a write of the new one (both `Cause::Update`), is given as one change.
    /// Only the tables `wanted` accepts (by id) are looked at; meta rows are left out.
    pub fn changes_since(&self, from: usize, wanted: &dyn Fn(u64) -> bool) -> Vec<StagedChange> {
        let Some(txn) = &self.txn else {
            return Vec::new();
        };
        let st = self.engine.read();
        let before_of = |at: usize, table_id: u64, key: &[Value]| -> Option<Row> {
            match at.checked_sub(self.ops_mark).and_then(|i| self.undo.get(i)) {
                Some(Some(prev)) => staged_row(&txn.ops, *prev).cloned(),
                Some(None) => st.tables.get(&table_id)?.get(&Key(key.to_vec())),
                // Not this statement's (the caller's position is before it): ask the overlay
                // as it stands, which is this event's own row, so no change is reported.
                None => None,
            }
        };
        let mut out = Vec::new();
        let mut at = from.max(self.ops_mark);
        while at < txn.ops.len() {
            let Event::Row(ev) = &txn.ops[at] else {
                at += 1;
                continue;
            };
            if !wanted(ev.table_id) {
                at += 1;
                continue;
            }
            let Some(table) = st.tables.get(&ev.table_id) else {
                at += 1;
                continue;
            };
            let change = match &ev.change {
                RowChange::Write { row } => {
                    let key = table.key_of(row);
                    if table.is_meta_key(&key) {
                        at += 1;
                        continue;
                    }
                    StagedChange {
                        table_id: ev.table_id,
                        before: before_of(at, ev.table_id, &key.0),
                        after: Some(row.clone()),
                    }
                }
                RowChange::Update { key, after, .. } => StagedChange {
                    table_id: ev.table_id,
                    before: before_of(at, ev.table_id, key),
                    after: Some(after.clone()),
                },
                RowChange::Delete { key } => {
                    if table.is_meta_key(&Key(key.clone())) {
                        at += 1;
                        continue;
                    }
                    let before = before_of(at, ev.table_id, key);
                    // A key change: the delete of the old key and the write of the new one.
                    let moved = match (ev.cause, txn.ops.get(at + 1)) {
                        (
                            Cause::Update,
                            Some(Event::Row(RowEvent {
                                table_id,
                                change: RowChange::Write { row },
                                cause: Cause::Update,
                            })),
                        ) if *table_id == ev.table_id => Some(row.clone()),
                        _ => None,
                    };
                    if moved.is_some() {
                        at += 1;
                    }
                    StagedChange {
                        table_id: ev.table_id,
                        before,
                        after: moved,
                    }
                }
            };
            at += 1;
            if change.before.is_some() || change.after.is_some() {
                out.push(change);
            }
        }
        out
    }

    // ----- reads ----------------------------------------------------------------------

    /// The stored row at `key` as this session sees it (meta and expired rows included).
    pub(crate) fn get_row(&self, table: u64, key: &Key) -> Option<Row> {
        self.seen(table, key, |t| t.get(key), |r| r.cloned())
    }

    /// What this session sees at `key`: from its transaction's own writes (`staged`, given
    /// the staged row or `None` for a staged delete) when it has any there, else from the
    /// committed table (`committed`).
    fn seen<'s, T: Default>(
        &'s self,
        table: u64,
        key: &Key,
        committed: impl FnOnce(&Table) -> T,
        staged: impl FnOnce(Option<&'s Row>) -> T,
    ) -> T {
        self.seen_hashed(table, key, key_hash(&key.0), committed, staged)
    }

    /// [`Session::seen`] given the `key_hash` of `key`.
    fn seen_hashed<'s, T: Default>(
        &'s self,
        table: u64,
        key: &Key,
        hash: u64,
        committed: impl FnOnce(&Table) -> T,
        staged: impl FnOnce(Option<&'s Row>) -> T,
    ) -> T {
        if let Some(txn) = &self.txn {
            if let Some(at) = txn.overlay.get(&txn.ops, table, &key.0, hash) {
                return staged(staged_row(&txn.ops, at));
            }
        }
        self.engine
            .read()
            .tables
            .get(&table)
            .map(committed)
            .unwrap_or_default()
    }

    /// Whether [`Session::scan`] shows a stored row of `def` at `now`: a ring's meta row
    /// (slot 0, the key's last column: `TableDef::is_meta_key` without building the key) only
    /// with `show_meta`, any other row unless expired. `column(c)` gives the row's column
    /// `c`, so a caller holding the row undecoded decodes only what the rule reads.
    fn shows(&self, def: &TableDef, now: i64, column: impl Fn(usize) -> Option<Value>) -> bool {
        let meta = def.ring.is_some()
            && matches!(
                def.primary_key.last().and_then(|&c| column(c)),
                Some(Value::Int(0) | Value::UInt(0))
            );
        if meta {
            return self.vars.show_meta;
        }
        !def.ttl.as_ref().is_some_and(|ttl| {
            column(ttl.column)
                .and_then(|v| expiry_us(&v, ttl.seconds))
                .is_some_and(|exp| exp <= now)
        })
    }

    fn is_expired(&self, def: &TableDef, row: &[Value], now: i64) -> bool {
        match &def.ttl {
            Some(ttl) => row
                .get(ttl.column)
                .and_then(|v| expiry_us(v, ttl.seconds))
                .is_some_and(|exp| exp <= now),
            None => false,
        }
    }

    /// Rows whose primary key starts with `prefix` (all rows for an empty prefix), in key
    /// order, as this session sees them: meta rows only with `show_meta`, expired rows never.
    pub fn scan(&self, def: &TableDef, prefix: &[Value]) -> Result<Vec<Row>> {
        let rows = self.scan_raw(def.id, prefix)?;
        let now = self.now_us();
        Ok(rows
            .into_iter()
            .filter(|(_, r)| self.shows(def, now, |c| r.get(c).cloned()))
            .map(|(_, r)| r)
            .collect())
    }

    /// At most `cap` rows from `lower` on, in key order, as [`Session::scan`] sees them (meta
    /// rows only with `show_meta`, expired rows never): one page of a read that walks a table
    /// by its primary key, each page after the last key of the one before (keyset
    /// pagination). The state's lock is held for the rows of this page only, never for the
    /// table. `lower` is given as key values (the leading primary-key columns, already of the
    /// columns' types); as bytes, a key that starts with fewer values sorts before every key
    /// that starts with them, so `Excluded` of a shorter prefix still reads the keys under it.
    ///
    /// `None` when this session's open transaction has changed the table (its changes are
    /// merged by [`Session::scan`] only): the caller reads the whole way instead.
    pub fn scan_page(
        &self,
        def: &TableDef,
        lower: std::ops::Bound<&[Value]>,
        cap: usize,
    ) -> Result<Option<Vec<Row>>> {
        use std::ops::Bound;
        if let Some(txn) = &self.txn {
            if !txn.overlay.changed_in(&txn.ops, def.id, &[]).is_empty() {
                return Ok(None);
            }
        }
        let bytes = match lower {
            Bound::Included(v) | Bound::Excluded(v) => Some(super::keybytes::encode(v)),
            Bound::Unbounded => None,
        };
        let lower = match (&lower, &bytes) {
            (Bound::Included(_), Some(b)) => Bound::Included(b.as_slice()),
            (Bound::Excluded(_), Some(b)) => Bound::Excluded(b.as_slice()),
            _ => Bound::Unbounded,
        };
        let now = self.now_us();
        let budget = self
            .read_budget
            .filter(|_| !def.database.eq_ignore_ascii_case(crate::SYSTEM_DB));
        let st = self.engine.read();
        let t = st
            .tables
            .get(&def.id)
            .ok_or_else(|| Error::internal(format!("table id {} vanished", def.id)))?;
        let mut out = Vec::with_capacity(cap.min(4096));
        for (read, stored) in t.stored_range(lower, Bound::Unbounded).enumerate() {
            if out.len() >= cap {
                break;
            }
            if budget.is_some_and(|b| read >= b) {
                return Err(Error::would_wait());
            }
            let r = stored.row();
            if self.shows(def, now, |c| r.get(c).cloned()) {
                out.push(r);
            }
        }
        Ok(Some(out))
    }

    /// The rows of `def` as [`Session::scan`] sees them (meta rows only with `show_meta`,
    /// expired rows never), counted, and a CRC32C over their stored encodings in key order:
    /// `CHECKSUM TABLE`, and what the verifier compares two nodes by without sending their
    /// rows. The encodings are the binlog's, which a replica stores as its primary wrote
    /// them, so equal rows give equal checksums on every node. The state's lock is held for
    /// a few thousand rows at a time, as [`Session::scan_page`] holds it, so that
    /// commits go on meanwhile; a table this session's open transaction changed is read
    /// through [`Session::scan`], its changes merged.
    pub fn checksum(&self, def: &TableDef) -> Result<(u64, u32)> {
        use std::ops::Bound;
        if let Some(txn) = &self.txn {
            if !txn.overlay.changed_in(&txn.ops, def.id, &[]).is_empty() {
                let mut crc = 0u32;
                let rows = self.scan(def, &[])?;
                let mut buf = Vec::new();
                for r in &rows {
                    buf.clear();
                    binlog_format::codec::encode_row_into(r, &mut buf);
                    crc = crc32c::crc32c_append(crc, &buf);
                }
                return Ok((rows.len() as u64, crc));
            }
        }
        let now = self.now_us();
        let (mut rows, mut crc) = (0u64, 0u32);
        let mut after: Option<Vec<u8>> = None;
        loop {
            let st = self.engine.read();
            let t = st
                .tables
                .get(&def.id)
                .ok_or_else(|| Error::internal(format!("table id {} vanished", def.id)))?;
            let lower = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let mut read = 0;
            let mut last = None;
            for stored in t.stored_range(lower, Bound::Unbounded) {
                if read == CHECKSUM_PAGE_ROWS {
                    break;
                }
                read += 1;
                last = Some(stored);
                // Only the columns the rule needs are decoded.
                if self.shows(def, now, |c| stored.value(c)) {
                    rows += 1;
                    crc = crc32c::crc32c_append(crc, stored.encoded());
                }
            }
            match last {
                Some(s) if read == CHECKSUM_PAGE_ROWS => after = Some(s.key_bytes().to_vec()),
                _ => return Ok((rows, crc)),
            }
        }
    }

    /// Every stored row under a key prefix, meta and expired rows included, with its key.
    pub(crate) fn scan_raw(&self, table: u64, prefix: &[Value]) -> Result<Vec<(Key, Row)>> {
        let st = self.engine.read();
        let t = st
            .tables
            .get(&table)
            .ok_or_else(|| Error::internal(format!("table id {table} vanished")))?;
        // In key order already: the stored keys' bytes sort like the keys.
        let mut rows = t.prefix(prefix);
        // The system tables (views, triggers, grants) are read by most statements for their
        // own sake, a few rows each: the budget is for what the statement reads.
        let budget = self
            .read_budget
            .filter(|_| !t.def.database.eq_ignore_ascii_case(crate::SYSTEM_DB));
        let stored: Vec<(Key, Row)> = match budget {
            Some(budget) => {
                let out = rows.by_ref().take(budget).collect();
                if rows.next().is_some() {
                    return Err(Error::would_wait());
                }
                out
            }
            None => rows.by_ref().collect(),
        };
        drop(rows);
        drop(st);
        let Some(txn) = &self.txn else {
            return Ok(stored);
        };
        let changed = txn.overlay.changed_in(&txn.ops, table, prefix);
        if changed.is_empty() {
            return Ok(stored);
        }
        // This transaction's own changes, merged in key order.
        let mut out: BTreeMap<Key, Row> = stored.into_iter().collect();
        for (k, at) in changed {
            match staged_row(&txn.ops, at) {
                Some(r) => out.insert(k, r.clone()),
                None => out.remove(&k),
            };
        }
        Ok(out.into_iter().collect())
    }

    // ----- uniqueness -----------------------------------------------------------------

    /// [`Session::check_unique`] against the committed table. A table without unique
    /// indexes skips the engine's read lock: with many concurrent committers each extra
    /// acquisition is a chance to park behind a commit. (Commit checks uniqueness again
    /// under the write lock, so a concurrent ALTER adding an index is still caught.)
    fn check_unique_committed(&self, def: &TableDef, key: &Key, row: &[Value]) -> Result<()> {
        if !def.indexes.iter().any(|i| i.kind == IndexKind::Unique) {
            return Ok(());
        }
        let st = self.engine.read();
        let table = st
            .tables
            .get(&def.id)
            .ok_or_else(|| Error::no_such_table(&def.database, &def.name))?;
        self.check_unique(table, key, row, None)
    }

    /// Fails with 1062 when a unique value of `row`, to be written at `key`, is held by
    /// another live row than `replacing` (the row an UPDATE that moves a row to another key
    /// is about to delete: its values are the moved row's own).
    fn check_unique(
        &self,
        table: &Table,
        key: &Key,
        row: &[Value],
        replacing: Option<&Key>,
    ) -> Result<()> {
        let ops = self.txn.as_ref().map_or(&[][..], |t| &t.ops[..]);
        let overlay = self.txn.as_ref().map(|t| &t.overlay);
        for idx in table.unique_indexes() {
            let Some(v) = table.unique_value(idx, row) else {
                continue;
            };
            let dup = || {
                Error::dup_entry(
                    &dup_text(&v.0),
                    &format!("{}.{}", table.def.name, table.def.indexes[idx].name),
                )
            };
            // The rows this transaction wrote with the same value (by its hash).
            let staged = overlay.map_or_else(Vec::new, |o| {
                o.staged_with_unique(ops, &table.def, idx, &v.0)
            });
            for (k, at) in &staged {
                if let Some(r) = staged_row(ops, *at) {
                    if k != key
                        && Some(k) != replacing
                        && !table.is_meta_key(k)
                        && table.unique_value(idx, r).as_ref() == Some(&v)
                    {
                        return Err(dup());
                    }
                }
            }
            if let Some(holder) = table.unique_holder(idx, &v) {
                let overridden = overlay.is_some_and(|o| o.contains(ops, table.def.id, holder));
                if holder != key && Some(holder) != replacing && !overridden {
                    return Err(dup());
                }
            }
        }
        Ok(())
    }

    // ----- inserts --------------------------------------------------------------------

    /// Builds a full row from explicit values (coerced) and defaults.
    fn build_row(
        &mut self,
        def: &TableDef,
        columns: &[usize],
        values: impl ExactSizeIterator<Item = Value>,
        row_no: usize,
        now: i64,
        mode: InsertMode,
    ) -> Result<Row> {
        let lenient = self.inserts_leniently(mode);
        let zero_generates = !self.vars.no_auto_value_on_zero;
        if values.len() != columns.len() {
            return Err(Error::new(
                code::ER_WRONG_VALUE_COUNT_ON_ROW,
                format!("Column count doesn't match value count at row {row_no}"),
            ));
        }
        let mut row = self.spare.rows.pop().unwrap_or_default();
        row.resize_with(def.columns.len(), || Value::Null);
        // Which columns the statement gives: bits for the usual table, a list for a wide one.
        let mut bits = 0u128;
        let mut wide = Vec::new();
        if def.columns.len() <= 128 {
            for &c in columns {
                bits |= 1 << c;
            }
        } else {
            wide = vec![false; def.columns.len()];
            for &c in columns {
                wide[c] = true;
            }
        }
        let given = |c: usize| match wide.get(c) {
            Some(&g) => g,
            None => bits & (1 << c) != 0,
        };
        for (&c, v) in columns.iter().zip(values) {
            let col = &def.columns[c];
            row[c] = if col.auto_increment
                && (v.is_null() || (zero_generates && matches!(v, Value::Int(0) | Value::UInt(0))))
            {
                self.next_auto_inc(def, c)?
            } else {
                let lenient = self.inserts_leniently_value(mode, &v);
                let (v, diagnostic) = convert(v, col, row_no, self.vars.tz_offset, lenient)?;
                if let Some((c, m)) = diagnostic {
                    self.warn(c, m);
                }
                if col.auto_increment {
                    self.note_auto_inc(def, c, &v);
                }
                v
            };
        }
        let ring_cols = def.ring.as_ref().map(|r| (r.slot_column, r.meta_column));
        for (i, col) in def.columns.iter().enumerate() {
            if given(i) || ring_cols.is_some_and(|(s, m)| s == i || m == i) {
                continue;
            }
            row[i] = if col.name == HIDDEN_ROW_ID || col.auto_increment {
                self.next_auto_inc(def, i)?
            } else {
                match default_value(col, now, self.vars.tz_offset) {
                    Some(v) => v,
                    None => {
                        let e = Error::new(
                            code::ER_NO_DEFAULT_FOR_FIELD,
                            format!("Field '{}' doesn't have a default value", col.name),
                        );
                        if !lenient {
                            return Err(e);
                        }
                        self.warn(e.code, e.message);
                        zero_value(&col.ty)
                    }
                }
            };
        }
        Ok(row)
    }

    fn next_auto_inc(&mut self, def: &TableDef, col: usize) -> Result<Value> {
        // One counter per table and column for every session: two sessions inserting at once
        // never take the same value (a rolled-back insert leaves a gap, as in MySQL). The
        // table's rows are read once, to start from their largest value.
        let engine = self.engine.clone();
        let mut counters = engine.auto_inc_counters();
        let last = match counters.get(&(def.id, col)) {
            Some(&v) => v,
            None => {
                let mut max = 0;
                for (_, r) in self.scan_raw(def.id, &[])? {
                    max = max.max(auto_inc_of(r.get(col)));
                }
                max
            }
        };
        let next = last + 1;
        counters.insert((def.id, col), next);
        drop(counters);
        if def.columns[col].auto_increment && self.generated_id.is_none() {
            self.generated_id = Some(next);
        }
        Ok(match def.columns[col].ty {
            ColumnType::Integer { unsigned: true, .. } => Value::UInt(next),
            _ => Value::Int(next as i64),
        })
    }

    /// The value the next AUTO_INCREMENT of `def` would be generated as (information_schema's
    /// AUTO_INCREMENT, SHOW TABLE STATUS's), `None` for a table without such a column.
    pub fn next_auto_increment(&self, def: &TableDef) -> Result<Option<u64>> {
        let Some(col) = def
            .columns
            .iter()
            .position(|c| c.auto_increment && c.name != HIDDEN_ROW_ID)
        else {
            return Ok(None);
        };
        let known = self.engine.auto_inc_counters().get(&(def.id, col)).copied();
        let last = match known {
            Some(v) => v,
            None => self
                .scan_raw(def.id, &[])?
                .iter()
                .map(|(_, r)| auto_inc_of(r.get(col)))
                .max()
                .unwrap_or(0),
        };
        Ok(Some(last.saturating_add(1)))
    }

    /// An AUTO_INCREMENT column given a value: the next generated one comes after it.
    fn note_auto_inc(&self, def: &TableDef, col: usize, v: &Value) {
        let mut counters = self.engine.auto_inc_counters();
        if let Some(last) = counters.get_mut(&(def.id, col)) {
            *last = (*last).max(auto_inc_of(Some(v)));
        }
    }

    /// The first AUTO_INCREMENT value generated since the last call, if any (a statement's
    /// `LAST_INSERT_ID()`, as MySQL keeps it: the first of a multi-row INSERT).
    pub fn take_generated_id(&mut self) -> Option<u64> {
        self.generated_id.take()
    }

    /// INSERT of rows given as values for `columns`. Returns the rows inserted.
    pub fn insert(
        &mut self,
        def: &TableDef,
        columns: &[usize],
        rows: Vec<Vec<Value>>,
        mode: InsertMode,
    ) -> Result<u64> {
        self.check_writable()?;
        if let Some(ring) = &def.ring {
            for &c in columns {
                if c == ring.slot_column || c == ring.meta_column {
                    return Err(Error::not_allowed(&format!(
                        "Cannot specify {} column in INSERT on ring-buffer table",
                        def.columns[c].name
                    )));
                }
            }
            return self.insert_ring(def, columns, rows, mode, false);
        }
        let now = self.now_us();
        let mut inserted = 0;
        for (i, values) in rows.into_iter().enumerate() {
            let row = self.build_row(def, columns, values.into_iter(), i + 1, now, mode)?;
            let key = Key(def.key_of(&row));
            self.lock(def.id, &key)?;
            let existing = self.get_row(def.id, &key);
            let live = existing
                .as_ref()
                .is_some_and(|r| !self.is_expired(def, r, now));
            let dup = if live {
                Err(Error::dup_entry(
                    &dup_text(&key.0),
                    &format!("{}.PRIMARY", def.name),
                ))
            } else {
                self.check_unique_committed(def, &key, &row)
            };
            if let Err(e) = dup {
                if mode == InsertMode::Ignore && e.code == code::ER_DUP_ENTRY {
                    let msg = e.message.clone();
                    self.warn(code::ER_DUP_ENTRY, msg);
                    continue;
                }
                return Err(e);
            }
            let cause = if existing.is_some() {
                Cause::Overwrite
            } else {
                Cause::Insert
            };
            self.stage_write(def, &key, row, cause);
            inserted += 1;
        }
        Ok(inserted)
    }

    /// The ring protocol: each row takes its prefix's next slot; each prefix's meta row is
    /// read once (after locking it) and written once, after the statement's rows.
    fn insert_ring<R: IntoIterator<Item = Value, IntoIter: ExactSizeIterator>>(
        &mut self,
        def: &TableDef,
        columns: &[usize],
        rows: impl IntoIterator<Item = R>,
        mode: InsertMode,
        keep_unset: bool,
    ) -> Result<u64> {
        let ring = def
            .ring
            .clone()
            .ok_or_else(|| Error::internal("not a ring table"))?;
        let prefix_cols = def.prefix_columns();
        let now = self.now_us();
        // Each prefix's meta row key (the prefix, then slot 0), its hash, and the meta, as
        // the batch goes.
        let mut metas = std::mem::take(&mut self.spare.metas);
        metas.clear();
        let mut meta_index = std::mem::take(&mut self.spare.meta_index);
        meta_index.clear();
        let slot_zero = slot_value(def, 0);
        let mut inserted = 0;
        // The user columns an overwrite keeps (the native writer's, see below).
        let mut kept = std::mem::take(&mut self.spare.kept);
        kept.clear();
        let mut key = Key(std::mem::take(&mut self.spare.key));
        if keep_unset {
            kept.extend((0..def.columns.len()).filter(|c| {
                !columns.contains(c)
                    && *c != ring.slot_column
                    && *c != ring.meta_column
                    && !prefix_cols.contains(c)
            }));
        }
        for (i, values) in rows.into_iter().enumerate() {
            let mut row = self.build_row(def, columns, values.into_iter(), i + 1, now, mode)?;
            // Keys compare by the text collation: 'Bob' and 'bob' are one ring.
            let same_prefix = |k: &Key| {
                prefix_cols
                    .iter()
                    .zip(&k.0)
                    .all(|(&c, v)| row[c].total_cmp(v).is_eq())
            };
            let meta_hash = key_hash_iter(
                prefix_cols.len() + 1,
                prefix_cols
                    .iter()
                    .map(|&c| &row[c])
                    .chain(std::iter::once(&slot_zero)),
            );
            let at = match meta_index.find(meta_hash, |at| same_prefix(&metas[at].0)) {
                Some(at) => at,
                None => {
                    let meta_key = slot_key(def, prefix_cols.iter().map(|&c| &row[c]), 0);
                    debug_assert_eq!(meta_hash, key_hash(&meta_key.0));
                    self.lock_hashed(def.id, meta_hash)?;
                    // Only the meta column is read: a staged meta row is not copied.
                    let meta = self
                        .seen_hashed(
                            def.id,
                            &meta_key,
                            meta_hash,
                            |t| {
                                t.value(&meta_key, ring.meta_column)
                                    .as_ref()
                                    .and_then(meta_in)
                            },
                            |r| r.and_then(|r| meta_of(&ring, r)),
                        )
                        .unwrap_or_else(Meta::empty);
                    meta_index.push(meta_hash, metas.len());
                    metas.push((meta_key, meta_hash, meta));
                    metas.len() - 1
                }
            };
            let (slot, _) = metas[at].2.advance(ring.size);
            row[ring.slot_column] = slot_value(def, slot);
            row[ring.meta_column] = Value::Null;
            // The key in a vector kept from row to row, and its hash, computed once for the
            // lock, the look in the overlay and the staging.
            key.0.clear();
            key.0.extend(def.key_refs(&row).cloned());
            let hash = key_hash(&key.0);
            self.lock_hashed(def.id, hash)?;
            // Whether the slot is taken is all an SQL insert needs. The native writer's
            // overwrite is an update of the slot: the columns it leaves out keep the
            // overwritten row's values (the spec, NDB API), so it reads those.
            let overwrite = if kept.is_empty() {
                self.seen_hashed(def.id, &key, hash, |t| t.contains(&key), |r| r.is_some())
            } else {
                let old = self.seen_hashed(
                    def.id,
                    &key,
                    hash,
                    |t| t.get(&key).map(std::borrow::Cow::Owned),
                    |r| r.map(std::borrow::Cow::Borrowed),
                );
                match old {
                    Some(std::borrow::Cow::Borrowed(old)) => {
                        for &c in &kept {
                            row[c] = old[c].clone();
                        }
                        true
                    }
                    Some(std::borrow::Cow::Owned(mut old)) => {
                        for &c in &kept {
                            row[c] = std::mem::replace(&mut old[c], Value::Null);
                        }
                        true
                    }
                    None => false,
                }
            };
            let dup = self.check_unique_committed(def, &key, &row);
            if let Err(e) = dup {
                if mode == InsertMode::Ignore && e.code == code::ER_DUP_ENTRY {
                    self.txn().doomed = Some(Error::rolled_back_at_commit());
                    continue;
                }
                return Err(e);
            }
            let cause = if overwrite {
                Cause::Overwrite
            } else {
                Cause::Insert
            };
            self.stage_write_hashed(def, hash, row, cause);
            inserted += 1;
        }
        for (key, hash, meta) in metas.drain(..) {
            let row = meta_row(def, &key.0[..prefix_cols.len()], &meta);
            self.stage_write_hashed(def, hash, row, Cause::MetaUpdate);
        }
        self.spare.metas = metas;
        self.spare.meta_index = meta_index;
        self.spare.kept = kept;
        self.spare.key = key.0;
        Ok(inserted)
    }

    /// The native writer's batch insert into a ring (see `RingWriter`): rows of `columns`,
    /// columns left out keep the overwritten row's values.
    pub(crate) fn insert_native<R: IntoIterator<Item = Value, IntoIter: ExactSizeIterator>>(
        &mut self,
        def: &TableDef,
        columns: &[usize],
        rows: impl IntoIterator<Item = R>,
    ) -> Result<u64> {
        self.check_writable()?;
        self.insert_ring(def, columns, rows, InsertMode::Insert, true)
    }

    /// Deletes up to `max_n` of the oldest rows of one prefix: the `count` slots before the
    /// next slot, oldest first. The meta count drops by the rows deleted; later inserts fill
    /// the freed slots in order. Returns how many were deleted.
    pub fn delete_oldest(&mut self, def: &TableDef, prefix: &[Value], max_n: u32) -> Result<u32> {
        self.check_writable()?;
        let ring = def
            .ring
            .clone()
            .ok_or_else(|| Error::parameter("not a ring buffer table"))?;
        if def.ttl.is_some() {
            return Err(Error::new(
                code::NDB_DELETE_OLDEST_TTL,
                "deleteOldest is not supported on a ring buffer table with TTL",
            ));
        }
        if prefix.len() != def.prefix_columns().len() {
            return Err(Error::parameter(
                "the prefix must give every primary-key column but the slot",
            ));
        }
        let meta_key = slot_key(def, prefix.iter(), 0);
        self.lock(def.id, &meta_key)?;
        let Some(meta_row_now) = self.get_row(def.id, &meta_key) else {
            return Ok(0);
        };
        let Some(mut meta) = meta_of(&ring, &meta_row_now) else {
            return Err(Error::internal("meta row without a readable meta column"));
        };
        // The events name the rows as they are stored, not as the caller spelt the prefix
        // ('BOB' finds the ring of 'bob': keys compare by the text collation).
        let prefix: Vec<Value> = def
            .prefix_columns()
            .iter()
            .map(|&c| meta_row_now.get(c).cloned().unwrap_or(Value::Null))
            .collect();
        let meta_key = Key(def.key_of(&meta_row_now));
        let size = ring.size;
        let n = max_n.min(meta.count);
        let oldest = (meta.next_slot - 1 + size - meta.count) % size + 1;
        for k in 0..n {
            let slot = (oldest - 1 + k) % size + 1;
            let key = slot_key(def, prefix.iter(), slot);
            self.lock(def.id, &key)?;
            if let Some(row) = self.get_row(def.id, &key) {
                self.stage_delete(def, Key(def.key_of(&row)), Cause::DeleteOldest);
            }
        }
        meta.count -= n;
        let row = meta_row(def, &prefix, &meta);
        self.stage_write(def, &meta_key, row, Cause::MetaUpdate);
        Ok(n)
    }

    // ----- updates ----------------------------------------------------------------------

    /// UPDATE: `assigned` names the columns set; `compute` gives their new values for a
    /// matching row (in the order of `assigned`). Ring tables refuse slot, meta and other key
    /// columns, and meta rows are never seen.
    pub fn update(
        &mut self,
        def: &TableDef,
        assigned: &[usize],
        filter: &mut dyn FnMut(&Row) -> Result<bool>,
        compute: &mut dyn FnMut(&Row) -> Result<Vec<Value>>,
        limit: Option<u64>,
    ) -> Result<UpdateOutcome> {
        self.update_in(def, &[], assigned, filter, compute, limit)
    }

    /// [`Session::update`] of the rows whose primary key starts with `prefix` only: the
    /// caller knows its WHERE fixes those leading key columns, and only those rows are read.
    pub fn update_in(
        &mut self,
        def: &TableDef,
        prefix: &[Value],
        assigned: &[usize],
        filter: &mut dyn FnMut(&Row) -> Result<bool>,
        compute: &mut dyn FnMut(&Row) -> Result<Vec<Value>>,
        limit: Option<u64>,
    ) -> Result<UpdateOutcome> {
        self.check_writable()?;
        check_ring_assignments(def, assigned)?;
        let saved = self.vars.show_meta;
        self.vars.show_meta = false;
        let rows = self.scan(def, prefix);
        self.vars.show_meta = saved;
        let now = self.now_us();
        let mut out = UpdateOutcome::default();
        for old in rows? {
            if limit.is_some_and(|l| out.matched >= l) {
                break;
            }
            if !filter(&old)? {
                continue;
            }
            out.matched += 1;
            let old_key = Key(def.key_of(&old));
            let row_no = out.matched as usize;
            if self.update_one(def, old_key, assigned, compute, row_no, now)? {
                out.changed += 1;
            }
        }
        Ok(out)
    }

    /// Locks the row at `key` (as an UPDATE or DELETE does, waiting for another
    /// transaction's lock) and returns it as it is now, `None` when it is gone. What a
    /// statement computes from a row it read before the lock must be computed again from
    /// this one.
    pub fn lock_row(&mut self, def: &TableDef, key: &[Value]) -> Result<Option<Row>> {
        self.check_writable()?;
        let key = Key(key.to_vec());
        self.lock(def.id, &key)?;
        Ok(self.get_row(def.id, &key))
    }

    /// UPDATE of the one row whose primary key is `key`, a row the caller matched itself (the
    /// SQL layer, when its WHERE or its values need more than a closure can give: subqueries,
    /// triggers). `values` are the new values of `assigned`; `row_no` is the row's number in
    /// the statement, for messages. The checks are [`Session::update`]'s; a meta row or a row
    /// that is gone counts as matched and unchanged.
    pub fn update_row(
        &mut self,
        def: &TableDef,
        key: &[Value],
        assigned: &[usize],
        values: Vec<Value>,
        row_no: usize,
    ) -> Result<bool> {
        self.check_writable()?;
        check_ring_assignments(def, assigned)?;
        if def.is_meta_key(key) {
            return Ok(false);
        }
        let now = self.now_us();
        let mut values = Some(values);
        self.update_one(
            def,
            Key(key.to_vec()),
            assigned,
            &mut |_| Ok(values.take().unwrap_or_default()),
            row_no,
            now,
        )
    }

    /// Locks and updates the row at `old_key` with what `compute` gives for it; whether it
    /// changed.
    fn update_one(
        &mut self,
        def: &TableDef,
        old_key: Key,
        assigned: &[usize],
        compute: &mut dyn FnMut(&Row) -> Result<Vec<Value>>,
        row_no: usize,
        now: i64,
    ) -> Result<bool> {
        self.lock(def.id, &old_key)?;
        // Re-read after the lock: another transaction may have changed it meanwhile.
        let Some(old) = self.get_row(def.id, &old_key) else {
            return Ok(false);
        };
        let values = compute(&old)?;
        let mut new = old.clone();
        for (&c, v) in assigned.iter().zip(values) {
            let lenient = !self.vars.strict;
            let (v, note) = convert(v, &def.columns[c], row_no, self.vars.tz_offset, lenient)?;
            if let Some((c, m)) = note {
                self.warn(c, m);
            }
            new[c] = v;
        }
        if new == old {
            return Ok(false);
        }
        for (i, col) in def.columns.iter().enumerate() {
            if col.on_update_now && !assigned.contains(&i) {
                new[i] = default_value(
                    &binlog_format::schema::ColumnDef {
                        default: binlog_format::schema::ColumnDefault::CurrentTimestamp {
                            fsp: fsp_of(&col.ty),
                        },
                        ..col.clone()
                    },
                    now,
                    self.vars.tz_offset,
                )
                .unwrap_or(Value::Null);
            }
        }
        let new_key = Key(def.key_of(&new));
        if new_key != old_key {
            self.lock(def.id, &new_key)?;
            if self.get_row(def.id, &new_key).is_some() {
                return Err(Error::dup_entry(
                    &dup_text(&new_key.0),
                    &format!("{}.PRIMARY", def.name),
                ));
            }
        }
        {
            let st = self.engine.read();
            let table = st
                .tables
                .get(&def.id)
                .ok_or_else(|| Error::no_such_table(&def.database, &def.name))?;
            self.check_unique(table, &new_key, &new, Some(&old_key))?;
        }
        if new_key != old_key {
            self.stage_delete(def, old_key, Cause::Update);
            self.stage_write(def, &new_key, new, Cause::Update);
        } else if self.vars.log_update_as_write {
            self.stage_write(def, &new_key, new, Cause::Update);
        } else {
            let hash = key_hash(&new_key.0);
            let change = RowChange::Update {
                key: old_key.0,
                after: new,
                before: Some(old),
            };
            self.stage(
                def,
                hash,
                RowEvent {
                    table_id: def.id,
                    change,
                    cause: Cause::Update,
                },
            );
        }
        Ok(true)
    }

    // ----- deletes ----------------------------------------------------------------------

    /// DELETE of whole ring prefixes: each prefix's meta row is locked first, then its data
    /// rows (live ones; expired ones too with `ttl_expired_rows_visible_in_delete`) and the
    /// meta row are removed. Returns the rows removed, the meta row included (as RonDB counts).
    pub fn delete_prefixes(&mut self, def: &TableDef, prefixes: Vec<Vec<Value>>) -> Result<u64> {
        self.check_writable()?;
        if def.ring.is_none() {
            return Err(Error::internal(
                "delete_prefixes on a table that is not a ring",
            ));
        }
        let now = self.now_us();
        let mut seen: std::collections::HashSet<Key> = std::collections::HashSet::new();
        let mut deleted = 0;
        for prefix in prefixes {
            // One ring however many spellings of its prefix the WHERE lists (keys that
            // compare equal hash alike).
            if !seen.insert(Key(prefix.clone())) {
                continue;
            }
            let meta_key = slot_key(def, prefix.iter(), 0);
            self.lock(def.id, &meta_key)?;
            for (key, row) in self.scan_raw(def.id, &prefix)? {
                if key == meta_key {
                    continue;
                }
                if self.is_expired(def, &row, now) && !self.vars.ttl_expired_visible_in_delete {
                    continue;
                }
                self.lock(def.id, &key)?;
                self.stage_delete(def, key, Cause::PrefixDelete);
                deleted += 1;
            }
            // Logged under the meta row's stored key, not the WHERE's spelling of it.
            if let Some(meta_row) = self.get_row(def.id, &meta_key) {
                self.stage_delete(def, Key(def.key_of(&meta_row)), Cause::PrefixDelete);
                // RonDB counts the meta row among the affected rows.
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// DELETE on a plain table: every visible row that matches, up to `limit`.
    pub fn delete_where(
        &mut self,
        def: &TableDef,
        filter: &mut dyn FnMut(&Row) -> Result<bool>,
        limit: Option<u64>,
    ) -> Result<u64> {
        self.delete_where_in(def, &[], filter, limit)
    }

    /// [`Session::delete_where`] of the rows whose primary key starts with `prefix` only.
    pub fn delete_where_in(
        &mut self,
        def: &TableDef,
        prefix: &[Value],
        filter: &mut dyn FnMut(&Row) -> Result<bool>,
        limit: Option<u64>,
    ) -> Result<u64> {
        self.check_writable()?;
        if def.ring.is_some() {
            return Err(Error::internal("delete_where on a ring table"));
        }
        let mut deleted = 0;
        for row in self.scan(def, prefix)? {
            if limit.is_some_and(|l| deleted >= l) {
                break;
            }
            if !filter(&row)? {
                continue;
            }
            let key = Key(def.key_of(&row));
            self.lock(def.id, &key)?;
            self.stage_delete(def, key, Cause::Delete);
            deleted += 1;
        }
        Ok(deleted)
    }

    /// DELETE of the one row of a plain table whose primary key is `key`, a row the caller
    /// matched itself (see [`Session::update_row`]); how many rows it removed (0 when the
    /// row is gone).
    pub fn delete_row(&mut self, def: &TableDef, key: &[Value]) -> Result<u64> {
        self.check_writable()?;
        if def.ring.is_some() {
            return Err(Error::internal("delete_row on a ring table"));
        }
        let key = Key(key.to_vec());
        self.lock(def.id, &key)?;
        if self.get_row(def.id, &key).is_none() {
            return Ok(0);
        }
        self.stage_delete(def, key, Cause::Delete);
        Ok(1)
    }

    /// The last row the open transaction wrote into table `table` that is not a meta row
    /// (the row an INSERT just stored, with the slot or auto-increment value it was given).
    pub fn last_written_row(&self, table: u64) -> Option<Row> {
        let txn = self.txn.as_ref()?;
        txn.ops.iter().rev().find_map(|op| match op {
            Event::Row(RowEvent {
                table_id,
                change: RowChange::Write { row },
                cause,
            }) if *table_id == table && *cause != Cause::MetaUpdate => Some(row.clone()),
            _ => None,
        })
    }

    // ----- DDL --------------------------------------------------------------------------

    /// Runs DDL as its own transaction, after committing the open one (an implicit commit,
    /// as in MySQL). `rows` are row events logged with it (the rows a copying ALTER keeps).
    pub fn ddl(&mut self, ddl: DdlEvent, rows: Vec<Event>) -> Result<u64> {
        self.check_writable()?;
        self.commit()?;
        // A table changed by DDL starts its AUTO_INCREMENT counters from its rows again
        // (TRUNCATE starts over, as in MySQL).
        let changed = match &ddl {
            DdlEvent::AlterTable { table } => Some(table.id),
            DdlEvent::TruncateTable { table_id } | DdlEvent::DropTable { table_id, .. } => {
                Some(*table_id)
            }
            _ => None,
        };
        let drops_database = matches!(ddl, DdlEvent::DropDatabase { .. });
        let mut events = vec![Event::Ddl(ddl)];
        events.extend(rows);
        // The fence again, under the state's lock (see `Engine::set_fence`).
        let (engine, vars) = (&self.engine, &self.vars);
        let r = engine.commit_events(events, None, |_, _| fenced(engine, vars));
        let mut counters = self.engine.auto_inc_counters();
        if drops_database {
            counters.clear();
        } else if let Some(id) = changed {
            counters.retain(|(t, _), _| *t != id);
        }
        r
    }

    /// A fresh table id (system tables use their own range).
    pub(crate) fn allocate_table_id(&self, system: bool) -> u64 {
        let st = self.engine.read();
        let base = if system { SYSTEM_TABLE_ID_BASE } else { 1 };
        let max_used = st
            .tables
            .keys()
            .copied()
            .filter(|&id| (id >= SYSTEM_TABLE_ID_BASE) == system)
            .max();
        let next = max_used.map_or(base, |m| m + 1);
        if system {
            next
        } else {
            next.max(st.next_table_id)
        }
    }

    pub(crate) fn ensure_database(&mut self, name: &str) -> Result<()> {
        if self.engine.read().has_database(name) || self.engine.is_read_only() {
            return Ok(());
        }
        self.ddl(DdlEvent::CreateDatabase { name: name.into() }, vec![])?;
        Ok(())
    }

    // ----- the applier's raw path ---------------------------------------------------------

    fn check_privilege(&self, def: &TableDef) -> Result<()> {
        if def.ring.is_some() && !self.vars.applier {
            return Err(Error::direct_write());
        }
        Ok(())
    }

    /// Writes a full row directly (an upsert), bypassing the ring protocol. Ring tables
    /// need the applier privilege (error 940 otherwise, nothing changed).
    pub fn raw_write(&mut self, def: &TableDef, row: Row) -> Result<()> {
        self.check_privilege(def)?;
        if row.len() != def.columns.len() {
            return Err(Error::parameter(&format!(
                "row has {} values, table has {} columns",
                row.len(),
                def.columns.len()
            )));
        }
        self.statement(|s| {
            let key = Key(def.key_of(&row));
            s.lock(def.id, &key)?;
            s.stage_write(def, &key, row, Cause::Insert);
            Ok(())
        })
    }

    /// Deletes a row by primary key directly; deleting an absent row is not an error.
    pub fn raw_delete(&mut self, def: &TableDef, key: Vec<Value>) -> Result<()> {
        self.check_privilege(def)?;
        self.statement(|s| {
            let key = Key(key);
            s.lock(def.id, &key)?;
            s.stage_delete(def, key, Cause::Delete);
            Ok(())
        })
    }

    /// Commits a replicated transaction's events as they are, with `extra` events (the apply
    /// position) in the same commit, logged with `origin`. Needs the applier privilege.
    pub fn apply_replicated(
        &mut self,
        events: Vec<Event>,
        extra: Vec<Event>,
        origin: binlog_format::Origin,
    ) -> Result<u64> {
        let (seq, lsn) = self.apply_replicated_nowait(events, extra, origin)?;
        self.engine.wait_durable(lsn)?;
        Ok(seq)
    }

    /// As [`Session::apply_replicated`] without waiting: returns (seq, lsn) for a later
    /// [`Engine::wait_durable`]. Rows and position are still one record, so a crash before
    /// the sync loses both together.
    pub fn apply_replicated_nowait(
        &mut self,
        events: Vec<Event>,
        extra: Vec<Event>,
        origin: binlog_format::Origin,
    ) -> Result<(u64, u64)> {
        if !self.vars.applier {
            return Err(Error::direct_write());
        }
        self.commit()?;
        let mut all = events;
        all.extend(extra);
        self.engine
            .commit_events_nowait(all, Some(origin), validate_replicated)
    }
}

fn fsp_of(ty: &ColumnType) -> u8 {
    match ty {
        ColumnType::Timestamp { fsp } | ColumnType::DateTime { fsp } => *fsp,
        _ => 0,
    }
}

/// The meta row of a prefix: key, slot 0, the 32 meta bytes, TTL column at its maximum,
/// other nullable columns NULL and NOT NULL ones at their type's zero (0, '', ...), never
/// their DEFAULT, as RonDB writes them (its recordings show `0` for an `INT NOT NULL
/// DEFAULT 99`). Meta rows written before kept the DEFAULT; they read as stored and take
/// the zero at their prefix's next insert.
pub(crate) fn meta_row(def: &TableDef, prefix: &[Value], meta: &Meta) -> Row {
    let ring = def.ring.as_ref();
    let mut row: Row = def
        .columns
        .iter()
        .map(|c| {
            if c.nullable {
                Value::Null
            } else {
                zero_value(&c.ty)
            }
        })
        .collect();
    for (&c, v) in def.prefix_columns().iter().zip(prefix) {
        row[c] = v.clone();
    }
    if let Some(r) = ring {
        row[r.slot_column] = slot_value(def, 0);
        row[r.meta_column] = Value::Bytes(meta.encode());
    }
    if let Some(ttl) = &def.ttl {
        row[ttl.column] = ttl_max(&def.columns[ttl.column].ty);
    }
    row
}

/// Commit-time check: a unique value written by this transaction must not be held, in what
/// committed meanwhile, by a row this transaction did not touch.
fn validate_uniques(st: &State, ops: &[Event], overlay: &Overlay) -> Result<()> {
    for (at, ev) in ops.iter().enumerate() {
        let Event::Row(RowEvent {
            table_id, change, ..
        }) = ev
        else {
            continue;
        };
        let row = match change {
            RowChange::Write { row } | RowChange::Update { after: row, .. } => row,
            RowChange::Delete { .. } => continue,
        };
        let Some(table) = st.tables.get(table_id) else {
            return Err(Error::new(
                code::ER_NO_SUCH_TABLE,
                "Table was dropped while the transaction was open",
            ));
        };
        if table.unique_indexes().next().is_none() {
            continue;
        }
        let key = table.key_of(row);
        if table.is_meta_key(&key) {
            continue;
        }
        // Only the final version of each row counts.
        if overlay.get(ops, *table_id, &key.0, key_hash(&key.0)) != Some(at) {
            continue;
        }
        for idx in table.unique_indexes() {
            let Some(v) = table.unique_value(idx, row) else {
                continue;
            };
            if let Some(holder) = table.unique_holder(idx, &v) {
                let touched = overlay.contains(ops, *table_id, holder);
                if *holder != key && !touched {
                    return Err(Error::dup_entry(
                        &dup_text(&v.0),
                        &format!("{}.{}", table.def.name, table.def.indexes[idx].name),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Checks that every row event of a replicated transaction names a table that exists (or is
/// created earlier in it) with the right width, so applying cannot fail after logging.
fn validate_replicated(st: &State, events: &[Event]) -> Result<()> {
    // Widths the transaction's own DDL set (None: dropped), latest last; nearly every
    // transaction has none and looks its tables up in the state alone (a map of every
    // table's width built per transaction was one of a replica's allocations per write, and
    // grew with the number of tables).
    let mut by_ddl: Vec<(u64, Option<usize>)> = Vec::new();
    for ev in events {
        match ev {
            Event::Ddl(DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table }) => {
                by_ddl.push((table.id, Some(table.columns.len())));
            }
            Event::Ddl(DdlEvent::DropTable { table_id, .. }) => {
                by_ddl.push((*table_id, None));
            }
            Event::Ddl(_) => {}
            Event::Row(r) => {
                let width = match by_ddl.iter().rev().find(|(id, _)| *id == r.table_id) {
                    Some(&(_, width)) => width,
                    None => st.tables.get(&r.table_id).map(|t| t.def.columns.len()),
                };
                let width = &width.ok_or_else(|| {
                    Error::internal(format!(
                        "replicated row for unknown table id {}",
                        r.table_id
                    ))
                })?;
                let ok = match &r.change {
                    RowChange::Write { row } => row.len() == *width,
                    RowChange::Update { after, .. } => after.len() == *width,
                    RowChange::Delete { .. } => true,
                };
                if !ok {
                    return Err(Error::internal(format!(
                        "replicated row for table id {} has the wrong number of columns",
                        r.table_id
                    )));
                }
            }
        }
    }
    Ok(())
}

/// An AUTO_INCREMENT column's value as a counter (0 for NULL or a negative value).
fn auto_inc_of(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::Int(i)) => u64::try_from(*i).unwrap_or(0),
        Some(Value::UInt(u)) => *u,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use binlog_format::{SyncPolicy, Value};

    use crate::fixtures::{insert_p, insert_r, sample_engine};

    /// Metas whose hashes collide stay apart: each is found by its own key.
    #[test]
    fn meta_index_keeps_colliding_hashes_apart() {
        let mut index = super::MetaIndex::default();
        let keys = ["a", "b", "c", "d"];
        // a, b and d share hash 7; c has its own.
        for (at, hash) in [7u64, 7, 9, 7].into_iter().enumerate() {
            index.push(hash, at);
        }
        for (at, key) in keys.iter().enumerate() {
            let hash = if *key == "c" { 9 } else { 7 };
            assert_eq!(index.find(hash, |i| keys[i] == *key), Some(at), "{key}");
        }
        assert_eq!(index.find(7, |i| keys[i] == "c"), None);
        assert_eq!(index.find(8, |_| true), None);
        index.clear();
        assert_eq!(index.find(7, |_| true), None);
    }

    /// A statement's changes come with the row before each (from the committed table, or
    /// from an earlier statement of the transaction), a key change as one change, ring meta
    /// rows and unwanted tables left out.
    #[test]
    fn changes_since_gives_each_change_with_its_before_image() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_engine, mut s) = sample_engine(dir.path(), SyncPolicy::Never);
        insert_p(&mut s, 1, "one");
        insert_p(&mut s, 2, "two");
        let p = s.table_def(Some("d"), "p").expect("p");
        let r = s.table_def(Some("d"), "r").expect("r");
        let row = |id: i64, v: &str| vec![Value::Int(id), Value::Text(v.into())];
        s.vars.autocommit = false;
        // An earlier statement of the transaction.
        s.statement(|s| {
            s.update_row(
                &p,
                &[Value::Int(1)],
                &[1],
                vec![Value::Text("uno".into())],
                1,
            )
        })
        .expect("update");
        s.begin_statement();
        let mark = s.staged_len();
        s.update_row(
            &p,
            &[Value::Int(1)],
            &[1],
            vec![Value::Text("eins".into())],
            1,
        )
        .expect("update again");
        s.update_row(&p, &[Value::Int(2)], &[0], vec![Value::Int(20)], 1)
            .expect("key change");
        s.delete_row(&p, &[Value::Int(20)]).expect("delete");
        s.insert(
            &p,
            &[0, 1],
            vec![row(3, "three")],
            super::InsertMode::Insert,
        )
        .expect("insert");
        s.insert(
            &r,
            &[0, 3],
            vec![vec![Value::Int(5), Value::Text("ring".into())]],
            super::InsertMode::Insert,
        )
        .expect("ring insert");
        let all = s.changes_since(mark, &|_| true);
        let only_p = s.changes_since(mark, &|id| id == p.id);
        s.end_statement(Ok(())).expect("end");
        let change = |before: Option<Vec<Value>>, after: Option<Vec<Value>>| super::StagedChange {
            table_id: p.id,
            before,
            after,
        };
        let expected = vec![
            change(Some(row(1, "uno")), Some(row(1, "eins"))),
            change(Some(row(2, "two")), Some(row(20, "two"))),
            change(Some(row(20, "two")), None),
            change(None, Some(row(3, "three"))),
        ];
        assert_eq!(only_p, expected);
        // The ring's data row is there, its meta row is not.
        assert_eq!(all.len(), expected.len() + 1);
        assert_eq!(all[4].table_id, r.id);
        assert!(all[4].before.is_none());
        s.rollback();
    }

    #[test]
    fn without_lock_waits_a_held_row_fails_the_statement_and_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, mut a) = sample_engine(dir.path(), SyncPolicy::Never);
        insert_r(&mut a, 7, "kept");
        let r = a.table_def(Some("d"), "r").expect("r");
        let row = |v: &str| vec![vec![Value::Int(7), Value::Text(v.into())]];
        let insert = |s: &mut super::Session, v: &str| {
            s.statement(|s| s.insert(&r, &[0, 3], row(v), super::InsertMode::Insert))
        };
        a.begin().expect("begin");
        insert(&mut a, "a").expect("a holds ring 7");
        let mut b = engine.session();
        b.lock_wait = false;
        // In autocommit and inside a transaction (whose earlier rows stay).
        let e = insert(&mut b, "b").expect_err("ring 7 is locked");
        assert!(e.is_would_wait(), "{e:?}");
        assert!(!b.in_transaction(), "autocommit: nothing left open");
        b.begin().expect("begin");
        insert_r(&mut b, 8, "b8");
        let e = insert(&mut b, "b").expect_err("ring 7 is locked");
        assert!(e.is_would_wait(), "{e:?}");
        assert!(b.in_transaction(), "only the statement failed");
        a.commit().expect("commit a");
        insert(&mut b, "b").expect("free now");
        b.commit().expect("commit b");
        let values = |u: i64| -> Vec<Value> {
            let rows = a.scan(&r, &[Value::Int(u)]).expect("scan");
            rows.iter().map(|row| row[3].clone()).collect()
        };
        let text = |v: &str| Value::Text(v.into());
        assert_eq!(values(7), [text("kept"), text("a"), text("b")]);
        assert_eq!(values(8), [text("b8")]);
    }

    /// A replicated row must fit its table as the state has it, or as the same
    /// transaction's DDL left it (created, altered, dropped).
    #[test]
    fn replicated_rows_are_checked_against_the_tables_they_will_meet() {
        use binlog_format::{Cause, DdlEvent, Event, RowChange, RowEvent};
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, s) = sample_engine(dir.path(), SyncPolicy::Never);
        let p = s.table_def(Some("d"), "p").expect("p");
        let width = p.columns.len();
        let row = |table_id: u64, n: usize| {
            Event::Row(RowEvent {
                table_id,
                change: RowChange::Write {
                    row: vec![Value::Int(1); n],
                },
                cause: Cause::Insert,
            })
        };
        let mut created = p.clone();
        created.id = 9_999;
        created.name = "new".into();
        let mut altered = created.clone();
        altered.columns.pop();
        let create = Event::Ddl(DdlEvent::CreateTable {
            table: created.clone(),
        });
        let alter = Event::Ddl(DdlEvent::AlterTable { table: altered });
        let drop = Event::Ddl(DdlEvent::DropTable {
            table_id: created.id,
            database: "d".into(),
            name: "new".into(),
        });
        let check =
            |events: Vec<Event>| engine.with_state(|st| super::validate_replicated(st, &events));
        check(vec![row(p.id, width)]).expect("fits p");
        check(vec![row(p.id, width + 1)]).expect_err("too wide for p");
        check(vec![row(created.id, width)]).expect_err("no such table yet");
        check(vec![create.clone(), row(created.id, width)]).expect("created first");
        check(vec![
            create.clone(),
            alter.clone(),
            row(created.id, width - 1),
        ])
        .expect("altered");
        check(vec![create.clone(), alter, row(created.id, width)]).expect_err("as it was");
        check(vec![create, drop, row(created.id, width)]).expect_err("dropped");
    }

    #[test]
    fn a_read_past_the_budget_fails_and_one_within_it_is_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_engine, mut s) = sample_engine(dir.path(), SyncPolicy::Never);
        for k in 1..=5 {
            insert_p(&mut s, k, "v");
        }
        let p = s.table_def(Some("d"), "p").expect("p");
        s.read_budget = Some(5);
        assert_eq!(s.scan(&p, &[]).expect("five rows fit").len(), 5);
        assert_eq!(s.scan(&p, &[Value::Int(3)]).expect("one row").len(), 1);
        s.read_budget = Some(4);
        let e = s.scan(&p, &[]).expect_err("five would be read");
        assert!(e.is_would_wait(), "{e:?}");
        s.read_budget = None;
        assert_eq!(s.scan(&p, &[]).expect("no budget").len(), 5);
    }

    /// A page holds at most `cap` rows after its bound, in key order, as `scan` sees them
    /// (meta rows only with `show_meta`); walking pages from the last key of each gives the
    /// table, and a transaction that changed the table is sent to the whole read.
    #[test]
    fn pages_hold_at_most_their_rows_after_the_bound() {
        use std::ops::Bound;
        let dir = tempfile::tempdir().expect("tempdir");
        let (_engine, mut s) = sample_engine(dir.path(), SyncPolicy::Never);
        for k in 1..=7 {
            insert_p(&mut s, k, "v");
        }
        for u in [3, 1, 2] {
            insert_r(&mut s, u, "x");
            insert_r(&mut s, u, "y");
        }
        let p = s.table_def(Some("d"), "p").expect("p");
        let r = s.table_def(Some("d"), "r").expect("r");
        let page = |s: &super::Session, def, lower: Bound<&[Value]>, cap| {
            s.scan_page(def, lower, cap)
                .expect("page")
                .expect("no changes")
        };
        let ids = |rows: Vec<Vec<Value>>| -> Vec<Value> {
            rows.into_iter().map(|r| r[0].clone()).collect()
        };
        assert_eq!(
            ids(page(&s, &p, Bound::Unbounded, 3)),
            [1, 2, 3].map(Value::Int)
        );
        assert_eq!(
            ids(page(&s, &p, Bound::Excluded(&[Value::Int(3)]), 3)),
            [4, 5, 6].map(Value::Int)
        );
        assert_eq!(
            ids(page(&s, &p, Bound::Included(&[Value::Int(6)]), 3)),
            [6, 7].map(Value::Int)
        );
        assert!(page(&s, &p, Bound::Excluded(&[Value::Int(7)]), 3).is_empty());
        // Walking the ring table page by page gives what one scan gives, meta rows or not.
        for show_meta in [false, true] {
            s.vars.show_meta = show_meta;
            let whole = s.scan(&r, &[]).expect("scan");
            for cap in 1..=4 {
                let mut walked: Vec<Vec<Value>> = Vec::new();
                loop {
                    let key: Option<Vec<Value>> = walked.last().map(|row| r.key_of(row));
                    let lower = key.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
                    let got = page(&s, &r, lower, cap);
                    assert!(got.len() <= cap);
                    let done = got.len() < cap;
                    walked.extend(got);
                    if done {
                        break;
                    }
                }
                assert_eq!(
                    walked, whole,
                    "pages of {cap}, meta rows shown: {show_meta}"
                );
            }
        }
        // A key prefix as the bound: every key under it is after it.
        s.vars.show_meta = false;
        assert_eq!(
            page(&s, &r, Bound::Excluded(&[Value::Int(2)]), 10).len(),
            4,
            "rings 2 and 3, two rows each"
        );
        s.begin().expect("begin");
        insert_p(&mut s, 8, "new");
        assert_eq!(s.scan_page(&p, Bound::Unbounded, 3).expect("page"), None);
        assert!(s
            .scan_page(&r, Bound::Unbounded, 3)
            .expect("page")
            .is_some());
        s.rollback();
    }

    /// `checksum` reads a table a page of the state at a time: over more rows than a page it
    /// gives the count and CRC32C of one pass over what `scan` shows, meta rows as
    /// `show_meta` says; inside a transaction that changed the table, of what it sees.
    #[test]
    fn checksums_cover_every_visible_row_across_pages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_engine, mut s) = sample_engine(dir.path(), SyncPolicy::Never);
        let rows = super::CHECKSUM_PAGE_ROWS * 2 + 17;
        s.begin().expect("begin");
        for k in 1..=rows {
            insert_p(&mut s, k as i64, "v");
        }
        s.commit().expect("commit");
        for u in 1..=3 {
            insert_r(&mut s, u, "x");
        }
        let p = s.table_def(Some("d"), "p").expect("p");
        let r = s.table_def(Some("d"), "r").expect("r");
        let one_pass = |s: &super::Session, def: &binlog_format::schema::TableDef| {
            let seen = s.scan(def, &[]).expect("scan");
            let mut buf = Vec::new();
            let crc = seen.iter().fold(0u32, |crc, row| {
                buf.clear();
                binlog_format::codec::encode_row_into(row, &mut buf);
                crc32c::crc32c_append(crc, &buf)
            });
            (seen.len() as u64, crc)
        };
        assert_eq!(s.checksum(&p).expect("checksum"), one_pass(&s, &p));
        assert_eq!(s.checksum(&p).expect("checksum").0, rows as u64);
        for show_meta in [false, true] {
            s.vars.show_meta = show_meta;
            let sums = s.checksum(&r).expect("checksum");
            assert_eq!(sums.0, if show_meta { 6 } else { 3 });
            assert_eq!(sums, one_pass(&s, &r));
        }
        s.vars.show_meta = false;
        let before = s.checksum(&p).expect("checksum");
        s.begin().expect("begin");
        insert_p(&mut s, rows as i64 + 1, "new");
        let inside = s.checksum(&p).expect("checksum");
        assert_eq!(inside, one_pass(&s, &p));
        assert_eq!(inside.0, rows as u64 + 1);
        s.rollback();
        assert_eq!(s.checksum(&p).expect("checksum"), before);
    }

    #[test]
    fn one_row_updates_and_deletes_keep_the_statement_rules() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_engine, mut s) = sample_engine(dir.path(), SyncPolicy::Never);
        insert_p(&mut s, 1, "a");
        insert_r(&mut s, 7, "x");
        let p = s.table_def(Some("d"), "p").expect("p");
        let r = s.table_def(Some("d"), "r").expect("r");
        s.begin_statement();
        let changed = s
            .update_row(&p, &[Value::Int(1)], &[1], vec![Value::Text("b".into())], 1)
            .expect("update");
        assert!(changed);
        assert!(!s
            .update_row(&p, &[Value::Int(1)], &[1], vec![Value::Text("b".into())], 1)
            .expect("same value"));
        // A ring's slot stays the engine's, a meta row is never the statement's.
        let e = s
            .update_row(
                &r,
                &[Value::Int(7), Value::Int(1)],
                &[1],
                vec![Value::Int(2)],
                1,
            )
            .expect_err("slot");
        assert_eq!(e.code, 1031);
        assert!(!s
            .update_row(
                &r,
                &[Value::Int(7), Value::Int(0)],
                &[3],
                vec![Value::Text("m".into())],
                1
            )
            .expect("meta row"));
        assert!(s.delete_row(&r, &[Value::Int(7), Value::Int(1)]).is_err());
        assert_eq!(s.delete_row(&p, &[Value::Int(1)]).expect("delete"), 1);
        assert_eq!(s.delete_row(&p, &[Value::Int(1)]).expect("gone"), 0);
        s.end_statement(Ok(())).expect("commit");
        assert!(s.scan(&p, &[]).expect("scan").is_empty());
    }

    #[test]
    fn the_last_written_row_has_the_slot_the_ring_gave() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_engine, mut s) = sample_engine(dir.path(), SyncPolicy::Never);
        let r = s.table_def(Some("d"), "r").expect("r");
        s.begin().expect("begin");
        for v in ["a", "b"] {
            s.insert(
                &r,
                &[0, 3],
                vec![vec![Value::Int(5), Value::Text(v.into())]],
                crate::InsertMode::Insert,
            )
            .expect("insert");
        }
        let row = s.last_written_row(r.id).expect("a row");
        assert_eq!(row[1], Value::Int(2));
        assert_eq!(row[3], Value::Text("b".into()));
        s.rollback();
        assert!(s.last_written_row(r.id).is_none());
    }
}
