//! The replica's replication channel: where it reads from, the applier run while the channel
//! is started, and the statements that steer it from SQL (`CHANGE REPLICATION SOURCE TO`,
//! `START REPLICA`, `STOP REPLICA`, `RESET REPLICA [ALL]`, `SHOW REPLICA STATUS`).
//!
//! The source comes from the command line (`--source`, `--source-binlog`, `--kafka-brokers`)
//! or, without one, from `replication_source.json` in the data directory, which CHANGE
//! REPLICATION SOURCE TO writes (mode 0600: it holds the replication password, as MySQL's
//! `mysql.slave_master_info` does). A configured channel starts when the node starts, as a
//! MySQL replica does, unless `--skip-replica-start` is given.
//!
//! Exactly once whatever the commands: the applier stops only between transactions, and every
//! start resumes from the position stored with the data (`mysql.ringrep_apply_status`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ringrep_applier::applier::read_positions;
use ringrep_applier::network::LinkStatus;
use ringrep_applier::{
    Applier, BinlogDirSource, EventSource, KafkaSource, NetworkConfig, NetworkSource,
};
use ringrep_engine::error::{code, Error};
use ringrep_engine::Engine;
use ringrep_kafka::KafkaSettings;
use ringrep_server::replica_sql::{ReplicaCommand, SourceOption};
use ringrep_server::{ReplicaControl, ReplicaReply};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, watch};

/// The file CHANGE REPLICATION SOURCE TO keeps the source in.
pub(crate) const SOURCE_FILE: &str = "replication_source.json";

/// Where a replica reads its primary's transactions.
#[derive(Debug, Clone)]
pub(crate) enum SourceSpec {
    /// The primary's replication stream over TCP.
    Network(NetworkConfig),
    /// The primary's replication topic in Kafka.
    Kafka(KafkaSettings),
    /// The primary's binlog directory.
    Directory(PathBuf),
}

/// The network source as CHANGE REPLICATION SOURCE TO stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredSource {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) user: String,
    pub(crate) password: String,
    pub(crate) ssl: bool,
    pub(crate) ssl_ca: Option<PathBuf>,
    pub(crate) heartbeat_ms: u64,
    pub(crate) connect_retry_s: u64,
}

impl Default for StoredSource {
    /// MySQL's defaults: port 3306, user root, a heartbeat every second (MySQL: half the
    /// replica's net timeout), reconnects at most 60 s apart.
    fn default() -> StoredSource {
        StoredSource {
            host: String::new(),
            port: 3306,
            user: "root".into(),
            password: String::new(),
            ssl: false,
            ssl_ca: None,
            heartbeat_ms: 1000,
            connect_retry_s: 60,
        }
    }
}

impl StoredSource {
    /// The stored source of the data directory `dir`, if CHANGE REPLICATION SOURCE TO gave one.
    pub(crate) fn load(dir: &Path) -> anyhow::Result<Option<StoredSource>> {
        let path = dir.join(SOURCE_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .with_context(|| format!("reading {}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Writes it durably: a new file, synced, renamed over the old one, the directory synced.
    fn save(&self, dir: &Path) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = dir.join(format!("{SOURCE_FILE}.tmp"));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(SOURCE_FILE))?;
        std::fs::File::open(dir)?.sync_all()
    }

    /// Removes the stored source of `dir` (promotion, RESET REPLICA ALL).
    pub(crate) fn remove_from(dir: &Path) -> std::io::Result<()> {
        StoredSource::remove(dir)
    }

    fn remove(dir: &Path) -> std::io::Result<()> {
        match std::fs::remove_file(dir.join(SOURCE_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => std::fs::File::open(dir)?.sync_all(),
        }
    }

    /// What a network source given by flags would store.
    fn from_network(n: &NetworkConfig) -> StoredSource {
        let (host, port) = n.address.rsplit_once(':').unwrap_or((&n.address, "3306"));
        StoredSource {
            host: host.to_string(),
            port: port.parse().unwrap_or(3306),
            user: n.user.clone(),
            password: n.password.clone(),
            ssl: n.tls.is_some(),
            ssl_ca: n.ca_file.clone(),
            heartbeat_ms: n.heartbeat.as_millis() as u64,
            connect_retry_s: n.connect_retry.as_secs(),
        }
    }

    /// The options of CHANGE REPLICATION SOURCE TO applied to `self`. Naming a CA turns TLS
    /// on unless the same statement says `SOURCE_SSL=0`.
    fn change(&mut self, options: &[SourceOption]) {
        let ssl_named = options.iter().any(|o| matches!(o, SourceOption::Ssl(_)));
        if !ssl_named
            && options
                .iter()
                .any(|o| matches!(o, SourceOption::SslCa(ca) if !ca.is_empty()))
        {
            self.ssl = true;
        }
        for o in options {
            match o {
                SourceOption::Host(h) => self.host = h.clone(),
                SourceOption::Port(p) => self.port = *p,
                SourceOption::User(u) => self.user = u.clone(),
                SourceOption::Password(p) => self.password = p.clone(),
                SourceOption::Ssl(on) => self.ssl = *on,
                SourceOption::SslCa(ca) => {
                    self.ssl_ca = (!ca.is_empty()).then(|| PathBuf::from(ca));
                }
                SourceOption::HeartbeatMs(ms) => self.heartbeat_ms = *ms,
                SourceOption::ConnectRetry(s) => self.connect_retry_s = *s,
                SourceOption::AutoPosition => {}
            }
        }
    }

    /// The network source's settings.
    pub(crate) fn network(&self, replica_id: u32) -> anyhow::Result<NetworkConfig> {
        if self.host.is_empty() {
            bail!("no SOURCE_HOST");
        }
        let tls = match (&self.ssl_ca, self.ssl) {
            (Some(ca), true) => Some(
                ringrep_applier::network::tls_to(ca, &self.host).map_err(anyhow::Error::msg)?,
            ),
            (None, true) => bail!(
                "SOURCE_SSL=1 needs SOURCE_SSL_CA: a ringrep replica verifies its source's certificate"
            ),
            (_, false) => None,
        };
        Ok(NetworkConfig {
            address: format!("{}:{}", self.host, self.port),
            user: self.user.clone(),
            password: self.password.clone(),
            replica_id,
            heartbeat: Duration::from_millis(self.heartbeat_ms.max(1)),
            connect_retry: Duration::from_secs(self.connect_retry_s.max(1)),
            tls,
            ca_file: self.ssl_ca.clone().filter(|_| self.ssl),
        })
    }
}

/// How a run of the applier is bounded.
#[derive(Debug, Clone)]
pub(crate) struct RunLimits {
    /// This replica's server id.
    pub(crate) server_id: u32,
    /// `--until-seq`.
    pub(crate) until_seq: Option<u64>,
    /// `--exit-when-caught-up`.
    pub(crate) exit_when_caught_up: bool,
    /// `--source-retry-count`: in a run that has to end, the failed attempts in a row to
    /// reach the source before it fails.
    pub(crate) retry_count: u32,
    /// The data directory (where CHANGE REPLICATION SOURCE TO stores the source).
    pub(crate) dir: PathBuf,
    /// Whether clients can steer the channel (the node serves --listen): then a run that
    /// fails stops the channel with its error shown, and the node goes on serving; otherwise
    /// the error ends the process.
    pub(crate) steerable: bool,
}

impl RunLimits {
    /// Whether the run has to end (`--until-seq`, `--exit-when-caught-up`): a source that
    /// refuses or cannot be reached then fails it, with the reason, rather than being retried
    /// for ever (or taken for caught up).
    pub(crate) fn must_end(&self) -> bool {
        self.exit_when_caught_up || self.until_seq.is_some()
    }
}

/// What SHOW REPLICA STATUS reads: the channel's state, written by its task.
#[derive(Debug, Default)]
struct State {
    /// The source the channel reads (or would, once started).
    source: Option<SourceSpec>,
    /// Whether the applier runs (MySQL's IO and SQL threads are one task here).
    running: bool,
    /// Between tries after a source fault that passes: SHOW REPLICA STATUS says Connecting,
    /// as MySQL's I/O thread while it retries a source it lost.
    retrying_source: bool,
    /// The source's server id, once learnt.
    source_id: Option<u32>,
    /// The network link, while one is open.
    link: Option<Arc<Mutex<LinkStatus>>>,
    /// The last transaction received and where, kept from the link when it closes: SHOW
    /// REPLICA STATUS goes on showing `Source_Log_File` and `Read_Source_Log_Pos` after STOP
    /// REPLICA, as MySQL's does.
    last_received: Option<(u64, binlog_format::Position)>,
    /// MySQL's error number of `last_io_error` (0 with none).
    last_io_errno: u32,
    last_io_error: String,
    /// MySQL's error number of `last_sql_error` (0 with none).
    last_sql_errno: u32,
    last_sql_error: String,
}

impl State {
    fn clear_errors(&mut self) {
        self.last_io_errno = 0;
        self.last_io_error.clear();
        self.last_sql_errno = 0;
        self.last_sql_error.clear();
    }

    /// Closes the link, keeping what it received last.
    fn drop_link(&mut self) {
        if let Some(l) = self.link.take() {
            if let Some(r) = l.lock().ok().and_then(|l| l.received) {
                self.last_received = Some(r);
            }
        }
    }
}

/// MySQL's error numbers for SHOW REPLICA STATUS's `Last_IO_Errno` and `Last_SQL_Errno`.
mod errno {
    /// CR_CONN_HOST_ERROR: the source cannot be reached (MySQL shows it for a link that fails
    /// without an error of the source's own).
    pub(super) const CONNECT: u32 = 2003;
    /// ER_SERVER_SOURCE_FATAL_ERROR_READING_BINLOG: the source cannot serve the stream from
    /// the replica's position (its error 1236) or the stream skipped transactions.
    pub(super) const SOURCE_FATAL: u32 = 13114;
    /// ER_UNKNOWN_ERROR, for a failure without a MySQL code of its own.
    pub(super) const UNKNOWN: u32 = 1105;
}

/// The error number a run's error shows as: the engine's MySQL code when it has one.
fn errno_of(e: &anyhow::Error) -> u32 {
    if let Some(code) = e
        .downcast_ref::<ringrep_engine::Error>()
        .map(|e| e.code)
        .or_else(|| match e.downcast_ref::<ringrep_applier::Error>() {
            Some(ringrep_applier::Error::Engine(e)) => Some(e.code),
            _ => None,
        })
    {
        return u32::from(code);
    }
    match e.downcast_ref::<ringrep_applier::Error>() {
        Some(ringrep_applier::Error::SourceFatal(_) | ringrep_applier::Error::Gap { .. }) => {
            errno::SOURCE_FATAL
        }
        Some(
            ringrep_applier::Error::Source(_)
            | ringrep_applier::Error::Refused(_)
            | ringrep_applier::Error::Kafka(_),
        ) => link_errno(&e.to_string()),
        _ => errno::UNKNOWN,
    }
}

/// The error number of a link's failure: the source's own MySQL error when the text carries
/// one, else 2003. The client library writes `ERROR 28000 (1045): ...` (SQLSTATE, then the
/// code), MySQL's own client `ERROR 1045 (28000): ...`; a SQLSTATE has five characters.
fn link_errno(text: &str) -> u32 {
    let code = |s: &str| s.parse::<u32>().ok().filter(|_| (4..=5).contains(&s.len()));
    text.match_indices("ERROR ")
        .find_map(|(at, _)| {
            let rest = &text[at + 6..];
            let (first, rest) = rest.split_once(" (")?;
            let (inner, _) = rest.split_once(')')?;
            if first.len() == 5 && inner.len() != 5 {
                code(inner)
            } else if first.len() != 5 {
                code(first)
            } else {
                code(inner).or_else(|| code(first))
            }
        })
        .unwrap_or(errno::CONNECT)
}

/// Where a statement's answer goes: its notes, or its error.
type Reply = oneshot::Sender<Result<Vec<(u16, String)>, Error>>;
/// A statement for the channel's task, with where to answer.
type Command = (ReplicaCommand, Reply);

/// The channel as the server sees it ([`ReplicaControl`]).
#[derive(Debug)]
pub(crate) struct Channel {
    engine: Engine,
    state: Arc<Mutex<State>>,
    commands: mpsc::Sender<Command>,
}

/// The channel's task: runs the applier while the channel is started, takes the statements.
pub(crate) struct Driver {
    applier: Applier,
    state: Arc<Mutex<State>>,
    commands: mpsc::Receiver<Command>,
    limits: RunLimits,
}

/// A channel and the task that drives it.
pub(crate) fn channel(
    applier: Applier,
    source: Option<SourceSpec>,
    limits: RunLimits,
) -> (Arc<Channel>, Driver) {
    let state = Arc::new(Mutex::new(State {
        source,
        ..Default::default()
    }));
    let (tx, rx) = mpsc::channel(8);
    (
        Arc::new(Channel {
            engine: applier.engine().clone(),
            state: state.clone(),
            commands: tx,
        }),
        Driver {
            applier,
            state,
            commands: rx,
            limits,
        },
    )
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn must_stop() -> Error {
    Error::new(
        code::ER_REPLICA_CHANNEL_IO_THREAD_MUST_STOP,
        "This operation cannot be performed with a running replica io thread; run STOP REPLICA IO_THREAD FOR CHANNEL '' first.",
    )
}

/// How a run ended, with the last sequence it applied.
enum Ended {
    /// By its limits (`--until-seq`, `--exit-when-caught-up`).
    Limits(u64),
    /// By STOP REPLICA.
    Statement(u64),
    /// The node is shutting down.
    Shutdown(u64),
}

impl Driver {
    /// Runs the channel until the node shuts down (`shutdown` turns true) or, without clients
    /// to steer it, until its run ends. `start`: start it now if a source is configured.
    pub(crate) async fn drive(
        mut self,
        start: bool,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<u64> {
        let mut want_running = start && lock(&self.state).source.is_some();
        let mut last = 0;
        // After a storage fault (a full disk), how long until the next try.
        let mut pause = FIRST_PAUSE;
        loop {
            if *shutdown.borrow() {
                return Ok(last);
            }
            if !want_running {
                tokio::select! {
                    cmd = self.commands.recv() => match cmd {
                        Some((cmd, reply)) => {
                            let r = self.stopped_command(cmd, &mut want_running);
                            let _ = reply.send(r);
                        }
                        None => return Ok(last),
                    },
                    _ = shutdown.changed() => return Ok(last),
                }
                continue;
            }
            want_running = false;
            match self.run_until_stopped(&mut shutdown).await {
                Ok(Ended::Limits(seq)) => return Ok(seq),
                Ok(Ended::Statement(seq)) => {
                    last = seq;
                    pause = FIRST_PAUSE;
                }
                Ok(Ended::Shutdown(seq)) => return Ok(seq),
                Err(e)
                    if is_storage_fault(&e)
                        || (is_passing_source_fault(&e) && !self.limits.must_end()) =>
                {
                    // The replica's own disk is full or failing: its engine took back what
                    // did not become durable, so the next try goes on from the stored
                    // position. Or the source failed in a way that passes (a broker slow to
                    // answer or away for a while), as MySQL's I/O thread retries a source it
                    // lost. It pauses rather than stops: the fault usually passes (space is
                    // freed, the broker answers) without anyone to run START REPLICA.
                    // The status first, then the log line: whoever reads the line may ask
                    // SHOW REPLICA STATUS at once, and must find the error there.
                    {
                        let mut st = lock(&self.state);
                        let text = format!(
                            "{e} (paused: trying again every {} s until it succeeds, or STOP REPLICA)",
                            pause.as_secs()
                        );
                        if is_io_error(&e) {
                            st.last_io_errno = errno_of(&e);
                            st.last_io_error = text;
                            st.retrying_source = true;
                        } else {
                            st.last_sql_errno = errno_of(&e);
                            st.last_sql_error = text;
                        }
                    }
                    eprintln!(
                        "replication paused: {e}; trying again in {} s",
                        pause.as_secs()
                    );
                    want_running = tokio::select! {
                        _ = tokio::time::sleep(pause) => true,
                        cmd = self.commands.recv() => match cmd {
                            Some((ReplicaCommand::Stop, reply)) => {
                                let _ = reply.send(Ok(vec![]));
                                false
                            }
                            Some((cmd, reply)) => {
                                let mut start = true;
                                let r = self.stopped_command(cmd, &mut start);
                                let _ = reply.send(r);
                                true
                            }
                            None => return Ok(last),
                        },
                        _ = shutdown.changed() => return Ok(last),
                    };
                    lock(&self.state).retrying_source = false;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                Err(e) if self.limits.steerable && !self.limits.must_end() => {
                    // As MySQL's replica threads: stop with the error shown, keep serving.
                    {
                        let mut st = lock(&self.state);
                        let text = format!("{e:#}");
                        if is_io_error(&e) {
                            st.last_io_errno = errno_of(&e);
                            st.last_io_error = text;
                        } else {
                            st.last_sql_errno = errno_of(&e);
                            st.last_sql_error = text;
                        }
                    }
                    eprintln!("replication stopped: {e:#}; fix the cause, then START REPLICA");
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A statement while the channel is stopped. It may block (a promotion fsyncs, the
    /// stored source is written), so it runs through `may_block`: off the worker's other
    /// tasks when the channel runs on one.
    fn stopped_command(
        &mut self,
        cmd: ReplicaCommand,
        want_running: &mut bool,
    ) -> Result<Vec<(u16, String)>, Error> {
        ringrep_applier::may_block(|| match cmd {
            ReplicaCommand::Start => {
                let mut st = lock(&self.state);
                if st.source.is_none() {
                    return Err(Error::new(
                        code::ER_BAD_SLAVE,
                        "The server is not configured as replica; fix in config file or with CHANGE REPLICATION SOURCE TO",
                    ));
                }
                st.clear_errors();
                *want_running = true;
                Ok(vec![])
            }
            ReplicaCommand::Stop => Ok(vec![(
                3084,
                "Replication thread(s) for channel '' are already stopped.".into(),
            )]),
            ReplicaCommand::Reset { all } => {
                let mut st = lock(&self.state);
                st.clear_errors();
                st.last_received = None;
                if all {
                    StoredSource::remove(&self.limits.dir)
                        .map_err(|e| Error::internal(format!("removing {SOURCE_FILE}: {e}")))?;
                    st.source = None;
                    st.source_id = None;
                    st.link = None;
                    st.last_received = None;
                    // No source any more: the node is a primary (its positions stay, for
                    // the old primary's other replicas to follow it).
                    let engine = self.applier.engine().clone();
                    if engine.is_read_only() {
                        engine.promote()?;
                        ringrep_server::spawn_ttl_purge(engine);
                        return Ok(vec![(
                            1105,
                            "This node is a primary now: it takes writes (RESET REPLICA ALL promotes a ringrep replica)".into(),
                        )]);
                    }
                }
                Ok(vec![])
            }
            ReplicaCommand::ChangeSource(options) => {
                // Options not named keep their values: those stored, else those of the
                // network source the flags gave, else the defaults.
                let stored = StoredSource::load(&self.limits.dir)
                    .map_err(|e| Error::internal(format!("{e:#}")))?;
                let mut stored = match (stored, &lock(&self.state).source) {
                    (Some(s), _) => s,
                    (None, Some(SourceSpec::Network(n))) => StoredSource::from_network(n),
                    (None, _) => StoredSource::default(),
                };
                stored.change(&options);
                let network = stored.network(self.limits.server_id).map_err(|e| {
                    Error::new(
                        code::ER_WRONG_ARGUMENTS,
                        format!("Incorrect arguments to CHANGE REPLICATION SOURCE: {e:#}"),
                    )
                })?;
                stored
                    .save(&self.limits.dir)
                    .map_err(|e| Error::internal(format!("writing {SOURCE_FILE}: {e}")))?;
                // A promoted node given a source is a replica again.
                let engine = self.applier.engine().clone();
                if !engine.is_read_only() {
                    engine.demote()?;
                }
                let mut st = lock(&self.state);
                st.source = Some(SourceSpec::Network(network));
                st.source_id = None;
                st.link = None;
                st.last_received = None;
                let mut notes = Vec::new();
                if options
                    .iter()
                    .any(|o| matches!(o, SourceOption::Password(_)))
                {
                    // MySQL's note: the password is kept in clear in the replica's data.
                    notes.push((
                        1760,
                        "Storing MySQL user name or password information in the connection metadata repository is not secure and is therefore not recommended. Please consider using the USER and PASSWORD connection options for START REPLICA; see the 'START REPLICA Syntax' in the MySQL Manual for more information.".into(),
                    ));
                }
                Ok(notes)
            }
        })
    }

    /// One run of the applier, until it ends, STOP REPLICA, or shutdown.
    async fn run_until_stopped(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> anyhow::Result<Ended> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let source = lock(&self.state).source.clone();
        let Some(source) = source else {
            return Ok(Ended::Statement(0));
        };
        lock(&self.state).running = true;
        let state = self.state.clone();
        let limits = self.limits.clone();
        let run = run_once(&mut self.applier, source, &limits, &state, stop_rx);
        tokio::pin!(run);
        let mut stop_replies: Vec<Reply> = Vec::new();
        let mut shutting_down = false;
        let result = loop {
            tokio::select! {
                r = &mut run => break r,
                cmd = self.commands.recv(), if stop_replies.is_empty() && !shutting_down => match cmd {
                    Some((ReplicaCommand::Stop, reply)) => {
                        let _ = stop_tx.send(true);
                        stop_replies.push(reply);
                    }
                    Some((ReplicaCommand::Start, reply)) => {
                        let _ = reply.send(Ok(vec![(
                            3083,
                            "Replication thread(s) for channel '' are already runnning.".into(),
                        )]));
                    }
                    Some((_, reply)) => {
                        let _ = reply.send(Err(must_stop()));
                    }
                    None => {}
                },
                _ = shutdown.changed(), if !shutting_down => {
                    shutting_down = true;
                    let _ = stop_tx.send(true);
                }
            }
        };
        {
            let mut st = lock(&self.state);
            st.running = false;
            st.drop_link();
        }
        let stopped_by_statement = !stop_replies.is_empty();
        for reply in stop_replies {
            let _ = reply.send(Ok(vec![]));
        }
        let last = result?;
        if shutting_down {
            return Ok(Ended::Shutdown(last));
        }
        if stopped_by_statement {
            // Not the run's limits: the channel waits for START REPLICA.
            return Ok(Ended::Statement(last));
        }
        Ok(Ended::Limits(last))
    }
}

/// The first pause after a storage fault, and the longest (the pause doubles each time).
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// Whether a run failed because the replica's own storage did (a full disk, an I/O error):
/// a fault that may pass, after which applying goes on where it stopped.
fn is_storage_fault(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<ringrep_applier::Error>(),
        Some(ringrep_applier::Error::Engine(e))
            if e.kind == ringrep_engine::error::ErrorKind::Transient
    )
}

/// Whether a run's error is the source's and may pass by itself (a broker that did not answer
/// in time, a connection lost): retried after a pause, as MySQL's I/O thread retries.
fn is_passing_source_fault(e: &anyhow::Error) -> bool {
    is_io_error(e)
        && e.downcast_ref::<ringrep_applier::Error>()
            .is_some_and(ringrep_applier::Error::is_retriable)
}

/// Whether a run's error is the link's (MySQL's Last_IO_Error) rather than applying's.
fn is_io_error(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<ringrep_applier::Error>(),
        Some(
            ringrep_applier::Error::Source(_)
                | ringrep_applier::Error::Refused(_)
                | ringrep_applier::Error::SourceFatal(_)
                | ringrep_applier::Error::Gap { .. }
                | ringrep_applier::Error::Binlog(_)
                | ringrep_applier::Error::Kafka(_)
        )
    )
}

/// Learns the source's server id, opens the source at the next sequence to apply, and applies
/// until `stop` or the limits.
async fn run_once(
    applier: &mut Applier,
    spec: SourceSpec,
    limits: &RunLimits,
    state: &Arc<Mutex<State>>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<u64> {
    let mut attempts = 0u32;
    let source_id = loop {
        if *stop.borrow() {
            return Ok(0);
        }
        let found = match &spec {
            SourceSpec::Network(n) => match ask_server_id(n, &stop).await {
                None => return Ok(0),
                Some(Ok(id)) => Some(id),
                Some(Err(e)) => {
                    attempts += 1;
                    if limits.must_end() {
                        let code = link_errno(&e.to_string());
                        if u16::try_from(code).is_ok_and(ringrep_applier::network::is_access_error)
                        {
                            bail!("the source refused this replica: {e}");
                        }
                        if attempts >= limits.retry_count.max(1) {
                            bail!("cannot reach the source: gave up after {attempts} failed attempts: {e}");
                        }
                    }
                    eprintln!("waiting for the primary: {e}");
                    {
                        let mut st = lock(state);
                        st.last_io_errno = link_errno(&e.to_string());
                        st.last_io_error = format!("waiting for the primary: {e}");
                    }
                    wait_or_stop(&stop, Duration::from_secs(1)).await;
                    None
                }
            },
            SourceSpec::Kafka(k) => {
                let k = k.clone();
                tokio::task::spawn_blocking(move || {
                    KafkaSource::server_id(&k, Duration::from_secs(1))
                })
                .await??
            }
            SourceSpec::Directory(dir) => binlog_format::segment::directory_server_id(dir)?,
        };
        if let Some(id) = found {
            break id;
        }
        wait_or_stop(&stop, Duration::from_millis(50)).await;
    };
    if source_id == limits.server_id {
        bail!(
            "the replica's --server-id {} equals the primary's; give the replica its own id",
            limits.server_id
        );
    }
    let from = applier.position(source_id).map_or(1, |p| p.last_seq + 1);
    if limits.until_seq.is_some_and(|u| from > u) {
        eprintln!(
            "already applied seq {} from server {source_id}; nothing to do",
            from - 1
        );
        return Ok(from - 1);
    }
    let mut source: Box<dyn EventSource> = match &spec {
        SourceSpec::Network(n) => {
            // With no position from this source yet, what was applied from others tells a
            // promoted primary where this replica stands (a failover).
            let mut others: Vec<(u32, u64)> = read_positions(applier.engine())
                .into_iter()
                .filter(|p| p.server_id != source_id)
                .map(|p| (p.server_id, p.last_seq))
                .collect();
            // So does what this node committed itself, when it was a primary (the old
            // primary rejoining the promoted one): the source streams from the first
            // transaction this node lacks when it holds all of them, and provisions this node
            // when it does not (commits that were never streamed to it).
            if from == 1 {
                let engine = applier.engine().clone();
                let own = tokio::task::spawn_blocking(move || engine.last_own_commit()).await??;
                if let Some(seq) = own {
                    eprintln!("this node committed up to its own seq {seq} itself (it was a primary): the source checks it holds them");
                    others.push((limits.server_id, seq));
                }
            }
            // Known only for a position an applied transaction left (a seeded or provisioned
            // one has no place in the source's binlog, segment 0, nor its commit time).
            let last_commit = applier
                .position(source_id)
                .filter(|p| p.position.segment != 0)
                .map(|p| p.source_commit_us);
            let s = NetworkSource::new(n.clone(), from)
                .with_origins(others)
                .with_last_commit(last_commit)
                .giving_up_after(limits.must_end().then_some(limits.retry_count));
            lock(state).link = Some(s.status());
            Box::new(s)
        }
        SourceSpec::Kafka(k) => {
            let k = k.clone();
            Box::new(tokio::task::spawn_blocking(move || KafkaSource::open(&k, from)).await??)
        }
        SourceSpec::Directory(dir) => Box::new(BinlogDirSource::open(dir, from, None)),
    };
    {
        let mut st = lock(state);
        st.source_id = Some(source_id);
        st.last_io_errno = 0;
        st.last_io_error.clear();
    }
    eprintln!(
        "applying from server {source_id} at seq {from} ({})",
        source.describe()
    );
    let mut last_print = Instant::now();
    let last = applier
        .run(
            source.as_mut(),
            limits.until_seq,
            limits.exit_when_caught_up,
            Duration::from_millis(200),
            &mut |a, seq| {
                if last_print.elapsed() >= Duration::from_secs(1) {
                    eprintln!(
                        "applied seq {} ({} applied, {} skipped), lag p50 {:.2} ms p99 {:.2} ms",
                        seq,
                        a.applied,
                        a.skipped,
                        a.lag.percentile(50.0).unwrap_or(0) as f64 / 1000.0,
                        a.lag.percentile(99.0).unwrap_or(0) as f64 / 1000.0
                    );
                    last_print = Instant::now();
                }
            },
            &stop,
        )
        .await?;
    // Nothing new applied: the run still ends where the replica stands.
    Ok(last.max(from - 1))
}

/// The primary's server id, asked over a connection of its own; `None` once `stop` turns
/// true. A primary that accepts and never answers costs 10 s, not a STOP REPLICA that hangs.
async fn ask_server_id(
    n: &NetworkConfig,
    stop: &watch::Receiver<bool>,
) -> Option<ringrep_applier::Result<u32>> {
    let mut stop = stop.clone();
    tokio::select! {
        r = tokio::time::timeout(Duration::from_secs(10), crate::remote::server_id_of(n)) => {
            Some(r.unwrap_or_else(|_| {
                Err(ringrep_applier::Error::Source(format!(
                    "{}: no answer to SELECT @@server_id within 10 s",
                    n.address
                )))
            }))
        }
        _ = stop.wait_for(|s| *s) => None,
    }
}

async fn wait_or_stop(stop: &watch::Receiver<bool>, d: Duration) {
    let mut stop = stop.clone();
    let _ = tokio::time::timeout(d, stop.wait_for(|s| *s)).await;
}

impl ReplicaControl for Channel {
    fn command(&self, command: ReplicaCommand) -> ReplicaReply {
        let commands = self.commands.clone();
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            commands
                .send((command, tx))
                .await
                .map_err(|_| Error::internal("the replication channel has stopped"))?;
            rx.await
                .map_err(|_| Error::internal("the replication channel has stopped"))?
        })
    }

    fn fields(&self) -> Vec<(&'static str, Option<String>)> {
        let st = lock(&self.state);
        let Some(source) = &st.source else {
            return Vec::new();
        };
        let link = st
            .link
            .as_ref()
            .and_then(|l| l.lock().ok().map(|l| l.clone()));
        let applied = st.source_id.and_then(|id| {
            read_positions(&self.engine)
                .into_iter()
                .find(|p| p.server_id == id)
        });
        let connected = match (&st.link, source) {
            (Some(_), _) => link.as_ref().is_some_and(|l| l.connected),
            (None, SourceSpec::Network(_)) => false,
            (None, _) => st.source_id.is_some(),
        };
        let io = match (st.running, connected) {
            (false, _) if st.retrying_source => "Connecting",
            (false, _) => "No",
            (true, true) => "Yes",
            (true, false) => "Connecting",
        };
        let (host, port, user, retry, ssl) = match source {
            SourceSpec::Network(n) => {
                let (h, p) = n
                    .address
                    .rsplit_once(':')
                    .unwrap_or((n.address.as_str(), ""));
                (
                    h.to_string(),
                    p.to_string(),
                    n.user.clone(),
                    n.connect_retry.as_secs().to_string(),
                    if n.tls.is_some() { "Yes" } else { "No" },
                )
            }
            SourceSpec::Kafka(k) => (
                format!("kafka {}", k.brokers),
                String::new(),
                String::new(),
                String::new(),
                "No",
            ),
            SourceSpec::Directory(d) => (
                format!("binlog directory {}", d.display()),
                String::new(),
                String::new(),
                String::new(),
                "No",
            ),
        };
        let applied_seq = applied.map_or(0, |p| p.last_seq);
        let source_seq = link
            .as_ref()
            .map_or(applied_seq, |l| l.source_last_seq.max(applied_seq));
        let received = link.as_ref().and_then(|l| l.received).or(st.last_received);
        let now_us = self.engine.now_us();
        // MySQL's meaning: NULL without a link; 0 when caught up; otherwise how old the last
        // applied transaction is by the source's commit clock.
        let behind = match (io, applied) {
            ("Yes", _) if applied_seq >= source_seq => Some("0".to_string()),
            ("Yes", Some(p)) => {
                Some(((now_us - p.source_commit_us).max(0) / 1_000_000).to_string())
            }
            _ => None,
        };
        let (last_io_errno, last_io_error) = match (&link, st.running) {
            (Some(l), true) => l.last_error.clone().map_or_else(
                || (st.last_io_errno, st.last_io_error.clone()),
                |e| (link_errno(&e), e),
            ),
            _ => (st.last_io_errno, st.last_io_error.clone()),
        };
        let segment = |p: &binlog_format::Position| binlog_format::segment::segment_name(p.segment);
        let heartbeat = match source {
            SourceSpec::Network(n) => format!("{:.3}", n.heartbeat.as_secs_f64()),
            _ => "0.000".into(),
        };
        let ssl_ca = match source {
            SourceSpec::Network(_) => StoredSource::load(self.engine.dir())
                .ok()
                .flatten()
                .and_then(|s| s.ssl_ca)
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            _ => String::new(),
        };
        vec![
            (
                "Replica_IO_State",
                Some(match io {
                    "Yes" => "Waiting for source to send event".to_string(),
                    "Connecting" => "Connecting to source".to_string(),
                    _ => String::new(),
                }),
            ),
            ("Source_Host", Some(host)),
            ("Source_User", Some(user)),
            ("Source_Port", Some(port)),
            ("Connect_Retry", Some(retry)),
            ("Source_Log_File", received.map(|(_, p)| segment(&p))),
            (
                "Read_Source_Log_Pos",
                received.map(|(_, p)| p.offset.to_string()),
            ),
            (
                "Relay_Source_Log_File",
                // A position loaded with a snapshot (provisioning, seed) has no file.
                applied
                    .filter(|p| p.position.segment > 0)
                    .map(|p| segment(&p.position)),
            ),
            ("Replica_IO_Running", Some(io.to_string())),
            (
                "Replica_SQL_Running",
                Some(
                    if st.running || st.retrying_source {
                        "Yes"
                    } else {
                        "No"
                    }
                    .to_string(),
                ),
            ),
            (
                "Exec_Source_Log_Pos",
                applied.map(|p| p.position.offset.to_string()),
            ),
            ("Source_SSL_Allowed", Some(ssl.to_string())),
            ("Source_SSL_CA_File", Some(ssl_ca)),
            // MySQL's Last_Errno and Last_Error repeat the SQL thread's.
            ("Last_Errno", Some(st.last_sql_errno.to_string())),
            ("Last_Error", Some(st.last_sql_error.clone())),
            ("Seconds_Behind_Source", behind),
            ("Last_IO_Errno", Some(last_io_errno.to_string())),
            ("Last_IO_Error", Some(last_io_error)),
            ("Last_SQL_Errno", Some(st.last_sql_errno.to_string())),
            ("Last_SQL_Error", Some(st.last_sql_error.clone())),
            ("Source_Server_Id", st.source_id.map(|id| id.to_string())),
            ("Source_Heartbeat_Period", Some(heartbeat)),
            ("Auto_Position", Some("1".into())),
            (
                "Retrieved_Seq",
                Some(received.map_or(applied_seq, |(s, _)| s).to_string()),
            ),
            ("Executed_Seq", Some(applied_seq.to_string())),
            ("Source_Last_Seq", Some(source_seq.to_string())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_error_shows_the_source_code_it_carries() {
        for (text, n) in [
            (
                "connecting to a: Server error: `ERROR 28000 (1045): Access denied",
                1045,
            ),
            (
                "ERROR 1227 (42000): Access denied; you need REPLICATION SLAVE",
                1227,
            ),
            ("ERROR HY000 (13114): fatal", 13114),
            ("ERROR 13114 (HY000): fatal", 13114),
            ("connection refused (os error 111)", errno::CONNECT),
            ("ERROR oops", errno::CONNECT),
        ] {
            assert_eq!(link_errno(text), n, "{text}");
        }
    }
}
