//! The tables as of the record the relay has read to (their definitions, from segment headers
//! and DDL events) with the partition counts of their change topics, and the per-transaction
//! produce: a transaction's change records first, then its replication record.

use std::collections::HashMap;

use binlog_format::{DdlEvent, Event, Position, RowEvent, TableDef, Transaction};
use ringrep_cdc::kafka::{self, SourceInfo};
use ringrep_kafka::{ensure_topic, kafka_error, KafkaSettings, Result};

use crate::producer::Outbox;

/// Table definitions and change topics known to a run.
#[derive(Default)]
pub(crate) struct Tables {
    /// Definitions by table id, as of the last record read.
    defs: HashMap<u64, TableDef>,
    /// Partition count of each change topic looked up (or created) in this run.
    topics: HashMap<String, i32>,
}

impl Tables {
    /// Starts over from the definitions in a new segment's header.
    pub(crate) fn reset(&mut self, defs: Vec<TableDef>) {
        self.defs = defs.into_iter().map(|d| (d.id, d)).collect();
    }

    /// Follows `tx`'s DDL, and when `relay_it` produces its records: one change record per row
    /// event (more with tombstones), then its replication record.
    pub(crate) async fn relay_transaction(
        &mut self,
        settings: &KafkaSettings,
        outbox: &mut Outbox,
        position: Position,
        tx: &Transaction,
        relay_it: bool,
    ) -> Result<()> {
        for (index, ev) in tx.events.iter().enumerate() {
            match ev {
                Event::Ddl(DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table }) => {
                    self.defs.insert(table.id, table.clone());
                }
                Event::Ddl(DdlEvent::DropTable { table_id, .. }) => {
                    self.defs.remove(table_id);
                }
                Event::Ddl(_) => {}
                Event::Row(row) if relay_it => {
                    let src = SourceInfo {
                        server_id: tx.server_id,
                        seq: tx.seq,
                        position,
                        commit_time_us: tx.commit_time_us,
                        index: index as u32,
                    };
                    self.relay_row(settings, outbox, row, &src).await?;
                }
                Event::Row(_) => {}
            }
        }
        if relay_it {
            let rec = kafka::replication_record(&settings.topic_prefix, tx)
                .map_err(|e| kafka_error("encoding", e))?;
            outbox.send_transaction(&rec, tx.seq).await?;
        }
        Ok(())
    }

    /// Produces the change records of one row event, creating its change topic on first use.
    async fn relay_row(
        &mut self,
        settings: &KafkaSettings,
        outbox: &mut Outbox,
        row: &RowEvent,
        src: &SourceInfo,
    ) -> Result<()> {
        let def = self.defs.get(&row.table_id).ok_or_else(|| {
            kafka_error(
                "binlog",
                format!(
                    "seq {}: table id {} is not in the schema",
                    src.seq, row.table_id
                ),
            )
        })?;
        let ctopic = kafka::change_topic(&settings.topic_prefix, &def.database, &def.name);
        let partitions = match self.topics.get(&ctopic) {
            Some(p) => *p,
            None => {
                let p = ensure_topic(settings, &ctopic, settings.partitions).await?;
                self.topics.insert(ctopic.clone(), p);
                p
            }
        };
        for rec in kafka::change_records(
            &settings.topic_prefix,
            def,
            row,
            src,
            partitions,
            settings.tombstones,
        ) {
            outbox.send_change(&rec).await?;
        }
        Ok(())
    }
}
