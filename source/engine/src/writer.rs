//! The native batch writer, the spec's NdbRingBufferWriter: rows queued with `add_row` are
//! sent in batches of consecutive rows with one prefix, each batch reading the prefix's meta
//! row once and writing it once; `flush` sends the last batch. A row that overwrites an
//! occupied slot updates it: columns the row does not set keep the old row's values, so set
//! every column whose value matters (on a TTL ring every column must be set, error 4359).
//! After any error the writer refuses further use; roll back and make a new one.

use binlog_format::schema::TableDef;
use binlog_format::Value;

use crate::error::{code, Error, Result};
use crate::Session;

/// The native batch writer (RonDB's `NdbRingBufferWriter`): inserts into one ring table
/// without SQL, many rows per transaction, with the spec's errors 4118, 4358 and 4359.
pub struct RingWriter<'s> {
    session: &'s mut Session,
    def: TableDef,
    columns: Option<Vec<usize>>,
    /// The queued rows' values: the first `queued` entries. The rest are rows already sent,
    /// kept (empty) so that their memory serves the rows that follow.
    batch: Vec<Vec<Value>>,
    queued: usize,
    batch_prefix: Option<Vec<Value>>,
    failed: Option<Error>,
    written: u64,
}

impl std::fmt::Debug for RingWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingWriter")
            .field("table", &self.def.qualified_name())
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl<'s> RingWriter<'s> {
    /// A writer for `table` in `session`'s transaction; error 4118 when it is not a ring.
    pub fn new(session: &'s mut Session, table: &TableDef) -> Result<RingWriter<'s>> {
        if table.ring.is_none() {
            return Err(Error::parameter("table is not a ring buffer table"));
        }
        Ok(RingWriter {
            session,
            def: table.clone(),
            columns: None,
            batch: Vec::new(),
            queued: 0,
            batch_prefix: None,
            failed: None,
            written: 0,
        })
    }

    fn fail(&mut self, e: Error) -> Error {
        self.failed = Some(e.clone());
        e
    }

    fn usable(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(Error::new(
                code::NDB_PARAMETER_ERROR,
                format!(
                    "Parameter error in API call: writer failed earlier ({})",
                    e.message
                ),
            )),
            None => Ok(()),
        }
    }

    /// Queues one row given as (column position, value) pairs: the user columns it sets (never
    /// the slot or meta column). Rows are sent when the prefix changes and at `flush`.
    pub fn add_row(&mut self, values: &[(usize, Value)]) -> Result<()> {
        self.usable()?;
        let (slot, meta) = match &self.def.ring {
            Some(r) => (r.slot_column, r.meta_column),
            None => return Err(Error::parameter("not a ring")),
        };
        let width = self.def.columns.len();
        let sets = |c: usize| values.iter().any(|(vc, _)| *vc == c);
        if values
            .iter()
            .any(|&(c, _)| c == slot || c == meta || c >= width)
        {
            return Err(self.fail(Error::parameter(
                "the mask may not include the slot or meta column",
            )));
        }
        if !self.def.prefix_columns().iter().all(|&c| sets(c)) {
            return Err(self.fail(Error::parameter(
                "the row must set every primary-key prefix column",
            )));
        }
        if self.def.ttl.is_some() && !(0..width).all(|c| c == slot || c == meta || sets(c)) {
            return Err(self.fail(Error::new(
                code::NDB_TTL_MUST_SET_ALL,
                "Inserts on a ring buffer table with TTL must set every column",
            )));
        }
        // In column order; copied only when the caller's is not (the values are copied once,
        // into the batch, at the end).
        let row_values: std::borrow::Cow<'_, [(usize, Value)]> =
            if values.windows(2).all(|w| w[0].0 < w[1].0) {
                std::borrow::Cow::Borrowed(values)
            } else {
                let mut v = values.to_vec();
                v.sort_by_key(|(c, _)| *c);
                std::borrow::Cow::Owned(v)
            };
        let value_of = |c: usize| {
            row_values
                .iter()
                .find(|(rc, _)| *rc == c)
                .map_or(&Value::Null, |(_, v)| v)
        };
        // A new prefix or another mask sends the batch so far. (Compared in place: most rows
        // continue the batch.)
        let same_prefix = self.batch_prefix.as_ref().is_some_and(|p| {
            let cols = self.def.prefix_columns();
            cols.len() == p.len() && cols.iter().zip(p).all(|(&c, v)| value_of(c) == v)
        });
        let same_columns = self.columns.as_ref().is_some_and(|c| {
            c.len() == row_values.len() && c.iter().zip(row_values.iter()).all(|(a, (b, _))| a == b)
        });
        if (self.batch_prefix.is_some() && !same_prefix)
            || (self.columns.is_some() && !same_columns)
        {
            self.send()?;
        }
        if !same_prefix {
            let prefix = self.batch_prefix.get_or_insert_with(Vec::new);
            prefix.clear();
            prefix.extend(
                self.def
                    .prefix_columns()
                    .iter()
                    .map(|&c| value_of(c).clone()),
            );
        }
        if !same_columns {
            self.columns = Some(row_values.iter().map(|(c, _)| *c).collect());
        }
        let values = row_values.iter().map(|(_, v)| v.clone());
        match self.batch.get_mut(self.queued) {
            Some(row) => {
                // Empty unless a failed send left it: then the writer refuses use anyway.
                row.clear();
                row.extend(values)
            }
            None => self.batch.push(values.collect()),
        }
        self.queued += 1;
        Ok(())
    }

    fn send(&mut self) -> Result<()> {
        if self.queued == 0 {
            return Ok(());
        }
        let cols = self.columns.as_deref().unwrap_or_default();
        self.session.begin_statement();
        // Each row's values are drained, not taken: its vector serves a later row.
        let rows = self.batch[..self.queued].iter_mut().map(|r| r.drain(..));
        self.queued = 0;
        let r = self.session.insert_native(&self.def, cols, rows);
        match self.session.end_statement(r) {
            Ok(n) => {
                self.written += n;
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Sends the last batch and its meta row update. Must be called before commit.
    pub fn flush(&mut self) -> Result<u64> {
        self.usable()?;
        self.send()?;
        Ok(self.written)
    }

    /// Deletes up to `max_n` of the oldest rows of one prefix; error 4358 on a TTL ring.
    pub fn delete_oldest(&mut self, prefix: &[Value], max_n: u32) -> Result<u32> {
        self.usable()?;
        self.send()?;
        self.session.begin_statement();
        let r = self.session.delete_oldest(&self.def, prefix, max_n);
        match self.session.end_statement(r) {
            Ok(n) => Ok(n),
            // 4358 leaves the transaction unchanged and the writer usable (the spec).
            Err(e) if e.code == code::NDB_DELETE_OLDEST_TTL => Err(e),
            Err(e) => Err(self.fail(e)),
        }
    }
}
