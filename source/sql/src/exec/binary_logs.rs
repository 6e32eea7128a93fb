//! `PURGE BINARY LOGS TO 'binlog.NNNNNN'` and `PURGE BINARY LOGS BEFORE datetime` (also with
//! MySQL 5.7's `MASTER`): whole segments removed, never one that recovery needs (what the
//! newest snapshot does not cover), one a connected replica still reads, or the one being
//! written, as the engine's retention decides ([`ringrep_engine::Engine::purge_binlogs_to`]).

use binlog_format::Value;
use ringrep_engine::error::{code, Error, Result};

use crate::accounts::Privs;
use crate::{parse::lexer, Outcome, SqlSession};

/// MySQL's note for a log it kept although it was asked to go (in use).
const ER_WARN_PURGE_LOG_IN_USE: u16 = 1867;
/// MySQL's error for a `TO` name that is not in the index.
const ER_UNKNOWN_TARGET_BINLOG: ringrep_engine::error::Code =
    ringrep_engine::error::Code::new(1373, "HY000");

impl SqlSession {
    /// PURGE BINARY LOGS; `text` is the whole statement.
    pub(crate) fn purge_binary_logs(&mut self, text: &str) -> Result<Outcome> {
        // A replica's own binlog may be purged too (MySQL allows it on a read-only server).
        self.require_any_global(&[Privs::BINLOG_ADMIN, Privs::SUPER])?;
        let words = lexer::first_words(text, 4);
        if words.get(2).map(String::as_str) != Some("LOGS") {
            return Err(Error::syntax(
                "You have an error in your SQL syntax; PURGE BINARY LOGS TO 'name' or BEFORE datetime",
            ));
        }
        let rest = after_words(text, 3);
        let upper = rest.to_ascii_uppercase();
        let outcome = if upper.starts_with("TO")
            && !upper[2..].starts_with(|c: char| c.is_alphanumeric())
        {
            let (name, tail) = lexer::take_string(&rest[2..]).ok_or_else(|| {
                Error::syntax("You have an error in your SQL syntax; PURGE BINARY LOGS TO needs a quoted file name")
            })?;
            if !tail.trim().is_empty() {
                return Err(Error::syntax(format!(
                    "You have an error in your SQL syntax near '{}'",
                    tail.trim()
                )));
            }
            let number = binlog_format::segment::parse_segment_name(&name)
                .filter(|n| {
                    self.engine()
                        .binlog_segments()
                        .is_ok_and(|s| s.iter().any(|i| i.number == *n))
                })
                .ok_or_else(|| {
                    Error::new(
                        ER_UNKNOWN_TARGET_BINLOG,
                        "Target log not found in binlog index",
                    )
                })?;
            // A snapshot first when recovery would keep the segments: PURGE does what it says.
            self.engine().purge_binlogs_to(number, true)?
        } else if upper.starts_with("BEFORE") {
            let expr = rest[6..].trim();
            let secs = match self.execute(&format!("SELECT UNIX_TIMESTAMP({expr})"))? {
                Outcome::Rows(rs) => rs
                    .rows
                    .first()
                    .and_then(|r| r.first())
                    .and_then(seconds),
                _ => None,
            }
            .ok_or_else(|| {
                Error::new(
                    code::ER_WRONG_ARGUMENTS,
                    format!("Incorrect arguments to PURGE BINARY LOGS BEFORE: {expr} is not a date and time"),
                )
            })?;
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(secs.max(0.0));
            self.engine().purge_binlogs_before(at)?
        } else {
            return Err(Error::syntax(
                "You have an error in your SQL syntax; PURGE BINARY LOGS TO 'name' or BEFORE datetime",
            ));
        };
        if let Some(kept) = outcome.kept_for_readers {
            self.session.warn(
                ER_WARN_PURGE_LOG_IN_USE,
                format!(
                    "file {kept} was not purged because it is being read by a replica or a backup; purged only the files before it"
                ),
            );
        }
        if let Some(kept) = outcome.kept_for_recovery {
            self.session.warn(
                ER_WARN_PURGE_LOG_IN_USE,
                format!(
                    "file {kept} was not purged because crash recovery needs it (it holds transactions after the newest snapshot)"
                ),
            );
        }
        Ok(Outcome::Ok)
    }
}

/// `text` after its first `n` words.
fn after_words(text: &str, n: usize) -> &str {
    let mut rest = text.trim_start();
    for _ in 0..n {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        rest = rest[end..].trim_start();
    }
    rest
}

fn seconds(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Decimal(d) => d.parse().ok(),
        Value::Double(d) => Some(*d),
        Value::Text(t) => t.parse().ok(),
        _ => None,
    }
}
