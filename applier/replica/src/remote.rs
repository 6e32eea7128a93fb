//! A side of the verifier given as `mysql://user:password@host:port`: every table read through
//! the MySQL protocol into a scratch engine, so the verifier compares it like a data directory.
//!
//! The meta rows are read with `ndb_ring_buffer_show_meta`, TIMESTAMPs in UTC, and values in
//! the binary protocol so that FLOAT and DOUBLE arrive bit for bit. A live node changes while
//! it is read; the snapshot is retried until the node's last sequence number is the same
//! before and after reading, so what is compared is one point.

use std::path::Path;

use binlog_format::schema::{ColumnDef, ColumnType, TableDef};
use binlog_format::value::{Date, DateTime};
use binlog_format::{SyncPolicy, Value};
use mysql_async::prelude::*;
use ringrep_engine::HIDDEN_ROW_ID;
use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::SqlSession;

use ringrep_applier::{Error, Result};

/// One side of a verification: a data directory, or a node read over the MySQL protocol.
pub(crate) struct Side {
    /// The data directory's engine, or the scratch engine holding the copy.
    pub(crate) engine: Engine,
    pub(crate) server_id: u32,
    /// The node's last binlog sequence number when it was read.
    pub(crate) last_seq: u64,
    /// What the node says it applied, by source server id (replicas only).
    pub(crate) applied: Vec<(u32, u64)>,
    /// The scratch copy's directory, for a side read over the protocol.
    scratch: Option<tempfile::TempDir>,
}

impl Side {
    /// A side held by a scratch engine in `dir` (a copy of a running node's).
    pub(crate) fn scratch(
        engine: Engine,
        server_id: u32,
        last_seq: u64,
        applied: Vec<(u32, u64)>,
        dir: tempfile::TempDir,
    ) -> Side {
        Side {
            engine,
            server_id,
            last_seq,
            applied,
            scratch: Some(dir),
        }
    }

    /// Whether this side was read over the MySQL protocol.
    pub(crate) fn is_remote(&self) -> bool {
        self.scratch.is_some()
    }

    /// What this side says it applied from `server_id`.
    pub(crate) fn applied_from(&self, server_id: u32) -> Option<u64> {
        self.applied
            .iter()
            .find(|(id, _)| *id == server_id)
            .map(|(_, seq)| *seq)
    }
}

pub(crate) fn remote(what: impl std::fmt::Display) -> Error {
    Error::Remote(what.to_string())
}

/// A connection to the node at `url` (`mysql://...`) over TCP, and the URL as it may be
/// shown (no password).
pub(crate) async fn connect(url: &str) -> Result<(mysql_async::Conn, String)> {
    let shown = redact(url);
    let opts = mysql_async::Opts::from_url(url).map_err(|e| remote(format!("{shown}: {e}")))?;
    let opts = mysql_async::OptsBuilder::from_opts(opts).prefer_socket(false);
    let conn = mysql_async::Conn::new(opts)
        .await
        .map_err(|e| remote(format!("connecting to {shown}: {e}")))?;
    Ok((conn, shown))
}

/// Reads every table of the node at `url` (tries up to `attempts` times for a quiet point).
pub(crate) async fn snapshot(url: &str, attempts: usize) -> Result<Side> {
    let (mut conn, shown) = connect(url).await?;
    let q = |e: mysql_async::Error| remote(format!("{shown}: {e}"));
    conn.query_drop("SET time_zone = '+00:00'")
        .await
        .map_err(q)?;
    conn.query_drop("SET ndb_ring_buffer_show_meta = ON")
        .await
        .map_err(q)?;
    let mut last_error = None;
    for _ in 0..attempts.max(1) {
        let before: Option<(u32, u64)> = conn
            .query_first("SELECT @@server_id, @@ringrep_last_seq")
            .await
            .map_err(q)?;
        let (server_id, seq) = before.ok_or_else(|| remote(format!("{shown}: no server id")))?;
        let snap = read_all(&mut conn, server_id, seq).await?;
        let after: Option<u64> = conn
            .query_first("SELECT @@ringrep_last_seq")
            .await
            .map_err(q)?;
        if after == Some(seq) {
            conn.disconnect().await.ok();
            return Ok(snap);
        }
        last_error = Some(format!(
            "{shown} moved from seq {seq} to {} while it was read",
            after.unwrap_or(0)
        ));
    }
    Err(remote(format!(
        "{}; verify a quiet node (stop the workload, let the replica catch up)",
        last_error.unwrap_or_default()
    )))
}

/// The server id of the node at `url` (a replica asks its primary before streaming), over TLS
/// verified against `ca` when given.
pub(crate) async fn server_id_of(n: &ringrep_applier::NetworkConfig) -> Result<u32> {
    let (host, port) = n
        .address
        .rsplit_once(':')
        .ok_or_else(|| remote(format!("{}: no port", n.address)))?;
    let port: u16 = port
        .parse()
        .map_err(|_| remote(format!("{}: bad port", n.address)))?;
    let mut opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(host.trim_start_matches('[').trim_end_matches(']'))
        .tcp_port(port)
        .user(Some(n.user.clone()))
        .pass(Some(n.password.clone()))
        .prefer_socket(false);
    // The same trust as the stream's: the CA the replica was given.
    if let (Some(_), Some(ca)) = (&n.tls, &n.ca_file) {
        opts =
            opts.ssl_opts(mysql_async::SslOpts::default().with_root_certs(vec![ca.clone().into()]));
    }
    let mut conn = mysql_async::Conn::new(opts)
        .await
        .map_err(|e| remote(format!("connecting to {}: {e}", n.address)))?;
    let id: Option<u32> = conn
        .query_first("SELECT @@server_id")
        .await
        .map_err(|e| remote(format!("{}: {e}", n.address)))?;
    conn.disconnect().await.ok();
    id.ok_or_else(|| remote(format!("{}: no server id", n.address)))
}

pub(crate) use ringrep_applier::network::redact;

async fn read_all(conn: &mut mysql_async::Conn, server_id: u32, last_seq: u64) -> Result<Side> {
    let dir = tempfile::tempdir().map_err(|e| remote(format!("scratch directory: {e}")))?;
    let mut cfg = EngineConfig::new(server_id);
    cfg.sync = SyncPolicy::Never;
    let (engine, _) = Engine::open(dir.path(), cfg)?;
    let mut sql = SqlSession::new(&engine);
    sql.session.vars.applier = true;
    let q = |e: mysql_async::Error| remote(e.to_string());
    let databases: Vec<String> = conn.query("SHOW DATABASES").await.map_err(q)?;
    for db in databases {
        // The catalog is computed from the rest, and differs where the rest does.
        if ["information_schema", "performance_schema", "sys"]
            .iter()
            .any(|s| db.eq_ignore_ascii_case(s))
        {
            continue;
        }
        conn.query_drop(format!("USE `{db}`")).await.map_err(q)?;
        let mut tables: Vec<String> = conn.query("SHOW TABLES").await.map_err(q)?;
        // A replica's own apply status is not compared (the verifier reads it apart).
        tables.retain(|t| !ringrep_engine::is_node_local_table(&db, t));
        if tables.is_empty() {
            continue;
        }
        sql.execute(&format!("CREATE DATABASE IF NOT EXISTS `{db}`"))?;
        sql.execute(&format!("USE `{db}`"))?;
        // Tables come in name order: a child's FOREIGN KEY may name a parent still to come,
        // as in a dump (and the rows are copied as they are, without checks).
        sql.execute("SET foreign_key_checks = 0")?;
        for t in tables {
            let create: Option<(String, String)> = conn
                .query_first(format!("SHOW CREATE TABLE `{db}`.`{t}`"))
                .await
                .map_err(q)?;
            let (_, create) = create.ok_or_else(|| remote(format!("no definition of {db}.{t}")))?;
            // A `mysql` table that an earlier CREATE made (the one that holds FOREIGN KEY
            // constraints, or declared engines) is there already: only its rows are copied.
            if engine.table_def(&db, &t).is_none() {
                sql.execute(&create)?;
            }
            let def = engine
                .table_def(&db, &t)
                .ok_or_else(|| remote(format!("{db}.{t}: definition did not load")))?;
            load_table(conn, &mut sql, &def).await?;
        }
    }
    let applied: Vec<(u32, u64)> = conn
        .query("SELECT server_id, last_seq FROM mysql.ringrep_apply_status")
        .await
        .unwrap_or_default();
    drop(sql);
    Ok(Side {
        engine,
        server_id,
        last_seq,
        applied,
        scratch: Some(dir),
    })
}

/// Names for the rows of a table without a primary key, read over the MySQL protocol, where
/// its hidden row id is not shown: each row is named by a digest of its values (the high 48
/// bits) and how many identical rows came before it (the low 16). The two sides of one
/// verification are named in the same process, so the same rows get the same names whatever
/// order they arrive in, and a row missing on one side is one difference, not a shift of
/// every row after it. The table is thus compared as a multiset of rows.
#[derive(Default)]
struct RowNames {
    seen: std::collections::HashMap<u64, u64>,
}

impl RowNames {
    const COPIES: u64 = 1 << 16;

    fn next(&mut self, def: &TableDef, values: &[Value]) -> Result<u64> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        format!("{values:?}").hash(&mut h);
        let digest = h.finish() & !(Self::COPIES - 1);
        let copies = self.seen.entry(digest).or_insert(0);
        if *copies == Self::COPIES {
            return Err(remote(format!(
                "{}: more than {} identical rows in a table without a primary key; verify data directories instead",
                def.qualified_name(),
                Self::COPIES
            )));
        }
        *copies += 1;
        Ok(digest | (*copies - 1))
    }
}

/// Every row of `def` read with one `SELECT *` into the scratch engine of `sql` (the whole
/// table in memory on both ends: for a table without a primary key, whose rows the protocol
/// shows without the hidden row id that orders them).
pub(crate) async fn load_table(
    conn: &mut mysql_async::Conn,
    sql: &mut SqlSession,
    def: &TableDef,
) -> Result<()> {
    let rows: Vec<mysql_async::Row> = conn
        .exec(format!("SELECT * FROM {}", quoted(def)), ())
        .await
        .map_err(|e| remote(e.to_string()))?;
    // A hidden row id is not among the columns a row arrives with.
    let hidden = def.columns.iter().position(|c| c.name == HIDDEN_ROW_ID);
    let shown: Vec<&ColumnDef> = def
        .columns
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != hidden)
        .map(|(_, c)| c)
        .collect();
    let mut names = RowNames::default();
    for (n, row) in rows.into_iter().enumerate() {
        let mut values = row_values(def, &shown, row.unwrap(), n + 1)?;
        if let Some(h) = hidden {
            values.insert(h, Value::UInt(names.next(def, &values)?));
        }
        sql.session.raw_write(def, values)?;
    }
    Ok(())
}

/// `` `database`.`table` ``, quoted for a statement.
pub(crate) fn quoted(def: &TableDef) -> String {
    format!("{}.{}", ident(&def.database), ident(&def.name))
}

pub(crate) fn ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// One result row of `def` (its raw values) as the values of `columns`, the ones the row is
/// made of.
pub(crate) fn row_values(
    def: &TableDef,
    columns: &[&ColumnDef],
    raw: Vec<mysql_async::Value>,
    n: usize,
) -> Result<Vec<Value>> {
    if raw.len() != columns.len() {
        return Err(remote(format!(
            "{}: a row has {} values for {} columns",
            def.qualified_name(),
            raw.len(),
            columns.len()
        )));
    }
    raw.into_iter()
        .zip(columns)
        .map(|(v, &col)| {
            let v = from_wire(v, &col.ty);
            ringrep_engine::types::restore(v, col, n, 0).map_err(Error::from)
        })
        .collect()
}

fn from_wire(v: mysql_async::Value, ty: &ColumnType) -> Value {
    use mysql_async::Value as W;
    match v {
        W::NULL => Value::Null,
        W::Int(i) => Value::Int(i),
        W::UInt(u) => Value::UInt(u),
        W::Float(f) => Value::Float(f),
        W::Double(d) => Value::Double(d),
        W::Bytes(b) => match ty {
            ColumnType::Binary { .. }
            | ColumnType::VarBinary { .. }
            | ColumnType::Blob { .. }
            | ColumnType::Bit { .. } => Value::Bytes(b),
            _ => match String::from_utf8(b) {
                Ok(s) => Value::Text(s),
                Err(e) => Value::Bytes(e.into_bytes()),
            },
        },
        W::Date(y, m, d, h, mi, s, us) => {
            let date = Date {
                year: y,
                month: m,
                day: d,
            };
            let dt = DateTime {
                date,
                hour: h,
                minute: mi,
                second: s,
                micros: us,
            };
            match ty {
                ColumnType::Date => Value::Date(date),
                // Read with time_zone +00:00: the wall clock is UTC.
                ColumnType::Timestamp { .. } => Value::Timestamp(dt.to_epoch_micros()),
                _ => Value::DateTime(dt),
            }
        }
        W::Time(neg, d, h, m, s, us) => {
            let secs = ((i64::from(d) * 24 + i64::from(h)) * 60 + i64::from(m)) * 60 + i64::from(s);
            let us = secs * 1_000_000 + i64::from(us);
            Value::Time(if neg { -us } else { us })
        }
    }
}

/// Whether a verifier argument names a server rather than a data directory.
pub(crate) fn is_url(spec: &str) -> bool {
    spec.starts_with("mysql://")
}

/// A data directory as a side (opened read-only).
pub(crate) fn open_dir(dir: &Path) -> Result<Side> {
    let (engine, _) = Engine::open_read_only(dir)?;
    let applied = ringrep_applier::applier::read_positions(&engine)
        .into_iter()
        .map(|p| (p.server_id, p.last_seq))
        .collect();
    Ok(Side {
        server_id: engine.config().server_id,
        last_seq: engine.last_seq(),
        engine,
        applied,
        scratch: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("mysql://root:s3cret@127.0.0.1:3306/test"),
            "mysql://root:***@127.0.0.1:3306/test"
        );
        assert_eq!(redact("mysql://root@h:1"), "mysql://root@h:1");
    }

    #[test]
    fn wire_timestamps_are_utc_micros() {
        let v = from_wire(
            mysql_async::Value::Date(1970, 1, 1, 0, 0, 1, 5),
            &ColumnType::Timestamp { fsp: 6 },
        );
        assert_eq!(v, Value::Timestamp(1_000_005));
    }

    /// A TIME read in the binary protocol and a BIT's bytes in the text one come back as
    /// the values the node holds.
    #[test]
    fn wire_times_and_bits() {
        let t = ColumnType::Time { fsp: 6 };
        let v = from_wire(mysql_async::Value::Time(true, 1, 2, 3, 4, 5), &t);
        assert_eq!(v, Value::Time(-(93_784_000_000 + 5)));
        let b = ColumnType::Bit { width: 12 };
        let col = ColumnDef::plain("b", b.clone(), true);
        let v = from_wire(mysql_async::Value::Bytes(vec![0x0f, 0xff]), &b);
        assert_eq!(
            ringrep_engine::types::restore(v, &col, 1, 0).expect("restore"),
            Value::Bit(0xfff)
        );
    }
}
