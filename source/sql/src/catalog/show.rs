//! SHOW CREATE TABLE in MySQL 8's exact format, SHOW TABLES, SHOW VARIABLES, SHOW BINARY LOGS
//! and SHOW BINARY LOG STATUS.

use binlog_format::schema::{ColumnType, TableDef};
use binlog_format::Value;
use ringrep_cdc::mysql_positions::{self, NodeBinlog, NodeOwn, PositionError};
use ringrep_cdc::sql_text::{create_table_sql, CreateStyle};
use sqlparser::ast::{ObjectName, ShowCreateObject, ShowStatementFilter};

use crate::expr::render;
use crate::objects::foreign_keys::ForeignKey;
use crate::parse::statement::split_name;
use crate::{Outcome, SqlSession};
use ringrep_engine::error::{Code, Error, Result};
use ringrep_engine::Engine;

/// Which events are the node's own and never sent to MySQL-protocol clients (the engine's
/// rule), for `ringrep_cdc::mysql_positions`.
pub const NODE_OWN: NodeOwn = NodeOwn {
    system_db: ringrep_engine::SYSTEM_DB,
    node_local: ringrep_engine::is_node_local_event,
};

/// The engine's binlog as MySQL-protocol clients see it (`ringrep_cdc::mysql_positions`):
/// its directory, server id and which events are the node's own. SHOW BINLOG EVENTS, SHOW
/// BINARY LOGS and the server's MySQL change stream all read it through this.
pub fn mysql_binlog(engine: &Engine) -> NodeBinlog {
    NodeBinlog {
        dir: engine.binlog_dir(),
        server_id: engine.config().server_id,
        own: NODE_OWN,
    }
}

/// A `mysql_positions` error as the engine's: the same MySQL error.
pub fn position_error(e: PositionError) -> Error {
    Error::new(Code::new(e.code, e.sqlstate), e.message)
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// `CREATE TABLE ...` exactly as MySQL 8 prints it for an NDB table: every default as a
/// quoted string.
fn show_create_table(def: &TableDef, engine: &str) -> String {
    let default_text = |v: &Value, ty: &ColumnType| {
        let text = match v {
            // A BIT's default as MySQL prints it: a bit literal, unquoted.
            Value::Bit(b) => return format!("b'{b:b}'"),
            Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            v => render(v, Some(ty), 0).unwrap_or_default(),
        };
        quote(&text)
    };
    create_table_sql(
        def,
        &CreateStyle {
            qualified: false,
            engine,
            default_text: &default_text,
        },
    )
}

/// Adds a table's FOREIGN KEY constraints to its CREATE TABLE text, after its keys, as MySQL
/// 8 prints them (by name).
fn with_constraints(text: &mut String, fks: &[ForeignKey]) {
    if fks.is_empty() {
        return;
    }
    let Some(end) = text.find("\n) ENGINE=") else {
        return;
    };
    let lines: String = fks.iter().map(|f| format!(",\n  {}", f.clause())).collect();
    text.insert_str(end, &lines);
}

/// NDB's status variables counting conflicts found by each conflict function.
const NDB_CONFLICT_FN_COUNTERS: [&str; 9] = [
    "Ndb_conflict_fn_epoch",
    "Ndb_conflict_fn_epoch2",
    "Ndb_conflict_fn_epoch2_trans",
    "Ndb_conflict_fn_epoch_trans",
    "Ndb_conflict_fn_max",
    "Ndb_conflict_fn_max_del_win",
    "Ndb_conflict_fn_max_del_win_ins",
    "Ndb_conflict_fn_max_ins",
    "Ndb_conflict_fn_old",
];

impl SqlSession {
    /// SHOW CREATE TABLE (other objects are not supported).
    pub(crate) fn show_create(
        &mut self,
        kind: ShowCreateObject,
        name: &ObjectName,
    ) -> Result<Outcome> {
        match kind {
            ShowCreateObject::Table => {
                let (db, t) = split_name(name)?;
                let def = self.session.table_def(db.as_deref(), &t)?;
                let mut text = show_create_table(&def, &self.engine_name(&def));
                if self.has_foreign_keys() {
                    let fks = self.foreign_keys_of(&def.database, &def.name)?;
                    with_constraints(&mut text, &fks);
                }
                Ok(Outcome::text(
                    &["Table", "Create Table"],
                    vec![vec![Some(def.name.clone()), Some(text)]],
                ))
            }
            other => Err(Error::unsupported(format!("SHOW CREATE {other}"))),
        }
    }

    /// SHOW BINARY LOGS (and SHOW MASTER LOGS): each binlog segment with its size as a MySQL
    /// binlog file (the MySQL encoding CDC tools read; docs/cdc.md).
    pub(crate) fn show_binary_logs(&self) -> Result<Outcome> {
        let files = self.engine().binlog_files()?;
        let rows = mysql_positions::binary_logs(
            &mysql_binlog(self.engine()),
            files.into_iter().map(|(name, _)| name).collect(),
        )
        .map_err(position_error)?
        .into_iter()
        .map(|(name, len)| vec![Some(name), Some(len.to_string()), Some("No".into())])
        .collect();
        Ok(Outcome::text(&["Log_name", "File_size", "Encrypted"], rows))
    }

    /// `SHOW BINLOG EVENTS [IN 'file'] [FROM pos] [LIMIT [offset,] n]`: the events of a file
    /// in the MySQL encoding CDC tools read (docs/cdc.md).
    pub(crate) fn show_binlog_events(&self, text: &str) -> Result<Outcome> {
        let body = text.trim().trim_end_matches(';');
        let upper = body.to_ascii_uppercase();
        let after = |kw: &str| -> Option<String> {
            let i = crate::parse::lexer::find_top_level(body, kw)?;
            Some(body[i + kw.len()..].trim_start().to_string())
        };
        let bad = |what: &str| {
            Error::syntax(format!(
                "You have an error in your SQL syntax; SHOW BINLOG EVENTS [IN 'log_name'] [FROM pos] [LIMIT [offset,] row_count]: {what}"
            ))
        };
        let file = match after("IN") {
            Some(rest) => {
                let q = rest.chars().next().filter(|c| *c == '\'' || *c == '"');
                let Some(q) = q else {
                    return Err(bad("IN needs a quoted file name"));
                };
                let end = rest[1..]
                    .find(q)
                    .ok_or_else(|| bad("unterminated file name"))?;
                Some(rest[1..1 + end].to_string())
            }
            None => None,
        };
        let number = |s: &str| -> Result<u64> {
            s.split(|c: char| !c.is_ascii_digit())
                .next()
                .filter(|d| !d.is_empty())
                .and_then(|d| d.parse().ok())
                .ok_or_else(|| bad("a number is needed"))
        };
        let from = match after("FROM") {
            Some(rest) => number(&rest)?,
            None => 0,
        };
        let (offset, limit) = match upper.rfind("LIMIT") {
            Some(i) => {
                let rest = body[i + 5..].trim();
                match rest.split_once(',') {
                    Some((o, n)) => (number(o.trim())? as usize, Some(number(n.trim())? as usize)),
                    None => (0, Some(number(rest)? as usize)),
                }
            }
            None => (0, None),
        };
        let rows = mysql_positions::binlog_events(
            &mysql_binlog(self.engine()),
            &crate::expr::server_version(),
            file.as_deref(),
            from,
            offset,
            limit,
        )
        .map_err(position_error)?
        .into_iter()
        .map(|r| {
            vec![
                Some(r.log_name),
                Some(r.pos.to_string()),
                Some(r.event_type.to_string()),
                Some(r.server_id.to_string()),
                Some(r.end_log_pos.to_string()),
                Some(r.info),
            ]
        })
        .collect();
        Ok(Outcome::text(
            &[
                "Log_name",
                "Pos",
                "Event_type",
                "Server_id",
                "End_log_pos",
                "Info",
            ],
            rows,
        ))
    }

    /// SHOW BINARY LOG STATUS (and MySQL 5.7's SHOW MASTER STATUS): the current segment and
    /// the position after its last transaction, in the MySQL encoding CDC tools read (where a
    /// tool starting now begins). ringrep has no GTIDs; its position in transactions is
    /// `@@ringrep_last_seq`.
    pub(crate) fn show_binlog_status(&self) -> Outcome {
        let rows = self
            .engine()
            .binlog_end()
            .map(|(file, offset)| {
                let position = binlog_format::segment::parse_segment_name(&file)
                    .and_then(|s| {
                        mysql_positions::file_size(&mysql_binlog(self.engine()), s, false).ok()
                    })
                    .unwrap_or(offset);
                vec![
                    Some(file),
                    Some(position.to_string()),
                    Some(String::new()),
                    Some(String::new()),
                    Some(String::new()),
                ]
            })
            .into_iter()
            .collect();
        Outcome::text(
            &[
                "File",
                "Position",
                "Binlog_Do_DB",
                "Binlog_Ignore_DB",
                "Executed_Gtid_Set",
            ],
            rows,
        )
    }

    /// `SHOW [GLOBAL | SESSION] VARIABLES [LIKE 'p' | WHERE e]`.
    pub(crate) fn show_variables(
        &mut self,
        filter: Option<&ShowStatementFilter>,
    ) -> Result<Outcome> {
        let rows = self.variables();
        self.name_value_rows(rows, filter)
    }

    /// `SHOW [GLOBAL | SESSION] STATUS [LIKE 'p' | WHERE e]`: the node's counters (its binlog
    /// and TTL purge) and the server's (connections, statements, uptime), global values in
    /// either scope.
    pub(crate) fn show_status(&mut self, filter: Option<&ShowStatementFilter>) -> Result<Outcome> {
        let engine = self.engine();
        let files = engine.binlog_files().unwrap_or_default();
        let mut rows: Vec<(String, String)> = [
            ("Ringrep_last_seq", engine.last_seq()),
            ("Ringrep_durable_seq", engine.durable_seq()),
            ("Ringrep_binlog_fsyncs", engine.binlog_fsyncs()),
            (
                "Ringrep_binlog_fsyncs_when_idle",
                engine.binlog_fsyncs_when_idle(),
            ),
            ("Ringrep_binlog_bytes", files.iter().map(|(_, n)| n).sum()),
            ("Ringrep_binlog_segments", files.len() as u64),
            ("Ringrep_binlog_segments_purged", engine.purged_segments()),
            (
                "Ringrep_binlog_readers_overtaken",
                engine.readers_overtaken(),
            ),
            ("Ringrep_ttl_purged_rows", engine.purged_rows()),
        ]
        .into_iter()
        // NDB's counts of the rows each conflict function refused: ringrep applies no
        // conflict function (a replica applies every change its source sent), so each is 0,
        // where monitoring and RonDB's tests read them.
        .chain(NDB_CONFLICT_FN_COUNTERS.iter().map(|&n| (n, 0)))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        if let Some(server) = &self.server_status {
            rows.extend(server.status());
        }
        rows.sort();
        self.name_value_rows(rows, filter)
    }

    fn name_value_rows(
        &self,
        rows: Vec<(String, String)>,
        filter: Option<&ShowStatementFilter>,
    ) -> Result<Outcome> {
        let rows = rows
            .into_iter()
            .map(|(n, v)| vec![Value::Text(n), Value::Text(v)])
            .collect();
        let filter = filter.and_then(crate::parse::show::ShowFilter::of_filter);
        self.show_result(&["Variable_name", "Value"], rows, filter.as_ref())
    }
}
