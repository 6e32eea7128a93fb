//! Transaction records: everything one commit changed.
//!
//! Layout: `server_id: varint u32, seq: varint u64, commit_time_us: zig-zag varint i64,
//! origin: Option<Origin> (0, or 1 then server_id and seq), events: Vec<Event>`.
//! `Event` variants: 0 `Row(RowEvent)`, 1 `Ddl(DdlEvent)`.

use serde::{Deserialize, Serialize};

use super::{DdlEvent, RowEvent};

/// Where a re-logged transaction first committed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode,
)]
pub struct Origin {
    /// The server id of the primary where the transaction first committed.
    pub server_id: u32,
    /// The transaction's sequence number in that primary's binlog.
    pub seq: u64,
}

/// One change inside a transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub enum Event {
    /// A row written, updated or deleted. Variant index 0.
    Row(RowEvent),
    /// A schema change. Variant index 1.
    Ddl(DdlEvent),
}

/// Everything one commit changed, in the order it was done. A transaction is one record, so
/// a reader sees all of it or none of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct Transaction {
    /// The server that wrote this record.
    pub server_id: u32,
    /// The commit's sequence number: gapless per server, one more than the previous
    /// transaction's, starting at [`WriterOptions::first_seq`](crate::WriterOptions::first_seq)
    /// (1 unless set otherwise). Heartbeats take none.
    pub seq: u64,
    /// Microseconds since the Unix epoch at commit.
    pub commit_time_us: i64,
    /// Set when a replica re-logs a transaction it applied.
    pub origin: Option<Origin>,
    /// The changes, in the order they were made. May be empty.
    pub events: Vec<Event>,
}

impl Transaction {
    /// The row events, in order, skipping DDL events.
    pub fn row_events(&self) -> impl Iterator<Item = &RowEvent> {
        self.events.iter().filter_map(|e| match e {
            Event::Row(r) => Some(r),
            Event::Ddl(_) => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;

    #[test]
    fn transactions_round_trip() {
        for tx in crate::events::samples::transactions() {
            let bytes = codec::encode(&tx).expect("encode");
            assert_eq!(codec::encoded_len(&tx).expect("len"), bytes.len());
            assert_eq!(codec::decode::<Transaction>(&bytes).expect("decode"), tx);
        }
    }
}
