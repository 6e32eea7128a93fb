//! The crate's one error type.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A place in the binlog: segment number and byte offset inside that segment file.
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
    pub segment: u64,
    pub offset: u64,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}",
            crate::segment::segment_name(self.segment),
            self.offset
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("cannot encode: {0}")]
    Encode(String),
    #[error("cannot decode: {0}")]
    Decode(String),
    /// A record that cannot be trusted, anywhere but a torn tail of the last segment.
    #[error("corrupt binlog at {position}: {reason}")]
    Corruption { position: Position, reason: String },
    /// The last segment ends inside a record and the recovery mode does not allow cutting it.
    #[error("torn tail at {position}: {bytes} bytes after the last whole record")]
    TornTail { position: Position, bytes: u64 },
    #[error("sequence gap at {position}: expected {expected}, found {found}")]
    SequenceGap {
        position: Position,
        expected: u64,
        found: u64,
    },
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

pub type Result<T, E = Error> = std::result::Result<T, E>;
