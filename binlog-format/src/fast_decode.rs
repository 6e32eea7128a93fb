//! A second decoder for the two payloads read most: transactions of row events (nearly every
//! record of a binlog) and rows (`Vec<Value>`, as the engine stores them). It reads the
//! bytes of `docs/format.md` straight from the slice and gives exactly what
//! [`codec::decode`](crate::codec::decode) gives.
//!
//! Why a second one: `codec::decode` must run bincode under an allocation budget, because a
//! crafted length prefix would otherwise make it allocate without bound, and bincode keeps that
//! budget by accounting for every field it reads; that bookkeeping was a third of the
//! decoding time. Here a length is checked against the bytes left before anything is
//! allocated, since every element takes at least one byte, which bounds memory the same way.
//!
//! Anything this decoder does not handle (DDL events, heartbeats, a variant added to the
//! format later) and anything it finds malformed makes it give up, and the caller falls back
//! to `codec::decode`, so errors keep bincode's wording and nothing new can be accepted
//! here that bincode would refuse. `tests/proptest.rs` checks both decoders against each
//! other on arbitrary records and on damaged ones.

use crate::events::{Cause, Event, Origin, Record, RowChange, RowEvent, Transaction};
use crate::value::{Date, DateTime, Value};

/// Reads one payload front to back; every method returns `None` on malformed or unexpected
/// input (the caller then falls back to bincode).
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    #[inline]
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.bytes.len() {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    #[inline]
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        Some(b)
    }

    /// bincode's varint: a byte below 251 is the value; 251, 252 and 253 announce a
    /// little-endian u16, u32 and u64. `width` is the widest form the type allows.
    #[inline]
    fn varint(&mut self, width: u8) -> Option<u64> {
        match self.u8()? {
            b @ 0..=250 => Some(u64::from(b)),
            251 if width >= 2 => Some(u64::from(u16::from_le_bytes(self.array()?))),
            252 if width >= 4 => Some(u64::from(u32::from_le_bytes(self.array()?))),
            253 if width >= 8 => Some(u64::from_le_bytes(self.array()?)),
            _ => None,
        }
    }

    #[inline]
    fn u16(&mut self) -> Option<u16> {
        self.varint(2).map(|v| v as u16)
    }

    #[inline]
    fn u32(&mut self) -> Option<u32> {
        self.varint(4).map(|v| v as u32)
    }

    #[inline]
    fn u64(&mut self) -> Option<u64> {
        self.varint(8)
    }

    /// Zig-zag: 0, -1, 1, -2, ... are 0, 1, 2, 3, ...
    #[inline]
    fn i64(&mut self) -> Option<i64> {
        let n = self.u64()?;
        Some(((n >> 1) as i64) ^ -((n & 1) as i64))
    }

    /// A length prefix of a sequence whose elements take at least one byte each: one larger
    /// than the bytes left cannot be right, and is refused before anything is allocated.
    #[inline]
    fn len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n <= self.bytes.len()).then_some(n)
    }

    #[inline]
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.len()?;
        Some(self.take(n)?.to_vec())
    }

    #[inline]
    fn string(&mut self) -> Option<String> {
        let n = self.len()?;
        std::str::from_utf8(self.take(n)?).ok().map(str::to_owned)
    }

    fn date(&mut self) -> Option<Date> {
        Some(Date {
            year: self.u16()?,
            month: self.u8()?,
            day: self.u8()?,
        })
    }

    fn value(&mut self) -> Option<Value> {
        Some(match self.u32()? {
            0 => Value::Null,
            1 => Value::Int(self.i64()?),
            2 => Value::UInt(self.u64()?),
            3 => Value::Float(f32::from_le_bytes(self.array()?)),
            4 => Value::Double(f64::from_le_bytes(self.array()?)),
            5 => Value::Decimal(self.string()?),
            6 => Value::Bytes(self.bytes()?),
            7 => Value::Text(self.string()?),
            8 => Value::Date(self.date()?),
            9 => Value::DateTime(DateTime {
                date: self.date()?,
                hour: self.u8()?,
                minute: self.u8()?,
                second: self.u8()?,
                micros: self.u32()?,
            }),
            10 => Value::Timestamp(self.i64()?),
            11 => Value::Json(self.string()?),
            _ => return None,
        })
    }

    fn values(&mut self) -> Option<Vec<Value>> {
        let n = self.len()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.value()?);
        }
        Some(out)
    }

    fn cause(&mut self) -> Option<Cause> {
        Some(match self.u32()? {
            0 => Cause::Insert,
            1 => Cause::Overwrite,
            2 => Cause::MetaUpdate,
            3 => Cause::Update,
            4 => Cause::PrefixDelete,
            5 => Cause::TtlPurge,
            6 => Cause::DeleteOldest,
            7 => Cause::Truncate,
            8 => Cause::Delete,
            _ => return None,
        })
    }

    fn row_event(&mut self) -> Option<RowEvent> {
        let table_id = self.u64()?;
        let change = match self.u32()? {
            0 => RowChange::Write {
                row: self.values()?,
            },
            1 => RowChange::Update {
                key: self.values()?,
                after: self.values()?,
                before: match self.u8()? {
                    0 => None,
                    1 => Some(self.values()?),
                    _ => return None,
                },
            },
            2 => RowChange::Delete {
                key: self.values()?,
            },
            _ => return None,
        };
        Some(RowEvent {
            table_id,
            change,
            cause: self.cause()?,
        })
    }

    fn transaction(&mut self) -> Option<Transaction> {
        let server_id = self.u32()?;
        let seq = self.u64()?;
        let commit_time_us = self.i64()?;
        let origin = match self.u8()? {
            0 => None,
            1 => Some(Origin {
                server_id: self.u32()?,
                seq: self.u64()?,
            }),
            _ => return None,
        };
        let n = self.len()?;
        let mut events = Vec::with_capacity(n);
        for _ in 0..n {
            // DDL events are rare and large: bincode's own decoder takes the whole record.
            if self.u32()? != 0 {
                return None;
            }
            events.push(Event::Row(self.row_event()?));
        }
        Some(Transaction {
            server_id,
            seq,
            commit_time_us,
            origin,
            events,
        })
    }

    /// The whole payload was used: leftover bytes are an error, as in `codec::decode`.
    fn finish<T>(&self, value: T) -> Option<T> {
        self.bytes.is_empty().then_some(value)
    }
}

/// A record, when it is a transaction of row events and well formed; `None` otherwise.
pub(crate) fn record(bytes: &[u8]) -> Option<Record> {
    let mut c = Cursor { bytes };
    if c.u32()? != 0 {
        return None;
    }
    let tx = c.transaction()?;
    c.finish(Record::Transaction(tx))
}

/// A `Vec<Value>` when well formed; `None` otherwise.
pub(crate) fn row(bytes: &[u8]) -> Option<Vec<Value>> {
    let mut c = Cursor { bytes };
    let row = c.values()?;
    c.finish(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;
    use crate::events::samples;

    #[test]
    fn sample_transactions_decode_as_bincode_does() {
        for tx in samples::transactions() {
            let rec = Record::Transaction(tx);
            let bytes = codec::encode(&rec).expect("encode");
            let has_ddl = rec
                .as_transaction()
                .is_some_and(|t| t.events.iter().any(|e| matches!(e, Event::Ddl(_))));
            match record(&bytes) {
                Some(r) => assert_eq!(r, rec),
                None => assert!(has_ddl, "gave up on {rec:?}"),
            }
        }
    }

    #[test]
    fn non_canonical_varints_are_read_like_bincode() {
        // 5 as 251 + u16: bincode accepts it, so must this decoder.
        let bytes = [1u8, 2, 251, 5, 0];
        assert_eq!(row(&bytes), Some(vec![Value::UInt(5)]));
        assert_eq!(
            codec::decode::<Vec<Value>>(&bytes).expect("bincode"),
            vec![Value::UInt(5)]
        );
        // A u64 form where a u32 is expected (the variant index) is refused by both.
        let bytes = [1u8, 253, 2, 0, 0, 0, 0, 0, 0, 0, 5];
        assert_eq!(row(&bytes), None);
        assert!(codec::decode::<Vec<Value>>(&bytes).is_err());
    }

    /// Every variant tag and every first byte of its first field, followed by up to 16 bytes
    /// of each varint marker: whatever this decoder accepts, bincode decodes to the same row.
    #[test]
    fn every_short_value_encoding_agrees_with_bincode() {
        let mut accepted = 0;
        for tag in 0u8..=12 {
            for first in 0u8..=255 {
                for filler in [2u8, 251, 252, 253] {
                    for extra in 0..=16 {
                        let mut bytes = vec![1, tag, first];
                        bytes.resize(3 + extra, filler);
                        let Some(fast) = row(&bytes) else { continue };
                        accepted += 1;
                        let slow = codec::decode::<Vec<Value>>(&bytes)
                            .unwrap_or_else(|e| panic!("{bytes:?}: bincode refused: {e}"));
                        assert_eq!(
                            codec::encode(&fast).expect("encode"),
                            codec::encode(&slow).expect("encode"),
                            "{bytes:?}"
                        );
                    }
                }
            }
        }
        assert!(accepted > 1000, "only {accepted} encodings accepted");
    }

    #[test]
    fn lengths_beyond_the_payload_give_up_without_allocating() {
        let bytes = [253u8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0];
        assert_eq!(row(&bytes), None);
        let mut text = vec![1u8, 7];
        text.extend_from_slice(&bytes);
        assert_eq!(row(&text), None);
    }

    #[test]
    fn leftover_bytes_give_up() {
        let mut bytes = codec::encode(&vec![Value::Int(1)]).expect("encode");
        bytes.push(0);
        assert_eq!(row(&bytes), None);
    }
}
