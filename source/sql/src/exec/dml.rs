//! INSERT, REPLACE, UPDATE, DELETE and LOAD DATA, with the statement rules of ring tables.

use std::cmp::Ordering;
use std::sync::Arc;

use binlog_format::schema::TableDef;
use binlog_format::Value;
use sqlparser::ast::{
    AssignmentTarget, BinaryOperator, Delete, Expr, FromTable, InTarget, Insert, SetExpr,
    TableFactor, TableObject, Update,
};

use crate::exec::fire::{Fired, Firing};
use crate::exec::select::{order_pairs, sort_keyed};
use crate::expr::predicate::{conjuncts, constant_expression, equalities, row_matches};
use crate::expr::{compare, eval, to_f64, Scope};
use crate::objects::triggers::{Timing, TrgEvent};
use crate::parse::lexer::{find_top_level, split_top_level_commas, take_string};
use crate::parse::statement::split_name;
use crate::table::columns::table_columns;
use crate::table::columns::wrong_value_count;
use crate::{Outcome, SqlSession};
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::types::{coerce, default_value};
use ringrep_engine::InsertMode;

/// The spec's text for a DELETE whose WHERE does not name whole prefixes.
const DELETE_SHAPE: &str = "DELETE on ring-buffer table must give every PK-prefix column with = or IN; use TRUNCATE TABLE to clear the table";
/// The spec's text for a DELETE whose WHERE names other columns.
const DELETE_COLUMNS: &str =
    "DELETE WHERE on ring-buffer table may only reference PK-prefix columns (excluding ring_idx)";

pub(crate) fn column_positions(def: &TableDef, names: &[String]) -> Result<Vec<usize>> {
    names
        .iter()
        .map(|n| {
            def.column_index(n)
                .ok_or_else(|| Error::bad_field(n, "field list"))
        })
        .collect()
}

/// The names in an INSERT's column list, unquoted.
pub(crate) fn column_list_names(columns: &[sqlparser::ast::ObjectName]) -> Vec<String> {
    columns
        .iter()
        .map(|c| c.to_string().trim_matches('`').to_string())
        .collect()
}

/// The positions of the columns an INSERT fills: those `names` lists, or with no list every
/// column but the hidden row id.
pub(crate) fn insert_columns(def: &TableDef, names: &[String]) -> Result<Vec<usize>> {
    if names.is_empty() {
        return Ok((0..def.columns.len())
            .filter(|&c| def.columns[c].name != ringrep_engine::HIDDEN_ROW_ID)
            .collect());
    }
    column_positions(def, names)
}

/// Whether an INSERT's column list names a column twice (error 1110, [`listed_twice`]).
pub(crate) fn lists_a_column_twice(columns: &[usize]) -> bool {
    let mut seen = columns.to_vec();
    seen.sort_unstable();
    seen.windows(2).any(|w| w[0] == w[1])
}

/// Error 1110.
pub(crate) fn listed_twice() -> Error {
    Error::new(code::ER_FIELD_SPECIFIED_TWICE, "Column specified twice")
}

/// How an INSERT with or without IGNORE treats a duplicate key.
pub(crate) fn insert_mode(ignore: bool) -> InsertMode {
    if ignore {
        InsertMode::Ignore
    } else {
        InsertMode::Insert
    }
}

pub(crate) fn is_default_keyword(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("DEFAULT"))
}

/// The columns `SET col = ...` assignments write, by position in the table.
fn assigned_columns(
    def: &TableDef,
    assignments: &[sqlparser::ast::Assignment],
) -> Result<Vec<usize>> {
    assignments
        .iter()
        .map(|a| {
            let AssignmentTarget::ColumnName(c) = &a.target else {
                return Err(Error::unsupported("tuple assignment"));
            };
            let col =
                c.0.last()
                    .map(|p| p.to_string().trim_matches('`').to_string())
                    .unwrap_or_default();
            def.column_index(&col)
                .ok_or_else(|| Error::bad_field(&col, "field list"))
        })
        .collect()
}

impl SqlSession {
    fn table_of(&self, table: &TableObject) -> Result<Arc<TableDef>> {
        match table {
            TableObject::TableName(name) => {
                let (db, t) = split_name(name)?;
                self.target_table(db.as_deref(), &t, "INSERT")
            }
            other => Err(Error::unsupported(format!("INSERT INTO {other}"))),
        }
    }

    /// `INSERT [IGNORE]`, REPLACE and INSERT ... ON DUPLICATE KEY UPDATE, from VALUES, SET or
    /// a query. Ring tables take neither REPLACE nor ON DUPLICATE KEY UPDATE.
    pub(crate) fn insert(&mut self, ins: &Insert) -> Result<Outcome> {
        let def = self.table_of(&ins.table)?;
        self.check_not_firing(&def)?;
        if def.ring.is_some() {
            if ins.replace_into {
                return Err(Error::not_allowed(
                    "REPLACE is not allowed on ring-buffer tables",
                ));
            }
            if ins.on.is_some() {
                return Err(Error::not_allowed(
                    "INSERT ON DUPLICATE KEY UPDATE is not allowed on ring-buffer tables",
                ));
            }
        }
        let odku: Option<Vec<sqlparser::ast::Assignment>> = match &ins.on {
            None => None,
            Some(sqlparser::ast::OnInsert::DuplicateKeyUpdate(a)) => {
                let mut a = a.clone();
                if let Some(aliases) = &ins.insert_alias {
                    row_alias_as_values(&mut a, aliases, &ins.columns, &def)?;
                }
                Some(a)
            }
            Some(other) => return Err(Error::unsupported(format!("INSERT ... {other}"))),
        };
        let mut names = column_list_names(&ins.columns);
        let mut rows: Vec<Vec<Value>> = Vec::new();
        if !ins.assignments.is_empty() {
            // INSERT ... SET a = 1, b = 2
            let mut row = Vec::new();
            for a in &ins.assignments {
                let AssignmentTarget::ColumnName(c) = &a.target else {
                    return Err(Error::unsupported("tuple assignment"));
                };
                names.push(c.to_string().trim_matches('`').to_string());
                row.push(eval(&a.value, &Scope::empty(), &self.ctx())?);
            }
            rows.push(row);
        }
        let mut columns = insert_columns(&def, &names)?;
        if let Some(src) = &ins.source {
            match src.body.as_ref() {
                SetExpr::Values(values) => {
                    let now = self.session.now_us();
                    let tz = self.session.vars.tz_offset;
                    for (i, r) in values.rows.iter().enumerate() {
                        let exprs: &[Expr] = r;
                        if exprs.len() != columns.len() {
                            return Err(wrong_value_count(i + 1));
                        }
                        let mut row = Vec::with_capacity(exprs.len());
                        for (e, &c) in exprs.iter().zip(&columns) {
                            if is_default_keyword(e) {
                                row.push(
                                    default_value(&def.columns[c], now, tz).unwrap_or(Value::Null),
                                );
                            } else {
                                row.push(eval(e, &Scope::empty(), &self.ctx())?);
                            }
                        }
                        rows.push(row);
                    }
                }
                _ => {
                    let text = src.to_string();
                    let result = self.run_query(src, &text)?;
                    if result.columns.len() != columns.len() {
                        return Err(wrong_value_count(1));
                    }
                    rows = result.rows;
                }
            }
        }
        // Ring slot and meta columns named in the list are refused by the engine; a column
        // listed twice is an error here.
        if lists_a_column_twice(&columns) {
            return Err(listed_twice());
        }
        self.fill_generated(&def, &mut columns, &mut rows)?;
        let n = rows.len() as u64;
        let mode = insert_mode(ins.ignore);
        let replace = ins.replace_into;
        let inserting = self.triggers_of(&def, TrgEvent::Insert)?;
        let deleting = match replace {
            true => self.triggers_of(&def, TrgEvent::Delete)?,
            false => None,
        };
        // Its UPDATE triggers would have to fire for the rows it updates: refused like its
        // INSERT triggers, rather than skipped.
        if odku.is_some()
            && (inserting.is_some() || self.triggers_of(&def, TrgEvent::Update)?.is_some())
        {
            return Err(Error::unsupported(
                "INSERT ... ON DUPLICATE KEY UPDATE on a table with triggers",
            ));
        }
        let def2 = def.clone();
        // The rows a REPLACE deleted to make room: MySQL counts them among the affected rows
        // (and as duplicates), so a REPLACE of an existing row reports 2.
        let mut replaced = 0u64;
        let replaced_in = &mut replaced;
        // What ON DUPLICATE KEY UPDATE did with the rows that clashed.
        let updating = odku.is_some();
        let mut clashes = Clashes::default();
        let clashes_in = &mut clashes;
        let inserted = self.statement(move |s| {
            if inserting.is_some() || deleting.is_some() {
                columns.dedup();
                let firing = Firing {
                    inserting: inserting.as_ref(),
                    deleting: deleting.as_ref(),
                    replace,
                };
                return s.insert_firing(&def2, &columns, rows, mode, firing);
            }
            if let Some(assignments) = &odku {
                return s.insert_or_update(&def2, &columns, rows, assignments, clashes_in);
            }
            columns.dedup();
            if replace {
                // REPLACE on a plain table, row by row (a row may replace one the statement
                // wrote before it): remove the rows it clashes with, then insert it.
                let mut done = 0;
                for r in rows {
                    let mut full = vec![Value::Null; def2.columns.len()];
                    for (&c, v) in columns.iter().zip(&r) {
                        full[c] = key_value(s, v, &def2.columns[c], 1)?;
                    }
                    let key = def2.key_of(&full);
                    let pk = def2.primary_key.clone();
                    let tz = s.session.vars.tz_offset;
                    // The key is the whole prefix: only its row is read.
                    *replaced_in += s.session.delete_where_in(
                        &def2,
                        &key,
                        &mut |row| {
                            Ok(pk
                                .iter()
                                .zip(&key)
                                .all(|(&c, k)| compare(&row[c], k, tz) == Some(Ordering::Equal)))
                        },
                        None,
                    )?;
                    // And, as MySQL's REPLACE, every row the new one clashes with on a unique
                    // index (NULLs clash with nothing).
                    for (n, index) in def2.indexes.iter().enumerate() {
                        if index.kind != binlog_format::schema::IndexKind::Unique {
                            continue;
                        }
                        let Some(values) = def2.index_value(n, &full) else {
                            continue;
                        };
                        *replaced_in += s.session.delete_where(
                            &def2,
                            &mut |row| {
                                Ok(index.columns.iter().zip(&values.0).all(|(&c, v)| {
                                    compare(&row[c], v, tz) == Some(Ordering::Equal)
                                }))
                            },
                            None,
                        )?;
                    }
                    done += s.session.insert(&def2, &columns, vec![r], mode)?;
                }
                return Ok(done);
            }
            s.session.insert(&def2, &columns, rows, mode)
        })?;
        if replaced > 0 {
            let warnings = self.session_warning_count();
            return Ok(Outcome::Affected {
                rows: inserted + replaced,
                info: (n > 1)
                    .then(|| format!("Records: {n}  Duplicates: {replaced}  Warnings: {warnings}")),
                found: None,
            });
        }
        if updating {
            // MySQL's count: 1 per row inserted, 2 per row changed, 0 per row left as it was
            // (1 for a client that set CLIENT_FOUND_ROWS); the duplicates of the info line
            // are the rows changed.
            let warnings = self.session_warning_count();
            return Ok(Outcome::Affected {
                rows: inserted,
                info: (n > 1).then(|| {
                    format!(
                        "Records: {n}  Duplicates: {}  Warnings: {warnings}",
                        clashes.changed
                    )
                }),
                found: (clashes.unchanged > 0).then_some(inserted + clashes.unchanged),
            });
        }
        Ok(self.inserted(n, inserted))
    }

    /// The outcome of an INSERT of `n` rows of which `inserted` went in.
    pub(crate) fn inserted(&mut self, n: u64, inserted: u64) -> Outcome {
        let warnings = self.session_warning_count();
        let info = (n > 1).then(|| {
            format!(
                "Records: {n}  Duplicates: {}  Warnings: {warnings}",
                n.saturating_sub(inserted)
            )
        });
        Outcome::Affected {
            rows: inserted,
            info,
            found: None,
        }
    }

    fn session_warning_count(&mut self) -> usize {
        self.session.warning_count()
    }

    /// UPDATE of one table, with WHERE, ORDER BY and LIMIT. A WHERE that names a ring table's meta
    /// row (slot 0) is refused; generated columns follow the columns they are computed from.
    pub(crate) fn update(&mut self, u: &Update) -> Result<Outcome> {
        if !u.table.joins.is_empty() || u.from.is_some() {
            return Err(Error::unsupported("multi-table UPDATE"));
        }
        let TableFactor::Table { name, alias, .. } = &u.table.relation else {
            return Err(Error::unsupported("UPDATE of this table form"));
        };
        let (db, t) = split_name(name)?;
        let def = self.target_table(db.as_deref(), &t, "UPDATE")?;
        self.check_not_firing(&def)?;
        let columns = table_columns(&def, alias.as_ref().map(|a| a.name.value.as_str()));
        let mut assigned = assigned_columns(&def, &u.assignments)?;
        if let (Some(r), Some(w)) = (&def.ring, &u.selection) {
            // Meta rows cannot be updated (the spec); a WHERE that names slot 0 asks to.
            let mut eqs = Vec::new();
            equalities(w, &mut eqs);
            let slot = def.columns[r.slot_column].name.to_lowercase();
            let names_meta = eqs.iter().any(|(c, e)| {
                *c == slot
                    && eval(e, &Scope::empty(), &self.ctx())
                        .ok()
                        .and_then(|v| to_f64(&v))
                        == Some(0.0)
            });
            if names_meta {
                return Err(Error::not_allowed(
                    "Cannot update meta row on ring-buffer table",
                ));
            }
        }
        let limit = match &u.limit {
            Some(l) => to_f64(&eval(l, &Scope::empty(), &self.ctx())?).map(|f| f as u64),
            None => None,
        };
        let selection = u.selection.clone();
        let exprs: Vec<Expr> = u.assignments.iter().map(|a| a.value.clone()).collect();
        let gens = generated_columns(&def)?;
        for (g, _) in &gens {
            if assigned.contains(g) {
                return Err(generated_value_error(&def, *g));
            }
        }
        let user_assigned = assigned.clone();
        assigned.extend(gens.iter().map(|(g, _)| *g));
        let fired = self.triggers_of(&def, TrgEvent::Update)?;
        let order = order_pairs(&u.order_by);
        if fired.is_some()
            || !order.is_empty()
            || selection
                .iter()
                .chain(&exprs)
                .any(crate::parse::tree::has_subquery)
        {
            // Row by row, evaluated with the session at hand: triggers run between rows,
            // subqueries may read the row (correlated ones), and an ORDER BY sorts the rows
            // before its LIMIT takes them.
            self.check_subquery_targets(&def, selection.iter().chain(&exprs))?;
            let plan = RowUpdate {
                def: &def,
                columns: &columns,
                selection: selection.as_ref(),
                exprs: &exprs,
                user_assigned: &user_assigned,
                gens: &gens,
                limit,
                order: &order,
                fired: fired.as_ref(),
            };
            let outcome = self.statement(|s| s.update_rows(&plan))?;
            let warnings = self.session_warning_count();
            return Ok(Outcome::Affected {
                rows: outcome.changed,
                info: Some(format!(
                    "Rows matched: {}  Changed: {}  Warnings: {warnings}",
                    outcome.matched, outcome.changed
                )),
                found: Some(outcome.matched),
            });
        }
        let outcome = self.statement(|s| {
            s.prefetch_subqueries(&def, selection.iter().chain(&exprs))?;
            // `WHERE user_id = ?` reads that prefix's rows, not the table.
            let prefix = s.key_prefix(&def, selection.as_ref())?;
            let owned = s.owned_ctx();
            let ctx = owned.ctx();
            let mut filter =
                |row: &Vec<Value>| row_matches(selection.as_ref(), &columns, row, &ctx);
            let mut compute = |row: &Vec<Value>| -> Result<Vec<Value>> {
                let mut vals: Vec<Value> = exprs
                    .iter()
                    .map(|e| {
                        eval(
                            e,
                            &Scope {
                                columns: &columns,
                                row,
                                aggregates: None,
                                place: "field list",
                            },
                            &ctx,
                        )
                    })
                    .collect::<Result<_>>()?;
                if !gens.is_empty() {
                    // Generated columns follow the row they are computed from.
                    let mut new = row.clone();
                    for (&c, v) in user_assigned.iter().zip(&vals) {
                        new[c] = v.clone();
                    }
                    for (g, e) in &gens {
                        let v = eval(
                            e,
                            &Scope {
                                columns: &columns,
                                row: &new,
                                aggregates: None,
                                place: "field list",
                            },
                            &ctx,
                        )?;
                        new[*g] = v.clone();
                        vals.push(v);
                    }
                }
                Ok(vals)
            };
            s.session
                .update_in(&def, &prefix, &assigned, &mut filter, &mut compute, limit)
        })?;
        let warnings = self.session_warning_count();
        Ok(Outcome::Affected {
            rows: outcome.changed,
            info: Some(format!(
                "Rows matched: {}  Changed: {}  Warnings: {warnings}",
                outcome.matched, outcome.changed
            )),
            found: Some(outcome.matched),
        })
    }

    /// DELETE from one table. On a ring table the WHERE must name whole prefixes: every
    /// prefix column with `=` or IN (one IN list at most), no other column, no LIMIT or
    /// ORDER BY. A plain table takes any WHERE, ORDER BY and LIMIT.
    pub(crate) fn delete(&mut self, d: &Delete) -> Result<Outcome> {
        let tables = match &d.from {
            FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
        };
        let multi = !d.tables.is_empty()
            || d.using.is_some()
            || tables.len() != 1
            || tables.iter().any(|t| !t.joins.is_empty());
        let Some(first) = tables.first() else {
            return Err(Error::syntax("DELETE needs a table"));
        };
        let TableFactor::Table { name, alias, .. } = &first.relation else {
            return Err(Error::unsupported("DELETE of this table form"));
        };
        let (db, t) = split_name(name)?;
        let def = self.target_table(db.as_deref(), &t, "DELETE")?;
        self.check_not_firing(&def)?;
        if def.ring.is_some() {
            // The spec: a ring with DELETE triggers (BEFORE or AFTER) takes no DELETE; none
            // fires and no row goes.
            if self.triggers_of(&def, TrgEvent::Delete)?.is_some() {
                return Err(Error::not_allowed(&def.name));
            }
            if multi || d.limit.is_some() || !d.order_by.is_empty() {
                return Err(Error::not_allowed("DELETE with LIMIT, ORDER BY or several tables is not allowed on ring-buffer tables"));
            }
            let prefixes = self.ring_delete_prefixes(&def, d.selection.as_ref())?;
            let deleted = self.statement(|s| s.session.delete_prefixes(&def, prefixes))?;
            return Ok(Outcome::Affected {
                rows: deleted,
                info: None,
                found: None,
            });
        }
        if multi {
            return Err(Error::unsupported("multi-table DELETE"));
        }
        let columns = table_columns(&def, alias.as_ref().map(|a| a.name.value.as_str()));
        let limit = match &d.limit {
            Some(l) => to_f64(&eval(l, &Scope::empty(), &self.ctx())?).map(|f| f as u64),
            None => None,
        };
        let selection = d.selection.clone();
        let fired = self.triggers_of(&def, TrgEvent::Delete)?;
        let order = order_pairs(&d.order_by);
        if fired.is_some()
            || !order.is_empty()
            || selection
                .as_ref()
                .is_some_and(crate::parse::tree::has_subquery)
        {
            self.check_subquery_targets(&def, selection.iter())?;
            let deleted = self.statement(|s| {
                s.delete_rows(
                    &def,
                    &columns,
                    selection.as_ref(),
                    limit,
                    &order,
                    fired.as_ref(),
                )
            })?;
            return Ok(Outcome::Affected {
                rows: deleted,
                info: None,
                found: None,
            });
        }
        let deleted = self.statement(|s| {
            s.prefetch_subqueries(&def, selection.iter())?;
            let prefix = s.key_prefix(&def, selection.as_ref())?;
            let owned = s.owned_ctx();
            let ctx = owned.ctx();
            let mut filter =
                |row: &Vec<Value>| row_matches(selection.as_ref(), &columns, row, &ctx);
            s.session.delete_where_in(&def, &prefix, &mut filter, limit)
        })?;
        Ok(Outcome::Affected {
            rows: deleted,
            info: None,
            found: None,
        })
    }

    /// The prefixes a ring DELETE names, or the spec's error for any other shape.
    fn ring_delete_prefixes(
        &self,
        def: &TableDef,
        selection: Option<&Expr>,
    ) -> Result<Vec<Vec<Value>>> {
        let shape = || Error::not_allowed(DELETE_SHAPE);
        let Some(w) = selection else {
            return Err(shape());
        };
        let prefix_cols = def.prefix_columns().to_vec();
        let mut terms = Vec::new();
        conjuncts(w, &mut terms);
        // Any column outside the prefix anywhere in the WHERE is the second error.
        let mut referenced = Vec::new();
        collect_columns(w, &mut referenced);
        for c in &referenced {
            match def.column_index(c) {
                Some(i) if prefix_cols.contains(&i) => {}
                Some(_) => return Err(Error::not_allowed(DELETE_COLUMNS)),
                None => return Err(Error::bad_field(c, "where clause")),
            }
        }
        let mut values: Vec<Option<Vec<Value>>> = vec![None; prefix_cols.len()];
        let mut in_lists = 0;
        let ctx = self.ctx();
        // `=` or `IN` gives a prefix column constants: literals, user variables, or
        // expressions of them that MySQL folds into one before the engine sees the WHERE
        // (`client_id = ABS(3)`). A column elsewhere in the WHERE failed above.
        let fixed = |e: &Expr, col: usize| -> Result<Value> {
            if !constant_expression(e) {
                return Err(shape());
            }
            let v = eval(e, &Scope::empty(), &ctx)?;
            let column = &def.columns[col];
            // The value must convert exactly: a number for a numeric column, a string for a
            // string column.
            let kind_ok = match &v {
                Value::Int(_)
                | Value::UInt(_)
                | Value::Decimal(_)
                | Value::Double(_)
                | Value::Float(_) => !column.ty.is_string() && !column.ty.is_binary(),
                Value::Text(_) | Value::Bytes(_) => !column.ty.is_integer(),
                Value::Null => false,
                _ => true,
            };
            let c = coerce(v.clone(), column, 1, ctx.tz).map_err(|_| shape())?;
            if !kind_ok || compare(&c, &v, ctx.tz) != Some(Ordering::Equal) {
                return Err(shape());
            }
            Ok(c)
        };
        for term in terms {
            let (col, list): (String, Vec<&Expr>) = match term {
                Expr::BinaryOp {
                    left,
                    op: BinaryOperator::Eq,
                    right,
                } => match (left.as_ref(), right.as_ref()) {
                    (Expr::Identifier(i), v) | (v, Expr::Identifier(i))
                        if !i.value.starts_with('@') =>
                    {
                        (i.value.clone(), vec![v])
                    }
                    (Expr::CompoundIdentifier(p), v) | (v, Expr::CompoundIdentifier(p)) => (
                        p.last().map(|i| i.value.clone()).unwrap_or_default(),
                        vec![v],
                    ),
                    _ => return Err(shape()),
                },
                Expr::In {
                    expr,
                    target: InTarget::List(items),
                    negated: false,
                    ..
                } => {
                    in_lists += 1;
                    let col = match expr.as_ref() {
                        Expr::Identifier(i) => i.value.clone(),
                        Expr::CompoundIdentifier(p) => {
                            p.last().map(|i| i.value.clone()).unwrap_or_default()
                        }
                        _ => return Err(shape()),
                    };
                    (col, items.iter().collect())
                }
                _ => return Err(shape()),
            };
            let idx = def
                .column_index(&col)
                .ok_or_else(|| Error::bad_field(&col, "where clause"))?;
            let pos = prefix_cols
                .iter()
                .position(|&c| c == idx)
                .ok_or_else(|| Error::not_allowed(DELETE_COLUMNS))?;
            if values[pos].is_some() {
                return Err(shape());
            }
            values[pos] = Some(
                list.into_iter()
                    .map(|e| fixed(e, idx))
                    .collect::<Result<_>>()?,
            );
        }
        if in_lists > 1 || values.iter().any(Option::is_none) {
            return Err(shape());
        }
        let mut prefixes: Vec<Vec<Value>> = vec![vec![]];
        for vs in values.into_iter().flatten() {
            prefixes = prefixes
                .into_iter()
                .flat_map(|p| {
                    vs.iter().map(move |v| {
                        let mut q = p.clone();
                        q.push(v.clone());
                        q
                    })
                })
                .collect();
        }
        Ok(prefixes)
    }

    /// `LOAD DATA [LOCAL] INFILE 'file' [REPLACE|IGNORE] INTO TABLE t [FIELDS ...] [LINES ...]
    /// [IGNORE n LINES] [(col, ...)]`.
    pub(crate) fn load_data(&mut self, text: &str) -> Result<Outcome> {
        let bad = || Error::syntax("You have an error in your SQL syntax near LOAD DATA");
        let upper = text.to_ascii_uppercase();
        let at = upper.find("INFILE").ok_or_else(bad)?;
        let (file, rest) = take_string(&text[at + 6..]).ok_or_else(bad)?;
        let rest_upper = rest.to_ascii_uppercase();
        let replace = rest_upper.trim_start().starts_with("REPLACE");
        let ignore = rest_upper.trim_start().starts_with("IGNORE");
        let into = rest_upper.find("INTO TABLE").ok_or_else(bad)?;
        let after = rest[into + 10..].trim_start();
        let name_end = after
            .find(|c: char| c.is_whitespace() || c == '(')
            .unwrap_or(after.len());
        let table = after[..name_end].replace('`', "");
        let (db, t) = match table.split_once('.') {
            Some((d, t)) => (Some(d.to_string()), t.to_string()),
            None => (None, table.clone()),
        };
        let def = self.session.table_def(db.as_deref(), &t)?;
        self.check_not_firing(&def)?;
        if replace && def.ring.is_some() {
            return Err(Error::not_allowed(
                "LOAD DATA ... REPLACE is not allowed on ring-buffer tables",
            ));
        }
        let mut tail = after[name_end..].to_string();
        let mut field_sep = "\t".to_string();
        let mut line_sep = "\n".to_string();
        let mut enclosed: Option<char> = None;
        let mut skip_lines = 0usize;
        let option = |tail: &str, key: &str| -> Option<String> {
            let i = find_top_level(tail, key)?;
            take_string(&tail[i + key.len()..]).map(|(s, _)| s)
        };
        if let Some(s) = option(&tail, "TERMINATED BY") {
            let fields_at =
                find_top_level(&tail, "FIELDS").or_else(|| find_top_level(&tail, "COLUMNS"));
            let lines_at = find_top_level(&tail, "LINES");
            let term_at = find_top_level(&tail, "TERMINATED BY").unwrap_or(0);
            if fields_at.is_some_and(|f| f < term_at) && lines_at.is_none_or(|l| l > term_at) {
                field_sep = s;
            }
        }
        if let Some(l) = find_top_level(&tail, "LINES") {
            if let Some(s) = option(&tail[l..], "TERMINATED BY") {
                line_sep = s;
            }
        }
        if let Some(s) = option(&tail, "ENCLOSED BY") {
            enclosed = s.chars().next();
        }
        if let Some(i) = find_top_level(&tail, "IGNORE") {
            let n: String = tail[i + 6..]
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            skip_lines = n.parse().unwrap_or(0);
        }
        let names: Vec<String> = match tail.rfind('(') {
            Some(open) if tail[open..].contains(')') => {
                let close = open + tail[open..].find(')').unwrap_or(0);
                let list = tail[open + 1..close].to_string();
                tail.truncate(open);
                split_top_level_commas(&list)
                    .into_iter()
                    .map(|c| c.replace('`', ""))
                    .collect()
            }
            _ => def
                .columns
                .iter()
                .filter(|c| c.name != ringrep_engine::HIDDEN_ROW_ID)
                .map(|c| c.name.clone())
                .collect(),
        };
        let columns = column_positions(&def, &names)?;
        let path = match &self.load_dir {
            Some(d) if !std::path::Path::new(&file).is_absolute() => d.join(&file),
            _ => std::path::PathBuf::from(&file),
        };
        let content = std::fs::read_to_string(&path).map_err(|e| {
            Error::new(
                code::EE_FILENOTFOUND,
                format!("File '{}' not found (OS errno 2 - {e})", path.display()),
            )
        })?;
        let mut rows = Vec::new();
        for line in content.split(line_sep.as_str()).skip(skip_lines) {
            if line.is_empty() {
                continue;
            }
            let row: Vec<Value> = line
                .split(field_sep.as_str())
                .map(|f| {
                    let f = match enclosed {
                        Some(q) => f.trim_matches(q),
                        None => f,
                    };
                    if f == "\\N" {
                        Value::Null
                    } else {
                        Value::Text(f.to_string())
                    }
                })
                .collect();
            rows.push(row);
        }
        let mut columns = columns;
        self.fill_generated(&def, &mut columns, &mut rows)?;
        let n = rows.len() as u64;
        let mode = insert_mode(ignore);
        let inserting = self.triggers_of(&def, TrgEvent::Insert)?;
        let inserted = self.statement(|s| match &inserting {
            Some(f) => {
                let firing = Firing {
                    inserting: Some(f),
                    deleting: None,
                    replace: false,
                };
                s.insert_firing(&def, &columns, rows, mode, firing)
            }
            None => s.session.insert(&def, &columns, rows, mode),
        })?;
        Ok(Outcome::Affected {
            rows: inserted,
            info: Some(format!(
                "Records: {n}  Deleted: 0  Skipped: {}  Warnings: 0",
                n.saturating_sub(inserted)
            )),
            found: None,
        })
    }
}

impl SqlSession {
    /// INSERT ... ON DUPLICATE KEY UPDATE on a plain table: each row is inserted, or, when its
    /// primary key or a unique value is taken, the row holding it gets the assignments
    /// (`VALUES(col)` is the value the INSERT tried). Affected rows count as MySQL counts them:
    /// 1 per insert, 2 per row changed; `clashes` counts the rows that clashed.
    fn insert_or_update(
        &mut self,
        def: &TableDef,
        columns: &[usize],
        rows: Vec<Vec<Value>>,
        assignments: &[sqlparser::ast::Assignment],
        clashes: &mut Clashes,
    ) -> Result<u64> {
        let assigned = assigned_columns(def, assignments)?;
        let exprs: Vec<Expr> = assignments.iter().map(|a| a.value.clone()).collect();
        self.prefetch_subqueries(def, exprs.iter())?;
        let scope_columns = table_columns(def, None);
        let tz = self.session.vars.tz_offset;
        let mut affected = 0;
        for (n, row) in rows.into_iter().enumerate() {
            match self
                .session
                .insert(def, columns, vec![row.clone()], InsertMode::Insert)
            {
                Ok(k) => affected += k,
                Err(e) if e.code == code::ER_DUP_ENTRY => {
                    let mut full = vec![Value::Null; def.columns.len()];
                    let mut inserted = std::collections::HashMap::new();
                    for (&c, v) in columns.iter().zip(&row) {
                        let cv = key_value(self, v, &def.columns[c], n + 1)?;
                        inserted.insert(def.columns[c].name.to_lowercase(), cv.clone());
                        full[c] = cv;
                    }
                    let same = |cols: &[usize], row: &[Value]| {
                        cols.iter().all(|&c| {
                            !full[c].is_null()
                                && compare(&row[c], &full[c], tz) == Some(Ordering::Equal)
                        })
                    };
                    let uniques: Vec<Vec<usize>> = def
                        .indexes
                        .iter()
                        .filter(|i| i.kind == binlog_format::schema::IndexKind::Unique)
                        .map(|i| i.columns.clone())
                        .collect();
                    let owned = self.owned_ctx();
                    let ctx = crate::expr::Ctx {
                        inserted: Some(&inserted),
                        ..owned.ctx()
                    };
                    let out =
                        self.session.update(
                            def,
                            &assigned,
                            &mut |r| {
                                Ok(same(&def.primary_key, r) || uniques.iter().any(|u| same(u, r)))
                            },
                            &mut |r| {
                                exprs
                                    .iter()
                                    .map(|e| {
                                        eval(
                                            e,
                                            &Scope {
                                                columns: &scope_columns,
                                                row: r,
                                                aggregates: None,
                                                place: "field list",
                                            },
                                            &ctx,
                                        )
                                    })
                                    .collect()
                            },
                            Some(1),
                        )?;
                    affected += 2 * out.changed;
                    clashes.changed += out.changed;
                    clashes.unchanged += out.matched - out.changed;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(affected)
    }
}

/// MySQL 8's row alias of INSERT ... VALUES (...) AS new [(a, b, ...)] ON DUPLICATE KEY
/// UPDATE: `new.col`, or a column alias `a`, is the value the INSERT tried for that column,
/// as `VALUES(col)` is; rewritten so. With column aliases, the n-th names the n-th column
/// of the INSERT's list (or of the table, without one).
fn row_alias_as_values(
    assignments: &mut [sqlparser::ast::Assignment],
    aliases: &sqlparser::ast::InsertAliases,
    listed: &[sqlparser::ast::ObjectName],
    def: &TableDef,
) -> Result<()> {
    let row = aliases
        .row_alias
        .to_string()
        .trim_matches('`')
        .to_lowercase();
    let columns: Vec<String> = if listed.is_empty() {
        def.columns
            .iter()
            .filter(|c| c.name != binlog_format::schema::HIDDEN_ROW_ID)
            .map(|c| c.name.clone())
            .collect()
    } else {
        listed
            .iter()
            .map(|n| n.to_string().trim_matches('`').to_string())
            .collect()
    };
    // The parser gives `Some(empty)` for an alias without a column list.
    let col_aliases = aliases.col_aliases.as_ref().filter(|a| !a.is_empty());
    let named: Vec<String> = match col_aliases {
        Some(names) if names.len() != columns.len() => {
            return Err(Error::new(
                code::ER_WRONG_VALUE_COUNT_ON_ROW,
                "Column count doesn't match value count at row 1",
            ))
        }
        Some(names) => names.iter().map(|n| n.value.to_lowercase()).collect(),
        None => columns.iter().map(|c| c.to_lowercase()).collect(),
    };
    // The table column a name of the row alias stands for.
    let column_of = |name: &str| -> Option<&String> {
        let name = name.to_lowercase();
        named.iter().position(|n| *n == name).map(|i| &columns[i])
    };
    let values_of = |column: &str| -> Result<Expr> {
        sqlparser::parser::Parser::new(&sqlparser::dialect::MySqlDialect {})
            .try_with_sql(&format!("VALUES(`{}`)", column.replace('`', "``")))
            .and_then(|mut p| p.parse_expr())
            .map_err(|e| Error::internal(format!("VALUES of {column:?}: {e}")))
    };
    let mut failed = None;
    for a in assignments.iter_mut() {
        let _ = sqlparser::ast::visit_expressions_mut(&mut a.value, |e| {
            let target = match e {
                Expr::CompoundIdentifier(parts)
                    if parts.len() == 2 && parts[0].value.to_lowercase() == row =>
                {
                    match column_of(&parts[1].value) {
                        Some(c) => Some(c.clone()),
                        None => {
                            failed = Some(Error::new(
                                code::ER_BAD_FIELD_ERROR,
                                format!("Unknown column '{}' in 'field list'", e),
                            ));
                            return std::ops::ControlFlow::Break(());
                        }
                    }
                }
                // A column alias that is also a column of the table names either: MySQL
                // calls it ambiguous.
                Expr::Identifier(i) if col_aliases.is_some() => match column_of(&i.value) {
                    Some(_) if def.column_index(&i.value).is_some() => {
                        failed = Some(Error::new(
                            code::ER_NON_UNIQ_ERROR,
                            format!("Column '{}' in field list is ambiguous", i.value),
                        ));
                        return std::ops::ControlFlow::Break(());
                    }
                    found => found.cloned(),
                },
                _ => None,
            };
            if let Some(c) = target {
                match values_of(&c) {
                    Ok(v) => *e = v,
                    Err(err) => {
                        failed = Some(err);
                        return std::ops::ControlFlow::Break(());
                    }
                }
            }
            std::ops::ControlFlow::Continue(())
        });
    }
    failed.map_or(Ok(()), Err)
}

/// A value of a REPLACE's or ON DUPLICATE KEY UPDATE's row as its insert will store it, to
/// find the rows it clashes with: converted as the session's sql_mode converts (out of strict
/// mode a string past its column is cut, not refused); the insert itself says the warnings.
fn key_value(
    s: &SqlSession,
    v: &Value,
    col: &binlog_format::schema::ColumnDef,
    row: usize,
) -> Result<Value> {
    let lenient = !s.session.vars.strict;
    ringrep_engine::types::convert(v.clone(), col, row, s.session.vars.tz_offset, lenient)
        .map(|(v, _)| v)
}

/// The rows of an INSERT ... ON DUPLICATE KEY UPDATE that clashed with a row already there.
#[derive(Debug, Default)]
struct Clashes {
    /// The rows its assignments changed.
    changed: u64,
    /// The rows its assignments left as they were.
    unchanged: u64,
}

/// The scope of one row of a table, for values computed over it.
fn row_scope<'a>(columns: &'a [crate::table::columns::ColumnRef], row: &'a [Value]) -> Scope<'a> {
    Scope {
        columns,
        row,
        aggregates: None,
        place: "field list",
    }
}

/// An UPDATE run row by row (see `SqlSession::update_rows`).
struct RowUpdate<'a> {
    def: &'a TableDef,
    columns: &'a [crate::table::columns::ColumnRef],
    selection: Option<&'a Expr>,
    /// The values of `user_assigned`, in order.
    exprs: &'a [Expr],
    user_assigned: &'a [usize],
    gens: &'a [(usize, Expr)],
    limit: Option<u64>,
    /// ORDER BY terms: which rows `limit` takes, and the order they are changed in.
    order: &'a [(&'a Expr, bool)],
    fired: Option<&'a Fired>,
}

impl SqlSession {
    /// The rows of `def` that `selection` matches, in the order of `order` (ORDER BY terms;
    /// else the table's key order), up to `limit`: read first and evaluated with the session at
    /// hand (subqueries run for each row that needs them). A ring's meta rows are never among
    /// them.
    fn matching_rows(
        &mut self,
        def: &TableDef,
        columns: &[crate::table::columns::ColumnRef],
        selection: Option<&Expr>,
        limit: Option<u64>,
        order: &[(&Expr, bool)],
    ) -> Result<Vec<Vec<Value>>> {
        let prefix = self.key_prefix(def, selection)?;
        let saved = self.session.vars.show_meta;
        self.session.vars.show_meta = false;
        let rows = self.session.scan(def, &prefix);
        self.session.vars.show_meta = saved;
        let rows = rows?;
        let ctx = self.ctx();
        let mut out = Vec::new();
        for row in rows {
            // With an ORDER BY, which rows the LIMIT takes is known only once all are sorted.
            if order.is_empty() && limit.is_some_and(|l| out.len() as u64 >= l) {
                break;
            }
            if def.is_meta_key(&def.key_of(&row)) {
                continue;
            }
            if row_matches(selection, columns, &row, &ctx)? {
                out.push(row);
            }
        }
        if order.is_empty() {
            return Ok(out);
        }
        let mut keyed = Vec::with_capacity(out.len());
        for row in out {
            let keys = order
                .iter()
                .map(|(e, _)| eval(e, &row_scope(columns, &row), &ctx))
                .collect::<Result<Vec<_>>>()?;
            keyed.push((row, keys));
        }
        sort_keyed(&mut keyed, order, ctx.tz);
        let limit = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        Ok(keyed.into_iter().take(limit).map(|(row, _)| row).collect())
    }

    /// UPDATE row by row: the matching rows are read first; each gets its new values
    /// (evaluated over it), the BEFORE UPDATE triggers (which may change NEW), its write and
    /// the AFTER UPDATE triggers, before the next row.
    fn update_rows(&mut self, plan: &RowUpdate<'_>) -> Result<ringrep_engine::UpdateOutcome> {
        let def = plan.def;
        let tz = self.session.vars.tz_offset;
        let matched =
            self.matching_rows(def, plan.columns, plan.selection, plan.limit, plan.order)?;
        let mut out = ringrep_engine::UpdateOutcome::default();
        for (n, candidate) in matched.into_iter().enumerate() {
            let row_no = n + 1;
            // The row as it is once locked (another transaction may have changed it since it
            // was read), matched again: what it becomes is computed from that, or an update
            // committed meanwhile would be lost.
            let Some(old) = self.session.lock_row(def, &def.key_of(&candidate))? else {
                continue;
            };
            if old != candidate {
                let ctx = self.ctx();
                if !row_matches(plan.selection, plan.columns, &old, &ctx)? {
                    continue;
                }
            }
            out.matched += 1;
            let values: Vec<Value> = {
                let ctx = self.ctx();
                plan.exprs
                    .iter()
                    .map(|e| eval(e, &row_scope(plan.columns, &old), &ctx))
                    .collect::<Result<_>>()?
            };
            let mut new = old.clone();
            let mut assigned = plan.user_assigned.to_vec();
            for (&c, v) in plan.user_assigned.iter().zip(values) {
                new[c] = match plan.fired {
                    // NEW holds the column's type, as a trigger reads it (converted as the
                    // session's sql_mode converts, with its warnings).
                    Some(_) => {
                        let lenient = !self.session.vars.strict;
                        let (v, diagnostic) = ringrep_engine::types::convert(
                            v,
                            &def.columns[c],
                            row_no,
                            tz,
                            lenient,
                        )?;
                        if let Some((code, message)) = diagnostic {
                            self.session.warn(code, message);
                        }
                        v
                    }
                    None => v,
                };
            }
            if let Some(f) = plan.fired {
                let mut set = Vec::new();
                self.fire(f, Timing::Before, Some(&old), Some(&mut new), &mut set)?;
                for c in set {
                    if !assigned.contains(&c) {
                        assigned.push(c);
                    }
                }
            }
            if !plan.gens.is_empty() {
                // Generated columns follow the row they are computed from.
                let ctx = self.ctx();
                let mut computed = Vec::new();
                for (g, e) in plan.gens {
                    computed.push((*g, eval(e, &row_scope(plan.columns, &new), &ctx)?));
                }
                drop(ctx);
                for (g, v) in computed {
                    new[g] = v;
                    if !assigned.contains(&g) {
                        assigned.push(g);
                    }
                }
            }
            let key = def.key_of(&old);
            let vals: Vec<Value> = assigned.iter().map(|&c| new[c].clone()).collect();
            if self
                .session
                .update_row(def, &key, &assigned, vals, row_no)?
            {
                out.changed += 1;
            }
            if let Some(f) = plan.fired.filter(|f| !f.after.is_empty()) {
                let new_key = def.key_of(&new);
                let mut stored = self
                    .session
                    .scan(def, &new_key)?
                    .into_iter()
                    .next()
                    .unwrap_or(new);
                self.fire(
                    f,
                    Timing::After,
                    Some(&old),
                    Some(&mut stored),
                    &mut Vec::new(),
                )?;
            }
        }
        Ok(out)
    }

    /// DELETE on a plain table row by row: the matching rows are read first; each gets the
    /// BEFORE DELETE triggers, its removal and the AFTER DELETE triggers, before the next.
    fn delete_rows(
        &mut self,
        def: &TableDef,
        columns: &[crate::table::columns::ColumnRef],
        selection: Option<&Expr>,
        limit: Option<u64>,
        order: &[(&Expr, bool)],
        fired: Option<&Fired>,
    ) -> Result<u64> {
        let matched = self.matching_rows(def, columns, selection, limit, order)?;
        let mut deleted = 0;
        for old in matched {
            let mut none = Vec::new();
            self.fire_opt(fired, Timing::Before, Some(&old), None, &mut none)?;
            deleted += self.session.delete_row(def, &def.key_of(&old))?;
            self.fire_opt(fired, Timing::After, Some(&old), None, &mut none)?;
        }
        Ok(deleted)
    }
}

/// The generated columns of a table with their expressions.
fn generated_columns(def: &TableDef) -> Result<Vec<(usize, Expr)>> {
    def.columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match &c.default {
            binlog_format::schema::ColumnDefault::Generated { expr, .. } => Some((i, expr)),
            _ => None,
        })
        .map(|(i, text)| {
            let e = sqlparser::parser::Parser::new(&sqlparser::dialect::MySqlDialect {})
                .try_with_sql(text)
                .and_then(|mut p| p.parse_expr())
                .map_err(|e| {
                    Error::internal(format!("generated column expression {text:?}: {e}"))
                })?;
            Ok((i, e))
        })
        .collect()
}

fn generated_value_error(def: &TableDef, col: usize) -> Error {
    Error::new(
        code::ER_UNSUPPORTED_ACTION_ON_GENERATED_COLUMN,
        format!(
            "The value specified for generated column '{}' in table '{}' is not allowed.",
            def.columns[col].name, def.name
        ),
    )
}

impl SqlSession {
    /// Adds the values of generated columns to rows given for `columns`, computed from the
    /// row (defaults included); naming a generated column is an error, as in MySQL.
    pub(crate) fn fill_generated(
        &self,
        def: &TableDef,
        columns: &mut Vec<usize>,
        rows: &mut [Vec<Value>],
    ) -> Result<()> {
        let gens = generated_columns(def)?;
        if gens.is_empty() {
            return Ok(());
        }
        if let Some((g, _)) = gens.iter().find(|(g, _)| columns.contains(g)) {
            return Err(generated_value_error(def, *g));
        }
        let scope_columns = table_columns(def, None);
        let ctx = self.ctx();
        for row in rows.iter_mut() {
            let mut full: Vec<Value> = def
                .columns
                .iter()
                .map(|c| match c.default {
                    binlog_format::schema::ColumnDefault::Generated { .. } => Value::Null,
                    _ => default_value(c, ctx.now_us, ctx.tz).unwrap_or(Value::Null),
                })
                .collect();
            for (&c, v) in columns.iter().zip(row.iter()) {
                full[c] = v.clone();
            }
            for (g, e) in &gens {
                let v = eval(
                    e,
                    &Scope {
                        columns: &scope_columns,
                        row: &full,
                        aggregates: None,
                        place: "field list",
                    },
                    &ctx,
                )?;
                full[*g] = v.clone();
                row.push(v);
            }
        }
        columns.extend(gens.iter().map(|(g, _)| *g));
        Ok(())
    }
}

/// Names of the columns an expression references.
fn collect_columns(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Identifier(i) if !(i.quote_style.is_none() && i.value.starts_with('@')) => {
            out.push(i.value.clone())
        }
        Expr::CompoundIdentifier(p) => out.extend(p.last().map(|i| i.value.clone())),
        Expr::BinaryOp { left, right, .. } => {
            collect_columns(left, out);
            collect_columns(right, out);
        }
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr) => collect_columns(expr, out),
        Expr::In { expr, target, .. } => {
            collect_columns(expr, out);
            if let InTarget::List(l) = target {
                for x in l {
                    collect_columns(x, out);
                }
            }
        }
        Expr::Between {
            expr, low, high, ..
        } => {
            collect_columns(expr, out);
            collect_columns(low, out);
            collect_columns(high, out);
        }
        Expr::Like { expr, pattern, .. } => {
            collect_columns(expr, out);
            collect_columns(pattern, out);
        }
        Expr::Function(f) => {
            if let sqlparser::ast::FunctionArguments::List(l) = &f.args {
                for a in &l.args {
                    if let sqlparser::ast::FunctionArg::Unnamed(
                        sqlparser::ast::FunctionArgExpr::Expr(x),
                    ) = a
                    {
                        collect_columns(x, out);
                    }
                }
            }
        }
        Expr::Cast { expr, .. } => collect_columns(expr, out),
        _ => {}
    }
}
