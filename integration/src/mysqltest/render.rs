//! What a statement printed, as mysqltest prints it: the result set, the error line, the
//! `--enable_info` lines and the `Warnings:` block. The script runner and the transcript
//! replayer both print through it, so their outputs compare line for line.

use ringrep_sql::{Outcome, SqlSession};

/// What a statement printed, as mysqltest would print it. `info` and `warnings` follow the
/// expected output: they are runner switches (`--enable_info`), not server behaviour.
pub(crate) fn render_outcome(
    result: &Result<Outcome, ringrep_engine::Error>,
    info: bool,
    warnings: &[(u16, String)],
    show_warnings: bool,
) -> Vec<String> {
    let mut out = render_result(result, info);
    if show_warnings {
        out.extend(render_warnings(warnings));
    }
    out
}

/// A statement's result as mysqltest prints it: a result set (header, then one line per row,
/// NULL as `NULL`), `ERROR <sqlstate>: <message>`, or with `info` on the `affected rows` and
/// `info` lines.
pub(crate) fn render_result(
    result: &Result<Outcome, ringrep_engine::Error>,
    info: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    match result {
        Ok(Outcome::Rows(rs)) => {
            out.push(rs.columns.join("\t"));
            for r in rs.text_rows() {
                // A value with line breaks (SHOW CREATE TABLE) prints over several lines.
                let line = r
                    .iter()
                    .map(|v| v.clone().unwrap_or_else(|| "NULL".into()))
                    .collect::<Vec<_>>()
                    .join("\t");
                out.extend(line.split('\n').map(str::to_string));
            }
            // mysqltest prints the client's affected-rows count after a result set too: the
            // rows it returned.
            if info {
                out.push(format!("affected rows: {}", rs.text_rows().len()));
            }
        }
        Ok(Outcome::Affected {
            rows, info: text, ..
        }) => {
            if info {
                out.push(format!("affected rows: {rows}"));
                if let Some(t) = text {
                    out.push(format!("info: {t}"));
                }
            }
        }
        Ok(Outcome::Ok) => {
            if info {
                out.push("affected rows: 0".into());
            }
        }
        Err(e) => out.push(format!("ERROR {}: {}", e.sqlstate, e.message)),
    }
    out
}

/// The `Warnings:` block mysqltest prints after a statement that left warnings (nothing when
/// there are none).
pub(crate) fn render_warnings(warnings: &[(u16, String)]) -> Vec<String> {
    if warnings.is_empty() {
        return vec![];
    }
    let mut out = vec!["Warnings:".to_string()];
    for (c, m) in warnings {
        let level = ringrep_sql::warning_level(*c);
        // A note's code carries the level marker; SHOW WARNINGS prints the bare number.
        let number = c & !ringrep_engine::types::NOTE_LEVEL;
        out.push(format!("{level}\t{number}\t{m}"));
    }
    out
}

/// The warnings mysqltest prints after `sql` ran: the session's, read without clearing them,
/// so that a script's own `SHOW WARNINGS` next lists them again as the server's diagnostics
/// area does (the session replaces them when the next statement runs). None after SHOW
/// WARNINGS and SHOW ERRORS themselves, whose rows are those warnings already.
pub(crate) fn statement_warnings(session: &SqlSession, sql: &str) -> Vec<(u16, String)> {
    if shows_diagnostics(sql) {
        return Vec::new();
    }
    session.session.warnings().to_vec()
}

/// Whether `sql` is SHOW WARNINGS, SHOW ERRORS or `SHOW COUNT(*) WARNINGS|ERRORS`.
pub(crate) fn shows_diagnostics(sql: &str) -> bool {
    let words: Vec<String> = sql
        .split(|c: char| c.is_whitespace() || c == ';')
        .filter(|w| !w.is_empty())
        .take(3)
        .map(str::to_ascii_uppercase)
        .collect();
    let w = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    w(0) == "SHOW"
        && (matches!(w(1), "WARNINGS" | "ERRORS")
            || (w(1) == "COUNT(*)" && matches!(w(2), "WARNINGS" | "ERRORS")))
}
