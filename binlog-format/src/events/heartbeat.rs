//! Heartbeats: written by an idle primary so that followers can tell "no traffic" from "no
//! connection" and measure lag. They take no sequence number.
//!
//! Layout: `server_id: varint u32, time_us: zig-zag varint i64, last_seq: varint u64`.

use serde::{Deserialize, Serialize};

/// A sign of life from an idle primary, with how far its binlog has got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct Heartbeat {
    /// The server that wrote the heartbeat (the binlog's own server id).
    pub server_id: u32,
    /// Microseconds since the Unix epoch when the heartbeat was written.
    pub time_us: i64,
    /// The last sequence number committed before the heartbeat.
    pub last_seq: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;

    #[test]
    fn heartbeat_round_trips_with_exact_layout() {
        let hb = Heartbeat {
            server_id: 1,
            time_us: 2,
            last_seq: 300,
        };
        let bytes = codec::encode(&hb).expect("encode");
        assert_eq!(bytes, vec![1, 4, 251, 0x2c, 0x01]);
        assert_eq!(codec::decode::<Heartbeat>(&bytes).expect("decode"), hb);
    }
}
