//! Turning a table description into a checked [`TableDef`]: the comment's NDB_TABLE options,
//! the ring and TTL rules, partitioning; and the DDL statements of a session.

use binlog_format::schema::{
    ColumnDef, ColumnDefault, ColumnType, IndexKind, IntWidth, Partitioning, TableDef,
};
use binlog_format::{Cause, DdlEvent, Event, RowChange, RowEvent, Value};

use crate::error::{code, Error, Result};
use crate::ring::{parse_comment, ring_options, ttl_options, RingSpec, TtlSpec};
use crate::{Session, HIDDEN_ROW_ID};

/// `PARTITION BY` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSpec {
    /// "KEY", "LINEAR KEY", "HASH", "RANGE", "LIST", ...
    pub kind: String,
    /// The partitioning columns, as named.
    pub columns: Vec<String>,
    /// `PARTITIONS n`, when given.
    pub partitions: Option<u32>,
}

/// A plain table of ringrep's own in database `mysql` (the apply status, the accounts):
/// `columns`, the first `key_columns` of them the primary key, no ring, no TTL.
pub fn system_table(name: &str, columns: Vec<ColumnDef>, key_columns: usize) -> TableDef {
    let def = TableDef {
        id: 0,
        database: crate::SYSTEM_DB.into(),
        name: name.into(),
        columns,
        primary_key: (0..key_columns).collect(),
        indexes: vec![],
        ring: None,
        ttl: None,
        partitioning: None,
        comment: None,
    };
    // A plain table of known columns; preparing it cannot fail.
    prepare_table(def.clone(), None, false).unwrap_or(def)
}

/// Resolves the ring, TTL and partitioning of `def` (whose columns, keys and comment are set)
/// and checks every rule of the spec. `def.id` is kept.
pub fn prepare_table(
    mut def: TableDef,
    partition: Option<&PartitionSpec>,
    foreign_keys: bool,
) -> Result<TableDef> {
    let opts = match &def.comment {
        Some(c) => parse_comment(c)?,
        None => Default::default(),
    };
    def.ring = None;
    def.ttl = None;
    if def.primary_key.is_empty()
        && def.column_index(HIDDEN_ROW_ID).is_none()
        && !matches!(opts.ring, Some(RingSpec::On { .. }))
    {
        def.columns.push(ColumnDef {
            name: HIDDEN_ROW_ID.into(),
            ty: ColumnType::Integer {
                width: IntWidth::Big,
                unsigned: true,
            },
            nullable: false,
            default: ColumnDefault::None,
            on_update_now: false,
            auto_increment: false,
            comment: String::new(),
        });
        def.primary_key = vec![def.columns.len() - 1];
    }
    if let Some(RingSpec::On {
        size,
        slot_column,
        meta_column,
    }) = &opts.ring
    {
        if opts.fully_replicated == Some(true) {
            return Err(Error::create_option(
                "A table cannot be both fully replicated and MAX_ROWS_PER_PK",
            ));
        }
        if foreign_keys {
            return Err(Error::ring_foreign_key());
        }
        if let Some(p) = partition {
            let kind = p.kind.to_ascii_uppercase();
            if kind != "KEY" && kind != "LINEAR KEY" {
                return Err(Error::create_option(
                    "MAX_ROWS_PER_PK supports only KEY partitioning",
                ));
            }
        }
        def.ring = Some(ring_options(&def, *size, slot_column, meta_column)?);
    }
    if let Some(TtlSpec::On { seconds, column }) = &opts.ttl {
        def.ttl = Some(ttl_options(&def, *seconds, column)?);
    }
    def.partitioning = match partition {
        None => None,
        Some(p) => {
            let mut cols = Vec::new();
            for c in &p.columns {
                cols.push(
                    def.column_index(c)
                        .ok_or_else(|| Error::bad_field(c, "partition function"))?,
                );
            }
            Some(Partitioning {
                linear: p.kind.to_ascii_uppercase().starts_with("LINEAR"),
                columns: cols,
                partitions: p.partitions,
            })
        }
    };
    check_columns(&def)?;
    Ok(def)
}

fn check_columns(def: &TableDef) -> Result<()> {
    for (i, c) in def.columns.iter().enumerate() {
        if def.columns[..i]
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(&c.name))
        {
            return Err(Error::new(
                code::ER_DUP_FIELDNAME,
                format!("Duplicate column name '{}'", c.name),
            ));
        }
        if c.ty.is_lob()
            && matches!(
                c.default,
                ColumnDefault::Value(Value::Text(_) | Value::Bytes(_) | Value::Json(_))
            )
        {
            return Err(Error::new(
                code::ER_BLOB_CANT_HAVE_DEFAULT,
                format!(
                    "BLOB, TEXT, GEOMETRY or JSON column '{}' can't have a default value",
                    c.name
                ),
            ));
        }
    }
    for (i, idx) in def.indexes.iter().enumerate() {
        if def.indexes[..i]
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(&idx.name))
        {
            return Err(Error::new(
                code::ER_DUP_KEYNAME,
                format!("Duplicate key name '{}'", idx.name),
            ));
        }
    }
    Ok(())
}

/// Maps a stored row (and whether it is a meta row) into the new layout of a copying ALTER;
/// `None` drops the row.
pub type RowMapper<'a> = dyn FnMut(&[Value], bool) -> Result<Option<Vec<Value>>> + 'a;

impl Session {
    /// CREATE TABLE of a prepared definition (see [`prepare_table`]); the id is assigned here.
    /// Returns false when the table exists and `if_not_exists` is set.
    pub fn create_table(&mut self, mut def: TableDef, if_not_exists: bool) -> Result<bool> {
        if !self
            .engine()
            .with_state(|st| st.has_database(&def.database))
        {
            return Err(Error::new(
                code::ER_BAD_DB_ERROR,
                format!("Unknown database '{}'", def.database),
            ));
        }
        if self.engine().table_def(&def.database, &def.name).is_some() {
            if if_not_exists {
                self.warn(
                    code::ER_TABLE_EXISTS_ERROR,
                    format!("Table '{}' already exists", def.name),
                );
                return Ok(false);
            }
            return Err(Error::new(
                code::ER_TABLE_EXISTS_ERROR,
                format!("Table '{}' already exists", def.name),
            ));
        }
        def.id = self.allocate_table_id(crate::is_node_local_table(&def.database, &def.name));
        self.ddl(DdlEvent::CreateTable { table: def }, vec![])?;
        Ok(true)
    }

    /// DROP TABLE (in `db`, or the session's database). Returns false when the table is absent
    /// and `if_exists` is set (with a warning, as MySQL gives).
    pub fn drop_table(&mut self, db: Option<&str>, name: &str, if_exists: bool) -> Result<bool> {
        let def = match self.table_def(db, name) {
            Ok(d) => d,
            Err(_) if if_exists => {
                let db = db
                    .map(str::to_string)
                    .or_else(|| self.vars.database.clone())
                    .unwrap_or_default();
                self.warn(
                    code::ER_BAD_TABLE_ERROR,
                    format!("Unknown table '{db}.{name}'"),
                );
                return Ok(false);
            }
            Err(_) => {
                let db = db
                    .map(str::to_string)
                    .or_else(|| self.vars.database.clone())
                    .unwrap_or_default();
                return Err(Error::new(
                    code::ER_BAD_TABLE_ERROR,
                    format!("Unknown table '{db}.{name}'"),
                ));
            }
        };
        self.ddl(
            DdlEvent::DropTable {
                table_id: def.id,
                database: def.database,
                name: def.name,
            },
            vec![],
        )?;
        Ok(true)
    }

    /// TRUNCATE TABLE: every row goes, meta rows included, so rings start again from slot 1.
    pub fn truncate(&mut self, def: &TableDef) -> Result<()> {
        self.ddl(DdlEvent::TruncateTable { table_id: def.id }, vec![])?;
        Ok(())
    }

    /// CREATE DATABASE. Returns false when it exists and `if_not_exists` is set.
    pub fn create_database(&mut self, name: &str, if_not_exists: bool) -> Result<bool> {
        if self.engine().with_state(|st| st.has_database(name)) {
            if if_not_exists {
                return Ok(false);
            }
            return Err(Error::new(
                code::ER_DB_CREATE_EXISTS,
                format!("Can't create database '{name}'; database exists"),
            ));
        }
        self.ddl(DdlEvent::CreateDatabase { name: name.into() }, vec![])?;
        Ok(true)
    }

    /// DROP DATABASE with its tables. Returns false when it is absent and `if_exists` is set.
    pub fn drop_database(&mut self, name: &str, if_exists: bool) -> Result<bool> {
        // It holds the accounts and the node's own tables, and always exists (as in MySQL 8,
        // which refuses this the same way).
        if name.eq_ignore_ascii_case(crate::SYSTEM_DB) {
            return Err(Error::new(
                code::ER_NO_SYSTEM_SCHEMA_ACCESS,
                format!("Access to system schema '{name}' is rejected."),
            ));
        }
        if !self.engine().with_state(|st| st.has_database(name)) {
            if if_exists {
                return Ok(false);
            }
            return Err(Error::new(
                code::ER_DB_DROP_EXISTS,
                format!("Can't drop database '{name}'; database doesn't exist"),
            ));
        }
        self.ddl(DdlEvent::DropDatabase { name: name.into() }, vec![])?;
        if self
            .vars
            .database
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case(name))
        {
            self.vars.database = None;
        }
        Ok(true)
    }

    /// A copying ALTER: the new definition (same id) and every stored row mapped into it by
    /// `map_row` (return `None` to drop a row, as for expired rows). Meta rows are kept, so
    /// rings continue where they were.
    pub fn alter_table(&mut self, new_def: TableDef, map_row: &mut RowMapper<'_>) -> Result<()> {
        let rows = self.scan_raw(new_def.id, &[])?;
        let old = self
            .engine()
            .with_state(|st| st.tables.get(&new_def.id).map(|t| TableDef::clone(&t.def)))
            .ok_or_else(|| Error::no_such_table(&new_def.database, &new_def.name))?;
        let mut events = Vec::new();
        let mut dropped = Vec::new();
        let mut rows_seen = UniqueCheck::new(&new_def);
        for (key, row) in rows {
            let is_meta = old.is_meta_key(&key.0);
            let Some(new_row) = map_row(&row, is_meta)? else {
                dropped.push(old.key_of(&row));
                continue;
            };
            rows_seen.add(&new_row, is_meta)?;
            let cause = if is_meta {
                Cause::MetaUpdate
            } else {
                Cause::Insert
            };
            events.push(Event::Row(RowEvent {
                table_id: new_def.id,
                change: RowChange::Write { row: new_row },
                cause,
            }));
        }
        // Replicas replace the table's rows with the writes above; a change stream's consumer
        // sees only records, so each row the ALTER drops (expired, not yet purged) is also a
        // delete, where its key still names a row under the new definition. Applied after
        // the replacement it finds nothing, which is no error.
        if same_key(&old, &new_def) {
            events.extend(dropped.into_iter().map(|key| {
                Event::Row(RowEvent {
                    table_id: new_def.id,
                    change: RowChange::Delete { key },
                    cause: Cause::TtlPurge,
                })
            }));
        }
        self.ddl(DdlEvent::AlterTable { table: new_def }, events)?;
        Ok(())
    }
}

/// Whether two definitions of a table have the same primary key: the same columns, by name
/// and type, in the same order.
fn same_key(a: &TableDef, b: &TableDef) -> bool {
    let key = |d: &TableDef| -> Vec<(String, ColumnType)> {
        d.primary_key
            .iter()
            .filter_map(|&i| d.columns.get(i))
            .map(|c| (c.name.to_ascii_lowercase(), c.ty.clone()))
            .collect()
    };
    key(a) == key(b)
}

/// The keys and unique-index values of the rows an ALTER TABLE writes under the new
/// definition: two rows on one key (a key column's new type compares them equal, as text
/// compares 'Bob' and 'bob') or on one value of a unique index (one being added) are error
/// 1062, as in MySQL, not one row silently kept or an index that no longer holds. A ring's
/// meta rows are not entered into unique indexes (the spec), so only their keys count.
struct UniqueCheck<'d> {
    def: &'d TableDef,
    keys: std::collections::HashSet<binlog_format::Key>,
    /// Per unique index: its position in `def.indexes` and the values seen.
    uniques: Vec<(usize, std::collections::HashSet<binlog_format::Key>)>,
}

impl<'d> UniqueCheck<'d> {
    fn new(def: &'d TableDef) -> UniqueCheck<'d> {
        UniqueCheck {
            def,
            keys: Default::default(),
            uniques: def
                .indexes
                .iter()
                .enumerate()
                .filter(|(_, i)| i.kind == IndexKind::Unique)
                .map(|(n, _)| (n, Default::default()))
                .collect(),
        }
    }

    fn add(&mut self, row: &[Value], is_meta: bool) -> Result<()> {
        let key = binlog_format::Key(self.def.key_of(row));
        if let Some(k) = self.keys.replace(key) {
            return Err(Error::dup_entry(
                &crate::session::dup_text(&k.0),
                &format!("{}.PRIMARY", self.def.name),
            ));
        }
        if is_meta {
            return Ok(());
        }
        for (n, seen) in &mut self.uniques {
            let Some(value) = self.def.index_value(*n, row) else {
                continue;
            };
            if let Some(v) = seen.replace(value) {
                return Err(Error::dup_entry(
                    &crate::session::dup_text(&v.0),
                    &format!("{}.{}", self.def.name, self.def.indexes[*n].name),
                ));
            }
        }
        Ok(())
    }
}
