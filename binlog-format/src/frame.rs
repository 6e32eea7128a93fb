//! Frames: `length: u32 LE`, `crc32c: u32 LE`, payload.

use crate::error::{Error, Result};
use crate::format::FRAME_HEADER_LEN;

/// What is at an offset of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameScan<'a> {
    /// A whole frame whose checksum matches; `len` is the frame's total size.
    Frame {
        /// The payload, borrowed from the buffer: everything after the 8-byte frame header.
        payload: &'a [u8],
        /// Bytes from the frame's start to its end, header included: where the next frame
        /// starts.
        len: usize,
    },
    /// The buffer ends inside the frame: `need` more bytes are required.
    Incomplete {
        /// How many more bytes the buffer needs before the frame can be checked: the rest of
        /// the header, or the rest of the payload once the header is there.
        need: usize,
    },
    /// The frame cannot be trusted.
    Corrupt {
        /// What is wrong: a length above the maximum, or a checksum mismatch.
        reason: String,
        /// Whether the whole frame was in the buffer (a checksum mismatch) rather than only
        /// its header (a length above the maximum, refused without reading further).
        complete: bool,
    },
}

/// Appends one frame around `payload`; see [`write_frame_with`].
pub fn write_frame(payload: &[u8], out: &mut Vec<u8>) -> Result<()> {
    write_frame_with(out, |buf| {
        buf.extend_from_slice(payload);
        Ok(())
    })
}

/// Appends one frame whose payload `encode` writes in place, so the payload is not copied.
/// A payload longer than the length field can say (4 GiB) is refused and nothing is
/// appended: a frame with a cut-off length would never read back.
pub fn write_frame_with(
    out: &mut Vec<u8>,
    encode: impl FnOnce(&mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    if let Err(e) = encode(out) {
        out.truncate(start);
        return Err(e);
    }
    let payload = &out[start + FRAME_HEADER_LEN..];
    let Ok(len) = u32::try_from(payload.len()) else {
        let n = payload.len();
        out.truncate(start);
        return Err(Error::Encode(format!(
            "a payload of {n} bytes exceeds what a frame can hold ({} bytes)",
            u32::MAX
        )));
    };
    let crc = crc32c::crc32c(payload);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Looks at the frame starting at `buf[0]`. A length above `max` is refused from the header
/// alone, so a corrupt length never causes a large allocation or read.
pub fn scan_frame(buf: &[u8], max: u32) -> FrameScan<'_> {
    if buf.len() < FRAME_HEADER_LEN {
        return FrameScan::Incomplete {
            need: FRAME_HEADER_LEN - buf.len(),
        };
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let crc = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if len > max {
        return FrameScan::Corrupt {
            reason: format!("frame length {len} exceeds the maximum of {max}"),
            complete: false,
        };
    }
    let total = FRAME_HEADER_LEN + len as usize;
    if buf.len() < total {
        return FrameScan::Incomplete {
            need: total - buf.len(),
        };
    }
    let payload = &buf[FRAME_HEADER_LEN..total];
    let actual = crc32c::crc32c(payload);
    if actual != crc {
        return FrameScan::Corrupt {
            reason: format!("checksum mismatch (stored {crc:#010x}, computed {actual:#010x}) in a {len}-byte frame"),
            complete: true,
        };
    }
    FrameScan::Frame {
        payload,
        len: total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_round_trip_and_truncation() {
        let mut buf = Vec::new();
        write_frame(b"hello", &mut buf).expect("frame");
        assert_eq!(buf.len(), FRAME_HEADER_LEN + 5);
        assert_eq!(
            scan_frame(&buf, 100),
            FrameScan::Frame {
                payload: b"hello",
                len: 13
            }
        );
        for cut in 0..buf.len() {
            assert!(matches!(
                scan_frame(&buf[..cut], 100),
                FrameScan::Incomplete { .. }
            ));
        }
    }

    #[test]
    fn crc32c_check_value_matches_the_docs() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn oversized_length_is_refused_before_reading() {
        let mut buf = Vec::new();
        buf.extend_from_slice(&u32::MAX.to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        assert!(matches!(
            scan_frame(&buf, 1024),
            FrameScan::Corrupt {
                complete: false,
                ..
            }
        ));
    }

    #[test]
    fn flipped_payload_byte_is_detected() {
        let mut buf = Vec::new();
        write_frame(b"hello world", &mut buf).expect("frame");
        buf[10] ^= 0x40;
        assert!(matches!(
            scan_frame(&buf, 100),
            FrameScan::Corrupt { complete: true, .. }
        ));
    }
}
