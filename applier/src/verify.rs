//! The verifier: proves a replica equals its primary, or shows exactly where they differ.
//!
//! Table definitions are compared first, then every table in primary-key order, meta rows
//! and not-yet-purged expired rows included, in chunks: each chunk's row count and a CRC32C
//! over the encoded rows are compared, and only chunks whose digests differ are compared row
//! by row (as pt-table-checksum and sync-diff-inspector do). Each engine's state is read under
//! its read lock, so each side is one consistent point.

use std::collections::BTreeMap;
use std::ops::Bound;

use binlog_format::schema::{ColumnDefault, TableDef};
use binlog_format::{Key, Value};
use ringrep_engine::Engine;
use ringrep_engine::{Row, State, StoredRow};
use serde::Serialize;

/// How a verification runs.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// Rows per chunk: chunks are compared by checksum first, row by row only where they differ.
    pub chunk_rows: usize,
    /// Most differences listed per table (all are counted).
    pub max_listed: usize,
    /// Compare table definitions without their internal table ids (a side read over the
    /// MySQL protocol does not have them).
    pub ignore_table_ids: bool,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            chunk_rows: 1000,
            max_listed: 100,
            ignore_table_ids: false,
        }
    }
}

/// One row where the two sides differ.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Difference {
    /// In the primary, not in the replica.
    Missing {
        /// The row's primary key, as text.
        key: String,
    },
    /// In the replica, not in the primary.
    Extra {
        /// The row's primary key, as text.
        key: String,
    },
    /// In both with other values; `columns` names those that differ.
    Different {
        /// The row's primary key, as text.
        key: String,
        /// The columns whose values differ.
        columns: Vec<String>,
        /// Whether the row is a ring's meta row (slot 0).
        meta_row: bool,
    },
}

/// What a verification found in one table.
#[derive(Debug, Clone, Serialize, Default)]
pub struct TableReport {
    /// The table, as `database.table`.
    pub table: String,
    /// Rows in the primary's copy, meta rows included.
    pub primary_rows: u64,
    /// Rows in the replica's copy, meta rows included.
    pub replica_rows: u64,
    /// Chunks compared.
    pub chunks: u64,
    /// Chunks whose checksums differed.
    pub chunks_differ: u64,
    /// Rows missing from the replica.
    pub missing: u64,
    /// Rows only the replica has.
    pub extra: u64,
    /// Rows with different values.
    pub different: u64,
    /// How the table definitions differ, if they do.
    pub definition: Option<String>,
    /// The differences found, up to `VerifyOptions::max_listed`.
    pub differences: Vec<Difference>,
}

impl TableReport {
    /// Whether both sides hold the same table.
    pub fn converged(&self) -> bool {
        self.definition.is_none() && self.missing == 0 && self.extra == 0 && self.different == 0
    }
}

/// The result of a verification.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Report {
    /// The primary's last sequence number when it was read.
    pub primary_seq: u64,
    /// What the replica says it applied from the primary.
    pub replica_applied_seq: Option<u64>,
    /// One report per table.
    pub tables: Vec<TableReport>,
    /// Rows compared in all.
    pub rows_compared: u64,
    /// Whether every table converged.
    pub converged: bool,
}

/// Progress of a long run: tables done of total, rows compared so far.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Tables compared so far.
    pub tables_done: usize,
    /// Tables to compare.
    pub tables_total: usize,
    /// Rows compared so far.
    pub rows: u64,
}

fn key_text(def: &TableDef, key: &Key) -> String {
    let parts: Vec<String> = def
        .primary_key
        .iter()
        .zip(&key.0)
        .map(|(&c, v)| {
            format!(
                "{}={}",
                def.columns.get(c).map(|c| c.name.as_str()).unwrap_or("?"),
                v
            )
        })
        .collect();
    format!("({})", parts.join(", "))
}

/// Row count and a CRC32C over the rows' encodings, as stored (no decoding).
fn digest(rows: &[StoredRow<'_>]) -> (usize, u32) {
    let crc = rows
        .iter()
        .fold(0u32, |crc, r| crc32c::crc32c_append(crc, r.encoded()));
    (rows.len(), crc)
}

fn user_tables(st: &State) -> BTreeMap<(String, String), &ringrep_engine::Table> {
    st.tables
        .values()
        .filter(|t| !ringrep_engine::is_node_local_table(&t.def.database, &t.def.name))
        .map(|t| {
            (
                (t.def.database.to_lowercase(), t.def.name.to_lowercase()),
                t,
            )
        })
        .collect()
}

/// Compares two engines. `replica_applied_seq` is what the replica says it applied from the
/// primary (for the report).
pub fn verify(
    primary: &Engine,
    replica: &Engine,
    opts: &VerifyOptions,
    progress: &mut dyn FnMut(Progress),
) -> Report {
    let server_id = primary.config().server_id;
    let replica_applied_seq = crate::applier::read_positions(replica)
        .into_iter()
        .find(|p| p.server_id == server_id)
        .map(|p| p.last_seq);
    verify_with(
        primary,
        replica,
        primary.last_seq(),
        replica_applied_seq,
        opts,
        progress,
    )
}

/// [`verify`] with the positions given: the primary's last sequence number and what the
/// replica says it applied of it (for engines that hold a copy read from elsewhere).
pub fn verify_with(
    primary: &Engine,
    replica: &Engine,
    primary_seq: u64,
    replica_applied_seq: Option<u64>,
    opts: &VerifyOptions,
    progress: &mut dyn FnMut(Progress),
) -> Report {
    let mut report = Report {
        primary_seq,
        replica_applied_seq,
        ..Default::default()
    };
    primary.with_state(|pst| {
        replica.with_state(|rst| {
            let p = user_tables(pst);
            let r = user_tables(rst);
            let mut names: Vec<&(String, String)> = p.keys().chain(r.keys()).collect();
            names.sort();
            names.dedup();
            let total = names.len();
            for (i, name) in names.into_iter().enumerate() {
                let tr = match (p.get(name), r.get(name)) {
                    (Some(pt), Some(rt)) => compare_table(pt, rt, opts),
                    (Some(pt), None) => TableReport {
                        table: pt.def.qualified_name(),
                        primary_rows: pt.len() as u64,
                        definition: Some("table missing on the replica".into()),
                        missing: pt.len() as u64,
                        ..Default::default()
                    },
                    (None, Some(rt)) => TableReport {
                        table: rt.def.qualified_name(),
                        replica_rows: rt.len() as u64,
                        definition: Some("table exists only on the replica".into()),
                        extra: rt.len() as u64,
                        ..Default::default()
                    },
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
        })
    });
    report.converged = report.tables.iter().all(TableReport::converged);
    report
}

fn compare_table(
    pt: &ringrep_engine::Table,
    rt: &ringrep_engine::Table,
    opts: &VerifyOptions,
) -> TableReport {
    let def = &pt.def;
    let mut rep = TableReport {
        table: def.qualified_name(),
        primary_rows: pt.len() as u64,
        replica_rows: rt.len() as u64,
        ..Default::default()
    };
    let same_def = if opts.ignore_table_ids {
        as_sql_shows(&pt.def) == as_sql_shows(&rt.def)
    } else {
        pt.def == rt.def
    };
    if !same_def {
        rep.definition = Some(if opts.ignore_table_ids {
            describe_def_diff(&as_sql_shows(&pt.def), &as_sql_shows(&rt.def))
        } else {
            describe_def_diff(&pt.def, &rt.def)
        });
        return rep;
    }
    let chunk = opts.chunk_rows.max(1);
    let mut prows = pt.stored().peekable();
    let mut lower: Option<&[u8]> = None;
    loop {
        let pchunk: Vec<StoredRow<'_>> = prows.by_ref().take(chunk).collect();
        let last_chunk = prows.peek().is_none();
        let upper: Option<&[u8]> = if last_chunk {
            None
        } else {
            pchunk.last().map(StoredRow::key_bytes)
        };
        // The replica rows in (lower, upper], or everything after `lower` for the last chunk.
        // Both sides store keys as the same order-preserving bytes, so the bounds carry over.
        let rchunk: Vec<StoredRow<'_>> = rt
            .stored_range(
                lower.map_or(Bound::Unbounded, Bound::Excluded),
                upper.map_or(Bound::Unbounded, Bound::Included),
            )
            .collect();
        rep.chunks += 1;
        if digest(&pchunk) != digest(&rchunk) {
            rep.chunks_differ += 1;
            let p: Vec<(Key, Row)> = pchunk.iter().map(|r| pt.keyed(*r)).collect();
            let r: Vec<(Key, Row)> = rchunk.iter().map(|r| rt.keyed(*r)).collect();
            drill_down(def, &p, &r, &mut rep, opts);
        }
        if last_chunk {
            break;
        }
        lower = upper;
    }
    rep
}

fn drill_down(
    def: &TableDef,
    p: &[(Key, Row)],
    r: &[(Key, Row)],
    rep: &mut TableReport,
    opts: &VerifyOptions,
) {
    let (mut i, mut j) = (0, 0);
    let is_meta = |k: &Key| def.is_meta_key(&k.0);
    let push = |rep: &mut TableReport, d: Difference| {
        if rep.differences.len() < opts.max_listed {
            rep.differences.push(d);
        }
    };
    while i < p.len() || j < r.len() {
        let ord = match (p.get(i), r.get(j)) {
            (Some((pk, _)), Some((rk, _))) => pk.cmp(rk),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => break,
        };
        match ord {
            std::cmp::Ordering::Less => {
                rep.missing += 1;
                push(
                    rep,
                    Difference::Missing {
                        key: key_text(def, &p[i].0),
                    },
                );
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                rep.extra += 1;
                push(
                    rep,
                    Difference::Extra {
                        key: key_text(def, &r[j].0),
                    },
                );
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let (k, pr) = &p[i];
                let rr = &r[j].1;
                if pr != rr {
                    let columns = def
                        .columns
                        .iter()
                        .enumerate()
                        .filter(|(c, _)| pr.get(*c) != rr.get(*c))
                        .map(|(_, c)| c.name.clone())
                        .collect();
                    rep.different += 1;
                    push(
                        rep,
                        Difference::Different {
                            key: key_text(def, k),
                            columns,
                            meta_row: is_meta(k),
                        },
                    );
                }
                i += 1;
                j += 1;
            }
        }
    }
}

/// A definition as far as `SHOW CREATE TABLE` tells it: no table id, and a nullable column
/// without a default is the same as one with `DEFAULT NULL`.
fn as_sql_shows(def: &TableDef) -> TableDef {
    let mut d = def.clone();
    d.id = 0;
    for c in &mut d.columns {
        if c.nullable && c.default == ColumnDefault::Value(Value::Null) {
            c.default = ColumnDefault::None;
        }
    }
    d
}

fn describe_def_diff(p: &TableDef, r: &TableDef) -> String {
    if p.columns != r.columns {
        let pc: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
        let rc: Vec<&str> = r.columns.iter().map(|c| c.name.as_str()).collect();
        if pc != rc {
            return format!("columns differ: primary {pc:?}, replica {rc:?}");
        }
        // Same names: name the first column whose definition differs, and how.
        if let Some((a, b)) = p.columns.iter().zip(&r.columns).find(|(a, b)| a != b) {
            return format!(
                "column {} differs: primary {:?}, replica {:?}",
                a.name, a, b
            );
        }
    }
    if p.ring != r.ring {
        return format!(
            "ring options differ: primary {:?}, replica {:?}",
            p.ring, r.ring
        );
    }
    if p.ttl != r.ttl {
        return format!(
            "TTL options differ: primary {:?}, replica {:?}",
            p.ttl, r.ttl
        );
    }
    if p.id != r.id {
        return format!("table ids differ: primary {}, replica {}", p.id, r.id);
    }
    "definitions differ (keys, indexes, partitioning or comment)".into()
}

impl Report {
    /// The report as text: one line per table, then each listed difference.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let applied = self
            .replica_applied_seq
            .map(|s| s.to_string())
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "primary at seq {}, replica applied seq {}",
            self.primary_seq, applied
        );
        for t in &self.tables {
            let state = if t.converged() { "OK" } else { "DIFFERS" };
            let _ = writeln!(
                out,
                "{state:8} {}: primary {} rows, replica {} rows, {} chunks ({} differ), missing {}, extra {}, different {}",
                t.table, t.primary_rows, t.replica_rows, t.chunks, t.chunks_differ, t.missing, t.extra, t.different
            );
            if let Some(d) = &t.definition {
                let _ = writeln!(out, "         definition: {d}");
            }
            for d in &t.differences {
                let line = match d {
                    Difference::Missing { key } => format!("missing on replica {key}"),
                    Difference::Extra { key } => format!("extra on replica {key}"),
                    Difference::Different {
                        key,
                        columns,
                        meta_row,
                    } => {
                        format!(
                            "different {key}{}: {}",
                            if *meta_row { " (meta row)" } else { "" },
                            columns.join(", ")
                        )
                    }
                };
                let _ = writeln!(out, "         {line}");
            }
        }
        let _ = writeln!(
            out,
            "{}",
            if self.converged {
                "CONVERGED"
            } else {
                "NOT CONVERGED"
            }
        );
        out
    }
}
