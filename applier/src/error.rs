//! The one error type of `ringrep-applier`.

use binlog_format::Position;

/// Why applying, reading a source or verifying failed; [`Error::is_retriable`] says whether
/// trying again can help.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The replica's engine refused or failed (its code and retry class kept).
    #[error("engine: {0}")]
    Engine(#[from] ringrep_engine::Error),
    /// Reading the source's binlog failed: I/O (retriable) or corruption at a position.
    #[error("binlog: {0}")]
    Binlog(#[from] binlog_format::Error),
    /// The Kafka source failed (the broker, the client or a setting).
    #[error("{0}")]
    Kafka(#[from] ringrep_kafka::Error),
    /// The source skipped a sequence number: nothing after it can be applied safely.
    #[error("sequence gap from server {server_id}: missing seq {missing} (next available is {found} at {position})")]
    Gap {
        /// The source server.
        server_id: u32,
        /// The sequence number expected next.
        missing: u64,
        /// The sequence number found instead.
        found: u64,
        /// Where it was found.
        position: Position,
    },
    /// The source failed in a way that may pass (a task that went away, a broker).
    #[error("source: {0}")]
    Source(String),
    /// The source refused this replica: a wrong password or a missing privilege (an access
    /// error such as MySQL's 1045 or 1227). A serving replica retries, as MySQL's I/O thread
    /// does, since the account may be fixed meanwhile; a run that has to end
    /// (`--exit-when-caught-up`, `--until-seq`) fails on it at once.
    #[error("source: {0}")]
    Refused(String),
    /// The source cannot serve the stream from the replica's position (MySQL's error 1236:
    /// the binlog there is purged, corrupt or has a gap): retrying cannot help.
    #[error("{0}")]
    SourceFatal(String),
    /// A `mysql://` side of the verifier could not be read.
    #[error("{0}")]
    Remote(String),
    /// Something that cannot be applied (a bad definition, a broken invariant).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// Whether retrying can help: source hiccups and lock waits can; gaps and corruption cannot.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Engine(e) => e.is_retriable(),
            Error::Binlog(e) => e.is_retriable(),
            Error::Kafka(e) => e.is_retriable(),
            Error::Source(_) | Error::Refused(_) => true,
            Error::Gap { .. } | Error::Invalid(_) | Error::Remote(_) | Error::SourceFatal(_) => {
                false
            }
        }
    }
}

/// The result type of the applier.
pub type Result<T, E = Error> = std::result::Result<T, E>;
