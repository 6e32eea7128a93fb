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
    Tiny,
    Normal,
    Medium,
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
    Tiny,
    Small,
    Medium,
    Int,
    Big,
}

impl IntWidth {
    pub fn bits(self) -> u32 {
        match self {
            IntWidth::Tiny => 8,
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
    Integer { width: IntWidth, unsigned: bool },
    Decimal { precision: u8, scale: u8 },
    Float,
    Double,
    Char { len: u32 },
    VarChar { len: u32 },
    Binary { len: u32 },
    VarBinary { len: u32 },
    Text { size: LobSize },
    Blob { size: LobSize },
    Json,
    Date,
    DateTime { fsp: u8 },
    Timestamp { fsp: u8 },
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
        }
    }

    /// BLOB, TEXT and JSON: the types that the ring rules require to be nullable.
    pub fn is_lob(&self) -> bool {
        matches!(
            self,
            ColumnType::Text { .. } | ColumnType::Blob { .. } | ColumnType::Json
        )
    }

    pub fn is_integer(&self) -> bool {
        matches!(self, ColumnType::Integer { .. })
    }

    pub fn is_string(&self) -> bool {
        matches!(
            self,
            ColumnType::Char { .. } | ColumnType::VarChar { .. } | ColumnType::Text { .. }
        )
    }

    pub fn is_binary(&self) -> bool {
        matches!(
            self,
            ColumnType::Binary { .. } | ColumnType::VarBinary { .. } | ColumnType::Blob { .. }
        )
    }
}

/// What a column holds when an INSERT does not name it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub enum ColumnDefault {
    /// No DEFAULT clause: NULL for nullable columns, an error for NOT NULL ones in strict mode.
    None,
    /// A constant, already converted to the column type.
    Value(Value),
    /// `DEFAULT CURRENT_TIMESTAMP(fsp)`.
    CurrentTimestamp { fsp: u8 },
    /// A generated column, `AS (expr) VIRTUAL|STORED`: the SQL layer computes its value from
    /// the row on every insert and update, and rows carry the computed value.
    Generated { expr: String, stored: bool },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct ColumnDef {
    pub name: String,
    pub ty: ColumnType,
    pub nullable: bool,
    pub default: ColumnDefault,
    /// `ON UPDATE CURRENT_TIMESTAMP(fsp)`.
    pub on_update_now: bool,
    pub auto_increment: bool,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode,
)]
pub enum IndexKind {
    Unique,
    Secondary,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct IndexDef {
    pub name: String,
    pub kind: IndexKind,
    /// Column positions in the table, in index order.
    pub columns: Vec<usize>,
}

/// `MAX_ROWS_PER_PK=size@slot_column@meta_column`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct RingOptions {
    pub size: u32,
    /// Position of the slot column (the last primary-key column).
    pub slot_column: usize,
    /// Position of the meta column.
    pub meta_column: usize,
}

/// `TTL=seconds@column`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct TtlOptions {
    pub seconds: u32,
    pub column: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct Partitioning {
    pub linear: bool,
    /// Column positions of `PARTITION BY [LINEAR] KEY(...)`; empty means the primary key.
    pub columns: Vec<usize>,
    pub partitions: Option<u32>,
}

/// A table's definition. `id` is stable for the life of the table (ALTER keeps it; DROP and
/// CREATE give a new one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct TableDef {
    pub id: u64,
    pub database: String,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Column positions of the primary key, in key order; empty for a table without one.
    pub primary_key: Vec<usize>,
    pub indexes: Vec<IndexDef>,
    pub ring: Option<RingOptions>,
    pub ttl: Option<TtlOptions>,
    pub partitioning: Option<Partitioning>,
    /// The raw `COMMENT='...'` text, kept so SHOW CREATE TABLE prints it back.
    pub comment: Option<String>,
}

impl TableDef {
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The primary-key values of a full row.
    pub fn key_of(&self, row: &[Value]) -> Vec<Value> {
        self.key_refs(row).cloned().collect()
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

    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.database, self.name)
    }
}

/// The set of databases and tables, kept current by applying DDL events in order. The writer
/// keeps one to put into each new segment header; readers rebuild one to decode rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    pub databases: std::collections::BTreeSet<String>,
    pub tables: std::collections::BTreeMap<u64, TableDef>,
}

impl Schema {
    pub fn from_header(databases: &[String], tables: &[TableDef]) -> Schema {
        Schema {
            databases: databases.iter().cloned().collect(),
            tables: tables.iter().map(|t| (t.id, t.clone())).collect(),
        }
    }

    pub fn apply(&mut self, ddl: &crate::events::DdlEvent) {
        use crate::events::DdlEvent;
        match ddl {
            DdlEvent::CreateDatabase { name } => {
                self.databases.insert(name.clone());
            }
            DdlEvent::DropDatabase { name } => {
                self.databases.remove(name);
                self.tables.retain(|_, t| &t.database != name);
            }
            DdlEvent::CreateTable { table } | DdlEvent::AlterTable { table } => {
                self.databases.insert(table.database.clone());
                self.tables.insert(table.id, table.clone());
            }
            DdlEvent::DropTable { table_id, .. } => {
                self.tables.remove(table_id);
            }
            DdlEvent::TruncateTable { .. } => {}
        }
    }

    pub fn find(&self, database: &str, name: &str) -> Option<&TableDef> {
        self.tables.values().find(|t| {
            t.database.eq_ignore_ascii_case(database) && t.name.eq_ignore_ascii_case(name)
        })
    }
}
