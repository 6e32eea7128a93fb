//! Table definitions as data. Every segment header carries the definitions of all tables, and
//! every DDL event carries the definition that results from it, so a consumer can decode row
//! events without asking the primary.

use serde::{Deserialize, Serialize};

use crate::value::Value;

/// Size class of TEXT and BLOB columns (TINY, plain, MEDIUM, LONG).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode,
)]
pub enum LobSize {
    /// TINYTEXT / TINYBLOB: up to 255 bytes.
    Tiny,
    /// TEXT / BLOB: up to 65,535 bytes.
    Normal,
    /// MEDIUMTEXT / MEDIUMBLOB: up to 16,777,215 bytes.
    Medium,
    /// LONGTEXT / LONGBLOB: up to 4,294,967,295 bytes.
    Long,
}

impl LobSize {
    /// Maximum length in bytes, as MySQL defines it.
    pub fn max_len(self) -> u64 {
        match self {
            LobSize::Tiny => 255,
            LobSize::Normal => 65_535,
            LobSize::Medium => 16_777_215,
            LobSize::Long => 4_294_967_295,
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            LobSize::Tiny => "tiny",
            LobSize::Normal => "",
            LobSize::Medium => "medium",
            LobSize::Long => "long",
        }
    }
}

/// Width of an integer column.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode,
)]
pub enum IntWidth {
    /// TINYINT: 8 bits.
    Tiny,
    /// SMALLINT: 16 bits.
    Small,
    /// MEDIUMINT: 24 bits.
    Medium,
    /// INT: 32 bits.
    Int,
    /// BIGINT: 64 bits.
    Big,
    /// TINYINT(1), as BOOL and BOOLEAN declare it: a TINYINT that keeps its display width,
    /// which clients and ORMs read as a boolean (MySQL 8 drops every other display width).
    /// Last, so that the tables written before it decode as they were.
    Bool,
}

impl IntWidth {
    /// The column's storage width in bits: 8, 16, 24, 32 or 64.
    pub fn bits(self) -> u32 {
        match self {
            IntWidth::Tiny | IntWidth::Bool => 8,
            IntWidth::Small => 16,
            IntWidth::Medium => 24,
            IntWidth::Int => 32,
            IntWidth::Big => 64,
        }
    }

    /// The inclusive range of the column (signed or unsigned) as i128.
    pub fn range(self, unsigned: bool) -> (i128, i128) {
        let bits = self.bits();
        if unsigned {
            (0, (1i128 << bits) - 1)
        } else {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        }
    }

    fn name(self) -> &'static str {
        match self {
            IntWidth::Tiny => "tinyint",
            IntWidth::Bool => "tinyint(1)",
            IntWidth::Small => "smallint",
            IntWidth::Medium => "mediumint",
            IntWidth::Int => "int",
            IntWidth::Big => "bigint",
        }
    }
}

/// The SQL type of a column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub enum ColumnType {
    /// TINYINT to BIGINT. Values are [`Value::Int`] when signed, [`Value::UInt`] when UNSIGNED.
    Integer {
        /// How many bits the column holds.
        width: IntWidth,
        /// Whether the column is UNSIGNED.
        unsigned: bool,
    },
    /// `DECIMAL(precision, scale)`. Values are [`Value::Decimal`] text.
    Decimal {
        /// Total number of digits.
        precision: u8,
        /// Digits after the decimal point.
        scale: u8,
    },
    /// FLOAT (32-bit). Values are [`Value::Float`].
    Float,
    /// DOUBLE (64-bit). Values are [`Value::Double`].
    Double,
    /// `CHAR(len)`, fixed length. Values are [`Value::Text`].
    Char {
        /// Length in characters.
        len: u32,
    },
    /// `VARCHAR(len)`. Values are [`Value::Text`].
    VarChar {
        /// Maximum length in characters.
        len: u32,
    },
    /// `BINARY(len)`, fixed length. Values are [`Value::Bytes`].
    Binary {
        /// Length in bytes.
        len: u32,
    },
    /// `VARBINARY(len)`. Values are [`Value::Bytes`].
    VarBinary {
        /// Maximum length in bytes.
        len: u32,
    },
    /// TINYTEXT, TEXT, MEDIUMTEXT or LONGTEXT. Values are [`Value::Text`].
    Text {
        /// Which of the four sizes.
        size: LobSize,
    },
    /// TINYBLOB, BLOB, MEDIUMBLOB or LONGBLOB. Values are [`Value::Bytes`].
    Blob {
        /// Which of the four sizes.
        size: LobSize,
    },
    /// JSON. Values are [`Value::Json`] text.
    Json,
    /// DATE. Values are [`Value::Date`].
    Date,
    /// `DATETIME(fsp)`. Values are [`Value::DateTime`], microseconds always carried.
    DateTime {
        /// Fractional-second digits shown, 0 to 6.
        fsp: u8,
    },
    /// `TIMESTAMP(fsp)`. Values are [`Value::Timestamp`] (microseconds since the epoch, UTC).
    Timestamp {
        /// Fractional-second digits shown, 0 to 6.
        fsp: u8,
    },
    /// `ENUM('a', 'b', ...)`. Values are [`Value::Text`]: one of `values` as declared, or
    /// the empty string MySQL stores for a value it could not take (index 0). The last
    /// variant, so that tables written before it decode as they were.
    Enum {
        /// The members, in order (MySQL's index is the position plus one).
        values: Vec<String>,
    },
    /// `SET('a', 'b', ...)`. Values are [`Value::Text`]: the members a row has, in the
    /// declared order and spelling, joined by commas (`''` for none); bit `i` of MySQL's
    /// number is `values[i]`.
    Set {
        /// The members, in order, at most 64.
        values: Vec<String>,
    },
    /// YEAR: 1901 to 2155, or 0 (shown `0000`). Values are [`Value::Int`].
    Year,
    /// `DECIMAL(precision, scale) UNSIGNED`: a [`ColumnType::Decimal`] that refuses negative
    /// values. Its own variant, appended, so that tables written before it decode as they
    /// were. Values are [`Value::Decimal`] text.
    UnsignedDecimal {
        /// Total number of digits.
        precision: u8,
        /// Digits after the decimal point.
        scale: u8,
    },
    /// FLOAT or DOUBLE declared with `(M, D)` or `UNSIGNED`, which MySQL 8 keeps (deprecated
    /// but still honoured): values are rounded to `D` fraction digits and must fit in `M`
    /// digits, and an UNSIGNED one refuses negative values. A plain FLOAT or DOUBLE stays
    /// [`ColumnType::Float`] or [`ColumnType::Double`]. Values are [`Value::Float`] when
    /// single precision, [`Value::Double`] when double.
    Real {
        /// DOUBLE (or REAL, or FLOAT(p) with p above 24) rather than FLOAT.
        double: bool,
        /// `(M, D)`: total digits and digits after the point, when declared.
        digits: Option<(u8, u8)>,
        /// Whether the column is UNSIGNED.
        unsigned: bool,
    },
    /// `TIME(fsp)`: a signed duration, -838:59:59 to 838:59:59. Values are [`Value::Time`]
    /// (microseconds, always carried).
    Time {
        /// Fractional-second digits shown, 0 to 6.
        fsp: u8,
    },
    /// `BIT(width)`: 1 to 64 bits. Values are [`Value::Bit`].
    Bit {
        /// Number of bits, 1 to 64.
        width: u8,
    },
}

impl ColumnType {
    /// The type as `SHOW CREATE TABLE` prints it.
    pub fn sql(&self) -> String {
        match self {
            ColumnType::Integer { width, unsigned } => {
                format!(
                    "{}{}",
                    width.name(),
                    if *unsigned { " unsigned" } else { "" }
                )
            }
            ColumnType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            ColumnType::Float => "float".into(),
            ColumnType::Double => "double".into(),
            ColumnType::Char { len } => format!("char({len})"),
            ColumnType::VarChar { len } => format!("varchar({len})"),
            ColumnType::Binary { len } => format!("binary({len})"),
            ColumnType::VarBinary { len } => format!("varbinary({len})"),
            ColumnType::Text { size } => format!("{}text", size.prefix()),
            ColumnType::Blob { size } => format!("{}blob", size.prefix()),
            ColumnType::Json => "json".into(),
            ColumnType::Date => "date".into(),
            ColumnType::DateTime { fsp: 0 } => "datetime".into(),
            ColumnType::DateTime { fsp } => format!("datetime({fsp})"),
            ColumnType::Timestamp { fsp: 0 } => "timestamp".into(),
            ColumnType::Timestamp { fsp } => format!("timestamp({fsp})"),
            ColumnType::Enum { values } => format!("enum({})", quoted_members(values)),
            ColumnType::Set { values } => format!("set({})", quoted_members(values)),
            ColumnType::Year => "year".into(),
            ColumnType::UnsignedDecimal { precision, scale } => {
                format!("decimal({precision},{scale}) unsigned")
            }
            ColumnType::Real {
                double,
                digits,
                unsigned,
            } => format!(
                "{}{}{}",
                if *double { "double" } else { "float" },
                digits.map_or(String::new(), |(m, d)| format!("({m},{d})")),
                if *unsigned { " unsigned" } else { "" }
            ),
            ColumnType::Time { fsp: 0 } => "time".into(),
            ColumnType::Time { fsp } => format!("time({fsp})"),
            ColumnType::Bit { width } => format!("bit({width})"),
        }
    }

    /// A DECIMAL's precision and scale, signed or UNSIGNED; `None` for other types.
    pub fn decimal_digits(&self) -> Option<(u8, u8)> {
        match self {
            ColumnType::Decimal { precision, scale }
            | ColumnType::UnsignedDecimal { precision, scale } => Some((*precision, *scale)),
            _ => None,
        }
    }

    /// Whether values are single-precision floats ([`Value::Float`]): FLOAT, however
    /// declared.
    pub fn is_single_float(&self) -> bool {
        matches!(
            self,
            ColumnType::Float | ColumnType::Real { double: false, .. }
        )
    }

    /// Whether values are double-precision floats ([`Value::Double`]): DOUBLE, however
    /// declared.
    pub fn is_double_float(&self) -> bool {
        matches!(
            self,
            ColumnType::Double | ColumnType::Real { double: true, .. }
        )
    }

    /// Whether a number column refuses negative values: the UNSIGNED integers, DECIMALs,
    /// FLOATs and DOUBLEs.
    pub fn is_unsigned(&self) -> bool {
        matches!(
            self,
            ColumnType::Integer { unsigned: true, .. }
                | ColumnType::UnsignedDecimal { .. }
                | ColumnType::Real { unsigned: true, .. }
        )
    }

    /// An ENUM's or SET's member for `text`, as MySQL finds it: equal under the text
    /// collation, the spaces at the end not counted; `None` when no member is.
    pub fn enum_member(&self, text: &str) -> Option<&str> {
        let (ColumnType::Enum { values } | ColumnType::Set { values }) = self else {
            return None;
        };
        let text = text.trim_end_matches(' ');
        values
            .iter()
            .find(|m| crate::collation::eq(m, text))
            .map(String::as_str)
    }

    /// BLOB, TEXT and JSON: the types that the ring rules require to be nullable.
    pub fn is_lob(&self) -> bool {
        matches!(
            self,
            ColumnType::Text { .. } | ColumnType::Blob { .. } | ColumnType::Json
        )
    }

    /// The number types: the integers, DECIMAL, FLOAT and DOUBLE (not YEAR).
    pub fn is_number(&self) -> bool {
        matches!(
            self,
            ColumnType::Integer { .. }
                | ColumnType::Decimal { .. }
                | ColumnType::UnsignedDecimal { .. }
                | ColumnType::Float
                | ColumnType::Double
                | ColumnType::Real { .. }
        )
    }

    /// An ENUM's or SET's value `text` as MySQL's number of it: an ENUM member's index from
    /// 1 (0 for the empty string of a bad value), a SET's members' bits; `None` for other
    /// types.
    pub fn member_number(&self, text: &str) -> Option<u64> {
        let position = |values: &[String], m: &str| values.iter().position(|x| x == m);
        match self {
            ColumnType::Enum { values } => Some(position(values, text).map_or(0, |i| i as u64 + 1)),
            ColumnType::Set { values } => Some(
                text.split(',')
                    .filter_map(|m| position(values, m))
                    .fold(0u64, |b, i| b | (1 << i)),
            ),
            _ => None,
        }
    }

    /// The longest value of an ENUM or SET, in characters: its longest member, or all its
    /// members with their commas; `None` for other types.
    pub fn member_chars(&self) -> Option<u64> {
        let chars = |v: &String| v.chars().count() as u64;
        match self {
            ColumnType::Enum { values } => Some(values.iter().map(chars).max().unwrap_or(0)),
            ColumnType::Set { values } => {
                Some(values.iter().map(chars).sum::<u64>() + values.len().saturating_sub(1) as u64)
            }
            _ => None,
        }
    }

    /// Any integer width, signed or unsigned.
    pub fn is_integer(&self) -> bool {
        matches!(self, ColumnType::Integer { .. })
    }

    /// The character types: CHAR, VARCHAR, the TEXT sizes, ENUM and SET (not JSON).
    pub fn is_string(&self) -> bool {
        matches!(
            self,
            ColumnType::Char { .. }
                | ColumnType::VarChar { .. }
                | ColumnType::Text { .. }
                | ColumnType::Enum { .. }
                | ColumnType::Set { .. }
        )
    }

    /// The byte-string types: BINARY, VARBINARY and the BLOB sizes.
    pub fn is_binary(&self) -> bool {
        matches!(
            self,
            ColumnType::Binary { .. } | ColumnType::VarBinary { .. } | ColumnType::Blob { .. }
        )
    }
}

/// An ENUM's or SET's members as SHOW CREATE TABLE lists them: quoted, `'` doubled, `\`
/// escaped.
fn quoted_members(values: &[String]) -> String {
    values
        .iter()
        .map(|v| format!("'{}'", v.replace('\\', "\\\\").replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(",")
}

/// What a column holds when an INSERT does not name it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub enum ColumnDefault {
    /// No DEFAULT clause: NULL for nullable columns, an error for NOT NULL ones in strict mode.
    None,
    /// A constant, already converted to the column type.
    Value(Value),
    /// `DEFAULT CURRENT_TIMESTAMP(fsp)`.
    CurrentTimestamp {
        /// Fractional-second digits of the current time, 0 to 6.
        fsp: u8,
    },
    /// A generated column, `AS (expr) VIRTUAL|STORED`: the SQL layer computes its value from
    /// the row on every insert and update, and rows carry the computed value.
    Generated {
        /// The SQL expression, as text.
        expr: String,
        /// `STORED` (true) or `VIRTUAL` (false).
        stored: bool,
    },
}

/// One column of a table.
///
/// Its encoding is written by hand (see `docs/format.md`): the last byte, once the
/// `auto_increment` bool, holds flags, and a comment follows only when the flags say so, so
/// that a column written before comments were kept (flags 0 or 1) decodes as it was.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    /// The column's name as declared (names compare case-insensitively).
    pub name: String,
    /// The SQL type, which says which [`Value`] variant the column's values take.
    pub ty: ColumnType,
    /// Whether the column accepts NULL (no `NOT NULL`).
    pub nullable: bool,
    /// The value an INSERT that does not name the column gives it.
    pub default: ColumnDefault,
    /// `ON UPDATE CURRENT_TIMESTAMP(fsp)`.
    pub on_update_now: bool,
    /// `AUTO_INCREMENT`: an insert without a value for it takes the next number.
    pub auto_increment: bool,
    /// The column's `COMMENT '...'`; empty when it has none, as MySQL keeps it.
    pub comment: String,
}

/// Bit 0 of a column's flags byte: `AUTO_INCREMENT` (the byte's old meaning as a bool).
const FLAG_AUTO_INCREMENT: u8 = 1;
/// Bit 1 of a column's flags byte: a comment follows.
const FLAG_COMMENT: u8 = 2;

impl ColumnDef {
    fn flags(&self) -> u8 {
        let mut flags = 0;
        if self.auto_increment {
            flags |= FLAG_AUTO_INCREMENT;
        }
        if !self.comment.is_empty() {
            flags |= FLAG_COMMENT;
        }
        flags
    }

    fn from_parts(fields: ColumnFields, flags: u8, comment: String) -> ColumnDef {
        let (name, ty, nullable, default, on_update_now) = fields;
        ColumnDef {
            name,
            ty,
            nullable,
            default,
            on_update_now,
            auto_increment: flags & FLAG_AUTO_INCREMENT != 0,
            comment,
        }
    }
}

/// The fields before the flags byte, in encoding order.
type ColumnFields = (String, ColumnType, bool, ColumnDefault, bool);

fn unknown_flags(flags: u8) -> String {
    format!("unknown column flags {flags:#04x}")
}

impl bincode::Encode for ColumnDef {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        e: &mut E,
    ) -> Result<(), bincode::error::EncodeError> {
        self.name.encode(e)?;
        self.ty.encode(e)?;
        self.nullable.encode(e)?;
        self.default.encode(e)?;
        self.on_update_now.encode(e)?;
        self.flags().encode(e)?;
        if !self.comment.is_empty() {
            self.comment.encode(e)?;
        }
        Ok(())
    }
}

impl<C> bincode::Decode<C> for ColumnDef {
    fn decode<D: bincode::de::Decoder<Context = C>>(
        d: &mut D,
    ) -> Result<Self, bincode::error::DecodeError> {
        let fields = (
            String::decode(d)?,
            ColumnType::decode(d)?,
            bool::decode(d)?,
            ColumnDefault::decode(d)?,
            bool::decode(d)?,
        );
        let flags = u8::decode(d)?;
        if flags & !(FLAG_AUTO_INCREMENT | FLAG_COMMENT) != 0 {
            return Err(bincode::error::DecodeError::OtherString(unknown_flags(
                flags,
            )));
        }
        let comment = if flags & FLAG_COMMENT != 0 {
            String::decode(d)?
        } else {
            String::new()
        };
        Ok(ColumnDef::from_parts(fields, flags, comment))
    }
}

bincode::impl_borrow_decode!(ColumnDef);

/// A column as JSON shows it (`ringrep-binlog dump --json`, the Kafka schema records): its
/// fields by name, `comment` only when there is one.
#[derive(Serialize, Deserialize)]
#[serde(rename = "ColumnDef")]
struct NamedColumn {
    name: String,
    ty: ColumnType,
    nullable: bool,
    default: ColumnDefault,
    on_update_now: bool,
    auto_increment: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    comment: String,
}

impl Serialize for ColumnDef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        if s.is_human_readable() {
            let c = self.clone();
            return NamedColumn {
                name: c.name,
                ty: c.ty,
                nullable: c.nullable,
                default: c.default,
                on_update_now: c.on_update_now,
                auto_increment: c.auto_increment,
                comment: c.comment,
            }
            .serialize(s);
        }
        // The same bytes as the bincode encoding above.
        let has_comment = !self.comment.is_empty();
        let mut t = s.serialize_tuple(6 + usize::from(has_comment))?;
        t.serialize_element(&self.name)?;
        t.serialize_element(&self.ty)?;
        t.serialize_element(&self.nullable)?;
        t.serialize_element(&self.default)?;
        t.serialize_element(&self.on_update_now)?;
        t.serialize_element(&self.flags())?;
        if has_comment {
            t.serialize_element(&self.comment)?;
        }
        t.end()
    }
}

impl<'de> Deserialize<'de> for ColumnDef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        if d.is_human_readable() {
            let c = NamedColumn::deserialize(d)?;
            return Ok(ColumnDef {
                name: c.name,
                ty: c.ty,
                nullable: c.nullable,
                default: c.default,
                on_update_now: c.on_update_now,
                auto_increment: c.auto_increment,
                comment: c.comment,
            });
        }
        struct Flagged;
        impl<'de> serde::de::Visitor<'de> for Flagged {
            type Value = ColumnDef;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a column definition")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<ColumnDef, A::Error> {
                let missing = || A::Error::custom("a column definition ends early");
                let fields = (
                    a.next_element()?.ok_or_else(missing)?,
                    a.next_element()?.ok_or_else(missing)?,
                    a.next_element()?.ok_or_else(missing)?,
                    a.next_element()?.ok_or_else(missing)?,
                    a.next_element()?.ok_or_else(missing)?,
                );
                let flags: u8 = a.next_element()?.ok_or_else(missing)?;
                if flags & !(FLAG_AUTO_INCREMENT | FLAG_COMMENT) != 0 {
                    return Err(A::Error::custom(unknown_flags(flags)));
                }
                let comment = if flags & FLAG_COMMENT != 0 {
                    a.next_element()?.ok_or_else(missing)?
                } else {
                    String::new()
                };
                Ok(ColumnDef::from_parts(fields, flags, comment))
            }
        }
        // Seven elements at most; the seventh is read only when the flags announce it.
        d.deserialize_tuple(7, Flagged)
    }
}

impl ColumnDef {
    /// A column with no default, no `ON UPDATE` and no `AUTO_INCREMENT`: what system tables
    /// and tests declare.
    pub fn plain(name: &str, ty: ColumnType, nullable: bool) -> ColumnDef {
        ColumnDef {
            name: name.into(),
            ty,
            nullable,
            default: ColumnDefault::None,
            on_update_now: false,
            auto_increment: false,
            comment: String::new(),
        }
    }
}

/// Whether an index enforces uniqueness.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode,
)]
pub enum IndexKind {
    /// `UNIQUE`: no two rows have the same values in the index's columns.
    Unique,
    /// A plain (non-unique) index, for lookups only.
    Secondary,
}

/// A secondary or unique index (the primary key is [`TableDef::primary_key`], not an index
/// here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct IndexDef {
    /// The index's name.
    pub name: String,
    /// Unique or not.
    pub kind: IndexKind,
    /// Column positions in the table, in index order.
    pub columns: Vec<usize>,
}

/// `MAX_ROWS_PER_PK=size@slot_column@meta_column`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct RingOptions {
    /// How many data rows (slots 1 to `size`) each primary-key prefix holds.
    pub size: u32,
    /// Position of the slot column (the last primary-key column).
    pub slot_column: usize,
    /// Position of the meta column.
    pub meta_column: usize,
}

/// `TTL=seconds@column`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct TtlOptions {
    /// How long a row lives: it expires this many seconds after the time in `column`.
    pub seconds: u32,
    /// Position of the column (TIMESTAMP, DATETIME or DATE) a row's age is measured from.
    pub column: usize,
}

/// A table's `PARTITION BY [LINEAR] KEY(...) [PARTITIONS n]` clause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct Partitioning {
    /// `LINEAR KEY` rather than `KEY`.
    pub linear: bool,
    /// Column positions of `PARTITION BY [LINEAR] KEY(...)`; empty means the primary key.
    pub columns: Vec<usize>,
    /// The `PARTITIONS n` clause, when given.
    pub partitions: Option<u32>,
}

/// Name of the hidden primary-key column that tables declared without a primary key get.
pub const HIDDEN_ROW_ID: &str = "__ringrep_row_id";

/// A table's definition. `id` is stable for the life of the table (ALTER keeps it; DROP and
/// CREATE give a new one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct TableDef {
    /// The table's id, by which row events and DDL events name it.
    pub id: u64,
    /// The database the table is in.
    pub database: String,
    /// The table's name within its database.
    pub name: String,
    /// The columns in table order; rows hold their values in this order.
    pub columns: Vec<ColumnDef>,
    /// Column positions of the primary key, in key order; empty for a table without one.
    pub primary_key: Vec<usize>,
    /// The secondary and unique indexes.
    pub indexes: Vec<IndexDef>,
    /// Set for a ring table (`MAX_ROWS_PER_PK` in the comment): each key prefix keeps at most
    /// `size` rows and a meta row in slot 0.
    pub ring: Option<RingOptions>,
    /// Set when rows expire (`TTL` in the comment).
    pub ttl: Option<TtlOptions>,
    /// The partitioning clause, when the table has one.
    pub partitioning: Option<Partitioning>,
    /// The raw `COMMENT='...'` text, kept so SHOW CREATE TABLE prints it back.
    pub comment: Option<String>,
}

impl TableDef {
    /// The position of the column named `name` (compared ASCII case-insensitively), if any.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The primary-key values of a full row.
    pub fn key_of(&self, row: &[Value]) -> Vec<Value> {
        self.key_refs(row).cloned().collect()
    }

    /// The values a row holds for index `index` (its position in `indexes`), as a key; `None`
    /// when one is NULL, since NULLs never clash in a unique index.
    pub fn index_value(&self, index: usize, row: &[Value]) -> Option<crate::Key> {
        let values: Vec<Value> = self.indexes[index]
            .columns
            .iter()
            .map(|&c| row.get(c).cloned().unwrap_or(Value::Null))
            .collect();
        (!values.iter().any(Value::is_null)).then_some(crate::Key(values))
    }

    /// The primary-key values of a full row, borrowed (NULL for a column the row lacks).
    pub fn key_refs<'r>(&self, row: &'r [Value]) -> impl Iterator<Item = &'r Value> + use<'_, 'r> {
        self.primary_key
            .iter()
            .map(|&i| row.get(i).unwrap_or(&Value::Null))
    }

    /// Positions of the prefix columns: the primary key without its last column on a ring
    /// table, the whole primary key otherwise.
    pub fn prefix_columns(&self) -> &[usize] {
        match &self.ring {
            Some(_) => &self.primary_key[..self.primary_key.len().saturating_sub(1)],
            None => &self.primary_key,
        }
    }

    /// Whether a primary key (its values in key order) is a ring's meta row: slot 0.
    pub fn is_meta_key(&self, key: &[Value]) -> bool {
        self.ring.is_some() && matches!(key.last(), Some(Value::Int(0) | Value::UInt(0)))
    }

    /// `database.name`, unquoted.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.database, self.name)
    }
}

/// The set of databases and tables, kept current by applying DDL events in order. The writer
/// keeps one to put into each new segment header; readers rebuild one to decode rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    /// The database names.
    pub databases: std::collections::BTreeSet<String>,
    /// The tables, by [`TableDef::id`].
    pub tables: std::collections::BTreeMap<u64, TableDef>,
}

impl Schema {
    /// The schema a segment header describes (the header's `databases` and `tables`): the
    /// schema as of the segment's first record.
    pub fn from_header(databases: &[String], tables: &[TableDef]) -> Schema {
        Schema {
            databases: databases.iter().cloned().collect(),
            tables: tables.iter().map(|t| (t.id, t.clone())).collect(),
        }
    }

    /// The table `database.name`, both compared ASCII case-insensitively, if it exists.
    pub fn find(&self, database: &str, name: &str) -> Option<&TableDef> {
        self.tables.values().find(|t| {
            t.database.eq_ignore_ascii_case(database) && t.name.eq_ignore_ascii_case(name)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The appended variants keep the indices of the ones before them, so definitions
    /// written before they existed decode as they were.
    #[test]
    fn appended_number_types_encode_after_year() {
        let bytes = |t: &ColumnType| crate::codec::encode(t).expect("encode");
        assert_eq!(bytes(&ColumnType::Year), [16]);
        assert_eq!(
            bytes(&ColumnType::UnsignedDecimal {
                precision: 10,
                scale: 2
            }),
            [17, 10, 2]
        );
        assert_eq!(
            bytes(&ColumnType::Real {
                double: false,
                digits: Some((7, 4)),
                unsigned: true
            }),
            [18, 0, 1, 7, 4, 1]
        );
        assert_eq!(bytes(&ColumnType::Time { fsp: 3 }), [19, 3]);
        assert_eq!(bytes(&ColumnType::Bit { width: 64 }), [20, 64]);
    }

    /// TIME and BIT values take the next value tags (12, 13) with an i64 and a u64, so a
    /// binlog written before them decodes as it was, and both decoders read them alike.
    #[test]
    fn time_and_bit_values_take_appended_tags() {
        use crate::value::Value;
        let bytes = |v: &Value| crate::codec::encode(v).expect("encode");
        assert_eq!(bytes(&Value::Time(-1)), [12, 1]);
        assert_eq!(
            bytes(&Value::Time(1_000_000)),
            [12, 252, 0x80, 0x84, 0x1e, 0]
        );
        assert_eq!(bytes(&Value::Bit(5)), [13, 5]);
        assert_eq!(bytes(&Value::Bit(u64::MAX)), {
            let mut b = vec![13, 253];
            b.extend_from_slice(&[0xff; 8]);
            b
        });
        for v in [
            Value::Time(-3_020_399_000_000),
            Value::Bit(0b101),
            Value::Time(0),
        ] {
            let b = bytes(&v);
            assert_eq!(crate::codec::decode::<Value>(&b).expect("decode"), v);
            let row = vec![v.clone(), Value::Null];
            let mut fast = Vec::new();
            crate::fast_codec::put_row(&mut fast, &row);
            assert_eq!(fast, crate::codec::encode(&row).expect("encode"));
            assert_eq!(crate::fast_codec::row(&fast), Some(row));
        }
    }

    /// A column written before comments were kept ends in the `auto_increment` bool; it
    /// decodes as it was, and without a comment a column encodes to those same bytes.
    #[test]
    fn columns_without_comments_keep_their_old_bytes() {
        let mut c = ColumnDef::plain("ab", ColumnType::Json, true);
        c.auto_increment = true;
        // name, ty (10 Json), nullable, default (0 None), on_update_now, auto_increment.
        let old = [2, b'a', b'b', 10, 1, 0, 0, 1];
        assert_eq!(crate::codec::encode(&c).expect("encode"), old);
        assert_eq!(crate::codec::decode::<ColumnDef>(&old).expect("decode"), c);
        c.comment = "it's".into();
        let new = crate::codec::encode(&c).expect("encode");
        assert_eq!(
            new,
            [2, b'a', b'b', 10, 1, 0, 0, 3, 4, b'i', b't', b'\'', b's']
        );
        assert_eq!(crate::codec::decode::<ColumnDef>(&new).expect("decode"), c);
        let serde = bincode::serde::encode_to_vec(&c, crate::codec::CONFIG).expect("serde");
        assert_eq!(serde, new);
        let (back, _): (ColumnDef, usize) =
            bincode::serde::decode_from_slice(&new, crate::codec::CONFIG).expect("serde");
        assert_eq!(back, c);
        let unknown = [2, b'a', b'b', 10, 1, 0, 0, 4];
        let refused = crate::codec::decode::<ColumnDef>(&unknown).map_err(|e| e.to_string());
        assert!(
            refused
                .as_ref()
                .err()
                .is_some_and(|e| e.contains("unknown column flags 0x04")),
            "{refused:?}"
        );
    }

    #[test]
    fn json_names_a_comment_only_when_there_is_one() {
        let mut c = ColumnDef::plain("a", ColumnType::Date, false);
        let json = serde_json::to_string(&c).expect("json");
        assert_eq!(
            json,
            r#"{"name":"a","ty":"Date","nullable":false,"default":"None","on_update_now":false,"auto_increment":false}"#
        );
        assert_eq!(serde_json::from_str::<ColumnDef>(&json).expect("back"), c);
        c.comment = "when".into();
        let json = serde_json::to_string(&c).expect("json");
        assert!(
            json.ends_with(r#""auto_increment":false,"comment":"when"}"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<ColumnDef>(&json).expect("back"), c);
    }

    #[test]
    fn declarations_print_as_mysql_8_prints_them() {
        let sql = |t: ColumnType| t.sql();
        assert_eq!(
            sql(ColumnType::UnsignedDecimal {
                precision: 10,
                scale: 2
            }),
            "decimal(10,2) unsigned"
        );
        assert_eq!(
            sql(ColumnType::Real {
                double: false,
                digits: Some((7, 4)),
                unsigned: false
            }),
            "float(7,4)"
        );
        assert_eq!(
            sql(ColumnType::Real {
                double: true,
                digits: None,
                unsigned: true
            }),
            "double unsigned"
        );
    }
}
