//! The SQL front end of ringrep: MySQL statements, parsed with sqlparser's MySQL dialect,
//! run against the ring engine ([`ringrep_engine`]). Ring buffer tables (a table whose
//! `COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=n'` keeps only the newest `n` rows of each primary-key
//! prefix) follow the statement rules of RonDB's; plain tables behave as in MySQL.
//!
//! A few MySQL forms that sqlparser does not parse are handled here before it sees the text:
//! double-quoted strings (MySQL's default treats them as strings), `PARTITION BY` after CREATE
//! TABLE, the table-option clauses of ALTER TABLE (COMMENT, ENGINE, ALGORITHM, partitioning)
//! and LOAD DATA.
//!
//! # Starting points
//!
//! - [`SqlSession`]: one client's session on an [`Engine`](ringrep_engine::Engine).
//!   [`SqlSession::execute`] runs one statement, [`SqlSession::execute_all`] a script,
//!   [`SqlSession::execute_bound`] a statement whose `?` placeholders take values (the
//!   server's prepared statements).
//! - [`Outcome`]: what a statement produced: rows ([`ResultSet`]), a count of affected rows,
//!   or nothing.
//! - [`ResultSet`]: column names, declared types and values; [`ResultSet::text_rows`] gives
//!   the rows as the `mysql` client prints them.
//! - [`split_statements`] splits a script at its `;`s; [`count_placeholders`] and
//!   [`bind_placeholders`] handle `?` placeholders in statement text.
//! - Errors are [`ringrep_engine::Error`]s carrying MySQL's error code and SQLSTATE;
//!   [`client_error_line`] formats one as the `mysql` client prints it.
//!
//! # Example
//!
//! A ring table keeps the newest three rows of each prefix: a fourth insert for user 7
//! replaces the oldest.
//!
//! ```
//! use ringrep_sql::{Outcome, SqlSession};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let (engine, _) =
//!     ringrep_engine::Engine::open(dir.path(), ringrep_engine::EngineConfig::new(1))?;
//! let mut sql = SqlSession::new(&engine);
//! sql.execute(
//!     "CREATE TABLE test.events (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
//!      ring_meta VARBINARY(64), payload VARCHAR(32), PRIMARY KEY (user_id, ring_idx)) \
//!      COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'",
//! )?;
//! for n in 1..=4 {
//!     sql.execute(&format!(
//!         "INSERT INTO test.events (user_id, payload) VALUES (7, 'event {n}')"
//!     ))?;
//! }
//! let Outcome::Rows(rs) =
//!     sql.execute("SELECT payload FROM test.events WHERE user_id = 7 ORDER BY payload")?
//! else {
//!     panic!("a SELECT returns rows");
//! };
//! let payloads: Vec<String> = rs.text_rows().into_iter().flatten().flatten().collect();
//! assert_eq!(payloads, ["event 2", "event 3", "event 4"]);
//! # Ok(())
//! # }
//! ```
//!
//! # Inside
//!
//! The crate is built in floors, each a folder that imports only the floors below it:
//! `parse` (statement text) and `table` (the shapes of tables and rows) at the bottom with
//! `accounts` (privileges and their storage); `expr` (values and expressions); `objects`
//! (views, triggers, stored routines, engines); `catalog` (information_schema and SHOW);
//! `exec` (each kind of statement); `session` (the entry points, on top). This file holds
//! [`SqlSession`]'s state, to which each floor adds the methods of its statements.

mod accounts;
mod catalog;
mod exec;
mod expr;
mod objects;
mod parse;
mod session;
mod table;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use binlog_format::Value;

use ringrep_engine::error::Error;
use ringrep_engine::Session;

pub use accounts::store::{Cache as AccountCache, Directory as AccountDirectory};
pub use accounts::{store, AccountName, Authority, Grants, Privs};
pub use catalog::show::{mysql_binlog, position_error, NODE_OWN};
pub use expr::result::{Outcome, ResultSet};
pub use expr::server_version;
pub use parse::lexer::{bind_placeholders, count_placeholders, split_statements};

use expr::memo::Memo;
use parse::prepared::Parsed;
use table::computed::CteScope;
use table::rows::Rows;

/// An owned copy of what expressions see (see `SqlSession::owned_ctx`).
pub(crate) struct OwnedCtx {
    authority: Option<Authority>,
    connection_id: u64,
    now_us: i64,
    tz: i64,
    user_vars: HashMap<String, Value>,
    database: Option<String>,
    last_insert_id: u64,
    last: expr::LastStatement,
    /// The statement's subqueries, run before it started changing rows.
    subqueries: HashMap<String, Arc<Rows>>,
    /// As [`expr::Ctx::strict`].
    strict: bool,
    /// As [`expr::Ctx::zero_division_errors`].
    zero_division_errors: bool,
    /// As [`expr::Ctx::set_insert_id`]: the session's.
    set_insert_id: Arc<std::sync::Mutex<Option<u64>>>,
    /// As [`expr::Ctx::warnings`]: the session's, so an UPDATE's warnings are said too.
    warnings: Arc<std::sync::Mutex<expr::Warnings>>,
}

impl OwnedCtx {
    /// The evaluation context over this copy: no session, so subqueries come from those run
    /// beforehand.
    pub(crate) fn ctx(&self) -> expr::Ctx<'_> {
        expr::Ctx {
            sql: None,
            prefetched: Some(&self.subqueries),
            now_us: self.now_us,
            tz: self.tz,
            user_vars: &self.user_vars,
            database: self.database.as_deref(),
            last_insert_id: self.last_insert_id,
            last: self.last,
            authority: self.authority.as_ref(),
            connection_id: self.connection_id,
            inserted: None,
            outer: None,
            strict: self.strict,
            zero_division_errors: self.zero_division_errors,
            warnings: Some(&self.warnings),
            set_insert_id: &self.set_insert_id,
        }
    }
}

/// What a server adds to SHOW STATUS: its connections, statements and uptime, by MySQL's
/// names (the engine's own counters come from the SQL layer).
pub trait ServerStatus: Send + Sync {
    /// The server's status variables and their values now.
    fn status(&self) -> Vec<(String, String)>;
}

/// A client session speaking SQL: the engine session it runs statements in, with what SQL
/// adds to it (user variables, `LAST_INSERT_ID()`, prepared statements).
pub struct SqlSession {
    /// The engine session: its variables (`vars`: current database, autocommit, time zone,
    /// ...), its open transaction and its warnings.
    pub session: Session,
    /// User variables (`@name`), by lower-case name.
    pub(crate) user_vars: HashMap<String, Value>,
    /// The value `LAST_INSERT_ID()` returns and the OK packet reports.
    pub last_insert_id: u64,
    /// What the previous statement did (ROW_COUNT(), FOUND_ROWS()).
    /// The rows a `SELECT SQL_CALC_FOUND_ROWS` would have given without its LIMIT, for
    /// FOUND_ROWS() after it.
    calc_found_rows: Option<u64>,
    last: expr::LastStatement,
    /// Set when the running statement took or gave back a user-level lock: it must not be
    /// run again (see [`SqlSession::may_run_again`]).
    took_user_lock: std::sync::atomic::AtomicBool,
    /// Base directory for relative `LOAD DATA INFILE` paths.
    pub load_dir: Option<std::path::PathBuf>,
    /// PREPAREd statements by name.
    prepared: HashMap<String, String>,
    /// Protocol-prepared statement texts, parsed (see `bound`).
    parsed: HashMap<String, Parsed>,
    /// Results of the uncorrelated subqueries of the running statement, by their text: a
    /// subquery in a WHERE clause would otherwise run once per outer row.
    subqueries: Mutex<HashMap<String, Arc<Rows>>>,
    /// Results of the correlated subqueries of the running statement, by their text, then by
    /// the outer values they read (see `SqlSession::run_subquery_in`).
    correlated: Mutex<HashMap<String, Memo>>,
    /// While a subquery runs: the rows of the queries around it, which its column references
    /// reach (innermost first).
    outer: Mutex<Option<Arc<expr::OuterRow>>>,
    /// The common table expressions in scope while a statement runs (`cte`).
    ctes: Mutex<CteScope>,
    /// `foreign_key_checks`: whether FOREIGN KEY constraints are checked and carried out
    /// (`exec::foreign_keys`).
    pub(crate) foreign_key_checks: bool,
    /// `cte_max_recursion_depth`: the rounds a recursive common table expression may run.
    pub cte_max_recursion_depth: u64,
    /// `lock_wait_timeout` in seconds: how long LOCK TABLES (and FLUSH TABLES ... WITH READ
    /// LOCK) waits for other sessions' table locks, as MySQL's metadata locks wait; the
    /// smaller of it and `innodb_lock_wait_timeout` bounds the wait (see `table_lock`).
    pub(crate) lock_wait_timeout: u64,
    /// `ringrep_checksum_rows`: CHECKSUM TABLE also gives each table's row count
    /// (`exec/checksum.rs`).
    pub(crate) checksum_rows: bool,
    /// Who the session runs as; `None` (a session without a server) holds every privilege.
    pub authority: Option<Authority>,
    /// An INSERT or UPDATE without IGNORE runs: what it evaluates, it writes (see
    /// [`expr::Ctx::strict`]).
    strict_write: bool,
    /// `@@sql_mode` as SET gave it (MySQL's spelling and order; see `vars::parse_sql_mode`).
    sql_mode: String,
    /// `sql_mode` has ERROR_FOR_DIVISION_BY_ZERO (see [`expr::Ctx::zero_division_errors`]).
    zero_division_errors: bool,
    /// Warnings of the running statement's expressions (division by zero, a string read in
    /// part), moved to the session's warnings when it ends.
    expr_warnings: Arc<std::sync::Mutex<expr::Warnings>>,
    /// What `LAST_INSERT_ID(expr)` set in the running statement (see
    /// [`expr::Ctx::set_insert_id`]); shared with the statement's owned contexts.
    set_insert_id: Arc<std::sync::Mutex<Option<u64>>>,
    /// The client set `CLIENT_FOUND_ROWS`: ROW_COUNT() then gives what its OK packets give,
    /// the rows an UPDATE matched ([`Outcome::rows_matched`]).
    pub client_found_rows: bool,
    /// The server's connection id (`CONNECTION_ID()`); 1 without a server.
    pub connection_id: u64,
    /// The server's `net_write_timeout` in seconds (`SELECT @@net_write_timeout`); 60, MySQL's
    /// default, without a server.
    pub net_write_timeout: u64,
    /// The port the server listens on (`@@port`); 0 without a server.
    pub port: u16,
    /// The server's connection limit (`@@max_connections`); 151, MySQL's default, without one.
    pub max_connections: u64,
    /// What the server adds to SHOW STATUS; `None` without a server.
    pub server_status: Option<Arc<dyn ServerStatus>>,
    /// This session as the owner of table locks (`table_lock`).
    lock_owner: u64,
    /// The table locks LOCK TABLES took for this session, until it gives them back.
    table_locks: Vec<(
        ringrep_engine::table_locks::TableKey,
        ringrep_engine::table_locks::LockMode,
    )>,
    /// The last statement's error (code, message), for SHOW WARNINGS and SHOW ERRORS.
    last_error: Option<(u16, String)>,
    /// How many CALLs are running, one inside the other.
    call_depth: usize,
    /// The tables whose statements are running triggers, outermost first (`triggers`): a
    /// statement of a trigger runs inside the statement that fired it.
    trigger_tables: Vec<(String, String)>,
    /// How many views are being read, one inside the other.
    view_depth: std::sync::atomic::AtomicUsize,
}

impl Drop for SqlSession {
    /// A session's table locks and user-level locks end with it, as a closed connection's
    /// do in MySQL.
    fn drop(&mut self) {
        self.release_table_locks();
        self.engine().named_locks().release_all(self.lock_owner);
    }
}

impl std::fmt::Debug for SqlSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut prepared: Vec<&String> = self.prepared.keys().collect();
        prepared.sort();
        f.debug_struct("SqlSession")
            .field("vars", &self.session.vars)
            .field("in_transaction", &self.session.in_transaction())
            .field("user_vars", &self.user_vars)
            .field("last_insert_id", &self.last_insert_id)
            .field("load_dir", &self.load_dir)
            .field("prepared", &prepared)
            .finish_non_exhaustive()
    }
}

/// The level SHOW WARNINGS gives a warning of code `c`: `Warning` for those MySQL raises as
/// warnings (a duplicate key IGNOREd, a value out of range, truncated or wrong for its
/// column, a division by zero), `Note` for the rest.
pub fn warning_level(c: u16) -> &'static str {
    if c & ringrep_engine::types::NOTE_LEVEL != 0 {
        "Note"
    } else if matches!(
        c,
        1048 | 1062 | 1264 | 1265 | 1292 | 1364 | 1365 | 1366 | 1406 | 3020
    ) {
        "Warning"
    } else {
        "Note"
    }
}

/// Formats an error as the `mysql` client does: `ERROR 1146 (42S02): Table 'x' doesn't exist`.
pub fn client_error_line(e: &Error) -> String {
    format!("ERROR {} ({}): {}", e.code, e.sqlstate, e.message)
}

/// For tests: the rows a query returns, as text (`None` for NULL).
#[cfg(test)]
pub(crate) fn test_rows(s: &mut SqlSession, sql: &str) -> Vec<Vec<Option<String>>> {
    match s.execute(sql) {
        Ok(Outcome::Rows(rs)) => rs.text_rows(),
        other => panic!("{sql}: {other:?}"),
    }
}

/// For tests: an engine in `dir` and a session on it in database `d`, after `statements`.
#[cfg(test)]
pub(crate) fn test_session(
    dir: &std::path::Path,
    statements: &[&str],
) -> (ringrep_engine::Engine, SqlSession) {
    let (engine, _) =
        ringrep_engine::Engine::open(dir, ringrep_engine::EngineConfig::new(1)).expect("open");
    let mut s = SqlSession::new(&engine);
    for sql in ["CREATE DATABASE d", "USE d"].iter().chain(statements) {
        s.execute(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
    (engine, s)
}
