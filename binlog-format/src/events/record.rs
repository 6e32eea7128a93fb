//! What a frame of a segment holds: the segment header (first frame) and the records after it.
//!
//! Layout: `Record` variants: 0 `Transaction`, 1 `Heartbeat`. `SegmentHeader`:
//! `server_id: varint u32, first_seq: varint u64, created_us: zig-zag varint i64,
//! databases: Vec<String>, tables: Vec<TableDef>`.

use serde::{Deserialize, Serialize};

use super::{Heartbeat, Transaction};
use crate::schema::TableDef;

/// One frame's payload after a segment's header: what the writer appends and readers,
/// tailers and the Kafka relay hand on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub enum Record {
    /// A committed transaction. Variant index 0.
    Transaction(Transaction),
    /// A heartbeat of an idle primary. Variant index 1.
    Heartbeat(Heartbeat),
}

impl Record {
    /// The transaction, or `None` for a heartbeat.
    pub fn as_transaction(&self) -> Option<&Transaction> {
        match self {
            Record::Transaction(t) => Some(t),
            Record::Heartbeat(_) => None,
        }
    }
}

/// The first frame of every segment: enough schema to read the segment on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct SegmentHeader {
    /// The server that writes the binlog; the same as in the segment's prelude.
    pub server_id: u32,
    /// The sequence number the first transaction of this segment will have.
    pub first_seq: u64,
    /// Microseconds since the Unix epoch when the segment was created.
    pub created_us: i64,
    /// Every database as it was when the segment was opened, tables or not.
    pub databases: Vec<String>,
    /// Every table as it was when the segment was opened.
    pub tables: Vec<TableDef>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;

    #[test]
    fn header_and_records_round_trip() {
        let header = crate::events::samples::header();
        let bytes = codec::encode(&header).expect("encode");
        assert_eq!(
            codec::decode::<SegmentHeader>(&bytes).expect("decode"),
            header
        );
        for tx in crate::events::samples::transactions() {
            let rec = Record::Transaction(tx);
            let bytes = codec::encode(&rec).expect("encode");
            assert_eq!(codec::decode::<Record>(&bytes).expect("decode"), rec);
        }
    }
}
