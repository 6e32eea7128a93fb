//! Views: `CREATE [OR REPLACE] VIEW [db.]name [(columns)] AS SELECT ...`, reads through them
//! (alone, joined, in subqueries), `DROP VIEW [IF EXISTS]`, `SHOW CREATE VIEW`, and their rows
//! in `information_schema.VIEWS` and `TABLES` (and `SHOW FULL TABLES`).
//!
//! A view is a row of `mysql.ringrep_views` holding its query's text (every table qualified
//! with its database, as MySQL stores it), so it is durable and replicated like any other
//! row. Reading a view runs its query, so
//! whatever the query's tables hide, the view hides too: a ring table's meta rows, expired
//! rows. Views are read-only here (MySQL's 1288 for INSERT, UPDATE and DELETE through one),
//! and `WITH CHECK OPTION` is refused.

use binlog_format::schema::{ColumnType, IntWidth, LobSize, TableDef};
use binlog_format::Value;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::parse::lexer::{find_top_level, split_top_level_commas};
use crate::table::computed::plain_column;
use crate::{Outcome, SqlSession};
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::SYSTEM_DB;

/// The table that holds the views.
pub(crate) const VIEWS_TABLE: &str = "ringrep_views";

/// A view as `mysql.ringrep_views` holds it.
#[derive(Debug, Clone)]
pub(crate) struct StoredView {
    pub(crate) db: String,
    pub(crate) name: String,
    /// The names its columns are given (`CREATE VIEW v (a, b)`), or none.
    pub(crate) columns: Vec<String>,
    /// The SELECT text.
    pub(crate) query: String,
    /// `user@host` of the account that created it.
    pub(crate) definer: String,
}

/// How deep views may read views.
const MAX_DEPTH: usize = 16;

fn views_def() -> TableDef {
    let col = |name: &str, ty| plain_column(name, ty, false);
    let long = || ColumnType::Text {
        size: LobSize::Long,
    };
    ringrep_engine::ddl::system_table(
        VIEWS_TABLE,
        vec![
            col("db", ColumnType::VarChar { len: 64 }),
            col("name", ColumnType::VarChar { len: 64 }),
            col("columns", long()),
            col("query", long()),
            col("definer", ColumnType::VarChar { len: 288 }),
            col(
                "created_us",
                ColumnType::Integer {
                    width: IntWidth::Big,
                    unsigned: false,
                },
            ),
        ],
        2,
    )
}

fn syntax(near: &str) -> Error {
    Error::syntax(format!(
        "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '{near}'"
    ))
}

/// `db.name` or `name` (backquotes dropped) into (db, name), the current database by default.
fn qualified(name: &str, current: Option<&str>) -> Result<(String, String)> {
    let name = name.trim().replace('`', "");
    match name.split_once('.') {
        Some((d, n)) => Ok((d.to_string(), n.to_string())),
        None => Ok((
            current
                .ok_or_else(|| Error::new(code::ER_NO_DB_ERROR, "No database selected"))?
                .to_string(),
            name,
        )),
    }
}

impl SqlSession {
    /// Every view.
    pub(crate) fn views(&self) -> Result<Vec<StoredView>> {
        let Some(def) = self.engine().table_def(SYSTEM_DB, VIEWS_TABLE) else {
            return Ok(Vec::new());
        };
        let text = ringrep_engine::types::text_of;
        Ok(self
            .session
            .scan(&def, &[])?
            .into_iter()
            .map(|r| StoredView {
                db: text(&r[0]),
                name: text(&r[1]),
                columns: text(&r[2])
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                query: text(&r[3]),
                definer: text(&r[4]),
            })
            .collect())
    }

    /// The view `db.name`, if there is one.
    pub(crate) fn view(&self, db: &str, name: &str) -> Result<Option<StoredView>> {
        // Asked for every table a statement names: without a view, a lookup and no copy.
        if !self
            .engine()
            .with_state(|st| st.table(SYSTEM_DB, VIEWS_TABLE).is_some())
        {
            return Ok(None);
        }
        Ok(self
            .views()?
            .into_iter()
            .find(|v| v.db.eq_ignore_ascii_case(db) && v.name.eq_ignore_ascii_case(name)))
    }

    /// A table a statement writes: refused (1288) when it is a view.
    pub(crate) fn target_table(
        &self,
        db: Option<&str>,
        name: &str,
        verb: &str,
    ) -> Result<Arc<TableDef>> {
        // A name is a table or a view, never both (CREATE of either refuses the other's name):
        // the stored table is looked up first, so a write to one pays nothing for views.
        let missing = match self.session.shared_table_def(db, name) {
            Ok(def) => return Ok(def),
            Err(e) => e,
        };
        let current = db
            .map(str::to_string)
            .or_else(|| self.session.vars.database.clone());
        if let Some(d) = current {
            if self.view(&d, name)?.is_some() {
                return Err(Error::new(
                    code::ER_NON_UPDATABLE_TABLE,
                    format!("The target table {name} of the {verb} is not updatable"),
                ));
            }
        }
        Err(missing)
    }

    /// The rows of view `v`: its query run in its database, under its column names.
    pub(crate) fn view_rows(&self, v: &StoredView) -> Result<crate::table::computed::Computed> {
        if self.view_depth.load(Ordering::Relaxed) >= MAX_DEPTH {
            return Err(Error::new(
                code::ER_VIEW_RECURSIVE,
                format!("`{}`.`{}` contains view recursion", v.db, v.name),
            ));
        }
        let q = crate::parse::statement::parse_one(&v.query)?;
        let sqlparser::ast::Statement::Query(q) = q else {
            return Err(Error::internal(format!(
                "view {}.{} holds no query",
                v.db, v.name
            )));
        };
        self.view_depth.fetch_add(1, Ordering::Relaxed);
        // A view's query is its own: the columns of a query around the one reading the view,
        // and the common table expressions of its statement, are not in its scope.
        // Nor are the subquery results the statement keeps: the same text may mean other
        // rows inside the view (its names are the stored tables' where outside they may be
        // an expression's).
        let outer = self.take_outer();
        let ctes = self.take_ctes();
        let caches = self.take_subquery_results();
        let rows = self.run_query(&q, &v.query);
        self.restore_subquery_results(caches);
        self.restore_ctes(ctes);
        self.restore_outer(outer);
        self.view_depth.fetch_sub(1, Ordering::Relaxed);
        crate::table::computed::computed_rows(&v.db, &v.name, &v.columns, rows?)
    }

    /// `CREATE [OR REPLACE] [ALGORITHM = ...] [DEFINER = ...] [SQL SECURITY ...] VIEW name
    /// [(columns)] AS query`.
    pub(crate) fn create_view(&mut self, text: &str) -> Result<Outcome> {
        let at = find_top_level(text, "VIEW").ok_or_else(|| syntax(text))?;
        let replace = find_top_level(&text[..at], "REPLACE").is_some();
        let as_at = find_top_level(&text[at..], "AS").ok_or_else(|| syntax(text))? + at;
        let head = text[at + 4..as_at].trim();
        let (name, columns) = match head.find('(') {
            Some(open) => {
                let inner = head[open + 1..].trim_end().trim_end_matches(')');
                let cols: Vec<String> = split_top_level_commas(inner)
                    .iter()
                    .map(|c| c.trim().trim_matches('`').to_string())
                    .collect();
                (head[..open].trim(), cols)
            }
            None => (head, Vec::new()),
        };
        let query = text[as_at + 2..]
            .trim()
            .trim_end_matches(';')
            .trim()
            .to_string();
        let upper = query.to_ascii_uppercase();
        if upper.ends_with("CHECK OPTION") {
            return Err(Error::unsupported(
                "WITH CHECK OPTION (views are read-only)",
            ));
        }
        let current = self.session.vars.database.clone();
        let (db, name) = qualified(name, current.as_deref())?;
        self.require_database(crate::Privs::CREATE_VIEW, Some(&db))?;
        if !self.engine().with_state(|st| st.has_database(&db)) {
            return Err(Error::new(
                code::ER_BAD_DB_ERROR,
                format!("Unknown database '{db}'"),
            ));
        }
        if self.engine().table_def(&db, &name).is_some()
            || (!replace && self.view(&db, &name)?.is_some())
        {
            return Err(Error::new(
                code::ER_TABLE_EXISTS_ERROR,
                format!("Table '{name}' already exists"),
            ));
        }
        // Stored with every table qualified, as MySQL stores it: the view reads the same tables
        // whatever database its reader is in.
        let mut stmt = crate::parse::statement::parse_one(&query)?;
        if !matches!(stmt, sqlparser::ast::Statement::Query(_)) {
            return Err(syntax(&query));
        }
        // Readers of the view need SELECT on the view only (SQL SECURITY DEFINER): its creator
        // must be allowed to read what it reads.
        self.require_reads(&stmt, None)?;
        crate::parse::tree::qualify_stored_relations(&mut stmt, current.as_deref().unwrap_or(&db));
        let view = StoredView {
            db: db.clone(),
            name: name.clone(),
            columns,
            query: stmt.to_string(),
            definer: match &self.authority {
                Some(a) => format!("{}@{}", a.account.user, a.account.host),
                None => "root@localhost".into(),
            },
        };
        // The query must run now: a view of a missing table or column is refused here.
        self.view_rows(&view)?;
        if !self.engine().with_state(|st| st.has_database(SYSTEM_DB)) {
            self.session.create_database(SYSTEM_DB, true)?;
        }
        if self.engine().table_def(SYSTEM_DB, VIEWS_TABLE).is_none() {
            self.session.create_table(views_def(), true)?;
        }
        let def = self.session.table_def(Some(SYSTEM_DB), VIEWS_TABLE)?;
        let now = self.session.now_us();
        let row = vec![
            Value::Text(view.db.clone()),
            Value::Text(view.name.clone()),
            Value::Text(view.columns.join(",")),
            Value::Text(view.query.clone()),
            Value::Text(view.definer.clone()),
            Value::Int(now),
        ];
        let text_of = ringrep_engine::types::text_of;
        self.statement(|s| {
            s.session.delete_where(
                &def,
                &mut |r| {
                    Ok(text_of(&r[0]).eq_ignore_ascii_case(&view.db)
                        && text_of(&r[1]).eq_ignore_ascii_case(&view.name))
                },
                None,
            )?;
            let cols: Vec<usize> = (0..row.len()).collect();
            s.session
                .insert(&def, &cols, vec![row], ringrep_engine::InsertMode::Insert)
        })?;
        Ok(Outcome::Ok)
    }

    /// `DROP VIEW [IF EXISTS] v [, v ...]`: every name must be a view (1051 names the ones
    /// that are not, and nothing is dropped), unless IF EXISTS, which notes them.
    pub(crate) fn drop_view(&mut self, text: &str) -> Result<Outcome> {
        let at = find_top_level(text, "VIEW").ok_or_else(|| syntax(text))?;
        let mut rest = text[at + 4..].trim().trim_end_matches(';').trim();
        let if_exists = rest.to_ascii_uppercase().starts_with("IF EXISTS");
        if if_exists {
            rest = rest[9..].trim();
        }
        // RESTRICT and CASCADE are parsed and ignored, as in MySQL.
        let upper = rest.to_ascii_uppercase();
        for word in [" RESTRICT", " CASCADE"] {
            if upper.ends_with(word) {
                rest = &rest[..rest.len() - word.len()];
            }
        }
        let current = self.session.vars.database.clone();
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for n in split_top_level_commas(rest) {
            let (db, name) = qualified(&n, current.as_deref())?;
            self.require_database(crate::Privs::DROP, Some(&db))?;
            match self.view(&db, &name)? {
                Some(v) => found.push(v),
                None => missing.push(format!("{db}.{name}")),
            }
        }
        if !missing.is_empty() {
            let msg = format!("Unknown table '{}'", missing.join(","));
            if !if_exists {
                return Err(Error::new(code::ER_BAD_TABLE_ERROR, msg));
            }
            self.session.warn(code::ER_BAD_TABLE_ERROR.number, msg);
        }
        if found.is_empty() {
            return Ok(Outcome::Ok);
        }
        let def = self.session.table_def(Some(SYSTEM_DB), VIEWS_TABLE)?;
        let text_of = ringrep_engine::types::text_of;
        self.statement(|s| {
            s.session.delete_where(
                &def,
                &mut |r| {
                    Ok(found.iter().any(|v| {
                        text_of(&r[0]).eq_ignore_ascii_case(&v.db)
                            && text_of(&r[1]).eq_ignore_ascii_case(&v.name)
                    }))
                },
                None,
            )
        })?;
        Ok(Outcome::Ok)
    }

    /// Removes the views, procedures, triggers and declared engines of database `db` (DROP
    /// DATABASE): the rows of each such table whose first column is `db`.
    pub(crate) fn drop_stored_objects_of(&mut self, db: &str) -> Result<()> {
        for table in [
            VIEWS_TABLE,
            crate::objects::routines::ROUTINES_TABLE,
            crate::objects::triggers::TRIGGERS_TABLE,
            crate::objects::engines::ENGINES_TABLE,
            // The constraints of its tables (as children).
            crate::objects::foreign_keys::FOREIGN_KEYS_TABLE,
        ] {
            let Some(def) = self.engine().table_def(SYSTEM_DB, table) else {
                continue;
            };
            let text_of = ringrep_engine::types::text_of;
            self.statement(|s| {
                s.session.delete_where(
                    &def,
                    &mut |r| Ok(text_of(&r[0]).eq_ignore_ascii_case(db)),
                    None,
                )
            })?;
        }
        Ok(())
    }

    /// `SHOW CREATE VIEW v`, as MySQL 8 prints it.
    pub(crate) fn show_create_view(&self, name: &str) -> Result<Outcome> {
        let current = self.session.vars.database.clone();
        let (db, name) = qualified(name, current.as_deref())?;
        let v = self.view(&db, &name)?.ok_or_else(|| {
            Error::new(
                code::ER_NO_SUCH_TABLE,
                format!("Table '{db}.{name}' doesn't exist"),
            )
        })?;
        // As MySQL: SELECT on the view (any level) or "SHOW command denied", then SHOW VIEW
        // or "SHOW VIEW command denied"; its definer needs neither.
        if let Some(g) = self.restricted() {
            let have = g.on_table(&db, &name);
            if !have.contains(crate::Privs::SELECT) {
                return Err(self.table_denied("SHOW", &name));
            }
            if !have.contains(crate::Privs::SHOW_VIEW)
                && !self.may_read_view(&db, &name, &v.definer)
            {
                return Err(self.table_denied("SHOW VIEW", &name));
            }
        }
        Ok(Outcome::text(
            &[
                "View",
                "Create View",
                "character_set_client",
                "collation_connection",
            ],
            vec![vec![
                Some(v.name.clone()),
                Some(create_view_text(&v)),
                Some("utf8mb4".into()),
                Some("utf8mb4_0900_ai_ci".into()),
            ]],
        ))
    }
}

/// The CREATE VIEW statement MySQL shows for `v`.
pub(crate) fn create_view_text(v: &StoredView) -> String {
    let definer = match v.definer.split_once('@') {
        Some((u, h)) => format!("`{u}`@`{h}`"),
        None => format!("`{}`", v.definer),
    };
    let columns = if v.columns.is_empty() {
        String::new()
    } else {
        format!(
            " ({})",
            v.columns
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    format!(
        "CREATE ALGORITHM=UNDEFINED DEFINER={definer} SQL SECURITY DEFINER VIEW `{}`{columns} AS {}",
        v.name, v.query
    )
}
