//! Where a run starts: the last sequence number the replication topic holds (checked to be
//! this binlog's server's stream), and the binlog segment to replay from so that every table's
//! definition is known at that point.

use std::path::Path;

use binlog_format::segment::{directory_server_id, list_segments, SegmentCursor};
use ringrep_kafka::{ensure_topic, kafka_error, last_relayed, KafkaSettings, Result};

/// Creates the replication topic `topic` if it is missing, and returns the last sequence number
/// it holds (0 when empty): the run relays the transactions after it. Fails when the topic
/// holds another server's stream.
pub(crate) async fn resume_point(
    settings: &KafkaSettings,
    topic: &str,
    binlog_dir: &Path,
) -> Result<u64> {
    ensure_topic(settings, topic, 1).await?;
    let (s, t) = (settings.clone(), topic.to_string());
    let dir = binlog_dir.to_path_buf();
    tokio::task::spawn_blocking(move || -> Result<u64> {
        let last = last_relayed(&s)?;
        let server = directory_server_id(&dir)?;
        if let (Some((topic_server, seq)), Some(ours)) = (last, server) {
            if topic_server != ours {
                return Err(kafka_error(
                    &t,
                    format!("the topic holds server {topic_server}'s stream (seq {seq}), this binlog is server {ours}'s; use another --kafka-topic-prefix"),
                ));
            }
        }
        Ok(last.map_or(0, |l| l.1))
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
