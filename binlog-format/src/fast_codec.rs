//! A second codec for the two payloads handled most: transactions of row events (nearly every
//! record of a binlog) and rows (`Vec<Value>`, as the engine stores them). It reads and
//! writes the bytes of `docs/format.md` straight from and into a slice, and gives exactly
//! what [`codec::decode`](crate::codec::decode) and [`codec::encode_into`](crate::codec::encode_into)
//! give.
//!
//! Why a second one: `codec::decode` must run bincode under an allocation budget, because a
//! crafted length prefix would otherwise make it allocate without bound, and bincode keeps that
//! budget by accounting for every field it reads; that bookkeeping was a third of the
//! decoding time. Here a length is checked against the bytes left before anything is
//! allocated, since every element takes at least one byte, which bounds memory the same way.
//! On the way out, bincode writes each small field through its writer one call at a time;
//! here the record's size is reserved once and each field is pushed.
//!
//! Anything this codec does not handle (DDL events, heartbeats, a variant added to the format
//! later) and anything it finds malformed makes it give up, and the caller uses bincode, so
//! errors keep bincode's wording and nothing new can be accepted here that bincode would
//! refuse. `tests/proptest.rs` checks both codecs against each other on arbitrary records
//! and on damaged ones; the golden files pin the bytes.

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
            12 => Value::Time(self.i64()?),
            13 => Value::Bit(self.u64()?),
            _ => return None,
        })
    }

    /// Moves past one value without building it.
    fn skip_value(&mut self) -> Option<()> {
        match self.u32()? {
            0 => {}
            1 | 2 | 10 | 12 | 13 => {
                self.u64()?;
            }
            3 => {
                self.take(4)?;
            }
            4 => {
                self.take(8)?;
            }
            5 | 7 | 11 => {
                let n = self.len()?;
                std::str::from_utf8(self.take(n)?).ok()?;
            }
            6 => {
                let n = self.len()?;
                self.take(n)?;
            }
            8 => {
                self.date()?;
            }
            9 => {
                self.date()?;
                self.take(3)?;
                self.u32()?;
            }
            _ => return None,
        }
        Some(())
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
        let mut tx = self.transaction_head()?;
        let n = self.len()?;
        tx.events.reserve_exact(n);
        for _ in 0..n {
            // DDL events are rare and large: bincode's own decoder takes the whole record.
            if self.u32()? != 0 {
                return None;
            }
            tx.events.push(Event::Row(self.row_event()?));
        }
        Some(tx)
    }

    /// A transaction's fields before its events; `events` is left empty.
    fn transaction_head(&mut self) -> Option<Transaction> {
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
        Some(Transaction {
            server_id,
            seq,
            commit_time_us,
            origin,
            events: Vec::new(),
        })
    }

    /// The whole payload was used: leftover bytes are an error, as in `codec::decode`.
    fn finish<T>(&self, value: T) -> Option<T> {
        self.bytes.is_empty().then_some(value)
    }
}

// ----- encoding ---------------------------------------------------------------------------

/// bincode's varint (see [`Cursor::varint`]).
#[inline]
fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v < 251 {
        out.push(v as u8);
    } else if let Ok(v) = u16::try_from(v) {
        out.push(251);
        out.extend_from_slice(&v.to_le_bytes());
    } else if let Ok(v) = u32::try_from(v) {
        out.push(252);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(253);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

#[inline]
fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

#[inline]
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_date(out: &mut Vec<u8>, d: &Date) {
    put_varint(out, u64::from(d.year));
    out.push(d.month);
    out.push(d.day);
}

/// A value's variant index (`docs/format.md`).
fn tag(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Int(_) => 1,
        Value::UInt(_) => 2,
        Value::Float(_) => 3,
        Value::Double(_) => 4,
        Value::Decimal(_) => 5,
        Value::Bytes(_) => 6,
        Value::Text(_) => 7,
        Value::Date(_) => 8,
        Value::DateTime(_) => 9,
        Value::Timestamp(_) => 10,
        Value::Json(_) => 11,
        Value::Time(_) => 12,
        Value::Bit(_) => 13,
    }
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    out.push(tag(v));
    match v {
        Value::Null => {}
        Value::Int(i) | Value::Timestamp(i) | Value::Time(i) => put_i64(out, *i),
        Value::UInt(u) | Value::Bit(u) => put_varint(out, *u),
        Value::Float(f) => out.extend_from_slice(&f.to_le_bytes()),
        Value::Double(f) => out.extend_from_slice(&f.to_le_bytes()),
        Value::Decimal(s) | Value::Text(s) | Value::Json(s) => put_bytes(out, s.as_bytes()),
        Value::Bytes(b) => put_bytes(out, b),
        Value::Date(d) => put_date(out, d),
        Value::DateTime(dt) => {
            put_date(out, &dt.date);
            out.extend_from_slice(&[dt.hour, dt.minute, dt.second]);
            put_varint(out, u64::from(dt.micros));
        }
    }
}

/// What a row takes encoded, at most (to reserve once).
fn values_len(values: &[Value]) -> usize {
    9 + values
        .iter()
        .map(|v| match v {
            Value::Decimal(s) | Value::Text(s) | Value::Json(s) => 10 + s.len(),
            Value::Bytes(b) => 10 + b.len(),
            _ => 16,
        })
        .sum::<usize>()
}

fn put_values(out: &mut Vec<u8>, values: &[Value]) {
    put_varint(out, values.len() as u64);
    for v in values {
        put_value(out, v);
    }
}

/// Appends a row event; for a `Write`, returns where its row's encoding lies in `out`.
fn put_row_event(out: &mut Vec<u8>, ev: &RowEvent) -> Option<std::ops::Range<usize>> {
    let mut written = None;
    put_varint(out, ev.table_id);
    match &ev.change {
        RowChange::Write { row } => {
            out.push(0);
            let start = out.len();
            put_values(out, row);
            written = Some(start..out.len());
        }
        RowChange::Update { key, after, before } => {
            out.push(1);
            put_values(out, key);
            put_values(out, after);
            match before {
                None => out.push(0),
                Some(b) => {
                    out.push(1);
                    put_values(out, b);
                }
            }
        }
        RowChange::Delete { key } => {
            out.push(2);
            put_values(out, key);
        }
    }
    out.push(ev.cause as u8);
    written
}

/// Appends the encoding of `Record::Transaction(tx)` when `tx` holds only row events;
/// `false` (nothing appended) otherwise.
pub(crate) fn put_transaction_record(out: &mut Vec<u8>, tx: &Transaction) -> bool {
    if !only_rows(&tx.events) {
        return false;
    }
    put_transaction_head(out, tx);
    put_events(out, &tx.events, None)
}

fn only_rows(events: &[Event]) -> bool {
    events.iter().all(|e| matches!(e, Event::Row(_)))
}

/// Appends what precedes a transaction's events in `Record::Transaction(tx)`'s encoding.
pub(crate) fn put_transaction_head(out: &mut Vec<u8>, tx: &Transaction) {
    out.push(0);
    put_varint(out, u64::from(tx.server_id));
    put_varint(out, tx.seq);
    put_i64(out, tx.commit_time_us);
    match &tx.origin {
        None => out.push(0),
        Some(o) => {
            out.push(1);
            put_varint(out, u64::from(o.server_id));
            put_varint(out, o.seq);
        }
    }
}

/// Appends a transaction's event list when it holds only row events, recording in `rows`,
/// when given, for each event where in `out` the row a `Write` writes is encoded (`None` for
/// other events); `false` (nothing appended) otherwise.
pub(crate) fn put_events(
    out: &mut Vec<u8>,
    events: &[Event],
    mut rows: Option<&mut Vec<Option<std::ops::Range<usize>>>>,
) -> bool {
    let mut size = 10;
    for ev in events {
        let Event::Row(r) = ev else {
            return false;
        };
        size += 12
            + match &r.change {
                RowChange::Write { row } => values_len(row),
                RowChange::Update { key, after, before } => {
                    values_len(key) + values_len(after) + before.as_deref().map_or(1, values_len)
                }
                RowChange::Delete { key } => values_len(key),
            };
    }
    out.reserve(size);
    put_varint(out, events.len() as u64);
    for ev in events {
        if let Event::Row(r) = ev {
            out.push(0);
            let at = put_row_event(out, r);
            if let Some(rows) = rows.as_deref_mut() {
                rows.push(at);
            }
        }
    }
    true
}

/// Appends a row's encoding.
pub(crate) fn put_row(out: &mut Vec<u8>, row: &[Value]) {
    out.reserve(values_len(row));
    put_values(out, row);
}

// ----- decoding ---------------------------------------------------------------------------

/// A record, when it is a transaction of row events and well formed; `None` otherwise.
pub(crate) fn record(bytes: &[u8]) -> Option<Record> {
    let mut c = Cursor { bytes };
    if c.u32()? != 0 {
        return None;
    }
    let tx = c.transaction()?;
    c.finish(Record::Transaction(tx))
}

/// The head of a transaction's record (see [`codec::decode_record_head`](crate::codec::decode_record_head)):
/// the transaction with `events` empty, the events not read; `None` when the payload is not a
/// transaction or its head is malformed.
pub(crate) fn record_head(bytes: &[u8]) -> Option<Record> {
    let mut c = Cursor { bytes };
    if c.u32()? != 0 {
        return None;
    }
    c.transaction_head().map(Record::Transaction)
}

/// A `Vec<Value>` when well formed; `None` otherwise.
pub(crate) fn row(bytes: &[u8]) -> Option<Vec<Value>> {
    let mut c = Cursor { bytes };
    let row = c.values()?;
    c.finish(row)
}

/// Value `index` of a row, the values before it skipped and those after it not read; `None`
/// when the row has no such value or is not one this codec reads.
pub(crate) fn row_value(bytes: &[u8], index: usize) -> Option<Value> {
    let mut c = Cursor { bytes };
    if index >= c.len()? {
        return None;
    }
    for _ in 0..index {
        c.skip_value()?;
    }
    c.value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;
    use crate::events::samples;

    /// A record's head is the whole record's, events left out; a payload cut after the head
    /// passes (the events are not read), and what is not a transaction is not a head.
    #[test]
    fn heads_are_transactions_without_their_events() {
        for tx in samples::transactions() {
            let bytes = codec::encode(&Record::Transaction(tx.clone())).expect("encode");
            let head = Transaction {
                events: Vec::new(),
                ..tx
            };
            assert_eq!(record_head(&bytes), Some(Record::Transaction(head.clone())));
            let cut = &bytes[..bytes.len() - 1];
            assert_eq!(record_head(cut), Some(Record::Transaction(head)));
        }
        let hb = Record::Heartbeat(crate::events::Heartbeat {
            server_id: 1,
            last_seq: 9,
            time_us: 5,
        });
        assert_eq!(record_head(&codec::encode(&hb).expect("encode")), None);
        assert_eq!(record_head(&[0, 1]), None, "a head cut short");
    }

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
    fn one_value_of_a_row_is_the_value_the_whole_row_decodes_to() {
        let row = samples::all_values();
        let bytes = codec::encode(&row).expect("encode");
        for (i, v) in row.iter().enumerate() {
            assert_eq!(row_value(&bytes, i).as_ref(), Some(v), "value {i}");
            assert_eq!(
                codec::decode_row_value(&bytes, i).expect("decode"),
                Some(v.clone())
            );
        }
        assert_eq!(row_value(&bytes, row.len()), None);
        assert_eq!(
            codec::decode_row_value(&bytes, row.len()).expect("decode"),
            None
        );
        // Cut short: given up on here, refused by bincode too.
        assert_eq!(row_value(&bytes[..bytes.len() - 1], row.len() - 1), None);
        assert!(codec::decode_row_value(&bytes[..bytes.len() - 1], row.len() - 1).is_err());
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
        for tag in 0u8..=14 {
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

    /// Every integer width's boundaries, float specials and string lengths around the varint
    /// steps, in every value type, encode to bincode's bytes and decode back.
    #[test]
    fn boundary_values_encode_as_bincode_does() {
        let unsigned = [
            0u64,
            1,
            250,
            251,
            252,
            253,
            255,
            256,
            65_535,
            65_536,
            u64::from(u32::MAX) - 1,
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
            u64::MAX,
        ];
        let mut row = Vec::new();
        for &u in &unsigned {
            row.push(Value::UInt(u));
            row.push(Value::Bit(u));
            for i in [
                u as i64,
                (u as i64).wrapping_neg(),
                (u / 2) as i64,
                -((u / 2) as i64),
            ] {
                row.push(Value::Int(i));
                row.push(Value::Timestamp(i));
                row.push(Value::Time(i));
            }
            let year = u16::try_from(u).unwrap_or(u16::MAX);
            let micros = u32::try_from(u).unwrap_or(u32::MAX);
            let date = Date {
                year,
                month: 12,
                day: 31,
            };
            row.push(Value::Date(date));
            row.push(Value::DateTime(DateTime {
                date,
                hour: 23,
                minute: 59,
                second: 59,
                micros,
            }));
        }
        row.extend([i64::MIN, i64::MAX].map(Value::Int));
        for f in [
            0.0f64,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::MIN_POSITIVE,
            1.5,
        ] {
            row.push(Value::Double(f));
            row.push(Value::Float(f as f32));
        }
        for n in [0usize, 250, 251, 65_535, 65_536] {
            row.push(Value::Text("t".repeat(n)));
            row.push(Value::Json("j".repeat(n)));
            row.push(Value::Decimal("1".repeat(n)));
            row.push(Value::Bytes(vec![7; n]));
        }
        row.push(Value::Null);
        let bincode = codec::encode(&row).expect("encode");
        let mut fast = Vec::new();
        put_row(&mut fast, &row);
        assert_eq!(fast, bincode);
        let back = self::row(&fast).expect("decodes");
        assert_eq!(codec::encode(&back).expect("encode"), bincode);
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
