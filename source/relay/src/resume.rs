//! Where a run starts: the topics created (or checked), the last transaction in the
//! replication topic (checked to be this binlog's server's stream) and how far before it every
//! record was acknowledged, the last record of each partition the relay writes, the schema
//! topic's keys, and the binlog segment to replay from so that every table's definition is
//! known at that point.

use std::collections::HashMap;
use std::path::Path;

use binlog_format::segment::{directory_server_id, list_segments, SegmentCursor};
use ringrep_cdc::kafka;
use ringrep_cdc::kafka::schema::SnapshotMark;
use ringrep_kafka::{
    ensure_topics, kafka_error, last_relayed, list_topics, read_records, read_tails, KafkaSettings,
    Result, Tail, TopicKind,
};

use crate::tables::{Announced, Window};

/// What a run needs to know before it relays anything.
pub(crate) struct Start {
    /// Which transactions' records this run owes.
    pub(crate) window: Window,
    /// The last (seq, order) of every partition of the change and transaction topics.
    pub(crate) tails: HashMap<(String, i32), Tail>,
    /// What the schema topic holds.
    pub(crate) announced: Announced,
    /// The server whose binlog this is, when the directory has a segment.
    pub(crate) server_id: Option<u32>,
    /// The last snapshot the schema topic marks: its sequence number, and whether it is done.
    pub(crate) snapshot: Option<(u64, bool)>,
}

/// Creates the relay's topics that are missing, and reads where the last run left them.
/// Fails when the replication topic holds another server's stream.
pub(crate) async fn start(settings: &KafkaSettings, binlog_dir: &Path) -> Result<Start> {
    let prefix = &settings.topic_prefix;
    let replication = kafka::replication_topic(prefix);
    let schema = kafka::schema_topic(prefix);
    let (transaction, heartbeat) = (
        kafka::transaction_topic(prefix),
        kafka::heartbeat_topic(prefix),
    );
    let mut topics = vec![
        (replication.as_str(), TopicKind::Replication),
        (schema.as_str(), TopicKind::Schema),
    ];
    if settings.transaction_topic {
        topics.push((transaction.as_str(), TopicKind::Transaction));
    }
    if settings.heartbeat.is_some() {
        topics.push((heartbeat.as_str(), TopicKind::Heartbeat));
    }
    ensure_topics(settings, &topics).await?;
    let (s, t) = (settings.clone(), replication.clone());
    let dir = binlog_dir.to_path_buf();
    tokio::task::spawn_blocking(move || -> Result<Start> {
        let last = last_relayed(&s)?;
        let server = directory_server_id(&dir)?;
        if let (Some(l), Some(ours)) = (last, server) {
            if l.server_id != ours {
                return Err(ringrep_kafka::Error::Config(format!(
                    "{t}: the topic holds server {}'s stream (seq {}), this binlog is server {ours}'s; use another --kafka-topic-prefix",
                    l.server_id, l.seq
                )));
            }
        }
        let schema = kafka::schema_topic(&s.topic_prefix);
        let transaction = kafka::transaction_topic(&s.topic_prefix);
        let start = format!("{}.", s.topic_prefix);
        // This stream's change topics (`<prefix>.<database>.<table>`) and transaction topic;
        // not another stream's whose prefix starts with this one (`<prefix>.eu.replication`).
        let ordered: Vec<(String, i32)> = list_topics(&s)?
            .into_iter()
            .filter(|(name, _)| {
                let rest = &name[start.len()..];
                *name == transaction || rest.split('.').count() == 2 && !rest.ends_with(".replication")
            })
            .collect();
        let tails = read_tails(&s, &ordered)?;
        let records = read_records(&s, &schema)?;
        let mut snapshot: Option<(u64, bool)> = None;
        for (_, value) in &records {
            match value.as_deref().and_then(kafka::schema::snapshot_mark) {
                Some((SnapshotMark::Start, seq)) => snapshot = Some((seq, false)),
                Some((SnapshotMark::End, seq)) if snapshot == Some((seq, false)) => {
                    snapshot = Some((seq, true))
                }
                _ => {}
            }
        }
        let announced = Announced::from_records(records);
        Ok(Start {
            window: Window {
                acked: last.map_or(0, |l| l.acked_seq.min(l.seq)),
                relayed: last.map_or(0, |l| l.seq),
            },
            tails,
            announced,
            server_id: server.or(last.map(|l| l.server_id)),
            snapshot,
        })
    })
    .await
    .map_err(|e| kafka_error("startup", e))?
}

/// The first sequence number of the segment that holds `seq` (the relay replays the segment
/// from there to know every table's definition at `seq`); 1 when the directory does not exist.
pub(crate) fn segment_start(dir: &Path, seq: u64) -> Result<u64> {
    let mut start = 1;
    if !dir.exists() {
        return Ok(start);
    }
    for n in list_segments(dir)? {
        let first = SegmentCursor::open(dir, n, binlog_format::format::DEFAULT_MAX_FRAME)?
            .header
            .first_seq;
        if first <= seq {
            start = first;
        } else {
            break;
        }
    }
    Ok(start)
}

/// The first sequence number the binlog in `dir` still holds, `None` when it has no segment.
pub(crate) fn first_seq(dir: &Path) -> Result<Option<u64>> {
    if !dir.exists() {
        return Ok(None);
    }
    match list_segments(dir)?.first() {
        Some(&n) => Ok(Some(
            SegmentCursor::open(dir, n, binlog_format::format::DEFAULT_MAX_FRAME)?
                .header
                .first_seq,
        )),
        None => Ok(None),
    }
}
