//! The ring protocol's data: the 32-byte meta layout, the `COMMENT='NDB_TABLE=...'` options,
//! and the column and table rules of the spec with its error texts.

use binlog_format::schema::{
    ColumnDefault, ColumnType, IntWidth, RingOptions, TableDef, TtlOptions,
};

use crate::error::{Error, Result};

/// The ring state of one prefix, as stored in its meta row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meta {
    /// The slot the next insert writes, 1..=N.
    pub next_slot: u32,
    /// Occupied slots (an upper bound on live rows once TTL purges run).
    pub count: u32,
    /// Inserts into the prefix since its ring started.
    pub total: u64,
}

pub(crate) const META_VERSION: u16 = 1;
pub(crate) const META_LEN: usize = 32;

impl Meta {
    /// The meta of a prefix that has no meta row yet.
    pub fn empty() -> Meta {
        Meta {
            next_slot: 1,
            count: 0,
            total: 0,
        }
    }

    /// Layout: version u16 at 0, next slot u32 at 4, count u32 at 8, total u64 at 16, little
    /// endian, other bytes zero.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; META_LEN];
        b[0..2].copy_from_slice(&META_VERSION.to_le_bytes());
        b[4..8].copy_from_slice(&self.next_slot.to_le_bytes());
        b[8..12].copy_from_slice(&self.count.to_le_bytes());
        b[16..24].copy_from_slice(&self.total.to_le_bytes());
        b
    }

    /// Reads a meta column's bytes; `None` when they are too short or of another version.
    pub fn decode(b: &[u8]) -> Option<Meta> {
        if b.len() < META_LEN || u16::from_le_bytes([b[0], b[1]]) != META_VERSION {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut total = [0u8; 8];
        total.copy_from_slice(&b[16..24]);
        Some(Meta {
            next_slot: u32_at(4),
            count: u32_at(8),
            total: u64::from_le_bytes(total),
        })
    }

    /// Takes the next slot for an insert into a ring of `size` slots; returns the slot and
    /// whether it was occupied before.
    pub fn advance(&mut self, size: u32) -> (u32, bool) {
        let slot = self.next_slot;
        let occupied = self.count >= size || slot <= self.count;
        if self.count < size {
            self.count += 1;
        }
        self.total += 1;
        self.next_slot = if slot >= size { 1 } else { slot + 1 };
        (slot, occupied)
    }
}

/// `MAX_ROWS_PER_PK` (or the older `RING_BUFFER`) as written in the comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingSpec {
    /// `MAX_ROWS_PER_PK=off` or no ring option: a plain table (a size of 0 is refused).
    Off,
    /// A ring of `size` slots per primary-key prefix.
    On {
        /// Rows kept per prefix.
        size: u32,
        /// The slot column, the last primary-key column (`ring_idx` in the spec).
        slot_column: String,
        /// The column that holds the meta row's state (`ring_meta`).
        meta_column: String,
    },
}

/// `TTL=seconds@column` or `TTL=OFF`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TtlSpec {
    /// `TTL=OFF`.
    Off,
    /// Rows expire `seconds` after the time in `column`.
    On {
        /// The time to live, in seconds.
        seconds: u32,
        /// The TIMESTAMP or DATETIME column the time is counted from.
        column: String,
    },
}

/// The NDB_TABLE options of a table comment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NdbOptions {
    /// The ring option, if given.
    pub ring: Option<RingSpec>,
    /// The TTL option, if given.
    pub ttl: Option<TtlSpec>,
    /// `FULLY_REPLICATED`, accepted and kept (one node has nothing to replicate).
    pub fully_replicated: Option<bool>,
    /// `PARTITION_BALANCE`, accepted and kept.
    pub partition_balance: Option<String>,
    /// `NOLOGGING`, accepted and kept.
    pub nologging: Option<bool>,
    /// `READ_BACKUP`, accepted and kept.
    pub read_backup: Option<bool>,
}

/// The ring option's value. The size's error text names the option as RonDB's revisions do:
/// `MAX_ROWS_PER_PK size must be ...` for `MAX_ROWS_PER_PK` (RonDB's later revision, which
/// also gives it for an empty size), `Ring buffer size must be ...` for the older
/// `RING_BUFFER`.
fn parse_ring(value: &str, max_rows_per_pk: bool) -> Result<RingSpec> {
    if value.eq_ignore_ascii_case("off") {
        return Ok(RingSpec::Off);
    }
    let parts: Vec<&str> = value.split('@').collect();
    let (size, slot, meta) = match parts.as_slice() {
        [size] => (*size, "ring_idx", "ring_meta"),
        [size, slot, meta] => (*size, *slot, *meta),
        _ => {
            return Err(Error::create_option(
                "RING_BUFFER format: 'SIZE@idx_col@meta_col'",
            ))
        }
    };
    let out_of_range = || {
        Error::create_option(if max_rows_per_pk {
            "MAX_ROWS_PER_PK size must be >= 1 and <= 2147483647"
        } else {
            "Ring buffer size must be >= 1 and <= 2147483647"
        })
    };
    if size.is_empty() {
        return Err(out_of_range());
    }
    if !size.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::create_option(
            "Invalid RING_BUFFER format, size must be a positive integer",
        ));
    }
    let size: u64 = size.parse().unwrap_or(u64::MAX);
    if size == 0 || size > 2_147_483_647 {
        return Err(out_of_range());
    }
    Ok(RingSpec::On {
        size: size as u32,
        slot_column: slot.to_string(),
        meta_column: meta.to_string(),
    })
}

fn parse_ttl(value: &str) -> Result<TtlSpec> {
    if value.eq_ignore_ascii_case("off") {
        return Ok(TtlSpec::Off);
    }
    let (secs, col) = value
        .split_once('@')
        .ok_or_else(|| Error::create_option("TTL format: 'SECONDS@column'"))?;
    let seconds: u32 = secs
        .parse()
        .map_err(|_| Error::create_option("TTL seconds must be a non-negative integer"))?;
    Ok(TtlSpec::On {
        seconds,
        column: col.to_string(),
    })
}

fn parse_bool(value: &str) -> Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "on" | "true" => Ok(true),
        "0" | "off" | "false" => Ok(false),
        other => Err(Error::create_option(&format!(
            "Invalid boolean value '{other}'"
        ))),
    }
}

/// Parses the `NDB_TABLE=` part of a table comment. A comment without it has no options.
pub fn parse_comment(comment: &str) -> Result<NdbOptions> {
    let mut opts = NdbOptions::default();
    let Some(start) = comment.find("NDB_TABLE=") else {
        return Ok(opts);
    };
    let body = &comment[start + "NDB_TABLE=".len()..];
    for item in body.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| Error::create_option(&format!("Invalid NDB_TABLE option '{item}'")))?;
        match key.trim().to_ascii_uppercase().as_str() {
            k @ ("MAX_ROWS_PER_PK" | "RING_BUFFER") => {
                opts.ring = Some(parse_ring(value.trim(), k == "MAX_ROWS_PER_PK")?)
            }
            "TTL" => opts.ttl = Some(parse_ttl(value.trim())?),
            "FULLY_REPLICATED" => opts.fully_replicated = Some(parse_bool(value)?),
            "NOLOGGING" => opts.nologging = Some(parse_bool(value)?),
            "READ_BACKUP" => opts.read_backup = Some(parse_bool(value)?),
            "PARTITION_BALANCE" => opts.partition_balance = Some(value.trim().to_string()),
            other => {
                return Err(Error::create_option(&format!(
                    "Unknown NDB_TABLE option '{other}'"
                )))
            }
        }
    }
    Ok(opts)
}

/// Checks the spec's column and table rules for a ring table and resolves the ring options.
/// `partition_kind` is `None`, or the kind of `PARTITION BY` ("KEY", "LINEAR KEY", "HASH", ...).
pub(crate) fn ring_options(
    def: &TableDef,
    size: u32,
    slot_name: &str,
    meta_name: &str,
) -> Result<RingOptions> {
    if def.primary_key.is_empty() {
        return Err(Error::create_option(
            "Ring buffer table must have a PRIMARY KEY",
        ));
    }
    let slot = def
        .column_index(slot_name)
        .ok_or_else(|| Error::create_option("Ring index column not found in table"))?;
    let meta = def
        .column_index(meta_name)
        .ok_or_else(|| Error::create_option("Ring meta column not found in table"))?;
    let slot_col = &def.columns[slot];
    if slot_col.ty
        != (ColumnType::Integer {
            width: IntWidth::Int,
            unsigned: false,
        })
        && slot_col.ty
            != (ColumnType::Integer {
                width: IntWidth::Int,
                unsigned: true,
            })
    {
        return Err(Error::create_option("Ring index column must be INT type"));
    }
    if matches!(slot_col.default, ColumnDefault::None) {
        return Err(Error::create_option(
            "Ring index column must have DEFAULT (e.g. 0)",
        ));
    }
    let last_pk = def.primary_key.last().copied();
    if last_pk != Some(slot)
        || def.primary_key[..def.primary_key.len() - 1]
            .iter()
            .any(|&c| c > slot)
    {
        return Err(Error::create_option(
            "Ring index column must be the last column of the PRIMARY KEY",
        ));
    }
    let meta_col = &def.columns[meta];
    match meta_col.ty {
        ColumnType::VarBinary { len } if len >= 32 => {}
        ColumnType::VarBinary { .. } => {
            return Err(Error::create_option(
                "Ring meta column must be VARBINARY with length >= 32",
            ))
        }
        _ => {
            return Err(Error::create_option(
                "Ring meta column must be VARBINARY type",
            ))
        }
    }
    if !meta_col.nullable {
        return Err(Error::create_option("Ring meta column must be nullable"));
    }
    if def.primary_key.contains(&meta) {
        return Err(Error::create_option(
            "Ring meta column cannot be part of the PRIMARY KEY",
        ));
    }
    if def
        .indexes
        .iter()
        .any(|i| i.columns.contains(&slot) || i.columns.contains(&meta))
    {
        return Err(Error::create_option(
            "Ring index and meta columns cannot be part of a secondary or unique index",
        ));
    }
    for (i, c) in def.columns.iter().enumerate() {
        if i != meta && c.ty.is_lob() && !c.nullable {
            // RonDB's text (its meta_row_index recording); JSON and GEOMETRY are BLOBs to
            // NDB, so the rule is the spec's.
            return Err(Error::create_option(
                "Ring buffer tables cannot have NOT NULL BLOB/TEXT columns",
            ));
        }
    }
    Ok(RingOptions {
        size,
        slot_column: slot,
        meta_column: meta,
    })
}

/// Resolves a TTL spec against the table: the column must exist and hold a time.
pub(crate) fn ttl_options(def: &TableDef, seconds: u32, column: &str) -> Result<TtlOptions> {
    let col = def.column_index(column).ok_or_else(|| {
        Error::create_option(&format!("TTL column '{column}' not found in table"))
    })?;
    match def.columns[col].ty {
        ColumnType::Timestamp { .. } | ColumnType::DateTime { .. } | ColumnType::Date => {}
        _ => {
            return Err(Error::create_option(
                "TTL column must be TIMESTAMP, DATETIME or DATE",
            ))
        }
    }
    if def.ring.is_some() && def.primary_key.contains(&col) {
        return Err(Error::create_option(
            "TTL column cannot be a PRIMARY KEY column of a ring table",
        ));
    }
    Ok(TtlOptions {
        seconds,
        column: col,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_layout_matches_the_spec() {
        let m = Meta {
            next_slot: 3,
            count: 4,
            total: 6,
        };
        let hex: String = m.encode().iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(
            hex,
            "0100000003000000040000000000000006000000000000000000000000000000"
        );
        assert_eq!(Meta::decode(&m.encode()), Some(m));
    }

    #[test]
    fn advance_wraps_and_reports_overwrites() {
        let mut m = Meta::empty();
        let slots: Vec<(u32, bool)> = (0..5).map(|_| m.advance(3)).collect();
        assert_eq!(
            slots,
            vec![(1, false), (2, false), (3, false), (1, true), (2, true)]
        );
        assert_eq!(
            m,
            Meta {
                next_slot: 3,
                count: 3,
                total: 5
            }
        );
    }

    #[test]
    fn comment_options_parse_in_both_forms() {
        let o = parse_comment("NDB_TABLE=PARTITION_BALANCE=FOR_RP_BY_LDM,MAX_ROWS_PER_PK=200")
            .expect("parse");
        assert_eq!(
            o.ring,
            Some(RingSpec::On {
                size: 200,
                slot_column: "ring_idx".into(),
                meta_column: "ring_meta".into()
            })
        );
        let o = parse_comment("NDB_TABLE=TTL=60@ts,RING_BUFFER=4@row_seq@row_meta").expect("parse");
        assert_eq!(
            o.ttl,
            Some(TtlSpec::On {
                seconds: 60,
                column: "ts".into()
            })
        );
        assert_eq!(
            o.ring,
            Some(RingSpec::On {
                size: 4,
                slot_column: "row_seq".into(),
                meta_column: "row_meta".into()
            })
        );
        assert_eq!(parse_comment("NDB_TABLE=RING_BUFFER=0@a@b").map_err(|e| e.message).err().as_deref(),
            Some("Table storage engine 'ndbcluster' does not support the create option 'Ring buffer size must be >= 1 and <= 2147483647'"));
        assert_eq!(parse_comment("NDB_TABLE=MAX_ROWS_PER_PK=@a@b").map_err(|e| e.message).err().as_deref(),
            Some("Table storage engine 'ndbcluster' does not support the create option 'MAX_ROWS_PER_PK size must be >= 1 and <= 2147483647'"));
        assert!(parse_comment("NDB_TABLE=RING_BUFFER=abc@a@b").is_err());
        assert!(parse_comment("NDB_TABLE=RING_BUFFER=400@ring_idx").is_err());
    }
}
