//! The replication topic's records: one per transaction, the value one frame exactly as in a
//! binlog segment, so a consumer checks and decodes it with the code it reads segments with.

use binlog_format::error::{Position, Result};
use binlog_format::events::{Record, Transaction};
use binlog_format::format::FormatVersion;
use binlog_format::frame::write_frame_with;

use super::{replication_topic, KafkaRecord, SEQ_HEADER};

/// Header of a replication record: the last sequence number whose records, on every topic,
/// the broker had acknowledged when this record was produced. A relay that restarts replays
/// the change records after it, skipping those a partition already holds.
pub const ACKED_HEADER: &str = "ringrep.acked_seq";

/// The replication-topic record of one transaction. `acked_seq` goes in [`ACKED_HEADER`].
pub fn replication_record(prefix: &str, tx: &Transaction, acked_seq: u64) -> Result<KafkaRecord> {
    let mut value = Vec::new();
    write_frame_with(&mut value, |p| {
        binlog_format::codec::encode_transaction_record_into(tx, p)
    })?;
    Ok(KafkaRecord {
        topic: replication_topic(prefix),
        partition: Some(0),
        key: tx.server_id.to_string().into_bytes(),
        value: Some(value),
        headers: vec![
            (SEQ_HEADER.into(), tx.seq.to_string()),
            ("ringrep.server_id".into(), tx.server_id.to_string()),
            (
                "ringrep.format_version".into(),
                (FormatVersion::CURRENT as u16).to_string(),
            ),
            (ACKED_HEADER.into(), acked_seq.to_string()),
        ],
    })
}

/// Decodes a replication-topic value back into its transaction, checking the frame.
pub fn decode_replication_value(value: &[u8]) -> Result<Transaction> {
    let corrupt = |reason: String| binlog_format::error::Error::Corruption {
        position: Position::default(),
        reason,
    };
    match binlog_format::frame::scan_frame(value, binlog_format::format::DEFAULT_MAX_FRAME) {
        binlog_format::frame::FrameScan::Frame { payload, len } if len == value.len() => {
            match binlog_format::codec::decode_record(payload)? {
                Record::Transaction(tx) => Ok(tx),
                Record::Heartbeat(_) => Err(corrupt("heartbeat on the replication topic".into())),
            }
        }
        binlog_format::frame::FrameScan::Frame { .. } => {
            Err(corrupt("bytes after the frame".into()))
        }
        binlog_format::frame::FrameScan::Incomplete { .. } => {
            Err(corrupt("truncated frame".into()))
        }
        binlog_format::frame::FrameScan::Corrupt { reason, .. } => Err(corrupt(reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::events::samples;

    #[test]
    fn replication_value_round_trips() {
        for tx in samples::transactions() {
            let rec = replication_record("ringrep", &tx, 3).expect("record");
            assert_eq!(rec.topic, "ringrep.replication");
            let back =
                decode_replication_value(rec.value.as_deref().expect("value")).expect("decode");
            assert_eq!(back, tx);
            assert!(rec.headers.contains(&(ACKED_HEADER.into(), "3".into())));
        }
    }
}
