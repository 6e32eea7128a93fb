//! SQL text from the binlog's definitions and records: the `CREATE TABLE` statement of a
//! [`TableDef`] (what SHOW CREATE TABLE prints) and a record as the statements a client would
//! replay (`ringrep-binlog dump --sql`, in the spirit of `mysqlbinlog`'s output).
//!
//! Row events are rendered as MySQL's row-based replay applies them: a row write is a
//! `REPLACE INTO` naming every column (the slot and meta columns included), an update a
//! `UPDATE ... WHERE <primary key>`, a delete a `DELETE ... WHERE <primary key>`. The spec
//! ("Backup, restore and replication") says such a replay cannot restore a ring buffer table:
//! the statements name the slot column and REPLACE is refused on ring tables, which is what a
//! server does with this output.

use std::fmt::Write as _;

use binlog_format::events::{DdlEvent, Event, Record, RowChange, RowEvent};
use binlog_format::schema::{
    ColumnDefault, ColumnType, IndexKind, Schema, TableDef, HIDDEN_ROW_ID,
};
use binlog_format::value::{format_timestamp, Value};
use binlog_format::Position;

/// `'text'` with MySQL's escapes for a string literal.
pub fn quote_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            '\u{1a}' => out.push_str("\\Z"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `'text'` as SHOW CREATE TABLE prints a comment (MySQL's `append_unescaped`): `'`
/// doubled, backslash, NUL and line ends escaped.
pub fn shown_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `` `name` `` with backticks doubled inside.
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `v` as an SQL literal that reads back as the same value (timestamps in UTC: the dump sets
/// `time_zone = '+00:00'` first).
pub fn sql_literal(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::Double(d) => format!("{d:?}"),
        Value::Decimal(d) => d.clone(),
        Value::Text(s) | Value::Json(s) => quote_string(s),
        Value::Bytes(b) => {
            let mut s = String::with_capacity(b.len() * 2 + 3);
            s.push_str("X'");
            for x in b {
                let _ = write!(s, "{x:02X}");
            }
            s.push('\'');
            s
        }
        Value::Date(d) => format!("'{d}'"),
        Value::DateTime(d) => format!("'{d}'"),
        Value::Timestamp(us) => format!(
            "'{}'",
            format_timestamp(*us, if us % 1_000_000 == 0 { 0 } else { 6 })
        ),
        Value::Time(_) => format!("'{v}'"),
        // A BIT as its number (a string would be taken as bytes).
        Value::Bit(b) => b.to_string(),
    }
}

/// How [`create_table_sql`] names the table and prints column defaults.
pub struct CreateStyle<'a> {
    /// `` `db`.`name` `` rather than `` `name` `` (SHOW CREATE TABLE prints the bare name).
    pub qualified: bool,
    /// The `ENGINE=` printed (`ndbcluster`, or the engine a table was declared with).
    pub engine: &'a str,
    /// The text of a default value (quoted by the caller's rules: SHOW CREATE TABLE prints
    /// every default as a string).
    pub default_text: &'a dyn Fn(&Value, &ColumnType) -> String,
}

impl std::fmt::Debug for CreateStyle<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateStyle")
            .field("qualified", &self.qualified)
            .finish_non_exhaustive()
    }
}

/// `CREATE TABLE ...` for `def`, in MySQL 8's layout for an NDB table (the hidden row-id
/// column of a table without a primary key is left out: the server adds it again).
pub fn create_table_sql(def: &TableDef, style: &CreateStyle<'_>) -> String {
    let mut lines = Vec::new();
    for c in def.columns.iter().filter(|c| c.name != HIDDEN_ROW_ID) {
        let mut l = format!("  {} {}", quote_ident(&c.name), c.ty.sql());
        let is_ts = matches!(c.ty, ColumnType::Timestamp { .. });
        if !c.nullable {
            l.push_str(" NOT NULL");
        } else if is_ts {
            l.push_str(" NULL");
        }
        match &c.default {
            ColumnDefault::Value(Value::Null) if c.nullable => l.push_str(" DEFAULT NULL"),
            ColumnDefault::Value(v) => {
                l.push_str(" DEFAULT ");
                l.push_str(&(style.default_text)(v, &c.ty));
            }
            ColumnDefault::CurrentTimestamp { fsp: 0 } => l.push_str(" DEFAULT CURRENT_TIMESTAMP"),
            ColumnDefault::CurrentTimestamp { fsp } => {
                let _ = write!(l, " DEFAULT CURRENT_TIMESTAMP({fsp})");
            }
            ColumnDefault::Generated { expr, stored } => {
                let _ = write!(
                    l,
                    " GENERATED ALWAYS AS ({expr}) {}",
                    if *stored { "STORED" } else { "VIRTUAL" }
                );
            }
            ColumnDefault::None if c.nullable && !c.ty.is_lob() => l.push_str(" DEFAULT NULL"),
            ColumnDefault::None => {}
        }
        if c.on_update_now {
            match c.ty {
                ColumnType::Timestamp { fsp } | ColumnType::DateTime { fsp } if fsp > 0 => {
                    let _ = write!(l, " ON UPDATE CURRENT_TIMESTAMP({fsp})");
                }
                _ => l.push_str(" ON UPDATE CURRENT_TIMESTAMP"),
            }
        }
        if c.auto_increment {
            l.push_str(" AUTO_INCREMENT");
        }
        if !c.comment.is_empty() {
            l.push_str(" COMMENT ");
            l.push_str(&shown_string(&c.comment));
        }
        lines.push(l);
    }
    let cols = |ps: &[usize]| {
        ps.iter()
            .map(|&p| quote_ident(&def.columns[p].name))
            .collect::<Vec<_>>()
            .join(",")
    };
    let hidden_pk = def
        .primary_key
        .iter()
        .any(|&p| def.columns[p].name == HIDDEN_ROW_ID);
    if !def.primary_key.is_empty() && !hidden_pk {
        lines.push(format!("  PRIMARY KEY ({})", cols(&def.primary_key)));
    }
    for i in def.indexes.iter().filter(|i| i.kind == IndexKind::Unique) {
        lines.push(format!(
            "  UNIQUE KEY {} ({})",
            quote_ident(&i.name),
            cols(&i.columns)
        ));
    }
    for i in def
        .indexes
        .iter()
        .filter(|i| i.kind == IndexKind::Secondary)
    {
        lines.push(format!(
            "  KEY {} ({})",
            quote_ident(&i.name),
            cols(&i.columns)
        ));
    }
    let name = if style.qualified {
        format!("{}.{}", quote_ident(&def.database), quote_ident(&def.name))
    } else {
        quote_ident(&def.name)
    };
    let mut out = format!(
        "CREATE TABLE {name} (\n{}\n) ENGINE={} DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci",
        lines.join(",\n"),
        style.engine
    );
    if let Some(c) = &def.comment {
        let _ = write!(
            out,
            " COMMENT='{}'",
            c.replace('\\', "\\\\").replace('\'', "''")
        );
    }
    if let Some(p) = &def.partitioning {
        let kind = if p.linear { "LINEAR KEY" } else { "KEY" };
        let _ = write!(out, "\n/*!50100 PARTITION BY {kind} ({})", cols(&p.columns));
        if let Some(n) = p.partitions {
            let _ = write!(out, "\nPARTITIONS {n}");
        }
        out.push_str(" */");
    }
    out
}

/// What starts a replayable dump: the session settings the statements rely on. FOREIGN KEY
/// checks are off, as mysqldump turns them off: the rows a cascade changed are in the log as
/// rows of their own, and a replayed REPLACE must not cascade again.
pub const DUMP_PROLOGUE: &str =
    "/*!40101 SET NAMES utf8mb4 */;\nSET time_zone = '+00:00';\n/*!40014 SET FOREIGN_KEY_CHECKS=0 */;\n";

fn qualified(schema: &Schema, id: u64) -> Option<(&TableDef, String)> {
    schema.tables.get(&id).map(|t| {
        (
            t,
            format!("{}.{}", quote_ident(&t.database), quote_ident(&t.name)),
        )
    })
}

fn key_condition(table: &TableDef, key: &[Value]) -> String {
    table
        .primary_key
        .iter()
        .zip(key)
        .map(|(&p, v)| match v {
            Value::Null => format!("{} IS NULL", quote_ident(&table.columns[p].name)),
            v => format!("{}={}", quote_ident(&table.columns[p].name), sql_literal(v)),
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// Whether `table` has no primary key of its own (the engine keys it by a hidden row id).
fn hidden_key(table: &TableDef) -> bool {
    table
        .primary_key
        .iter()
        .any(|&p| table.columns[p].name == HIDDEN_ROW_ID)
}

/// Renders one row event; returns false when it cannot be written as SQL (an update or a
/// delete of a table without a primary key names its row by the hidden row id).
fn row_sql(out: &mut String, schema: &Schema, r: &RowEvent) -> bool {
    let Some((table, name)) = qualified(schema, r.table_id) else {
        let _ = writeln!(
            out,
            "# row event on table id {} whose definition this dump has not seen: skipped",
            r.table_id
        );
        return false;
    };
    let hidden = hidden_key(table);
    let visible = |values: &[Value]| -> (Vec<String>, Vec<String>) {
        table
            .columns
            .iter()
            .zip(values)
            .filter(|(c, _)| c.name != HIDDEN_ROW_ID)
            .map(|(c, v)| (quote_ident(&c.name), sql_literal(v)))
            .unzip()
    };
    match &r.change {
        // Without a key an update, logged as a write, cannot be told from a new row.
        RowChange::Write { .. }
            if hidden
                && matches!(
                    r.cause,
                    binlog_format::events::Cause::Update | binlog_format::events::Cause::Overwrite
                ) =>
        {
            let _ = writeln!(
                out,
                "# an UPDATE of a row of {name}, which has no primary key, logged as a write: which row it replaced is not known; not replayed"
            );
            return false;
        }
        RowChange::Write { row } => {
            let (cols, vals) = visible(row);
            // Without a primary key a write is a new row: INSERT, and the target numbers it.
            let verb = if hidden { "INSERT" } else { "REPLACE" };
            let _ = writeln!(
                out,
                "{verb} INTO {name} ({}) VALUES ({});",
                cols.join(","),
                vals.join(",")
            );
        }
        RowChange::Update { .. } | RowChange::Delete { .. } if hidden => {
            let _ = writeln!(
                out,
                "# {} of a row of {name}, which has no primary key: the binlog names the row by its hidden row id, which SQL cannot address; not replayed",
                r.op_name().to_uppercase()
            );
            return false;
        }
        RowChange::Update { key, after, .. } => {
            let (cols, vals) = visible(after);
            let set = cols
                .iter()
                .zip(&vals)
                .map(|(c, v)| format!("{c}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            let _ = writeln!(
                out,
                "UPDATE {name} SET {set} WHERE {};",
                key_condition(table, key)
            );
        }
        RowChange::Delete { key } => {
            let _ = writeln!(
                out,
                "DELETE FROM {name} WHERE {};",
                key_condition(table, key)
            );
        }
    }
    true
}

/// One DDL event as the statement that replays it, without the closing `;` (the schema topic's
/// `statement`). `schema` is the schema before the event. A rename of a table by ALTER gives
/// two statements, separated by `;` and a newline.
pub fn ddl_statement(schema: &Schema, d: &DdlEvent) -> String {
    let mut out = String::new();
    ddl_sql(&mut out, schema, d);
    out.trim_end().trim_end_matches(';').to_string()
}

fn ddl_sql(out: &mut String, schema: &Schema, d: &DdlEvent) {
    let default_text = |v: &Value, _: &ColumnType| sql_literal(v);
    let style = CreateStyle {
        qualified: true,
        engine: "ndbcluster",
        default_text: &default_text,
    };
    match d {
        DdlEvent::CreateDatabase { name } => {
            let _ = writeln!(out, "CREATE DATABASE {};", quote_ident(name));
        }
        DdlEvent::DropDatabase { name } => {
            let _ = writeln!(out, "DROP DATABASE {};", quote_ident(name));
        }
        DdlEvent::CreateTable { table } => {
            let _ = writeln!(out, "{};", create_table_sql(table, &style));
        }
        DdlEvent::AlterTable { table } => {
            // The binlog keeps the new definition and, in the same transaction, every row the
            // table keeps: the ALTER replays exactly as DROP, CREATE and those rows.
            let (db, old_name) = schema
                .tables
                .get(&table.id)
                .map_or((&table.database, &table.name), |t| (&t.database, &t.name));
            let _ = writeln!(
                out,
                "# ALTER TABLE {}.{}: the new definition, then the rows it keeps",
                quote_ident(db),
                quote_ident(old_name)
            );
            let _ = writeln!(
                out,
                "DROP TABLE {}.{};",
                quote_ident(db),
                quote_ident(old_name)
            );
            let _ = writeln!(out, "{};", create_table_sql(table, &style));
        }
        DdlEvent::DropTable { database, name, .. } => {
            let _ = writeln!(
                out,
                "DROP TABLE {}.{};",
                quote_ident(database),
                quote_ident(name)
            );
        }
        DdlEvent::TruncateTable { table_id } => match qualified(schema, *table_id) {
            Some((_, name)) => {
                let _ = writeln!(out, "TRUNCATE TABLE {name};");
            }
            None => {
                let _ = writeln!(out, "# TRUNCATE of table id {table_id}: not seen, skipped");
            }
        },
    }
}

/// Renders records as the statements that replay them, keeping count of the row changes
/// that cannot be written as SQL.
#[derive(Debug, Default)]
pub struct SqlDump {
    /// Row changes left out (updates and deletes of tables without a primary key, rows of
    /// tables the dump has no definition for).
    pub not_replayable: u64,
}

impl SqlDump {
    /// A record as statements, after a `# at` comment with its position. A transaction of
    /// row events is wrapped in BEGIN/COMMIT; DDL stands alone, as MySQL commits it
    /// implicitly. `schema` is the schema before the record; its DDL is applied as the
    /// record's events are rendered (rows after an ALTER in the same transaction are read
    /// with the new definition), and `schema` holds the result afterwards.
    pub fn record(&mut self, schema: &mut Schema, position: Position, record: &Record) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# at {position}");
        let Record::Transaction(tx) = record else {
            return out;
        };
        let _ = writeln!(
            out,
            "# seq={} server_id={} commit_time={}",
            tx.seq,
            tx.server_id,
            format_timestamp(tx.commit_time_us, 6)
        );
        let rows = tx.events.iter().any(|e| matches!(e, Event::Row(_)));
        if rows {
            out.push_str("BEGIN;\n");
        }
        for ev in &tx.events {
            match ev {
                Event::Row(r) => {
                    if !row_sql(&mut out, schema, r) {
                        self.not_replayable += 1;
                    }
                }
                Event::Ddl(d) => {
                    ddl_sql(&mut out, schema, d);
                    schema.apply(d);
                }
            }
        }
        if rows {
            out.push_str("COMMIT;\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_read_back_as_mysql_reads_them() {
        assert_eq!(sql_literal(&Value::Null), "NULL");
        assert_eq!(sql_literal(&Value::Int(-3)), "-3");
        assert_eq!(
            sql_literal(&Value::Text("it's a \\ \n".into())),
            "'it\\'s a \\\\ \\n'"
        );
        assert_eq!(sql_literal(&Value::Bytes(vec![0x01, 0xab])), "X'01AB'");
        assert_eq!(sql_literal(&Value::Bytes(vec![])), "X''");
        assert_eq!(sql_literal(&Value::Double(0.1)), "0.1");
        assert_eq!(sql_literal(&Value::Timestamp(0)), "'1970-01-01 00:00:00'");
        assert_eq!(quote_ident("a`b"), "`a``b`");
    }
}
