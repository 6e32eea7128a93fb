//! Running a `.test` script as mysqltest does, against ringrep nodes made for the run.
//!
//! Every run gets fresh nodes in a temporary directory: the source (`master`, where the
//! `default` connection goes) and, for the replication topology, a replica (`slave`) that the
//! real applier feeds from the source's binlog. Each connection (`connect`, `connection`,
//! `disconnect`) is its own SQL session, so variables, transactions and locks are per
//! connection. `sync_slave_with_master` applies everything the source committed. Each node
//! also serves the MySQL protocol on a loopback port, so `--exec` can run real clients and
//! tools against it (`$MYSQL`, `$MYSQL_BINLOG`). The source serves a second port too
//! (`$MASTER_MYPORT1`), and so does the replica (`$SLAVE_MYPORT1`): in RonDB's suites that is a
//! second MySQL server of the same cluster, which sees the same tables at once (the
//! `server2` of `have_multi_ndb.inc`), so here it is a second SQL port of the same node.
//!
//! mtr's environment is set as RonDB's suites read it ([`RunOutput::variables`] has the
//! list): the ports above, `$MYSQLTEST_VARDIR` and its `tmp/` and `log/` folders,
//! `$MYSQLD_DATADIR` (the folder the source's binlog files are in, where MySQL keeps its
//! own), `$NDB_BACKUP_DIR` / `$NDB_BACKUPS`, `$NDB_TOOLS_OUTPUT`, and `$NDB_MGM` /
//! `$NDB_RESTORE` / `$NDB_WAITER`, which `--exec` runs in-process: START BACKUP and ndb_restore
//! as ringrep's backup and restore (`ndb_tools.rs`), a data node RESTART as a close and
//! reopen of the node (`restart_node`). The servers' error logs are under
//! `$MYSQLTEST_VARDIR/log` where mtr keeps them, with what each node logged (warnings and
//! errors) while it ran the script's statements. `CALL mtr.add_suppression(...)` is
//! mtr's, not the server's, and is taken by the runner: ringrep's log is not checked after a
//! test.
//!
//! Where a script reads a variable it never set, mysqltest reads the environment and then
//! an empty value; so does the runner, and it reports each such read by name and line in
//! [`RunOutput::notes`]. An `--error` name that is not MySQL's, or an include that is not
//! found, is a [`Problem`] with its name and line, and the script goes on: the statement
//! after an unknown error name may fail with any error.
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

use super::error_names::error_code;
use super::ndb_tools;
use super::render::{render_result, render_warnings, statement_warnings};
use super::replace_regex::{self, RegexReplace};
use super::script::{self, Step, StepKind};
use super::vars::{condition, substitute, words};

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
    /// What the runner did that mysqltest does without a word, worth knowing: a variable
    /// read that was never set (read as empty).
    pub notes: Vec<Problem>,
    /// The standard variables the run set (mtr's environment), by name.
    pub variables: Vec<(String, String)>,
    /// Set when the script asked to be skipped (`skip`), with its reason.
    pub skipped: Option<String>,
    /// Set when the run stopped before the script's end (`die`, a command the runner does
    /// not have), with why and where; `lines` holds what it printed until then.
    pub stopped: Option<String>,
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
        Err(Stop::Fail(e)) => out.stopped = Some(format!("{e:#}")),
    }
    Ok(out)
}

/// Why a run stopped early.
enum Stop {
    /// `exit`.
    Exit,
    /// `skip reason`.
    Skip(String),
    /// The runner itself cannot go on (a command it does not have, `die`).
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
    server_id: u32,
    link: Option<Link>,
    /// The node's SQL ports: the first is its own (`$MASTER_MYPORT`), the second the cluster's
    /// second MySQL server (`$MASTER_MYPORT1`).
    addrs: Vec<SocketAddr>,
    /// Each port's server: what stops it, and its task (awaited when the node restarts, so
    /// that it no longer holds the engine).
    servers: Vec<(
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    )>,
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
    errors: Vec<Expected>,
    /// An `--error` list named an error mysqltest does not know: any error is taken.
    any_error: bool,
    sorted: bool,
    replace: Vec<(String, String)>,
    /// `--replace_regex`, applied before `replace`, as mysqltest applies them.
    regex: Vec<RegexReplace>,
    replace_column: Vec<(usize, String)>,
}

/// One entry of an `--error` list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expected {
    /// An error number (a name stands for its number); `0` is success.
    Code(u16),
    /// `S<sqlstate>`: any error with that SQLSTATE.
    State(String),
}

impl Expected {
    /// Whether a statement that ended with `code` (0: success) and `sqlstate` is this.
    fn matches(&self, code: u16, sqlstate: &str) -> bool {
        match self {
            Expected::Code(c) => *c == code,
            Expected::State(s) => code != 0 && s == sqlstate,
        }
    }
}

/// An `--error` list as mysqltest prints it in its messages (`1050,S42S01`).
fn expected_text(list: &[Expected]) -> String {
    list.iter()
        .map(|e| match e {
            Expected::Code(c) => c.to_string(),
            Expected::State(s) => format!("S{s}"),
        })
        .collect::<Vec<_>>()
        .join(",")
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
    /// `--disable_abort_on_error`: a statement's unexpected error is printed, and is no
    /// problem (the recording says whether it was right).
    abort_on_error: bool,
    warnings: bool,
    query_log: bool,
    result_log: bool,
    saved_master_pos: Option<u64>,
    /// `send` without a statement of its own: the next statement is sent.
    send_next: bool,
    /// Switches set for one statement (`--disable_result_log ONCE`): their values before.
    once: Vec<(&'static str, bool)>,
    /// Variables set by `let NAME = ...` without a `$`: exported to `--exec`'s commands.
    exported: Vec<String>,
    /// The includes being run, innermost last, each with the line that sourced it (the
    /// first: the script's own line).
    sourcing: Vec<(String, usize)>,
}

/// `CALL mtr.add_suppression(...)`: mtr's own procedure, which lets a test's expected lines
/// pass mtr's check of the server's error log. ringrep's log is not checked, so the call has
/// nothing to do and succeeds, as it does under mtr.
fn is_add_suppression(sql: &str) -> bool {
    let compact: String = sql
        .chars()
        .filter(|c| !c.is_whitespace())
        .take(24)
        .collect::<String>()
        .to_ascii_lowercase();
    compact.starts_with("callmtr.add_suppression(")
}

/// The switch an `enable_X` / `disable_X` command sets, and to what.
fn switch_of(command: &str) -> Option<(&'static str, bool)> {
    let (on, what) = match command.split_once('_') {
        Some(("enable", w)) => (true, w),
        Some(("disable", w)) => (false, w),
        _ => return None,
    };
    let switch = [
        "info",
        "warnings",
        "query_log",
        "result_log",
        "abort_on_error",
    ]
    .into_iter()
    .find(|s| *s == what)?;
    Some((switch, on))
}

/// The entries of an `--error` list, as mysqltest reads them: numbers (`0` is success), MySQL
/// 8's error names, and SQLSTATEs written `S` and five characters (`S42S02`), mixed in one
/// comma-separated list; and the entries that are none of these, with why.
fn error_codes(list: &str) -> (Vec<Expected>, Vec<String>) {
    let mut codes = Vec::new();
    let mut unknown = Vec::new();
    for s in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some(state) = s.strip_prefix('S') {
            if state.len() == 5 && state.chars().all(|c| c.is_ascii_alphanumeric()) {
                codes.push(Expected::State(state.to_ascii_uppercase()));
            } else {
                unknown.push(format!(
                    "{s}: a SQLSTATE is S and exactly 5 characters (S42S02)"
                ));
            }
            continue;
        }
        match s.parse::<u16>().ok().or_else(|| error_code(s)) {
            Some(c) => codes.push(Expected::Code(c)),
            None => unknown.push(format!("{s}: not an error name of MySQL 8")),
        }
    }
    (codes, unknown)
}

/// The error-log files mtr gives its servers, under `$MYSQLTEST_VARDIR/log`: a plain
/// suite's, an NDB cluster's two mysqlds', a replica cluster's.
const MYSQLD_LOGS: [&str; 6] = [
    "mysqld.1.err",
    "mysqld.2.err",
    "mysqld.1.1.err",
    "mysqld.2.1.err",
    "mysqld.1.slave.err",
    "mysqld.2.slave.err",
];

/// The error logs of node `node` (the source is the first, the replica the second): the
/// source is mtr's first mysqld of a plain suite and of an NDB cluster, the replica the
/// first of the replica cluster.
fn node_log_files(log_dir: &Path, node: usize) -> Vec<PathBuf> {
    let names: &[&str] = if node == 0 {
        &["mysqld.1.err", "mysqld.1.1.err"]
    } else {
        &["mysqld.1.slave.err"]
    };
    names.iter().map(|n| log_dir.join(n)).collect()
}

/// Appends each line it is given to every one of a node's error logs.
struct AppendTo(Vec<PathBuf>);

impl std::io::Write for AppendTo {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for f in &self.0 {
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(f)?
                .write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A log subscriber writing what a node logs (warnings and above, as a server's error log
/// keeps them by default) into its error logs.
fn node_log(log_dir: &Path, node: usize) -> impl tracing::Subscriber + Send + Sync {
    let files = node_log_files(log_dir, node);
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .with_writer(move || AppendTo(files.clone()))
        .finish()
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
            abort_on_error: true,
            warnings: true,
            query_log: true,
            result_log: true,
            saved_master_pos: None,
            send_next: false,
            once: Vec::new(),
            exported: Vec::new(),
            sourcing: Vec::new(),
        };
        let master = runner.add_node("master", 1, None)?;
        runner.node_vars(master, "MASTER_MYPORT", "MYSQL");
        if topology == Topology::SourceReplica {
            let slave = runner.add_node("slave", 2, Some(master))?;
            runner.node_vars(slave, "SLAVE_MYPORT", "MYSQL_SLAVE");
        }
        let binlogs = runner.nodes[master].engine.binlog_dir();
        // mtr's layout: the first data node's file system holds the cluster's backups.
        let backup_dir = vardir.join("mysql_cluster.1").join("ndbd.1");
        let tools_output = vardir.join("log").join("ndb_testrun.log");
        std::fs::create_dir_all(vardir.join("log"))?;
        std::fs::create_dir_all(&backup_dir)?;
        std::fs::write(&tools_output, "")?;
        // The servers' error logs where mtr keeps them, which `assert_grep.inc` and
        // `search_pattern.inc` read: each node's holds what it logged while running the
        // script's statements (`node_log`); the others stay empty.
        for name in MYSQLD_LOGS {
            std::fs::write(vardir.join("log").join(name), "")?;
        }
        let path = |p: &Path| p.display().to_string();
        let master_port = runner.nodes[master].addrs[0].port();
        let mut standard = vec![
            ("MYSQLTEST_VARDIR", path(&vardir)),
            ("MYSQL_TMP_DIR", path(&vardir.join("tmp"))),
            ("MYSQLD_DATADIR", path(&binlogs)),
            ("NDB_BACKUP_DIR", path(&backup_dir)),
            (
                "NDB_BACKUPS",
                path(&backup_dir.join("BACKUP").join("BACKUP")),
            ),
            ("NDB_TOOLS_OUTPUT", path(&tools_output)),
            ("NDB_MGM", ndb_tools::NDB_MGM.to_string()),
            ("NDB_RESTORE", ndb_tools::NDB_RESTORE.to_string()),
            ("NDB_WAITER", ndb_tools::NDB_WAITER.to_string()),
            ("NDB_CONNECTSTRING", format!("127.0.0.1:{master_port}")),
        ];
        if let Some(tool) = &env.binlog_tool {
            standard.push(("MYSQL_BINLOG", path(tool)));
        }
        for (name, value) in standard {
            runner.vars.insert(name.into(), value);
        }
        let mut all: Vec<(String, String)> = runner
            .vars
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        all.sort();
        runner.out.variables = all;
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
            Some(from) => Some(self.link_to(&engine, from, false)?),
            None => None,
        };
        // Two SQL ports on the one engine: the cluster's two MySQL servers.
        let node = self.serve(engine, server_id, link, &[0, 0])?;
        self.nodes.push(node);
        Ok(self.nodes.len() - 1)
    }

    /// The applier that feeds `replica` from node `from`'s binlog.
    fn link_to(&self, replica: &Engine, from: usize, stopped: bool) -> anyhow::Result<Link> {
        let src = &self.nodes[from].engine;
        Ok(Link {
            applier: Applier::new(replica)?,
            source: BinlogDirSource::open(&src.binlog_dir(), 1, src.notifier()),
            from,
            stopped,
        })
    }

    /// Serves `engine` on loopback, one server per port of `ports` (0: a free one).
    fn serve(
        &mut self,
        engine: Engine,
        server_id: u32,
        link: Option<Link>,
        ports: &[u16],
    ) -> anyhow::Result<Node> {
        let mut addrs = Vec::new();
        let mut servers = Vec::new();
        for port in ports {
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let settings = ringrep_server::ServerSettings::local(*port);
            let server = self
                .rt
                .block_on(ringrep_server::Server::bind(engine.clone(), &settings))
                .with_context(|| format!("serving on port {port}"))?;
            addrs.push(server.local_addr()?);
            let task = self.rt.spawn(async move {
                let _ = server
                    .run(async {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
            servers.push((stop_tx, task));
        }
        Ok(Node {
            engine,
            server_id,
            link,
            addrs,
            servers,
        })
    }

    /// `ndb_mgm -e "<id> RESTART"` / `"ALL RESTART"`: node `node` goes down and comes back
    /// from its data directory, as a data node restarts from what it wrote to disk. Its
    /// servers stop and serve again on the same ports; its connections stay open, as a
    /// mysqld's do while the cluster restarts, and keep their session variables, but a
    /// transaction they had open is gone (NDB aborts it) and so are their `@` variables. The
    /// appliers to and from it start again from the position the replica stored.
    fn restart_node(&mut self, node: usize) -> anyhow::Result<()> {
        let mut sessions = Vec::new();
        for (name, c) in self.conns.iter_mut().filter(|(_, c)| c.node == node) {
            let session = c.session.take().with_context(|| {
                format!("restart: connection {name} still runs a statement sent with send")
            })?;
            sessions.push((name.clone(), session.session.vars.clone()));
        }
        // Nothing may keep the old engine open: its servers, its sessions, the appliers
        // that read or write it.
        let old = self.nodes.swap_remove(node);
        let ports: Vec<u16> = old.addrs.iter().map(|a| a.port()).collect();
        let dir = old.engine.dir().to_path_buf();
        let (server_id, had_link) = (
            old.server_id,
            old.link.as_ref().map(|l| (l.from, l.stopped)),
        );
        for (stop, task) in old.servers {
            let _ = stop.send(());
            self.rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(10), task).await })
                .map_err(|_| anyhow::anyhow!("restart: the node's server did not stop in 10 s"))?
                .ok();
        }
        drop(old.link);
        drop(old.engine);
        // Appliers of other nodes fed by this one read its binlog through its notifier.
        let feeding: Vec<(usize, bool)> = self
            .nodes
            .iter_mut()
            .enumerate()
            .filter_map(|(i, n)| {
                let l = n.link.take_if(|l| l.from == node)?;
                Some((i, l.stopped))
            })
            .collect();
        // `swap_remove` moved the last node into `node`'s place; the reopened node goes back
        // to its own index.
        let engine = open_engine(&dir, server_id, false)
            .with_context(|| format!("restart: opening {} again", dir.display()))?;
        let placeholder = self.serve(engine, server_id, None, &[])?;
        self.nodes.push(placeholder);
        let last = self.nodes.len() - 1;
        self.nodes.swap(node, last);
        let engine = self.nodes[node].engine.clone();
        let link = match had_link {
            Some((from, stopped)) => Some(self.link_to(&engine, from, stopped)?),
            None => None,
        };
        let served = self.serve(engine.clone(), server_id, link, &ports)?;
        self.nodes[node] = served;
        for (i, stopped) in feeding {
            // `feeding` counted indices with `node` removed: the one at `node` then was the
            // last node, which is back at the end now.
            let i = if i == node { self.nodes.len() - 1 } else { i };
            let replica = self.nodes[i].engine.clone();
            self.nodes[i].link = Some(self.link_to(&replica, node, stopped)?);
        }
        for (name, vars) in sessions {
            let mut session = SqlSession::new(&engine);
            session.session.vars = vars;
            if let Some(c) = self.conns.get_mut(&name) {
                c.session = Some(session);
            }
        }
        Ok(())
    }

    /// `$<port_var>` and `$<port_var>1` (the node's two SQL ports), and `$<client_var>`.
    fn node_vars(&mut self, node: usize, port_var: &str, client_var: &str) {
        let port = self.nodes[node].addrs[0].port();
        self.vars.insert(port_var.into(), port.to_string());
        self.vars.insert(
            format!("{port_var}1"),
            self.nodes[node].addrs[1].port().to_string(),
        );
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
        let p = self.located(step, output_line, text);
        self.out.problems.push(p);
    }

    /// A problem or note of `step`: inside an include, it belongs to the script's line that
    /// sourced it, and its text names the include and the line there.
    fn located(&self, step: &Step, output_line: Option<usize>, text: String) -> Problem {
        match self.sourcing.first() {
            Some((_, top)) => {
                let (name, _) = self.sourcing.last().expect("not empty");
                Problem {
                    script_line: *top,
                    output_line,
                    text: format!("{name}:{}: {text}", step.line),
                }
            }
            None => Problem {
                script_line: step.line,
                output_line,
                text,
            },
        }
    }

    /// `text` with its variables replaced; each variable read that was never set is noted.
    fn subst(&mut self, step: &Step, text: &str) -> String {
        let mut unset = Vec::new();
        let out = substitute(text, &self.vars, &mut unset);
        self.note_unset(step, unset);
        out
    }

    fn cond(&mut self, step: &Step, cond: &str) -> bool {
        let mut unset = Vec::new();
        let holds = condition(cond, &self.vars, &mut unset);
        self.note_unset(step, unset);
        holds
    }

    fn note_unset(&mut self, step: &Step, unset: Vec<String>) {
        for name in unset {
            let note = self.located(
                step,
                None,
                format!("${name} is read but was never set (read as empty, as mysqltest reads it)"),
            );
            self.out.notes.push(note);
        }
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
                    self.subst(step, sql)
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
                let path = PathBuf::from(self.subst(step, path));
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(anyhow::Error::from)?;
                }
                let content = self.subst(step, content);
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
            StepKind::Perl { content } => self.perl(step, content),
            StepKind::While { cond, body } => {
                let mut rounds = 0u32;
                while self.cond(step, cond) {
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
                if self.cond(step, cond) {
                    self.steps(body, depth)?;
                }
                Ok(())
            }
        }
    }

    /// Sets a switch; returns its value before.
    fn switch(&mut self, switch: &'static str, on: bool) -> bool {
        let slot = match switch {
            "info" => &mut self.info,
            "warnings" => &mut self.warnings,
            "query_log" => &mut self.query_log,
            "result_log" => &mut self.result_log,
            _ => &mut self.abort_on_error,
        };
        std::mem::replace(slot, on)
    }

    /// Puts back the switches set `ONCE`, after the statement they were set for.
    fn end_once(&mut self) {
        for (switch, old) in std::mem::take(&mut self.once) {
            self.switch(switch, old);
        }
    }

    /// `text` after the next statement's `--replace_regex` and then its `--replace_result`,
    /// the order mysqltest applies them in.
    fn replaced(&self, text: &str) -> String {
        let mut l = if self.next.regex.is_empty() {
            text.to_string()
        } else {
            replace_regex::apply(&self.next.regex, text)
        };
        for (from, to) in &self.next.replace {
            if !from.is_empty() {
                l = l.replace(from.as_str(), to);
            }
        }
        l
    }

    /// A result set's line with the replacements made in each of its values on its own, as
    /// mysqltest makes them (a pattern's `^` and `$` are a value's ends).
    fn replaced_fields(&self, line: &str) -> String {
        line.split('\t')
            .map(|v| self.replaced(v))
            .collect::<Vec<_>>()
            .join("\t")
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
                let warnings = statement_warnings(&session, &sql);
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
        self.next.regex = next.regex.clone();
        let mut lines = render_result(&result, self.info);
        if let Ok(Outcome::Rows(_)) = &result {
            // mysqltest: a replaced column's value first, then the replacements in every
            // value, then the sort of the rows as they are printed. The lines are the
            // header, the rows' lines, and with info on the `affected rows` line.
            let rows = lines.len() - 1 - usize::from(self.info);
            for (i, l) in lines.iter_mut().enumerate().take(rows + 1) {
                let mut cells: Vec<String> = l.split('\t').map(str::to_string).collect();
                if i > 0 {
                    for (col, text) in &next.replace_column {
                        if let Some(c) = cells.get_mut(col - 1) {
                            *c = text.clone();
                        }
                    }
                }
                *l = self.replaced_fields(&cells.join("\t"));
            }
            for l in lines.iter_mut().skip(rows + 1) {
                *l = self.replaced(l);
            }
            if next.sorted && rows > 0 {
                lines[1..=rows].sort();
            }
        } else {
            for l in lines.iter_mut() {
                *l = self.replaced(l);
            }
        }
        if self.warnings {
            for w in render_warnings(&warnings) {
                lines.push(self.replaced(&w));
            }
        }
        if self.result_log {
            for l in lines {
                self.push(l);
            }
        }
        self.next = Next::default();
        self.end_once();
        let (errno, sqlstate) = match &result {
            Err(e) => (e.code, e.sqlstate.to_string()),
            Ok(_) => (0, "00000".to_string()),
        };
        self.vars.insert("mysql_errno".into(), errno.to_string());
        self.vars.insert("mysql_sqlstate".into(), sqlstate.clone());
        let expected = next.errors;
        let allowed = expected.iter().any(|e| e.matches(errno, &sqlstate));
        let list = expected_text(&expected);
        let problem = match (&result, expected.is_empty() && !next.any_error) {
            (Ok(_), false) if !allowed => Some(format!(
                "query succeeded, but an error was expected ({list})"
            )),
            (Err(_), false) if next.any_error => None,
            (Err(_), true) if !self.abort_on_error => None,
            (Err(e), true) => Some(format!("query failed: {}: {}", e.code, e.message)),
            (Err(e), false) if !allowed => Some(format!(
                "query failed with wrong errno {} ({}): '{}', instead of {list}",
                e.code, e.sqlstate, e.message
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
        if is_add_suppression(sql) {
            return Ok((Ok(Outcome::Ok), vec![]));
        }
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
        // What the node logs while it runs the statement goes to its error log, where a
        // script's `assert_grep.inc` reads it.
        let log = node_log(&self.dir.path().join("var").join("log"), node);
        let result = tracing::subscriber::with_default(log, || session.execute(sql));
        let warnings = statement_warnings(session, sql);
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

    fn find_include(&self, name: &str) -> Option<PathBuf> {
        self.script_dir
            .iter()
            .chain(&self.env.includes)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    }

    fn let_value(&mut self, step: &Step, value: &str) -> Result<String, Stop> {
        let value = value.trim();
        if let Some(q) = value.strip_prefix('`').and_then(|v| v.strip_suffix('`')) {
            let sql = self.subst(step, q);
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
                Err(e) => {
                    // mysqltest stops here; the runner reports it, and the value is empty.
                    self.problem(
                        step,
                        None,
                        format!("let ... `{sql}` failed: {}: {}", e.code, e.message),
                    );
                    Ok(String::new())
                }
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
            let sql = self.subst(step, sql);
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
        Ok(self.subst(step, value))
    }

    fn command(&mut self, step: &Step, name: &str, arg: &str, depth: usize) -> Flow {
        let line = step.line;
        match name {
            "echo" => {
                let text = self.subst(step, arg);
                self.push(text);
            }
            "error" => {
                let arg = self.subst(step, arg);
                let (codes, unknown) = error_codes(&arg);
                for name in &unknown {
                    self.problem(step, None, format!("--error {name} (any error is taken)"));
                }
                self.next.errors = codes;
                self.next.any_error = !unknown.is_empty();
            }
            "let" => {
                let (var, value) = arg
                    .split_once('=')
                    .with_context(|| format!("line {line}: let needs $name = value"))?;
                let var = var.trim();
                // `let NAME = ...` without a dollar sets an environment variable in mysqltest:
                // the commands `--exec` runs see it.
                if !var.starts_with('$') && !self.exported.iter().any(|e| e == var) {
                    self.exported.push(var.to_string());
                }
                let var = var.trim_start_matches('$').to_string();
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
                let conn = self.subst(step, arg);
                if self.conns.contains_key(&conn) {
                    self.current = conn;
                } else {
                    // mysqltest stops here; the runner goes on, on the connection it was on.
                    self.problem(step, None, format!("connection {conn}: no such connection"));
                }
            }
            "connect" => {
                let parts: Vec<String> = self
                    .subst(step, arg)
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
                let expected = std::mem::take(&mut self.next);
                let node = if port.is_empty() {
                    Some(0)
                } else {
                    self.nodes
                        .iter()
                        .position(|n| n.addrs.iter().any(|a| a.port().to_string() == port))
                };
                let Some(node) = node else {
                    // What a client gets from a port nobody listens on.
                    const CR_CONN_HOST_ERROR: u16 = 2003;
                    self.vars
                        .insert("mysql_errno".into(), CR_CONN_HOST_ERROR.to_string());
                    let allowed = expected
                        .errors
                        .iter()
                        .any(|e| e.matches(CR_CONN_HOST_ERROR, "HY000"));
                    if !allowed && !expected.any_error {
                        self.problem(
                            step,
                            None,
                            format!("connect {conn}: 2003: Can't connect to MySQL server on '127.0.0.1:{port}' (no node of the run listens there)"),
                        );
                    }
                    self.end_once();
                    return Ok(());
                };
                if self.conns.contains_key(&conn) {
                    return Err(Stop::Fail(anyhow::anyhow!(
                        "line {line}: connect {conn}: a connection of that name is open"
                    )));
                }
                self.connect_to(&conn, node, if db.is_empty() { "test" } else { &db })?;
                self.vars.insert("mysql_errno".into(), "0".into());
                if !expected.errors.is_empty() && !expected.errors.contains(&Expected::Code(0)) {
                    self.problem(
                        step,
                        None,
                        format!("connect {conn} succeeded, but an error was expected"),
                    );
                }
                self.end_once();
                // mysqltest: the new connection is the current one.
                self.current = conn;
            }
            "disconnect" => {
                let conn = self.subst(step, arg);
                if self.conns.remove(&conn).is_none() {
                    self.problem(step, None, format!("disconnect {conn}: no such connection"));
                }
            }
            "source" => {
                if depth > 16 {
                    return Err(Stop::Fail(anyhow::anyhow!(
                        "line {line}: --source nested more than 16 deep"
                    )));
                }
                let name = self.subst(step, arg);
                let Some(path) = self.find_include(&name) else {
                    // mysqltest stops here; the runner reports it and goes on after it.
                    let dirs: Vec<String> = self
                        .script_dir
                        .iter()
                        .chain(&self.env.includes)
                        .map(|d| d.display().to_string())
                        .collect();
                    self.problem(
                        step,
                        None,
                        format!(
                            "--source {name}: no such include (looked in {}); the runner \
                             provides the includes RonDB's suites use in \
                             integration/conformance/include",
                            dirs.join(", ")
                        ),
                    );
                    return Ok(());
                };
                let text = std::fs::read_to_string(&path).map_err(anyhow::Error::from)?;
                let steps =
                    script::parse(&text).with_context(|| format!("parsing {}", path.display()))?;
                let top = self.sourcing.first().map_or(line, |(_, l)| *l);
                self.sourcing.push((name, top));
                let r = self.steps(&steps, depth + 1);
                self.sourcing.pop();
                r?;
            }
            n if switch_of(n).is_some() => {
                let (switch, on) = switch_of(n).expect("matched");
                let old = self.switch(switch, on);
                if arg.trim().eq_ignore_ascii_case("ONCE") {
                    self.once.push((switch, old));
                }
            }
            "sorted_result" => self.next.sorted = true,
            "replace_result" => {
                let w = words(&self.subst(step, arg));
                if !w.len().is_multiple_of(2) {
                    return Err(Stop::Fail(anyhow::anyhow!(
                        "line {line}: replace_result needs pairs of from and to"
                    )));
                }
                self.next.replace = w.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
            }
            "replace_regex" => {
                // mysqltest replaces only a variable that is the whole argument: a `$`
                // elsewhere is the pattern's own (an end anchor).
                let arg = arg.trim();
                let is_var = arg.starts_with('$')
                    && arg.len() > 1
                    && arg[1..]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_');
                let arg = if is_var {
                    self.subst(step, arg)
                } else {
                    arg.to_string()
                };
                match replace_regex::parse(&arg) {
                    Ok(list) => self.next.regex = list,
                    // mysqltest stops here; the runner reports it, and the next statement's
                    // output is not replaced (and so differs from the recording).
                    Err(e) => self.problem(step, None, format!("{e:#}")),
                }
            }
            "replace_column" => {
                let w = words(&self.subst(step, arg));
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
                let path = self.subst(step, arg);
                if let Err(e) = std::fs::remove_file(&path) {
                    self.problem(step, None, format!("remove_file {path}: {e}"));
                }
            }
            "cat_file" => {
                // mysqltest prints the file as it is, without the replacements.
                let path = self.subst(step, arg);
                match std::fs::read_to_string(&path) {
                    Ok(text) => {
                        for l in text.lines() {
                            self.push(l.to_string());
                        }
                    }
                    Err(e) => self.problem(step, None, format!("cat_file {path}: {e}")),
                }
            }
            "file_exists" => {
                let path = self.subst(step, arg);
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
                    c => self.subst(step, c),
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
                let secs: f64 = self
                    .subst(step, arg)
                    .trim()
                    .parse()
                    .with_context(|| format!("line {line}: {name} needs seconds"))?;
                std::thread::sleep(Duration::from_secs_f64(secs.clamp(0.0, 60.0)));
            }
            "die" => {
                return Err(Stop::Fail(anyhow::anyhow!(
                    "line {line}: die: {}",
                    self.subst(step, arg)
                )))
            }
            "skip" => return Err(Stop::Skip(self.subst(step, arg))),
            "exit" => return Err(Stop::Exit),
            // Output formats and protocols the runner has one of; mysqltest's defaults.
            "horizontal_results"
            | "character_set"
            | "disable_ps_protocol"
            | "enable_ps_protocol"
            | "disable_connect_log"
            | "enable_connect_log"
            | "disable_reconnect"
            | "enable_reconnect"
            | "disable_metadata"
            | "disable_session_track_info"
            | "enable_session_track_info"
            | "disable_async_client"
            | "enable_async_client"
            | "disable_ps_warnings"
            | "enable_ps_warnings" => {}
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
        let cmd = self.subst(step, arg);
        let (stdout, stderr, code) = match self.ndb_tool(&cmd) {
            Some(ran) => ran.with_context(|| format!("line {}: exec {cmd}", step.line))?,
            None => {
                let output = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(&cmd)
                    .envs(self.exec_env())
                    .output()
                    .with_context(|| format!("line {}: exec {cmd}", step.line))?;
                (
                    String::from_utf8_lossy(&output.stdout).into_owned(),
                    String::from_utf8_lossy(&output.stderr).into_owned(),
                    output.status.code().unwrap_or(-1),
                )
            }
        };
        if self.result_log {
            for l in stdout.lines() {
                let l = self.replaced(l);
                self.push(l);
            }
        }
        let next = std::mem::take(&mut self.next);
        let expected = next.errors;
        self.end_once();
        let allowed = if next.any_error {
            code != 0
        } else if expected.is_empty() {
            code == 0
        } else {
            // An exit code is a number: an `S<sqlstate>` entry never matches one.
            u16::try_from(code).is_ok_and(|c| expected.contains(&Expected::Code(c)))
        };
        if !allowed {
            self.problem(
                step,
                None,
                format!("command \"{cmd}\" exited with {code}: {}", stderr.trim()),
            );
        }
        Ok(())
    }

    /// What a command `--exec` or `--perl` runs sees in its environment: mtr's variables and
    /// those set by `let NAME = ...` without a dollar, with their values now.
    fn exec_env(&self) -> Vec<(String, String)> {
        self.out
            .variables
            .iter()
            .map(|(k, _)| k.clone())
            .chain(self.exported.iter().cloned())
            .filter_map(|k| self.vars.get(&k).map(|v| (k, v.clone())))
            .collect()
    }

    /// `--perl`: the program runs in `perl` with mtr's environment; its output goes into the
    /// result, and a failure is a problem.
    fn perl(&mut self, step: &Step, program: &str) -> Flow {
        let file = self.dir.path().join("var").join("tmp").join("mysqltest.pl");
        std::fs::write(&file, program).map_err(anyhow::Error::from)?;
        match std::process::Command::new("perl")
            .arg(&file)
            .envs(self.exec_env())
            .output()
        {
            Ok(out) => {
                if self.result_log {
                    for l in String::from_utf8_lossy(&out.stdout).lines() {
                        self.push(l.to_string());
                    }
                }
                if !out.status.success() {
                    let text = format!(
                        "perl exited with {}: {}",
                        out.status.code().unwrap_or(-1),
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                    self.problem(step, None, text);
                }
            }
            Err(e) => self.problem(step, None, format!("perl: {e}")),
        }
        Ok(())
    }

    /// `$NDB_MGM` and `$NDB_RESTORE`, run in-process on the node their connect string names
    /// (the source without one): standard output, standard error and exit code, after the
    /// redirections that follow them (`>`, `>>`, `2>&1`). `None`: `cmd` runs another program.
    fn ndb_tool(&mut self, cmd: &str) -> Option<anyhow::Result<(String, String, i32)>> {
        let tokens = words(cmd);
        let program = tokens.first()?;
        let tool = [
            ndb_tools::NDB_MGM,
            ndb_tools::NDB_RESTORE,
            ndb_tools::NDB_WAITER,
        ]
        .into_iter()
        .find(|t| program == t || program.ends_with(&format!("/{t}")))?;
        let split = tokens
            .iter()
            .position(|t| t.starts_with(['>', '|', '&', ';', '<']) || t.starts_with("2>"))
            .unwrap_or(tokens.len());
        let (args, tail) = tokens[1..].split_at(split - 1);
        Some(self.run_ndb_tool(tool, args, tail))
    }

    fn run_ndb_tool(
        &mut self,
        tool: &str,
        args: &[String],
        tail: &[String],
    ) -> anyhow::Result<(String, String, i32)> {
        let node = self.node_of_connectstring(args);
        let backups = PathBuf::from(self.vars.get("NDB_BACKUP_DIR").cloned().unwrap_or_default())
            .join("BACKUP");
        let engine = self.nodes[node].engine.clone();
        let ran = if tool == ndb_tools::NDB_MGM {
            match ndb_tools::mgm_command(args) {
                Ok(ndb_tools::MgmCommand::Backup(words)) => {
                    ndb_tools::start_backup(&engine, &backups, &words)
                }
                Ok(ndb_tools::MgmCommand::Restart { node: id, .. }) => {
                    // Every data node of the cluster is this one node: restarting one of
                    // them or all has the same effect on the tables. `-n` (stay down until
                    // START) comes back at once: nothing can reach the tables in between
                    // that could tell.
                    drop(engine);
                    self.restart_node(node).map(|()| match id {
                        Some(id) => format!(
                            "Node {id}: Node shutdown initiated\nNode {id} is being restarted\n"
                        ),
                        None => {
                            "Executing RESTART on all nodes.\nAll DB nodes are being restarted.\n"
                                .to_string()
                        }
                    })
                }
                Ok(ndb_tools::MgmCommand::Start) => Ok("Database node is being started.\n".into()),
                Err(e) => Err(e),
            }
        } else if tool == ndb_tools::NDB_WAITER {
            let port = self.nodes[node].addrs[0].port();
            Ok(format!(
                "Connecting to management server at 127.0.0.1:{port}\nNode 1: STARTED\n"
            ))
        } else {
            ndb_tools::restore_args(args).and_then(|a| {
                let path = match (&a.path, a.backup_id) {
                    (Some(p), _) => p.clone(),
                    (None, Some(b)) => backups.join(format!("BACKUP-{b}")),
                    (None, None) => anyhow::bail!("ndb_restore: no backup id (-b) and no path"),
                };
                ndb_tools::restore(&engine, &path, &a)
            })
        };
        let (mut stdout, mut stderr, code) = match ran {
            Ok(out) => (out, String::new(), 0),
            Err(e) => (String::new(), format!("{e:#}\n"), 1),
        };
        let mut it = tail.iter();
        while let Some(t) = it.next() {
            let (target, append, from_stderr) = match t.as_str() {
                "2>&1" => {
                    stdout.push_str(&std::mem::take(&mut stderr));
                    continue;
                }
                ">" | ">>" | "2>" | "2>>" => (
                    it.next().cloned().context("a redirection without a file")?,
                    t.ends_with(">>"),
                    t.starts_with('2'),
                ),
                other => anyhow::bail!(
                    "{tool} {other}: the runner runs {tool} itself and takes only >, >> and 2>&1 after it"
                ),
            };
            // `2>&1` after `>> file` sends standard error to the same file.
            let both = !from_stderr && it.as_slice().first().is_some_and(|n| n == "2>&1");
            let mut text = if from_stderr {
                std::mem::take(&mut stderr)
            } else {
                std::mem::take(&mut stdout)
            };
            if both {
                text.push_str(&std::mem::take(&mut stderr));
                it.next();
            }
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(append)
                .truncate(!append)
                .open(&target)
                .with_context(|| format!("{tool}: {target}"))?;
            std::io::Write::write_all(&mut f, text.as_bytes())?;
        }
        Ok((stdout, stderr, code))
    }

    /// The node whose port an `--ndb-connectstring` / `-c` names; the source otherwise.
    fn node_of_connectstring(&self, args: &[String]) -> usize {
        let mut it = args.iter();
        let mut cs = None;
        while let Some(a) = it.next() {
            if let Some(v) = a
                .strip_prefix("--ndb-connectstring=")
                .or_else(|| a.strip_prefix("--connectstring="))
            {
                cs = Some(v.to_string());
            } else if a == "-c" || a == "--ndb-connectstring" {
                cs = it.next().cloned();
            }
        }
        let port = cs.and_then(|c| c.rsplit(':').next().map(str::to_string));
        port.and_then(|p| {
            self.nodes
                .iter()
                .position(|n| n.addrs.iter().any(|a| a.port().to_string() == p))
        })
        .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output_of(script: &str) -> Vec<String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.test");
        std::fs::write(&path, script).expect("script");
        run_script(&path, Topology::Single, &RunEnv::default())
            .expect("runs")
            .lines
    }

    #[test]
    fn error_lists_mix_numbers_names_and_sqlstates() {
        let (codes, unknown) = error_codes("1050, ER_TABLE_EXISTS_ERROR,S42S01 ,0");
        assert_eq!(
            codes,
            [
                Expected::Code(1050),
                Expected::Code(1050),
                Expected::State("42S01".into()),
                Expected::Code(0),
            ]
        );
        assert!(unknown.is_empty());
        assert!(codes[2].matches(1050, "42S01"));
        assert!(!codes[2].matches(1146, "42S02"));
        // A SQLSTATE names errors only: success is `0`.
        assert!(!codes[2].matches(0, "00000"));
        assert!(codes[3].matches(0, "00000"));
        assert_eq!(expected_text(&codes), "1050,1050,S42S01,0");
        let (codes, unknown) = error_codes("S4S01,ER_NOT_A_NAME,1062");
        assert_eq!(codes, [Expected::Code(1062)]);
        assert_eq!(unknown.len(), 2);
        assert!(unknown[0].starts_with("S4S01: a SQLSTATE is S and exactly 5 characters"));
        assert!(unknown[1].starts_with("ER_NOT_A_NAME: not an error name"));
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
    fn show_warnings_in_a_script_lists_the_previous_statements_warnings() {
        let out = output_of(
            "DROP VIEW IF EXISTS nothing_here;\nSHOW WARNINGS;\nSELECT 1;\nSHOW WARNINGS;\n",
        );
        let note = "Note\t1051\tUnknown table 'test.nothing_here'";
        assert_eq!(
            out,
            [
                "DROP VIEW IF EXISTS nothing_here;",
                "Warnings:",
                note,
                "SHOW WARNINGS;",
                "Level\tCode\tMessage",
                note,
                "SELECT 1;",
                "1",
                "1",
                "SHOW WARNINGS;",
                "Level\tCode\tMessage",
            ]
        );
        assert!(super::super::render::shows_diagnostics(
            "show count(*) warnings"
        ));
        assert!(!super::super::render::shows_diagnostics("SHOW TABLES"));
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
}
