//! `ringrep-binlog`: dump, check and summarise ringrep binlog files.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use binlog_format::{BinlogReader, Error, Position, ReaderOptions, Record, Schema};
use clap::{Parser, Subcommand};
use ringrep_cdc::inspect::{record_json, record_text, Stats};
use ringrep_cdc::sql_text::{SqlDump, DUMP_PROLOGUE};

#[derive(Parser)]
#[command(
    name = "ringrep-binlog",
    version,
    about = "Read ringrep binlog segments: dump, check, stats"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every record, as text (like mysqlbinlog -v) or as JSON lines.
    Dump {
        /// A binlog directory or one segment file.
        path: PathBuf,
        /// One JSON object per line.
        #[arg(long, conflicts_with = "sql")]
        json: bool,
        /// The statements that replay each record, as `mysqlbinlog` output is replayed
        /// through a client (row writes as REPLACE naming every column; a server refuses
        /// them on ring buffer tables, as the spec says).
        #[arg(long)]
        sql: bool,
        /// Skip transactions below this sequence number.
        #[arg(long)]
        from_seq: Option<u64>,
        /// Stop after this sequence number.
        #[arg(long)]
        to_seq: Option<u64>,
    },
    /// Verify every checksum and the sequence continuity. Exit 0 when intact (a torn tail of
    /// the last segment is a warning), 1 on corruption.
    Check { path: PathBuf },
    /// Counts per segment and per table.
    Stats { path: PathBuf },
}

/// Follows the schema as segments change and DDL passes, to name tables and columns.
struct SchemaTracker {
    schema: Schema,
    segment: Option<u64>,
}

impl SchemaTracker {
    /// Takes the schema of a new segment's header.
    fn enter(&mut self, reader: &BinlogReader, position: Position) {
        if self.segment != Some(position.segment) {
            if let Some(h) = reader.current_header() {
                self.schema = Schema::from_header(&h.databases, &h.tables);
            }
            self.segment = Some(position.segment);
        }
    }

    /// The segment's schema, then the record's DDL applied.
    fn observe(&mut self, reader: &BinlogReader, position: Position, record: &Record) {
        self.enter(reader, position);
        if let Record::Transaction(tx) = record {
            for ev in &tx.events {
                if let binlog_format::Event::Ddl(d) = ev {
                    self.schema.apply(d);
                }
            }
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ringrep-binlog: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match cli.command {
        Command::Dump {
            path,
            json,
            sql,
            from_seq,
            to_seq,
        } => {
            if sql {
                write!(out, "{DUMP_PROLOGUE}")?;
            }
            let mut reader = BinlogReader::open(
                &path,
                ReaderOptions {
                    check_sequence: false,
                    ..Default::default()
                },
            )?;
            let mut tracker = SchemaTracker {
                schema: Schema::default(),
                segment: None,
            };
            let mut sql_dump = SqlDump::default();
            while let Some(item) = reader.next() {
                let (position, record) = item?;
                let skip = match &record {
                    Record::Transaction(tx) if to_seq.is_some_and(|t| tx.seq > t) => break,
                    Record::Transaction(tx) => from_seq.is_some_and(|f| tx.seq < f),
                    _ => false,
                };
                if sql && !skip {
                    // Rendered with the schema before the record: an ALTER names the table
                    // it changes, and the rows after it use the new definition.
                    tracker.enter(&reader, position);
                    let text = sql_dump.record(&mut tracker.schema, position, &record);
                    write!(out, "{text}")?;
                    continue;
                }
                tracker.observe(&reader, position, &record);
                if skip {
                    continue;
                }
                if json {
                    writeln!(out, "{}", record_json(&tracker.schema, position, &record))?;
                } else {
                    write!(out, "{}", record_text(&tracker.schema, position, &record))?;
                }
            }
            if let Some(t) = reader.torn_tail() {
                eprintln!(
                    "warning: torn tail at {}: {} bytes after the last whole record",
                    t.position, t.bytes
                );
            }
            if sql_dump.not_replayable > 0 {
                // Printed all the same, for reading; a replay of it would not be the binlog.
                eprintln!(
                    "ringrep-binlog: {} row changes could not be written as SQL (updates and deletes of tables without a primary key, or rows of tables without a definition); see the # comments. Exit 1: the output does not replay the binlog",
                    sql_dump.not_replayable
                );
                out.flush()?;
                return Ok(ExitCode::from(1));
            }
        }
        Command::Check { path } => {
            let mut reader = BinlogReader::open(&path, ReaderOptions::default())?;
            let mut count = 0u64;
            let mut last_seq = None;
            for item in reader.by_ref() {
                match item {
                    Ok((_, Record::Transaction(tx))) => {
                        count += 1;
                        last_seq = Some(tx.seq);
                    }
                    Ok(_) => count += 1,
                    Err(e) => {
                        writeln!(out, "CORRUPT: {}", describe(&path, &e))?;
                        out.flush()?;
                        return Ok(ExitCode::from(1));
                    }
                }
            }
            if let Some(t) = reader.torn_tail() {
                writeln!(out, "warning: torn tail at {}: {} bytes after the last whole record (cut on the writer's next start)", t.position, t.bytes)?;
            }
            let last = last_seq
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".into());
            writeln!(
                out,
                "OK: {} segments, {count} records, last seq {last}",
                reader.segments().len()
            )?;
        }
        Command::Stats { path } => {
            let mut reader = BinlogReader::open(
                &path,
                ReaderOptions {
                    check_sequence: false,
                    ..Default::default()
                },
            )?;
            let mut tracker = SchemaTracker {
                schema: Schema::default(),
                segment: None,
            };
            let mut stats = Stats::default();
            while let Some(item) = reader.next() {
                let (position, record) = item?;
                tracker.observe(&reader, position, &record);
                let end = reader.end_position().unwrap_or(position);
                stats.add(
                    &tracker.schema,
                    position,
                    end.offset.saturating_sub(position.offset),
                    &record,
                );
            }
            write!(out, "{}", stats.text())?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn describe(path: &std::path::Path, e: &Error) -> String {
    match e {
        Error::Corruption { position, reason } => {
            let dir = if path.is_dir() {
                path.to_path_buf()
            } else {
                path.parent().map(|p| p.to_path_buf()).unwrap_or_default()
            };
            format!(
                "{} at byte offset {}: {}",
                dir.join(binlog_format::segment::segment_name(position.segment))
                    .display(),
                position.offset,
                reason
            )
        }
        other => other.to_string(),
    }
}
