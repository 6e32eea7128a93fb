//! Incremental snapshots: a table sent whole again on demand, a chunk of rows at a time, while
//! the stream goes on (Debezium's `execute-snapshot` signal, DBLog's chunks).
//!
//! A row written to the signal table (`--kafka-signal-table`) asks for one; the relay sees it
//! in the binlog like any change, so the request has a place in the stream and a restart that
//! reads the binlog again meets it again (acted on once: the progress file keeps the last
//! signal's sequence number).
//!
//! Why no watermarks: DBLog reads a chunk between two watermarks written to the log and drops
//! the chunk's rows that changed between them, because a database's chunk query has no exact
//! place in the log. The engine gives a chunk one: it is read under the state's lock at the
//! last committed sequence number S, and its rows are produced right after transaction S's
//! records, before S + 1's. A consumer that applies records in stream order sees each row as it
//! stood at S, then every change after S: nothing to drop, no gap.
//!
//! Exactly once across crashes: a chunk is written to a file (binlog frames, synced) and the
//! progress file names it before a record of it is produced; its rows are numbered
//! (`ringrep.seq` S, `ringrep.order` from 2^61 by a counter that never goes
//! back), and the relay waits for every record in flight to be acknowledged before it takes the
//! next chunk or relays transaction S + 1. So a replication record past S proves the chunk is
//! in Kafka, and a run that resumes at or before S passes S again and sends the chunk from its
//! file under the same numbers; the producer skips what each partition holds.

use std::collections::VecDeque;
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use binlog_format::events::{Cause, Event, RowChange, RowEvent, Transaction};
use binlog_format::schema::TableDef;
use binlog_format::{Position, Value};
use ringrep_cdc::kafka::schema::{incremental_record, IncrementalMark};
use ringrep_cdc::kafka::{Snapshot, SourceInfo, TxPlace};
use ringrep_kafka::{kafka_error, Error, KafkaSettings, Result};
use serde::{Deserialize, Serialize};

use crate::producer::Outbox;
use crate::snapshot::{self, TableSnapshot};
use crate::tables::Tables;
use crate::RelayStats;

/// What a chunk is asked for: up to `limit` rows of `database.table` after the key `after`
/// (the engine's key bytes of the last row taken; `None`: from the first row), in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRequest {
    /// The table's database.
    pub database: String,
    /// The table's name.
    pub table: String,
    /// The key bytes of the last row of the chunk before; `None` for the first chunk.
    pub after: Option<Vec<u8>>,
    /// Most rows in the chunk.
    pub limit: usize,
}

/// Rows of one table as they stood at one sequence number.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// The last transaction the rows include (and none after it), durable in the binlog.
    pub seq: u64,
    /// When the rows were read, microseconds since the Unix epoch.
    pub taken_us: i64,
    /// The table's definition at `seq`.
    pub def: TableDef,
    /// The rows (meta rows included), in key order.
    pub rows: Vec<Vec<Value>>,
    /// The key bytes of the last row: the next chunk starts after it.
    pub last_key: Option<Vec<u8>>,
}

/// What reads a chunk from the node the relay follows: `Ok(None)` when the table does not
/// exist (dropped since it was asked for), an error saying why it could not read.
pub type ChunkFn =
    Arc<dyn Fn(&ChunkRequest) -> std::result::Result<Option<Chunk>, String> + Send + Sync>;

/// A table waiting for its incremental snapshot, the first one being sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Queued {
    database: String,
    table: String,
    /// The id of the signal that asked for it.
    id: String,
    /// Rows of it sent so far.
    rows: u64,
}

/// A chunk taken and not yet known to be in Kafka (its rows are in the chunk file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Pending {
    /// The transaction its rows follow.
    seq: u64,
    /// The number of its first row.
    first: u64,
    /// Its rows.
    rows: u64,
    /// Whether it is its table's last.
    last: bool,
}

/// What survives a restart (`<prefix>.incremental.json` in the relay's directory).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Progress {
    /// The sequence number of the last signal acted on.
    signal_seq: u64,
    /// The tables waiting, the first being sent.
    queue: VecDeque<Queued>,
    /// Key bytes of the last row taken of the first table.
    cursor: Option<Vec<u8>>,
    /// The cursor before the pending chunk, to take it again when it cannot be sent.
    cursor_before: Option<Vec<u8>>,
    /// Rows numbered so far: the next row's number.
    numbered: u64,
    /// The chunk taken and not yet known to be acknowledged.
    pending: Option<Pending>,
}

/// A signal read from the signal table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Signal {
    /// `execute-snapshot`: these tables, (database, table).
    Execute {
        id: String,
        tables: Vec<(String, String)>,
    },
    /// `stop-snapshot`: these tables, or every one when empty.
    Stop {
        id: String,
        tables: Vec<(String, String)>,
    },
    /// A signal the relay does not act on, and why.
    Ignored { id: String, why: String },
}

/// A run's incremental snapshots.
pub(crate) struct Incremental {
    /// Reads chunks; `None` when the relay runs away from the node (signals are then logged
    /// as not acted on).
    take: Option<ChunkFn>,
    /// The relay's directory for its files; `None` with `take`.
    dir: Option<PathBuf>,
    prefix: String,
    signal_table: Option<(String, String)>,
    limit: usize,
    progress: Progress,
    /// The pending chunk's rows, once read back or taken in this run.
    rows: Option<TableSnapshot>,
    stats: Arc<RelayStats>,
}

impl Incremental {
    /// The incremental snapshots of the stream `settings` names, reading chunks with `take`
    /// and keeping their files in `dir`; picks up the progress a run before left there.
    pub(crate) fn open(
        settings: &KafkaSettings,
        take: Option<(ChunkFn, PathBuf)>,
        stats: Arc<RelayStats>,
    ) -> Result<Incremental> {
        let (take, dir) = match take {
            Some((t, d)) => (Some(t), Some(d)),
            None => (None, None),
        };
        let mut inc = Incremental {
            take,
            dir,
            prefix: settings.topic_prefix.clone(),
            signal_table: settings.signal_table.clone(),
            limit: settings.incremental_chunk_rows.max(1),
            progress: Progress::default(),
            rows: None,
            stats,
        };
        if let Some(path) = inc.progress_file() {
            match fs::read(&path) {
                Ok(bytes) => {
                    inc.progress = serde_json::from_slice(&bytes).map_err(|e| {
                        Error::Config(format!("relay progress file {}: {e}", path.display()))
                    })?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Error::Config(format!(
                        "relay progress file {}: {e}",
                        path.display()
                    )))
                }
            }
        }
        inc.show();
        Ok(inc)
    }

    fn progress_file(&self) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{}.incremental.json", self.prefix)))
    }

    fn chunk_file(&self) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{}.incremental.chunk", self.prefix)))
    }

    /// Writes the progress (a temporary file, synced, then renamed).
    fn save(&self) -> Result<()> {
        let Some(path) = self.progress_file() else {
            return Ok(());
        };
        let bytes = serde_json::to_vec(&self.progress)
            .map_err(|e| kafka_error("encoding the relay's progress", e))?;
        snapshot::write_synced(&path, &bytes)
    }

    /// Shows where the snapshots are in the relay's figures.
    fn show(&self) {
        let s = &self.stats;
        s.incremental_tables
            .store(self.progress.queue.len() as u64, Ordering::Relaxed);
        if let Ok(mut t) = s.incremental_table.lock() {
            *t = self
                .progress
                .queue
                .front()
                .map(|q| format!("{}.{}", q.database, q.table))
                .unwrap_or_default();
        }
    }

    /// Whether a snapshot has tables left to send and can send them.
    pub(crate) fn wants_chunk(&self) -> bool {
        self.take.is_some() && self.progress.pending.is_none() && !self.progress.queue.is_empty()
    }

    /// At the start of a run that resumes the change topics after `acked` and reads new
    /// transactions from `next`: a pending chunk at or below `acked` is in Kafka (a
    /// replication record after it was produced only once it was acknowledged); one the run
    /// will pass again is read back from its file; one before `next` (its binlog purged) is
    /// taken again.
    pub(crate) fn resume(&mut self, acked: u64, next: u64) -> Result<()> {
        // A signal at or below `acked` was acted on before a record after it was produced
        // (even if this directory's progress file was lost): never again.
        self.progress.signal_seq = self.progress.signal_seq.max(acked);
        let Some(p) = self.progress.pending else {
            return Ok(());
        };
        if p.seq <= acked {
            self.completed(p)?;
        } else if p.seq < next || self.take.is_none() {
            tracing::warn!(
                "relay: the incremental snapshot's chunk at seq {} cannot be sent again from there (the binlog before seq {next} was purged); taking it again",
                p.seq
            );
            self.retake()?;
        } else {
            let path = self.chunk_file().expect("a pending chunk has a file");
            self.rows = Some(snapshot::load(&path)?);
            tracing::info!(
                "relay: resuming the incremental snapshot with the chunk at seq {} ({} rows) from {}",
                p.seq,
                p.rows,
                path.display()
            );
        }
        Ok(())
    }

    /// A full snapshot at `seq` was just sent: it holds every table's rows, so the incremental
    /// snapshots asked before it are done.
    pub(crate) fn superseded(&mut self, seq: u64) -> Result<()> {
        let waiting = !self.progress.queue.is_empty() || self.progress.pending.is_some();
        if !waiting || self.progress.signal_seq > seq {
            return Ok(());
        }
        tracing::info!("relay: the snapshot at seq {seq} holds every table: the incremental snapshots waiting are dropped");
        self.progress.queue.clear();
        self.progress.pending = None;
        self.progress.cursor = None;
        self.progress.signal_seq = self.progress.signal_seq.max(seq);
        self.rows = None;
        self.save()?;
        self.show();
        Ok(())
    }

    /// After `tx` was relayed: acts on its signals, then sends the pending chunk if it
    /// follows `tx`.
    pub(crate) async fn after_transaction(
        &mut self,
        settings: &KafkaSettings,
        outbox: &mut Outbox,
        tables: &mut Tables,
        tx: &Transaction,
    ) -> Result<()> {
        if tx.seq > self.progress.signal_seq {
            let signals = self.signals(tables, tx);
            if !signals.is_empty() {
                for s in signals {
                    self.act(outbox, tables, tx, s).await?;
                }
                // Their marks are in Kafka before the signals count as acted on.
                outbox.drain().await?;
                self.progress.signal_seq = tx.seq;
                self.save()?;
                self.show();
            }
        }
        if self.progress.pending.is_some_and(|p| p.seq == tx.seq) {
            self.send_pending(settings, outbox, tables, tx.server_id)
                .await?;
        }
        Ok(())
    }

    /// Takes the next chunk of the first table waiting and, when the relay has read through
    /// its sequence number (`read_through`), sends it; otherwise it waits for
    /// [`Incremental::after_transaction`] of that number. Returns whether it sent a chunk (or
    /// finished a table), so the caller may take another at once.
    pub(crate) async fn step(
        &mut self,
        settings: &KafkaSettings,
        outbox: &mut Outbox,
        tables: &mut Tables,
        read_through: u64,
        server_id: u32,
    ) -> Result<bool> {
        let (Some(take), Some(q)) = (self.take.clone(), self.progress.queue.front().cloned())
        else {
            return Ok(false);
        };
        let req = ChunkRequest {
            database: q.database.clone(),
            table: q.table.clone(),
            after: self.progress.cursor.clone(),
            limit: self.limit,
        };
        let chunk = tokio::task::spawn_blocking(move || take(&req))
            .await
            .map_err(|e| kafka_error("incremental snapshot task", e))?
            .map_err(|e| kafka_error("reading a chunk of an incremental snapshot", e))?;
        let chunk = match chunk {
            Some(c) if !c.rows.is_empty() => c,
            gone_or_done => {
                if gone_or_done.is_none() {
                    tracing::warn!(
                        "relay: incremental snapshot {}: table {}.{} no longer exists",
                        q.id,
                        q.database,
                        q.table
                    );
                }
                self.table_done(outbox, tables, server_id, read_through)
                    .await?;
                return Ok(true);
            }
        };
        if chunk.seq < read_through {
            // The engine's state is never behind its own binlog; a chunk from behind what the
            // relay read would be placed after changes it does not hold.
            return Err(kafka_error(
                "incremental snapshot",
                format!(
                    "a chunk read at seq {} while the relay had read seq {read_through}",
                    chunk.seq
                ),
            ));
        }
        let rows = chunk.rows.len() as u64;
        let pending = Pending {
            seq: chunk.seq,
            first: self.progress.numbered,
            rows,
            last: chunk.rows.len() < self.limit,
        };
        let snap = TableSnapshot {
            seq: chunk.seq,
            server_id,
            taken_us: chunk.taken_us,
            tables: vec![(chunk.def, chunk.rows)],
        };
        let path = self
            .chunk_file()
            .expect("chunks are taken with a directory");
        snapshot::save(&path, &snap)?;
        self.progress.cursor_before = self.progress.cursor.take();
        self.progress.cursor = chunk.last_key;
        self.progress.numbered += rows;
        self.progress.pending = Some(pending);
        self.save()?;
        self.rows = Some(snap);
        if pending.seq == read_through {
            self.send_pending(settings, outbox, tables, server_id)
                .await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Sends the pending chunk (the relay has just relayed its transaction), waits until all
    /// is acknowledged, and moves on.
    async fn send_pending(
        &mut self,
        settings: &KafkaSettings,
        outbox: &mut Outbox,
        tables: &mut Tables,
        server_id: u32,
    ) -> Result<()> {
        let (Some(p), Some(snap)) = (self.progress.pending, self.rows.take()) else {
            return Ok(());
        };
        let Some((def, rows)) = snap.tables.first() else {
            return Err(kafka_error(
                "incremental snapshot",
                "a chunk file without rows",
            ));
        };
        match tables.definition(&def.database, &def.name) {
            // The rows are read with the binlog's definition: the same table, the same columns.
            Some(now)
                if now.id == def.id
                    && now.columns == def.columns
                    && now.primary_key == def.primary_key => {}
            now => {
                // The relay's schema at the chunk's seq is the engine's when it read it; if
                // they differ, the chunk cannot be placed there: read it again.
                tracing::warn!(
                    "relay: the chunk of {}.{} read at seq {} has another definition than the binlog's there ({}); taking it again",
                    def.database,
                    def.name,
                    p.seq,
                    if now.is_none() { "no table" } else { "changed" }
                );
                return self.retake();
            }
        }
        let src = SourceInfo {
            server_id,
            seq: p.seq,
            position: Position::default(),
            commit_time_us: snap.taken_us,
            index: 0,
            place: TxPlace::default(),
            snapshot: Snapshot::Incremental,
        };
        for (i, row) in rows.iter().enumerate() {
            let ev = RowEvent {
                table_id: def.id,
                change: RowChange::Write { row: row.clone() },
                cause: Cause::Insert,
            };
            tables
                .relay_read_row(settings, outbox, &ev, &src, p.first + i as u64)
                .await?;
        }
        // Nothing after the chunk is relayed before all of it is in Kafka (module docs).
        outbox.drain().await?;
        self.stats
            .incremental_rows
            .fetch_add(p.rows, Ordering::Relaxed);
        self.completed(p)?;
        if p.last {
            self.table_done(outbox, tables, server_id, p.seq).await?;
        }
        Ok(())
    }

    /// The pending chunk `p` is in Kafka.
    fn completed(&mut self, p: Pending) -> Result<()> {
        if let Some(q) = self.progress.queue.front_mut() {
            q.rows += p.rows;
        }
        self.progress.pending = None;
        self.progress.cursor_before = None;
        self.rows = None;
        self.save()?;
        if let Some(path) = self.chunk_file() {
            let _ = fs::remove_file(path);
        }
        // A table's last chunk completed by a restart is marked done by the next step: the
        // chunk after it comes back empty.
        Ok(())
    }

    /// Drops the pending chunk and takes it again from the cursor before it.
    fn retake(&mut self) -> Result<()> {
        self.progress.cursor = self.progress.cursor_before.take();
        self.progress.pending = None;
        self.rows = None;
        self.save()
    }

    /// The first table waiting is sent whole: marks it done on the schema topic and goes on
    /// with the next.
    async fn table_done(
        &mut self,
        outbox: &mut Outbox,
        tables: &mut Tables,
        server_id: u32,
        seq: u64,
    ) -> Result<()> {
        let Some(q) = self.progress.queue.front().cloned() else {
            return Ok(());
        };
        tracing::info!(
            "relay: incremental snapshot {}: {}.{} sent whole, {} rows",
            q.id,
            q.database,
            q.table,
            q.rows
        );
        let rec = incremental_record(
            &self.prefix,
            IncrementalMark::TableEnd {
                database: &q.database,
                table: &q.table,
                rows: q.rows,
            },
            &q.id,
            server_id,
            seq,
        );
        tables.announce_record(outbox, rec).await?;
        // The mark is in Kafka before the table leaves the queue: a restart in between marks
        // it again under the same key, which the schema topic keeps once.
        outbox.drain().await?;
        self.progress.queue.pop_front();
        self.progress.cursor = None;
        self.progress.cursor_before = None;
        self.save()?;
        self.show();
        Ok(())
    }

    /// The signals `tx` writes to the signal table, in order.
    fn signals(&self, tables: &Tables, tx: &Transaction) -> Vec<Signal> {
        let Some((db, name)) = &self.signal_table else {
            return vec![];
        };
        // By id, not by a scan of every table per transaction.
        tx.events
            .iter()
            .filter_map(|ev| match ev {
                Event::Row(RowEvent {
                    table_id,
                    change: RowChange::Write { row } | RowChange::Update { after: row, .. },
                    ..
                }) => {
                    let def = tables.definition_of(*table_id)?;
                    let signal = def.database.eq_ignore_ascii_case(db)
                        && def.name.eq_ignore_ascii_case(name);
                    signal.then(|| parse_signal(def, row))
                }
                _ => None,
            })
            .collect()
    }

    /// Acts on one signal of `tx`.
    async fn act(
        &mut self,
        outbox: &mut Outbox,
        tables: &mut Tables,
        tx: &Transaction,
        signal: Signal,
    ) -> Result<()> {
        match signal {
            Signal::Ignored { id, why } => {
                tracing::warn!(
                    "relay: signal {id:?} at seq {}: not acted on: {why}",
                    tx.seq
                );
            }
            Signal::Execute { id, tables: asked } => {
                if self.take.is_none() {
                    tracing::error!(
                        "relay: signal {id:?} at seq {} asks for an incremental snapshot, and this relay cannot read the node's tables: run the relay inside the primary (ringrep-source serve --kafka-brokers)",
                        tx.seq
                    );
                    return Ok(());
                }
                let mut known = Vec::new();
                for (db, name) in asked {
                    match tables.definition(&db, &name) {
                        Some(def) => known.push((def.database.clone(), def.name.clone())),
                        _ => tracing::warn!(
                            "relay: signal {id:?} at seq {}: no table {db}.{name}: not snapshotted",
                            tx.seq
                        ),
                    }
                }
                let rec = incremental_record(
                    &self.prefix,
                    IncrementalMark::Start { tables: &known },
                    &id,
                    tx.server_id,
                    tx.seq,
                );
                tables.announce_record(outbox, rec).await?;
                tracing::info!(
                    "relay: signal {id:?} at seq {}: incremental snapshot of {} table(s) queued",
                    tx.seq,
                    known.len()
                );
                for (database, table) in known {
                    let waiting = self
                        .progress
                        .queue
                        .iter()
                        .any(|q| q.database == database && q.table == table);
                    if !waiting {
                        self.progress.queue.push_back(Queued {
                            database,
                            table,
                            id: id.clone(),
                            rows: 0,
                        });
                    }
                }
            }
            Signal::Stop { id, tables: asked } => {
                let before = self.progress.queue.len();
                let stops = |q: &Queued| {
                    asked.is_empty() || asked.iter().any(|(d, t)| *d == q.database && *t == q.table)
                };
                let first_stops = self.progress.queue.front().is_some_and(stops);
                if first_stops {
                    // What was taken of it and not sent is not sent.
                    self.progress.pending = None;
                    self.progress.cursor = None;
                    self.progress.cursor_before = None;
                    self.rows = None;
                }
                self.progress.queue.retain(|q| !stops(q));
                let stopped = before - self.progress.queue.len();
                let rec = incremental_record(
                    &self.prefix,
                    IncrementalMark::Stop {
                        tables: stopped as u64,
                    },
                    &id,
                    tx.server_id,
                    tx.seq,
                );
                tables.announce_record(outbox, rec).await?;
                tracing::info!(
                    "relay: signal {id:?} at seq {}: {stopped} table(s) of incremental snapshots stopped",
                    tx.seq
                );
            }
        }
        Ok(())
    }
}

/// The signal a row of the signal table holds: its columns `id`, `type` and `data` (by name,
/// else the first three, as Debezium reads its signal table).
fn parse_signal(def: &TableDef, row: &[Value]) -> Signal {
    let column = |name: &str, at: usize| {
        let i = def.column_index(name).unwrap_or(at);
        match row.get(i) {
            Some(Value::Text(s)) => Some(s.clone()),
            Some(Value::Bytes(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            Some(Value::Json(s)) => Some(s.clone()),
            _ => None,
        }
    };
    let id = column("id", 0).unwrap_or_default();
    let kind = column("type", 1).unwrap_or_default();
    let data = column("data", 2).unwrap_or_default();
    let ignored = |why: String| Signal::Ignored {
        id: id.clone(),
        why,
    };
    let parsed: serde_json::Value = if data.trim().is_empty() {
        serde_json::Value::Null
    } else {
        match serde_json::from_str(&data) {
            Ok(v) => v,
            Err(e) => return ignored(format!("its data is not JSON: {e}")),
        }
    };
    if let Some(t) = parsed.get("type").and_then(|t| t.as_str()) {
        if !t.eq_ignore_ascii_case("incremental") {
            return ignored(format!(
                "snapshots of type {t:?} are not supported (only \"incremental\")"
            ));
        }
    }
    let mut tables = Vec::new();
    if let Some(list) = parsed.get("data-collections") {
        let Some(list) = list.as_array() else {
            return ignored("data-collections is not a list".into());
        };
        for name in list {
            match name.as_str().and_then(|n| n.split_once('.')) {
                Some((db, t)) if !db.is_empty() && !t.is_empty() => {
                    tables.push((db.to_string(), t.to_string()))
                }
                _ => return ignored(format!("{name} is not DATABASE.TABLE")),
            }
        }
    }
    match kind.as_str() {
        "execute-snapshot" if tables.is_empty() => {
            ignored("execute-snapshot names no data-collections".into())
        }
        "execute-snapshot" => Signal::Execute { id, tables },
        "stop-snapshot" => Signal::Stop { id, tables },
        other => ignored(format!(
            "type {other:?} is not one the relay acts on (execute-snapshot, stop-snapshot)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal_table() -> TableDef {
        use binlog_format::schema::{ColumnDef, ColumnType};
        let column = |name| ColumnDef::plain(name, ColumnType::VarChar { len: 64 }, true);
        TableDef {
            id: 3,
            database: "test".into(),
            name: "signal".into(),
            columns: vec![column("id"), column("type"), column("data")],
            primary_key: vec![0],
            indexes: vec![],
            ring: None,
            ttl: None,
            partitioning: None,
            comment: None,
        }
    }

    fn row(id: &str, kind: &str, data: &str) -> Vec<Value> {
        vec![
            Value::Text(id.into()),
            Value::Text(kind.into()),
            Value::Text(data.into()),
        ]
    }

    #[test]
    fn signals_are_read_as_debezium_writes_them() {
        let def = signal_table();
        assert_eq!(
            parse_signal(
                &def,
                &row(
                    "a",
                    "execute-snapshot",
                    r#"{"data-collections": ["test.t1", "db2.t2"], "type": "INCREMENTAL"}"#
                )
            ),
            Signal::Execute {
                id: "a".into(),
                tables: vec![("test".into(), "t1".into()), ("db2".into(), "t2".into())]
            }
        );
        assert_eq!(
            parse_signal(&def, &row("b", "stop-snapshot", "")),
            Signal::Stop {
                id: "b".into(),
                tables: vec![]
            }
        );
        for (kind, data, why) in [
            (
                "execute-snapshot",
                r#"{"data-collections": ["t1"]}"#,
                "DATABASE.TABLE",
            ),
            (
                "execute-snapshot",
                r#"{"data-collections": []}"#,
                "names no",
            ),
            (
                "execute-snapshot",
                r#"{"data-collections": ["a.b"], "type": "blocking"}"#,
                "blocking",
            ),
            ("execute-snapshot", "{not json", "not JSON"),
            ("log", "{}", "not one the relay acts on"),
        ] {
            match parse_signal(&def, &row("c", kind, data)) {
                Signal::Ignored { id, why: w } => {
                    assert_eq!(id, "c");
                    assert!(w.contains(why), "{kind} {data}: {w}");
                }
                other => panic!("{kind} {data}: {other:?}"),
            }
        }
    }

    #[test]
    fn progress_survives_a_round_trip_through_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let settings = KafkaSettings {
            signal_table: Some(("test".into(), "signal".into())),
            ..KafkaSettings::new("127.0.0.1:1", "p")
        };
        let take: ChunkFn = Arc::new(|_| Ok(None));
        let stats = Arc::new(RelayStats::default());
        let mut inc = Incremental::open(
            &settings,
            Some((take.clone(), dir.path().to_path_buf())),
            Arc::clone(&stats),
        )
        .expect("open");
        inc.progress.queue.push_back(Queued {
            database: "test".into(),
            table: "t".into(),
            id: "x".into(),
            rows: 3,
        });
        inc.progress.cursor = Some(vec![0, 255, 7]);
        inc.progress.numbered = 42;
        inc.progress.signal_seq = 9;
        inc.save().expect("save");
        let again = Incremental::open(
            &settings,
            Some((take, dir.path().to_path_buf())),
            stats.clone(),
        )
        .expect("open again");
        assert_eq!(again.progress, inc.progress);
        assert_eq!(stats.incremental_tables.load(Ordering::Relaxed), 1);
        assert_eq!(
            stats.incremental_table.lock().expect("lock").as_str(),
            "test.t"
        );
    }
}
