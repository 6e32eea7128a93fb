//! The errors of the Kafka side: each keeps its cause and says whether a retry can help.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// An error of the Kafka client side, the relay or the replica's Kafka source.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is wrong (a flag, a config key): the same settings fail again.
    #[error("{0}")]
    Config(String),
    /// The client or the broker failed at `what`; `source` is librdkafka's error, or another
    /// cause (a task that went away, a broker slower than its deadline).
    #[error("kafka: {what}: {source}")]
    Kafka {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Reading the binlog failed (the relay's side of the pipe).
    #[error("binlog: {0}")]
    Binlog(#[from] binlog_format::Error),
}

/// The result type of the Kafka crates.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether retrying can help: a broker that is away or slow can come back; a broker that
    /// refused who we are or what we asked, a wrong setting or a corrupt binlog cannot.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Config(_) => false,
            Error::Kafka { source, .. } => {
                !source.downcast_ref::<KafkaError>().is_some_and(refused)
            }
            Error::Binlog(e) => e.is_retriable(),
        }
    }
}

/// An error of the Kafka client at `what`, keeping `cause`.
pub fn kafka_error(
    what: &str,
    cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> Error {
    Error::Kafka {
        what: what.to_string(),
        source: cause.into(),
    }
}

/// Errors that asking again cannot mend: the broker refused who we are or what we asked.
pub(crate) fn refused(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::Authentication
                | RDKafkaErrorCode::SaslAuthenticationFailed
                | RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::ClusterAuthorizationFailed
                | RDKafkaErrorCode::GroupAuthorizationFailed
        )
    )
}
