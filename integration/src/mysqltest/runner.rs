//! Running a `.test` script as mysqltest does, against ringrep nodes made for the run.
//!
//! Every run gets fresh nodes in a temporary directory: the source (`master`, where the
//! `default` connection goes) and, for the replication topology, a replica (`slave`) that the
//! real applier feeds from the source's binlog. Each connection (`connect`, `connection`,
//! `disconnect`) is its own SQL session, so variables, transactions and locks are per
//! connection. `sync_slave_with_master` applies everything the source committed. Each node
//! also serves the MySQL protocol on a loopback port, so `--exec` can run real clients and
//! tools against it (`$MYSQL`, `$MYSQL_BINLOG`).
//!
//! The output is what mysqltest writes to a `.result` file: each statement echoed with its
//! delimiter, then its result set, `ERROR <sqlstate>: <message>`, `affected rows` and `info`
//! lines (with `--enable_info`), a `Warnings:` block, `--echo` text and `--exec` output.
//! Where mysqltest would stop the test (a statement fails without `--error`, fails with
//! another error, or succeeds when an error was expected) the run goes on and the step is
//! reported as a [`Problem`], so one difference does not hide the rest.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use binlog_format::SyncPolicy;
use ringrep_applier::{Applier, BinlogDirSource};
use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

use super::render::{render_result, render_warnings};
use super::script::{self, Step, StepKind};

/// Which nodes a run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One node (`default` and every `connect` go to it).
    Single,
    /// A source and a replica fed by the applier (the `ndb_rpl` suite's `master` and `slave`).
    SourceReplica,
}

/// Where includes and tools are.
#[derive(Debug, Clone, Default)]
pub struct RunEnv {
    /// Folders `--source` looks in, in order (the script's own folder is tried first).
    pub includes: Vec<PathBuf>,
    /// The command-line client `$MYSQL` runs (`mariadb` or `mysql`); `None`: `$MYSQL` is
    /// undefined and a script using it fails with that message.
    pub mysql_client: Option<String>,
    /// The `ringrep-binlog` tool that `$MYSQL_BINLOG` runs.
    pub binlog_tool: Option<PathBuf>,
}

/// Something mysqltest would have stopped the test for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The script line of the step.
    pub script_line: usize,
    /// The 1-based output line of the statement the problem belongs to, when it was echoed.
    pub output_line: Option<usize>,
    /// What went wrong, as mysqltest words it.
    pub text: String,
}

/// What a run printed, and its problems.
#[derive(Debug, Clone, Default)]
pub struct RunOutput {
    /// The output lines, as a `.result` file holds them.
    pub lines: Vec<String>,
    /// Steps mysqltest would have failed the test on.
    pub problems: Vec<Problem>,
    /// Set when the script asked to be skipped (`skip`), with its reason.
    pub skipped: Option<String>,
    /// Where each echoed statement is in `lines`: its first line (0-based) and how many
    /// lines it takes. Everything else in `lines` is output or text.
    pub statements: Vec<(usize, usize)>,
}

/// Runs the script at `path`.
pub fn run_script(path: &Path, topology: Topology, env: &RunEnv) -> anyhow::Result<RunOutput> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let steps = script::parse(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut runner = Runner::start(topology, env, path.parent().map(Path::to_path_buf))?;
    let result = runner.steps(&steps, 0);
    let mut out = runner.finish();
    match result {
        Ok(()) | Err(Stop::Exit) => {}
        Err(Stop::Skip(reason)) => out.skipped = Some(reason),
        Err(Stop::Fail(e)) => return Err(e.context(format!("running {}", path.display()))),
    }
    Ok(out)
}

/// Why a run stopped early.
enum Stop {
    /// `exit`.
    Exit,
    /// `skip reason`.
    Skip(String),
    /// The runner itself cannot go on (a command it does not have, a missing include).
    Fail(anyhow::Error),
}

impl From<anyhow::Error> for Stop {
    fn from(e: anyhow::Error) -> Stop {
        Stop::Fail(e)
    }
}

type Flow = Result<(), Stop>;

/// A statement's result and the warnings it left.
type Executed = (Result<Outcome, ringrep_engine::Error>, Vec<(u16, String)>);

/// The applier between a replica node and its source.
struct Link {
    applier: Applier,
    source: BinlogDirSource,
    from: usize,
    /// STOP REPLICA: syncing waits for nothing, START REPLICA resumes.
    stopped: bool,
}

struct Node {
    engine: Engine,
    link: Option<Link>,
    addr: SocketAddr,
    _stop_server: tokio::sync::oneshot::Sender<()>,
}

struct Conn {
    node: usize,
    /// `None` while a statement sent with `send` runs on its own thread.
    session: Option<SqlSession>,
    /// The statement `send` started: `reap` waits for it.
    sent: Option<Sent>,
}

/// A statement running on a thread of its own (`send`), with what `reap` prints it with.
struct Sent {
    thread: std::thread::JoinHandle<(SqlSession, Executed)>,
    echoed: Option<usize>,
    step: Step,
}

/// Modifiers that apply to the next statement only.
#[derive(Default)]
struct Next {
    errors: Vec<u16>,
    sorted: bool,
    replace: Vec<(String, String)>,
    replace_column: Vec<(usize, String)>,
}

struct Runner<'e> {
    env: &'e RunEnv,
    script_dir: Option<PathBuf>,
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    nodes: Vec<Node>,
    conns: HashMap<String, Conn>,
    current: String,
    vars: HashMap<String, String>,
    out: RunOutput,
    next: Next,
    info: bool,
    warnings: bool,
    query_log: bool,
    result_log: bool,
    saved_master_pos: Option<u64>,
    /// `send` without a statement of its own: the next statement is sent.
    send_next: bool,
}

/// MySQL error names the scripts use with `--error`, and their numbers.
const ERROR_NAMES: &[(&str, u16)] = &[
    ("ER_ILLEGAL_HA", 1031),
    ("ER_DUP_ENTRY", 1062),
    ("ER_PARSE_ERROR", 1064),
    ("ER_TABLE_EXISTS_ERROR", 1050),
    ("ER_BAD_TABLE_ERROR", 1051),
    ("ER_BAD_FIELD_ERROR", 1054),
    ("ER_NO_SUCH_TABLE", 1146),
    ("ER_BAD_NULL_ERROR", 1048),
    ("ER_WRONG_VALUE_COUNT_ON_ROW", 1136),
    ("ER_ERROR_DURING_COMMIT", 1180),
    ("ER_LOCK_WAIT_TIMEOUT", 1205),
    ("ER_CANNOT_ADD_FOREIGN", 1215),
    ("ER_NOT_SUPPORTED_YET", 1235),
    ("ER_NON_UPDATABLE_TABLE", 1288),
    ("ER_OPTION_PREVENTS_STATEMENT", 1290),
    ("ER_SP_DOES_NOT_EXIST", 1305),
    ("ER_ILLEGAL_HA_CREATE_OPTION", 1478),
    ("ER_ALTER_OPERATION_NOT_SUPPORTED_REASON", 1846),
    ("ER_GET_ERRNO", 1030),
    ("ER_WRONG_ARGUMENTS", 1210),
    ("ER_TRUNCATED_WRONG_VALUE_FOR_FIELD", 1366),
    ("ER_WARN_DATA_OUT_OF_RANGE", 1264),
    ("ER_DATA_TOO_LONG", 1406),
];

/// The error numbers of an `--error` list: names, numbers, `0` for success.
fn error_codes(list: &str) -> anyhow::Result<Vec<u16>> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            if let Ok(n) = s.parse::<u16>() {
                return Ok(n);
            }
            ERROR_NAMES
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(s))
                .map(|(_, c)| *c)
                .with_context(|| {
                    format!("--error {s}: ringrep-mysqltest does not know this error name")
                })
        })
        .collect()
}

/// `value` with mysqltest's `$name` variables replaced (`\$` keeps a dollar sign).
fn substitute(text: &str, vars: &HashMap<String, String>) -> anyhow::Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\\' && text[i + 1..].starts_with('$') {
            out.push('$');
            chars.next();
            continue;
        }
        if c != '$' {
            out.push(c);
            continue;
        }
        let rest = &text[i + 1..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if len == 0 {
            out.push('$');
            continue;
        }
        let name = &rest[..len];
        let value = vars
            .get(name)
            .with_context(|| format!("variable ${name} is used but was never set"))?;
        out.push_str(value);
        for _ in 0..len {
            chars.next();
        }
    }
    Ok(out)
}

/// A `while`/`if` condition: `$a`, `!$a`, or `$a <op> b` with ==, !=, <, <=, >, >=
/// (numbers compare as numbers).
fn condition(cond: &str, vars: &HashMap<String, String>) -> anyhow::Result<bool> {
    let text = substitute(cond, vars)?;
    let text = text.trim();
    for op in ["==", "!=", "<=", ">=", "<", ">"] {
        if let Some((a, b)) = text.split_once(op) {
            let (a, b) = (a.trim(), b.trim().trim_matches('"'));
            let ord = match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(x), Ok(y)) => x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal),
                _ => a.cmp(b),
            };
            use std::cmp::Ordering::*;
            return Ok(match op {
                "==" => ord == Equal,
                "!=" => ord != Equal,
                "<=" => ord != Greater,
                ">=" => ord != Less,
                "<" => ord == Less,
                _ => ord == Greater,
            });
        }
    }
    let (negate, value) = match text.strip_prefix('!') {
        Some(v) => (true, v.trim()),
        None => (false, text),
    };
    let truthy = !value.is_empty() && !value.parse::<f64>().is_ok_and(|n| n == 0.0);
    Ok(truthy != negate)
}

/// mysqltest's argument words: blanks separate them, quotes group them.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    let mut any = false;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            None => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn open_engine(dir: &Path, server_id: u32, read_only: bool) -> anyhow::Result<Engine> {
    let mut cfg = EngineConfig::new(server_id);
    // The runs are short and thrown away: no fsync per commit.
    cfg.sync = SyncPolicy::Never;
    cfg.lock_wait_timeout = Duration::from_millis(200);
    cfg.read_only = read_only;
    Ok(Engine::open(dir, cfg)?.0)
}

impl<'e> Runner<'e> {
    fn start(
        topology: Topology,
        env: &'e RunEnv,
        script_dir: Option<PathBuf>,
    ) -> anyhow::Result<Runner<'e>> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let dir = tempfile::tempdir()?;
        let vardir = dir.path().join("var");
        std::fs::create_dir_all(vardir.join("tmp"))?;
        let mut runner = Runner {
            env,
            script_dir,
            rt,
            dir,
            nodes: Vec::new(),
            conns: HashMap::new(),
            current: "default".into(),
            vars: HashMap::new(),
            out: RunOutput::default(),
            next: Next::default(),
            info: false,
            warnings: true,
            query_log: true,
            result_log: true,
            saved_master_pos: None,
            send_next: false,
        };
        runner
            .vars
            .insert("MYSQLTEST_VARDIR".into(), vardir.display().to_string());
        let master = runner.add_node("master", 1, None)?;
        runner.node_vars(master, "MASTER_MYPORT", "MYSQL");
        runner.vars.insert(
            "MYSQLD_DATADIR".into(),
            runner.nodes[master]
                .engine
                .binlog_dir()
                .display()
                .to_string(),
        );
        if topology == Topology::SourceReplica {
            let slave = runner.add_node("slave", 2, Some(master))?;
            runner.node_vars(slave, "SLAVE_MYPORT", "MYSQL_SLAVE");
        }
        if let Some(tool) = &env.binlog_tool {
            runner
                .vars
                .insert("MYSQL_BINLOG".into(), tool.display().to_string());
        }
        runner.connect_to("default", master, "test")?;
        Ok(runner)
    }

    /// Opens a node and serves the MySQL protocol for it on a loopback port.
    fn add_node(
        &mut self,
        name: &str,
        server_id: u32,
        source: Option<usize>,
    ) -> anyhow::Result<usize> {
        let engine = open_engine(&self.dir.path().join(name), server_id, false)?;
        let link = match source {
            Some(from) => {
                let src = &self.nodes[from].engine;
                Some(Link {
                    applier: Applier::new(&engine)?,
                    source: BinlogDirSource::open(&src.binlog_dir(), 1, src.notifier()),
                    from,
                    stopped: false,
                })
            }
            None => None,
        };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let settings = ringrep_server::ServerSettings::local(0);
        let server = self
            .rt
            .block_on(ringrep_server::Server::bind(engine.clone(), &settings))?;
        let addr = server.local_addr()?;
        self.rt.spawn(async move {
            let _ = server
                .run(async {
                    let _ = stop_rx.await;
                })
                .await;
        });
        self.nodes.push(Node {
            engine,
            link,
            addr,
            _stop_server: stop_tx,
        });
        Ok(self.nodes.len() - 1)
    }

    fn node_vars(&mut self, node: usize, port_var: &str, client_var: &str) {
        let port = self.nodes[node].addr.port();
        self.vars.insert(port_var.into(), port.to_string());
        if let Some(client) = &self.env.mysql_client {
            self.vars.insert(
                client_var.into(),
                format!("{client} --host=127.0.0.1 --port={port} --user=root"),
            );
        }
    }

    fn connect_to(&mut self, name: &str, node: usize, db: &str) -> anyhow::Result<()> {
        let mut session = SqlSession::new(&self.nodes[node].engine);
        if !db.is_empty() {
            session.execute(&format!("USE `{db}`"))?;
        }
        self.conns.insert(
            name.to_string(),
            Conn {
                node,
                session: Some(session),
                sent: None,
            },
        );
        Ok(())
    }

    fn finish(self) -> RunOutput {
        self.out
    }

    fn push(&mut self, line: impl Into<String>) {
        self.out.lines.push(line.into());
    }

    fn problem(&mut self, step: &Step, output_line: Option<usize>, text: String) {
        self.out.problems.push(Problem {
            script_line: step.line,
            output_line,
            text,
        });
    }

    fn steps(&mut self, steps: &[Step], depth: usize) -> Flow {
        for step in steps {
            self.step(step, depth)?;
        }
        Ok(())
    }

    fn step(&mut self, step: &Step, depth: usize) -> Flow {
        match &step.kind {
            StepKind::Query {
                sql,
                eval,
                delimiter,
            } => {
                let sql = if *eval {
                    substitute(sql, &self.vars)?
                } else {
                    sql.clone()
                };
                self.query(step, &sql, delimiter)
            }
            StepKind::Command { name, arg } => self.command(step, name, arg, depth),
            StepKind::WriteFile {
                path,
                content,
                append,
            } => {
                let path = PathBuf::from(substitute(path, &self.vars)?);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(anyhow::Error::from)?;
                }
                let content = substitute(content, &self.vars)?;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(*append)
                    .truncate(!*append)
                    .open(&path)
                    .with_context(|| format!("line {}: {}", step.line, path.display()))?;
                std::io::Write::write_all(&mut f, content.as_bytes())
                    .map_err(anyhow::Error::from)?;
                Ok(())
            }
            StepKind::While { cond, body } => {
                let mut rounds = 0u32;
                while condition(cond, &self.vars)? {
                    rounds += 1;
                    if rounds > 1_000_000 {
                        return Err(Stop::Fail(anyhow::anyhow!(
                            "line {}: while ({cond}) ran a million times",
                            step.line
                        )));
                    }
                    self.steps(body, depth)?;
                }
                Ok(())
            }
            StepKind::If { cond, body } => {
                if condition(cond, &self.vars)? {
                    self.steps(body, depth)?;
                }
                Ok(())
            }
        }
    }

    fn replaced(&self, line: &str) -> String {
        let mut l = line.to_string();
        for (from, to) in &self.next.replace {
            if !from.is_empty() {
                l = l.replace(from.as_str(), to);
            }
        }
        l
    }

    fn query(&mut self, step: &Step, sql: &str, delimiter: &str) -> Flow {
        let echoed = if self.query_log {
            let first = self.out.lines.len() + 1;
            let text = format!("{sql}{delimiter}");
            for l in text.lines() {
                let l = self.replaced(l);
                self.push(l);
            }
            self.out
                .statements
                .push((first - 1, self.out.lines.len() + 1 - first));
            Some(first)
        } else {
            None
        };
        let conn = self.current.clone();
        if std::mem::take(&mut self.send_next) {
            // `send`: the statement runs on a thread of its own; `reap` prints its result.
            let c = self
                .conns
                .get_mut(&conn)
                .with_context(|| format!("no connection named {conn}"))?;
            let mut session = c.session.take().with_context(|| {
                format!(
                    "line {}: send on {conn}, which still runs a statement",
                    step.line
                )
            })?;
            let sql = sql.to_string();
            let thread = std::thread::spawn(move || {
                let result = session.execute(&sql);
                let warnings = session.session.take_warnings();
                (session, (result, warnings))
            });
            c.sent = Some(Sent {
                thread,
                echoed,
                step: step.clone(),
            });
            return Ok(());
        }
        let executed = self.execute(&conn, sql)?;
        self.print_result(step, echoed, executed);
        Ok(())
    }

    /// `reap`: waits for the statement `send` started on the current connection and prints
    /// its result.
    fn reap(&mut self, step: &Step) -> Flow {
        let conn = self.current.clone();
        let c = self
            .conns
            .get_mut(&conn)
            .with_context(|| format!("no connection named {conn}"))?;
        let sent = c
            .sent
            .take()
            .with_context(|| format!("line {}: reap on {conn}, which sent nothing", step.line))?;
        let (session, executed) = sent
            .thread
            .join()
            .map_err(|_| anyhow::anyhow!("line {}: the sent statement panicked", step.line))?;
        c.session = Some(session);
        self.print_result(&sent.step, sent.echoed, executed);
        Ok(())
    }

    /// Prints a statement's result as mysqltest does, and notes what mysqltest would fail on.
    fn print_result(&mut self, step: &Step, echoed: Option<usize>, executed: Executed) {
        let (result, warnings) = executed;
        let next = std::mem::take(&mut self.next);
        self.next.replace = next.replace.clone();
        let mut lines = render_result(&result, self.info);
        if let Ok(Outcome::Rows(_)) = &result {
            if !next.replace_column.is_empty() {
                for l in lines.iter_mut().skip(1) {
                    let mut cells: Vec<String> = l.split('\t').map(str::to_string).collect();
                    for (col, text) in &next.replace_column {
                        if let Some(c) = cells.get_mut(col - 1) {
                            *c = text.clone();
                        }
                    }
                    *l = cells.join("\t");
                }
            }
            if next.sorted && lines.len() > 1 {
                lines[1..].sort();
            }
        }
        if self.warnings {
            lines.extend(render_warnings(&warnings));
        }
        if self.result_log {
            for l in &lines {
                let l = self.replaced(l);
                self.push(l);
            }
        }
        self.next = Next::default();
        let expected = next.errors;
        let problem = match (&result, expected.is_empty()) {
            (Ok(_), false) if !expected.contains(&0) => Some(format!(
                "query succeeded, but an error was expected ({expected:?})"
            )),
            (Err(e), true) => Some(format!("query failed: {}: {}", e.code, e.message)),
            (Err(e), false) if !expected.contains(&e.code) => Some(format!(
                "query failed with wrong errno {}: '{}', instead of {expected:?}",
                e.code, e.message
            )),
            _ => None,
        };
        if let Some(p) = problem {
            self.problem(step, echoed, p);
        }
    }

    /// Runs `sql` on connection `conn`; replication statements on a replica act on its link.
    fn execute(&mut self, conn: &str, sql: &str) -> Result<Executed, Stop> {
        let c = self
            .conns
            .get_mut(conn)
            .with_context(|| format!("no connection named {conn}"))?;
        let node = c.node;
        let words: Vec<String> = sql
            .split_whitespace()
            .take(2)
            .map(|w| w.trim_end_matches(';').to_ascii_uppercase())
            .collect();
        let replication = matches!(
            (
                words.first().map(String::as_str),
                words.get(1).map(String::as_str)
            ),
            (Some("STOP" | "START"), Some("REPLICA" | "SLAVE"))
        );
        if replication {
            let start = words[0] == "START";
            if let Some(link) = self.nodes[node].link.as_mut() {
                link.stopped = !start;
                return Ok((Ok(Outcome::Ok), vec![]));
            }
        }
        let c = self.conns.get_mut(conn).expect("looked up above");
        let session = c.session.as_mut().with_context(|| {
            format!("connection {conn} still runs the statement it sent: reap first")
        })?;
        let result = session.execute(sql);
        let warnings = session.session.take_warnings();
        Ok((result, warnings))
    }

    /// Applies on `replica` everything its source has committed (or up to `target`).
    fn sync(&mut self, replica: usize, target: Option<u64>) -> anyhow::Result<()> {
        let Some(link) = self.nodes[replica].link.as_ref() else {
            bail!("sync: the connection's node is not a replica");
        };
        if link.stopped {
            bail!("sync: replication is stopped (STOP REPLICA) on this replica");
        }
        let target = target.unwrap_or_else(|| self.nodes[link.from].engine.last_seq());
        let replica_engine = self.nodes[replica].engine.clone();
        let applied =
            ringrep_applier::applier::read_position(&replica_engine, 1).map_or(0, |p| p.last_seq);
        if applied >= target {
            return Ok(());
        }
        let link = self.nodes[replica].link.as_mut().expect("checked above");
        let (_tx, stop) = tokio::sync::watch::channel(false);
        let (applier, source) = (&mut link.applier, &mut link.source);
        self.rt.block_on(async {
            applier
                .run(
                    source,
                    Some(target),
                    false,
                    Duration::from_secs(30),
                    &mut |_, _| {},
                    &stop,
                )
                .await
        })?;
        Ok(())
    }

    fn find_include(&self, name: &str) -> anyhow::Result<PathBuf> {
        let mut tried = Vec::new();
        for dir in self.script_dir.iter().chain(&self.env.includes) {
            let p = dir.join(name);
            if p.is_file() {
                return Ok(p);
            }
            tried.push(dir.display().to_string());
        }
        bail!(
            "--source {name}: not found in {} (the project's includes are in integration/conformance/include)",
            tried.join(", ")
        )
    }

    fn let_value(&mut self, step: &Step, value: &str) -> Result<String, Stop> {
        let value = value.trim();
        if let Some(q) = value.strip_prefix('`').and_then(|v| v.strip_suffix('`')) {
            let sql = substitute(q, &self.vars)?;
            let conn = self.current.clone();
            let (result, _) = self.execute(&conn, &sql)?;
            // mysqltest: the first row's columns joined by tabs; empty without a row or when
            // the first column is NULL.
            return match result {
                Ok(Outcome::Rows(rs)) => Ok(rs
                    .text_rows()
                    .first()
                    .filter(|r| r.first().is_some_and(Option::is_some))
                    .map(|r| {
                        r.iter()
                            .map(|v| v.clone().unwrap_or_else(|| "NULL".into()))
                            .collect::<Vec<_>>()
                            .join("\t")
                    })
                    .unwrap_or_default()),
                Ok(_) => Ok(String::new()),
                Err(e) => Err(Stop::Fail(anyhow::anyhow!(
                    "line {}: let ... `{sql}` failed: {}: {}",
                    step.line,
                    e.code,
                    e.message
                ))),
            };
        }
        if let Some(args) = value
            .strip_prefix("query_get_value(")
            .and_then(|v| v.strip_suffix(')'))
        {
            // query_get_value(query, column, row): the query may hold commas.
            let mut parts = args.rsplitn(3, ',');
            let (row, column, sql) = match (parts.next(), parts.next(), parts.next()) {
                (Some(r), Some(c), Some(q)) => (r.trim(), c.trim(), q.trim()),
                _ => {
                    return Err(Stop::Fail(anyhow::anyhow!(
                        "line {}: query_get_value needs (query, column, row)",
                        step.line
                    )))
                }
            };
            let sql = substitute(sql, &self.vars)?;
            let row: usize = row
                .parse()
                .map_err(|_| anyhow::anyhow!("line {}: query_get_value row {row:?}", step.line))?;
            let conn = self.current.clone();
            let (result, _) = self.execute(&conn, &sql)?;
            return Ok(match result {
                Ok(Outcome::Rows(rs)) => {
                    let col = rs.columns.iter().position(|c| c == column);
                    match (col, rs.text_rows().get(row.saturating_sub(1))) {
                        (Some(c), Some(r)) => r[c].clone().unwrap_or_else(|| "NULL".into()),
                        _ => "No such row".into(),
                    }
                }
                _ => "No such row".into(),
            });
        }
        Ok(substitute(value, &self.vars)?)
    }

    fn command(&mut self, step: &Step, name: &str, arg: &str, depth: usize) -> Flow {
        let line = step.line;
        match name {
            "echo" => {
                let text = substitute(arg, &self.vars)?;
                self.push(text);
            }
            "error" => self.next.errors = error_codes(arg)?,
            "let" => {
                let (var, value) = arg
                    .split_once('=')
                    .with_context(|| format!("line {line}: let needs $name = value"))?;
                let var = var.trim().trim_start_matches('$').to_string();
                let value = self.let_value(step, value)?;
                self.vars.insert(var, value);
            }
            "inc" | "dec" => {
                let var = arg.trim().trim_start_matches('$');
                let n: i64 = self
                    .vars
                    .get(var)
                    .and_then(|v| v.trim().parse().ok())
                    .with_context(|| format!("line {line}: {name} ${var}: not a number"))?;
                let n = if name == "inc" { n + 1 } else { n - 1 };
                self.vars.insert(var.to_string(), n.to_string());
            }
            "connection" => {
                let conn = substitute(arg, &self.vars)?;
                if !self.conns.contains_key(&conn) {
                    return Err(Stop::Fail(anyhow::anyhow!(
                        "line {line}: connection {conn}: no such connection"
                    )));
                }
                self.current = conn;
            }
            "connect" => {
                let parts: Vec<String> = substitute(arg, &self.vars)?
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .collect();
                let get = |i: usize| parts.get(i).cloned().unwrap_or_default();
                let (conn, user, db, port) = (get(0), get(2), get(4), get(5));
                if !user.is_empty() && user != "root" {
                    return Err(Stop::Fail(anyhow::anyhow!(
                        "line {line}: connect as {user}: the runner's sessions are root's"
                    )));
                }
                let node = if port.is_empty() {
                    0
                } else {
                    self.nodes
                        .iter()
                        .position(|n| n.addr.port().to_string() == port)
                        .with_context(|| format!("line {line}: connect: no node on port {port}"))?
                };
                if self.conns.contains_key(&conn) {
                    return Err(Stop::Fail(anyhow::anyhow!(
                        "line {line}: connect {conn}: a connection of that name is open"
                    )));
                }
                self.connect_to(&conn, node, if db.is_empty() { "test" } else { &db })?;
                // mysqltest: the new connection is the current one.
                self.current = conn;
            }
            "disconnect" => {
                let conn = substitute(arg, &self.vars)?;
                if self.conns.remove(&conn).is_none() {
                    return Err(Stop::Fail(anyhow::anyhow!(
                        "line {line}: disconnect {conn}: no such connection"
                    )));
                }
            }
            "source" => {
                if depth > 16 {
                    return Err(Stop::Fail(anyhow::anyhow!(
                        "line {line}: --source nested more than 16 deep"
                    )));
                }
                let name = substitute(arg, &self.vars)?;
                let path = self.find_include(&name)?;
                let text = std::fs::read_to_string(&path).map_err(anyhow::Error::from)?;
                let steps =
                    script::parse(&text).with_context(|| format!("parsing {}", path.display()))?;
                self.steps(&steps, depth + 1)?;
            }
            "enable_info" => self.info = true,
            "disable_info" => self.info = false,
            "enable_warnings" => self.warnings = true,
            "disable_warnings" => self.warnings = false,
            "enable_query_log" => self.query_log = true,
            "disable_query_log" => self.query_log = false,
            "enable_result_log" => self.result_log = true,
            "disable_result_log" => self.result_log = false,
            "sorted_result" => self.next.sorted = true,
            "replace_result" => {
                let w = words(&substitute(arg, &self.vars)?);
                if !w.len().is_multiple_of(2) {
                    return Err(Stop::Fail(anyhow::anyhow!(
                        "line {line}: replace_result needs pairs of from and to"
                    )));
                }
                self.next.replace = w.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
            }
            "replace_column" => {
                let w = words(&substitute(arg, &self.vars)?);
                let mut pairs = Vec::new();
                for p in w.chunks(2) {
                    let col: usize = p[0]
                        .parse()
                        .ok()
                        .filter(|c| *c > 0)
                        .with_context(|| format!("line {line}: replace_column {}", p[0]))?;
                    pairs.push((col, p.get(1).cloned().unwrap_or_default()));
                }
                self.next.replace_column = pairs;
            }
            "remove_file" => {
                let path = substitute(arg, &self.vars)?;
                if let Err(e) = std::fs::remove_file(&path) {
                    self.problem(step, None, format!("remove_file {path}: {e}"));
                }
            }
            "file_exists" => {
                let path = substitute(arg, &self.vars)?;
                if !Path::new(&path).exists() {
                    self.problem(step, None, format!("file_exists {path}: no such file"));
                }
            }
            "exec" => self.exec(step, arg)?,
            "send" => {
                self.send_next = true;
                if !arg.trim().is_empty() {
                    let sql = arg.trim().to_string();
                    self.query(step, &sql, ";")?;
                }
            }
            "reap" => self.reap(step)?,
            "sync_slave_with_master" => {
                let conn = match arg.trim() {
                    "" => "slave".to_string(),
                    c => substitute(c, &self.vars)?,
                };
                let node = self
                    .conns
                    .get(&conn)
                    .map(|c| c.node)
                    .with_context(|| format!("line {line}: no connection {conn}"))?;
                self.sync(node, None)
                    .with_context(|| format!("line {line}: sync_slave_with_master"))?;
                self.current = conn;
            }
            "save_master_pos" => {
                let node = self.conns.get(&self.current).map_or(0, |c| c.node);
                self.saved_master_pos = Some(self.nodes[node].engine.last_seq());
            }
            "sync_with_master" => {
                let node = self.conns.get(&self.current).map_or(0, |c| c.node);
                let target = self.saved_master_pos.with_context(|| {
                    format!("line {line}: sync_with_master before save_master_pos")
                })?;
                self.sync(node, Some(target))
                    .with_context(|| format!("line {line}: sync_with_master"))?;
            }
            "sleep" | "real_sleep" => {
                let secs: f64 = substitute(arg, &self.vars)?
                    .trim()
                    .parse()
                    .with_context(|| format!("line {line}: {name} needs seconds"))?;
                std::thread::sleep(Duration::from_secs_f64(secs.clamp(0.0, 60.0)));
            }
            "die" => {
                return Err(Stop::Fail(anyhow::anyhow!(
                    "line {line}: die: {}",
                    substitute(arg, &self.vars)?
                )))
            }
            "skip" => return Err(Stop::Skip(substitute(arg, &self.vars)?)),
            "exit" => return Err(Stop::Exit),
            "horizontal_results" | "character_set" => {}
            other => {
                return Err(Stop::Fail(anyhow::anyhow!(
                "line {line}: the mysqltest command {other} is not supported by ringrep-mysqltest"
            )))
            }
        }
        Ok(())
    }

    /// `--exec`: a shell command; its standard output goes into the result (after
    /// `replace_result`), and a non-zero exit is a problem unless `--error` allowed it.
    fn exec(&mut self, step: &Step, arg: &str) -> Flow {
        let cmd = substitute(arg, &self.vars)?;
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .output()
            .with_context(|| format!("line {}: exec {cmd}", step.line))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if self.result_log {
            for l in stdout.lines() {
                let l = self.replaced(l);
                self.push(l);
            }
        }
        let code = output.status.code().unwrap_or(-1);
        let expected = std::mem::take(&mut self.next.errors);
        self.next = Next::default();
        let allowed = if expected.is_empty() {
            code == 0
        } else {
            u16::try_from(code).is_ok_and(|c| expected.contains(&c))
        };
        if !allowed {
            let stderr = String::from_utf8_lossy(&output.stderr);
            self.problem(
                step,
                None,
                format!("command \"{cmd}\" exited with {code}: {}", stderr.trim()),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn variables_are_replaced_and_unknown_ones_refused() {
        let v = vars(&[("i", "3"), ("MYSQLTEST_VARDIR", "/tmp/v")]);
        assert_eq!(
            substitute("INSERT INTO t VALUES ($i)", &v).expect("test input"),
            "INSERT INTO t VALUES (3)"
        );
        assert_eq!(
            substitute("'$MYSQLTEST_VARDIR/tmp/a.csv' \\$x", &v).expect("test input"),
            "'/tmp/v/tmp/a.csv' $x"
        );
        assert!(substitute("$nope", &v).is_err());
    }

    #[test]
    fn conditions_compare_numbers_and_test_truth() {
        let v = vars(&[("i", "9"), ("z", "0")]);
        assert!(condition("$i <= 50", &v).expect("test input"));
        assert!(!condition("$i > 10", &v).expect("test input"));
        assert!(condition("$i == 9", &v).expect("test input"));
        assert!(!condition("$z", &v).expect("test input"));
        assert!(condition("!$z", &v).expect("test input"));
    }

    #[test]
    fn error_names_resolve_and_unknown_names_fail() {
        assert_eq!(
            error_codes("ER_ILLEGAL_HA, 1062,0").expect("test input"),
            vec![1031, 1062, 0]
        );
        assert!(error_codes("ER_NOT_A_NAME").is_err());
    }

    fn output_of(script: &str) -> Vec<String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.test");
        std::fs::write(&path, script).expect("script");
        run_script(&path, Topology::Single, &RunEnv::default())
            .expect("runs")
            .lines
    }

    #[test]
    fn connect_makes_the_new_connection_current_and_let_reads_a_row() {
        let out = output_of(
            "connect (con1, localhost, root,,test);\nSET @x = 5;\nconnection default;\nSELECT @x;\n\
             let $row = `SELECT 1, 'two'`;\n--echo [$row]\nlet $none = `SELECT 1 FROM DUAL WHERE 1 = 0`;\n--echo [$none]\n",
        );
        // @x was set on con1: the default connection has none.
        assert_eq!(
            out[..5],
            ["SET @x = 5;", "SELECT @x;", "@x", "NULL", "[1\ttwo]"]
        );
        assert_eq!(out[5], "[]");
    }

    #[test]
    fn send_runs_a_statement_on_its_own_and_reap_prints_it() {
        let out = output_of(
            "CREATE TABLE t (a INT PRIMARY KEY, b INT);\nINSERT INTO t VALUES (1, 1);\n\
             connect (con1, localhost, root,,test);\nBEGIN;\nUPDATE t SET b = 2 WHERE a = 1;\n\
             connection default;\nsend UPDATE t SET b = 3 WHERE a = 1;\n\
             connection con1;\nCOMMIT;\nconnection default;\nreap;\nSELECT b FROM t;\n",
        );
        // The sent UPDATE waited for con1's row, then wrote over it.
        assert_eq!(out[out.len() - 3..], ["SELECT b FROM t;", "b", "3"]);
        assert!(out.contains(&"UPDATE t SET b = 3 WHERE a = 1;".to_string()));
    }

    #[test]
    fn two_connections_inserting_at_once_take_different_auto_increment_values() {
        let out = output_of(
            "CREATE TABLE ai (id INT AUTO_INCREMENT PRIMARY KEY, v INT);\n\
             connect (con1, localhost, root,,test);\nBEGIN;\nINSERT INTO ai (v) VALUES (1);\n\
             connection default;\nINSERT INTO ai (v) VALUES (2);\n\
             connection con1;\nCOMMIT;\nSELECT id, v FROM ai ORDER BY id;\n",
        );
        assert_eq!(out[out.len() - 3..], ["id\tv", "1\t1", "2\t2"]);
    }

    #[test]
    fn words_group_quotes() {
        assert_eq!(
            words("$X MYSQLTEST_VARDIR \"a b\" ''"),
            vec!["$X", "MYSQLTEST_VARDIR", "a b", ""]
        );
    }
}
