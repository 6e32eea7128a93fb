//! One client connection: the connection phase (greeting, TLS, authentication), then the
//! client's commands, each statement run in the connection's own SQL session.
//!
//! Statements run one at a time per connection, in the order the client sends them: a brief
//! one (`SqlSession::runs_briefly`) on the connection's task itself, without waiting for row
//! locks; any other, and a brief one that would have waited, on a thread that may block. Their
//! commits are awaited here, on the connection's task, until durable
//! (`Engine::wait_durable_async`); only then is the client answered. docs/architecture.md,
//! "The statement path", gives the design and its measurements.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::stream;
use super::wire::{self, ty, Cell};
use super::{auth, Shared};
use ringrep_engine::error::{code, Error};
use ringrep_protocol::{self as protocol, cap, status, ColumnDef, Cursor, Packets, ReadError};
use ringrep_sql::{count_placeholders, AccountDirectory, Authority, Outcome, Privs, SqlSession};

/// MySQL's default `max_allowed_packet`: the largest command a client may send.
pub(crate) const MAX_ALLOWED_PACKET: usize = 64 << 20;

/// The largest command buffer a connection keeps between commands: a large packet's (a
/// LOAD DATA, a long multi-row INSERT) is freed after it, not held while the client idles.
const KEPT_PACKET_BUFFER: usize = 64 << 10;

/// Command bytes (`COM_*`).
mod com {
    pub(super) const QUIT: u8 = 0x01;
    pub(super) const INIT_DB: u8 = 0x02;
    pub(super) const QUERY: u8 = 0x03;
    pub(super) const FIELD_LIST: u8 = 0x04;
    pub(super) const STATISTICS: u8 = 0x09;
    pub(super) const PING: u8 = 0x0e;
    pub(super) const BINLOG_DUMP: u8 = 0x12;
    pub(super) const REGISTER_SLAVE: u8 = 0x15;
    pub(super) const STMT_PREPARE: u8 = 0x16;
    pub(super) const STMT_EXECUTE: u8 = 0x17;
    pub(super) const STMT_SEND_LONG_DATA: u8 = 0x18;
    pub(super) const STMT_CLOSE: u8 = 0x19;
    pub(super) const STMT_RESET: u8 = 0x1a;
    pub(super) const SET_OPTION: u8 = 0x1b;
    pub(super) const BINLOG_DUMP_GTID: u8 = 0x1e;
    pub(super) const RESET_CONNECTION: u8 = 0x1f;
}

/// A prepared statement of the protocol (COM_STMT_PREPARE).
struct Prepared {
    /// Shared with each execution, which holds it while it runs: no copy per execution.
    text: Arc<str>,
    params: usize,
    /// Parameter types from the last execution that sent them.
    types: Vec<(u8, bool)>,
    /// COM_STMT_SEND_LONG_DATA chunks, by parameter, for the next execution.
    long_data: HashMap<u16, Vec<u8>>,
}

/// The most rows a brief statement may read of a table on the connection's task (some tens
/// of microseconds' work); one that would read more runs again on a thread of its own.
const BRIEF_READ_ROWS: usize = 256;

/// A connection's state: its session, its prepared statements, what it negotiated.
struct Conn {
    shared: Arc<Shared>,
    id: u32,
    /// `None` only while a statement runs on the blocking pool.
    sql: Option<SqlSession>,
    statements: HashMap<u32, Prepared>,
    next_statement: u32,
    /// The capabilities both sides have.
    caps: u32,
    /// The client's address.
    peer: SocketAddr,
    /// For an account of `mysql.user`: the account tables as its grants were read from, to
    /// read them again once they change.
    directory: Option<Arc<AccountDirectory>>,
    /// Who logged in: kept here as well as in the session, so that a new session (after
    /// COM_RESET_CONNECTION, or one lost to a failure) runs as the same account.
    authority: Option<Authority>,
    /// Set once logged in: KILL of this connection.
    kill: Option<Arc<super::processes::Kill>>,
}

/// What a statement left for the OK packet.
#[derive(Debug, Clone, Copy, Default)]
struct Done {
    status: u16,
    last_insert_id: u64,
    /// The statement's warnings and notes, as SHOW WARNINGS would list them: clients show the
    /// count ("1 warning") and some ask for them.
    warnings: u16,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if self.kill.is_some() {
            self.shared.processes.leave(self.id);
        }
        self.shared
            .connections
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Serves one accepted connection until the client quits or the connection fails. The
/// connection count (`Shared::connections`) was raised by the caller; it goes down when this
/// returns.
pub(super) async fn serve(shared: Arc<Shared>, stream: TcpStream, peer: SocketAddr, id: u32) {
    let _ = stream.set_nodelay(true);
    let conn = Conn {
        sql: Some(new_session(&shared, id)),
        shared,
        id,
        statements: HashMap::new(),
        next_statement: 1,
        caps: 0,
        peer,
        directory: None,
        authority: None,
        kill: None,
    };
    // A client that stops reading its replies (MySQL's net_write_timeout): the write fails
    // after the timeout, the connection closes and its transaction is rolled back, instead of
    // holding its locks and its slot for ever.
    let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
    stream.set_write_timeout(Some(conn.shared.net_write_timeout));
    match start(conn, Box::pin(stream)).await {
        Ok(()) => tracing::debug!(connection = id, "closed"),
        Err(e) => tracing::debug!(connection = id, "closed: {e}"),
    }
}

fn new_session(shared: &Arc<Shared>, id: u32) -> SqlSession {
    let mut sql = SqlSession::new(&shared.engine);
    sql.connection_id = u64::from(id);
    sql.net_write_timeout = shared.net_write_timeout.as_secs();
    sql.port = shared.port;
    sql.max_connections = shared.max_connections as u64;
    sql.server_status = Some(shared.clone());
    // Commits return once logged; `Conn::run` awaits their durability before replying, so no
    // thread sleeps in the group commit per statement.
    sql.session.defer_durability = true;
    sql
}

/// A client's TCP connection, writes bounded by `net_write_timeout`.
type Socket = std::pin::Pin<Box<tokio_io_timeout::TimeoutStream<TcpStream>>>;

/// The greeting, then TLS if the client asks for it, then the rest on the stream it chose.
async fn start(conn: Conn, stream: Socket) -> io::Result<()> {
    let salt = auth::new_salt()?;
    let mut server_caps = cap::SERVER;
    if conn.shared.tls.is_some() {
        server_caps |= cap::SSL;
    }
    // Unbuffered until the client's first answer: a client asking for TLS starts its handshake
    // right after it, and bytes read ahead would be lost to the TLS layer.
    let mut packets = Packets::unbuffered(stream, MAX_ALLOWED_PACKET);
    packets
        .write(&protocol::greeting(
            &ringrep_sql::server_version(),
            conn.id,
            &salt,
            server_caps,
        ))
        .await?;
    packets.flush().await?;
    let Some(first) = read_handshake(&mut packets).await? else {
        return Ok(());
    };
    if protocol::is_ssl_request(&first) {
        let Some(tls) = conn.shared.tls.clone() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "client asked for TLS, which was not offered",
            ));
        };
        let tcp = packets.into_inner();
        let stream = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_rustls::TlsAcceptor::from(tls).accept(tcp),
        )
        .await
        .map_err(|_| timed_out())??;
        tracing::debug!(connection = conn.id, "TLS");
        let mut packets = Packets::new(stream, MAX_ALLOWED_PACKET);
        let Some(response) = read_handshake(&mut packets).await? else {
            return Ok(());
        };
        return conn.session(packets, &response, &salt, server_caps).await;
    }
    conn.session(packets.buffered(), &first, &salt, server_caps)
        .await
}

/// How long a client has for each step of logging in (MySQL's `connect_timeout`): a client
/// that connects and says nothing must not hold a connection slot.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the client did not log in within 10 s",
    )
}

async fn read_handshake<S: AsyncRead + AsyncWrite + Unpin>(
    packets: &mut Packets<S>,
) -> io::Result<Option<Vec<u8>>> {
    tokio::time::timeout(CONNECT_TIMEOUT, packets.read())
        .await
        .map_err(|_| timed_out())?
        .map_err(io::Error::from)
}

impl Conn {
    /// Authenticates the client, then serves its commands.
    async fn session<S: AsyncRead + AsyncWrite + Unpin + Send>(
        mut self,
        mut packets: Packets<S>,
        response: &[u8],
        salt: &[u8; 20],
        server_caps: u32,
    ) -> io::Result<()> {
        let peer = self.peer;
        let hello = protocol::parse_handshake_response(response)?;
        self.caps = hello.caps & server_caps;
        let mut answer = hello.auth;
        let plugin = hello.plugin.as_deref().unwrap_or(protocol::NATIVE_PASSWORD);
        let plugin_auth = hello.caps & cap::PLUGIN_AUTH != 0;
        // MySQL 8 and 9 clients answer for caching_sha2_password first: taken as it is when
        // the account has that method's hash (fast authentication), else they are asked again
        // for mysql_native_password.
        let sha2 = plugin_auth && plugin == protocol::CACHING_SHA2 && self.knows_sha2(&hello.user);
        if plugin_auth && plugin != protocol::NATIVE_PASSWORD && !sha2 {
            packets.write(&protocol::auth_switch(salt)).await?;
            packets.flush().await?;
            answer = match read_handshake(&mut packets).await? {
                Some(a) => a,
                None => return Ok(()),
            };
        }
        let authority = match self.login(&hello.user, salt, &answer, sha2) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(connection = self.id, user = %hello.user, %peer, "authentication failed: {}", e.message);
                packets.write(&wire::error(&e)).await?;
                return packets.flush().await;
            }
        };
        if let Some(sql) = self.sql.as_mut() {
            sql.set_authority(Some(authority.clone()));
            sql.client_found_rows = self.caps & cap::FOUND_ROWS != 0;
        }
        self.kill = Some(self.shared.processes.enter(
            self.id,
            &authority.account.user,
            &peer.to_string(),
            hello.database.clone(),
        ));
        self.authority = Some(authority);
        if sha2 {
            packets.write(&protocol::sha2_fast_auth_ok()).await?;
        }
        tracing::debug!(connection = self.id, user = %hello.user, sha2, "authenticated");
        if let Some(db) = &hello.database {
            if let Err(e) = self.run(use_statement(db), None).await {
                packets.write(&wire::error(&e)).await?;
                return packets.flush().await;
            }
        }
        packets.write(&self.ok(0, self.done())).await?;
        packets.flush().await?;
        self.commands(packets).await
    }

    /// The account `user` logs in as with `answer` to `salt`: one of the node's own
    /// (configuration, every privilege) or, failing that, one of `mysql.user` matching the
    /// client's address. 1045 for a wrong password or no such account, as MySQL answers both.
    fn login(
        &mut self,
        user: &str,
        salt: &[u8; 20],
        answer: &[u8],
        sha2: bool,
    ) -> Result<Authority, Error> {
        let ip = self.peer.ip();
        let denied = || {
            Error::new(
                code::ER_ACCESS_DENIED_ERROR,
                format!(
                    "Access denied for user '{user}'@'{ip}' (using password: {})",
                    if answer.is_empty() { "NO" } else { "YES" }
                ),
            )
        };
        if self.shared.accounts.has(user) {
            let right = if sha2 {
                self.shared.accounts.check_sha2(user, salt, answer)
            } else {
                self.shared.accounts.check(user, salt, answer)
            };
            return if right {
                Ok(Authority::superuser(user, &ip.to_string()))
            } else {
                Err(denied())
            };
        }
        let dir = self.shared.account_cache.get(&self.shared.engine);
        let account = dir.login(user, ip).ok_or_else(denied)?;
        let right = if sha2 {
            protocol::check_sha2(account.sha2.as_ref(), salt, answer)
        } else {
            protocol::check_native(account.hash.as_ref(), salt, answer)
        };
        if !right {
            return Err(denied());
        }
        if account.locked {
            return Err(Error::new(
                code::ER_ACCOUNT_HAS_BEEN_LOCKED,
                format!("Access denied for user '{user}'@'{ip}'. Account is locked."),
            ));
        }
        let grants = Arc::new(dir.grants_of(&account.name));
        let authority = Authority {
            account: account.name.clone(),
            client_host: ip.to_string(),
            grants: Some(grants),
        };
        self.directory = Some(dir);
        Ok(authority)
    }

    /// What a MySQL replica set on its session before COM_BINLOG_DUMP: whether it reads
    /// checksums (`@master_binlog_checksum`) and its heartbeat period
    /// (`@master_heartbeat_period`, nanoseconds).
    fn mysql_replica_settings(&self) -> super::mysql_stream::ClientSettings {
        let var = |name: &str| self.sql.as_ref().and_then(|s| s.user_variable(name));
        let checksum = var("master_binlog_checksum").is_some_and(|v| {
            !v.is_null() && !ringrep_engine::types::text_of(&v).eq_ignore_ascii_case("NONE")
        });
        let heartbeat = var("master_heartbeat_period").and_then(|v| {
            ringrep_engine::types::text_of(&v)
                .trim()
                .parse::<f64>()
                .ok()
                .map(|ns| std::time::Duration::from_nanos(ns.max(0.0) as u64))
        });
        super::mysql_stream::ClientSettings {
            checksum,
            heartbeat,
        }
    }

    /// Whether `user` can be checked with `caching_sha2_password`: an account of the node's
    /// own, or one of `mysql.user` whose password was given in clear (not `AS '*HASH'`).
    fn knows_sha2(&self, user: &str) -> bool {
        if self.shared.accounts.has(user) {
            return true;
        }
        let dir = self.shared.account_cache.get(&self.shared.engine);
        dir.login(user, self.peer.ip())
            .is_some_and(|a| a.sha2.is_some() || a.hash.is_none())
    }

    /// Reads the session's grants again when the account tables changed since (a GRANT or
    /// REVOKE here, or one a replica applied): they take effect at the next statement.
    fn refresh_grants(&mut self) {
        let Some(dir) = &self.directory else {
            return;
        };
        if dir.is_current(&self.shared.engine) {
            return;
        }
        let fresh = self.shared.account_cache.get(&self.shared.engine);
        if let Some(a) = self.authority.as_mut() {
            a.grants = Some(Arc::new(fresh.grants_of(&a.account)));
            if let Some(sql) = self.sql.as_mut() {
                sql.set_authority(Some(a.clone()));
            }
        }
        self.directory = Some(fresh);
    }

    /// Whether the session holds one of the global privileges `any` (1227 otherwise).
    fn require_global(&mut self, any: &[Privs]) -> Result<(), Error> {
        self.refresh_grants();
        match &self.sql {
            Some(sql) => sql.require_any_global(any),
            None => Err(Error::internal(
                "the session was lost by an earlier failure",
            )),
        }
    }

    /// Serves commands until COM_QUIT or the end of the connection.
    async fn commands<S: AsyncRead + AsyncWrite + Unpin + Send>(
        mut self,
        mut packets: Packets<S>,
    ) -> io::Result<()> {
        let kill = self.kill.clone();
        // One buffer for every command packet of the connection.
        let mut payload = Vec::new();
        loop {
            if kill.as_ref().is_some_and(|k| k.is_killed()) {
                return Ok(());
            }
            let read = tokio::select! {
                r = packets.read_into(&mut payload, KEPT_PACKET_BUFFER) => r,
                () = super::processes::killed(kill.as_deref()) => return Ok(()),
            };
            match read {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(ReadError::Io(e)) => return Err(e),
                Err(ReadError::TooLarge) => {
                    let e = packet_too_large();
                    packets.write(&wire::error(&e)).await?;
                    packets.flush().await?;
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e.message));
                }
            }
            let Some((&command, body)) = payload.split_first() else {
                packets.write(&unknown_command()).await?;
                packets.flush().await?;
                continue;
            };
            if command == com::QUIT {
                return Ok(());
            }
            if command == com::BINLOG_DUMP {
                // The connection becomes the replication stream until it ends.
                if let Err(e) = self.require_global(&[Privs::REPLICATION_SLAVE]) {
                    packets.write(&wire::error(&e)).await?;
                    packets.flush().await?;
                    continue;
                }
                match stream::parse_dump(body) {
                    Ok(dump) => {
                        self.shared.processes.doing(
                            self.id,
                            super::processes::Doing::BinlogDump,
                            None,
                            None,
                        );
                        return match dump {
                            stream::Dump::Frames(req) => {
                                stream::serve(
                                    &self.shared,
                                    &mut packets,
                                    req,
                                    (self.id, self.peer),
                                    self.kill.clone(),
                                )
                                .await
                            }
                            stream::Dump::Mysql(req) => {
                                let settings = self.mysql_replica_settings();
                                super::mysql_stream::serve(
                                    &self.shared,
                                    &mut packets,
                                    req,
                                    settings,
                                    (self.id, self.peer),
                                    self.kill.clone(),
                                )
                                .await
                            }
                        };
                    }
                    Err(e) => {
                        packets.write(&wire::error(&e)).await?;
                        packets.flush().await?;
                        continue;
                    }
                }
            }
            // SHOW PROCESSLIST's view, borrowed: the list copies what changed.
            let info = match command {
                com::QUERY => Some(ringrep_engine::types::query_text(body)),
                com::STMT_EXECUTE => body
                    .get(..4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .and_then(|s| self.statements.get(&s))
                    .map(|p| std::borrow::Cow::Borrowed(&*p.text)),
                _ => None,
            };
            if info.is_some() {
                self.shared.processes.doing(
                    self.id,
                    super::processes::Doing::Query,
                    info.as_deref(),
                    self.database(),
                );
            }
            self.command(&mut packets, command, body).await?;
            // Idle again before the client hears back: its next command may come at once.
            self.shared.processes.doing(
                self.id,
                super::processes::Doing::Sleep,
                None,
                self.database(),
            );
            packets.flush().await?;
        }
    }

    /// The session's current database.
    fn database(&self) -> Option<&str> {
        self.sql
            .as_ref()
            .and_then(|s| s.session.vars.database.as_deref())
    }

    /// One command; its answer is queued on `packets`.
    async fn command<S: AsyncRead + AsyncWrite + Unpin + Send>(
        &mut self,
        packets: &mut Packets<S>,
        command: u8,
        body: &[u8],
    ) -> io::Result<()> {
        match command {
            com::QUERY => {
                // Bytes that are not UTF-8 (a dump's binary literals) survive as raw-byte
                // characters, which a binary column takes back as those bytes.
                let text = ringrep_engine::types::query_text(body).into_owned();
                tracing::trace!(connection = self.id, query = %redacted(&text), "query");
                if let Some(outcome) = self.replication_statement(&text) {
                    self.count_question();
                    let outcome = outcome.map(|o| (o, self.done()));
                    return self.reply(packets, outcome, false).await;
                }
                if let Some(command) = super::replica_sql::parse(&text) {
                    self.count_question();
                    let outcome = self.replica_command(command).await;
                    let outcome = outcome.map(|o| (o, self.done()));
                    return self.reply(packets, outcome, false).await;
                }
                let outcome = self.run(text, None).await;
                self.reply(packets, outcome, false).await
            }
            com::INIT_DB => {
                let db = String::from_utf8_lossy(body).into_owned();
                let outcome = self.run(use_statement(&db), None).await;
                self.reply(packets, outcome, false).await
            }
            com::PING => packets.write(&self.ok(0, self.done())).await,
            com::FIELD_LIST => {
                // Deprecated since MySQL 5.7; the mariadb client still sends it after USE to
                // complete names. An empty field list is a valid answer.
                packets.write(&self.end_of_rows(self.done())).await
            }
            com::STATISTICS => {
                let text = format!(
                    "Uptime: {}  Threads: {}  Questions: {}",
                    self.shared.started.elapsed().as_secs(),
                    self.shared
                        .connections
                        .load(std::sync::atomic::Ordering::Relaxed),
                    self.shared
                        .questions
                        .load(std::sync::atomic::Ordering::Relaxed)
                );
                packets.write(text.as_bytes()).await
            }
            com::STMT_PREPARE => self.prepare(packets, body).await,
            com::STMT_EXECUTE => self.execute(packets, body).await,
            com::STMT_SEND_LONG_DATA => {
                // `stmt:4 param:2 data`; no answer, errors surface at execution.
                let mut c = Cursor::new(body);
                if let (Ok(stmt), Ok(param)) = (c.u32(), c.u16()) {
                    if let Some(p) = self.statements.get_mut(&stmt) {
                        // Only for a parameter the statement has, and no more in all than one
                        // packet may carry.
                        let held: usize = p.long_data.values().map(Vec::len).sum();
                        let data = c.rest();
                        if usize::from(param) < p.params && held + data.len() <= MAX_ALLOWED_PACKET
                        {
                            p.long_data
                                .entry(param)
                                .or_default()
                                .extend_from_slice(data);
                        }
                    }
                }
                Ok(())
            }
            com::STMT_CLOSE => {
                if let Ok(stmt) = Cursor::new(body).u32() {
                    self.statements.remove(&stmt);
                }
                Ok(())
            }
            com::STMT_RESET => {
                let stmt = Cursor::new(body).u32().unwrap_or(0);
                match self.statements.get_mut(&stmt) {
                    Some(p) => {
                        p.long_data.clear();
                        packets.write(&self.ok(0, self.done())).await
                    }
                    None => {
                        packets
                            .write(&wire::error(&unknown_statement(stmt, "reset")))
                            .await
                    }
                }
            }
            com::SET_OPTION => {
                // Multi-statements on or off: ringrep runs one statement per text either way.
                packets.write(&self.end_of_rows(self.done())).await
            }
            com::RESET_CONNECTION => {
                // A fresh session: the old one's transaction rolls back as it is dropped. The
                // account stays.
                let mut sql = new_session(&self.shared, self.id);
                sql.set_authority(self.authority.clone());
                sql.client_found_rows = self.caps & cap::FOUND_ROWS != 0;
                self.sql = Some(sql);
                self.statements.clear();
                packets.write(&self.ok(0, self.done())).await
            }
            com::REGISTER_SLAVE => {
                if let Err(e) = self.require_global(&[Privs::REPLICATION_SLAVE]) {
                    return packets.write(&wire::error(&e)).await;
                }
                // `server_id:4 host user password port:2 rank:4 source_id:4`; only the id is
                // kept (the stream request names it again).
                match Cursor::new(body).u32() {
                    Ok(replica) => {
                        tracing::debug!(connection = self.id, replica, "replica registered");
                        packets.write(&self.ok(0, self.done())).await
                    }
                    Err(_) => {
                        let e = Error::new(
                            code::ER_WRONG_ARGUMENTS,
                            "COM_REGISTER_SLAVE: short packet",
                        );
                        packets.write(&wire::error(&e)).await
                    }
                }
            }
            com::BINLOG_DUMP_GTID => {
                let e = Error::unsupported("COM_BINLOG_DUMP_GTID");
                packets.write(&wire::error(&e)).await
            }
            _ => packets.write(&unknown_command()).await,
        }
    }

    /// COM_STMT_PREPARE: registers the text; parameters are described as strings and the
    /// result's columns come with each execution.
    async fn prepare<S: AsyncRead + AsyncWrite + Unpin + Send>(
        &mut self,
        packets: &mut Packets<S>,
        body: &[u8],
    ) -> io::Result<()> {
        let text = ringrep_engine::types::query_text(body).into_owned();
        let params = count_placeholders(&text);
        let Ok(param_count) = u16::try_from(params) else {
            let e = Error::new(code::ER_PARSE_ERROR, "too many placeholders");
            return packets.write(&wire::error(&e)).await;
        };
        let id = self.next_statement;
        self.next_statement = self.next_statement.wrapping_add(1).max(1);
        self.statements.insert(
            id,
            Prepared {
                text: text.into(),
                params,
                types: Vec::new(),
                long_data: HashMap::new(),
            },
        );
        packets
            .write(&protocol::prepare_ok(id, 0, param_count))
            .await?;
        if params > 0 {
            let def = protocol::column_def(&ColumnDef {
                name: "?".into(),
                ty: ty::VAR_STRING,
                flags: 0,
                charset: protocol::UTF8MB4_GENERAL_CI,
                length: 0,
                decimals: 0,
            });
            for _ in 0..params {
                packets.write(&def).await?;
            }
            if self.caps & cap::DEPRECATE_EOF == 0 {
                packets.write(&protocol::eof(self.done().status, 0)).await?;
            }
        }
        Ok(())
    }

    /// COM_STMT_EXECUTE: `stmt:4 flags:1 iterations:4 params`; the answer is a binary result
    /// set or OK.
    async fn execute<S: AsyncRead + AsyncWrite + Unpin + Send>(
        &mut self,
        packets: &mut Packets<S>,
        body: &[u8],
    ) -> io::Result<()> {
        let mut c = Cursor::new(body);
        let (Ok(stmt), Ok(_)) = (c.u32(), c.take(1 + 4)) else {
            let e = Error::new(
                code::ER_WRONG_ARGUMENTS,
                "Incorrect arguments to mysqld_stmt_execute",
            );
            return packets.write(&wire::error(&e)).await;
        };
        let Some(prepared) = self.statements.get_mut(&stmt) else {
            return packets
                .write(&wire::error(&unknown_statement(stmt, "execute")))
                .await;
        };
        let values = match wire::params(
            &mut c,
            prepared.params,
            &mut prepared.types,
            &mut prepared.long_data,
        ) {
            Ok(v) => v,
            Err(_) => {
                let e = Error::new(
                    code::ER_WRONG_ARGUMENTS,
                    "Incorrect arguments to mysqld_stmt_execute",
                );
                return packets.write(&wire::error(&e)).await;
            }
        };
        let text = Arc::clone(&prepared.text);
        let outcome = self.run(text, Some(values)).await;
        self.reply(packets, outcome, true).await
    }

    /// Runs one statement, with `params` filling the placeholders of prepared text `text`,
    /// and waits until what it committed is durable (docs/architecture.md, "The statement
    /// path").
    async fn run<T: AsRef<str> + Send + 'static>(
        &mut self,
        mut text: T,
        mut params: Option<Vec<binlog_format::Value>>,
    ) -> Result<(Outcome, Done), Error> {
        self.count_question();
        self.refresh_grants();
        // Held until the reply is ready, durability wait included: shutdown waits for it.
        let _busy = self.shared.busy.clone();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut sql = self
                .sql
                .take()
                .ok_or_else(|| Error::internal("the session was lost by an earlier failure"))?;
            let fence = self.shared.engine.begin_read();
            // A brief statement runs right here, on the connection's task, as far as its
            // commit being logged and applied: no thread hand-off at all. It may not wait for
            // a row lock here (a wait would stall every connection of this worker), nor read
            // more than a few hundred rows of a table; one that would is undone and runs
            // again below, where it may.
            if sql.runs_briefly(text.as_ref(), params.is_some()) {
                sql.session.lock_wait = false;
                sql.session.read_budget = Some(BRIEF_READ_ROWS);
                let r = execute(&mut sql, text.as_ref(), params.as_deref());
                sql.session.lock_wait = true;
                sql.session.read_budget = None;
                if !r.as_ref().is_err_and(Error::is_would_wait) {
                    let pending = sql.session.take_pending_lsn();
                    match self.settle(sql, r, pending, fence, attempts).await {
                        Some(done) => return done,
                        None => continue,
                    }
                }
            }
            let busy = self.shared.busy.clone();
            let work = move || {
                let _busy = busy;
                let r = execute(&mut sql, text.as_ref(), params.as_deref());
                let pending = sql.session.take_pending_lsn();
                (sql, r, pending, text, params)
            };
            // Any other statement may take long or wait for row locks: alone (no other in
            // flight) it runs on the connection's worker (`block_in_place`: the runtime moves
            // the worker's other tasks elsewhere meanwhile), else on the blocking pool. A
            // current-thread runtime cannot spare its only thread.
            struct InFlight<'a>(&'a AtomicUsize);
            impl Drop for InFlight<'_> {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::AcqRel);
                }
            }
            let shared = Arc::clone(&self.shared);
            let alone = shared.in_flight.fetch_add(1, Ordering::AcqRel) == 0;
            let _in_flight = InFlight(&shared.in_flight);
            let multi = tokio::runtime::Handle::current().runtime_flavor()
                == tokio::runtime::RuntimeFlavor::MultiThread;
            let (sql, r, pending, t, p) = if alone && multi {
                tokio::task::block_in_place(work)
            } else {
                tokio::task::spawn_blocking(work)
                    .await
                    .map_err(|e| Error::internal(format!("statement failed: {e}")))?
            };
            (text, params) = (t, p);
            match self.settle(sql, r, pending, fence, attempts).await {
                Some(done) => return done,
                None => continue,
            }
        }
    }

    /// After statement attempt number `attempt` ran (from `fence`) and gave `r`, having
    /// committed up to `pending`: waits until it may be shown. `None` when it is to run
    /// again (it changed nothing, and what it read was taken back).
    async fn settle(
        &mut self,
        sql: SqlSession,
        mut r: Result<Outcome, Error>,
        pending: Option<u64>,
        fence: ringrep_engine::ReadFence,
        attempt: u32,
    ) -> Option<Result<(Outcome, Done), Error>> {
        // Nothing is acknowledged before what it committed is durable. (Also after an error:
        // an earlier statement of the same text may have committed.)
        if let Some(lsn) = pending {
            if let Err(e) = self.shared.engine.wait_durable_async(lsn).await {
                r = Err(e);
            }
        }
        // Nor is anything shown that could be taken back: a result that may hold a commit not
        // yet durable waits for it (a commit's own wait above covers what it read).
        if r.is_ok() && pending.is_none() {
            if let Err(e) = self.shared.engine.wait_read_async(fence).await {
                // It changed nothing and showed nothing: outside a transaction it runs again,
                // on the state the heal left.
                let again = e.is_withheld()
                    && !sql.session.in_transaction()
                    && sql.may_run_again()
                    && attempt < 3;
                self.sql = Some(sql);
                return if again { None } else { Some(Err(e)) };
            }
        }
        self.sql = Some(sql);
        let done = self.done();
        Some(r.map(|o| (o, done)))
    }

    /// The statements the server answers itself, from what only it knows: SHOW REPLICAS (the
    /// replicas streaming from this node) and SHOW REPLICA STATUS (this node's own replication,
    /// when it is a replica). MySQL's older names work too.
    fn replication_statement(&mut self, text: &str) -> Option<Result<Outcome, Error>> {
        let words: Vec<String> = text
            .trim()
            .trim_end_matches(';')
            .split_whitespace()
            .map(str::to_ascii_uppercase)
            .collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        match words.as_slice() {
            ["SHOW", "REPLICAS"] | ["SHOW", "SLAVE", "HOSTS"] => {
                if let Err(e) = self.require_global(&[Privs::REPLICATION_SLAVE]) {
                    return Some(Err(e));
                }
                let replicas = self.shared.replicas.lock().ok()?;
                let rows = replicas
                    .values()
                    .map(|r| {
                        vec![
                            Some(r.server_id.to_string()),
                            Some(r.peer.ip().to_string()),
                            Some(r.peer.port().to_string()),
                            Some(self.shared.engine.config().server_id.to_string()),
                            Some(String::new()),
                            Some(r.sent_seq.to_string()),
                        ]
                    })
                    .collect();
                Some(Ok(Outcome::text(
                    &[
                        "Server_Id",
                        "Host",
                        "Port",
                        "Source_Id",
                        "Replica_UUID",
                        "Sent_Seq",
                    ],
                    rows,
                )))
            }
            ["SHOW", "PROCESSLIST"] | ["SHOW", "FULL", "PROCESSLIST"] => {
                let full = words.len() == 3;
                let all = self.require_global(&[Privs::PROCESS]).is_ok();
                let user = self.user();
                let rows = self.shared.processes.rows(full, all, &user);
                // MySQL's Id and Time are numbers.
                Some(Ok(Outcome::text_with_integers(
                    &[
                        "Id", "User", "Host", "db", "Command", "Time", "State", "Info",
                    ],
                    rows,
                    &["Id", "Time"],
                )))
            }
            ["KILL", rest @ ..] if !rest.is_empty() && rest.len() <= 2 => {
                let (query_only, id) = match rest {
                    ["QUERY", id] => (true, id),
                    ["CONNECTION", id] | [id] => (false, id),
                    _ => return None,
                };
                let Ok(id) = id.parse::<u32>() else {
                    return Some(Err(Error::syntax(format!(
                        "You have an error in your SQL syntax; KILL needs a connection id, not '{id}'"
                    ))));
                };
                let any = self.require_global(&[Privs::SUPER]).is_ok();
                let user = self.user();
                if let Err(e) = self.shared.processes.kill(id, query_only, &user, any) {
                    return Some(Err(e));
                }
                if id == self.id && !query_only {
                    return Some(Err(Error::new(
                        code::ER_QUERY_INTERRUPTED,
                        "Query execution was interrupted",
                    )));
                }
                Some(Ok(Outcome::Ok))
            }
            ["SHOW", "REPLICA", "STATUS"] | ["SHOW", "SLAVE", "STATUS"] => {
                if let Err(e) = self.require_global(&[Privs::REPLICATION_CLIENT, Privs::SUPER]) {
                    return Some(Err(e));
                }
                let fields = self
                    .shared
                    .replica
                    .as_ref()
                    .map(|s| s.fields())
                    .unwrap_or_default();
                if fields.is_empty() {
                    // Not a replica: MySQL answers with no rows.
                    return Some(Ok(Outcome::text(&["Replica_IO_State"], Vec::new())));
                }
                let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
                let row = fields.into_iter().map(|(_, v)| v).collect();
                // MySQL's ports, positions, counts and error numbers are numbers.
                Some(Ok(Outcome::text_with_integers(
                    &names,
                    vec![row],
                    &[
                        "Source_Port",
                        "Connect_Retry",
                        "Read_Source_Log_Pos",
                        "Exec_Source_Log_Pos",
                        "Seconds_Behind_Source",
                        "Last_Errno",
                        "Last_IO_Errno",
                        "Last_SQL_Errno",
                        "Source_Server_Id",
                        "Auto_Position",
                        "Retrieved_Seq",
                        "Executed_Seq",
                        "Source_Last_Seq",
                    ],
                )))
            }
            _ => None,
        }
    }

    /// The account's user name.
    fn user(&self) -> String {
        self.authority
            .as_ref()
            .map(|a| a.account.user.clone())
            .unwrap_or_default()
    }

    /// CHANGE REPLICATION SOURCE TO, START, STOP and RESET REPLICA: on a replica, its channel
    /// carries them out (notes go to SHOW WARNINGS); a primary has no channel to steer.
    async fn replica_command(
        &mut self,
        command: Result<super::replica_sql::ReplicaCommand, Error>,
    ) -> Result<Outcome, Error> {
        let command = command?;
        self.require_global(&[Privs::REPLICATION_SLAVE_ADMIN, Privs::SUPER])?;
        let Some(replica) = self.shared.replica.clone() else {
            return Err(match command {
                super::replica_sql::ReplicaCommand::ChangeSource(_) => Error::unsupported(
                    "CHANGE REPLICATION SOURCE TO on a primary (ringrep-source serve); a replica is a ringrep-applier serve node",
                ),
                _ => Error::new(
                    code::ER_BAD_SLAVE,
                    "The server is not configured as replica; fix in config file or with CHANGE REPLICATION SOURCE TO",
                ),
            });
        };
        let notes = replica.command(command).await?;
        if let Some(sql) = self.sql.as_mut() {
            // The previous statement's warnings give way to this one's, as in MySQL.
            let _ = sql.session.take_warnings();
            for (c, m) in notes {
                sql.session.warn(c, m);
            }
        }
        Ok(Outcome::Ok)
    }

    /// The session's status flags and last insert id, for an OK or EOF packet.
    /// One more statement from the client, for COM_STATISTICS and SHOW STATUS's Questions.
    fn count_question(&mut self) {
        self.shared
            .questions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn done(&self) -> Done {
        let Some(sql) = &self.sql else {
            return Done::default();
        };
        let mut status = 0;
        if sql.session.vars.autocommit {
            status |= status::AUTOCOMMIT;
        }
        if sql.session.in_transaction() {
            status |= status::IN_TRANS;
        }
        Done {
            status,
            last_insert_id: sql.last_insert_id,
            warnings: u16::try_from(sql.session.warning_count()).unwrap_or(u16::MAX),
        }
    }

    fn ok(&self, affected: u64, done: Done) -> protocol::ShortPacket {
        protocol::ok(0, affected, done.last_insert_id, done.status, done.warnings)
    }

    /// What ends a result set: OK with the 0xfe header, or EOF for older clients.
    fn end_of_rows(&self, done: Done) -> protocol::ShortPacket {
        if self.caps & cap::DEPRECATE_EOF != 0 {
            protocol::ok(0xfe, 0, 0, done.status, done.warnings)
        } else {
            protocol::eof(done.status, done.warnings)
        }
    }

    /// Sends a statement's outcome: rows in the text or binary protocol, OK, or ERR.
    async fn reply<S: AsyncRead + AsyncWrite + Unpin + Send>(
        &self,
        packets: &mut Packets<S>,
        outcome: Result<(Outcome, Done), Error>,
        binary: bool,
    ) -> io::Result<()> {
        match outcome {
            Ok((Outcome::Rows(rs), done)) => {
                let (columns, encodings) = wire::columns(&rs);
                let mut p = Vec::new();
                protocol::put_lenenc_int(&mut p, columns.len() as u64);
                packets.write(&p).await?;
                for c in &columns {
                    packets.write(&protocol::column_def(c)).await?;
                }
                if self.caps & cap::DEPRECATE_EOF == 0 {
                    packets.write(&protocol::eof(done.status, 0)).await?;
                }
                let bitmap_len = (columns.len() + 7 + 2) / 8;
                for row in &rs.rows {
                    p.clear();
                    if binary {
                        p.push(0);
                        let at = p.len();
                        p.resize(at + bitmap_len, 0);
                        for (i, value) in row.iter().enumerate() {
                            if value.is_null() {
                                p[at + (i + 2) / 8] |= 1 << ((i + 2) % 8);
                            }
                        }
                    }
                    for (i, value) in row.iter().enumerate() {
                        let cell = Cell {
                            value,
                            encoding: encodings[i],
                            rs: &rs,
                            column: i,
                        };
                        if !binary {
                            cell.put_text(&mut p);
                        } else if !value.is_null() {
                            cell.put_binary(&mut p);
                        }
                    }
                    packets.write(&p).await?;
                }
                packets.write(&self.end_of_rows(done)).await
            }
            Ok((outcome @ Outcome::Affected { .. }, done)) => {
                let Outcome::Affected { rows, info, .. } = &outcome else {
                    unreachable!("matched above")
                };
                let rows = match outcome.rows_matched() {
                    Some(matched) if self.caps & cap::FOUND_ROWS != 0 => matched,
                    _ => *rows,
                };
                let packet = protocol::ok_with_info(
                    rows,
                    done.last_insert_id,
                    done.status,
                    done.warnings,
                    info.as_deref().unwrap_or(""),
                );
                packets.write(&packet).await
            }
            Ok((Outcome::Ok, done)) => packets.write(&self.ok(0, done)).await,
            Err(e) => packets.write(&wire::error(&e)).await,
        }
    }
}

/// Runs `text` in `sql`: a prepared statement's with `params` filling its placeholders, else a
/// query's.
fn execute(
    sql: &mut SqlSession,
    text: &str,
    params: Option<&[binlog_format::Value]>,
) -> Result<Outcome, Error> {
    match params {
        Some(values) => sql.execute_bound(text, values),
        None => sql.execute(text),
    }
}

/// A statement as the trace log shows it: none that may carry a password (account
/// statements, CHANGE REPLICATION SOURCE TO).
fn redacted(text: &str) -> std::borrow::Cow<'_, str> {
    let upper = text.to_ascii_uppercase();
    if upper.contains("PASSWORD") || upper.contains("IDENTIFIED") {
        "(a statement with a password, not logged)".into()
    } else {
        text.into()
    }
}

/// `USE` of a database named by a client (COM_INIT_DB or the handshake).
fn use_statement(db: &str) -> String {
    format!("USE `{}`", db.replace('`', "``"))
}

fn unknown_command() -> Vec<u8> {
    protocol::err(1047, "08S01", "Unknown command")
}

fn unknown_statement(stmt: u32, call: &str) -> Error {
    Error::new(
        code::ER_UNKNOWN_STMT_HANDLER,
        format!("Unknown prepared statement handler ({stmt}) given to mysqld_stmt_{call}"),
    )
}

fn packet_too_large() -> Error {
    Error::new(
        code::ER_NET_PACKET_TOO_LARGE,
        "Got a packet bigger than 'max_allowed_packet' bytes",
    )
}
