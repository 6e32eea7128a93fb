//! The demo and benchmark workload: the spec's `user_events` ring table and inserts of one
//! event for a user at a time.

use binlog_format::schema::*;
use binlog_format::{TableDef, Value};
use ringrep_engine::ddl::prepare_table;
use ringrep_engine::Result;

/// The spec's `user_events` table: `MAX_ROWS_PER_PK=ring_size`, with `TTL=ttl@created_at`
/// when `ttl_secs` is set.
pub fn user_events(ring_size: u32, ttl_secs: Option<u32>) -> Result<TableDef> {
    let col = |name: &str, ty, nullable, default| ColumnDef {
        name: String::from(name),
        ty,
        nullable,
        default,
        on_update_now: false,
        auto_increment: false,
        comment: String::new(),
    };
    let int = ColumnType::Integer {
        width: IntWidth::Int,
        unsigned: false,
    };
    let comment = match ttl_secs {
        Some(t) => format!("NDB_TABLE=TTL={t}@created_at,MAX_ROWS_PER_PK={ring_size}"),
        None => format!("NDB_TABLE=MAX_ROWS_PER_PK={ring_size}"),
    };
    let def = TableDef {
        id: 0,
        database: "test".into(),
        name: "user_events".into(),
        columns: vec![
            col("user_id", int.clone(), false, ColumnDefault::None),
            col("ring_idx", int, false, ColumnDefault::Value(Value::Int(0))),
            col(
                "ring_meta",
                ColumnType::VarBinary { len: 64 },
                true,
                ColumnDefault::None,
            ),
            col(
                "created_at",
                ColumnType::Timestamp { fsp: 3 },
                false,
                ColumnDefault::CurrentTimestamp { fsp: 3 },
            ),
            col(
                "event_type",
                ColumnType::VarChar { len: 64 },
                true,
                ColumnDefault::None,
            ),
            col(
                "payload",
                ColumnType::VarChar { len: 256 },
                true,
                ColumnDefault::None,
            ),
        ],
        primary_key: vec![0, 1],
        indexes: match ttl_secs {
            Some(_) => vec![IndexDef {
                name: "ttl_index".into(),
                kind: IndexKind::Secondary,
                columns: vec![3],
            }],
            None => vec![],
        },
        ring: None,
        ttl: None,
        partitioning: Some(Partitioning {
            linear: false,
            columns: vec![0],
            partitions: None,
        }),
        comment: Some(comment),
    };
    prepare_table(def, None, false)
}

/// The same table as CREATE TABLE text, as a client sends it.
pub(crate) fn user_events_sql(ring_size: u32, ttl_secs: Option<u32>) -> String {
    let comment = match ttl_secs {
        Some(t) => format!("NDB_TABLE=TTL={t}@created_at,MAX_ROWS_PER_PK={ring_size}"),
        None => format!("NDB_TABLE=MAX_ROWS_PER_PK={ring_size}"),
    };
    let ttl_index = if ttl_secs.is_some() {
        ",\n  KEY ttl_index (created_at)"
    } else {
        ""
    };
    format!(
        "CREATE TABLE test.user_events (\n  user_id INT NOT NULL,\n  ring_idx INT NOT NULL DEFAULT 0,\n  ring_meta VARBINARY(64),\n  created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),\n  event_type VARCHAR(64),\n  payload VARCHAR(256),\n  PRIMARY KEY (user_id, ring_idx){ttl_index}\n) ENGINE=NDB COMMENT='{comment}' PARTITION BY KEY(user_id)"
    )
}

/// The insert every demo writer sends (prepared), with [`event_values`].
pub(crate) const INSERT_EVENT_SQL: &str =
    "INSERT INTO test.user_events (user_id, event_type, payload) VALUES (?, ?, ?)";

/// Event type and payload of the `n`-th event.
pub(crate) fn event_values(n: u64) -> (&'static str, String) {
    (
        EVENT_TYPES[(n % 4) as usize],
        format!(
            "{{\"n\":{n},\"product_id\":{},\"pad\":\"{}\"}}",
            n % 997,
            "x".repeat(100)
        ),
    )
}

const EVENT_TYPES: [&str; 4] = ["click", "view", "purchase", "search"];

/// A small deterministic generator (SplitMix64), so runs replay from their seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next number of the sequence, uniform over `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next number of the sequence reduced to `0..n` (modulo, so very slightly uneven
    /// unless `n` is a power of two); `n = 0` counts as 1, giving 0.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}
