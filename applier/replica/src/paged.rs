//! `ringrep-applier verify` over two running nodes (`mysql://` on both sides, without
//! `--live`): each table read from both nodes at once, in primary-key order, a page per query
//! (`SELECT * FROM t WHERE (k1, k2) > (?, ?) ORDER BY k1, k2 LIMIT n`: keyset pagination,
//! which a node answers by reading that page alone, its state's lock held for those rows
//! only), and compared as a merge of the two ordered streams ([`MergeCompare`]). Memory on
//! every end is a few pages, whatever the table's size: the verifier holds the pages not yet
//! compared (two in flight per side), and each node the page it is sending.
//!
//! Each page is one consistent read; the whole is one point because the nodes' last sequence
//! numbers are read before and after, and the verification runs again (up to `attempts`
//! times) when either moved meanwhile, as the whole-table read did. A table without a primary
//! key is still read whole (its hidden row id, which orders it, is not shown over the
//! protocol) and compared as a multiset of rows, and so is one whose key has a column of a
//! type pages cannot be cut by exactly ([`pageable`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use binlog_format::schema::{ColumnDef, ColumnType, TableDef};
use binlog_format::{SyncPolicy, Value};
use mysql_async::prelude::*;
use ringrep_applier::verify::{
    compare_table, definition_difference, MergeCompare, Progress, Report, TableReport,
    VerifyOptions,
};
use ringrep_applier::Result;
use ringrep_engine::{Engine, EngineConfig, HIDDEN_ROW_ID};
use ringrep_sql::SqlSession;
use tokio::sync::mpsc;

use crate::remote::{connect, ident, load_table, quoted, remote, row_values};

/// Pages a side may read ahead of the comparison.
const AHEAD: usize = 2;

/// Compares the nodes at `primary` and `replica` (`mysql://` URLs), a page of
/// `opts.chunk_rows` rows at a time; tries up to `attempts` times for a point at which
/// neither moved.
pub(crate) async fn verify_servers(
    primary: &str,
    replica: &str,
    opts: &VerifyOptions,
    attempts: usize,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report> {
    let mut p = Node::connect(primary).await?;
    let mut r = Node::connect(replica).await?;
    let mut last_error = None;
    for _ in 0..attempts.max(1) {
        let (p_id, p_seq) = p.position().await?;
        let (_, r_seq) = r.position().await?;
        let applied: Vec<(u32, u64)> = r
            .conn()
            .query("SELECT server_id, last_seq FROM mysql.ringrep_apply_status")
            .await
            .unwrap_or_default();
        let replica_applied_seq = applied
            .iter()
            .find(|(id, _)| *id == p_id)
            .map(|(_, seq)| *seq);
        let mut report = Report {
            primary_seq: p_seq,
            replica_applied_seq,
            ..Default::default()
        };
        compare_all(&mut p, &mut r, opts, &mut report, progress).await?;
        let (_, p_after) = p.position().await?;
        let (_, r_after) = r.position().await?;
        if p_after == p_seq && r_after == r_seq {
            report.converged = report.tables.iter().all(TableReport::converged);
            p.disconnect().await;
            r.disconnect().await;
            return Ok(report);
        }
        last_error = Some(if p_after != p_seq {
            format!(
                "{} moved from seq {p_seq} to {p_after} while it was read",
                p.shown
            )
        } else {
            format!(
                "{} moved from seq {r_seq} to {r_after} while it was read",
                r.shown
            )
        });
    }
    Err(remote(format!(
        "{}; verify a quiet node (stop the workload, let the replica catch up), or use --live",
        last_error.unwrap_or_default()
    )))
}

/// One side: its connection (lent to a pager while a table is read), and a scratch engine
/// holding its table definitions (and the rows of tables without a primary key).
struct Node {
    conn: Option<mysql_async::Conn>,
    shown: String,
    scratch: Option<(Engine, SqlSession, tempfile::TempDir)>,
    /// The node answers `CHECKSUM TABLE` with its row counts (`ringrep_checksum_rows`; a
    /// node of an older version does not, and its tables are compared row by row).
    checksums: bool,
}

impl Node {
    async fn connect(url: &str) -> Result<Node> {
        let (mut conn, shown) = connect(url).await?;
        let q = |e: mysql_async::Error| remote(format!("{shown}: {e}"));
        conn.query_drop("SET time_zone = '+00:00'")
            .await
            .map_err(q)?;
        conn.query_drop("SET ndb_ring_buffer_show_meta = ON")
            .await
            .map_err(q)?;
        let checksums = conn
            .query_drop("SET ringrep_checksum_rows = ON")
            .await
            .is_ok();
        Ok(Node {
            conn: Some(conn),
            shown,
            scratch: None,
            checksums,
        })
    }

    /// The rows of `def` on the node as it counts them for `CHECKSUM TABLE`, and their
    /// checksum (meta rows included, expired rows not, as the pages read them).
    async fn checksum(&mut self, def: &TableDef) -> Result<(u64, u64)> {
        let shown = self.shown.clone();
        let sums: Option<(String, Option<u64>, Option<u64>)> = self
            .conn()
            .query_first(format!("CHECKSUM TABLE {}", quoted(def)))
            .await
            .map_err(|e| remote(format!("{shown}: {e}")))?;
        match sums {
            Some((_, Some(crc), Some(rows))) => Ok((rows, crc)),
            _ => Err(remote(format!(
                "{shown}: no checksum of {}",
                def.qualified_name()
            ))),
        }
    }

    fn conn(&mut self) -> &mut mysql_async::Conn {
        self.conn
            .as_mut()
            .expect("the connection is back from its pager")
    }

    async fn disconnect(&mut self) {
        if let Some(c) = self.conn.take() {
            c.disconnect().await.ok();
        }
    }

    /// The node's server id and last sequence number.
    async fn position(&mut self) -> Result<(u32, u64)> {
        let shown = self.shown.clone();
        let at: Option<(u32, u64)> = self
            .conn()
            .query_first("SELECT @@server_id, @@ringrep_last_seq")
            .await
            .map_err(|e| remote(format!("{shown}: {e}")))?;
        at.ok_or_else(|| remote(format!("{shown}: no server id")))
    }

    /// Every user table's definition, by lower-cased database and name, as `SHOW CREATE
    /// TABLE` gives it (loaded into a new scratch engine).
    async fn definitions(&mut self) -> Result<BTreeMap<(String, String), TableDef>> {
        let dir = tempfile::tempdir().map_err(|e| remote(format!("scratch directory: {e}")))?;
        let mut cfg = EngineConfig::new(1);
        cfg.sync = SyncPolicy::Never;
        let (engine, _) = Engine::open(dir.path(), cfg)?;
        let mut sql = SqlSession::new(&engine);
        sql.session.vars.applier = true;
        // Tables come in name order: a child's FOREIGN KEY may name a parent still to come.
        sql.execute("SET foreign_key_checks = 0")?;
        let shown = self.shown.clone();
        let q = |e: mysql_async::Error| remote(format!("{shown}: {e}"));
        let conn = self.conn();
        let databases: Vec<String> = conn.query("SHOW DATABASES").await.map_err(q)?;
        let mut defs = BTreeMap::new();
        for db in databases {
            // The catalog is computed from the rest, and differs where the rest does.
            if ["information_schema", "performance_schema", "sys"]
                .iter()
                .any(|s| db.eq_ignore_ascii_case(s))
            {
                continue;
            }
            let mut tables: Vec<String> = conn
                .query(format!("SHOW TABLES FROM {}", ident(&db)))
                .await
                .map_err(q)?;
            // A replica's own apply status is not compared (the verifier reads it apart).
            tables.retain(|t| !ringrep_engine::is_node_local_table(&db, t));
            if tables.is_empty() {
                continue;
            }
            sql.execute(&format!("CREATE DATABASE IF NOT EXISTS {}", ident(&db)))?;
            sql.execute(&format!("USE {}", ident(&db)))?;
            for t in tables {
                let create: Option<(String, String)> = conn
                    .query_first(format!("SHOW CREATE TABLE {}.{}", ident(&db), ident(&t)))
                    .await
                    .map_err(q)?;
                let (_, create) =
                    create.ok_or_else(|| remote(format!("no definition of {db}.{t}")))?;
                // A `mysql` table an earlier CREATE made (the FOREIGN KEY constraints, the
                // declared engines) is there already.
                if engine.table_def(&db, &t).is_none() {
                    sql.execute(&create)?;
                }
                let def = engine
                    .table_def(&db, &t)
                    .ok_or_else(|| remote(format!("{db}.{t}: definition did not load")))?;
                defs.insert((db.to_lowercase(), t.to_lowercase()), def);
            }
        }
        self.scratch = Some((engine, sql, dir));
        Ok(defs)
    }
}

async fn compare_all(
    p: &mut Node,
    r: &mut Node,
    opts: &VerifyOptions,
    report: &mut Report,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let pdefs = p.definitions().await?;
    let rdefs = r.definitions().await?;
    let mut names: Vec<&(String, String)> = pdefs.keys().chain(rdefs.keys()).collect();
    names.sort();
    names.dedup();
    let total = names.len();
    let mut last_print = Instant::now();
    for (i, name) in names.into_iter().enumerate() {
        let tr = match (pdefs.get(name), rdefs.get(name)) {
            (Some(pd), Some(rd)) => {
                if let Some(d) = definition_difference(pd, rd, true) {
                    TableReport {
                        table: pd.qualified_name(),
                        primary_rows: count(p, pd, opts).await?,
                        replica_rows: count(r, rd, opts).await?,
                        definition: Some(d),
                        ..Default::default()
                    }
                } else if !pageable(pd) {
                    whole(p, r, pd, opts).await?
                } else if let Some(same) = same_checksums(p, r, pd).await? {
                    // Equal on both nodes: no row needs to travel.
                    same
                } else {
                    let rows_before = report.rows_compared;
                    let mut seen = |rows: u64| {
                        if last_print.elapsed() > Duration::from_secs(1) {
                            progress(Progress {
                                tables_done: i,
                                tables_total: total,
                                rows: rows_before + rows,
                            });
                            last_print = Instant::now();
                        }
                    };
                    merge(p, r, pd, opts, &mut seen).await?
                }
            }
            (Some(pd), None) => {
                let n = count(p, pd, opts).await?;
                TableReport {
                    table: pd.qualified_name(),
                    primary_rows: n,
                    definition: Some("table missing on the replica".into()),
                    missing: n,
                    ..Default::default()
                }
            }
            (None, Some(rd)) => {
                let n = count(r, rd, opts).await?;
                TableReport {
                    table: rd.qualified_name(),
                    replica_rows: n,
                    definition: Some("table exists only on the replica".into()),
                    extra: n,
                    ..Default::default()
                }
            }
            (None, None) => continue,
        };
        report.rows_compared += tr.primary_rows.max(tr.replica_rows);
        report.tables.push(tr);
        progress(Progress {
            tables_done: i + 1,
            tables_total: total,
            rows: report.rows_compared,
        });
    }
    Ok(())
}

/// A table whose `CHECKSUM TABLE` (rows and checksum) is the same on both nodes, computed by
/// each node over its stored rows at once: its report, the rows not read at all. `None` when
/// they differ (the pages then name the rows that do) or a node cannot tell.
async fn same_checksums(p: &mut Node, r: &mut Node, def: &TableDef) -> Result<Option<TableReport>> {
    if !(p.checksums && r.checksums) {
        return Ok(None);
    }
    let (ps, rs) = tokio::join!(p.checksum(def), r.checksum(def));
    let (ps, rs) = (ps?, rs?);
    Ok((ps == rs).then(|| TableReport {
        table: def.qualified_name(),
        primary_rows: ps.0,
        replica_rows: rs.0,
        chunks: 1,
        ..Default::default()
    }))
}

/// A table read a page at a time in key order: `page_rows` rows per query, each page after
/// the key of the last row of the one before (sent back as the values it arrived as, so a
/// key is matched exactly whatever its type).
struct Pager {
    conn: mysql_async::Conn,
    def: TableDef,
    first: String,
    next: String,
    page_rows: usize,
    after: Option<Vec<mysql_async::Value>>,
    read: usize,
}

impl Pager {
    fn new(conn: mysql_async::Conn, def: TableDef, page_rows: usize) -> Pager {
        let page_rows = page_rows.max(1);
        let keys: Vec<String> = def
            .primary_key
            .iter()
            .map(|&c| ident(&def.columns[c].name))
            .collect();
        let order = keys.join(", ");
        let first = format!(
            "SELECT * FROM {} ORDER BY {order} LIMIT {page_rows}",
            quoted(&def)
        );
        let bound = if keys.len() == 1 {
            format!("{order} > ?")
        } else {
            let marks = vec!["?"; keys.len()].join(", ");
            format!("({order}) > ({marks})")
        };
        let next = format!(
            "SELECT * FROM {} WHERE {bound} ORDER BY {order} LIMIT {page_rows}",
            quoted(&def)
        );
        Pager {
            conn,
            def,
            first,
            next,
            page_rows,
            after: None,
            read: 0,
        }
    }

    /// The next page's rows, and whether it is the last.
    async fn page(&mut self) -> Result<(Vec<Vec<Value>>, bool)> {
        let rows: Vec<mysql_async::Row> = match &self.after {
            None => self.conn.exec(self.first.as_str(), ()).await,
            Some(after) => {
                self.conn
                    .exec(
                        self.next.as_str(),
                        mysql_async::Params::Positional(after.clone()),
                    )
                    .await
            }
        }
        .map_err(|e| remote(format!("{}: {e}", self.def.qualified_name())))?;
        let last = rows.len() < self.page_rows;
        let columns: Vec<&ColumnDef> = self.def.columns.iter().collect();
        let n = rows.len();
        let mut out = Vec::with_capacity(n);
        for (i, row) in rows.into_iter().enumerate() {
            let raw = row.unwrap();
            if i + 1 == n {
                let key: Option<Vec<mysql_async::Value>> = self
                    .def
                    .primary_key
                    .iter()
                    .map(|&c| raw.get(c).cloned())
                    .collect();
                self.after = Some(key.ok_or_else(|| {
                    remote(format!(
                        "{}: a row without its key columns",
                        self.def.qualified_name()
                    ))
                })?);
            }
            self.read += 1;
            out.push(row_values(&self.def, &columns, raw, self.read)?);
        }
        Ok((out, last))
    }
}

type Page = Result<(Vec<Vec<Value>>, bool)>;

/// Reads `def` from `node` on a task of its own, sending its pages to the channel (at most
/// [`AHEAD`] ahead of their reader); the task gives the connection back when done.
fn spawn_pager(
    node: &mut Node,
    def: &TableDef,
    page_rows: usize,
) -> (
    mpsc::Receiver<Page>,
    tokio::task::JoinHandle<mysql_async::Conn>,
) {
    let conn = node
        .conn
        .take()
        .expect("the connection is back from its pager");
    let mut pager = Pager::new(conn, def.clone(), page_rows);
    let (tx, rx) = mpsc::channel(AHEAD);
    let task = tokio::spawn(async move {
        loop {
            let page = pager.page().await;
            let end = !matches!(page, Ok((_, false)));
            if tx.send(page).await.is_err() || end {
                break;
            }
        }
        pager.conn
    });
    (rx, task)
}

async fn next_page(rx: &mut mpsc::Receiver<Page>, node: &Node) -> Page {
    rx.recv()
        .await
        .unwrap_or_else(|| Err(remote(format!("{}: the read ended early", node.shown))))
}

async fn give_back(
    node: &mut Node,
    task: tokio::task::JoinHandle<mysql_async::Conn>,
) -> Result<()> {
    let conn = task
        .await
        .map_err(|e| remote(format!("{}: the read failed: {e}", node.shown)))?;
    node.conn = Some(conn);
    Ok(())
}

/// One table with a primary key, both sides read at once and compared as they arrive.
async fn merge(
    p: &mut Node,
    r: &mut Node,
    def: &TableDef,
    opts: &VerifyOptions,
    seen: &mut dyn FnMut(u64),
) -> Result<TableReport> {
    let (mut prx, ptask) = spawn_pager(p, def, opts.chunk_rows);
    let (mut rrx, rtask) = spawn_pager(r, def, opts.chunk_rows);
    let mut m = MergeCompare::new(def.clone(), opts);
    let mut rows = 0u64;
    while m.needs_primary() || m.needs_replica() {
        if m.needs_primary() {
            let (page, last) = next_page(&mut prx, p).await?;
            rows += page.len() as u64;
            m.push_primary(page, last).map_err(remote)?;
        }
        if m.needs_replica() {
            let (page, last) = next_page(&mut rrx, r).await?;
            m.push_replica(page, last).map_err(remote)?;
        }
        seen(rows);
    }
    give_back(p, ptask).await?;
    give_back(r, rtask).await?;
    Ok(m.finish())
}

/// Whether a table is walked a page at a time: its primary key's columns are of types a node
/// pages by exactly (their SQL order is their stored order, and a key sent back as it
/// arrived is compared exactly: not DECIMAL, which a string compares with as a double, nor
/// FLOAT, DOUBLE or TIME). Any other table is read whole (and a table without a primary key,
/// whose hidden row id orders it and is not shown over the protocol).
fn pageable(def: &TableDef) -> bool {
    !def.primary_key.is_empty()
        && !def.columns.iter().any(|c| c.name == HIDDEN_ROW_ID)
        && def.primary_key.iter().all(|&c| {
            matches!(
                def.columns[c].ty,
                ColumnType::Integer { .. }
                    | ColumnType::Char { .. }
                    | ColumnType::VarChar { .. }
                    | ColumnType::Binary { .. }
                    | ColumnType::VarBinary { .. }
                    | ColumnType::Date
                    | ColumnType::DateTime { .. }
                    | ColumnType::Timestamp { .. }
            )
        })
}

/// The rows of `def` on `node`, counted a page at a time.
async fn count(node: &mut Node, def: &TableDef, opts: &VerifyOptions) -> Result<u64> {
    if !pageable(def) {
        let n: Option<u64> = node
            .conn()
            .query_first(format!("SELECT COUNT(*) FROM {}", quoted(def)))
            .await
            .map_err(|e| remote(format!("{}: {e}", node.shown)))?;
        return Ok(n.unwrap_or(0));
    }
    let (mut rx, task) = spawn_pager(node, def, opts.chunk_rows);
    let mut n = 0u64;
    loop {
        let (page, last) = next_page(&mut rx, node).await?;
        n += page.len() as u64;
        if last {
            break;
        }
    }
    give_back(node, task).await?;
    Ok(n)
}

/// A table that is not [`pageable`]: both sides read whole into their scratch engines and
/// compared there.
async fn whole(
    p: &mut Node,
    r: &mut Node,
    def: &TableDef,
    opts: &VerifyOptions,
) -> Result<TableReport> {
    for node in [&mut *p, &mut *r] {
        let mut conn = node
            .conn
            .take()
            .expect("the connection is back from its pager");
        let (_, sql, _) = node.scratch.as_mut().expect("definitions read first");
        let loaded = load_table(&mut conn, sql, def).await;
        node.conn = Some(conn);
        loaded?;
    }
    let (pe, _, _) = p.scratch.as_ref().expect("definitions read first");
    let (re, _, _) = r.scratch.as_ref().expect("definitions read first");
    let report = pe.with_state(|ps| {
        re.with_state(|rs| {
            let pt = ps.table(&def.database, &def.name);
            let rt = rs.table(&def.database, &def.name);
            match (pt, rt) {
                (Some(pt), Some(rt)) => Ok(compare_table(pt, rt, opts)),
                _ => Err(remote(format!(
                    "{}: the scratch copy lost the table",
                    def.qualified_name()
                ))),
            }
        })
    })?;
    Ok(report)
}
