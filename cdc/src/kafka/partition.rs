//! Which partition a change record goes to, and the key values it is keyed by: all changes of
//! one ring prefix go to one partition (murmur2 of the prefix's JSON, as Kafka's own default
//! partitioner would place that key), and text keys in their folded form.

use binlog_format::events::RowChange;
use binlog_format::schema::TableDef;
use binlog_format::value::Value;

use super::json::write_columns;

/// Murmur2 as Kafka's Java client computes it (seed 0x9747b28c), for partition choice.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len() as u32;
    let mut h: u32 = 0x9747_b28c ^ len;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition for a prefix key: `(murmur2(bytes) & 0x7fffffff) % partitions`.
pub fn partition_for(prefix_key: &[u8], partitions: i32) -> i32 {
    (murmur2(prefix_key) & 0x7fff_ffff) % partitions.max(1)
}

/// The primary key a row change is about, as stored and as keyed.
#[derive(Debug, Clone)]
pub struct RowKey {
    /// The primary-key values as stored (the key before the change for updates).
    pub stored: Vec<Value>,
    /// The same with text in its collation's folded form: keys compare so ('Bob' and 'bob'
    /// are one row, or one ring), so every change of one row has one record key and one
    /// partition whatever case its statement used.
    pub folded: Vec<Value>,
    /// The change topic partition: murmur2 of the JSON of the folded key's prefix (the key
    /// without the slot column on ring tables).
    pub partition: i32,
}

impl RowKey {
    /// The key of `change` on `table`, in a topic of `partitions` partitions.
    pub fn of(table: &TableDef, change: &RowChange, partitions: i32) -> RowKey {
        let stored = match change {
            RowChange::Write { row } => table.key_of(row),
            RowChange::Update { key, .. } | RowChange::Delete { key } => key.clone(),
        };
        let folded: Vec<Value> = stored
            .iter()
            .map(|v| match v {
                Value::Text(s) => Value::Text(binlog_format::collation::folded(s)),
                other => other.clone(),
            })
            .collect();
        let prefix_len = table.prefix_columns().len();
        let mut prefix_key = Vec::with_capacity(32);
        write_columns(
            &mut prefix_key,
            table,
            table.primary_key[..prefix_len].iter().copied(),
            &folded[..prefix_len.min(folded.len())],
        );
        let partition = partition_for(&prefix_key, partitions);
        RowKey {
            stored,
            folded,
            partition,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafka_reference_values() {
        // Values from Kafka's own UtilsTest for murmur2.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
    }
}
