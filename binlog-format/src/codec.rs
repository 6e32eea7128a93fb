//! The one serialization configuration of the format: bincode 2's `standard()` configuration
//! (little endian, variable-length integers, zig-zag for signed integers, enum variants as
//! varint indices). `docs/format.md` spells out what that means byte by byte. Changing the
//! configuration changes the format version.
//!
//! The format is defined as the serde encoding of the event types in this configuration. The
//! codec runs on bincode's own `Encode`/`Decode` derives instead, which skip serde's visitors
//! (encode about 35% and decode about 40% faster); `tests/proptest.rs` checks that both give
//! the same bytes for any record, so a `#[serde(...)]` attribute that would change the bytes
//! cannot slip in unnoticed.

use bincode::config::{Configuration, LittleEndian, Varint};
use bincode::{Decode, Encode};

/// Payload sizes that get a decoding budget of 64 times their size (see [`decode`]).
const SMALL: usize = 64 << 10;
const MEDIUM: usize = 2 << 20;

use crate::error::{Error, Result};
use crate::{Record, Transaction, Value};

/// The configuration every payload of format version 1 is encoded with.
pub const CONFIG: Configuration<LittleEndian, Varint> = bincode::config::standard();

/// Encodes a value into a fresh buffer.
pub fn encode<T: Encode>(value: &T) -> Result<Vec<u8>> {
    bincode::encode_to_vec(value, CONFIG).map_err(|e| Error::Encode(e.to_string()))
}

/// Appends the encoding of a value to `buf`.
pub fn encode_into<T: Encode>(value: &T, buf: &mut Vec<u8>) -> Result<()> {
    bincode::encode_into_writer(value, VecWriter(buf), CONFIG)
        .map_err(|e| Error::Encode(e.to_string()))
}

/// Appends straight to a `Vec`: bincode writes most fields a byte or two at a time, and going
/// through `std::io::Write` for each of those cost a quarter of the append path's time.
struct VecWriter<'a>(&'a mut Vec<u8>);

impl bincode::enc::write::Writer for VecWriter<'_> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::result::Result<(), bincode::error::EncodeError> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

/// The exact number of bytes [`encode`] produces, without allocating.
pub fn encoded_len<T: Encode>(value: &T) -> Result<usize> {
    let mut size = bincode::enc::write::SizeWriter::default();
    bincode::encode_into_writer(value, &mut size, CONFIG)
        .map_err(|e| Error::Encode(e.to_string()))?;
    Ok(size.bytes_written)
}

/// Decodes a value that must fill `bytes` exactly: leftover bytes mean the payload is not what
/// the frame says it is, so they are an error, not something to skip.
///
/// bincode allocates what a length prefix announces before reading the elements, so a crafted
/// length (a record produced to the replication topic by someone else, a damaged file whose
/// checksum was recomputed) could make it try to allocate exabytes, and a failed allocation
/// aborts the process. The decoder is therefore given a budget: 64 times the payload, which
/// no real payload reaches (the largest in-memory size per encoded byte is a `Value`'s 32
/// bytes for a one-byte NULL). Payloads over 2 MiB are local files (snapshots, very large
/// transactions) read without a budget: Kafka's default record limit is 1 MB.
pub fn decode<T: Decode<()>>(bytes: &[u8]) -> Result<T> {
    let decoded = if bytes.len() <= SMALL {
        bincode::decode_from_slice::<T, _>(bytes, CONFIG.with_limit::<{ 64 * SMALL }>())
    } else if bytes.len() <= MEDIUM {
        bincode::decode_from_slice::<T, _>(bytes, CONFIG.with_limit::<{ 64 * MEDIUM }>())
    } else {
        bincode::decode_from_slice::<T, _>(bytes, CONFIG)
    };
    let (value, used) = decoded.map_err(|e| match e {
        bincode::error::DecodeError::LimitExceeded => {
            Error::Decode("a length prefix exceeds what the payload can hold".into())
        }
        e => Error::Decode(e.to_string()),
    })?;
    if used != bytes.len() {
        return Err(Error::Decode(format!(
            "{} leftover bytes after a {}-byte payload",
            bytes.len() - used,
            used
        )));
    }
    Ok(value)
}

/// Appends a record's encoding to `buf`: the same bytes as [`encode_into`], transactions of row
/// events written by the crate's hand-written encoder (`fast_codec`) rather than bincode.
pub fn encode_record_into(record: &Record, buf: &mut Vec<u8>) -> Result<()> {
    match record {
        Record::Transaction(tx) => encode_transaction_record_into(tx, buf),
        Record::Heartbeat(_) => encode_into(record, buf),
    }
}

/// Appends the encoding of `Record::Transaction(tx)` without building the record.
pub fn encode_transaction_record_into(tx: &Transaction, buf: &mut Vec<u8>) -> Result<()> {
    if crate::fast_codec::put_transaction_record(buf, tx) {
        return Ok(());
    }
    // The variant index of `Record::Transaction`, then the transaction.
    buf.push(0);
    encode_into(tx, buf)
}

/// A transaction's events encoded before the rest of its record: a writer that must number
/// its transactions in order under a lock encodes the events first, outside it, and under
/// the lock only adds the head (server id, sequence number, time). It also tells where each
/// written row's encoding lies, so that a caller that keeps rows encoded (the engine) copies
/// them instead of encoding them again. Only transactions of row events are encoded ahead;
/// others are encoded whole by [`EncodedEvents::encode_record`].
#[derive(Debug, Default)]
pub struct EncodedEvents {
    bytes: Vec<u8>,
    rows: Vec<Option<std::ops::Range<usize>>>,
    count: usize,
    ahead: bool,
}

impl EncodedEvents {
    /// Encodes `events`, replacing what was held.
    pub fn encode(&mut self, events: &[crate::Event]) {
        self.bytes.clear();
        self.rows.clear();
        self.count = events.len();
        self.ahead = crate::fast_codec::put_events(&mut self.bytes, events, Some(&mut self.rows));
    }

    /// The encoding of the row that event `at` writes (exactly [`encode_row_into`]'s bytes),
    /// when the events were encoded ahead and that one is a `Write`.
    pub fn row(&self, at: usize) -> Option<&[u8]> {
        let range = self.rows.get(at)?.clone()?;
        self.bytes.get(range)
    }

    /// Appends the encoding of `Record::Transaction(tx)`, the same bytes as
    /// [`encode_transaction_record_into`]. `tx.events` must be the events last given to
    /// [`EncodedEvents::encode`]; a transaction with another number of events is refused.
    pub fn encode_record(&self, tx: &Transaction, buf: &mut Vec<u8>) -> Result<()> {
        if tx.events.len() != self.count {
            return Err(Error::Invalid(format!(
                "transaction seq {} has {} events, but {} were encoded ahead",
                tx.seq,
                tx.events.len(),
                self.count
            )));
        }
        if !self.ahead {
            return encode_transaction_record_into(tx, buf);
        }
        crate::fast_codec::put_transaction_head(buf, tx);
        buf.extend_from_slice(&self.bytes);
        Ok(())
    }

    /// Lets go of the memory of a huge transaction, so that a thread does not keep it.
    pub fn shrink(&mut self, max: usize) {
        if self.bytes.capacity() > max {
            *self = EncodedEvents::default();
        }
    }
}

/// Appends a row's encoding (`Vec<Value>`) to `buf`, like [`encode_record_into`].
pub fn encode_row_into(row: &[Value], buf: &mut Vec<u8>) {
    crate::fast_codec::put_row(buf, row);
}

/// Decodes a record: transactions of row events through the crate's hand-written decoder
/// (`fast_codec`), anything else (and anything malformed, for bincode's error) through
/// [`decode`]. Same results.
pub fn decode_record(bytes: &[u8]) -> Result<Record> {
    match crate::fast_codec::record(bytes) {
        Some(record) => Ok(record),
        None => decode(bytes),
    }
}

/// A record with a transaction's events left unread (`events` empty): what a reader needs
/// that passes the record's frame on as it is and only looks at its sequence number (the
/// primary's replication stream). The events are not checked: a record whose head is well
/// formed passes here whatever follows it (its frame's checksum was checked), and is judged
/// by whoever decodes it whole. Records other than transactions are decoded whole.
pub fn decode_record_head(bytes: &[u8]) -> Result<Record> {
    match crate::fast_codec::record_head(bytes) {
        Some(record) => Ok(record),
        None => decode_record(bytes),
    }
}

/// Decodes a row (`Vec<Value>`, how the engine stores rows) like [`decode_record`] does.
pub fn decode_row(bytes: &[u8]) -> Result<Vec<Value>> {
    match crate::fast_codec::row(bytes) {
        Some(row) => Ok(row),
        None => decode(bytes),
    }
}

/// Value `index` of an encoded row (`None` when the row is shorter), decoding only what lies
/// before it: the engine reads a ring's meta row for its meta column on every insert.
pub fn decode_row_value(bytes: &[u8], index: usize) -> Result<Option<Value>> {
    match crate::fast_codec::row_value(bytes, index) {
        Some(v) => Ok(Some(v)),
        None => Ok(decode_row(bytes)?.into_iter().nth(index)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encoding the events ahead gives the same record, the recorded places of written rows
    /// hold exactly each row's own encoding, and other events get none.
    #[test]
    fn events_encoded_ahead_make_the_same_record() {
        use crate::{Event, RowChange};
        let mut marked_writes = 0;
        let mut txs = crate::events::samples::transactions();
        // The samples' row events alone, too (the first sample mixes in DDL).
        let mut rows_only = txs[0].clone();
        rows_only.events.retain(|e| matches!(e, Event::Row(_)));
        txs.push(rows_only);
        let mut ahead = EncodedEvents::default();
        for tx in txs {
            let (mut plain, mut marked) = (Vec::new(), Vec::new());
            encode_transaction_record_into(&tx, &mut plain).expect("encode");
            ahead.encode(&tx.events);
            ahead.encode_record(&tx, &mut marked).expect("encode");
            assert_eq!(plain, marked);
            assert_eq!(
                decode_record(&marked).expect("decode"),
                Record::Transaction(tx.clone())
            );
            for (at, ev) in tx.events.iter().enumerate() {
                match (ev, ahead.row(at)) {
                    (Event::Row(r), Some(bytes)) => {
                        let RowChange::Write { row } = &r.change else {
                            panic!("a row for a non-write: {r:?}");
                        };
                        let mut own = Vec::new();
                        encode_row_into(row, &mut own);
                        assert_eq!(bytes, own.as_slice());
                        marked_writes += 1;
                    }
                    (Event::Row(r), None) => {
                        let all_rows = tx.events.iter().all(|e| matches!(e, Event::Row(_)));
                        assert!(
                            !all_rows || !matches!(r.change, RowChange::Write { .. }),
                            "{r:?}"
                        );
                    }
                    (_, None) => {}
                    (other, Some(_)) => panic!("a row for {other:?}"),
                }
            }
            // Another transaction's events are refused, not mixed in.
            if let Some(first) = tx.events.first() {
                let mut other = tx.clone();
                other.events.push(first.clone());
                assert!(ahead.encode_record(&other, &mut Vec::new()).is_err());
            }
        }
        assert!(marked_writes > 0, "the samples hold writes");
    }

    #[test]
    fn leftover_bytes_are_an_error() {
        let mut bytes = encode(&7u32).expect("encode");
        bytes.push(0);
        assert!(matches!(decode::<u32>(&bytes), Err(Error::Decode(_))));
    }

    /// Lengths far beyond the payload are refused without allocating them (the process
    /// would abort otherwise), in the small and the middle budget class.
    #[test]
    fn huge_length_prefixes_are_errors_not_aborts() {
        let huge = [253, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f];
        // Text, Bytes and a list of values claiming about 2^60 elements.
        for prefix in [&[7u8][..], &[6u8][..], &[][..]] {
            let mut bytes = prefix.to_vec();
            bytes.extend_from_slice(&huge);
            bytes.push(0);
            if prefix.is_empty() {
                assert!(decode::<Vec<crate::Value>>(&bytes).is_err());
            } else {
                assert!(decode::<crate::Value>(&bytes).is_err());
            }
        }
        // A large payload (the middle budget) with a crafted length inside.
        let mut bytes = vec![7u8];
        bytes.extend_from_slice(&huge);
        bytes.resize(SMALL + 10, 0);
        assert!(decode::<crate::Value>(&bytes).is_err());
    }

    /// Payloads of every budget class decode, the largest without a budget.
    #[test]
    fn payloads_of_every_size_decode() {
        for n in [10, SMALL, MEDIUM, MEDIUM + 1] {
            let v = vec![crate::Value::Bytes(vec![7; n]), crate::Value::Null];
            let bytes = encode(&v).expect("encode");
            assert_eq!(decode::<Vec<crate::Value>>(&bytes).expect("decode"), v);
        }
    }

    #[test]
    fn varint_layout_is_as_documented() {
        // docs/format.md: < 251 one byte; 251 + u16; 252 + u32; 253 + u64.
        assert_eq!(encode(&250u64).expect("encode"), vec![250]);
        assert_eq!(encode(&251u64).expect("encode"), vec![251, 251, 0]);
        assert_eq!(
            encode(&70_000u64).expect("encode"),
            vec![252, 0x70, 0x11, 0x01, 0x00]
        );
        // Signed integers are zig-zag encoded first.
        assert_eq!(encode(&-1i64).expect("encode"), vec![1]);
        assert_eq!(encode(&1i64).expect("encode"), vec![2]);
    }
}
