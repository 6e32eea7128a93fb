//! SET of session, global and user variables, and `@@variable` reads.

use binlog_format::Value;
use sqlparser::ast::{Expr, Set};

use crate::expr::{eval, render, truthy, Scope};
use crate::expr::{server_version, SQL_MODE};
use crate::{Outcome, SqlSession};
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::Fence;

/// Variables ringrep accepts and ignores (they have no meaning here), so scripts written for
/// MySQL run. docs/operations.md lists them: keep it in step.
const ACCEPTED: &[&str] = &[
    "sql_log_bin",
    "names",
    "character_set_client",
    "character_set_results",
    "collation_connection",
    "unique_checks",
    "ndb_fully_replicated",
    "ndb_read_backup",
    "ndb_table_no_logging",
    "transaction_isolation",
    "tx_isolation",
    "max_execution_time",
    "ndb_use_exact_count",
    "optimizer_switch",
    "default_storage_engine",
    "session_track_gtids",
    "ndb_default_column_format",
    "ndb_deferred_constraints",
    // SET GLOBAL ndb_metadata_sync = true asks a mysqld to catch up with the cluster's
    // dictionary; a ringrep node's catalog is its own, always caught up, so the request has
    // nothing to do and the variable reads back OFF at once (RonDB's tests poll it so).
    "ndb_metadata_sync",
    "sql_notes",
    // Connection pools set these when they open a connection; ringrep closes no idle
    // connection, so accepting them changes nothing a client relies on.
    "wait_timeout",
    "interactive_timeout",
];

/// `lock_wait_timeout`'s default and largest value (a year, in seconds), as in MySQL.
pub(crate) const LOCK_WAIT_TIMEOUT_MAX: u64 = 31_536_000;

/// MySQL 8.0's SQL modes in the order `@@sql_mode` lists them, each with whether ringrep
/// takes it: the modes that would change how text is read or values compared (ANSI_QUOTES,
/// PIPES_AS_CONCAT, NO_BACKSLASH_ESCAPES, ...) are refused rather than ignored.
const SQL_MODES: &[(&str, bool)] = &[
    ("REAL_AS_FLOAT", false),
    ("PIPES_AS_CONCAT", false),
    ("ANSI_QUOTES", false),
    ("IGNORE_SPACE", true),
    ("ONLY_FULL_GROUP_BY", true),
    ("NO_UNSIGNED_SUBTRACTION", false),
    ("NO_DIR_IN_CREATE", true),
    ("NO_AUTO_VALUE_ON_ZERO", true),
    ("NO_BACKSLASH_ESCAPES", false),
    ("STRICT_TRANS_TABLES", true),
    ("STRICT_ALL_TABLES", true),
    ("NO_ZERO_IN_DATE", true),
    ("NO_ZERO_DATE", true),
    ("ALLOW_INVALID_DATES", false),
    ("ERROR_FOR_DIVISION_BY_ZERO", true),
    ("TRADITIONAL", true),
    ("HIGH_NOT_PRECEDENCE", false),
    ("NO_ENGINE_SUBSTITUTION", true),
    ("PAD_CHAR_TO_FULL_LENGTH", false),
    ("TIME_TRUNCATE_FRACTIONAL", false),
];

/// A `sql_mode` value as MySQL spells it back (its modes in MySQL's order, TRADITIONAL with
/// the modes it stands for; `DEFAULT` is ringrep's default), or 1231 for a mode MySQL does
/// not have or ringrep does not take.
pub(crate) fn parse_sql_mode(v: &Value) -> Result<String> {
    let text = match v {
        Value::Int(0) | Value::UInt(0) => String::new(),
        Value::Null => return Err(wrong_value("sql_mode", v)),
        other => ringrep_engine::types::text_of(other),
    };
    if text.eq_ignore_ascii_case("DEFAULT") {
        return Ok(SQL_MODE.to_string());
    }
    let mut on = vec![false; SQL_MODES.len()];
    let mut set = |name: &str| match SQL_MODES.iter().position(|(m, _)| *m == name) {
        Some(i) => {
            on[i] = true;
            Ok(())
        }
        None => Err(name.to_string()),
    };
    for name in text.split(',').map(|n| n.trim().to_ascii_uppercase()) {
        let expanded: &[&str] = match name.as_str() {
            "" => &[],
            "TRADITIONAL" => &[
                "STRICT_TRANS_TABLES",
                "STRICT_ALL_TABLES",
                "NO_ZERO_IN_DATE",
                "NO_ZERO_DATE",
                "ERROR_FOR_DIVISION_BY_ZERO",
                "TRADITIONAL",
                "NO_ENGINE_SUBSTITUTION",
            ],
            "ANSI" => &["ANSI_QUOTES"],
            other => &[other][..],
        };
        for m in expanded.iter().copied() {
            set(m).map_err(|bad| {
                Error::new(
                    code::ER_WRONG_VALUE_FOR_VAR,
                    format!("Variable 'sql_mode' can't be set to the value of '{bad}'"),
                )
            })?;
        }
    }
    if let Some((name, _)) = SQL_MODES
        .iter()
        .zip(&on)
        .find(|((_, takes), on)| **on && !takes)
        .map(|(m, _)| *m)
    {
        return Err(Error::new(
            code::ER_WRONG_VALUE_FOR_VAR,
            format!(
                "Variable 'sql_mode' can't be set to the value of '{name}' (ringrep does not have this mode)"
            ),
        ));
    }
    Ok(SQL_MODES
        .iter()
        .zip(&on)
        .filter(|(_, on)| **on)
        .map(|((m, _), _)| *m)
        .collect::<Vec<_>>()
        .join(","))
}

fn on_off(v: &Value, name: &str) -> Result<bool> {
    match v {
        Value::Text(s) if s.eq_ignore_ascii_case("on") || s.eq_ignore_ascii_case("true") => {
            Ok(true)
        }
        Value::Text(s) if s.eq_ignore_ascii_case("off") || s.eq_ignore_ascii_case("false") => {
            Ok(false)
        }
        other => truthy(other).ok_or_else(|| wrong_value(name, other)),
    }
}

fn wrong_value(name: &str, v: &Value) -> Error {
    Error::new(
        code::ER_WRONG_VALUE_FOR_VAR,
        format!(
            "Variable '{name}' can't be set to the value of '{}'",
            render(v, None, 0).unwrap_or_else(|| "NULL".into())
        ),
    )
}

/// `+05:30` as seconds; `SYSTEM` and `UTC` are offset 0.
fn parse_tz(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("system") || s.eq_ignore_ascii_case("utc") || s == "+00:00" {
        return Some(0);
    }
    let (sign, rest) = match s.chars().next()? {
        '+' => (1, &s[1..]),
        '-' => (-1, &s[1..]),
        _ => return None,
    };
    let (h, m) = rest.split_once(':')?;
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    (h <= 14 && m < 60).then_some(sign * (h * 3600 + m * 60))
}

fn format_tz(secs: i64) -> String {
    if secs == 0 {
        return "+00:00".into();
    }
    let sign = if secs < 0 { '-' } else { '+' };
    format!(
        "{sign}{:02}:{:02}",
        secs.abs() / 3600,
        secs.abs() % 3600 / 60
    )
}

impl SqlSession {
    /// The value an unquoted word such as ON or OFF stands for in SET.
    fn set_value(&self, e: &Expr) -> Result<Value> {
        match e {
            Expr::Identifier(i) if i.quote_style.is_none() && !i.value.starts_with('@') => {
                Ok(Value::Text(i.value.clone()))
            }
            other => eval(other, &Scope::empty(), &self.ctx()),
        }
    }

    /// SET of one or more variables, SET TIME_ZONE; SET NAMES and SET TRANSACTION are
    /// accepted and ignored.
    pub(crate) fn set(&mut self, set: Set) -> Result<Outcome> {
        let assignments: Vec<(String, Expr)> = match set {
            Set::SingleAssignment {
                variable,
                values,
                scope,
                ..
            } => {
                let v = values
                    .into_iter()
                    .next()
                    .ok_or_else(|| Error::syntax("SET needs a value"))?;
                let name = match scope {
                    Some(sqlparser::ast::ContextModifier::Global) => format!("@@global.{variable}"),
                    _ => variable.to_string(),
                };
                vec![(name, v)]
            }
            Set::MultipleAssignments { assignments } => assignments
                .into_iter()
                .map(|a| (a.name.to_string(), a.value))
                .collect(),
            Set::SetTimeZone { value, .. } => vec![("time_zone".into(), value)],
            Set::SetNames { .. } | Set::SetNamesDefault {} => return Ok(Outcome::Ok),
            Set::SetTransaction { .. } => return Ok(Outcome::Ok),
            other => return Err(Error::unsupported(format!("{other}"))),
        };
        for (name, e) in assignments {
            let v = self.set_value(&e)?;
            self.set_variable(&name, v)?;
        }
        Ok(Outcome::Ok)
    }

    /// Sets a variable: `@name` is a user variable, anything else a session variable (an
    /// `@@`, `session.`, `global.` or `local.` prefix is dropped). The MySQL variables in
    /// [`ACCEPTED`] are taken and ignored; any other unknown name is an error.
    fn set_variable(&mut self, name: &str, v: Value) -> Result<()> {
        let raw = name.trim_matches('`');
        if let Some(user) = raw.strip_prefix('@').filter(|u| !u.starts_with('@')) {
            self.user_vars.insert(user.to_lowercase(), v);
            return Ok(());
        }
        let lower = raw.trim_start_matches("@@").to_lowercase();
        if let Some(global) = lower.strip_prefix("global.") {
            if global == "debug" && binlog_format::failpoint::ENABLED {
                return self.set_debug(&v);
            }
            if matches!(global, "read_only" | "super_read_only") {
                return self.set_fence_variable(global, &v);
            }
            if matches!(
                global,
                "binlog_expire_logs_seconds" | "binlog_retention_size"
            ) {
                return self.set_retention_variable(global, &v);
            }
        }
        if matches!(
            lower.as_str(),
            "binlog_expire_logs_seconds"
                | "binlog_retention_size"
                | "read_only"
                | "super_read_only"
                | "session.binlog_expire_logs_seconds"
                | "session.binlog_retention_size"
                | "session.read_only"
                | "session.super_read_only"
        ) {
            let name = lower.trim_start_matches("session.");
            return Err(Error::new(
                code::ER_GLOBAL_VARIABLE,
                format!("Variable '{name}' is a GLOBAL variable and should be set with SET GLOBAL"),
            ));
        }
        if matches!(
            lower.as_str(),
            "net_write_timeout" | "session.net_write_timeout" | "local.net_write_timeout"
        ) {
            // MySQL lets a session raise its own (Debezium's snapshot sets 600 before it
            // reads a table); ringrep's connections write with the server's, so the statement
            // succeeds with a note saying the value was not taken.
            if !matches!(v, Value::Int(_) | Value::UInt(_)) {
                return Err(Error::new(
                    code::ER_WRONG_TYPE_FOR_VAR,
                    "Incorrect argument type to variable 'net_write_timeout'",
                ));
            }
            self.session.warn(
                code::ER_UNKNOWN_ERROR.number,
                format!(
                    "net_write_timeout was not changed: ringrep's connections write with the server's ({} seconds, set at start-up: --net-write-timeout)",
                    self.net_write_timeout
                ),
            );
            return Ok(());
        }
        if lower
            .trim_start_matches("global.")
            .trim_start_matches("session.")
            == "net_write_timeout"
        {
            return Err(Error::new(
                code::ER_INCORRECT_GLOBAL_LOCAL_VAR,
                "Variable 'net_write_timeout' is a read only variable (set it at start-up: --net-write-timeout)",
            ));
        }
        if lower == "global.sql_mode" {
            return Err(Error::unsupported(
                "SET GLOBAL sql_mode (each session sets its own: SET sql_mode)",
            ));
        }
        if lower.trim_start_matches("global.") == "max_binlog_size" {
            return Err(Error::new(
                code::ER_INCORRECT_GLOBAL_LOCAL_VAR,
                "Variable 'max_binlog_size' is a read only variable (set it at start-up: --max-binlog-size)",
            ));
        }
        let lower = lower
            .strip_prefix("session.")
            .or_else(|| lower.strip_prefix("global."))
            .or_else(|| lower.strip_prefix("local."))
            .unwrap_or(&lower)
            .to_string();
        let vars = &mut self.session.vars;
        match lower.as_str() {
            "ndb_ring_buffer_show_meta" => vars.show_meta = on_off(&v, &lower)?,
            "ringrep_checksum_rows" => self.checksum_rows = on_off(&v, &lower)?,
            "foreign_key_checks" => self.foreign_key_checks = on_off(&v, &lower)?,
            // SHOW CREATE TABLE always quotes names (dump tools set it on).
            "sql_quote_show_create" => {
                if !on_off(&v, &lower)? {
                    return Err(wrong_value(&lower, &v));
                }
            }
            "ttl_expired_rows_visible_in_delete" => {
                vars.ttl_expired_visible_in_delete = on_off(&v, &lower)?
            }
            "ndb_log_update_as_write" | "log_update_as_write" => {
                vars.log_update_as_write = on_off(&v, &lower)?
            }
            "autocommit" => {
                let on = on_off(&v, &lower)?;
                if on && !vars.autocommit {
                    // Turning autocommit on commits the open transaction, as in MySQL.
                    self.session.vars.autocommit = true;
                    self.session.commit()?;
                } else {
                    vars.autocommit = on;
                }
            }
            "time_zone" => {
                let s = ringrep_engine::types::text_of(&v);
                vars.tz_offset = parse_tz(&s).ok_or_else(|| {
                    Error::new(
                        code::ER_UNKNOWN_TIME_ZONE,
                        format!("Unknown or incorrect time zone: '{s}'"),
                    )
                })?;
            }
            "timestamp" => {
                vars.timestamp_us = match crate::expr::to_f64(&v) {
                    Some(s) if s > 0.0 => Some((s * 1e6) as i64),
                    _ => None,
                };
            }
            "sql_mode" => {
                let mode = parse_sql_mode(&v)?;
                let has = |m: &str| mode.split(',').any(|x| x == m);
                vars.strict = has("STRICT_TRANS_TABLES") || has("STRICT_ALL_TABLES");
                vars.no_auto_value_on_zero = has("NO_AUTO_VALUE_ON_ZERO");
                self.zero_division_errors = has("ERROR_FOR_DIVISION_BY_ZERO");
                self.sql_mode = mode;
            }
            "cte_max_recursion_depth" => {
                self.cte_max_recursion_depth = match &v {
                    Value::Int(i) => (*i).clamp(0, u32::MAX as i64) as u64,
                    Value::UInt(u) => (*u).min(u32::MAX as u64),
                    _ => {
                        return Err(Error::new(
                            code::ER_WRONG_TYPE_FOR_VAR,
                            "Incorrect argument type to variable 'cte_max_recursion_depth'",
                        ))
                    }
                };
            }
            "lock_wait_timeout" => {
                // MySQL's range, 1 second to a year; outside it the value is clamped with a
                // warning. CDC tools (Debezium's snapshot) set it before they lock tables.
                let secs = match &v {
                    Value::Int(i) => *i,
                    Value::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
                    _ => {
                        return Err(Error::new(
                            code::ER_WRONG_TYPE_FOR_VAR,
                            "Incorrect argument type to variable 'lock_wait_timeout'",
                        ))
                    }
                };
                let clamped = secs.clamp(1, LOCK_WAIT_TIMEOUT_MAX as i64);
                if clamped != secs {
                    self.session.warn(
                        code::ER_TRUNCATED_WRONG_VALUE,
                        format!("Truncated incorrect lock_wait_timeout value: '{secs}'"),
                    );
                }
                self.lock_wait_timeout = clamped as u64;
            }
            "innodb_lock_wait_timeout" => {
                // MySQL's range, in seconds; outside it the value is clamped with a warning.
                let secs = match &v {
                    Value::Int(i) => *i,
                    Value::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
                    _ => {
                        return Err(Error::new(
                            code::ER_WRONG_TYPE_FOR_VAR,
                            "Incorrect argument type to variable 'innodb_lock_wait_timeout'",
                        ))
                    }
                };
                let clamped = secs.clamp(1, 1_073_741_824);
                if clamped != secs {
                    self.session.warn(
                        code::ER_TRUNCATED_WRONG_VALUE,
                        format!("Truncated incorrect innodb_lock_wait_timeout value: '{secs}'"),
                    );
                }
                self.session.vars.lock_wait_timeout =
                    Some(std::time::Duration::from_secs(clamped as u64));
            }
            n if ACCEPTED.contains(&n) => {}
            _ => {
                return Err(Error::new(
                    code::ER_UNKNOWN_SYSTEM_VARIABLE,
                    format!("Unknown system variable '{lower}'"),
                ))
            }
        }
        Ok(())
    }

    /// `SELECT @@name`: the session's variables, and the server's as clients and drivers
    /// ask for them on connect (a MySQL 8.0 server's values where ringrep has no say).
    pub(crate) fn system_variable(&self, name: &str) -> Result<Value> {
        let lower = name.to_lowercase();
        let lower = lower
            .strip_prefix("session.")
            .or_else(|| lower.strip_prefix("global."))
            .unwrap_or(&lower);
        match lower {
            "max_allowed_packet" => Ok(Value::Int(64 << 20)),
            "warning_count" => Ok(Value::UInt(self.diagnostics_count(false) as u64)),
            "error_count" => Ok(Value::UInt(self.diagnostics_count(true) as u64)),
            "socket" => Ok(Value::Null),
            // MySQL's "no limit", which does not fit a signed integer.
            "sql_select_limit" => Ok(Value::UInt(u64::MAX)),
            // Read as names, not booleans.
            "gtid_mode" | "session_track_gtids" => Ok(Value::Text("OFF".into())),
            // MySQL 5.7's name, which 8.0 no longer lists.
            "tx_isolation" => Ok(Value::Text("READ-COMMITTED".into())),
            // Dynamic, and not listed by SHOW VARIABLES: the last sequence number in this
            // node's binlog (for the verifier).
            "ringrep_last_seq" => Ok(Value::UInt(self.engine().last_seq())),
            _ => match self.variables().into_iter().find(|(n, _)| n == lower) {
                Some((_, v)) if v == "ON" => Ok(Value::Int(1)),
                Some((_, v)) if v == "OFF" => Ok(Value::Int(0)),
                Some((_, v)) => Ok(v.parse::<i64>().map(Value::Int).unwrap_or(Value::Text(v))),
                None => Err(Error::new(
                    code::ER_UNKNOWN_SYSTEM_VARIABLE,
                    format!("Unknown system variable '{lower}'"),
                )),
            },
        }
    }

    /// SET GLOBAL debug = 'point=actions;...': arms failpoints in a build that has them (as
    /// MySQL's debug builds take DBUG keywords here); other builds have no such variable.
    fn set_debug(&mut self, v: &Value) -> Result<()> {
        self.require_any_global(&[crate::Privs::SUPER])?;
        let spec = ringrep_engine::types::text_of(v);
        binlog_format::failpoint::configure(&spec).map_err(|e| {
            Error::new(
                code::ER_WRONG_VALUE_FOR_VAR,
                format!("Variable 'debug' can't be set to the value of '{spec}' ({e})"),
            )
        })
    }

    /// SET GLOBAL read_only / super_read_only (SUPER needed): fences this node against
    /// clients' writes, as a failover fences the old primary, until set OFF or the node
    /// restarts. As in MySQL, `super_read_only` ON turns `read_only` on too, and `read_only`
    /// OFF turns both off; the session must not be in a transaction (1192). On a replica the
    /// fence is kept for after its promotion; the replica refuses clients' writes either way.
    fn set_fence_variable(&mut self, name: &str, v: &Value) -> Result<()> {
        self.require_any_global(&[crate::Privs::SUPER])?;
        // A boolean: ON, OFF, TRUE, FALSE, 1 or 0 (MySQL refuses 2 with 1231).
        if matches!(v, Value::Int(n) if *n != 0 && *n != 1) || matches!(v, Value::UInt(n) if *n > 1)
        {
            return Err(wrong_value(name, v));
        }
        let on = on_off(v, name)?;
        if self.session.in_transaction() {
            return Err(Error::new(
                code::ER_LOCK_OR_ACTIVE_TRANSACTION,
                "Can't execute the given command because you have active locked tables or an active transaction",
            ));
        }
        if !on && self.engine().is_read_only() {
            // MySQL would open the replica to clients' writes, which would fork it from its
            // primary; ringrep keeps a replica read-only until it is promoted.
            return Err(Error::new(
                code::ER_WRONG_VALUE_FOR_VAR,
                format!(
                    "Variable '{name}' can't be set to the value of 'OFF' on a replica: \
                     STOP REPLICA; RESET REPLICA ALL promotes it"
                ),
            ));
        }
        let now = self.engine().fence();
        let next = match (name, on) {
            ("super_read_only", true) => Fence::SuperReadOnly,
            ("super_read_only", false) if now == Fence::SuperReadOnly => Fence::ReadOnly,
            ("super_read_only", false) => now,
            (_, true) if now == Fence::Open => Fence::ReadOnly,
            (_, true) => now,
            (_, false) => Fence::Open,
        };
        if next != now {
            self.engine().set_fence(next);
        }
        Ok(())
    }

    /// SET GLOBAL binlog_expire_logs_seconds / binlog_retention_size: the retention in force
    /// until the node stops (SUPER needed, as MySQL's SYSTEM_VARIABLES_ADMIN).
    fn set_retention_variable(&mut self, name: &str, v: &Value) -> Result<()> {
        self.require_any_global(&[crate::Privs::SUPER])?;
        let n = match v {
            Value::Int(i) if *i >= 0 => *i as u64,
            Value::UInt(u) => *u,
            other => {
                return Err(Error::new(
                    code::ER_WRONG_TYPE_FOR_VAR,
                    format!(
                        "Incorrect argument type to variable '{name}' ({})",
                        ringrep_engine::types::text_of(other)
                    ),
                ))
            }
        };
        let engine = self.engine().clone();
        let mut r = engine.retention();
        if name == "binlog_expire_logs_seconds" {
            r.expire = (n > 0).then(|| std::time::Duration::from_secs(n));
        } else {
            r.max_bytes = (n > 0).then_some(n);
            r.hard_cap_bytes = (n > 0).then_some(n.saturating_mul(2));
        }
        engine.set_retention(r);
        Ok(())
    }

    /// The system variables as SHOW VARIABLES lists them (`@@name` reads them too, ON and OFF
    /// as 1 and 0), in name order: the session's, and the server's as clients, drivers and
    /// monitoring tools ask for them (a MySQL 8.0 server's values where ringrep has no say).
    pub(crate) fn variables(&self) -> Vec<(String, String)> {
        let mut all = self.own_variables();
        let fixed: &[(&str, &str)] = &[
            // Connector/J reads these on connect (a missing one fails its connection).
            ("auto_increment_increment", "1"),
            ("auto_increment_offset", "1"),
            ("character_set_client", "utf8mb4"),
            ("character_set_connection", "utf8mb4"),
            ("character_set_database", "utf8mb4"),
            ("character_set_results", "utf8mb4"),
            ("character_set_server", "utf8mb4"),
            ("collation_connection", "utf8mb4_general_ci"),
            // MySQL 8.0's default, as the catalog gives every database and routine (dump
            // tools compare a routine's database collation with this one).
            ("collation_database", "utf8mb4_0900_ai_ci"),
            ("collation_server", "utf8mb4_0900_ai_ci"),
            ("default_storage_engine", "ndbcluster"),
            // What `/` adds to its dividend's scale (source/sql/src/expr/decimal.rs).
            ("div_precision_increment", "4"),
            ("explicit_defaults_for_timestamp", "ON"),
            ("init_connect", ""),
            ("interactive_timeout", "28800"),
            ("license", "Apache-2.0"),
            ("lower_case_table_names", "0"),
            ("max_allowed_packet", "67108864"),
            ("ndb_metadata_sync", "OFF"),
            ("performance_schema", "OFF"),
            ("net_buffer_length", "16384"),
            ("sql_auto_is_null", "OFF"),
            ("sql_log_bin", "ON"),
            ("sql_notes", "ON"),
            ("sql_quote_show_create", "ON"),
            ("sql_select_limit", "18446744073709551615"),
            ("session_track_gtids", "OFF"),
            ("system_time_zone", "UTC"),
            ("transaction_isolation", "READ-COMMITTED"),
            ("transaction_read_only", "OFF"),
            ("unique_checks", "ON"),
            ("version_comment", "ringrep ring buffer tables"),
            ("version_compile_machine", std::env::consts::ARCH),
            ("version_compile_os", "Linux"),
            ("wait_timeout", "28800"),
        ];
        all.extend(fixed.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        all.sort();
        all
    }

    /// The variables whose values this session or its node decides.
    fn own_variables(&self) -> Vec<(String, String)> {
        let v = &self.session.vars;
        let cfg = self.engine().config();
        let retention = self.engine().retention();
        let b = |x: bool| {
            if x {
                "ON".to_string()
            } else {
                "OFF".to_string()
            }
        };
        vec![
            ("autocommit".into(), b(v.autocommit)),
            (
                "cte_max_recursion_depth".into(),
                self.cte_max_recursion_depth.to_string(),
            ),
            (
                "innodb_lock_wait_timeout".into(),
                v.lock_wait_timeout
                    .unwrap_or(cfg.lock_wait_timeout)
                    .as_secs()
                    .max(1)
                    .to_string(),
            ),
            (
                "lock_wait_timeout".into(),
                self.lock_wait_timeout.to_string(),
            ),
            ("foreign_key_checks".into(), b(self.foreign_key_checks)),
            ("ndb_log_update_as_write".into(), b(v.log_update_as_write)),
            ("ndb_ring_buffer_show_meta".into(), b(v.show_meta)),
            ("ringrep_checksum_rows".into(), b(self.checksum_rows)),
            (
                "binlog_expire_logs_seconds".into(),
                retention.expire.map_or(0, |d| d.as_secs()).to_string(),
            ),
            (
                "binlog_retention_size".into(),
                retention.max_bytes.unwrap_or(0).to_string(),
            ),
            // Every change is logged as row events with full images (what CDC tools check).
            // What MySQL-protocol clients of the stream read (docs/cdc.md): row events with
            // CRC32 checksums when asked, column names and the like in every TABLE_MAP.
            ("binlog_checksum".into(), "CRC32".into()),
            ("binlog_format".into(), "ROW".into()),
            ("binlog_row_image".into(), "FULL".into()),
            ("binlog_row_metadata".into(), "FULL".into()),
            ("gtid_mode".into(), "OFF".into()),
            ("log_bin".into(), "ON".into()),
            ("max_binlog_size".into(), cfg.segment_bytes.to_string()),
            // A transaction is one binlog record; a larger one fails with 1197.
            (
                "max_binlog_cache_size".into(),
                cfg.max_transaction_bytes.to_string(),
            ),
            (
                "read_only".into(),
                b(self.engine().is_read_only() || self.engine().fence() != Fence::Open),
            ),
            (
                "server_id".into(),
                self.engine().config().server_id.to_string(),
            ),
            (
                "server_uuid".into(),
                server_uuid(self.engine().config().server_id),
            ),
            ("sql_mode".into(), self.sql_mode.clone()),
            ("time_zone".into(), format_tz(v.tz_offset)),
            ("version".into(), server_version()),
            ("hostname".into(), host_name()),
            ("port".into(), self.port.to_string()),
            ("max_connections".into(), self.max_connections.to_string()),
            (
                "net_write_timeout".into(),
                self.net_write_timeout.to_string(),
            ),
            (
                "datadir".into(),
                format!("{}/", self.engine().dir().display()),
            ),
            // A replica refuses every client's writes, SUPER's too.
            (
                "super_read_only".into(),
                b(self.engine().is_read_only() || self.engine().fence() == Fence::SuperReadOnly),
            ),
            (
                "ttl_expired_rows_visible_in_delete".into(),
                b(v.ttl_expired_visible_in_delete),
            ),
        ]
    }
}

/// The machine's host name (`@@hostname`), as the kernel has it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// A server's UUID, made from its server id (stable across restarts, distinct per id).
fn server_uuid(server_id: u32) -> String {
    format!(
        "{server_id:08x}-0000-4000-8000-{:012x}",
        u64::from(server_id)
    )
}
