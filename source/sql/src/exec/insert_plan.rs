//! Prepared INSERTs of listed rows, compiled once per statement text: an execution builds its
//! rows straight from the parameter values, instead of copying the parsed statement, writing
//! each value into it as a literal and evaluating that literal again (docs/architecture.md,
//! "The statement path"). The rules are those of the general INSERT (`dml.rs`), which a
//! statement the plan does not cover still takes: REPLACE, ON DUPLICATE KEY UPDATE, SET, a
//! query as the source, a placeholder inside an expression, a table with INSERT triggers.

use std::sync::{Arc, Mutex, PoisonError};

use binlog_format::schema::{ColumnDefault, TableDef};
use binlog_format::Value;
use sqlparser::ast::{Insert, SetExpr, Statement, TableObject};

use crate::expr::{eval, Scope};
use crate::objects::triggers::TrgEvent;
use crate::parse::prepared::{Cell, InsertPlan, Resolved};
use crate::parse::statement::split_name;
use crate::{Outcome, SqlSession};
use ringrep_engine::error::Result;
use ringrep_engine::types::default_value;

impl InsertPlan {
    /// The plan of `stmt` when it is an INSERT [IGNORE] of VALUES whose placeholders are whole
    /// values; `parameter` gives the parameter of each placeholder in the order the syntax-tree
    /// visitor meets them (row by row, left to right, as the cells are listed).
    pub(crate) fn of(stmt: &Statement, parameter: &[usize]) -> Option<InsertPlan> {
        let Statement::Insert(ins) = stmt else {
            return None;
        };
        let Insert {
            table: TableObject::TableName(name),
            replace_into: false,
            on: None,
            source: Some(source),
            ignore,
            columns,
            assignments,
            ..
        } = ins
        else {
            return None;
        };
        let SetExpr::Values(values) = source.body.as_ref() else {
            return None;
        };
        if !assignments.is_empty() {
            return None;
        }
        let (db, table) = split_name(name).ok()?;
        let mut params = parameter.iter();
        let mut rows = Vec::with_capacity(values.rows.len());
        for row in &values.rows {
            let mut cells = Vec::with_capacity(row.len());
            for e in row.iter() {
                cells.push(if crate::parse::tree::is_placeholder(e) {
                    Cell::Param(*params.next()?)
                } else if crate::exec::dml::is_default_keyword(e) {
                    Cell::Default
                } else {
                    Cell::Expr(Box::new(e.clone()))
                });
            }
            rows.push(cells);
        }
        // Every placeholder is a cell: none sits inside an expression.
        if params.next().is_some() {
            return None;
        }
        Some(InsertPlan {
            db,
            table,
            names: crate::exec::dml::column_list_names(columns),
            rows,
            ignore: *ignore,
            resolved: Mutex::new(None),
        })
    }

    /// The columns the rows' cells go to in `def`, and whether one is listed twice.
    fn columns(&self, def: &Arc<TableDef>) -> Result<(Arc<[usize]>, bool)> {
        let mut resolved = self.resolved.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = resolved.as_ref().filter(|r| Arc::ptr_eq(&r.def, def)) {
            return Ok((Arc::clone(&r.columns), r.twice));
        }
        let columns: Arc<[usize]> = crate::exec::dml::insert_columns(def, &self.names)?.into();
        let twice = crate::exec::dml::lists_a_column_twice(&columns);
        *resolved = Some(Resolved {
            def: Arc::clone(def),
            columns: Arc::clone(&columns),
            twice,
        });
        Ok((columns, twice))
    }
}

impl SqlSession {
    /// Runs `plan` with `values`; `None` when the table has INSERT triggers (the general
    /// INSERT fires them).
    pub(crate) fn insert_planned(
        &mut self,
        plan: &InsertPlan,
        values: &[Value],
    ) -> Option<Result<Outcome>> {
        let def = match self.target_table(plan.db.as_deref(), &plan.table, "INSERT") {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        match self.triggers_of(&def, TrgEvent::Insert) {
            Ok(None) => {}
            Ok(Some(_)) => return None,
            Err(e) => return Some(Err(e)),
        }
        let one_row = plan.rows.len() == 1;
        Some(self.writing(!plan.ignore, |s| {
            s.one_row_insert(one_row, |s| s.insert_planned_into(plan, def, values))
        }))
    }

    fn insert_planned_into(
        &mut self,
        plan: &InsertPlan,
        def: Arc<TableDef>,
        values: &[Value],
    ) -> Result<Outcome> {
        self.check_not_firing(&def)?;
        let (listed, twice) = plan.columns(&def)?;
        let now = self.session.now_us();
        let tz = self.session.vars.tz_offset;
        let mut rows = Vec::with_capacity(plan.rows.len());
        for (i, cells) in plan.rows.iter().enumerate() {
            if cells.len() != listed.len() {
                return Err(crate::table::columns::wrong_value_count(i + 1));
            }
            let mut row = Vec::with_capacity(cells.len());
            for (cell, &c) in cells.iter().zip(listed.iter()) {
                row.push(match cell {
                    Cell::Param(p) => self.bound_value(values.get(*p).unwrap_or(&Value::Null))?,
                    Cell::Default => default_value(&def.columns[c], now, tz).unwrap_or(Value::Null),
                    Cell::Expr(e) => eval(e, &Scope::empty(), &self.ctx())?,
                });
            }
            rows.push(row);
        }
        if twice {
            return Err(crate::exec::dml::listed_twice());
        }
        // The listed columns are shared with every execution; a table with generated
        // columns gets a list of its own with them added.
        let generates = def
            .columns
            .iter()
            .any(|c| matches!(c.default, ColumnDefault::Generated { .. }));
        let mut columns = Vec::new();
        if generates {
            columns = listed.to_vec();
            self.fill_generated(&def, &mut columns, &mut rows)?;
            columns.dedup();
        }
        let n = rows.len() as u64;
        let mode = crate::exec::dml::insert_mode(plan.ignore);
        let inserted = self.statement(move |s| {
            let columns = if generates { &columns[..] } else { &listed[..] };
            s.session.insert(&def, columns, rows, mode)
        })?;
        Ok(self.inserted(n, inserted))
    }

    /// The value a parameter gives: what the general path gets by writing it into the
    /// statement as a literal and evaluating that (`bound_values_match_their_literals`).
    fn bound_value(&self, v: &Value) -> Result<Value> {
        Ok(match v {
            Value::Null => Value::Null,
            Value::Int(i) if *i >= 0 => Value::Int(*i),
            Value::UInt(u) => i64::try_from(*u).map_or(Value::UInt(*u), Value::Int),
            Value::Text(s) => Value::Text(s.clone()),
            other => eval(
                &crate::parse::tree::literal_expr(other)?,
                &Scope::empty(),
                &self.ctx(),
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringrep_testkit::engine;

    #[test]
    fn bound_values_match_their_literals() {
        let dir = tempfile::tempdir().expect("dir");
        let clock = ringrep_engine::clock::ManualClock::new(engine::T0);
        let engine = engine::open(dir.path(), &clock);
        let s = SqlSession::new(&engine);
        for v in super::super::bound::sample_parameters() {
            let literal = crate::parse::tree::literal_expr(&v).expect("literal");
            let want = eval(&literal, &Scope::empty(), &s.ctx()).expect("eval");
            assert_eq!(s.bound_value(&v).expect("bound"), want, "{v:?}");
        }
    }

    #[test]
    fn only_inserts_of_whole_values_are_planned() {
        let plan = |sql: &str| {
            let t = super::super::bound::template(sql).expect("template");
            t.insert.is_some()
        };
        assert!(plan("INSERT INTO t (a, b) VALUES (?, ?)"));
        assert!(plan(
            "INSERT IGNORE INTO d.t VALUES (?, DEFAULT, NOW()), (?, 'x', -1)"
        ));
        assert!(!plan("INSERT INTO t (a) VALUES (? + 1)"));
        assert!(!plan("REPLACE INTO t (a) VALUES (?)"));
        assert!(!plan(
            "INSERT INTO t (a) VALUES (?) ON DUPLICATE KEY UPDATE a = 1"
        ));
        assert!(!plan("INSERT INTO t SET a = ?"));
        assert!(!plan("INSERT INTO t (a) SELECT ?"));
        assert!(!plan("UPDATE t SET a = ?"));
    }
}
