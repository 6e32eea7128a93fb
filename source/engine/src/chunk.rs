//! A table read a chunk at a time, each chunk exactly as the table stood at one committed
//! sequence number (the relay's incremental snapshots place each chunk in the stream right
//! after that transaction).

use std::ops::Bound;
use std::sync::atomic::Ordering;

use binlog_format::schema::TableDef;

use crate::{is_node_local_table, Engine, Result, Row};

/// Rows of one table as they stood at one sequence number.
#[derive(Debug, Clone, PartialEq)]
pub struct TableChunk {
    /// The last committed transaction the rows include (none after it); durable.
    pub seq: u64,
    /// The table's definition at `seq`.
    pub def: TableDef,
    /// The rows (ring meta rows included), in key order.
    pub rows: Vec<Row>,
    /// The key bytes of the last row: pass them as `after` for the next chunk.
    pub last_key: Option<Vec<u8>>,
}

impl Engine {
    /// Up to `limit` rows of `database.name` after the key bytes `after` (`None`: from the
    /// first row), in key order, read under the state's lock: exactly the rows at the last
    /// committed sequence number. Returns once that number is durable, reading again if a
    /// binlog heal took transactions back meanwhile, so the chunk never holds a transaction
    /// a crash could lose. `None` for a table that does not exist or is the node's own.
    pub fn table_chunk(
        &self,
        database: &str,
        name: &str,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Option<TableChunk>> {
        if is_node_local_table(database, name) {
            return Ok(None);
        }
        loop {
            let heals = self.binlog_heals();
            let (chunk, lsn) = {
                let st = self.read();
                let Some(t) = st.table(database, name) else {
                    return Ok(None);
                };
                let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
                let mut rows = Vec::with_capacity(limit.min(t.len()));
                let mut last_key = None;
                for stored in t.stored_range(lower, Bound::Unbounded).take(limit) {
                    last_key = Some(stored.key_bytes().to_vec());
                    rows.push(stored.row());
                }
                let chunk = TableChunk {
                    seq: st.last_seq,
                    def: t.def.as_ref().clone(),
                    rows,
                    last_key,
                };
                // The log position of `seq`, set under the same lock as the state.
                (chunk, self.shared.applied_lsn.load(Ordering::Acquire))
            };
            if self.shared.binlog.is_some() {
                self.wait_durable(lsn)?;
            }
            if self.binlog_heals() == heals {
                return Ok(Some(chunk));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use binlog_format::{SyncPolicy, Value};

    use crate::fixtures;

    /// Chunks walk the table in key order, each after the last key of the one before, to an
    /// empty chunk; each stands at the sequence number it was read at.
    #[test]
    fn chunks_walk_a_table_in_key_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, mut s) = fixtures::sample_engine(dir.path(), SyncPolicy::Never);
        let ids: Vec<i64> = (0..25).rev().collect();
        for pair in ids.chunks(2) {
            fixtures::insert_ids(&mut s, "e", pair);
        }
        let mut after: Option<Vec<u8>> = None;
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        loop {
            let c = engine
                .table_chunk("d", "e", after.as_deref(), 10)
                .expect("chunk")
                .expect("table");
            assert_eq!(c.seq, engine.last_seq());
            sizes.push(c.rows.len());
            if c.rows.is_empty() {
                assert_eq!(c.last_key, None);
                break;
            }
            got.extend(c.rows.iter().map(|r| r[0].clone()));
            after = c.last_key;
        }
        assert_eq!(sizes, [10, 10, 5, 0]);
        let want: Vec<_> = (0..25).map(Value::Int).collect();
        assert_eq!(got, want);
        assert_eq!(engine.table_chunk("d", "none", None, 10).expect("ok"), None);
    }
}
