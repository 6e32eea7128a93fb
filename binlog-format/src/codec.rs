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

use crate::error::{Error, Result};

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
pub fn decode<T: Decode<()>>(bytes: &[u8]) -> Result<T> {
    let (value, used) = bincode::decode_from_slice::<T, _>(bytes, CONFIG)
        .map_err(|e| Error::Decode(e.to_string()))?;
    if used != bytes.len() {
        return Err(Error::Decode(format!(
            "{} leftover bytes after a {}-byte payload",
            bytes.len() - used,
            used
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftover_bytes_are_an_error() {
        let mut bytes = encode(&7u32).expect("encode");
        bytes.push(0);
        assert!(matches!(decode::<u32>(&bytes), Err(Error::Decode(_))));
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
