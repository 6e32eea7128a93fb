//! The catalog as MySQL 8 shows it: the `information_schema` tables that drivers, ORMs,
//! dump tools and GUI clients read (MySQL 8's table and column names, in its column order),
//! the SHOW statements built on the same rows (SHOW TABLE STATUS, SHOW INDEX, SHOW FULL
//! COLUMNS, SHOW [FULL] TABLES), and `ndbinfo.memory_per_fragment`.
//!
//! Catalog tables are computed when a query reads them, from the engine's table definitions
//! and the session's privileges (a table the account may not see is not listed). They are
//! read-only; ringrep has no stored functions. REFERENTIAL_CONSTRAINTS lists the FOREIGN KEY
//! constraints (`objects::foreign_keys`), which KEY_COLUMN_USAGE and TABLE_CONSTRAINTS list
//! too; ROUTINES lists the stored procedures, TRIGGERS the triggers, VIEWS (and TABLES)
//! the views.

use binlog_format::schema::{ColumnDef, ColumnDefault, ColumnType, IndexKind, IntWidth, TableDef};
use binlog_format::Value;

use crate::expr::render;
use crate::objects::foreign_keys::ForeignKey;
use crate::parse::show::{show_words, ShowFilter};
use crate::table::computed::{computed_def, plain_column, Computed};
use crate::SqlSession;
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::HIDDEN_ROW_ID;

/// The catalog database's name.
pub(crate) const INFORMATION_SCHEMA: &str = "information_schema";

/// The kind of a catalog column, which gives its type.
#[derive(Clone, Copy)]
enum K {
    /// An identifier or short text: VARCHAR(64).
    Name,
    /// A long text: LONGTEXT.
    Long,
    /// A count or a number: BIGINT UNSIGNED.
    Num,
    /// A time: DATETIME.
    Time,
    /// A time to hundredths of a second: DATETIME(2) (a trigger's CREATED).
    Time2,
}

use K::{Long, Name, Num, Time, Time2};

/// Each catalog table and its columns, in MySQL 8's order.
const TABLES: &[(&str, &[(&str, K)])] = &[
    (
        "CHARACTER_SETS",
        &[
            ("CHARACTER_SET_NAME", Name),
            ("DEFAULT_COLLATE_NAME", Name),
            ("DESCRIPTION", Name),
            ("MAXLEN", Num),
        ],
    ),
    (
        "COLLATIONS",
        &[
            ("COLLATION_NAME", Name),
            ("CHARACTER_SET_NAME", Name),
            ("ID", Num),
            ("IS_DEFAULT", Name),
            ("IS_COMPILED", Name),
            ("SORTLEN", Num),
            ("PAD_ATTRIBUTE", Name),
        ],
    ),
    (
        "COLUMNS",
        &[
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("COLUMN_NAME", Name),
            ("ORDINAL_POSITION", Num),
            ("COLUMN_DEFAULT", Long),
            ("IS_NULLABLE", Name),
            ("DATA_TYPE", Long),
            ("CHARACTER_MAXIMUM_LENGTH", Num),
            ("CHARACTER_OCTET_LENGTH", Num),
            ("NUMERIC_PRECISION", Num),
            ("NUMERIC_SCALE", Num),
            ("DATETIME_PRECISION", Num),
            ("CHARACTER_SET_NAME", Name),
            ("COLLATION_NAME", Name),
            ("COLUMN_TYPE", Long),
            ("COLUMN_KEY", Name),
            ("EXTRA", Name),
            ("PRIVILEGES", Name),
            ("COLUMN_COMMENT", Long),
            ("GENERATION_EXPRESSION", Long),
            ("SRS_ID", Num),
        ],
    ),
    (
        "COLUMN_PRIVILEGES",
        &[
            ("GRANTEE", Name),
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("COLUMN_NAME", Name),
            ("PRIVILEGE_TYPE", Name),
            ("IS_GRANTABLE", Name),
        ],
    ),
    (
        "ENGINES",
        &[
            ("ENGINE", Name),
            ("SUPPORT", Name),
            ("COMMENT", Name),
            ("TRANSACTIONS", Name),
            ("XA", Name),
            ("SAVEPOINTS", Name),
        ],
    ),
    (
        "KEY_COLUMN_USAGE",
        &[
            ("CONSTRAINT_CATALOG", Name),
            ("CONSTRAINT_SCHEMA", Name),
            ("CONSTRAINT_NAME", Name),
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("COLUMN_NAME", Name),
            ("ORDINAL_POSITION", Num),
            ("POSITION_IN_UNIQUE_CONSTRAINT", Num),
            ("REFERENCED_TABLE_SCHEMA", Name),
            ("REFERENCED_TABLE_NAME", Name),
            ("REFERENCED_COLUMN_NAME", Name),
        ],
    ),
    (
        "PARTITIONS",
        &[
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("PARTITION_NAME", Name),
            ("SUBPARTITION_NAME", Name),
            ("PARTITION_ORDINAL_POSITION", Num),
            ("SUBPARTITION_ORDINAL_POSITION", Num),
            ("PARTITION_METHOD", Name),
            ("SUBPARTITION_METHOD", Name),
            ("PARTITION_EXPRESSION", Long),
            ("SUBPARTITION_EXPRESSION", Long),
            ("PARTITION_DESCRIPTION", Long),
            ("TABLE_ROWS", Num),
            ("AVG_ROW_LENGTH", Num),
            ("DATA_LENGTH", Num),
            ("MAX_DATA_LENGTH", Num),
            ("INDEX_LENGTH", Num),
            ("DATA_FREE", Num),
            ("CREATE_TIME", Time),
            ("UPDATE_TIME", Time),
            ("CHECK_TIME", Time),
            ("CHECKSUM", Num),
            ("PARTITION_COMMENT", Long),
            ("NODEGROUP", Name),
            ("TABLESPACE_NAME", Name),
        ],
    ),
    (
        "REFERENTIAL_CONSTRAINTS",
        &[
            ("CONSTRAINT_CATALOG", Name),
            ("CONSTRAINT_SCHEMA", Name),
            ("CONSTRAINT_NAME", Name),
            ("UNIQUE_CONSTRAINT_CATALOG", Name),
            ("UNIQUE_CONSTRAINT_SCHEMA", Name),
            ("UNIQUE_CONSTRAINT_NAME", Name),
            ("MATCH_OPTION", Name),
            ("UPDATE_RULE", Name),
            ("DELETE_RULE", Name),
            ("TABLE_NAME", Name),
            ("REFERENCED_TABLE_NAME", Name),
        ],
    ),
    (
        "ROUTINES",
        &[
            ("SPECIFIC_NAME", Name),
            ("ROUTINE_CATALOG", Name),
            ("ROUTINE_SCHEMA", Name),
            ("ROUTINE_NAME", Name),
            ("ROUTINE_TYPE", Name),
            ("DATA_TYPE", Long),
            ("CHARACTER_MAXIMUM_LENGTH", Num),
            ("CHARACTER_OCTET_LENGTH", Num),
            ("NUMERIC_PRECISION", Num),
            ("NUMERIC_SCALE", Num),
            ("DATETIME_PRECISION", Num),
            ("CHARACTER_SET_NAME", Name),
            ("COLLATION_NAME", Name),
            ("DTD_IDENTIFIER", Long),
            ("ROUTINE_BODY", Name),
            ("ROUTINE_DEFINITION", Long),
            ("EXTERNAL_NAME", Name),
            ("EXTERNAL_LANGUAGE", Name),
            ("PARAMETER_STYLE", Name),
            ("IS_DETERMINISTIC", Name),
            ("SQL_DATA_ACCESS", Name),
            ("SQL_PATH", Name),
            ("SECURITY_TYPE", Name),
            ("CREATED", Time),
            ("LAST_ALTERED", Time),
            ("SQL_MODE", Name),
            ("ROUTINE_COMMENT", Long),
            ("DEFINER", Name),
            ("CHARACTER_SET_CLIENT", Name),
            ("COLLATION_CONNECTION", Name),
            ("DATABASE_COLLATION", Name),
        ],
    ),
    (
        "SCHEMATA",
        &[
            ("CATALOG_NAME", Name),
            ("SCHEMA_NAME", Name),
            ("DEFAULT_CHARACTER_SET_NAME", Name),
            ("DEFAULT_COLLATION_NAME", Name),
            ("SQL_PATH", Name),
            ("DEFAULT_ENCRYPTION", Name),
        ],
    ),
    (
        "SCHEMA_PRIVILEGES",
        &[
            ("GRANTEE", Name),
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("PRIVILEGE_TYPE", Name),
            ("IS_GRANTABLE", Name),
        ],
    ),
    (
        "STATISTICS",
        &[
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("NON_UNIQUE", Num),
            ("INDEX_SCHEMA", Name),
            ("INDEX_NAME", Name),
            ("SEQ_IN_INDEX", Num),
            ("COLUMN_NAME", Name),
            ("COLLATION", Name),
            ("CARDINALITY", Num),
            ("SUB_PART", Num),
            ("PACKED", Name),
            ("NULLABLE", Name),
            ("INDEX_TYPE", Name),
            ("COMMENT", Name),
            ("INDEX_COMMENT", Name),
            ("IS_VISIBLE", Name),
            ("EXPRESSION", Long),
        ],
    ),
    (
        "TABLES",
        &[
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("TABLE_TYPE", Name),
            ("ENGINE", Name),
            ("VERSION", Num),
            ("ROW_FORMAT", Name),
            ("TABLE_ROWS", Num),
            ("AVG_ROW_LENGTH", Num),
            ("DATA_LENGTH", Num),
            ("MAX_DATA_LENGTH", Num),
            ("INDEX_LENGTH", Num),
            ("DATA_FREE", Num),
            ("AUTO_INCREMENT", Num),
            ("CREATE_TIME", Time),
            ("UPDATE_TIME", Time),
            ("CHECK_TIME", Time),
            ("TABLE_COLLATION", Name),
            ("CHECKSUM", Num),
            ("CREATE_OPTIONS", Name),
            ("TABLE_COMMENT", Long),
        ],
    ),
    (
        "TABLE_CONSTRAINTS",
        &[
            ("CONSTRAINT_CATALOG", Name),
            ("CONSTRAINT_SCHEMA", Name),
            ("CONSTRAINT_NAME", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("CONSTRAINT_TYPE", Name),
            ("ENFORCED", Name),
        ],
    ),
    (
        "TABLE_PRIVILEGES",
        &[
            ("GRANTEE", Name),
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("PRIVILEGE_TYPE", Name),
            ("IS_GRANTABLE", Name),
        ],
    ),
    (
        "TRIGGERS",
        &[
            ("TRIGGER_CATALOG", Name),
            ("TRIGGER_SCHEMA", Name),
            ("TRIGGER_NAME", Name),
            ("EVENT_MANIPULATION", Name),
            ("EVENT_OBJECT_CATALOG", Name),
            ("EVENT_OBJECT_SCHEMA", Name),
            ("EVENT_OBJECT_TABLE", Name),
            ("ACTION_ORDER", Num),
            ("ACTION_CONDITION", Long),
            ("ACTION_STATEMENT", Long),
            ("ACTION_ORIENTATION", Name),
            ("ACTION_TIMING", Name),
            ("ACTION_REFERENCE_OLD_TABLE", Name),
            ("ACTION_REFERENCE_NEW_TABLE", Name),
            ("ACTION_REFERENCE_OLD_ROW", Name),
            ("ACTION_REFERENCE_NEW_ROW", Name),
            ("CREATED", Time2),
            ("SQL_MODE", Name),
            ("DEFINER", Name),
            ("CHARACTER_SET_CLIENT", Name),
            ("COLLATION_CONNECTION", Name),
            ("DATABASE_COLLATION", Name),
        ],
    ),
    (
        "USER_PRIVILEGES",
        &[
            ("GRANTEE", Name),
            ("TABLE_CATALOG", Name),
            ("PRIVILEGE_TYPE", Name),
            ("IS_GRANTABLE", Name),
        ],
    ),
    (
        "VIEWS",
        &[
            ("TABLE_CATALOG", Name),
            ("TABLE_SCHEMA", Name),
            ("TABLE_NAME", Name),
            ("VIEW_DEFINITION", Long),
            ("CHECK_OPTION", Name),
            ("IS_UPDATABLE", Name),
            ("DEFINER", Name),
            ("SECURITY_TYPE", Name),
            ("CHARACTER_SET_CLIENT", Name),
            ("COLLATION_CONNECTION", Name),
        ],
    ),
];

/// The default character set and collation every table and text column has.
const CHARSET: &str = "utf8mb4";
const COLLATION: &str = "utf8mb4_0900_ai_ci";
/// The one storage engine.
const ENGINE: &str = "ndbcluster";

fn text(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

fn num(n: u64) -> Value {
    Value::UInt(n)
}

/// The names of the catalog's tables, in order.
pub(crate) fn catalog_table_names() -> impl Iterator<Item = &'static str> {
    TABLES.iter().map(|(n, _)| *n)
}

fn catalog_def(name: &str, columns: &[(&str, K)]) -> TableDef {
    computed_def(
        INFORMATION_SCHEMA,
        name,
        columns
            .iter()
            .map(|&(name, k)| {
                let ty = match k {
                    Name => ColumnType::VarChar { len: 64 },
                    Long => ColumnType::Text {
                        size: binlog_format::schema::LobSize::Long,
                    },
                    Num => ColumnType::Integer {
                        width: IntWidth::Big,
                        unsigned: true,
                    },
                    Time => ColumnType::DateTime { fsp: 0 },
                    Time2 => ColumnType::DateTime { fsp: 2 },
                };
                plain_column(name, ty, true)
            })
            .collect(),
    )
}

/// The visible columns of a table, with their positions.
fn visible(def: &TableDef) -> impl Iterator<Item = (usize, &ColumnDef)> {
    def.columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.name != HIDDEN_ROW_ID)
}

/// Whether the table's primary key is its own (not the hidden row id of a table without one).
fn has_primary_key(def: &TableDef) -> bool {
    !def.primary_key.is_empty()
        && def
            .primary_key
            .iter()
            .all(|&p| def.columns[p].name != HIDDEN_ROW_ID)
}

/// A table's indexes as STATISTICS and SHOW INDEX list them: name, unique, column positions.
fn indexes(def: &TableDef) -> Vec<(String, bool, Vec<usize>)> {
    let mut out = Vec::new();
    if has_primary_key(def) {
        out.push(("PRIMARY".to_string(), true, def.primary_key.clone()));
    }
    for kind in [IndexKind::Unique, IndexKind::Secondary] {
        for i in def.indexes.iter().filter(|i| i.kind == kind) {
            out.push((i.name.clone(), kind == IndexKind::Unique, i.columns.clone()));
        }
    }
    out
}

/// DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH, NUMERIC_PRECISION,
/// NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME and COLLATION_NAME of a column type.
fn type_facts(ty: &ColumnType) -> [Value; 8] {
    let sql = ty.sql();
    let data_type = sql.split(['(', ' ']).next().unwrap_or_default().to_string();
    let null = || Value::Null;
    let chars = |len: u64| [num(len), num(len * 4)];
    // MySQL gives a TEXT's limit in bytes for both lengths.
    let lob = |bytes: u64| [num(bytes), num(bytes)];
    let lob_bytes = |size: &binlog_format::schema::LobSize| -> u64 {
        use binlog_format::schema::LobSize;
        match size {
            LobSize::Tiny => 255,
            LobSize::Normal => 65_535,
            LobSize::Medium => 16_777_215,
            LobSize::Long => 4_294_967_295,
        }
    };
    let (lengths, precision, scale, datetime, charset) = match ty {
        ColumnType::Integer { width, unsigned } => {
            let p = match (width, unsigned) {
                (IntWidth::Tiny | IntWidth::Bool, _) => 3,
                (IntWidth::Small, _) => 5,
                (IntWidth::Medium, _) => 7,
                (IntWidth::Int, _) => 10,
                (IntWidth::Big, false) => 19,
                (IntWidth::Big, true) => 20,
            };
            ([null(), null()], num(p), num(0), null(), false)
        }
        ColumnType::Decimal { precision, scale }
        | ColumnType::UnsignedDecimal { precision, scale } => (
            [null(), null()],
            num(u64::from(*precision)),
            num(u64::from(*scale)),
            null(),
            false,
        ),
        ColumnType::Float => ([null(), null()], num(12), null(), null(), false),
        ColumnType::Double => ([null(), null()], num(22), null(), null(), false),
        // A FLOAT(M, D)'s precision and scale are M and D, as MySQL lists them.
        ColumnType::Real {
            digits: Some((m, d)),
            ..
        } => (
            [null(), null()],
            num(u64::from(*m)),
            num(u64::from(*d)),
            null(),
            false,
        ),
        ColumnType::Real { double, .. } => (
            [null(), null()],
            num(if *double { 22 } else { 12 }),
            null(),
            null(),
            false,
        ),
        ColumnType::Char { len } | ColumnType::VarChar { len } => {
            (chars(u64::from(*len)), null(), null(), null(), true)
        }
        ColumnType::Binary { len } | ColumnType::VarBinary { len } => (
            [num(u64::from(*len)), num(u64::from(*len))],
            null(),
            null(),
            null(),
            false,
        ),
        ColumnType::Text { size } => (lob(lob_bytes(size)), null(), null(), null(), true),
        ColumnType::Blob { size } => (lob(lob_bytes(size)), null(), null(), null(), false),
        ColumnType::Json => ([null(), null()], null(), null(), null(), false),
        // An ENUM's lengths are its longest member's, a SET's all its members'.
        ColumnType::Enum { .. } | ColumnType::Set { .. } => (
            chars(ty.member_chars().unwrap_or(0)),
            null(),
            null(),
            null(),
            true,
        ),
        ColumnType::Date | ColumnType::Year => ([null(), null()], null(), null(), null(), false),
        ColumnType::DateTime { fsp } | ColumnType::Timestamp { fsp } | ColumnType::Time { fsp } => {
            (
                [null(), null()],
                null(),
                null(),
                num(u64::from(*fsp)),
                false,
            )
        }
        // A BIT's precision is its width, with no scale, as MySQL lists it.
        ColumnType::Bit { width } => (
            [null(), null()],
            num(u64::from(*width)),
            null(),
            null(),
            false,
        ),
    };
    let [max_len, octets] = lengths;
    let (cs, coll) = if charset {
        (text(CHARSET), text(COLLATION))
    } else {
        (null(), null())
    };
    [
        text(data_type),
        max_len,
        octets,
        precision,
        scale,
        datetime,
        cs,
        coll,
    ]
}

/// PARTITION_METHOD and PARTITION_EXPRESSION of a partitioned table.
fn partition_method(def: &TableDef) -> Option<(String, String)> {
    let p = def.partitioning.as_ref()?;
    let cols = if p.columns.is_empty() {
        &def.primary_key
    } else {
        &p.columns
    };
    let expr = cols
        .iter()
        .map(|&c| format!("`{}`", def.columns[c].name))
        .collect::<Vec<_>>()
        .join(",");
    let method = if p.linear { "LINEAR KEY" } else { "KEY" };
    Some((method.to_string(), expr))
}

impl SqlSession {
    /// A computed table named `db.name` (`db` defaulting to the current database), or `None`
    /// when the name is not one: then it is a stored table.
    pub(crate) fn computed_table(&self, db: Option<&str>, name: &str) -> Option<Result<Computed>> {
        if db.is_none() {
            if let Some(rows) = self.cte_rows(name) {
                return Some(Ok(rows));
            }
        }
        let db = match db {
            Some(d) => d.to_string(),
            None => self.session.vars.database.clone()?,
        };
        if db.eq_ignore_ascii_case(INFORMATION_SCHEMA) {
            return Some(self.information_schema(name));
        }
        if db.eq_ignore_ascii_case("ndbinfo") && name.eq_ignore_ascii_case("memory_per_fragment") {
            return Some(Ok(crate::catalog::information_schema::memory_per_fragment(
                self.engine(),
            )));
        }
        match self.view(&db, name) {
            Ok(Some(v)) => Some(self.view_rows(&v)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// The stored tables this session may see, ordered by database and name.
    pub(crate) fn visible_tables(&self) -> Vec<TableDef> {
        let mut tables: Vec<TableDef> = self
            .engine()
            .tables()
            .into_iter()
            .filter(|t| self.may_see_table(&t.database, &t.name))
            .collect();
        tables.sort_by(|a, b| (&a.database, &a.name).cmp(&(&b.database, &b.name)));
        tables
    }

    /// The views this session may see, ordered by database and name.
    fn visible_views(&self) -> Result<Vec<crate::objects::views::StoredView>> {
        let mut views: Vec<_> = self
            .views()?
            .into_iter()
            .filter(|v| self.may_see_table(&v.db, &v.name))
            .collect();
        views.sort_by(|a, b| (&a.db, &a.name).cmp(&(&b.db, &b.name)));
        Ok(views)
    }

    /// Every database this session may see, `information_schema` included, in name order.
    pub(crate) fn visible_databases(&self) -> Vec<String> {
        let mut dbs: Vec<String> = self
            .engine()
            .databases()
            .into_iter()
            .filter(|d| self.may_see_database(d))
            .collect();
        dbs.push(INFORMATION_SCHEMA.into());
        dbs.sort_by_key(|d| d.to_lowercase());
        dbs.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
        dbs
    }

    /// Stored rows of a table that are not ring meta rows (expired rows not purged yet
    /// counted, as MySQL's estimate counts rows not yet removed).
    fn row_count(&self, def: &TableDef) -> u64 {
        self.engine().with_state(|st| {
            st.tables
                .get(&def.id)
                .map_or(0, |t| (t.len() - t.meta_rows()) as u64)
        })
    }

    pub(crate) fn information_schema(&self, name: &str) -> Result<Computed> {
        let Some(&(table, columns)) = TABLES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name))
        else {
            return Err(Error::new(
                code::ER_UNKNOWN_TABLE,
                format!(
                    "Unknown table '{}' in information_schema",
                    name.to_uppercase()
                ),
            ));
        };
        let def = catalog_def(table, columns);
        let rows = match table {
            "CHARACTER_SETS" => vec![
                vec![
                    text(CHARSET),
                    text(COLLATION),
                    text("UTF-8 Unicode"),
                    num(4),
                ],
                vec![
                    text("binary"),
                    text("binary"),
                    text("Binary pseudo charset"),
                    num(1),
                ],
            ],
            "COLLATIONS" => vec![
                vec![
                    text(COLLATION),
                    text(CHARSET),
                    num(255),
                    text("Yes"),
                    text("Yes"),
                    num(0),
                    text("NO PAD"),
                ],
                vec![
                    text("binary"),
                    text("binary"),
                    num(63),
                    text("Yes"),
                    text("Yes"),
                    num(1),
                    text("NO PAD"),
                ],
            ],
            "COLUMNS" => self.columns_rows(),
            "ENGINES" => vec![
                vec![
                    text(ENGINE),
                    text("DEFAULT"),
                    text("Clustered, fault-tolerant tables (ringrep's ring engine)"),
                    text("YES"),
                    text("NO"),
                    text("YES"),
                ],
                vec![
                    text("InnoDB"),
                    text("YES"),
                    text("Kept as the declared name of plain tables stored by ringrep's engine (NDB_TABLE options do not apply)"),
                    text("YES"),
                    text("NO"),
                    text("YES"),
                ],
            ],
            "KEY_COLUMN_USAGE" => {
                let mut rows = self.key_column_usage_rows();
                for (f, _) in self.visible_foreign_keys()? {
                    for (i, (c, p)) in f.columns.iter().zip(&f.parent_columns).enumerate() {
                        rows.push(vec![
                            text("def"),
                            text(&f.db),
                            text(&f.name),
                            text("def"),
                            text(&f.db),
                            text(&f.table),
                            text(c),
                            num(i as u64 + 1),
                            num(i as u64 + 1),
                            text(&f.parent_db),
                            text(&f.parent_table),
                            text(p),
                        ]);
                    }
                }
                rows
            }
            "PARTITIONS" => self.partitions_rows(),
            "SCHEMATA" => self
                .visible_databases()
                .into_iter()
                .map(|d| {
                    vec![
                        text("def"),
                        text(d),
                        text(CHARSET),
                        text(COLLATION),
                        Value::Null,
                        text("NO"),
                    ]
                })
                .collect(),
            "STATISTICS" => self.statistics_rows(),
            "REFERENTIAL_CONSTRAINTS" => self
                .visible_foreign_keys()?
                .into_iter()
                .map(|(f, parent_index)| {
                    vec![
                        text("def"),
                        text(&f.db),
                        text(&f.name),
                        text("def"),
                        text(&f.parent_db),
                        parent_index.map_or(Value::Null, text),
                        text("NONE"),
                        text(f.on_update.sql()),
                        text(f.on_delete.sql()),
                        text(&f.table),
                        text(&f.parent_table),
                    ]
                })
                .collect(),
            "TABLE_CONSTRAINTS" => {
                let mut rows: Vec<Vec<Value>> = self
                .visible_tables()
                .iter()
                .flat_map(|def| {
                    indexes(def)
                        .into_iter()
                        .filter(|(_, unique, _)| *unique)
                        .map(|(name, ..)| {
                            let kind = if name == "PRIMARY" {
                                "PRIMARY KEY"
                            } else {
                                "UNIQUE"
                            };
                            vec![
                                text("def"),
                                text(&def.database),
                                text(name),
                                text(&def.database),
                                text(&def.name),
                                text(kind),
                                text("YES"),
                            ]
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
                for (f, _) in self.visible_foreign_keys()? {
                    rows.push(vec![
                        text("def"),
                        text(&f.db),
                        text(&f.name),
                        text(&f.db),
                        text(&f.table),
                        text("FOREIGN KEY"),
                        text("YES"),
                    ]);
                }
                rows
            }
            "ROUTINES" => self.routines_rows()?,
            "COLUMN_PRIVILEGES" | "SCHEMA_PRIVILEGES" | "TABLE_PRIVILEGES" | "USER_PRIVILEGES" => {
                self.privileges_rows(table)
            }
            "TRIGGERS" => self.triggers_rows()?,
            "VIEWS" => self
                .visible_views()?
                .into_iter()
                .map(|v| {
                    // As MySQL: the definition only to its definer and to accounts with
                    // SELECT and SHOW VIEW on the view; others see the view, not its text.
                    let definition = if self.may_read_view(&v.db, &v.name, &v.definer) {
                        v.query.as_str()
                    } else {
                        ""
                    };
                    vec![
                        text("def"),
                        text(&v.db),
                        text(&v.name),
                        text(definition),
                        text("NONE"),
                        text("NO"),
                        text(&v.definer),
                        text("DEFINER"),
                        text(CHARSET),
                        text(COLLATION),
                    ]
                })
                .collect(),
            "TABLES" => {
                let mut rows = self.tables_rows()?;
                for v in self.visible_views()? {
                    let mut row = vec![text("def"), text(&v.db), text(&v.name), text("VIEW")];
                    row.extend(std::iter::repeat_n(Value::Null, 16));
                    row.push(text("VIEW"));
                    rows.push(row);
                }
                rows
            }
            // No foreign keys exist.
            _ => Vec::new(),
        };
        Ok((def, rows))
    }

    /// The rows of USER_PRIVILEGES, SCHEMA_PRIVILEGES, TABLE_PRIVILEGES or COLUMN_PRIVILEGES
    /// (`table`): one per privilege an account holds at that level, GRANT OPTION as
    /// IS_GRANTABLE (a level holding GRANT OPTION alone is USAGE). As MySQL: every account's
    /// rows to one that may read database `mysql`, its own to any other.
    fn privileges_rows(&self, table: &str) -> Vec<Vec<Value>> {
        use crate::accounts::Privs;
        let dir = crate::accounts::store::Directory::read(self.engine());
        let me = self.me();
        let everyone = self
            .restricted()
            .is_none_or(|g| g.allows(Privs::SELECT, ringrep_engine::SYSTEM_DB, None));
        // Each privilege's name, USAGE for none.
        let names = |p: Privs| -> Vec<&'static str> {
            let (mut fixed, dynamic) = p.names();
            fixed.extend(dynamic);
            if fixed.is_empty() {
                fixed.push("USAGE");
            }
            fixed
        };
        let grantable = |p: Privs| {
            text(if p.contains(Privs::GRANT_OPTION) {
                "YES"
            } else {
                "NO"
            })
        };
        let mut rows = Vec::new();
        for a in &dir.accounts {
            if !everyone && !crate::accounts::store::same_account(&a.name, &me) {
                continue;
            }
            let g = dir.grants_of(&a.name);
            let grantee = text(a.name.quoted());
            match table {
                "USER_PRIVILEGES" => {
                    for n in names(g.global) {
                        rows.push(vec![
                            grantee.clone(),
                            text("def"),
                            text(n),
                            grantable(g.global),
                        ]);
                    }
                }
                "SCHEMA_PRIVILEGES" => {
                    for (d, p) in g.databases.iter().filter(|(_, p)| !p.is_empty()) {
                        for n in names(*p) {
                            rows.push(vec![
                                grantee.clone(),
                                text("def"),
                                text(d),
                                text(n),
                                grantable(*p),
                            ]);
                        }
                    }
                }
                "TABLE_PRIVILEGES" => {
                    for ((d, t), p) in g.tables.iter().filter(|(_, p)| !p.is_empty()) {
                        for n in names(*p) {
                            rows.push(vec![
                                grantee.clone(),
                                text("def"),
                                text(d),
                                text(t),
                                text(n),
                                grantable(*p),
                            ]);
                        }
                    }
                }
                _ => {
                    for ((d, t), cols) in &g.columns {
                        // A column privilege may be granted on when the table holds GRANT
                        // OPTION.
                        let on_table = g
                            .tables
                            .iter()
                            .find(|(k, _)| k.0 == *d && k.1 == *t)
                            .map_or(Privs::NONE, |(_, p)| *p);
                        for (c, p) in cols {
                            for n in p.names().0 {
                                rows.push(vec![
                                    grantee.clone(),
                                    text("def"),
                                    text(d),
                                    text(t),
                                    text(c),
                                    text(n),
                                    grantable(on_table),
                                ]);
                            }
                        }
                    }
                }
            }
        }
        rows
    }

    fn routines_rows(&self) -> Result<Vec<Vec<Value>>> {
        Ok(self
            .procedures()?
            .into_iter()
            .filter_map(|p| {
                let (visible, body) = self.routine_access(&p.db, &p.name, &p.definer);
                visible.then_some((p, body))
            })
            .map(|(p, readable)| {
                let (db, name, definition, definer, created) =
                    (p.db, p.name, p.definition, p.definer, p.created_us);
                // ROUTINE_DEFINITION is NULL to an account that may not read the body.
                let body = if readable {
                    text(
                        crate::parse::lexer::find_top_level(&definition, "BEGIN")
                            .map_or(definition.as_str(), |at| &definition[at..]),
                    )
                } else {
                    Value::Null
                };
                let mut row = vec![
                    text(&name),
                    text("def"),
                    text(&db),
                    text(&name),
                    text("PROCEDURE"),
                    text(""),
                ];
                row.extend(std::iter::repeat_n(Value::Null, 8));
                row.extend([
                    text("SQL"),
                    body,
                    Value::Null,
                    text("SQL"),
                    text("SQL"),
                    text("NO"),
                    text("CONTAINS SQL"),
                    Value::Null,
                    text("INVOKER"),
                    Value::Timestamp(created),
                    Value::Timestamp(created),
                    text(crate::expr::SQL_MODE),
                    text(""),
                    text(definer),
                    text(CHARSET),
                    text(COLLATION),
                    text(COLLATION),
                ]);
                row
            })
            .collect())
    }

    fn tables_rows(&self) -> Result<Vec<Vec<Value>>> {
        let mut rows: Vec<Vec<Value>> = self
            .visible_tables()
            .iter()
            .map(|def| {
                let auto_increment = self
                    .session
                    .next_auto_increment(def)?
                    .map_or(Value::Null, num);
                let options = if def.partitioning.is_some() {
                    "partitioned"
                } else {
                    ""
                };
                Ok(vec![
                    text("def"),
                    text(&def.database),
                    text(&def.name),
                    text("BASE TABLE"),
                    text(self.engine_name(def)),
                    num(10),
                    text("Dynamic"),
                    num(self.row_count(def)),
                    num(0),
                    num(0),
                    num(0),
                    num(0),
                    num(0),
                    auto_increment,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    text(COLLATION),
                    Value::Null,
                    text(options),
                    text(def.comment.clone().unwrap_or_default()),
                ])
            })
            .collect::<Result<_>>()?;
        for name in catalog_table_names() {
            rows.push(vec![
                text("def"),
                text(INFORMATION_SCHEMA),
                text(name),
                text("SYSTEM VIEW"),
                Value::Null,
                num(10),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                text(""),
                text(""),
            ]);
        }
        Ok(rows)
    }

    fn columns_rows(&self) -> Vec<Vec<Value>> {
        let mut rows = Vec::new();
        for def in self.visible_tables() {
            // A column is listed to an account with a privilege on it (MySQL's
            // CAN_ACCESS_COLUMN), and PRIVILEGES says which.
            let described = describe_rows(&def);
            for ((n, (_, c)), d) in visible(&def).enumerate().zip(described) {
                let privileges = self.privileges_of_column(&def.database, &def.name, &c.name);
                if privileges.is_empty() {
                    continue;
                }
                let [data_type, max_len, octets, precision, scale, datetime, cs, coll] =
                    type_facts(&c.ty);
                let generation = match &c.default {
                    ColumnDefault::Generated { expr, .. } => expr.clone(),
                    _ => String::new(),
                };
                let opt = |v: &Option<String>| v.clone().map_or(Value::Null, Value::Text);
                rows.push(vec![
                    text("def"),
                    text(&def.database),
                    text(&def.name),
                    text(&c.name),
                    num(n as u64 + 1),
                    opt(&d[4]),
                    text(if c.nullable { "YES" } else { "NO" }),
                    data_type,
                    max_len,
                    octets,
                    precision,
                    scale,
                    datetime,
                    cs,
                    coll,
                    text(c.ty.sql()),
                    opt(&d[3]),
                    opt(&d[5]),
                    text(&privileges),
                    text(&c.comment),
                    text(generation),
                    Value::Null,
                ]);
            }
        }
        rows
    }

    fn statistics_rows(&self) -> Vec<Vec<Value>> {
        self.visible_tables()
            .iter()
            .flat_map(|def| self.index_rows(def))
            .collect()
    }

    /// The STATISTICS rows of one table: one per column of each index.
    fn index_rows(&self, def: &TableDef) -> Vec<Vec<Value>> {
        let mut rows = Vec::new();
        {
            let count = self.row_count(def);
            for (name, unique, cols) in indexes(def) {
                for (seq, &c) in cols.iter().enumerate() {
                    let col = &def.columns[c];
                    rows.push(vec![
                        text("def"),
                        text(&def.database),
                        text(&def.name),
                        num(u64::from(!unique)),
                        text(&def.database),
                        text(&name),
                        num(seq as u64 + 1),
                        text(&col.name),
                        text("A"),
                        num(count),
                        Value::Null,
                        Value::Null,
                        text(if col.nullable { "YES" } else { "" }),
                        text("BTREE"),
                        text(""),
                        text(""),
                        text("YES"),
                        Value::Null,
                    ]);
                }
            }
        }
        rows
    }

    /// The FOREIGN KEY constraints of the tables the account may see, each with the name of
    /// the parent's index that its columns lead (`PRIMARY`, a unique or another index),
    /// `None` when the parent is missing (a constraint made with the checks off).
    fn visible_foreign_keys(&self) -> Result<Vec<(ForeignKey, Option<String>)>> {
        if !self.has_foreign_keys() {
            return Ok(Vec::new());
        }
        let visible = self.visible_tables();
        Ok(self
            .foreign_keys()?
            .into_iter()
            .filter(|f| visible.iter().any(|d| f.is_on(&d.database, &d.name)))
            .map(|f| {
                let index = self
                    .engine()
                    .table_def(&f.parent_db, &f.parent_table)
                    .and_then(|p| {
                        let cols: Vec<usize> = f
                            .parent_columns
                            .iter()
                            .map(|c| p.column_index(c))
                            .collect::<Option<_>>()?;
                        indexes(&p)
                            .into_iter()
                            .find(|(_, _, ic)| ic.starts_with(&cols))
                            .map(|(name, ..)| name)
                    });
                (f, index)
            })
            .collect())
    }

    fn key_column_usage_rows(&self) -> Vec<Vec<Value>> {
        let mut rows = Vec::new();
        for def in self.visible_tables() {
            for (name, _, cols) in indexes(&def).into_iter().filter(|(_, u, _)| *u) {
                for (seq, &c) in cols.iter().enumerate() {
                    rows.push(vec![
                        text("def"),
                        text(&def.database),
                        text(&name),
                        text("def"),
                        text(&def.database),
                        text(&def.name),
                        text(&def.columns[c].name),
                        num(seq as u64 + 1),
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                    ]);
                }
            }
        }
        rows
    }

    fn partitions_rows(&self) -> Vec<Vec<Value>> {
        let mut rows = Vec::new();
        for def in self.visible_tables() {
            let count = self.row_count(&def);
            let row = |name: Value, pos: Value, method: Value, expr: Value, rows: u64| {
                vec![
                    text("def"),
                    text(&def.database),
                    text(&def.name),
                    name,
                    Value::Null,
                    pos,
                    Value::Null,
                    method,
                    Value::Null,
                    expr,
                    Value::Null,
                    Value::Null,
                    num(rows),
                    num(0),
                    num(0),
                    num(0),
                    num(0),
                    num(0),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    text(""),
                    text("default"),
                    Value::Null,
                ]
            };
            match partition_method(&def) {
                None => rows.push(row(
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    count,
                )),
                Some((method, expr)) => {
                    // One engine holds every partition: the rows are counted once, on the
                    // first.
                    let n = def
                        .partitioning
                        .as_ref()
                        .and_then(|p| p.partitions)
                        .unwrap_or(1);
                    for i in 0..n {
                        rows.push(row(
                            text(format!("p{i}")),
                            num(u64::from(i) + 1),
                            text(&method),
                            text(&expr),
                            if i == 0 { count } else { 0 },
                        ));
                    }
                }
            }
        }
        rows
    }
}

/// Catalog rows without the columns at `drop` (positions in the catalog table): the SHOW
/// statements show the catalog's rows under fewer columns.
fn without_columns(rows: Vec<Vec<Value>>, drop: &[usize]) -> Vec<Vec<Value>> {
    rows.into_iter()
        .map(|r| {
            r.into_iter()
                .enumerate()
                .filter(|(i, _)| !drop.contains(i))
                .map(|(_, v)| v)
                .collect()
        })
        .collect()
}

/// `FROM name` / `IN name` at `words[i..]`: the name.
fn from_name(words: &[String], i: usize) -> Option<&str> {
    match words.get(i)?.to_ascii_uppercase().as_str() {
        "FROM" | "IN" => words.get(i + 1).map(String::as_str),
        _ => None,
    }
}

impl SqlSession {
    /// A SHOW result: `rows` under `columns`, kept by `filter`.
    pub(crate) fn show_result(
        &self,
        columns: &[&str],
        rows: Vec<Vec<Value>>,
        filter: Option<&ShowFilter>,
    ) -> Result<crate::Outcome> {
        let rows = match filter {
            None => rows,
            Some(ShowFilter::Like(p)) => rows
                .into_iter()
                .filter(|r| match r.first() {
                    Some(Value::Text(t)) => crate::expr::like(t, p, '\\'),
                    _ => false,
                })
                .collect(),
            Some(ShowFilter::Where(e)) => {
                let cols: Vec<crate::table::columns::ColumnRef> = columns
                    .iter()
                    .map(|c| crate::table::columns::ColumnRef {
                        table: String::new(),
                        name: c.to_lowercase(),
                        ty: None,
                        qualified_only: false,
                    })
                    .collect();
                crate::expr::predicate::keep_matching(Some(e), &cols, rows, &self.ctx())?
            }
        };
        Ok(crate::Outcome::Rows(crate::ResultSet {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            types: vec![None; columns.len()],
            rows,
            tz: 0,
        }))
    }

    /// A database named in a SHOW statement (the current one when `None`), checked to exist.
    pub(crate) fn shown_database_of(&self, db: Option<&str>) -> Result<String> {
        let db = match db {
            Some(d) => d.to_string(),
            None => self.session.current_db()?,
        };
        if !db.eq_ignore_ascii_case(INFORMATION_SCHEMA)
            && !self.engine().with_state(|st| st.has_database(&db))
        {
            return Err(Error::new(
                code::ER_BAD_DB_ERROR,
                format!("Unknown database '{db}'"),
            ));
        }
        Ok(db)
    }

    /// The database SHOW TABLES, SHOW TABLE STATUS or SHOW TRIGGERS looks into (the current
    /// one when `None`): error 1044 where the account holds nothing, checked before whether
    /// it exists (as MySQL, so a name says nothing of what exists), then 1049.
    pub(crate) fn listed_database_of(&self, db: Option<&str>) -> Result<String> {
        let name = match db {
            Some(d) => d.to_string(),
            None => self.session.current_db()?,
        };
        self.require_listing(&name)?;
        self.shown_database_of(Some(&name))
    }

    /// `SHOW [FULL] TABLES [FROM db] [LIKE 'p' | WHERE e]`.
    pub(crate) fn show_tables_in(
        &self,
        full: bool,
        db: Option<&str>,
        filter: Option<&ShowFilter>,
    ) -> Result<crate::Outcome> {
        let db = self.listed_database_of(db)?;
        let rows: Vec<Vec<Value>> = if db.eq_ignore_ascii_case(INFORMATION_SCHEMA) {
            catalog_table_names()
                .map(|n| vec![text(n), text("SYSTEM VIEW")])
                .collect()
        } else {
            let mut rows: Vec<Vec<Value>> = self
                .visible_tables()
                .into_iter()
                .filter(|t| t.database.eq_ignore_ascii_case(&db))
                .map(|t| vec![text(t.name), text("BASE TABLE")])
                .chain(
                    self.visible_views()?
                        .into_iter()
                        .filter(|v| v.db.eq_ignore_ascii_case(&db))
                        .map(|v| vec![text(v.name), text("VIEW")]),
                )
                .collect();
            rows.sort_by_key(|r| ringrep_engine::types::text_of(&r[0]));
            rows
        };
        let header = format!("Tables_in_{db}");
        let (columns, rows): (Vec<&str>, Vec<Vec<Value>>) = if full {
            (vec![&header, "Table_type"], rows)
        } else {
            (
                vec![&header],
                rows.into_iter()
                    .map(|mut r| {
                        r.truncate(1);
                        r
                    })
                    .collect(),
            )
        };
        self.show_result(&columns, rows, filter)
    }

    /// The definition of a table a SHOW or DESCRIBE names: stored or computed.
    pub(crate) fn described_def(&self, db: Option<&str>, name: &str) -> Result<TableDef> {
        match self.computed_table(db, name) {
            Some(computed) => Ok(computed?.0),
            None => self.session.table_def(db, name),
        }
    }

    /// `SHOW [FULL] COLUMNS FROM t [FROM db] [LIKE 'p' | WHERE e]` and DESCRIBE.
    pub(crate) fn show_columns(
        &self,
        full: bool,
        db: Option<&str>,
        table: &str,
        filter: Option<&ShowFilter>,
    ) -> Result<crate::Outcome> {
        let def = self.described_def(db, table)?;
        // Only the columns the account has a privilege on, as MySQL lists them, each with
        // those privileges.
        let rows: Vec<Vec<Value>> = describe_rows(&def)
            .into_iter()
            .zip(visible(&def))
            .filter_map(|(d, (_, c))| {
                let privileges = self.privileges_of_column(&def.database, &def.name, &c.name);
                (!privileges.is_empty()).then_some((d, c, privileges))
            })
            .map(|(d, c, privileges)| {
                let v = |i: usize| d[i].clone().map_or(Value::Null, Value::Text);
                if full {
                    let collation = if c.ty.is_string() {
                        text(COLLATION)
                    } else {
                        Value::Null
                    };
                    vec![
                        v(0),
                        v(1),
                        collation,
                        v(2),
                        v(3),
                        v(4),
                        v(5),
                        text(&privileges),
                        text(&c.comment),
                    ]
                } else {
                    (0..6).map(v).collect()
                }
            })
            .collect();
        let columns: &[&str] = if full {
            &[
                "Field",
                "Type",
                "Collation",
                "Null",
                "Key",
                "Default",
                "Extra",
                "Privileges",
                "Comment",
            ]
        } else {
            &["Field", "Type", "Null", "Key", "Default", "Extra"]
        };
        self.show_result(columns, rows, filter)
    }

    /// `SHOW TABLE STATUS [FROM db] [LIKE 'p' | WHERE e]`: the TABLES rows of a database
    /// under MySQL's SHOW headers.
    pub(crate) fn show_table_status(&self, text_: &str) -> Result<crate::Outcome> {
        let w = show_words(text_, 3)?;
        let db = self.listed_database_of(from_name(&w.words, 0))?;
        let (_, all) = self.information_schema("TABLES")?;
        let rows = all
            .into_iter()
            .filter(|r| matches!(&r[1], Value::Text(d) if d.eq_ignore_ascii_case(&db)))
            .collect();
        // TABLES without TABLE_CATALOG, TABLE_SCHEMA and TABLE_TYPE: SHOW's columns in order.
        let rows = without_columns(rows, &[0, 1, 3]);
        self.show_result(
            &[
                "Name",
                "Engine",
                "Version",
                "Row_format",
                "Rows",
                "Avg_row_length",
                "Data_length",
                "Max_data_length",
                "Index_length",
                "Data_free",
                "Auto_increment",
                "Create_time",
                "Update_time",
                "Check_time",
                "Collation",
                "Checksum",
                "Create_options",
                "Comment",
            ],
            rows,
            w.filter.as_ref(),
        )
    }

    /// `SHOW {INDEX | INDEXES | KEYS} {FROM | IN} t [{FROM | IN} db] [WHERE e]`.
    pub(crate) fn show_index(&self, text_: &str) -> Result<crate::Outcome> {
        let w = show_words(text_, 2)?;
        let syntax = || {
            Error::syntax(format!(
                "You have an error in your SQL syntax near '{text_}'"
            ))
        };
        let named = from_name(&w.words, 0).ok_or_else(syntax)?;
        let (db, table) = match (from_name(&w.words, 2), named.split_once('.')) {
            (Some(db), _) => (Some(db.to_string()), named.to_string()),
            (None, Some((db, t))) => (Some(db.to_string()), t.to_string()),
            (None, None) => (None, named.to_string()),
        };
        if let Some(db) = db.as_deref().or(self.session.vars.database.as_deref()) {
            self.require_describe(db, &table)?;
        }
        let def = self.described_def(db.as_deref(), &table)?;
        // STATISTICS without TABLE_CATALOG, TABLE_SCHEMA and INDEX_SCHEMA: SHOW INDEX's columns.
        let rows = without_columns(self.index_rows(&def), &[0, 1, 4]);
        self.show_result(
            &[
                "Table",
                "Non_unique",
                "Key_name",
                "Seq_in_index",
                "Column_name",
                "Collation",
                "Cardinality",
                "Sub_part",
                "Packed",
                "Null",
                "Index_type",
                "Comment",
                "Index_comment",
                "Visible",
                "Expression",
            ],
            rows,
            w.filter.as_ref(),
        )
    }
}

/// `ndbinfo.memory_per_fragment` as ringrep can answer it: one row per table with the rows it
/// stores (meta rows and expired rows not purged yet included) as `fixed_elem_count`.
pub(crate) fn memory_per_fragment(engine: &ringrep_engine::Engine) -> (TableDef, Vec<Vec<Value>>) {
    use binlog_format::schema::IntWidth;
    let col = |name: &str, ty| crate::table::computed::plain_column(name, ty, false);
    let big = ColumnType::Integer {
        width: IntWidth::Big,
        unsigned: true,
    };
    let def = TableDef {
        id: 0,
        database: "ndbinfo".into(),
        name: "memory_per_fragment".into(),
        columns: vec![
            col("fq_name", ColumnType::VarChar { len: 512 }),
            col("table_id", big.clone()),
            col("fragment_num", big.clone()),
            col("fixed_elem_count", big),
        ],
        primary_key: vec![0],
        indexes: vec![],
        ring: None,
        ttl: None,
        partitioning: None,
        comment: None,
    };
    let rows = engine.with_state(|st| {
        st.tables
            .values()
            .map(|t| {
                vec![
                    Value::Text(format!("{}/def/{}", t.def.database, t.def.name)),
                    Value::UInt(t.def.id),
                    Value::UInt(0),
                    Value::UInt(t.len() as u64),
                ]
            })
            .collect()
    });
    (def, rows)
}

/// DESCRIBE / SHOW COLUMNS rows: Field, Type, Null, Key, Default, Extra (MySQL 8's format).
pub(crate) fn describe_rows(def: &TableDef) -> Vec<Vec<Option<String>>> {
    // As MySQL's key flags: UNI for a one-column unique index, MUL for the first column of
    // any other (a value may repeat in the first column of a unique index of two).
    let unique_alone = |c: usize| {
        def.indexes
            .iter()
            .any(|i| i.kind == IndexKind::Unique && i.columns == [c])
    };
    let first_of_many = |c: usize| {
        def.indexes.iter().any(|i| {
            i.columns.first() == Some(&c) && (i.kind == IndexKind::Secondary || i.columns.len() > 1)
        })
    };
    def.columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.name != HIDDEN_ROW_ID)
        .map(|(i, c)| {
            let key = if def.primary_key.contains(&i) {
                "PRI"
            } else if unique_alone(i) {
                "UNI"
            } else if first_of_many(i) {
                "MUL"
            } else {
                ""
            };
            let (default, mut extra) = match &c.default {
                ColumnDefault::Value(Value::Null) | ColumnDefault::None => (None, String::new()),
                ColumnDefault::Value(Value::Bit(b)) => (Some(format!("b'{b:b}'")), String::new()),
                ColumnDefault::Value(v) => (render(v, Some(&c.ty), 0), String::new()),
                ColumnDefault::CurrentTimestamp { fsp: 0 } => (
                    Some("CURRENT_TIMESTAMP".to_string()),
                    "DEFAULT_GENERATED".to_string(),
                ),
                ColumnDefault::CurrentTimestamp { fsp } => (
                    Some(format!("CURRENT_TIMESTAMP({fsp})")),
                    "DEFAULT_GENERATED".to_string(),
                ),
                ColumnDefault::Generated { stored, .. } => (
                    None,
                    if *stored {
                        "STORED GENERATED".to_string()
                    } else {
                        "VIRTUAL GENERATED".to_string()
                    },
                ),
            };
            if c.auto_increment {
                extra = "auto_increment".into();
            }
            if c.on_update_now {
                extra = format!("{extra} on update CURRENT_TIMESTAMP")
                    .trim()
                    .to_string();
            }
            vec![
                Some(c.name.clone()),
                Some(c.ty.sql()),
                Some(if c.nullable { "YES" } else { "NO" }.into()),
                Some(key.into()),
                default,
                Some(extra),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalog_table_has_unique_column_names() {
        for (table, cols) in TABLES {
            let mut names: Vec<&str> = cols.iter().map(|(n, _)| *n).collect();
            names.sort_unstable();
            let before = names.len();
            names.dedup();
            assert_eq!(before, names.len(), "{table}");
        }
        let mut tables: Vec<&str> = catalog_table_names().collect();
        let sorted = {
            let mut s = tables.clone();
            s.sort_unstable();
            s
        };
        assert_eq!(tables, sorted, "kept in name order");
        tables.dedup();
        assert_eq!(tables.len(), TABLES.len());
    }

    #[test]
    fn type_facts_follow_mysql() {
        let [dt, max, oct, ..] = type_facts(&ColumnType::VarChar { len: 256 });
        assert_eq!(
            (dt, max, oct),
            (text("varchar"), num(256), num(1024)),
            "utf8mb4: four bytes a character"
        );
        let [dt, _, _, p, s, ..] = type_facts(&ColumnType::Integer {
            width: IntWidth::Int,
            unsigned: true,
        });
        assert_eq!((dt, p, s), (text("int"), num(10), num(0)));
    }
}
