//! mysqltest transcripts (`.result` files): splitting them into statements with their output,
//! replaying them against a fresh engine, deviations and reports.
//!
//! A transcript is the statements as executed, each followed by exactly what the server
//! printed: a result set (header line and tab-separated rows), `ERROR <sqlstate>: <message>`,
//! `affected rows: N` / `info: ...` where info was on, `Warnings:` blocks. Lines starting with
//! `#` are echoed comments. A unit is one statement with its output; the runner compares units
//! one by one and counts those listed in a deviations file apart from failures.
//!
//! mysqltest's connection commands, as it echoes them with the connect log on, open and
//! switch sessions: `connect (name, host, user, password, db);` logs in as the account `user`
//! matches from 127.0.0.1 (root, or an empty user, is the node's own superuser; a wrong
//! password prints MySQL's 1045; `db` empty is `test`) and makes it current,
//! `connection name;` switches (`default` is the first session), `disconnect name;` closes
//! one. A session of an account is checked against its grants as they stand at each
//! statement, as the server's are.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use binlog_format::SyncPolicy;
use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::SqlSession;

use super::render::{render_outcome, statement_warnings};
use serde::Deserialize;

/// First words that start a statement in a transcript (mysqltest echoes them as written; the
/// suites write keywords in upper case).
const STATEMENT_WORDS: &[&str] = &[
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "ALTER",
    "TRUNCATE",
    "SET",
    "SHOW",
    "BEGIN",
    "START",
    "COMMIT",
    "ROLLBACK",
    "USE",
    "REPLACE",
    "LOAD",
    "FLUSH",
    "CALL",
    "WITH",
    "EXPLAIN",
    "DESCRIBE",
    "DESC",
    "ANALYZE",
    "OPTIMIZE",
    "LOCK",
    "UNLOCK",
    "SAVEPOINT",
    "RELEASE",
    "DO",
    "RENAME",
    "XA",
    "CHECK",
    "CHECKSUM",
    "REPAIR",
    "HANDLER",
    "PREPARE",
    "EXECUTE",
    "DEALLOCATE",
    // mysqltest's connection commands (see the module's documentation).
    "connect",
    "connection",
    "disconnect",
];

/// One statement of a transcript and what it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unit {
    /// 1-based line of the statement's first line.
    pub(crate) line: usize,
    /// The statement as written, its lines joined with `\n`.
    pub(crate) statement: String,
    /// The lines the statement printed in the transcript.
    pub(crate) expected: Vec<String>,
    /// The delimiter a stored program ended with (`//`), not part of the statement.
    pub(crate) delimiter: Option<&'static str>,
}

fn starts_statement(line: &str) -> bool {
    // A parenthesised first operand of a UNION starts a statement too.
    let line = line.trim_start_matches('(');
    let word: String = line
        .chars()
        .take_while(|c| c.is_ascii_alphabetic() || *c == '_')
        .collect();
    if matches!(word.as_str(), "GRANT" | "REVOKE") {
        // SHOW GRANTS prints lines that start with GRANT too; a statement ends with `;`.
        return line.trim_end().ends_with(';');
    }
    STATEMENT_WORDS.contains(&word.as_str())
        && line[word.len()..]
            .chars()
            .next()
            .is_none_or(|c| c == ' ' || c == ';' || c == '(' || c == '\t')
}

/// Whether `line` starts a stored program (CREATE [DEFINER=...] PROCEDURE, FUNCTION or
/// TRIGGER), whose body holds `;`.
fn stored_program(line: &str) -> bool {
    let upper = line.to_ascii_uppercase();
    let mut words = upper.split_whitespace();
    if words.next() != Some("CREATE") {
        return false;
    }
    words
        .take(3)
        .any(|w| matches!(w, "PROCEDURE" | "FUNCTION" | "TRIGGER"))
}

/// Whether `text` holds `word` as a whole word, in any case.
fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w.eq_ignore_ascii_case(word))
}

/// Lines mysqltest prints for its own commands (not statements, not output).
fn is_runner_line(line: &str) -> bool {
    line.starts_with('#')
        || line.starts_with("include/")
        || (line.starts_with("[connection ") && line.ends_with(']'))
}

/// Splits a transcript into units.
pub(crate) fn parse_transcript(text: &str) -> Vec<Unit> {
    let lines: Vec<&str> = text.lines().collect();
    let mut units = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if !starts_statement(line) {
            i += 1;
            continue;
        }
        let start = i;
        let mut stmt = String::new();
        // A stored program was written under another delimiter (`delimiter //`, which
        // mysqltest does not echo): it ends at the line that ends with it, not at a `;`.
        let program = stored_program(line);
        let mut delimiter = None;
        loop {
            let l = lines[i];
            if program {
                if let Some(d) = ["//", "$$", "|"]
                    .iter()
                    .find(|d| l.trim_end().ends_with(*d))
                {
                    stmt.push_str(l.trim_end().strip_suffix(d).unwrap_or(l));
                    delimiter = Some(*d);
                    i += 1;
                    break;
                }
            }
            stmt.push_str(l);
            // A stored program without BEGIN ... END (a trigger of one statement) has no `;`
            // of its own: it ends at one, as under the default delimiter.
            let compound = program && has_word(&stmt, "BEGIN");
            if (!compound && l.trim_end().ends_with(';')) || i + 1 >= lines.len() {
                i += 1;
                break;
            }
            stmt.push('\n');
            i += 1;
        }
        let mut expected = Vec::new();
        while i < lines.len() && !starts_statement(lines[i]) && !is_runner_line(lines[i]) {
            expected.push(lines[i].to_string());
            i += 1;
        }
        // A `Warnings:` block of a mysqltest include that follows a runner line is not ours.
        units.push(Unit {
            line: start + 1,
            statement: stmt,
            expected,
            delimiter,
        });
    }
    units
}

/// `--write_file $MYSQLTEST_VARDIR/tmp/x ... EOF` blocks of a `.test` script: the files its
/// LOAD DATA statements read.
pub(crate) fn write_file_blocks(test: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = test.lines();
    while let Some(l) = lines.next() {
        let t = l.trim();
        let Some(path) = t
            .strip_prefix("--write_file")
            .or_else(|| t.strip_prefix("write_file"))
        else {
            continue;
        };
        let path = path
            .trim()
            .trim_end_matches(';')
            .trim()
            .replace("$MYSQLTEST_VARDIR", "MYSQLTEST_VARDIR");
        let mut content = String::new();
        for c in lines.by_ref() {
            if c.trim() == "EOF" {
                break;
            }
            content.push_str(c);
            content.push('\n');
        }
        out.push((path, content));
    }
    out
}

/// A statement the spec makes behave differently from a recording.
#[derive(Debug, Clone, Deserialize)]
pub struct Deviation {
    /// Transcript path relative to the conformance folder, e.g. `ndb_ring_buffer/r/create.result`.
    pub file: String,
    /// Line of the statement in the transcript.
    pub line: usize,
    /// The statement's first line, to catch a stale entry.
    pub statement: String,
    /// Why, citing the spec.
    pub reason: String,
    /// `spec` (the spec overrides the recording), `unsupported` (a MySQL feature ringrep does
    /// not have yet) or `runner` (the transcript needs more than one engine can replay).
    #[serde(default = "spec_kind")]
    pub kind: String,
    /// What ringrep prints for the statement instead, exactly: a deviation allows this
    /// output, not any (`None`: not recorded, any output is let through).
    #[serde(default)]
    pub prints: Option<Vec<String>>,
}

fn spec_kind() -> String {
    "spec".into()
}

#[derive(Debug, Deserialize)]
struct DeviationFile {
    #[serde(default)]
    deviation: Vec<Deviation>,
}

/// The `[[deviation]]` entries of the TOML file at `path`; none when the file does not exist.
pub fn load_deviations(path: &Path) -> anyhow::Result<Vec<Deviation>> {
    if !path.exists() {
        return Ok(vec![]);
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let f: DeviationFile =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(f.deviation)
}

/// One unit whose output differed.
#[derive(Debug, Clone)]
pub struct Mismatch {
    /// 1-based line of the statement in the transcript.
    pub line: usize,
    /// The statement as written (several lines for a multi-line statement).
    pub statement: String,
    /// What the transcript says the statement printed.
    pub expected: Vec<String>,
    /// What ringrep printed, rendered the same way.
    pub actual: Vec<String>,
    /// The deviation's reason when the unit is a listed deviation; `None` for a failure.
    pub deviation: Option<String>,
}

/// The outcome of replaying one transcript, or the sum of several ([`RunReport::add`]).
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// Statements whose output matched the transcript.
    pub passed: usize,
    /// Statements whose output differed and that no deviation lists.
    pub failed: usize,
    /// Statements whose output differed as a listed deviation allows.
    pub deviations: usize,
    /// Listed deviations by kind.
    pub by_kind: std::collections::BTreeMap<String, usize>,
    /// Every statement whose output differed, failures and deviations alike, in order.
    pub mismatches: Vec<Mismatch>,
    /// Deviation entries whose statement text no longer matches the transcript, or whose
    /// statement now passes (the entry is obsolete).
    pub stale_deviations: Vec<String>,
}

impl RunReport {
    /// Statements replayed: passed, failed and deviations.
    pub fn total(&self) -> usize {
        self.passed + self.failed + self.deviations
    }

    /// Adds `other`'s counts, mismatches and stale entries to this report.
    pub fn add(&mut self, other: RunReport) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.deviations += other.deviations;
        for (k, v) in other.by_kind {
            *self.by_kind.entry(k).or_default() += v;
        }
        self.mismatches.extend(other.mismatches);
        self.stale_deviations.extend(other.stale_deviations);
    }
}

/// Counts one statement of a transcript: passed, a listed deviation or a failure, and flags
/// a deviation entry that no longer matches. `problem` (a step mysqltest would have failed
/// on) makes the statement differ even when its output matches.
fn judge(
    report: &mut RunReport,
    u: &Unit,
    mut actual: Vec<String>,
    dev: Option<&Deviation>,
    problem: Option<&str>,
) {
    if let Some(d) = dev {
        let first = u.statement.lines().next().unwrap_or("");
        if first.trim() != d.statement.trim() {
            report.stale_deviations.push(format!(
                "{}:{}: listed as {:?}, transcript has {:?}",
                d.file, d.line, d.statement, first
            ));
        }
    }
    if let Some(p) = problem {
        actual.push(format!("-- ringrep-mysqltest: {p}"));
    }
    if actual == u.expected {
        report.passed += 1;
        if let Some(d) = dev {
            report.stale_deviations.push(format!(
                "{}:{}: listed as a deviation but passes now; remove the entry",
                d.file, d.line
            ));
        }
        return;
    }
    match dev {
        // The deviation allows what it recorded ringrep printing, nothing else.
        Some(d) if d.prints.as_ref().is_some_and(|p| *p != actual) => {
            report.failed += 1;
            actual.push(format!(
                "-- ringrep-mysqltest: a listed deviation ({}:{}), but ringrep printed something else than it records",
                d.file, d.line
            ));
            report.mismatches.push(Mismatch {
                line: u.line,
                statement: u.statement.clone(),
                expected: d.prints.clone().unwrap_or_default(),
                actual,
                deviation: None,
            });
            return;
        }
        Some(d) => {
            report.deviations += 1;
            *report.by_kind.entry(d.kind.clone()).or_default() += 1;
        }
        None => report.failed += 1,
    }
    report.mismatches.push(Mismatch {
        line: u.line,
        statement: u.statement.clone(),
        expected: u.expected.clone(),
        actual,
        deviation: dev.map(|d| d.reason.clone()),
    });
}

/// A part of a transcript: a statement with what it printed, or the text between statements
/// (`--echo` lines, include names, `--exec` output, results of statements not echoed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Block {
    /// A statement and its output.
    Statement(Unit),
    /// Lines that belong to no statement, from 1-based line `line`.
    Text {
        /// 1-based line of the first.
        line: usize,
        /// The lines.
        lines: Vec<String>,
    },
}

/// The statements (each covering its lines and output) and the text between them, in order.
fn blocks(lines: &[&str], units: Vec<Unit>) -> Vec<Block> {
    let mut out = Vec::new();
    let mut at = 0;
    let text = |from: usize, to: usize, out: &mut Vec<Block>| {
        if from < to {
            out.push(Block::Text {
                line: from + 1,
                lines: lines[from..to].iter().map(|l| l.to_string()).collect(),
            });
        }
    };
    for u in units {
        let start = u.line - 1;
        text(at, start, &mut out);
        at = start + u.statement.lines().count().max(1) + u.expected.len();
        out.push(Block::Statement(u));
    }
    text(at, lines.len(), &mut out);
    out
}

/// A recording's blocks (statements found by their first words, as [`parse_transcript`]).
pub(crate) fn parse_blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    blocks(&lines, parse_transcript(text))
}

/// A run's blocks: its statements are where the runner echoed them, whatever their words.
fn run_blocks(run: &super::runner::RunOutput) -> Vec<Block> {
    let lines: Vec<&str> = run.lines.iter().map(String::as_str).collect();
    let starts: std::collections::HashSet<usize> = run.statements.iter().map(|s| s.0).collect();
    let units = run
        .statements
        .iter()
        .map(|&(first, n)| {
            let end = (first + n).min(lines.len());
            let mut statement = lines[first..end].join("\n");
            // A stored program's delimiter is not part of it, as a recording is read.
            if stored_program(lines[first]) {
                for d in ["//", "$$", "|"] {
                    if let Some(s) = statement.trim_end().strip_suffix(d) {
                        statement = s.to_string();
                        break;
                    }
                }
            }
            let mut i = end;
            let mut expected = Vec::new();
            while i < lines.len() && !starts.contains(&i) && !is_runner_line(lines[i]) {
                expected.push(lines[i].to_string());
                i += 1;
            }
            Unit {
                line: first + 1,
                statement,
                expected,
                delimiter: None,
            }
        })
        .collect();
    blocks(&lines, units)
}

/// A text block as compared: an include's own `Warnings:` block (what the statements it runs
/// on a MySQL server warn of, such as CHANGE MASTER's about passwords) left out.
fn comparable_text(lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_include = false;
    let mut skipping = false;
    for l in lines {
        if l.starts_with("include/") {
            in_include = true;
            skipping = false;
        } else if in_include && l == "Warnings:" {
            skipping = true;
            continue;
        } else if skipping && (l.starts_with("Note\t") || l.starts_with("Warning\t")) {
            continue;
        } else {
            skipping = false;
            in_include = in_include && !l.starts_with('#') && !l.starts_with("[connection ");
        }
        out.push(l.clone());
    }
    out
}

/// Compares what a script run printed with its recording, block by block: each statement
/// (the same statement, its output matching or a listed deviation) and the text between
/// statements (`--echo`, `--exec` output, includes), which must match. A script from another
/// revision than its recording is reported where the two part ways, and every later
/// statement counts as failed. A problem the run met (a wrong error, a failed command) fails
/// the statement it belongs to, or counts as a failure of its own.
pub fn compare_run(
    recorded: &str,
    run: &super::runner::RunOutput,
    rel_name: &str,
    deviations: &[Deviation],
) -> RunReport {
    let devs: HashMap<usize, &Deviation> = deviations
        .iter()
        .filter(|d| d.file == rel_name)
        .map(|d| (d.line, d))
        .collect();
    let expected = parse_blocks(recorded);
    let actual = run_blocks(run);
    let mut report = RunReport::default();
    let same = |a: &str, b: &str| a.lines().map(str::trim).eq(b.lines().map(str::trim));
    let statements_left = |from: usize| {
        expected[from..]
            .iter()
            .filter(|b| matches!(b, Block::Statement(_)))
            .count()
    };
    let mut attached = std::collections::HashSet::new();
    for (i, e) in expected.iter().enumerate() {
        let a = actual.get(i);
        match (e, a) {
            (Block::Statement(e), Some(Block::Statement(a)))
                if same(&a.statement, &e.statement) =>
            {
                let problems: Vec<&str> = run
                    .problems
                    .iter()
                    .filter(|p| p.output_line == Some(a.line))
                    .map(|p| p.text.as_str())
                    .collect();
                attached.insert(a.line);
                let problem = (!problems.is_empty()).then(|| problems.join("; "));
                judge(
                    &mut report,
                    e,
                    a.expected.clone(),
                    devs.get(&e.line).copied(),
                    problem.as_deref(),
                );
            }
            (Block::Text { line, lines }, Some(Block::Text { lines: got, .. })) => {
                if comparable_text(lines) != comparable_text(got) {
                    report.failed += 1;
                    report.mismatches.push(Mismatch {
                        line: *line,
                        statement: format!("(text) {}", lines.first().map_or("", |l| l.as_str())),
                        expected: lines.clone(),
                        actual: got.clone(),
                        deviation: None,
                    });
                }
            }
            _ => {
                let (line, first) = match e {
                    Block::Statement(u) => (u.line, u.statement.clone()),
                    Block::Text { line, lines } => (
                        *line,
                        format!("(text) {}", lines.first().map_or("", |l| l.as_str())),
                    ),
                };
                let ran = match a {
                    None => "nothing (the script ended)".to_string(),
                    Some(Block::Statement(u)) => {
                        format!("{:?} (output line {})", u.statement, u.line)
                    }
                    Some(Block::Text { line, lines }) => format!(
                        "the text {:?} (output line {line})",
                        lines.first().map_or("", |l| l.as_str())
                    ),
                };
                let left = statements_left(i).max(1);
                report.failed += left;
                report.mismatches.push(Mismatch {
                    line,
                    statement: first,
                    expected: vec![],
                    actual: vec![format!(
                        "-- ringrep-mysqltest: the script and the recording part ways here: the script ran {ran}; the {left} statements from here on count as failed"
                    )],
                    deviation: None,
                });
                return report;
            }
        }
    }
    if actual.len() > expected.len() {
        let (line, what) = match &actual[expected.len()] {
            Block::Statement(u) => (u.line, u.statement.clone()),
            Block::Text { line, lines } => (*line, lines.first().cloned().unwrap_or_default()),
        };
        report.failed += 1;
        report.mismatches.push(Mismatch {
            line,
            statement: what,
            expected: vec![],
            actual: vec![format!(
                "-- ringrep-mysqltest: the script prints {} more blocks than the recording holds",
                actual.len() - expected.len()
            )],
            deviation: None,
        });
    }
    for p in run
        .problems
        .iter()
        .filter(|p| p.output_line.is_none_or(|l| !attached.contains(&l)))
    {
        report.failed += 1;
        report.mismatches.push(Mismatch {
            line: 0,
            statement: format!("(script line {})", p.script_line),
            expected: vec![],
            actual: vec![format!("-- ringrep-mysqltest: {}", p.text)],
            deviation: None,
        });
    }
    report
}

/// Options of one run.
#[derive(Debug)]
pub(crate) struct RunOptions<'a> {
    /// Deviations of this transcript, by line.
    pub(crate) deviations: HashMap<usize, &'a Deviation>,
    /// Files the transcript's LOAD DATA statements read: (path, content).
    pub(crate) files: Vec<(String, String)>,
}

/// Replays `units` against a fresh engine in a temporary directory.
pub(crate) fn run_units(
    units: &[Unit],
    opts: &RunOptions<'_>,
) -> anyhow::Result<(RunReport, Vec<Vec<String>>)> {
    let dir = tempfile::tempdir()?;
    let mut cfg = EngineConfig::new(1);
    cfg.sync = SyncPolicy::Never;
    cfg.lock_wait_timeout = std::time::Duration::from_millis(200);
    let (engine, _) = Engine::open(&dir.path().join("data"), cfg)?;
    let load_dir = dir.path().join("files");
    for (path, content) in &opts.files {
        let p = load_dir.join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, content)?;
    }
    let mut root = SqlSession::new(&engine);
    root.load_dir = Some(load_dir);
    let mut sessions: HashMap<String, SqlSession> = HashMap::new();
    sessions.insert("default".into(), root);
    let mut current = "default".to_string();
    let cache = ringrep_sql::AccountCache::default();
    let mut report = RunReport::default();
    let mut actual_all = Vec::new();
    for u in units {
        if let Some(result) =
            connection_command(&u.statement, &engine, &cache, &mut sessions, &mut current)
        {
            let actual = render_outcome(
                &result.map(|()| ringrep_sql::Outcome::Ok),
                false,
                &[],
                false,
            );
            let dev = opts.deviations.get(&u.line).copied();
            judge(&mut report, u, actual.clone(), dev, None);
            actual_all.push(actual);
            continue;
        }
        let session = sessions
            .get_mut(&current)
            .with_context(|| format!("line {}: no connection {current}", u.line))?;
        refresh_grants(session, &cache, &engine);
        let result = session.execute(&u.statement);
        // Read without clearing: the transcript's own SHOW WARNINGS lists them next, as the
        // server's diagnostics area does (the next statement replaces them).
        let warnings = statement_warnings(session, &u.statement);
        let info = u.expected.iter().any(|l| l.starts_with("affected rows: "));
        let show_warnings = u.expected.iter().any(|l| l == "Warnings:");
        let actual = render_outcome(&result, info, &warnings, show_warnings);
        let dev = opts.deviations.get(&u.line).copied();
        judge(&mut report, u, actual.clone(), dev, None);
        actual_all.push(actual);
    }
    Ok((report, actual_all))
}

/// Runs `statement` if it is one of mysqltest's connection commands (`None` otherwise): its
/// error is what the transcript prints.
fn connection_command(
    statement: &str,
    engine: &Engine,
    cache: &ringrep_sql::AccountCache,
    sessions: &mut HashMap<String, SqlSession>,
    current: &mut String,
) -> Option<Result<(), ringrep_engine::Error>> {
    let text = statement.trim().trim_end_matches(';').trim();
    let (command, arg) = text.split_once([' ', '('])?;
    let arg = arg.trim().trim_start_matches('(').trim_end_matches(')');
    let name = arg.split(',').next().unwrap_or("").trim().to_string();
    let no_such = |n: &str| {
        ringrep_engine::Error::new(
            ringrep_engine::error::code::ER_UNKNOWN_ERROR,
            format!("no connection named {n}"),
        )
    };
    Some(match command {
        "connection" => {
            if sessions.contains_key(&name) {
                *current = name;
                Ok(())
            } else {
                Err(no_such(&name))
            }
        }
        "disconnect" => sessions
            .remove(&name)
            .map(|_| ())
            .ok_or_else(|| no_such(&name)),
        "connect" => {
            let parts: Vec<String> = arg.split(',').map(|p| p.trim().to_string()).collect();
            let get = |i: usize| parts.get(i).cloned().unwrap_or_default();
            let (user, password, db) = (get(2), get(3), get(4));
            let db = if db.is_empty() {
                "test".to_string()
            } else {
                db
            };
            login(engine, cache, &user, &password, &db).map(|s| {
                sessions.insert(name.clone(), s);
                *current = name;
            })
        }
        _ => return None,
    })
}

/// A session of `user` logged in from 127.0.0.1 with `password`, in database `db` (entered
/// as USE enters it, so an account that may not is refused there as MySQL refuses the
/// login).
fn login(
    engine: &Engine,
    cache: &ringrep_sql::AccountCache,
    user: &str,
    password: &str,
    db: &str,
) -> Result<SqlSession, ringrep_engine::Error> {
    let mut s = SqlSession::new(engine);
    if !user.is_empty() && user != "root" {
        let peer = std::net::IpAddr::from([127, 0, 0, 1]);
        let dir = cache.get(engine);
        let account = dir
            .login(user, peer)
            .filter(|a| a.hash == ringrep_sql::store::password_hash(password) && !a.locked)
            .ok_or_else(|| {
                ringrep_engine::Error::new(
                    ringrep_engine::error::code::ER_ACCESS_DENIED_ERROR,
                    format!(
                        "Access denied for user '{user}'@'localhost' (using password: {})",
                        if password.is_empty() { "NO" } else { "YES" }
                    ),
                )
            })?;
        s.set_authority(Some(ringrep_sql::Authority {
            grants: Some(std::sync::Arc::new(dir.grants_of(&account.name))),
            account: account.name.clone(),
            client_host: "localhost".into(),
        }));
    }
    s.execute(&format!("USE `{db}`"))?;
    Ok(s)
}

/// An account's session takes its grants as they stand now, as the server's sessions do at
/// each statement.
fn refresh_grants(session: &mut SqlSession, cache: &ringrep_sql::AccountCache, engine: &Engine) {
    let Some(a) = session.authority.clone() else {
        return;
    };
    if a.grants.is_none() {
        return;
    }
    let grants = cache.get(engine).grants_of(&a.account);
    session.set_authority(Some(ringrep_sql::Authority {
        grants: Some(std::sync::Arc::new(grants)),
        ..a
    }));
}

/// Runs one transcript file, with its deviations and its `.test` companion's files.
pub fn run_file(
    path: &Path,
    rel_name: &str,
    deviations: &[Deviation],
) -> anyhow::Result<RunReport> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let units = parse_transcript(&text);
    let test_path = companion_test(path);
    let files = match test_path.and_then(|p| std::fs::read_to_string(p).ok()) {
        Some(t) => write_file_blocks(&t),
        None => vec![],
    };
    let devs = deviations
        .iter()
        .filter(|d| d.file == rel_name)
        .map(|d| (d.line, d))
        .collect();
    let (report, _) = run_units(
        &units,
        &RunOptions {
            deviations: devs,
            files,
        },
    )?;
    Ok(report)
}

/// `suite/r/x.result` -> `suite/t/x.test`.
pub(crate) fn companion_test(result: &Path) -> Option<PathBuf> {
    let name = result.file_stem()?.to_str()?;
    let suite = result.parent()?.parent()?;
    let p = suite.join("t").join(format!("{name}.test"));
    p.exists().then_some(p)
}

/// Writes a transcript: each statement followed by what it printed now (comments kept).
pub fn record(text: &str) -> anyhow::Result<String> {
    let units = parse_transcript(text);
    let (_, actual) = run_units(
        &units,
        &RunOptions {
            deviations: HashMap::new(),
            files: vec![],
        },
    )?;
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut li = 0;
    for (u, a) in units.iter().zip(actual) {
        // Keep the comment lines before the statement.
        while li + 1 < u.line {
            if is_runner_line(lines[li]) {
                out.push_str(lines[li]);
                out.push('\n');
            }
            li += 1;
        }
        out.push_str(&u.statement);
        out.push_str(u.delimiter.unwrap_or(""));
        out.push('\n');
        for l in a {
            out.push_str(&l);
            out.push('\n');
        }
        li = u.line - 1 + u.statement.lines().count() + u.expected.len();
    }
    while li < lines.len() {
        if is_runner_line(lines[li]) {
            out.push_str(lines[li]);
            out.push('\n');
        }
        li += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcripts_split_into_units() {
        let t = "#\n# Case\n#\nCREATE TABLE t (\na INT);\nSELECT a FROM t\nWHERE a = 1;\na\n1\nINSERT INTO t VALUES (1);\nERROR 23000: Duplicate\n";
        let u = parse_transcript(t);
        assert_eq!(u.len(), 3);
        assert_eq!(u[0].statement, "CREATE TABLE t (\na INT);");
        assert!(u[0].expected.is_empty());
        assert_eq!(u[1].line, 6);
        assert_eq!(u[1].expected, vec!["a", "1"]);
        assert_eq!(u[2].expected, vec!["ERROR 23000: Duplicate"]);
    }

    #[test]
    fn a_trigger_of_one_statement_ends_at_its_semicolon() {
        let t = "CREATE TRIGGER a BEFORE INSERT ON t\nFOR EACH ROW SET @n = @n + 1;\nCREATE TRIGGER b AFTER INSERT ON t FOR EACH ROW\nBEGIN\nSET @n = 0;\nEND//\nSELECT 1;\n1\n1\n";
        let u = parse_transcript(t);
        assert_eq!(u.len(), 3, "{u:?}");
        assert_eq!(
            u[0].statement,
            "CREATE TRIGGER a BEFORE INSERT ON t\nFOR EACH ROW SET @n = @n + 1;"
        );
        assert_eq!(u[0].delimiter, None);
        assert_eq!(u[1].delimiter, Some("//"));
        assert_eq!(u[2].expected, vec!["1", "1"]);
    }

    fn run(lines: &[&str], statements: &[(usize, usize)]) -> super::super::runner::RunOutput {
        super::super::runner::RunOutput {
            lines: lines.iter().map(|l| l.to_string()).collect(),
            statements: statements.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn text_between_statements_is_compared_and_unrecognized_statements_part_ways() {
        let recorded = "SELECT 1;\n1\n1\n# note\ngoodbye\nSELECT 2;\n2\n2\n";
        let same = run(
            &[
                "SELECT 1;",
                "1",
                "1",
                "# note",
                "goodbye",
                "SELECT 2;",
                "2",
                "2",
            ],
            &[(0, 1), (5, 1)],
        );
        let r = compare_run(recorded, &same, "x", &[]);
        assert_eq!((r.passed, r.failed), (2, 0));
        // --exec output after an echo line differs: a failure, not ignored.
        let other = run(
            &[
                "SELECT 1;",
                "1",
                "1",
                "# note",
                "hello",
                "SELECT 2;",
                "2",
                "2",
            ],
            &[(0, 1), (5, 1)],
        );
        let r = compare_run(recorded, &other, "x", &[]);
        assert_eq!((r.passed, r.failed), (2, 1));
        // A statement the recording's reader does not take for one (lower case): the two
        // part ways, loudly.
        let lower = "select 1;\n1\n1\n";
        let r = compare_run(lower, &run(&["select 1;", "1", "1"], &[(0, 1)]), "x", &[]);
        assert_eq!(r.failed, 1);
        // A problem of the run fails the statement even when its output matches.
        let mut p = run(&["SELECT 1;", "1", "1"], &[(0, 1)]);
        p.problems.push(super::super::runner::Problem {
            script_line: 1,
            output_line: Some(1),
            text: "query succeeded, but an error was expected".into(),
        });
        let r = compare_run("SELECT 1;\n1\n1\n", &p, "x", &[]);
        assert_eq!((r.passed, r.failed), (0, 1));
    }

    #[test]
    fn an_includes_own_warnings_are_not_compared() {
        let recorded = "include/rpl/init_source_replica.inc\nWarnings:\nNote\t####\tSending passwords\n[connection master]\nSELECT 1;\n1\n1\n";
        let ours = run(
            &[
                "include/rpl/init_source_replica.inc",
                "[connection master]",
                "SELECT 1;",
                "1",
                "1",
            ],
            &[(2, 1)],
        );
        let r = compare_run(recorded, &ours, "x", &[]);
        assert_eq!((r.passed, r.failed), (1, 0));
    }

    #[test]
    fn write_file_blocks_are_found() {
        let t = "--write_file $MYSQLTEST_VARDIR/tmp/a.csv\n1,x\n2,y\nEOF\nSELECT 1;\n";
        assert_eq!(
            write_file_blocks(t),
            vec![(
                "MYSQLTEST_VARDIR/tmp/a.csv".to_string(),
                "1,x\n2,y\n".to_string()
            )]
        );
    }
}
