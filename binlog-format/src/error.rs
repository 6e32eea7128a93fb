//! The crate's one error type.

use std::io;
use std::path::PathBuf;

// `Position` lives in its own module so that `segment` can use it without this one; the
// re-export keeps `binlog_format::error::Position` working.
pub use crate::position::Position;

/// Everything that can go wrong reading, writing or coding the binlog. Only
/// [`Error::Io`] may succeed when tried again (see [`Error::is_retriable`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file system operation failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// A value could not be encoded: bincode refused it, or a payload is larger than the
    /// 4 GiB a frame's length field can say. Holds the reason.
    #[error("cannot encode: {0}")]
    Encode(String),
    /// Bytes are not a valid encoding of the expected type: malformed, with leftover bytes,
    /// or with a length prefix larger than the payload can hold. Holds the reason.
    #[error("cannot decode: {0}")]
    Decode(String),
    /// A record that cannot be trusted, anywhere but a torn tail of the last segment.
    #[error("corrupt binlog at {position}: {reason}")]
    Corruption {
        /// Where the bad frame, prelude or header starts (`Position::default()` for a
        /// Kafka record, which has no place in a file).
        position: Position,
        /// What is wrong with it.
        reason: String,
    },
    /// The last segment ends inside a record and the recovery mode does not allow cutting it.
    #[error("torn tail at {position}: {bytes} bytes after the last whole record")]
    TornTail {
        /// Where the last whole record ends and the partial one starts.
        position: Position,
        /// How many bytes follow `position` to the end of the file.
        bytes: u64,
    },
    /// A transaction's sequence number (or a segment's first sequence number) is not the one
    /// after the previous transaction's: a record is missing or repeated.
    #[error("sequence gap at {position}: expected {expected}, found {found}")]
    SequenceGap {
        /// The record (or, at offset 0, the segment) where the gap shows.
        position: Position,
        /// The sequence number that should have come next.
        expected: u64,
        /// The sequence number found instead.
        found: u64,
    },
    /// A record whose encoding is larger than a frame may be (the writer's `max_frame`): one
    /// transaction too large for the binlog. Nothing of it was written.
    #[error("record of {bytes} bytes exceeds the maximum frame of {max} bytes")]
    TooLarge {
        /// The encoded record's size.
        bytes: u64,
        /// The largest frame payload the writer takes.
        max: u32,
    },
    /// A request that cannot be carried out as asked: a bad option, file name or offset, a
    /// transaction out of sequence, a writer stopped
    /// by an earlier failure, a directory written by another server or whose index names a
    /// missing segment. Holds the reason.
    #[error("invalid argument: {0}")]
    Invalid(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether trying the same operation again may succeed (I/O can be transient; a corrupt
    /// record or bad argument will not change by itself).
    pub fn is_retriable(&self) -> bool {
        matches!(self, Error::Io { .. })
    }
}

/// `std::result::Result` with this crate's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
