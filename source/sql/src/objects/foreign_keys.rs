//! FOREIGN KEY constraints between plain tables: their definitions, named and printed as
//! MySQL 8 (InnoDB) names and prints them, and their storage. Their checks when a table is
//! created or altered, and their enforcement when rows change, are `exec::foreign_keys`'s.
//!
//! A constraint is a row of `mysql.ringrep_foreign_keys` (the child's database, table and
//! constraint name as key; its columns, the parent and its columns, the two rules), as a
//! declared engine is a row of `mysql.ringrep_table_engines`: it is durable, replicated,
//! snapshotted and provisioned like any row, and binlogs and snapshots written before
//! foreign keys existed read as they did (no table definition changed its encoding). A
//! replica applies the rows a cascade changed as the primary logged them, without checks.
//! A constraint's row is committed after its table's DDL, as a declared engine's is: a
//! crash between the two leaves the table without the constraint.

use binlog_format::schema::{ColumnType, TableDef};
use binlog_format::Value;
use sqlparser::ast::{ForeignKeyConstraint, ReferentialAction};

use crate::parse::statement::split_name;
use crate::table::computed::plain_column;
use crate::SqlSession;
use ringrep_engine::error::{Error, Result};
use ringrep_engine::types::text_of;
use ringrep_engine::SYSTEM_DB;

/// The system table that holds the constraints.
pub(crate) const FOREIGN_KEYS_TABLE: &str = "ringrep_foreign_keys";

/// What separates the names of a column list in its stored text (a character no column
/// name MySQL takes in practice holds).
const LIST_SEPARATOR: char = '\u{1f}';

/// What ON DELETE or ON UPDATE does to the child rows of a changed parent row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// No rule given, or `NO ACTION`: as RESTRICT (InnoDB checks at once either way).
    NoAction,
    /// `RESTRICT`: the parent row may not change while child rows reference it (1451).
    Restrict,
    /// `CASCADE`: the child rows are deleted, or take the parent's new values.
    Cascade,
    /// `SET NULL`: the child rows' foreign key columns become NULL.
    SetNull,
    /// `SET DEFAULT`: InnoDB refuses it at creation; kept so that it can be named.
    SetDefault,
}

impl Rule {
    /// The rule a clause gives (`None`: no clause, NO ACTION).
    pub(crate) fn of(action: Option<&ReferentialAction>) -> Rule {
        match action {
            None | Some(ReferentialAction::NoAction) => Rule::NoAction,
            Some(ReferentialAction::Restrict) => Rule::Restrict,
            Some(ReferentialAction::Cascade) => Rule::Cascade,
            Some(ReferentialAction::SetNull) => Rule::SetNull,
            Some(ReferentialAction::SetDefault) => Rule::SetDefault,
        }
    }

    /// The rule as SQL and information_schema.REFERENTIAL_CONSTRAINTS spell it.
    pub(crate) fn sql(self) -> &'static str {
        match self {
            Rule::NoAction => "NO ACTION",
            Rule::Restrict => "RESTRICT",
            Rule::Cascade => "CASCADE",
            Rule::SetNull => "SET NULL",
            Rule::SetDefault => "SET DEFAULT",
        }
    }

    fn parse(text: &str) -> Rule {
        [
            Rule::Restrict,
            Rule::Cascade,
            Rule::SetNull,
            Rule::SetDefault,
        ]
        .into_iter()
        .find(|r| r.sql() == text)
        .unwrap_or(Rule::NoAction)
    }
}

/// One FOREIGN KEY constraint: the child table's columns that reference the parent's.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ForeignKey {
    /// The child table's database (where the constraint's name is unique, as in MySQL).
    pub db: String,
    /// The child table.
    pub table: String,
    /// The constraint's name (`<table>_ibfk_<n>` when none was given).
    pub name: String,
    /// The child's columns, in the constraint's order.
    pub columns: Vec<String>,
    /// The parent table's database.
    pub parent_db: String,
    /// The parent table (the child itself for a self-referencing table).
    pub parent_table: String,
    /// The parent's columns, one for each of `columns`.
    pub parent_columns: Vec<String>,
    /// What a deleted parent row does to its child rows.
    pub on_delete: Rule,
    /// What a parent row whose referenced values change does to its child rows.
    pub on_update: Rule,
}

fn quote(name: &str) -> String {
    ringrep_cdc::sql_text::quote_ident(name)
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| quote(n))
        .collect::<Vec<_>>()
        .join(", ")
}

fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

impl ForeignKey {
    /// The constraint from a parsed `[CONSTRAINT name] FOREIGN KEY ... REFERENCES ...` of
    /// table `db`.`table`, named `name` (the caller gives the generated name when the clause
    /// has none). An unqualified parent is in the child's database.
    pub(crate) fn from_clause(
        fk: &ForeignKeyConstraint,
        db: &str,
        table: &str,
        name: String,
    ) -> Result<ForeignKey> {
        let (pdb, parent) = split_name(&fk.foreign_table)?;
        Ok(ForeignKey {
            db: db.to_string(),
            table: table.to_string(),
            name,
            columns: fk.columns.iter().map(|c| c.value.clone()).collect(),
            parent_db: pdb.unwrap_or_else(|| db.to_string()),
            parent_table: parent,
            parent_columns: fk
                .referred_columns
                .iter()
                .map(|c| c.value.clone())
                .collect(),
            on_delete: Rule::of(fk.on_delete.as_ref()),
            on_update: Rule::of(fk.on_update.as_ref()),
        })
    }

    /// The constraint as MySQL 8 prints it in SHOW CREATE TABLE and in errors 1451 and 1452:
    /// `` CONSTRAINT `c_ibfk_1` FOREIGN KEY (`pid`) REFERENCES `p` (`id`) ON DELETE CASCADE ``.
    /// The parent is qualified only when it is in another database; NO ACTION (the default)
    /// is not printed, RESTRICT is.
    pub(crate) fn clause(&self) -> String {
        let parent = if same(&self.parent_db, &self.db) {
            quote(&self.parent_table)
        } else {
            format!("{}.{}", quote(&self.parent_db), quote(&self.parent_table))
        };
        let mut s = format!(
            "CONSTRAINT {} FOREIGN KEY ({}) REFERENCES {} ({})",
            quote(&self.name),
            quoted_list(&self.columns),
            parent,
            quoted_list(&self.parent_columns)
        );
        for (what, rule) in [("DELETE", self.on_delete), ("UPDATE", self.on_update)] {
            if rule != Rule::NoAction {
                s.push_str(&format!(" ON {what} {}", rule.sql()));
            }
        }
        s
    }

    /// Whether the constraint belongs to table `db`.`table` (is one of its child's).
    pub(crate) fn is_on(&self, db: &str, table: &str) -> bool {
        same(&self.db, db) && same(&self.table, table)
    }

    /// Whether the constraint references table `db`.`table` as its parent.
    pub(crate) fn references(&self, db: &str, table: &str) -> bool {
        same(&self.parent_db, db) && same(&self.parent_table, table)
    }

    fn row(&self) -> Vec<Value> {
        let list = |names: &[String]| Value::Text(names.join(&LIST_SEPARATOR.to_string()));
        vec![
            Value::Text(self.db.clone()),
            Value::Text(self.table.clone()),
            Value::Text(self.name.clone()),
            list(&self.columns),
            Value::Text(self.parent_db.clone()),
            Value::Text(self.parent_table.clone()),
            list(&self.parent_columns),
            Value::Text(self.on_delete.sql().into()),
            Value::Text(self.on_update.sql().into()),
        ]
    }

    fn from_row(r: &[Value]) -> ForeignKey {
        let list = |v: &Value| {
            text_of(v)
                .split(LIST_SEPARATOR)
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        ForeignKey {
            db: text_of(&r[0]),
            table: text_of(&r[1]),
            name: text_of(&r[2]),
            columns: list(&r[3]),
            parent_db: text_of(&r[4]),
            parent_table: text_of(&r[5]),
            parent_columns: list(&r[6]),
            on_delete: Rule::parse(&text_of(&r[7])),
            on_update: Rule::parse(&text_of(&r[8])),
        }
    }
}

/// The name MySQL 8 gives the next unnamed constraint of `table`: `<table>_ibfk_<n>`, one
/// past the highest `n` among the names `existing` already has of that form.
pub(crate) fn generated_name<'a>(table: &str, existing: impl Iterator<Item = &'a str>) -> String {
    let prefix = format!("{}_ibfk_", table.to_lowercase());
    let highest = existing
        .filter_map(|n| {
            n.to_lowercase()
                .strip_prefix(&prefix)
                .and_then(|d| d.parse::<u64>().ok())
        })
        .max()
        .unwrap_or(0);
    format!("{table}_ibfk_{}", highest + 1)
}

fn foreign_keys_def() -> TableDef {
    let name = |n: &str| plain_column(n, ColumnType::VarChar { len: 64 }, false);
    let list = |n: &str| plain_column(n, ColumnType::VarChar { len: 4096 }, false);
    ringrep_engine::ddl::system_table(
        FOREIGN_KEYS_TABLE,
        vec![
            name("db"),
            name("tbl"),
            name("name"),
            list("columns"),
            name("ref_db"),
            name("ref_tbl"),
            list("ref_columns"),
            name("on_delete"),
            name("on_update"),
        ],
        3,
    )
}

impl SqlSession {
    /// Whether any constraint exists: one lookup, what every statement that changes rows
    /// asks first.
    pub(crate) fn has_foreign_keys(&self) -> bool {
        self.engine().with_state(|st| {
            st.table(SYSTEM_DB, FOREIGN_KEYS_TABLE)
                .is_some_and(|t| !t.is_empty())
        })
    }

    /// Every constraint, by child database, table and name.
    pub(crate) fn foreign_keys(&self) -> Result<Vec<ForeignKey>> {
        let Some(def) = self.engine().table_def(SYSTEM_DB, FOREIGN_KEYS_TABLE) else {
            return Ok(Vec::new());
        };
        Ok(self
            .session
            .scan(&def, &[])?
            .iter()
            .map(|r| ForeignKey::from_row(r))
            .collect())
    }

    /// The spec's "a ring buffer table cannot have foreign keys, neither as parent nor as
    /// child table", for a ring table about to take the name `db`.`table` (CREATE, RENAME):
    /// a constraint made with `foreign_key_checks` off may already name it as its parent, and
    /// would then be enforced against the ring. 1215, as for every other way to it.
    pub(crate) fn refuse_ring_named_as_parent(&self, db: &str, table: &str) -> Result<()> {
        if !self.has_foreign_keys() {
            return Ok(());
        }
        if self.foreign_keys()?.iter().any(|f| f.references(db, table)) {
            return Err(Error::ring_foreign_key());
        }
        Ok(())
    }

    /// The constraints of child table `db`.`table`, by name.
    pub(crate) fn foreign_keys_of(&self, db: &str, table: &str) -> Result<Vec<ForeignKey>> {
        Ok(self
            .foreign_keys()?
            .into_iter()
            .filter(|f| f.is_on(db, table))
            .collect())
    }

    /// RENAME TABLE of `db`.`table` to `new_db`.`new_table`: its constraints move with it (a
    /// generated name `<old>_ibfk_<n>` becoming `<new>_ibfk_<n>`, as MySQL 8 renames them)
    /// and those that reference it follow it.
    pub(crate) fn rename_in_foreign_keys(
        &mut self,
        db: &str,
        table: &str,
        new_db: &str,
        new_table: &str,
    ) -> Result<()> {
        if !self.has_foreign_keys() {
            return Ok(());
        }
        let involved = |f: &ForeignKey| f.is_on(db, table) || f.references(db, table);
        let renamed: Vec<ForeignKey> = self
            .foreign_keys()?
            .into_iter()
            .filter(|f| involved(f))
            .map(|mut f| {
                if f.references(db, table) {
                    f.parent_db = new_db.to_string();
                    f.parent_table = new_table.to_string();
                }
                if f.is_on(db, table) {
                    let generated = format!("{}_ibfk_", table.to_lowercase());
                    let lower = f.name.to_lowercase();
                    if let Some(n) = lower
                        .strip_prefix(&generated)
                        .filter(|n| n.parse::<u64>().is_ok())
                    {
                        f.name = format!("{new_table}_ibfk_{n}");
                    }
                    f.db = new_db.to_string();
                    f.table = new_table.to_string();
                }
                f
            })
            .collect();
        if renamed.is_empty() {
            return Ok(());
        }
        self.change_foreign_keys(&involved, renamed)
    }

    /// Removes the constraints `gone` accepts and stores `added`, as one statement, and
    /// commits it: constraints change with DDL, which commits as in MySQL.
    pub(crate) fn change_foreign_keys(
        &mut self,
        gone: &dyn Fn(&ForeignKey) -> bool,
        added: Vec<ForeignKey>,
    ) -> Result<()> {
        if added.is_empty()
            && self
                .engine()
                .table_def(SYSTEM_DB, FOREIGN_KEYS_TABLE)
                .is_none()
        {
            return Ok(());
        }
        if !self.engine().with_state(|st| st.has_database(SYSTEM_DB)) {
            self.session.create_database(SYSTEM_DB, true)?;
        }
        if self
            .engine()
            .table_def(SYSTEM_DB, FOREIGN_KEYS_TABLE)
            .is_none()
        {
            self.session.create_table(foreign_keys_def(), true)?;
        }
        let def = self
            .session
            .table_def(Some(SYSTEM_DB), FOREIGN_KEYS_TABLE)?;
        let rows: Vec<Vec<Value>> = added.iter().map(ForeignKey::row).collect();
        // An added constraint replaces a stored one of its key (the verifier's copy of a
        // node may have copied the rows before it creates the tables).
        let replaced = |f: &ForeignKey| {
            added
                .iter()
                .any(|a| a.is_on(&f.db, &f.table) && a.name.eq_ignore_ascii_case(&f.name))
        };
        self.statement(|s| {
            s.session.delete_where(
                &def,
                &mut |r| {
                    let f = ForeignKey::from_row(r);
                    Ok(gone(&f) || replaced(&f))
                },
                None,
            )?;
            if !rows.is_empty() {
                let cols: Vec<usize> = (0..def.columns.len()).collect();
                s.session
                    .insert(&def, &cols, rows, ringrep_engine::InsertMode::Insert)?;
            }
            Ok(())
        })?;
        if self.session.in_transaction() {
            self.session.commit()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fk() -> ForeignKey {
        ForeignKey {
            db: "test".into(),
            table: "c".into(),
            name: "c_ibfk_1".into(),
            columns: vec!["a".into(), "b".into()],
            parent_db: "test".into(),
            parent_table: "p".into(),
            parent_columns: vec!["x".into(), "y".into()],
            on_delete: Rule::NoAction,
            on_update: Rule::NoAction,
        }
    }

    #[test]
    fn clauses_print_as_mysql_8_prints_them() {
        let mut f = fk();
        assert_eq!(
            f.clause(),
            "CONSTRAINT `c_ibfk_1` FOREIGN KEY (`a`, `b`) REFERENCES `p` (`x`, `y`)"
        );
        f.on_delete = Rule::Cascade;
        f.on_update = Rule::SetNull;
        f.parent_db = "other".into();
        assert_eq!(
            f.clause(),
            "CONSTRAINT `c_ibfk_1` FOREIGN KEY (`a`, `b`) REFERENCES `other`.`p` (`x`, `y`) ON DELETE CASCADE ON UPDATE SET NULL"
        );
        f.on_delete = Rule::Restrict;
        f.on_update = Rule::NoAction;
        assert!(f.clause().ends_with("(`x`, `y`) ON DELETE RESTRICT"));
    }

    #[test]
    fn rows_keep_every_part() {
        let mut f = fk();
        f.on_update = Rule::Cascade;
        f.on_delete = Rule::SetNull;
        assert_eq!(ForeignKey::from_row(&f.row()), f);
    }

    #[test]
    fn generated_names_follow_the_highest_number() {
        assert_eq!(generated_name("c", [].into_iter()), "c_ibfk_1");
        assert_eq!(
            generated_name("c", ["c_ibfk_1", "x", "C_IBFK_7", "c_ibfk_z"].into_iter()),
            "c_ibfk_8"
        );
    }
}
