//! FOREIGN KEY constraints at work, as InnoDB runs them in MySQL 8: MySQL's checks when
//! CREATE TABLE or ALTER TABLE adds one (the parent, its columns and index, the types),
//! the index MySQL adds on the child's columns, and their enforcement when rows change:
//! 1452 for a child row without a parent, 1451 for a parent row that child rows still
//! reference (RESTRICT, NO ACTION), and the CASCADE and SET NULL actions, which change the
//! child rows within the statement, so they are logged, replicated and undone with it.
//! DROP TABLE (3730) and TRUNCATE (1701) of a referenced parent are refused. With
//! `foreign_key_checks` off none of this runs, as in MySQL. The definitions and their
//! storage are `objects::foreign_keys`'s.
//!
//! Unlike InnoDB, which checks row by row, a statement's changes are checked when it has
//! made them all (`SqlSession::enforce_foreign_keys`), whatever path wrote them: a statement
//! that inserts a child row before its parent row, or deletes a parent row together with
//! its child rows, succeeds here, where InnoDB fails on the first row.

use std::collections::{HashMap, HashSet};

use binlog_format::schema::{ColumnType, IndexDef, IndexKind, IntWidth, TableDef};
use binlog_format::{Key, Value};
use sqlparser::ast::ForeignKeyConstraint;

use crate::objects::foreign_keys::{generated_name, ForeignKey, Rule};
use crate::SqlSession;
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::StagedChange;

/// How many rounds of cascades one statement may set off: InnoDB's 15 levels.
const MAX_CASCADE_DEPTH: usize = 15;

/// `` `db`.`table` `` of a constraint's child, as InnoDB's messages name it.
fn child_name(fk: &ForeignKey, table: &str) -> String {
    format!(
        "{}.{}",
        ringrep_cdc::sql_text::quote_ident(&fk.db),
        ringrep_cdc::sql_text::quote_ident(table)
    )
}

/// Error 1452 for a child row of `fk` (in table `table`: the child, or the name an ALTER
/// gives it) without a parent row.
pub(crate) fn no_referenced_row(fk: &ForeignKey, table: &str) -> Error {
    Error::new(
        code::ER_NO_REFERENCED_ROW_2,
        format!(
            "Cannot add or update a child row: a foreign key constraint fails ({}, {})",
            child_name(fk, table),
            fk.clause()
        ),
    )
}

/// Error 1451 for a parent row of `fk` that child rows reference.
pub(crate) fn row_is_referenced(fk: &ForeignKey) -> Error {
    Error::new(
        code::ER_ROW_IS_REFERENCED_2,
        format!(
            "Cannot delete or update a parent row: a foreign key constraint fails ({}, {})",
            child_name(fk, &fk.table),
            fk.clause()
        ),
    )
}

/// Whether `positions` are the leading columns, in order, of the primary key or of an index
/// of `def`: what InnoDB needs on both sides of a constraint.
pub(crate) fn has_index_on(def: &TableDef, positions: &[usize]) -> bool {
    let leads = |cols: &[usize]| cols.len() >= positions.len() && cols.starts_with(positions);
    (!def.primary_key.is_empty() && leads(&def.primary_key))
        || def.indexes.iter().any(|i| leads(&i.columns))
}

/// Whether a child column of type `child` may reference a parent column of type `parent`:
/// integers and decimals of the same size and sign, any two of CHAR and VARCHAR, any two
/// of BINARY and VARBINARY, and otherwise the same type (InnoDB's rule, error 3780).
fn compatible(child: &ColumnType, parent: &ColumnType) -> bool {
    use ColumnType as T;
    match (child, parent) {
        (
            T::Integer {
                width: a,
                unsigned: x,
            },
            T::Integer {
                width: b,
                unsigned: y,
            },
        ) => {
            // TINYINT(1) is a TINYINT that keeps its display width.
            let size = |w: &IntWidth| match w {
                IntWidth::Bool => IntWidth::Tiny,
                other => *other,
            };
            size(a) == size(b) && x == y
        }
        (T::Char { .. } | T::VarChar { .. }, T::Char { .. } | T::VarChar { .. }) => true,
        (T::Binary { .. } | T::VarBinary { .. }, T::Binary { .. } | T::VarBinary { .. }) => true,
        (a, b) => a == b,
    }
}

/// A constraint with both its tables' definitions and column positions, ready to check.
struct Bound {
    fk: ForeignKey,
    child: TableDef,
    parent: TableDef,
    /// The child's columns.
    cols: Vec<usize>,
    /// The parent's columns.
    pcols: Vec<usize>,
}

/// The values a row holds in `cols`, or `None` when one is NULL: such a row references
/// nothing (MATCH SIMPLE, InnoDB's only kind).
fn values_of(row: &[Value], cols: &[usize]) -> Option<Vec<Value>> {
    let v: Vec<Value> = cols
        .iter()
        .map(|&c| row.get(c).cloned().unwrap_or(Value::Null))
        .collect();
    (!v.iter().any(Value::is_null)).then_some(v)
}

/// Whether `cols` are the leading columns of `def`'s primary key, in key order: rows are
/// then found by a key-prefix read rather than a scan.
fn leads_primary_key(def: &TableDef, cols: &[usize]) -> bool {
    !cols.is_empty() && def.primary_key.starts_with(cols)
}

impl SqlSession {
    /// The constraints `clauses` give table `def` (being created, or as an ALTER leaves
    /// it), checked as MySQL 8 checks them, named (`<table>_ibfk_<n>` after the highest
    /// of `existing`, the table's constraints so far), with the index MySQL adds on the
    /// child's columns when none leads with them added to `def`. `dropped` are the names of
    /// the table's constraints the same ALTER drops, which a new one may take again.
    pub(crate) fn new_foreign_keys(
        &self,
        def: &mut TableDef,
        clauses: &[ForeignKeyConstraint],
        existing: &[ForeignKey],
        dropped: &[String],
    ) -> Result<Vec<ForeignKey>> {
        if clauses.is_empty() {
            return Ok(Vec::new());
        }
        let mut out: Vec<ForeignKey> = Vec::new();
        let all = self.foreign_keys()?;
        for clause in clauses {
            if def.ring.is_some() {
                return Err(Error::ring_foreign_key());
            }
            let name = match &clause.name {
                Some(n) => n.value.clone(),
                None => generated_name(
                    &def.name,
                    existing.iter().chain(&out).map(|f| f.name.as_str()),
                ),
            };
            let fk = ForeignKey::from_clause(clause, &def.database, &def.name, name)?;
            let gone = |f: &ForeignKey| {
                f.is_on(&def.database, &def.name)
                    && dropped.iter().any(|d| d.eq_ignore_ascii_case(&f.name))
            };
            let taken = all.iter().filter(|f| !gone(f)).chain(&out).any(|f| {
                f.db.eq_ignore_ascii_case(&fk.db) && f.name.eq_ignore_ascii_case(&fk.name)
            });
            if taken {
                return Err(Error::new(
                    code::ER_FK_DUP_NAME,
                    format!("Duplicate foreign key constraint name '{}'", fk.name),
                ));
            }
            let cols = fk
                .columns
                .iter()
                .map(|c| {
                    def.column_index(c).ok_or_else(|| {
                        Error::new(
                            code::ER_KEY_COLUMN_DOES_NOT_EXITS,
                            format!("Key column '{c}' doesn't exist in table"),
                        )
                    })
                })
                .collect::<Result<Vec<usize>>>()?;
            if fk.columns.len() != fk.parent_columns.len() {
                // MySQL names the constraint as written, before it would generate a name.
                let named = clause
                    .name
                    .as_ref()
                    .map_or("foreign key without name", |n| n.value.as_str());
                return Err(Error::new(
                    code::ER_WRONG_FK_DEF,
                    format!(
                        "Incorrect foreign key definition for '{named}': Key reference and table reference don't match"
                    ),
                ));
            }
            for (rule, c) in [fk.on_delete, fk.on_update]
                .iter()
                .flat_map(|r| cols.iter().map(move |c| (*r, *c)))
            {
                if rule == Rule::SetNull && !def.columns[c].nullable {
                    return Err(Error::new(
                        code::ER_FK_COLUMN_NOT_NULL,
                        format!(
                            "Column '{}' cannot be NOT NULL: needed in a foreign key constraint '{}' SET NULL",
                            def.columns[c].name, fk.name
                        ),
                    ));
                }
                if rule == Rule::SetDefault {
                    // InnoDB has no SET DEFAULT.
                    return Err(Error::new(
                        code::ER_CANNOT_ADD_FOREIGN,
                        "Cannot add foreign key constraint",
                    ));
                }
            }
            let self_referencing = fk.references(&def.database, &def.name);
            let parent = if self_referencing {
                Some(def.clone())
            } else {
                self.engine().table_def(&fk.parent_db, &fk.parent_table)
            };
            match parent {
                Some(parent) => check_parent(&fk, &parent, def, &cols)?,
                // With the checks off a constraint may name a table still to come, as a
                // dump creates them (and as the verifier copies a node's tables).
                None if !self.foreign_key_checks => {}
                None => {
                    return Err(Error::new(
                        code::ER_FK_CANNOT_OPEN_PARENT,
                        format!("Failed to open the referenced table '{}'", fk.parent_table),
                    ))
                }
            }
            if !has_index_on(def, &cols) {
                // MySQL's index on the child's columns: named after the constraint when it
                // was named, else after the first column.
                let base = clause
                    .name
                    .as_ref()
                    .or(clause.index_name.as_ref())
                    .map(|n| n.value.clone())
                    .unwrap_or_else(|| def.columns[cols[0]].name.clone());
                let mut index_name = base.clone();
                let mut n = 2;
                while def
                    .indexes
                    .iter()
                    .any(|i| i.name.eq_ignore_ascii_case(&index_name))
                {
                    index_name = format!("{base}_{n}");
                    n += 1;
                }
                def.indexes.push(IndexDef {
                    name: index_name,
                    kind: IndexKind::Secondary,
                    columns: cols,
                });
            }
            out.push(fk);
        }
        Ok(out)
    }

    /// Every value the parent's rows hold in the columns `b` references (rows with a NULL
    /// there left out): one scan of the parent, for checks that find no index to look in.
    fn referenced_values(&self, b: &Bound) -> Result<HashSet<Key>> {
        Ok(self
            .session
            .scan(&b.parent, &[])?
            .iter()
            .filter_map(|r| values_of(r, &b.pcols).map(Key))
            .collect())
    }

    /// With the checks on, error 1452 when a row of `child` (whose rows an ALTER TABLE
    /// ADD FOREIGN KEY is about to keep) has no parent row for `fk`.
    pub(crate) fn check_existing_children(&self, fk: &ForeignKey, child: &TableDef) -> Result<()> {
        if !self.foreign_key_checks {
            return Ok(());
        }
        let bound = if fk.references(&child.database, &child.name) {
            self.bind(fk.clone(), Some(child.clone()), Some(child.clone()))
        } else {
            self.bind(fk.clone(), Some(child.clone()), None)
        };
        let Some(b) = bound else {
            return Ok(());
        };
        let present = self.referenced_values(&b)?;
        for row in self.session.scan(child, &[])? {
            if let Some(v) = values_of(&row, &b.cols) {
                if !present.contains(&Key(v)) {
                    return Err(no_referenced_row(fk, &child.name));
                }
            }
        }
        Ok(())
    }

    /// With the checks on, error 3730 when DROP TABLE of `tables` (database and name) would
    /// leave a constraint of a table it does not drop without its parent.
    pub(crate) fn check_drop_parents(&self, tables: &[(String, String)]) -> Result<()> {
        if !self.foreign_key_checks || !self.has_foreign_keys() {
            return Ok(());
        }
        let dropped = |db: &str, t: &str| {
            tables
                .iter()
                .any(|(d, n)| d.eq_ignore_ascii_case(db) && n.eq_ignore_ascii_case(t))
        };
        for fk in self.foreign_keys()? {
            if dropped(&fk.parent_db, &fk.parent_table) && !dropped(&fk.db, &fk.table) {
                return Err(Error::new(
                    code::ER_FK_CANNOT_DROP_PARENT,
                    format!(
                        "Cannot drop table '{}' referenced by a foreign key constraint '{}' on table '{}'.",
                        fk.parent_table, fk.name, fk.table
                    ),
                ));
            }
        }
        Ok(())
    }

    /// With the checks on, error 1701 when another table's constraint references `def`,
    /// which TRUNCATE would empty without looking at its child rows (as in MySQL).
    pub(crate) fn check_truncate(&self, def: &TableDef) -> Result<()> {
        if !self.foreign_key_checks || !self.has_foreign_keys() {
            return Ok(());
        }
        for fk in self.foreign_keys()? {
            if fk.references(&def.database, &def.name) && !fk.is_on(&def.database, &def.name) {
                return Err(Error::new(
                    code::ER_TRUNCATE_ILLEGAL_FK,
                    format!(
                        "Cannot truncate a table referenced in a foreign key constraint ({}, CONSTRAINT {})",
                        child_name(&fk, &fk.table),
                        ringrep_cdc::sql_text::quote_ident(&fk.name)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `fk` with its tables' definitions (given, or as the engine has them) and column
    /// positions; `None` when a table or column is missing (a constraint made with the
    /// checks off, whose parent never came): it has nothing to check.
    fn bind(
        &self,
        fk: ForeignKey,
        child: Option<TableDef>,
        parent: Option<TableDef>,
    ) -> Option<Bound> {
        let child = child.or_else(|| self.engine().table_def(&fk.db, &fk.table))?;
        let parent = parent.or_else(|| self.engine().table_def(&fk.parent_db, &fk.parent_table))?;
        let cols = fk
            .columns
            .iter()
            .map(|c| child.column_index(c))
            .collect::<Option<Vec<_>>>()?;
        let pcols = fk
            .parent_columns
            .iter()
            .map(|c| parent.column_index(c))
            .collect::<Option<Vec<_>>>()?;
        Some(Bound {
            fk,
            child,
            parent,
            cols,
            pcols,
        })
    }

    /// Checks and carries out the constraints for the rows the running statement changed
    /// from position `mark` on (`Session::staged_len` at its start), before it ends: an
    /// error here undoes the whole statement. Each round looks at the changes the round
    /// before made (the statement's own first): parent rows deleted or changed get their
    /// rule (1451, or the cascade's deletes and updates, which the next round looks at in
    /// turn), child rows written get their parent looked for (1452). Without constraints,
    /// or with the checks off, it costs one lookup.
    pub(crate) fn enforce_foreign_keys(&mut self, mark: usize) -> Result<()> {
        if !self.foreign_key_checks || !self.has_foreign_keys() {
            return Ok(());
        }
        let bound: Vec<Bound> = self
            .foreign_keys()?
            .into_iter()
            .filter_map(|fk| self.bind(fk, None, None))
            .collect();
        let tables: HashSet<u64> = bound
            .iter()
            .flat_map(|b| [b.child.id, b.parent.id])
            .collect();
        let mut from = mark;
        for round in 0.. {
            let changes: Vec<StagedChange> =
                self.session.changes_since(from, &|id| tables.contains(&id));
            from = self.session.staged_len();
            if changes.is_empty() {
                break;
            }
            if round > MAX_CASCADE_DEPTH {
                return Err(Error::new(
                    code::ER_FK_DEPTH_EXCEEDED,
                    format!(
                        "Foreign key cascade delete/update exceeds max depth of {MAX_CASCADE_DEPTH}."
                    ),
                ));
            }
            for b in &bound {
                self.parent_changes(b, &changes)?;
            }
            for b in &bound {
                self.child_changes(b, &changes)?;
            }
        }
        Ok(())
    }

    /// The rule of `b` for each parent row `changes` deleted, or whose referenced values
    /// they changed, that child rows reference.
    fn parent_changes(&mut self, b: &Bound, changes: &[StagedChange]) -> Result<()> {
        // The referenced values that went, each with what replaced them (`None`: deleted).
        let mut gone: HashMap<Key, Option<Vec<Value>>> = HashMap::new();
        for c in changes.iter().filter(|c| c.table_id == b.parent.id) {
            let Some(old) = c.before.as_deref().and_then(|r| values_of(r, &b.pcols)) else {
                continue;
            };
            let new = c.after.as_ref().map(|r| {
                b.pcols
                    .iter()
                    .map(|&p| r[p].clone())
                    .collect::<Vec<Value>>()
            });
            if new.as_ref() == Some(&old) {
                continue;
            }
            gone.insert(Key(old), new);
        }
        if gone.is_empty() {
            return Ok(());
        }
        for (row, old) in self.child_rows(b, gone.keys())? {
            let new = &gone[&old];
            let rule = match new {
                None => b.fk.on_delete,
                Some(_) => b.fk.on_update,
            };
            let key = b.child.key_of(&row);
            match (rule, new) {
                (Rule::Cascade, None) => {
                    self.session.delete_row(&b.child, &key)?;
                }
                (Rule::Cascade, Some(values)) => {
                    self.session
                        .update_row(&b.child, &key, &b.cols, values.clone(), 1)?;
                }
                (Rule::SetNull, _) => {
                    let nulls = vec![Value::Null; b.cols.len()];
                    self.session.update_row(&b.child, &key, &b.cols, nulls, 1)?;
                }
                (Rule::NoAction | Rule::Restrict | Rule::SetDefault, _) => {
                    return Err(row_is_referenced(&b.fk))
                }
            }
        }
        Ok(())
    }

    /// The child rows of `b` that reference one of `values`, each with the values it
    /// references: a key-prefix read per value when the child's columns lead its primary
    /// key, else one scan of the child table.
    fn child_rows<'k>(
        &self,
        b: &Bound,
        values: impl Iterator<Item = &'k Key>,
    ) -> Result<Vec<(Vec<Value>, Key)>> {
        let mut out = Vec::new();
        if leads_primary_key(&b.child, &b.cols) {
            for v in values {
                for row in self.session.scan(&b.child, &v.0)? {
                    out.push((row, v.clone()));
                }
            }
            return Ok(out);
        }
        let wanted: HashSet<&Key> = values.collect();
        for row in self.session.scan(&b.child, &[])? {
            if let Some(v) = values_of(&row, &b.cols).map(Key) {
                if wanted.contains(&v) {
                    out.push((row, v));
                }
            }
        }
        Ok(out)
    }

    /// Error 1452 when a child row of `b` that `changes` wrote (or whose foreign key values
    /// they changed) has no parent row.
    fn child_changes(&mut self, b: &Bound, changes: &[StagedChange]) -> Result<()> {
        let mut wanted: Vec<Key> = Vec::new();
        let mut seen: HashSet<Key> = HashSet::new();
        for c in changes.iter().filter(|c| c.table_id == b.child.id) {
            let Some(new) = c.after.as_deref().and_then(|r| values_of(r, &b.cols)) else {
                continue;
            };
            let old = c.before.as_deref().and_then(|r| values_of(r, &b.cols));
            if old.as_ref() == Some(&new) {
                continue;
            }
            let key = Key(new);
            if seen.insert(key.clone()) {
                wanted.push(key);
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        if b.parent.primary_key == b.pcols {
            // The parent's primary key: each parent row is read by its key and locked, so
            // that no other transaction deletes it before this one commits (InnoDB takes
            // a shared lock there).
            for v in wanted {
                if self.session.lock_row(&b.parent, &v.0)?.is_none() {
                    return Err(no_referenced_row(&b.fk, &b.fk.table));
                }
            }
            return Ok(());
        }
        let unique = b
            .parent
            .indexes
            .iter()
            .position(|i| i.kind == IndexKind::Unique && i.columns == b.pcols);
        if let Some(index) = unique {
            // A unique index of the parent: each parent row is found in it.
            for v in wanted {
                if self.session.find_unique(&b.parent, index, &v.0).is_none() {
                    return Err(no_referenced_row(&b.fk, &b.fk.table));
                }
            }
            return Ok(());
        }
        if leads_primary_key(&b.parent, &b.pcols) {
            for v in wanted {
                if self.session.scan(&b.parent, &v.0)?.is_empty() {
                    return Err(no_referenced_row(&b.fk, &b.fk.table));
                }
            }
            return Ok(());
        }
        let present = self.referenced_values(b)?;
        if wanted.iter().any(|v| !present.contains(v)) {
            return Err(no_referenced_row(&b.fk, &b.fk.table));
        }
        Ok(())
    }
}

/// MySQL's checks of a constraint against its parent table: the columns (3734), an index
/// leading with them (1822), the types (3780), and no ring (1215, the spec).
fn check_parent(
    fk: &ForeignKey,
    parent: &TableDef,
    child: &TableDef,
    cols: &[usize],
) -> Result<()> {
    if parent.ring.is_some() {
        return Err(Error::ring_foreign_key());
    }
    let mut pcols = Vec::new();
    for c in &fk.parent_columns {
        let Some(p) = parent.column_index(c) else {
            return Err(Error::new(
                code::ER_FK_NO_COLUMN_PARENT,
                format!(
                    "Failed to add the foreign key constraint. Missing column '{c}' for constraint '{}' in the referenced table '{}'",
                    fk.name, fk.parent_table
                ),
            ));
        };
        pcols.push(p);
    }
    if !has_index_on(parent, &pcols) {
        return Err(Error::new(
            code::ER_FK_NO_INDEX_PARENT,
            format!(
                "Failed to add the foreign key constraint. Missing index for constraint '{}' in the referenced table '{}'",
                fk.name, fk.parent_table
            ),
        ));
    }
    for (&c, &p) in cols.iter().zip(&pcols) {
        if !compatible(&child.columns[c].ty, &parent.columns[p].ty) {
            return Err(Error::new(
                code::ER_FK_INCOMPATIBLE_COLUMNS,
                format!(
                    "Referencing column '{}' and referenced column '{}' in foreign key constraint '{}' are incompatible.",
                    child.columns[c].name, parent.columns[p].name, fk.name
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_lead_with_the_columns_in_order() {
        let mut def = ringrep_engine::ddl::system_table(
            "t",
            vec![
                crate::table::computed::plain_column("a", ColumnType::Json, false),
                crate::table::computed::plain_column("b", ColumnType::Json, false),
                crate::table::computed::plain_column("c", ColumnType::Json, false),
            ],
            2,
        );
        assert!(has_index_on(&def, &[0]));
        assert!(has_index_on(&def, &[0, 1]));
        assert!(!has_index_on(&def, &[1]));
        assert!(!has_index_on(&def, &[1, 0]));
        def.indexes.push(IndexDef {
            name: "c".into(),
            kind: IndexKind::Secondary,
            columns: vec![2, 1],
        });
        assert!(has_index_on(&def, &[2]));
        assert!(!has_index_on(&def, &[1, 2]));
    }

    #[test]
    fn types_match_as_innodb_wants() {
        let int = |width, unsigned| ColumnType::Integer { width, unsigned };
        assert!(compatible(
            &int(IntWidth::Int, false),
            &int(IntWidth::Int, false)
        ));
        assert!(!compatible(
            &int(IntWidth::Int, false),
            &int(IntWidth::Big, false)
        ));
        assert!(!compatible(
            &int(IntWidth::Int, true),
            &int(IntWidth::Int, false)
        ));
        assert!(compatible(
            &ColumnType::VarChar { len: 10 },
            &ColumnType::Char { len: 3 }
        ));
        assert!(!compatible(
            &ColumnType::VarChar { len: 10 },
            &int(IntWidth::Int, false)
        ));
    }

    #[test]
    fn a_null_column_references_nothing() {
        let row = vec![Value::Int(1), Value::Null, Value::Int(3)];
        assert_eq!(
            values_of(&row, &[0, 2]),
            Some(vec![Value::Int(1), Value::Int(3)])
        );
        assert_eq!(values_of(&row, &[0, 1]), None);
    }
}
