//! The heartbeat topic, `<prefix>.heartbeat`: while the stream is idle, a record every
//! interval with the last sequence number relayed, its commit time and the time now, so a
//! consumer can tell an idle stream from a dead relay and its lag never goes stale. One
//! partition, keyed by the server id (a compacted topic keeps the last one).

use serde_json::json;

use super::{heartbeat_topic, KafkaRecord};

/// The heartbeat record: server `server_id` has relayed up to `seq`, committed at
/// `commit_time_us` (0 when nothing was relayed yet), and the relay was alive at `now_ms`.
pub fn heartbeat_record(
    prefix: &str,
    server_id: u32,
    seq: u64,
    commit_time_us: i64,
    now_ms: i64,
) -> KafkaRecord {
    let value = json!({
        "server_id": server_id,
        "seq": seq,
        "commit_time_us": commit_time_us,
        "ts_ms": now_ms,
    });
    KafkaRecord {
        topic: heartbeat_topic(prefix),
        partition: Some(0),
        key: json!({"server_id": server_id}).to_string().into_bytes(),
        value: Some(value.to_string().into_bytes()),
        headers: vec![],
    }
}
