//! Constants of the on-disk format. See `docs/format.md`.
//!
//! A segment file starts with a fixed 24-byte prelude, readable without any decoder:
//!
//! ```text
//! offset size field
//! 0      8    magic "RRBINLOG"
//! 8      2    format version, u16 LE (1)
//! 10     2    flags, u16 LE (0; reserved)
//! 12     4    server id, u32 LE
//! 16     8    first sequence number of the segment, u64 LE
//! 24     ...  frames: the segment header frame, then one frame per record
//! ```
//!
//! A frame is `length: u32 LE` (payload bytes), `crc32c: u32 LE` (Castagnoli CRC of the payload),
//! then the payload.

/// The magic number at offset 0 of every segment.
pub const MAGIC: &[u8; 8] = b"RRBINLOG";
/// Size of the fixed prelude before the first frame.
pub const PRELUDE_LEN: u64 = 24;
/// Size of a frame header (length and checksum).
pub const FRAME_HEADER_LEN: usize = 8;
/// Largest frame written and accepted by default: 1 GiB less 1 MiB, so that a frame and the
/// few bytes a replication packet puts before it fit the 1 GiB packets a replica accepts. A
/// transaction is one frame, so this bounds a transaction's binlog record (a statement of
/// about 4 M rows of 200 bytes). Readers refuse a longer length; they grow their buffer only
/// as the bytes arrive, so a damaged length costs no large allocation.
pub const DEFAULT_MAX_FRAME: u32 = (1 << 30) - (1 << 20);
/// Default size at which the writer rotates to a new segment.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

/// Format versions this build reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum FormatVersion {
    /// bincode 2 `standard()` payloads, CRC32C frames.
    V1 = 1,
}

impl FormatVersion {
    /// The version this build writes into new segments and Kafka headers.
    pub const CURRENT: FormatVersion = FormatVersion::V1;

    /// The version a prelude's version field names, or `None` for one this build cannot
    /// read.
    pub fn from_u16(v: u16) -> Option<FormatVersion> {
        match v {
            1 => Some(FormatVersion::V1),
            _ => None,
        }
    }
}

/// The fixed prelude of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prelude {
    /// The format version as stored (a [`FormatVersion`] once [`Prelude::decode`] accepted
    /// it).
    pub version: u16,
    /// The server that writes the binlog this segment belongs to.
    pub server_id: u32,
    /// The sequence number the segment's first transaction has, or will have while the
    /// segment holds none: one more than the last sequence number before the segment.
    pub first_seq: u64,
}

impl Prelude {
    /// The 24 bytes of the prelude: magic number, version, zero flags, server id, first
    /// sequence number, all little endian.
    pub fn encode(&self) -> [u8; PRELUDE_LEN as usize] {
        let mut b = [0u8; PRELUDE_LEN as usize];
        b[0..8].copy_from_slice(MAGIC);
        b[8..10].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.server_id.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        b
    }

    /// Parses a prelude; the error text says what is wrong.
    pub fn decode(b: &[u8]) -> Result<Prelude, String> {
        if b.len() < PRELUDE_LEN as usize {
            return Err(format!(
                "file is {} bytes, shorter than the {PRELUDE_LEN}-byte prelude",
                b.len()
            ));
        }
        if &b[0..8] != MAGIC {
            return Err("bad magic number (not a ringrep binlog segment)".into());
        }
        let version = u16::from_le_bytes([b[8], b[9]]);
        if FormatVersion::from_u16(version).is_none() {
            return Err(format!("unsupported format version {version}"));
        }
        let mut sid = [0u8; 4];
        sid.copy_from_slice(&b[12..16]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&b[16..24]);
        Ok(Prelude {
            version,
            server_id: u32::from_le_bytes(sid),
            first_seq: u64::from_le_bytes(seq),
        })
    }
}
