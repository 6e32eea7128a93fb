//! The schema as of the record the relay has read to, the change topics' partition counts,
//! the schema topic's keys, and the per-transaction produce: the schema-topic records of its
//! DDL, its BEGIN, its change records, its END, then its replication record.
//!
//! Each change record is numbered within its transaction (`ringrep.order`: four times the
//! event's index, plus its place among the event's records: a delete's tombstone is the
//! second, and Debezium's envelope writes a key-changing update as a delete, its tombstone and
//! a create) from the binlog alone, so a run that replays a
//! transaction numbers its records as the run before did, and the producer can skip those a
//! partition already holds.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use binlog_format::events::{DdlEvent, Event, RowEvent, Transaction};
use binlog_format::schema::{Schema, TableDef};
use binlog_format::Position;
use ringrep_cdc::kafka::{
    self, schema, transaction, ChangeOptions, DebeziumSchemas, Snapshot, SourceInfo, TxPlace,
};
use ringrep_kafka::{ensure_topic, kafka_error, KafkaSettings, Result, Tail, TopicKind};

use crate::producer::Outbox;

/// Room in the `ringrep.order` numbering for each event's records (at most three are made).
pub(crate) const RECORDS_PER_EVENT: u64 = 4;

/// Where the numbering of a snapshot's records starts, past any transaction's own records.
const SNAPSHOT_ORDER: u64 = 1 << 62;

/// Where the numbering of incremental snapshots' rows starts: past any transaction's own
/// records, below a snapshot's.
const INCREMENTAL_ORDER: u64 = 1 << 61;

/// Which of a transaction's records a run produces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    /// Transactions up to this one had all their records acknowledged before the run: only
    /// their DDL is followed.
    pub(crate) acked: u64,
    /// Transactions up to this one are in the replication topic already.
    pub(crate) relayed: u64,
}

/// What the schema topic holds: its records' keys (a record whose key is there is not
/// produced again) and the schema versions its records name (a definition is announced only
/// when no record names its version yet).
#[derive(Default)]
pub(crate) struct Announced {
    keys: HashSet<Vec<u8>>,
    versions: HashSet<String>,
}

impl Announced {
    /// What the schema topic's records, (key, value), hold.
    pub(crate) fn from_records(records: Vec<ringrep_kafka::KeyValue>) -> Announced {
        let mut a = Announced::default();
        for (key, value) in records {
            a.keys.insert(key);
            if let Some(v) = value.as_deref().and_then(schema::version_named) {
                a.versions.insert(v);
            }
        }
        a
    }
}

/// What the records of one table definition share, made once per definition.
struct Kept {
    /// The definition's version ([`schema::schema_version`]).
    version: String,
    /// Its Debezium schemas, when the records embed them.
    debezium: Option<DebeziumSchemas>,
}

/// What a run knows of the tables and topics.
#[derive(Default)]
pub(crate) struct Tables {
    /// Databases and tables as of the last record read.
    schema: Schema,
    /// Partition count of each change topic looked up (or created) in this run.
    topics: HashMap<String, i32>,
    /// What is kept per table id for the definition the schema holds now.
    versions: HashMap<u64, Arc<Kept>>,
    /// What the schema topic holds.
    announced: Announced,
}

impl Tables {
    /// Starts with what the schema topic holds (read at start).
    pub(crate) fn new(announced: Announced) -> Tables {
        Tables {
            announced,
            ..Tables::default()
        }
    }

    /// Starts over from the schema in a new segment's header.
    pub(crate) fn reset(&mut self, schema: Schema) {
        self.schema = schema;
        self.versions.clear();
    }

    /// Follows `tx`'s DDL, and produces the records `window` says this run owes for it.
    pub(crate) async fn relay_transaction(
        &mut self,
        settings: &KafkaSettings,
        outbox: &mut Outbox,
        position: Position,
        tx: &Transaction,
        window: Window,
    ) -> Result<()> {
        if tx.seq <= window.acked {
            for ev in &tx.events {
                if let Event::Ddl(d) = ev {
                    self.apply(d);
                }
            }
            // Its changes are in the topics (or in a snapshot); a replica may still need it.
            return self.replicate(settings, outbox, tx, window).await;
        }
        let (per_table, total) = row_counts(tx);
        let ends = (settings.transaction_topic && total > 0).then(|| {
            transaction::begin_end_records(
                &settings.topic_prefix,
                tx,
                &transaction::events_per_table(tx, &self.schema),
            )
        });
        let [begin, end] = match ends {
            Some([b, e]) => [Some(b), Some(e)],
            None => [None, None],
        };
        if let Some(b) = begin {
            outbox
                .send(
                    b,
                    Some(Tail {
                        seq: tx.seq,
                        order: 0,
                    }),
                )
                .await?;
        }
        let mut seen: HashMap<u64, u64> = HashMap::new();
        let mut total_order = 0;
        for (index, ev) in tx.events.iter().enumerate() {
            let mut src = SourceInfo {
                server_id: tx.server_id,
                seq: tx.seq,
                position,
                commit_time_us: tx.commit_time_us,
                index: index as u32,
                place: TxPlace::default(),
                snapshot: Snapshot::None,
            };
            match ev {
                Event::Ddl(d) => {
                    let before = self.schema.clone();
                    self.apply(d);
                    let rec = schema::ddl_record(
                        &settings.topic_prefix,
                        tx,
                        &src,
                        d,
                        &before,
                        &self.schema,
                    );
                    announce(&mut self.announced, outbox, rec).await?;
                }
                Event::Row(row) => {
                    total_order += 1;
                    let table_order = seen.entry(row.table_id).or_insert(0);
                    *table_order += 1;
                    src.place = TxPlace {
                        total_order,
                        table_order: *table_order,
                        total_events: total,
                        table_events: per_table.get(&row.table_id).copied().unwrap_or(0),
                    };
                    let first = RECORDS_PER_EVENT * u64::from(src.index);
                    self.relay_row(settings, outbox, row, &src, first).await?;
                }
            }
        }
        if let Some(e) = end {
            outbox
                .send(
                    e,
                    Some(Tail {
                        seq: tx.seq,
                        order: 1,
                    }),
                )
                .await?;
        }
        self.replicate(settings, outbox, tx, window).await
    }

    /// Produces `tx`'s replication record unless the topic holds it.
    async fn replicate(
        &self,
        settings: &KafkaSettings,
        outbox: &mut Outbox,
        tx: &Transaction,
        window: Window,
    ) -> Result<()> {
        if tx.seq > window.relayed {
            let acked = outbox.acked_seq();
            let rec = kafka::replication_record(&settings.topic_prefix, tx, acked)
                .map_err(|e| kafka_error("encoding", e))?;
            outbox.send_transaction(rec, tx, acked).await?;
        }
        Ok(())
    }

    /// Produces a schema-topic record (a snapshot's mark) unless the topic holds its key.
    pub(crate) async fn announce_record(
        &mut self,
        outbox: &mut Outbox,
        rec: kafka::KafkaRecord,
    ) -> Result<()> {
        announce(&mut self.announced, outbox, rec).await
    }

    /// The definition of `database.name` as of the record read.
    pub(crate) fn definition(&self, database: &str, name: &str) -> Option<&TableDef> {
        self.schema.find(database, name)
    }

    /// The definition of table id `id` as of the record read.
    pub(crate) fn definition_of(&self, id: u64) -> Option<&TableDef> {
        self.schema.tables.get(&id)
    }

    fn apply(&mut self, d: &DdlEvent) {
        self.schema.apply(d);
        self.versions.clear();
    }

    /// Produces the `read` record of row `n` of a snapshot (the schema holds its table),
    /// numbered after every record of the transaction at `src.seq`: from [`SNAPSHOT_ORDER`]
    /// for a whole snapshot's rows, from [`INCREMENTAL_ORDER`] for incremental snapshots'
    /// chunks, four apart, so that a run that sends the same rows again skips what each
    /// partition holds of them.
    pub(crate) async fn relay_read_row(
        &mut self,
        settings: &KafkaSettings,
        outbox: &mut Outbox,
        row: &RowEvent,
        src: &SourceInfo,
        n: u64,
    ) -> Result<()> {
        let base = match src.snapshot {
            Snapshot::Incremental => INCREMENTAL_ORDER,
            Snapshot::Initial | Snapshot::None => SNAPSHOT_ORDER,
        };
        let first = base + RECORDS_PER_EVENT * n;
        self.relay_row(settings, outbox, row, src, first).await
    }

    /// Produces the change records of one row event, the first numbered `first_order`,
    /// creating its change topic on first use and announcing its table's definition on the
    /// schema topic if the topic lacks it.
    async fn relay_row(
        &mut self,
        settings: &KafkaSettings,
        outbox: &mut Outbox,
        row: &RowEvent,
        src: &SourceInfo,
        first_order: u64,
    ) -> Result<()> {
        let Tables {
            schema: tables,
            topics,
            versions,
            announced,
        } = self;
        let def: &TableDef = tables.tables.get(&row.table_id).ok_or_else(|| {
            // The binlog contradicts itself: reading it again gives the same.
            ringrep_kafka::Error::Config(format!(
                "binlog: seq {}: table id {} is not in the schema",
                src.seq, row.table_id
            ))
        })?;
        let kept = match versions.get(&row.table_id) {
            Some(k) => Arc::clone(k),
            None => {
                let v = schema::schema_version(def);
                if !announced.versions.contains(&v) {
                    let rec = schema::definition_record(&settings.topic_prefix, def, &v, src.seq);
                    announce(announced, outbox, rec).await?;
                }
                let debezium = matches!(settings.format, kafka::Format::Debezium { schemas: true })
                    .then(|| DebeziumSchemas::of(&settings.topic_prefix, def));
                let k = Arc::new(Kept {
                    version: v,
                    debezium,
                });
                versions.insert(row.table_id, Arc::clone(&k));
                k
            }
        };
        let ctopic = kafka::change_topic(&settings.topic_prefix, &def.database, &def.name);
        let partitions = match topics.get(&ctopic) {
            Some(p) => *p,
            None => {
                let p = ensure_topic(settings, &ctopic, TopicKind::Change).await?;
                topics.insert(ctopic.clone(), p);
                p
            }
        };
        let opts = ChangeOptions {
            prefix: &settings.topic_prefix,
            partitions,
            tombstones: settings.tombstones,
            format: settings.format,
            schema_version: &kept.version,
            debezium_schemas: kept.debezium.as_ref(),
        };
        for (sub, rec) in kafka::change_records(def, row, src, &opts)
            .into_iter()
            .enumerate()
        {
            let order = first_order + sub as u64;
            if outbox
                .send(
                    rec,
                    Some(Tail {
                        seq: src.seq,
                        order,
                    }),
                )
                .await?
            {
                outbox.count_change();
            }
        }
        Ok(())
    }
}

/// Produces a schema-topic record unless the topic holds its key already, and notes the
/// version it names.
async fn announce(
    announced: &mut Announced,
    outbox: &mut Outbox,
    rec: kafka::KafkaRecord,
) -> Result<()> {
    if let Some(v) = rec.value.as_deref().and_then(schema::version_named) {
        announced.versions.insert(v);
    }
    if announced.keys.insert(rec.key.clone()) {
        outbox.send(rec, None).await?;
    }
    Ok(())
}

/// The row events of `tx` per table id, and in all.
fn row_counts(tx: &Transaction) -> (BTreeMap<u64, u64>, u64) {
    let mut per_table = BTreeMap::new();
    let mut total = 0;
    for ev in &tx.events {
        if let Event::Row(r) = ev {
            *per_table.entry(r.table_id).or_insert(0) += 1;
            total += 1;
        }
    }
    (per_table, total)
}
