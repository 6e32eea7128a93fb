//! Row events.
//!
//! Layout: `RowEvent { table_id: varint u64, change: RowChange, cause: Cause }`.
//! `RowChange` variants: 0 `Write { row }`, 1 `Update { key, after, before: Option }`,
//! 2 `Delete { key }`; rows and keys are `Vec<Value>` (varint length, then the values).

use serde::{Deserialize, Serialize};

use crate::value::Value;

/// Why a row event was logged. Consumers use it to tell an overwrite from a first insert and a
/// TTL purge from a user delete; appliers ignore it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    bincode::Encode,
    bincode::Decode,
)]
pub enum Cause {
    /// 0: a new row into an empty slot or a plain table.
    Insert,
    /// 1: a ring insert that replaced the row in an occupied slot.
    Overwrite,
    /// 2: the write of a ring's meta row (slot 0).
    MetaUpdate,
    /// 3: an UPDATE statement.
    Update,
    /// 4: a DELETE of a whole ring prefix (data rows and meta row).
    PrefixDelete,
    /// 5: the TTL purge removed an expired row.
    TtlPurge,
    /// 6: the native writer's `delete_oldest`.
    DeleteOldest,
    /// 7: TRUNCATE expressed as row deletes.
    Truncate,
    /// 8: a DELETE on a plain table.
    Delete,
}

impl Cause {
    /// The cause in snake case (`insert`, `overwrite`, `meta_update`, `ttl_purge`, ...), as
    /// the change topics' `cause` field and `ringrep-binlog` write it.
    pub fn name(self) -> &'static str {
        match self {
            Cause::Insert => "insert",
            Cause::Overwrite => "overwrite",
            Cause::MetaUpdate => "meta_update",
            Cause::Update => "update",
            Cause::PrefixDelete => "prefix_delete",
            Cause::TtlPurge => "ttl_purge",
            Cause::DeleteOldest => "delete_oldest",
            Cause::Truncate => "truncate",
            Cause::Delete => "delete",
        }
    }
}

/// The change to one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub enum RowChange {
    /// The full row in table column order; applied as an upsert.
    Write {
        /// Every column's value, in the order of [`crate::schema::TableDef::columns`].
        row: Vec<Value>,
    },
    /// The primary key (before the change) and the full after image; `before` is the full
    /// before image when the primary logs it.
    Update {
        /// The primary-key values before the change, in key order
        /// ([`crate::schema::TableDef::primary_key`]).
        key: Vec<Value>,
        /// Every column's value after the change, in table column order.
        after: Vec<Value>,
        /// Every column's value before the change, in table column order, when the primary
        /// logged it; `None` otherwise.
        before: Option<Vec<Value>>,
    },
    /// The primary key of the removed row; deleting a row that is not there is not an error.
    Delete {
        /// The primary-key values of the row, in key order.
        key: Vec<Value>,
    },
}

/// A change to one row of one table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct RowEvent {
    /// The table's [`crate::schema::TableDef::id`]; the definition to read the values with is
    /// the one in the segment header or the latest DDL event before this one.
    pub table_id: u64,
    /// What happened to the row, with the values needed to apply it.
    pub change: RowChange,
    /// Why the primary changed the row; appliers ignore it.
    pub cause: Cause,
}

impl RowEvent {
    /// The kind of change: `write`, `update` or `delete`, as the change topics' `op` field
    /// and `ringrep-binlog` write it.
    pub fn op_name(&self) -> &'static str {
        match self.change {
            RowChange::Write { .. } => "write",
            RowChange::Update { .. } => "update",
            RowChange::Delete { .. } => "delete",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;

    #[test]
    fn every_row_change_round_trips() {
        for ev in crate::events::samples::row_events() {
            let bytes = codec::encode(&ev).expect("encode");
            assert_eq!(codec::encoded_len(&ev).expect("len"), bytes.len());
            assert_eq!(codec::decode::<RowEvent>(&bytes).expect("decode"), ev);
        }
    }

    #[test]
    fn delete_layout_is_stable() {
        let ev = RowEvent {
            table_id: 3,
            change: RowChange::Delete {
                key: vec![Value::Int(1), Value::Int(2)],
            },
            cause: Cause::TtlPurge,
        };
        // table_id 3, variant 2 (Delete), 2 values: Int(1) = [1, 2], Int(2) = [1, 4], cause 5.
        assert_eq!(
            codec::encode(&ev).expect("encode"),
            vec![3, 2, 2, 1, 2, 1, 4, 5]
        );
    }
}
