//! Triggers firing: the triggers a statement's table has for its event, run before and after
//! each row that INSERT, UPDATE, DELETE, REPLACE and LOAD DATA change (`dml`). Their
//! definitions and storage are `objects::triggers`'s.

use std::collections::HashMap;
use std::sync::Arc;

use binlog_format::schema::{ColumnType, TableDef};
use binlog_format::Value;

use crate::objects::routines::{Frame, Step, TriggerRows};
use crate::objects::triggers::{parse_body, parse_head, Timing, TrgEvent, TRIGGERS_TABLE};
use crate::SqlSession;
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::{InsertMode, SYSTEM_DB};

impl SqlSession {
    /// The triggers of table `def` for `event`, parsed, in their order; `None` when it has
    /// none (what nearly every statement finds, at the cost of one lookup).
    pub(crate) fn triggers_of(&self, def: &TableDef, event: TrgEvent) -> Result<Option<Fired>> {
        if !self
            .engine()
            .with_state(|st| st.table(SYSTEM_DB, TRIGGERS_TABLE).is_some())
        {
            return Ok(None);
        }
        let mut before = Vec::new();
        let mut after = Vec::new();
        for t in self.triggers()? {
            if t.event != event
                || !t.db.eq_ignore_ascii_case(&def.database)
                || !t.table.eq_ignore_ascii_case(&def.name)
            {
                continue;
            }
            let head = parse_head(&t.definition)?;
            let ready = Ready {
                db: t.db.clone(),
                body: parse_body(&head.body)?,
            };
            match t.timing {
                Timing::Before => before.push(ready),
                Timing::After => after.push(ready),
            }
        }
        if before.is_empty() && after.is_empty() {
            return Ok(None);
        }
        Ok(Some(Fired {
            def: Arc::new(def.clone()),
            before,
            after,
        }))
    }

    /// Error 1442 when a statement run by a trigger writes a table a statement that fired
    /// a trigger is writing.
    pub(crate) fn check_not_firing(&self, def: &TableDef) -> Result<()> {
        let busy = self.trigger_tables.iter().any(|(d, t)| {
            d.eq_ignore_ascii_case(&def.database) && t.eq_ignore_ascii_case(&def.name)
        });
        if busy {
            return Err(Error::new(
                code::ER_CANT_UPDATE_USED_TABLE_IN_SF_OR_TRG,
                format!(
                    "Can't update table '{}' in stored function/trigger because it is already used by statement which invoked this stored function/trigger.",
                    def.name
                ),
            ));
        }
        Ok(())
    }

    /// Runs `triggers` of `fired` for one row: `old` as OLD, `new` as NEW (which a BEFORE
    /// trigger may change; the columns it set are added to `set`).
    pub(crate) fn fire(
        &mut self,
        fired: &Fired,
        timing: Timing,
        old: Option<&[Value]>,
        mut new: Option<&mut Vec<Value>>,
        set: &mut Vec<usize>,
    ) -> Result<()> {
        let triggers = match timing {
            Timing::Before => &fired.before,
            Timing::After => &fired.after,
        };
        if triggers.is_empty() {
            return Ok(());
        }
        if self.trigger_tables.len() >= MAX_DEPTH {
            return Err(Error::new(
                code::ER_SP_RECURSION_LIMIT,
                format!("Recursive limit {MAX_DEPTH} (as triggers firing triggers) was exceeded"),
            ));
        }
        let tz = self.session.vars.tz_offset;
        for t in triggers {
            let mut frame = Frame {
                vars: HashMap::new(),
                rows: Some(TriggerRows {
                    def: fired.def.clone(),
                    new: new.as_deref().cloned(),
                    old: old.map(<[Value]>::to_vec),
                    set: Vec::new(),
                    tz,
                }),
            };
            // The body's statements are part of the firing statement: they see the
            // trigger's database, keep none of its subquery results, and commit nothing.
            self.trigger_tables
                .push((fired.def.database.clone(), fired.def.name.clone()));
            let caches = self.take_subquery_results();
            let outer = self.take_outer();
            let saved_db = self.session.vars.database.replace(t.db.clone());
            let mut last = None;
            let r = self.run_steps(&t.body, &mut frame, &mut last);
            self.session.vars.database = saved_db;
            self.restore_outer(outer);
            self.restore_subquery_results(caches);
            self.trigger_tables.pop();
            r?;
            if let (Some(n), Some(rows)) = (new.as_deref_mut(), frame.rows) {
                if let Some(changed) = rows.new {
                    *n = changed;
                }
                for c in rows.set {
                    if !set.contains(&c) {
                        set.push(c);
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs the triggers of `fired` (if any) at `timing` for one row (see [`Self::fire`]).
    pub(crate) fn fire_opt(
        &mut self,
        fired: Option<&Fired>,
        timing: Timing,
        old: Option<&[Value]>,
        new: Option<&mut Vec<Value>>,
        set: &mut Vec<usize>,
    ) -> Result<()> {
        match fired {
            Some(f) => self.fire(f, timing, old, new, set),
            None => Ok(()),
        }
    }

    /// INSERT (or REPLACE, on a plain table) of `rows` given for `columns`, one row at a
    /// time with the table's INSERT triggers (`inserting`) around each: NEW is the row with
    /// its defaults, a BEFORE trigger may change it, an AFTER trigger sees it as stored (with
    /// the slot or auto-increment value it got). REPLACE removes a row holding the key first,
    /// with the DELETE triggers (`deleting`) around that. Returns the rows inserted.
    pub(crate) fn insert_firing(
        &mut self,
        def: &TableDef,
        columns: &[usize],
        rows: Vec<Vec<Value>>,
        mode: InsertMode,
        firing: Firing<'_>,
    ) -> Result<u64> {
        let now = self.session.now_us();
        let tz = self.session.vars.tz_offset;
        let mut inserted = 0;
        for (n, values) in rows.into_iter().enumerate() {
            let row_no = n + 1;
            if values.len() != columns.len() {
                return Err(crate::table::columns::wrong_value_count(row_no));
            }
            // Values convert as the insert itself would convert them.
            let session = &self.session;
            let lenient = |v: &Value| session.inserts_leniently_value(mode, v);
            let (mut new, diagnostics) = new_row(def, columns, values, row_no, lenient, now, tz)?;
            for (code, message) in diagnostics {
                self.session.warn(code, message);
            }
            let mut set = Vec::new();
            self.fire_opt(
                firing.inserting,
                Timing::Before,
                None,
                Some(&mut new),
                &mut set,
            )?;
            let mut cols = columns.to_vec();
            for c in set {
                if !cols.contains(&c) {
                    cols.push(c);
                }
            }
            if firing.replace {
                let key = def.key_of(&new);
                if let Some(old) = self.session.scan(def, &key)?.into_iter().next() {
                    let mut none = Vec::new();
                    self.fire_opt(firing.deleting, Timing::Before, Some(&old), None, &mut none)?;
                    self.session.delete_row(def, &key)?;
                    self.fire_opt(firing.deleting, Timing::After, Some(&old), None, &mut none)?;
                }
            }
            let vals: Vec<Value> = cols.iter().map(|&c| new[c].clone()).collect();
            let done = self.session.insert(def, &cols, vec![vals], mode)?;
            if done > 0 {
                let mut stored = self.session.last_written_row(def.id).unwrap_or(new);
                self.fire_opt(
                    firing.inserting,
                    Timing::After,
                    None,
                    Some(&mut stored),
                    &mut Vec::new(),
                )?;
            }
            inserted += done;
        }
        Ok(inserted)
    }
}

/// How deep triggers may fire triggers (each fires on another table: a table's own triggers
/// cannot write it, error 1442).
const MAX_DEPTH: usize = 16;

/// A trigger ready to fire: its database (its body's current database) and its statements.
#[derive(Debug)]
pub(crate) struct Ready {
    db: String,
    body: Vec<Step>,
}

/// The triggers an INSERT fires: its INSERT triggers, and for a REPLACE (`replace`) the DELETE
/// triggers of the rows it removes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Firing<'a> {
    pub(crate) inserting: Option<&'a Fired>,
    pub(crate) deleting: Option<&'a Fired>,
    pub(crate) replace: bool,
}

/// The triggers a statement fires on its table for one event, parsed once for the statement.
#[derive(Debug)]
pub(crate) struct Fired {
    def: Arc<TableDef>,
    pub(crate) before: Vec<Ready>,
    pub(crate) after: Vec<Ready>,
}

/// NEW of an INSERT: the values given for `columns` (converted to their columns' types, with
/// the conversions' warnings; `lenient` says which values are adjusted where strict mode
/// refuses them), the other columns' defaults; an auto-increment column left out
/// (or given 0 or NULL) reads 0, a ring's slot its default and its meta column NULL, as
/// before the engine writes the row.
fn new_row(
    def: &TableDef,
    columns: &[usize],
    values: Vec<Value>,
    row_no: usize,
    lenient: impl Fn(&Value) -> bool,
    now: i64,
    tz: i64,
) -> Result<(Vec<Value>, Vec<ringrep_engine::types::Diagnostic>)> {
    use ringrep_engine::types::{convert, default_value};
    let mut diagnostics = Vec::new();
    let mut row: Vec<Value> = def
        .columns
        .iter()
        .map(|c| {
            if c.auto_increment {
                zero_of(c)
            } else {
                default_value(c, now, tz).unwrap_or(Value::Null)
            }
        })
        .collect();
    if let Some(ring) = &def.ring {
        row[ring.meta_column] = Value::Null;
    }
    for (&c, v) in columns.iter().zip(values) {
        let col = &def.columns[c];
        row[c] =
            if col.auto_increment && (v.is_null() || matches!(v, Value::Int(0) | Value::UInt(0))) {
                zero_of(col)
            } else {
                let lenient = lenient(&v);
                let (v, diagnostic) = convert(v, col, row_no, tz, lenient)?;
                diagnostics.extend(diagnostic);
                v
            };
    }
    Ok((row, diagnostics))
}

fn zero_of(c: &binlog_format::schema::ColumnDef) -> Value {
    match c.ty {
        ColumnType::Integer { unsigned: true, .. } => Value::UInt(0),
        _ => Value::Int(0),
    }
}
