//! The one error type of `ringrep-applier`.

use binlog_format::Position;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("engine: {0}")]
    Engine(#[from] ringrep_engine::Error),
    #[error("binlog: {0}")]
    Binlog(#[from] binlog_format::Error),
    /// The Kafka source failed (the broker, the client or a setting).
    #[error("{0}")]
    Kafka(#[from] ringrep_kafka::Error),
    /// The source skipped a sequence number: nothing after it can be applied safely.
    #[error("sequence gap from server {server_id}: missing seq {missing} (next available is {found} at {position})")]
    Gap {
        server_id: u32,
        missing: u64,
        found: u64,
        position: Position,
    },
    #[error("source: {0}")]
    Source(String),
    /// A `mysql://` side of the verifier could not be read.
    #[error("{0}")]
    Remote(String),
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
            Error::Source(_) => true,
            Error::Gap { .. } | Error::Invalid(_) | Error::Remote(_) => false,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
