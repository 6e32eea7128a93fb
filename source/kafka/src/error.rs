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
    /// Another producer took over this relay's `transactional.id`: this relay must stop for
    /// good, since the other now writes the stream (Kafka's zombie fencing).
    #[error("kafka: fenced: another producer took over transactional.id {transactional_id} ({reason}); this relay stops, the other goes on")]
    Fenced {
        /// The `transactional.id` both use.
        transactional_id: String,
        /// What librdkafka said.
        reason: String,
    },
    /// The broker has no Kafka transactions (tansu 0.6.0 refuses EndTxn).
    #[error("kafka: {what}: the broker does not support Kafka transactions ({reason}); run the relay without --kafka-transactions (restarts then skip what each partition holds, exactly once too)")]
    NoTransactions {
        /// What was being done.
        what: String,
        /// What librdkafka said.
        reason: String,
    },
}

/// The result type of the Kafka crates.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether retrying can help: a broker that is away or slow can come back; a broker that
    /// refused who we are or what we asked, a wrong setting or a corrupt binlog cannot.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Config(_) => false,
            Error::Kafka { source, .. } => !source
                .downcast_ref::<KafkaError>()
                .is_some_and(|e| refused(e) || is_setting(e)),
            Error::Binlog(e) => e.is_retriable(),
            Error::Fenced { .. } | Error::NoTransactions { .. } => false,
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

/// A client that could not be made from its settings (a bad `--kafka-option`): the same
/// settings fail again.
fn is_setting(e: &KafkaError) -> bool {
    matches!(
        e,
        KafkaError::ClientCreation(_) | KafkaError::ClientConfig(..)
    )
}

/// Errors that asking again cannot mend: the broker refused who we are or what we asked, or
/// another producer took over our `transactional.id` (fenced: this one must stop for good).
pub(crate) fn refused(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::Fenced
                | RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::TransactionalIdAuthorizationFailed
                | RDKafkaErrorCode::Authentication
                | RDKafkaErrorCode::SaslAuthenticationFailed
                | RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::ClusterAuthorizationFailed
                | RDKafkaErrorCode::GroupAuthorizationFailed
        )
    )
}
