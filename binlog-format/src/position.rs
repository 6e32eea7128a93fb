//! Where a record lies in a binlog directory, and the file names of segments that positions
//! refer to. This module depends on nothing else in the crate, so that [`crate::error`] and
//! [`crate::segment`] can both use it.

use std::fmt;

/// A place in the binlog: segment number and byte offset inside that segment file.
///
/// Positions order first by segment, then by offset, which is the order records were
/// written in. The default, `0:0`, names no record; it stands in where a place is unknown
/// (for example in the error of a record that came from Kafka rather than a file). Displayed
/// as `binlog.000001:1234`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Position {
    /// The segment number: the `NNNNNN` of the file `binlog.NNNNNN` (see [`segment_name`]).
    /// Segments are numbered from 1 in the order they were created.
    pub segment: u64,
    /// Byte offset from the start of the segment file. A record's position is the offset of
    /// its frame header; the first record of a segment lies after the 24-byte prelude and the
    /// segment header frame.
    pub offset: u64,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", segment_name(self.segment), self.offset)
    }
}

/// The file name of segment `number`: `binlog.000001` for segment 1. The number is padded
/// with zeros to at least six digits; [`parse_segment_name`] reads it back.
pub fn segment_name(number: u64) -> String {
    format!("binlog.{number:06}")
}

/// The segment number of a file name, if it is a segment name: `binlog.` followed by at least
/// six ASCII digits. Any other name (the index file, a `.tmp` file) gives `None`.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("binlog.")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}
