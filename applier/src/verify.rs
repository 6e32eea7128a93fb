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

/// How two definitions of one table differ (`None`: they do not), table ids left out with
/// `ignore_table_ids`.
pub fn definition_difference(p: &TableDef, r: &TableDef, ignore_table_ids: bool) -> Option<String> {
    if ignore_table_ids {
        let (p, r) = (as_sql_shows(p), as_sql_shows(r));
        (p != r).then(|| describe_def_diff(&p, &r))
    } else {
        (p != r).then(|| describe_def_diff(p, r))
    }
}

/// Compares one table held by two engines (both sides' copies of it).
pub fn compare_table(
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
    if let Some(d) = definition_difference(&pt.def, &rt.def, opts.ignore_table_ids) {
        rep.definition = Some(d);
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
                    let columns = differing_columns(def, pr, rr);
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

/// The columns of two rows under one key whose values differ.
fn differing_columns(def: &TableDef, p: &[Value], r: &[Value]) -> Vec<String> {
    def.columns
        .iter()
        .enumerate()
        .filter(|(c, _)| p.get(*c) != r.get(*c))
        .map(|(_, c)| c.name.clone())
        .collect()
}

/// One table compared as a merge of two streams of rows in primary-key order, a page at a
/// time from each side, as they arrive (a node read over the MySQL protocol a page per
/// query): memory is what the pages not yet compared hold, never the table. Every missing,
/// extra and different row is counted, and listed up to `max_listed`, as [`compare_table`]
/// does. A chunk here is one page of the primary's; it differs when a difference was found
/// among its rows (or, for an extra row, while it was the primary's page being compared).
#[derive(Debug)]
pub struct MergeCompare {
    def: TableDef,
    max_listed: usize,
    report: TableReport,
    primary: std::collections::VecDeque<(Key, Row, u64)>,
    replica: std::collections::VecDeque<(Key, Row)>,
    primary_done: bool,
    replica_done: bool,
    last_primary: Option<Key>,
    last_replica: Option<Key>,
    /// The primary's page the last compared row belonged to, and the last page counted as
    /// differing.
    page: u64,
    differing_page: Option<u64>,
}

impl MergeCompare {
    /// A comparison of `def`'s rows (the definitions are already known to agree).
    pub fn new(def: TableDef, opts: &VerifyOptions) -> MergeCompare {
        MergeCompare {
            report: TableReport {
                table: def.qualified_name(),
                ..Default::default()
            },
            def,
            max_listed: opts.max_listed,
            primary: Default::default(),
            replica: Default::default(),
            primary_done: false,
            replica_done: false,
            last_primary: None,
            last_replica: None,
            page: 1,
            differing_page: None,
        }
    }

    /// Whether the primary's rows compared so far are all there are to compare, or the
    /// comparison needs its next page.
    pub fn needs_primary(&self) -> bool {
        self.primary.is_empty() && !self.primary_done
    }

    /// As [`MergeCompare::needs_primary`], for the replica.
    pub fn needs_replica(&self) -> bool {
        self.replica.is_empty() && !self.replica_done
    }

    /// Rows held, not yet compared (the memory the comparison holds).
    pub fn pending(&self) -> usize {
        self.primary.len() + self.replica.len()
    }

    /// The primary's next page of rows, in key order after every row before it; `last`
    /// when no row follows. Fails when a key is not after the one before it (the merge
    /// would be wrong: the side did not send its rows in key order).
    pub fn push_primary(&mut self, rows: Vec<Row>, last: bool) -> std::result::Result<(), String> {
        self.report.chunks += 1;
        let page = self.report.chunks;
        for row in rows {
            let key = Key(self.def.key_of(&row));
            check_order(&self.def, &mut self.last_primary, &key, "primary")?;
            self.primary.push_back((key, row, page));
        }
        self.primary_done |= last;
        self.compare();
        Ok(())
    }

    /// As [`MergeCompare::push_primary`], for the replica.
    pub fn push_replica(&mut self, rows: Vec<Row>, last: bool) -> std::result::Result<(), String> {
        for row in rows {
            let key = Key(self.def.key_of(&row));
            check_order(&self.def, &mut self.last_replica, &key, "replica")?;
            self.replica.push_back((key, row));
        }
        self.replica_done |= last;
        self.compare();
        Ok(())
    }

    fn differs(&mut self, d: Difference) {
        if self.differing_page != Some(self.page) {
            self.differing_page = Some(self.page);
            self.report.chunks_differ += 1;
        }
        if self.report.differences.len() < self.max_listed {
            self.report.differences.push(d);
        }
    }

    /// Compares as far as both sides' rows are known.
    fn compare(&mut self) {
        use std::cmp::Ordering;
        loop {
            let ord = match (self.primary.front(), self.replica.front()) {
                (Some((pk, _, _)), Some((rk, _))) => pk.cmp(rk),
                (Some(_), None) if self.replica_done => Ordering::Less,
                (None, Some(_)) if self.primary_done => Ordering::Greater,
                _ => return,
            };
            match ord {
                Ordering::Less => {
                    let (k, _, page) = self.primary.pop_front().expect("a primary row");
                    self.page = page;
                    self.report.primary_rows += 1;
                    self.report.missing += 1;
                    let key = key_text(&self.def, &k);
                    self.differs(Difference::Missing { key });
                }
                Ordering::Greater => {
                    if let Some((_, _, page)) = self.primary.front() {
                        self.page = *page;
                    }
                    let (k, _) = self.replica.pop_front().expect("a replica row");
                    self.report.replica_rows += 1;
                    self.report.extra += 1;
                    let key = key_text(&self.def, &k);
                    self.differs(Difference::Extra { key });
                }
                Ordering::Equal => {
                    let (k, pr, page) = self.primary.pop_front().expect("a primary row");
                    let (_, rr) = self.replica.pop_front().expect("a replica row");
                    self.page = page;
                    self.report.primary_rows += 1;
                    self.report.replica_rows += 1;
                    if pr != rr {
                        self.report.different += 1;
                        let d = Difference::Different {
                            key: key_text(&self.def, &k),
                            columns: differing_columns(&self.def, &pr, &rr),
                            meta_row: self.def.is_meta_key(&k.0),
                        };
                        self.differs(d);
                    }
                }
            }
        }
    }

    /// The table's report, once both sides have sent their last page.
    pub fn finish(mut self) -> TableReport {
        self.compare();
        debug_assert!(self.primary.is_empty() && self.replica.is_empty());
        if self.report.chunks == 0 {
            self.report.chunks = 1;
        }
        self.report
    }
}

fn check_order(
    def: &TableDef,
    last: &mut Option<Key>,
    key: &Key,
    side: &str,
) -> std::result::Result<(), String> {
    if last.as_ref().is_some_and(|l| l >= key) {
        return Err(format!(
            "{}: the {side} sent key {} after {}, not in key order",
            def.qualified_name(),
            key_text(def, key),
            key_text(def, last.as_ref().expect("a key before")),
        ));
    }
    *last = Some(key.clone());
    Ok(())
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

#[cfg(test)]
mod tests {
    use binlog_format::schema::{ColumnDef, ColumnType, IntWidth, TableDef};
    use binlog_format::Value;

    use super::{Difference, MergeCompare, VerifyOptions};

    fn def() -> TableDef {
        TableDef {
            id: 1,
            database: "d".into(),
            name: "t".into(),
            columns: vec![
                ColumnDef::plain(
                    "k",
                    ColumnType::Integer {
                        width: IntWidth::Int,
                        unsigned: false,
                    },
                    false,
                ),
                ColumnDef::plain("v", ColumnType::VarChar { len: 10 }, true),
            ],
            primary_key: vec![0],
            indexes: vec![],
            ring: None,
            ttl: None,
            partitioning: None,
            comment: None,
        }
    }

    fn row(k: i64, v: &str) -> Vec<Value> {
        vec![Value::Int(k), Value::Text(v.into())]
    }

    /// Feeds both sides in pages of `page` rows, as a pager would (the primary first, each
    /// side only when the comparison needs it), checking that it never holds more than a
    /// page of each.
    fn merged(
        p: &[Vec<Value>],
        r: &[Vec<Value>],
        page: usize,
        max_listed: usize,
    ) -> super::TableReport {
        let opts = VerifyOptions {
            max_listed,
            ..Default::default()
        };
        let mut m = MergeCompare::new(def(), &opts);
        let (mut pi, mut ri) = (p.chunks(page), r.chunks(page));
        let (mut p_left, mut r_left) = (p.len().div_ceil(page) + 1, r.len().div_ceil(page) + 1);
        while m.needs_primary() || m.needs_replica() {
            if m.needs_primary() {
                let rows = pi.next().map(<[_]>::to_vec).unwrap_or_default();
                p_left -= 1;
                let last = rows.len() < page;
                m.push_primary(rows, last).expect("in order");
                assert!(p_left > 0 || last);
            }
            if m.needs_replica() {
                let rows = ri.next().map(<[_]>::to_vec).unwrap_or_default();
                r_left -= 1;
                let last = rows.len() < page;
                m.push_replica(rows, last).expect("in order");
                assert!(r_left > 0 || last);
            }
            assert!(m.pending() <= 2 * page, "{} rows held", m.pending());
        }
        m.finish()
    }

    /// Every difference is named, wherever pages cut the two streams, whatever the page size.
    #[test]
    fn a_merge_names_every_difference_across_pages() {
        let p: Vec<_> = (1..=20).map(|k| row(k, "v")).collect();
        let mut r: Vec<_> = vec![row(0, "first")];
        r.extend(
            (1..=20)
                .filter(|k| ![3, 4, 5, 20].contains(k))
                .map(|k| row(k, if k == 12 { "other" } else { "v" })),
        );
        r.push(row(25, "past"));
        for page in [1, 2, 3, 7, 20, 100] {
            let rep = merged(&p, &r, page, 100);
            assert_eq!(
                (rep.primary_rows, rep.replica_rows),
                (20, r.len() as u64),
                "pages of {page}"
            );
            assert_eq!(
                (rep.missing, rep.extra, rep.different),
                (4, 2, 1),
                "pages of {page}"
            );
            let key = |k: i64| format!("(k={k})");
            let mut want: Vec<Difference> = vec![Difference::Extra { key: key(0) }];
            want.extend([3, 4, 5].map(|k| Difference::Missing { key: key(k) }));
            want.push(Difference::Different {
                key: key(12),
                columns: vec!["v".into()],
                meta_row: false,
            });
            want.push(Difference::Missing { key: key(20) });
            want.push(Difference::Extra { key: key(25) });
            assert_eq!(rep.differences, want, "pages of {page}");
            assert_eq!(rep.chunks, 20 / page as u64 + 1, "pages of {page}");
            assert!(!rep.converged());
        }
        // Equal sides converge; listing stops at max_listed, counting does not.
        let same = merged(&p, &p, 3, 100);
        assert!(same.converged(), "{same:?}");
        assert_eq!(same.chunks_differ, 0);
        let one_side = merged(&p, &[], 4, 2);
        assert_eq!((one_side.missing, one_side.differences.len()), (20, 2));
        assert_eq!(one_side.chunks_differ, 5);
        let other_side = merged(&[], &p, 4, 100);
        assert_eq!(other_side.extra, 20);
        assert!(merged(&[], &[], 4, 100).converged());
    }

    /// A side that sends a key out of order is an error, not a wrong report.
    #[test]
    fn keys_out_of_order_fail_the_merge() {
        let mut m = MergeCompare::new(def(), &VerifyOptions::default());
        m.push_primary(vec![row(1, "a"), row(3, "c")], false)
            .expect("in order");
        let e = m
            .push_primary(vec![row(2, "b")], true)
            .expect_err("2 after 3");
        assert!(e.contains("(k=2) after (k=3)"), "{e}");
        let mut m = MergeCompare::new(def(), &VerifyOptions::default());
        let e = m
            .push_replica(vec![row(1, "a"), row(1, "a")], true)
            .expect_err("1 twice");
        assert!(e.contains("replica"), "{e}");
    }
}
