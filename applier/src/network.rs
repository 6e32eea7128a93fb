//! A primary over the network: the replication stream of its MySQL port, as an
//! [`EventSource`].
//!
//! The source logs in with a replication account (`mysql_native_password`), registers
//! (COM_REGISTER_SLAVE) and asks for ringrep's frames from the next sequence number it needs
//! (COM_BINLOG_DUMP with `ringrep-frames:from_seq=N,heartbeat_ms=M`; see the server's stream
//! module). Each frame's checksum is verified as a segment reader would; a corrupt frame stops
//! the source with the primary's position. A dropped connection, a primary that restarts or a
//! link silent for three heartbeat periods is reconnected with backoff (doubling from 100 ms up
//! to `connect_retry`) and the stream resumes after the last transaction handed out, so the
//! applier sees each transaction once per run and skips any repeat by its sequence number.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use binlog_format::format::DEFAULT_MAX_FRAME;
use binlog_format::frame::{scan_frame, FrameScan};
use binlog_format::{codec, Position, Record};
use ringrep_protocol::{self as protocol, Cursor, Packets};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::error::{Error, Result};
use crate::snapshot_stream::{Piece, SnapshotStream};
use crate::source::{EventSource, Provision, SourcedTx};

/// Where and how to reach a primary.
#[derive(Clone)]
pub struct NetworkConfig {
    /// The primary's MySQL address, `host:port`.
    pub address: String,
    /// The replication account.
    pub user: String,
    /// Its password.
    pub password: String,
    /// This replica's server id, sent when it registers.
    pub replica_id: u32,
    /// How often an idle primary sends a heartbeat; three periods of silence end the link.
    pub heartbeat: Duration,
    /// The longest wait between connection attempts.
    pub connect_retry: Duration,
    /// TLS to the primary: the client configuration (its trusted CA) and the name the
    /// primary's certificate must carry. `None`: the stream travels in clear.
    pub tls: Option<(Arc<tokio_rustls::rustls::ClientConfig>, String)>,
    /// The CA file (PEM) `tls` trusts, for the replica's other connections to the primary
    /// (asking its server id).
    pub ca_file: Option<std::path::PathBuf>,
}

impl NetworkConfig {
    /// The settings of `mysql://USER:PASSWORD@HOST[:PORT]` (port 3306 by default; user and
    /// password percent-decoded), with TLS verified against the CA file `ca` when given.
    pub fn from_url(
        spec: &str,
        replica_id: u32,
        heartbeat: Duration,
        connect_retry: Duration,
        ca: Option<&std::path::Path>,
    ) -> std::result::Result<NetworkConfig, String> {
        let url = url::Url::parse(spec).map_err(|e| format!("{}: {e}", redact(spec)))?;
        if url.scheme() != "mysql" {
            return Err(format!("{}: not a mysql:// address", redact(spec)));
        }
        let host = url
            .host_str()
            .ok_or_else(|| format!("{}: no host", redact(spec)))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        let user = match url.username() {
            "" => "root".to_string(),
            u => decode(u),
        };
        let tls = match ca {
            None => None,
            Some(ca) => Some(tls_to(ca, &host)?),
        };
        Ok(NetworkConfig {
            address: if host.contains(':') {
                format!("[{host}]:{}", url.port().unwrap_or(3306))
            } else {
                format!("{host}:{}", url.port().unwrap_or(3306))
            },
            user,
            password: url.password().map(decode).unwrap_or_default(),
            replica_id,
            heartbeat,
            connect_retry,
            tls,
            ca_file: ca.map(std::path::Path::to_path_buf),
        })
    }
}

/// `mysql://user:secret@host` without the password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// TLS to `host`, trusting the CA certificates of the PEM file `ca`.
pub fn tls_to(
    ca: &std::path::Path,
    host: &str,
) -> std::result::Result<(Arc<tokio_rustls::rustls::ClientConfig>, String), String> {
    let what = || format!("the CA file {}", ca.display());
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    let pem = std::fs::read(ca).map_err(|e| format!("{}: {e}", what()))?;
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| format!("{}: {e}", what()))?;
        roots.add(cert).map_err(|e| format!("{}: {e}", what()))?;
    }
    if roots.is_empty() {
        return Err(format!("{}: no certificate in it", what()));
    }
    let config = tokio_rustls::rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok((Arc::new(config), host.to_string()))
}

impl std::fmt::Debug for NetworkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkConfig")
            .field("address", &self.address)
            .field("user", &self.user)
            .field("replica_id", &self.replica_id)
            .field("heartbeat", &self.heartbeat)
            .field("connect_retry", &self.connect_retry)
            .field("tls", &self.tls.as_ref().map(|(_, name)| name))
            .finish_non_exhaustive()
    }
}

/// What the connection's reading task hands over.
enum Item {
    Tx(SourcedTx),
    /// A heartbeat: the primary's time and last durable sequence number.
    Heartbeat {
        time_us: i64,
        last_seq: u64,
    },
    /// The stream ended; retriable unless the error says otherwise.
    Ended(Error),
    /// A snapshot arrives (the replica's next transaction is purged on the primary, or one
    /// was asked for): its bytes come through the provision's own channel.
    Snapshot(Provision),
    /// The snapshot is whole, standing at `seq`: the stream goes on after it.
    SnapshotEnd {
        seq: u64,
    },
    /// The primary found where this replica stands in its own numbering from the origins it
    /// was told (a failover): the stream starts at `seq` of `server_id`.
    Baseline {
        server_id: u32,
        seq: u64,
    },
}

/// What the link last said, for status and lag.
#[derive(Debug, Clone, Default)]
pub struct LinkStatus {
    /// Whether a stream is open now.
    pub connected: bool,
    /// The last error of the link (connecting, reading), if any since the last good read.
    pub last_error: Option<String>,
    /// The primary's last durable sequence number, from its latest heartbeat.
    pub source_last_seq: u64,
    /// The primary's clock at its latest heartbeat, in microseconds since 1970-01-01 UTC.
    pub source_time_us: i64,
    /// When the last packet (transaction or heartbeat) arrived.
    pub last_heard: Option<Instant>,
    /// The last transaction received: its sequence number and position in the primary's binlog.
    pub received: Option<(u64, Position)>,
}

/// The replication stream of a primary's MySQL port.
#[derive(Debug)]
pub struct NetworkSource {
    config: NetworkConfig,
    /// The next sequence number wanted.
    next_seq: u64,
    link: Option<mpsc::Receiver<Item>>,
    ready: VecDeque<SourcedTx>,
    /// When the next connection attempt may start, and the wait after it fails.
    retry_at: Instant,
    backoff: Duration,
    /// What the link last said, shared with whoever reports it ([`NetworkSource::status`]).
    status: Arc<Mutex<LinkStatus>>,
    /// A snapshot arriving, for the applier to load as it comes.
    provision: Option<Provision>,
    /// Ask for a snapshot first whatever the position (an online backup).
    want_snapshot: bool,
    /// What the replica applied from other servers, told to the primary when it has no
    /// position in the primary's own numbering (after a failover).
    origins: Vec<(u32, u64)>,
    /// Where the primary said the stream starts, for the applier to store.
    baseline: Option<(u32, u64)>,
    /// When the source committed the transaction before `next_seq`, as this replica has it:
    /// told to the primary, which refuses the stream if its own transaction there differs
    /// (the replica kept what the primary lost: the two diverged).
    last_commit_us: Option<i64>,
    /// Failed attempts in a row (connections, and streams that ended before any
    /// transaction or heartbeat), and how many end the stream with an error (`None`: never).
    failures: u32,
    give_up_after: Option<u32>,
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Item::Tx(t) => write!(f, "Tx({})", t.tx.seq),
            Item::Heartbeat { last_seq, .. } => write!(f, "Heartbeat({last_seq})"),
            Item::Ended(e) => write!(f, "Ended({e})"),
            Item::Snapshot(p) => write!(f, "Snapshot({})", p.server_id),
            Item::SnapshotEnd { seq } => write!(f, "SnapshotEnd({seq})"),
            Item::Baseline { server_id, seq } => write!(f, "Baseline({server_id}, {seq})"),
        }
    }
}

const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// The longest a connection attempt (TCP, TLS, login, the stream request) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl NetworkSource {
    /// A source that will connect on first use and stream from `from_seq`.
    pub fn new(config: NetworkConfig, from_seq: u64) -> NetworkSource {
        NetworkSource {
            config,
            next_seq: from_seq.max(1),
            link: None,
            ready: VecDeque::new(),
            retry_at: Instant::now(),
            backoff: FIRST_BACKOFF,
            status: Arc::default(),
            provision: None,
            want_snapshot: false,
            origins: Vec::new(),
            baseline: None,
            last_commit_us: None,
            failures: 0,
            give_up_after: None,
        }
    }

    /// Makes `next` fail instead of retrying for ever: after `attempts` failed attempts in a
    /// row to reach the primary and stream from it, and at once when the primary refuses the
    /// account ([`Error::Refused`]). For runs that must end (`--exit-when-caught-up`,
    /// `--until-seq`), which would otherwise report an unreachable primary as caught up.
    pub fn giving_up_after(mut self, attempts: Option<u32>) -> NetworkSource {
        self.give_up_after = attempts.map(|a| a.max(1));
        self
    }

    /// Counts one failed attempt; the error to end the stream with once it gives up.
    fn failed(&mut self, e: Error) -> Result<Error> {
        self.failures += 1;
        match self.give_up_after {
            Some(_) if matches!(e, Error::Refused(_)) => Err(e),
            Some(limit) if self.failures >= limit => Err(Error::Source(format!(
                "{}: gave up after {} failed attempts: {e}",
                self.config.address, self.failures
            ))),
            _ => Ok(e),
        }
    }

    /// Tells the primary when it committed the transaction just before `from_seq` (what the
    /// replica's stored position says), so that it can check the replica holds its history.
    pub fn with_last_commit(mut self, commit_us: Option<i64>) -> NetworkSource {
        self.last_commit_us = commit_us;
        self
    }

    /// Tells the primary what this replica applied from other servers (`(server id, seq)`),
    /// so that a primary promoted after a failover can find where it stands in its own
    /// numbering; sent while the replica has no position from this primary.
    pub fn with_origins(mut self, origins: Vec<(u32, u64)>) -> NetworkSource {
        self.origins = origins;
        self
    }

    /// Asks the primary for a snapshot of its whole state before the stream, whatever the
    /// starting sequence (what an online backup reads); once per source.
    pub fn with_snapshot(mut self) -> NetworkSource {
        self.want_snapshot = true;
        self
    }

    /// The link's state, as it changes (for SHOW REPLICA STATUS).
    pub fn status(&self) -> Arc<Mutex<LinkStatus>> {
        Arc::clone(&self.status)
    }

    fn update(&self, f: impl FnOnce(&mut LinkStatus)) {
        if let Ok(mut s) = self.status.lock() {
            f(&mut s);
        }
    }

    /// Connects (switching to TLS when configured), logs in and opens the stream; the reading
    /// task then feeds the channel.
    async fn connect(&mut self) -> Result<()> {
        let stream = TcpStream::connect(&self.config.address)
            .await
            .map_err(|e| Error::Source(format!("connecting to {}: {e}", self.config.address)))?;
        let _ = stream.set_nodelay(true);
        let mut packets = Packets::new(stream, 1 << 30);
        let greeting = read(&mut packets).await?;
        let greeting = protocol::parse_greeting(&greeting).map_err(io_error)?;
        let caps = protocol::CLIENT & greeting.caps;
        let Some((tls, name)) = self.config.tls.clone() else {
            return self.login_and_stream(packets, &greeting, caps).await;
        };
        if greeting.caps & protocol::cap::SSL == 0 {
            return Err(Error::Source(format!(
                "{} does not offer TLS (start it with --tls-cert and --tls-key)",
                self.config.address
            )));
        }
        packets
            .write(&protocol::ssl_request(caps))
            .await
            .map_err(io_error)?;
        packets.flush().await.map_err(io_error)?;
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(name.clone())
            .map_err(|e| Error::Invalid(format!("TLS server name {name}: {e}")))?;
        let tls_stream = tokio_rustls::TlsConnector::from(tls)
            .connect(name, packets.into_inner())
            .await
            .map_err(|e| Error::Source(format!("TLS with {}: {e}", self.config.address)))?;
        let mut packets = Packets::new(tls_stream, 1 << 30);
        // The SSL request was packet 1; the handshake response goes on from there.
        packets.set_seq(2);
        self.login_and_stream(packets, &greeting, caps | protocol::cap::SSL)
            .await
    }

    async fn login_and_stream<S>(
        &mut self,
        mut packets: Packets<S>,
        greeting: &protocol::Greeting,
        caps: u32,
    ) -> Result<()>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let answer = protocol::native_answer(&self.config.password, &greeting.salt);
        packets
            .write(&protocol::handshake_response(
                caps,
                &self.config.user,
                &answer,
                None,
            ))
            .await
            .map_err(io_error)?;
        packets.flush().await.map_err(io_error)?;
        expect_ok(&read(&mut packets).await?, "login")?;
        // COM_REGISTER_SLAVE: server_id host user password port rank source_id.
        let mut p = vec![0x15];
        p.extend_from_slice(&self.config.replica_id.to_le_bytes());
        p.extend_from_slice(&[0, 0, 0]);
        p.extend_from_slice(&0u16.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        command(&mut packets, &p).await?;
        expect_ok(&read(&mut packets).await?, "register")?;
        // COM_BINLOG_DUMP: pos:4 flags:2 server_id:4 file.
        let mut p = vec![0x12];
        p.extend_from_slice(&4u32.to_le_bytes());
        p.extend_from_slice(&0u16.to_le_bytes());
        p.extend_from_slice(&self.config.replica_id.to_le_bytes());
        p.extend_from_slice(
            format!(
                "ringrep-frames:from_seq={},heartbeat_ms={},provision=1,snapshot_stream=1{}{}{}",
                self.next_seq,
                self.config.heartbeat.as_millis().max(1),
                match self.last_commit_us {
                    Some(us) if self.next_seq > 1 && us > 0 => format!(",last_commit_us={us}"),
                    _ => String::new(),
                },
                if self.want_snapshot {
                    ",snapshot=1"
                } else {
                    ""
                },
                if self.next_seq == 1 {
                    self.origins
                        .iter()
                        .map(|(id, seq)| format!(",origin.{id}={seq}"))
                        .collect::<String>()
                } else {
                    String::new()
                }
            )
            .as_bytes(),
        );
        command(&mut packets, &p).await?;
        let (tx, rx) = mpsc::channel(1024);
        let silence = self.config.heartbeat * 3;
        tokio::spawn(read_stream(packets, tx, silence));
        self.link = Some(rx);
        // Connected again: the last link error is history, as MySQL clears Last_IO_Error when
        // its I/O thread reconnects (a refused stream sets it again at once).
        self.update(|s| {
            s.connected = true;
            s.last_error = None;
        });
        tracing::info!(
            source = %self.config.address,
            from_seq = self.next_seq,
            tls = self.config.tls.is_some(),
            "replication stream open"
        );
        Ok(())
    }

    /// Takes one item off the link, waiting up to `timeout`.
    async fn receive(&mut self, timeout: Duration) -> Result<bool> {
        let Some(link) = self.link.as_mut() else {
            return Ok(false);
        };
        // What is there already, without waiting: the applier takes it as one batch.
        let item = match link.try_recv() {
            Ok(item) => item,
            Err(mpsc::error::TryRecvError::Disconnected) => {
                Item::Ended(Error::Source("the stream's reader stopped".into()))
            }
            Err(mpsc::error::TryRecvError::Empty) => {
                match tokio::time::timeout(timeout, link.recv()).await {
                    Err(_) => return Ok(false),
                    Ok(None) => Item::Ended(Error::Source("the stream's reader stopped".into())),
                    Ok(Some(item)) => item,
                }
            }
        };
        self.update(|s| s.last_heard = Some(Instant::now()));
        match item {
            Item::Tx(t) => {
                if t.tx.seq < self.next_seq {
                    return Ok(true);
                }
                self.next_seq = t.tx.seq + 1;
                self.last_commit_us = Some(t.tx.commit_time_us);
                self.backoff = FIRST_BACKOFF;
                self.failures = 0;
                let received = (t.tx.seq, t.position);
                self.update(|s| {
                    s.last_error = None;
                    s.received = Some(received);
                    s.source_last_seq = s.source_last_seq.max(received.0);
                });
                self.ready.push_back(t);
                Ok(true)
            }
            Item::Heartbeat { time_us, last_seq } => {
                self.update(|s| {
                    s.source_last_seq = last_seq;
                    s.source_time_us = time_us;
                });
                self.backoff = FIRST_BACKOFF;
                self.failures = 0;
                Ok(true)
            }
            Item::Snapshot(p) => {
                tracing::info!(
                    source = %self.config.address,
                    "provisioning: the primary no longer has seq {}; receiving a snapshot",
                    self.next_seq
                );
                self.provision = Some(p);
                self.backoff = FIRST_BACKOFF;
                Ok(true)
            }
            Item::Baseline { server_id, seq } => {
                tracing::info!(
                    source = %self.config.address,
                    "the primary (server {server_id}) found this replica's positions {:?} at its seq {seq}",
                    self.origins
                );
                self.next_seq = seq;
                self.last_commit_us = None;
                self.baseline = Some((server_id, seq));
                Ok(true)
            }
            Item::SnapshotEnd { seq } => {
                // The applier loaded the snapshot before it asked for more: the stream goes
                // on after it, and a reconnect asks from there.
                self.next_seq = seq + 1;
                self.last_commit_us = None;
                // One snapshot: a reconnect resumes the stream after it.
                self.want_snapshot = false;
                Ok(true)
            }
            Item::Ended(e) => {
                self.link = None;
                self.update(|s| s.connected = false);
                if !e.is_retriable() {
                    return Err(e);
                }
                let e = self.failed(e)?;
                tracing::warn!(source = %self.config.address, "replication stream ended: {e}");
                let text = e.to_string();
                self.update(|s| s.last_error = Some(text));
                self.retry_at = Instant::now() + self.backoff;
                // Reset by the next transaction or heartbeat; a stream that ends at once
                // backs off like a refused connection.
                self.backoff = (self.backoff * 2).min(self.config.connect_retry);
                Ok(false)
            }
        }
    }
}

#[async_trait]
impl EventSource for NetworkSource {
    async fn next(&mut self, timeout: Duration) -> Result<Option<SourcedTx>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(t) = self.ready.pop_front() {
                return Ok(Some(t));
            }
            if self.provision.is_some() || self.baseline.is_some() {
                // The applier takes it before anything after it.
                return Ok(None);
            }
            if self.link.is_none() {
                let now = Instant::now();
                if now < self.retry_at {
                    if now >= deadline {
                        return Ok(None);
                    }
                    tokio::time::sleep((self.retry_at - now).min(deadline - now)).await;
                    continue;
                }
                // A primary that accepts but never answers must not hold the replica.
                let attempt = match tokio::time::timeout(CONNECT_TIMEOUT, self.connect()).await {
                    Ok(r) => r,
                    Err(_) => Err(Error::Source(format!(
                        "{} did not complete the login within {} s",
                        self.config.address,
                        CONNECT_TIMEOUT.as_secs()
                    ))),
                };
                if let Err(e) = attempt {
                    if !e.is_retriable() {
                        return Err(e);
                    }
                    let e = self.failed(e)?;
                    tracing::warn!(source = %self.config.address, "cannot reach the primary: {e}");
                    let text = e.to_string();
                    self.update(|s| s.last_error = Some(text));
                    self.retry_at = Instant::now() + self.backoff;
                    self.backoff = (self.backoff * 2).min(self.config.connect_retry);
                }
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if !self.receive(left).await? && Instant::now() >= deadline {
                return Ok(self.ready.pop_front());
            }
        }
    }

    fn describe(&self) -> String {
        format!("replication stream of {}", self.config.address)
    }

    fn is_live(&self) -> bool {
        self.link.is_some()
    }

    fn take_provision(&mut self) -> Option<Provision> {
        self.provision.take()
    }

    fn take_baseline(&mut self) -> Option<(u32, u64)> {
        self.baseline.take()
    }
}

/// The largest packet buffer the stream's reader keeps between packets.
const KEPT_PACKET_BUFFER: usize = 1 << 20;

/// Reads stream packets until the connection ends or stays silent too long.
async fn read_stream<S: AsyncRead + AsyncWrite + Unpin>(
    packets: Packets<S>,
    tx: mpsc::Sender<Item>,
    silence: Duration,
) {
    // Nothing was read since the stream request: rewrapping loses no buffered byte.
    let received = Arc::new(AtomicU64::new(0));
    let mut packets = Packets::new(
        Counted {
            inner: packets.into_inner(),
            received: Arc::clone(&received),
        },
        1 << 30,
    );
    // One buffer for every packet (a transaction's decoded copy is its own).
    let mut buf = Vec::new();
    let mut arriving = Arriving::default();
    loop {
        // The link is dead when no byte arrives for `silence`, not when one packet (a large
        // transaction on a slow link) takes longer than that to arrive.
        let read = {
            let read = packets.read_into(&mut buf, KEPT_PACKET_BUFFER);
            tokio::pin!(read);
            loop {
                let before = received.load(Ordering::Relaxed);
                tokio::select! {
                    r = &mut read => break Some(r),
                    _ = tokio::time::sleep(silence) => {
                        if received.load(Ordering::Relaxed) == before {
                            break None;
                        }
                    }
                }
            }
        };
        let packet = match read {
            None => Err(Error::Source(format!(
                "no heartbeat from the primary for {} ms",
                silence.as_millis()
            ))),
            Some(Ok(true)) => decode(&buf),
            Some(Ok(false)) => Err(Error::Source("the primary closed the connection".into())),
            Some(Err(e)) => Err(Error::Source(format!(
                "reading the stream: {}",
                std::io::Error::from(e)
            ))),
        };
        let item = match packet.and_then(|p| arriving.take(p)) {
            Ok(Some(Routed::Item(item))) => item,
            Ok(Some(Routed::Piece(piece))) => match arriving.send(piece).await {
                // The loader went away (it failed): the stream is of no more use.
                Err(()) => return,
                Ok(None) => continue,
                Ok(Some(seq)) => Item::SnapshotEnd { seq },
            },
            Ok(None) => continue,
            Err(e) => Item::Ended(e),
        };
        let end = match &item {
            Item::Ended(e) => {
                arriving.fail(e.to_string()).await;
                true
            }
            _ => false,
        };
        if tx.send(item).await.is_err() || end {
            return;
        }
    }
}

/// One packet of the stream, decoded.
#[derive(Debug)]
enum Packet {
    /// What goes to the source as it is.
    Item(Item),
    /// A snapshot begins: the primary's server id and clock, and in the whole form (a
    /// primary that does not stream its snapshots) the sequence number, size and covered
    /// sequence number it announced.
    SnapshotBegin {
        server_id: u32,
        time_us: i64,
        announced: Option<Announced>,
    },
    /// The next bytes of the snapshot.
    SnapshotBytes(Vec<u8>),
    /// The snapshot is whole; the streamed form says here where it stands.
    SnapshotEnd(Option<(u64, u64)>),
}

/// What a primary sending its snapshot whole announced before the bytes.
#[derive(Debug, Clone, Copy)]
struct Announced {
    seq: u64,
    bytes: u64,
    covered: u64,
}

/// Where a packet goes.
enum Routed {
    Item(Item),
    Piece(Piece),
}

/// The snapshot whose bytes the stream's reader is passing on, if one is arriving.
#[derive(Default)]
struct Arriving {
    current: Option<(mpsc::Sender<Piece>, Option<Announced>, u64)>,
}

impl Arriving {
    /// Routes a packet: a snapshot's begin becomes the provision the source hands out, its
    /// bytes and end pieces of that provision's stream, anything else an item as it is.
    fn take(&mut self, packet: Packet) -> Result<Option<Routed>> {
        let stray = |what: &str| Error::Invalid(format!("{what} without a snapshot"));
        match packet {
            Packet::Item(item) => Ok(Some(Routed::Item(item))),
            Packet::SnapshotBegin {
                server_id,
                time_us,
                announced,
            } => {
                if self.current.is_some() {
                    return Err(Error::Invalid(
                        "a snapshot began before the last one ended".into(),
                    ));
                }
                let (pieces, snapshot) = SnapshotStream::channel();
                self.current = Some((pieces, announced, 0));
                Ok(Some(Routed::Item(Item::Snapshot(Provision {
                    server_id,
                    time_us,
                    snapshot,
                }))))
            }
            Packet::SnapshotBytes(bytes) => {
                let (_, announced, got) = self
                    .current
                    .as_mut()
                    .ok_or_else(|| stray("snapshot bytes"))?;
                *got += bytes.len() as u64;
                if let Some(a) = announced.filter(|a| *got > a.bytes) {
                    return Err(Error::Invalid(format!(
                        "the snapshot is longer than the {} bytes announced",
                        a.bytes
                    )));
                }
                Ok(Some(Routed::Piece(Piece::Bytes(bytes))))
            }
            Packet::SnapshotEnd(said) => {
                let (_, announced, got) = self
                    .current
                    .as_ref()
                    .ok_or_else(|| stray("a snapshot end"))?;
                let (seq, covered) = match (said, announced) {
                    (Some(end), _) => end,
                    (None, Some(a)) if a.bytes == *got => (a.seq, a.covered.max(a.seq)),
                    (None, Some(a)) => {
                        return Err(Error::Invalid(format!(
                            "the snapshot ended after {got} of {} bytes",
                            a.bytes
                        )))
                    }
                    (None, None) => {
                        return Err(Error::Invalid(
                            "a streamed snapshot ended without saying where it stands".into(),
                        ))
                    }
                };
                Ok(Some(Routed::Piece(Piece::End { seq, covered })))
            }
        }
    }

    /// Hands a piece to the snapshot's loader (waiting while it is behind); after the end
    /// piece the snapshot is done here: the sequence number it stands at, for the source to
    /// go on after. An error when the loader is gone.
    async fn send(&mut self, piece: Piece) -> std::result::Result<Option<u64>, ()> {
        let Some((pieces, _, _)) = self.current.as_ref() else {
            return Err(());
        };
        let end = match &piece {
            Piece::End { seq, .. } => Some(*seq),
            _ => None,
        };
        pieces.send(piece).await.map_err(|_| ())?;
        if end.is_some() {
            self.current = None;
        }
        Ok(end)
    }

    /// Tells the loader of a snapshot still arriving that the stream failed.
    async fn fail(&mut self, why: String) {
        if let Some((pieces, _, _)) = self.current.take() {
            let _ = pieces.send(Piece::Failed(why)).await;
        }
    }
}

/// One stream packet: `0x00 segment:8 offset:8 frame`, an ERR packet, EOF, a stream start
/// (`0x04 server_id:4 seq:8`) or a snapshot's: streamed (`0x05 server_id:4 time_us:8`, `0x02
/// bytes`, `0x03 seq:8 covered:8`) or whole (`0x01 server_id:4 seq:8 bytes:8 time_us:8
/// [covered:8]`, `0x02 bytes`, `0x03`).
fn decode(p: &[u8]) -> Result<Packet> {
    let short = |what: &str| Error::Invalid(format!("a short {what}"));
    let mut c = Cursor::new(p.get(1..).unwrap_or_default());
    match p.first() {
        Some(0x01) => {
            let (Ok(server_id), Ok(seq), Ok(bytes), Ok(time)) =
                (c.u32(), c.u64(), c.u64(), c.u64())
            else {
                return Err(short("snapshot header"));
            };
            return Ok(Packet::SnapshotBegin {
                server_id,
                time_us: time as i64,
                announced: Some(Announced {
                    seq,
                    bytes,
                    covered: c.u64().unwrap_or(seq),
                }),
            });
        }
        Some(0x05) => {
            let (Ok(server_id), Ok(time)) = (c.u32(), c.u64()) else {
                return Err(short("snapshot header"));
            };
            return Ok(Packet::SnapshotBegin {
                server_id,
                time_us: time as i64,
                announced: None,
            });
        }
        Some(0x02) => return Ok(Packet::SnapshotBytes(p[1..].to_vec())),
        Some(0x03) if p.len() == 1 => return Ok(Packet::SnapshotEnd(None)),
        Some(0x03) => {
            let (Ok(seq), Ok(covered)) = (c.u64(), c.u64()) else {
                return Err(short("snapshot end"));
            };
            return Ok(Packet::SnapshotEnd(Some((seq, covered.max(seq)))));
        }
        Some(0x04) => {
            let (Ok(server_id), Ok(seq)) = (c.u32(), c.u64()) else {
                return Err(short("stream start"));
            };
            return Ok(Packet::Item(Item::Baseline { server_id, seq }));
        }
        _ => {}
    }
    if let Some((code, state, msg)) = protocol::parse_err(p) {
        let e = format!("the primary ended the stream: ERROR {code} ({state}): {msg}");
        // The primary cannot serve its binlog from here (corruption, a gap): nothing after
        // that is safe. Anything else may pass, and the replica reconnects.
        return Ok(Packet::Item(Item::Ended(if code == 1236 {
            Error::SourceFatal(e)
        } else {
            Error::Source(e)
        })));
    }
    if p.first() == Some(&0xfe) && p.len() < 9 {
        return Ok(Packet::Item(Item::Ended(Error::Source(
            "the primary ended the stream".into(),
        ))));
    }
    let mut c = Cursor::new(p);
    let (Ok(0), Ok(segment), Ok(offset)) = (c.u8(), c.u64(), c.u64()) else {
        return Err(Error::Invalid(
            "a stream packet that is not a record".into(),
        ));
    };
    let position = Position { segment, offset };
    let frame = c.rest();
    let corrupt = |why: &str| {
        Error::Invalid(format!(
            "corrupt record from the primary at {position}: {why}"
        ))
    };
    let payload = match scan_frame(frame, DEFAULT_MAX_FRAME) {
        FrameScan::Frame { payload, len } if len == frame.len() => payload,
        FrameScan::Frame { .. } => return Err(corrupt("bytes after the frame")),
        FrameScan::Corrupt { reason, .. } => return Err(corrupt(&reason)),
        FrameScan::Incomplete { .. } => return Err(corrupt("a partial frame")),
    };
    match codec::decode_record(payload).map_err(|e| corrupt(&e.to_string()))? {
        Record::Transaction(tx) => Ok(Packet::Item(Item::Tx(SourcedTx { tx, position }))),
        Record::Heartbeat(hb) => Ok(Packet::Item(Item::Heartbeat {
            time_us: hb.time_us,
            last_seq: hb.last_seq,
        })),
    }
}

async fn read<S: AsyncRead + AsyncWrite + Unpin>(packets: &mut Packets<S>) -> Result<Vec<u8>> {
    packets
        .read()
        .await
        .map_err(|e| io_error(e.into()))?
        .ok_or_else(|| Error::Source("the primary closed the connection".into()))
}

/// Sends a command: a new exchange, sequence 0.
async fn command<S: AsyncRead + AsyncWrite + Unpin>(
    packets: &mut Packets<S>,
    payload: &[u8],
) -> Result<()> {
    packets.restart();
    packets.write(payload).await.map_err(io_error)?;
    packets.flush().await.map_err(io_error)
}

fn expect_ok(p: &[u8], step: &str) -> Result<()> {
    if let Some((code, state, msg)) = protocol::parse_err(p) {
        let text = format!("{step}: ERROR {code} ({state}): {msg}");
        return Err(if is_access_error(code) {
            Error::Refused(text)
        } else {
            Error::Source(text)
        });
    }
    if p.first() != Some(&0) {
        return Err(Error::Source(format!("{step}: unexpected answer")));
    }
    Ok(())
}

/// Whether MySQL's error `code` refuses the account rather than the moment: a wrong password
/// (1045), a missing privilege (1044, 1142, 1227), a host not allowed (1130), an
/// authentication method the client lacks (1251), a locked account (3118).
pub fn is_access_error(code: u16) -> bool {
    matches!(code, 1044 | 1045 | 1130 | 1142 | 1227 | 1251 | 3118)
}

fn io_error(e: std::io::Error) -> Error {
    Error::Source(e.to_string())
}

/// A stream that counts the bytes read from it (how the link's silence is measured).
struct Counted<S> {
    inner: S,
    received: Arc<AtomicU64>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.received.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error the primary cannot get past stops the replica (1236); anything else, such as
    /// an I/O failure that may pass (1105), ends only this connection.
    #[test]
    fn which_stream_errors_stop_the_replica() {
        let fatal = protocol::err(1236, "HY000", "Got fatal error from source");
        let Ok(Packet::Item(Item::Ended(e))) = decode(&fatal) else {
            panic!("an end");
        };
        assert!(!e.is_retriable(), "{e}");
        let passing = protocol::err(1105, "HY000", "binlog: I/O error");
        let Ok(Packet::Item(Item::Ended(e))) = decode(&passing) else {
            panic!("an end");
        };
        assert!(e.is_retriable(), "{e}");
        // A frame that does not match its checksum is corruption, named with its position.
        let mut p = vec![0u8];
        p.extend_from_slice(&3u64.to_le_bytes());
        p.extend_from_slice(&100u64.to_le_bytes());
        p.extend_from_slice(&[5, 0, 0, 0, 1, 2, 3, 4, 9, 9, 9, 9, 9]);
        let Err(e) = decode(&p) else {
            panic!("corrupt");
        };
        assert!(
            !e.is_retriable() && e.to_string().contains("binlog.000003"),
            "{e}"
        );
    }

    /// Both forms of a snapshot become one provision whose bytes are the chunks in order and
    /// whose end says where it stands; a whole one shorter or longer than announced, a
    /// streamed one ending without its position, and bytes without a snapshot are errors.
    #[test]
    fn snapshot_packets_become_a_provision_and_its_pieces() {
        use std::io::Read;
        let whole_begin = |bytes: u64| {
            let mut p = vec![0x01];
            p.extend_from_slice(&5u32.to_le_bytes());
            p.extend_from_slice(&40u64.to_le_bytes());
            p.extend_from_slice(&bytes.to_le_bytes());
            p.extend_from_slice(&7u64.to_le_bytes());
            p.extend_from_slice(&44u64.to_le_bytes());
            p
        };
        let mut streamed_begin = vec![0x05];
        streamed_begin.extend_from_slice(&5u32.to_le_bytes());
        streamed_begin.extend_from_slice(&7u64.to_le_bytes());
        let mut streamed_end = vec![0x03];
        streamed_end.extend_from_slice(&40u64.to_le_bytes());
        streamed_end.extend_from_slice(&44u64.to_le_bytes());
        for (begin, end) in [
            (whole_begin(5), vec![0x03]),
            (streamed_begin.clone(), streamed_end.clone()),
        ] {
            let mut arriving = Arriving::default();
            let route = |a: &mut Arriving, p: &[u8]| a.take(decode(p).expect("decodes"));
            let Ok(Some(Routed::Item(Item::Snapshot(mut provision)))) =
                route(&mut arriving, &begin)
            else {
                panic!("a provision");
            };
            assert_eq!((provision.server_id, provision.time_us), (5, 7));
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime");
            let mut ends = Vec::new();
            for p in [&[0x02, 1, 2][..], &[0x02, 3, 4, 5][..], &end[..]] {
                let Ok(Some(Routed::Piece(piece))) = route(&mut arriving, p) else {
                    panic!("a piece");
                };
                ends.push(rt.block_on(arriving.send(piece)).expect("sent"));
            }
            assert_eq!(ends, vec![None, None, Some(40)]);
            let mut got = Vec::new();
            provision.snapshot.read_to_end(&mut got).expect("read");
            assert_eq!(got, vec![1, 2, 3, 4, 5]);
            assert_eq!(provision.snapshot.end(), Some((40, 44)));
        }
        let refused = |packets: &[&[u8]]| {
            let mut arriving = Arriving::default();
            packets
                .iter()
                .map(|p| arriving.take(decode(p).expect("decodes")).map(|_| ()))
                .find_map(Result::err)
        };
        let too_long = refused(&[&whole_begin(2), &[0x02, 1, 2, 3]]).expect("longer");
        assert!(
            too_long.to_string().contains("longer than the 2 bytes"),
            "{too_long}"
        );
        let too_short = refused(&[&whole_begin(4), &[0x02, 1, 2, 3], &[0x03]]).expect("shorter");
        assert!(
            too_short.to_string().contains("after 3 of 4 bytes"),
            "{too_short}"
        );
        let no_end = refused(&[&streamed_begin, &[0x02, 1], &[0x03]]).expect("no position");
        assert!(no_end.to_string().contains("without saying"), "{no_end}");
        let stray = refused(&[&[0x02, 1]]).expect("stray");
        assert!(stray.to_string().contains("without a snapshot"), "{stray}");
        let twice = refused(&[&streamed_begin, &streamed_begin]).expect("twice");
        assert!(twice.to_string().contains("began before"), "{twice}");
    }
}
