//! `statements`: what one SQL statement that writes n rows costs as n grows, in this process,
//! through the SQL layer: rows per second for n from 1 k up, for each statement that writes
//! many rows (INSERT ... SELECT, multi-row INSERT ... VALUES, LOAD DATA, UPDATE, DELETE) into a
//! plain table and a ring table, the ring with one prefix per row and with ten prefixes in all.
//! A cost that grows faster than the rows shows as rows/s falling from column to column.

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

/// The tables a statement writes into.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// `id BIGINT PRIMARY KEY, p BIGINT, payload`.
    Plain,
    /// The same with a unique index on `p`.
    PlainUnique,
    /// A ring of 10 per prefix, each row its own prefix.
    RingManyPrefixes,
    /// A ring of 10 per prefix, ten prefixes in all (each row overwrites).
    RingTenPrefixes,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Plain => "plain",
            Target::PlainUnique => "plain, a unique index",
            Target::RingManyPrefixes => "ring, a prefix per row",
            Target::RingTenPrefixes => "ring, 10 prefixes",
        }
    }

    fn create(self) -> &'static str {
        match self {
            Target::Plain => {
                "CREATE TABLE test.t (id BIGINT NOT NULL PRIMARY KEY, p BIGINT NOT NULL, \
                 payload VARCHAR(255))"
            }
            Target::PlainUnique => {
                "CREATE TABLE test.t (id BIGINT NOT NULL PRIMARY KEY, p BIGINT NOT NULL, \
                 payload VARCHAR(255), UNIQUE KEY (p))"
            }
            _ => {
                "CREATE TABLE test.t (p BIGINT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
                 ring_meta VARBINARY(64), payload VARCHAR(255), PRIMARY KEY (p, ring_idx)) \
                 COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=10'"
            }
        }
    }

    /// The prefix (ring tables) of source row `id`.
    fn prefix(self, id: u64) -> u64 {
        match self {
            Target::RingTenPrefixes => id % 10,
            _ => id,
        }
    }
}

/// The statements measured.
#[derive(Clone, Copy)]
enum Kind {
    InsertSelect,
    InsertValues,
    LoadData,
    Update,
    Delete,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::InsertSelect => "INSERT ... SELECT",
            Kind::InsertValues => "INSERT ... VALUES (n rows)",
            Kind::LoadData => "LOAD DATA",
            Kind::Update => "UPDATE of n rows",
            Kind::Delete => "DELETE of n rows",
        }
    }
}

/// A row's payload: about 200 bytes, different per row.
fn payload(id: u64) -> String {
    let mut s = format!("row {id:>12} ");
    while s.len() < 200 {
        s.push_str("payload-");
    }
    s.truncate(200);
    s
}

/// `statements`: for each size in `sizes` (rows per statement), each statement kind and each
/// target, a fresh engine, the statement timed alone; prints a Markdown table of rows/s.
/// Multi-row VALUES statements stop at `values_max` rows (their text is ~210 bytes a row).
pub(crate) fn statements(dir: &Path, sizes: &[u64], values_max: u64) -> anyhow::Result<()> {
    let kinds = [
        Kind::InsertSelect,
        Kind::InsertValues,
        Kind::LoadData,
        Kind::Update,
        Kind::Delete,
    ];
    let targets = [
        Target::Plain,
        Target::PlainUnique,
        Target::RingManyPrefixes,
        Target::RingTenPrefixes,
    ];
    let mut header = "| statement | table |".to_string();
    let mut rule = "|---|---|".to_string();
    for n in sizes {
        header.push_str(&format!(" {} rows |", thousands(*n)));
        rule.push_str("---:|");
    }
    let mut lines = vec![header, rule];
    for kind in kinds {
        for target in targets {
            let mut line = format!("| {} | {} |", kind.name(), target.name());
            for &n in sizes {
                // A ring of ten prefixes holds 100 rows: there are never n to update or delete.
                let never = matches!(kind, Kind::Update | Kind::Delete)
                    && target == Target::RingTenPrefixes;
                if never || (matches!(kind, Kind::InsertValues) && n > values_max) {
                    line.push_str(" |");
                    continue;
                }
                let case = dir.join(format!("case-{n}"));
                let (secs, affected) = one(&case, kind, target, n)?;
                std::fs::remove_dir_all(&case)?;
                eprintln!(
                    "{} into {}, {n} rows: {secs:.3} s, {affected} affected",
                    kind.name(),
                    target.name()
                );
                // A ring's DELETE counts each prefix's meta row too, as RonDB does.
                let expected = match (kind, target) {
                    (Kind::Delete, Target::RingManyPrefixes) => 2 * n,
                    _ => n,
                };
                if affected != expected {
                    anyhow::bail!(
                        "{} into {}: {affected} rows affected, {expected} expected",
                        kind.name(),
                        target.name()
                    );
                }
                line.push_str(&format!(" {} |", thousands((n as f64 / secs) as u64)));
            }
            lines.push(line);
        }
    }
    println!(
        "rows per second of one statement writing n rows (n data rows; durable commit, one session):"
    );
    for l in lines {
        println!("{l}");
    }
    Ok(())
}

/// One measurement: a fresh engine in `dir`, the source table and (for UPDATE and DELETE) the
/// target filled untimed, then the statement timed. Returns its seconds and affected rows.
fn one(dir: &Path, kind: Kind, target: Target, n: u64) -> anyhow::Result<(f64, u64)> {
    std::fs::create_dir_all(dir)?;
    let mut cfg = EngineConfig::new(1);
    cfg.snapshot_every = 0;
    let (engine, _) = Engine::open(&dir.join("data"), cfg)?;
    let mut sql = SqlSession::new(&engine);
    sql.execute("CREATE DATABASE IF NOT EXISTS test")?;
    sql.execute(target.create())?;
    // The rows as a tab-separated file: the source of LOAD DATA, and of the source table.
    let file = dir.join("rows.tsv");
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&file)?);
        for id in 0..n {
            match target {
                Target::Plain | Target::PlainUnique => {
                    writeln!(out, "{id}\t{id}\t{}", payload(id))?
                }
                _ => writeln!(out, "{}\t{}", target.prefix(id), payload(id))?,
            }
        }
        out.flush()?;
    }
    let columns = match target {
        Target::Plain | Target::PlainUnique => "(id, p, payload)",
        _ => "(p, payload)",
    };
    let fill_target = || {
        format!(
            "LOAD DATA INFILE '{}' INTO TABLE test.t {columns}",
            file.display()
        )
    };
    let statement = match kind {
        Kind::LoadData => fill_target(),
        Kind::InsertSelect => {
            sql.execute(&Target::Plain.create().replace("test.t", "test.src"))?;
            // The source holds the target's columns under the plain table's names.
            let src_file = dir.join("src.tsv");
            let mut out = std::io::BufWriter::new(std::fs::File::create(&src_file)?);
            for id in 0..n {
                writeln!(out, "{id}\t{}\t{}", target.prefix(id), payload(id))?;
            }
            out.flush()?;
            drop(out);
            sql.execute(&format!(
                "LOAD DATA INFILE '{}' INTO TABLE test.src (id, p, payload)",
                src_file.display()
            ))?;
            match target {
                Target::Plain | Target::PlainUnique => {
                    "INSERT INTO test.t SELECT id, p, payload FROM test.src".into()
                }
                _ => "INSERT INTO test.t (p, payload) SELECT p, payload FROM test.src".into(),
            }
        }
        Kind::InsertValues => {
            let mut text = match target {
                Target::Plain | Target::PlainUnique => {
                    "INSERT INTO test.t (id, p, payload) VALUES ".to_string()
                }
                _ => "INSERT INTO test.t (p, payload) VALUES ".to_string(),
            };
            for id in 0..n {
                if id > 0 {
                    text.push(',');
                }
                match target {
                    Target::Plain | Target::PlainUnique => {
                        text.push_str(&format!("({id},{id},'{}')", payload(id)))
                    }
                    _ => text.push_str(&format!("({},'{}')", target.prefix(id), payload(id))),
                }
            }
            text
        }
        Kind::Update => {
            sql.execute(&fill_target())?;
            "UPDATE test.t SET payload = CONCAT('u', payload) WHERE p >= 0".into()
        }
        Kind::Delete => {
            sql.execute(&fill_target())?;
            match target {
                Target::Plain | Target::PlainUnique => "DELETE FROM test.t WHERE p >= 0".into(),
                // A ring's DELETE names its prefixes (the spec): all of them.
                _ => {
                    let list: Vec<String> = (0..n).map(|p| p.to_string()).collect();
                    format!("DELETE FROM test.t WHERE p IN ({})", list.join(","))
                }
            }
        }
    };
    let start = Instant::now();
    let outcome = sql.execute(&statement)?;
    let secs = start.elapsed().as_secs_f64();
    let affected = match outcome {
        Outcome::Affected { rows, .. } => rows,
        _ => anyhow::bail!("{} did not report affected rows", kind.name()),
    };
    Ok((secs, affected))
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
