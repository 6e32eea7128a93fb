//! # ringrep-protocol
//!
//! The MySQL client/server protocol as ringrep speaks it: packets with their sequence numbers
//! ([`Packets`], [`Cursor`]), the connection phase (the greeting, the SSL request, the handshake
//! response, `mysql_native_password`), and the responses a node sends (OK, ERR, EOF, column
//! definitions, prepared-statement metadata). The server (`ringrep-server`) answers clients
//! with it; the replica's network source (`ringrep-applier`) logs in to its primary with it.
//!
//! ringrep speaks the protocol itself instead of through a library so that it can carry the
//! commands a library does not know (the replication commands, MySQL's own error for a wrong
//! password, 1045) and so that a response is one buffered write. References: MySQL's
//! "Client/Server Protocol" pages; the byte layouts are written beside each function.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufStream};

/// Capability flags (`CLIENT_*`), as the handshake exchanges them.
pub mod cap {
    /// `CLIENT_LONG_PASSWORD`: the 4.1 password hash.
    pub const LONG_PASSWORD: u32 = 1;
    /// `CLIENT_FOUND_ROWS`: an UPDATE's affected rows are the rows it matched.
    pub const FOUND_ROWS: u32 = 1 << 1;
    /// `CLIENT_LONG_FLAG`: all column flags.
    pub const LONG_FLAG: u32 = 1 << 2;
    /// `CLIENT_CONNECT_WITH_DB`: the handshake may name a database.
    pub const CONNECT_WITH_DB: u32 = 1 << 3;
    /// `CLIENT_PROTOCOL_41`: the 4.1 protocol (required by ringrep).
    pub const PROTOCOL_41: u32 = 1 << 9;
    /// `CLIENT_SSL`: TLS after the SSL request.
    pub const SSL: u32 = 1 << 11;
    /// `CLIENT_TRANSACTIONS`: status flags in OK and EOF packets.
    pub const TRANSACTIONS: u32 = 1 << 13;
    /// `CLIENT_SECURE_CONNECTION`: a length-prefixed authentication answer.
    pub const SECURE_CONNECTION: u32 = 1 << 15;
    /// `CLIENT_MULTI_RESULTS`: several result sets per statement.
    pub const MULTI_RESULTS: u32 = 1 << 17;
    /// `CLIENT_PS_MULTI_RESULTS`: the same for prepared statements.
    pub const PS_MULTI_RESULTS: u32 = 1 << 18;
    /// `CLIENT_PLUGIN_AUTH`: authentication methods by name.
    pub const PLUGIN_AUTH: u32 = 1 << 19;
    /// `CLIENT_CONNECT_ATTRS`: connection attributes in the handshake.
    pub const CONNECT_ATTRS: u32 = 1 << 20;
    /// `CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA`: a length-encoded answer.
    pub const PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 1 << 21;
    /// `CLIENT_SESSION_TRACK`: OK packets may carry session state changes after the info
    /// line (ringrep sends none). Offered as MySQL offers it: a client that has it reads the
    /// info line length-encoded, as ringrep writes it; some (Node's mysql2) read it as the
    /// packet's rest without it.
    pub const SESSION_TRACK: u32 = 1 << 23;
    /// `CLIENT_DEPRECATE_EOF`: OK packets in place of EOF packets.
    pub const DEPRECATE_EOF: u32 = 1 << 24;

    /// What ringrep offers (plus [`SSL`] when it has a certificate). Multi-statements are not
    /// offered: a statement text is one statement.
    pub const SERVER: u32 = LONG_PASSWORD
        | FOUND_ROWS
        | LONG_FLAG
        | CONNECT_WITH_DB
        | PROTOCOL_41
        | TRANSACTIONS
        | SECURE_CONNECTION
        | MULTI_RESULTS
        | PS_MULTI_RESULTS
        | PLUGIN_AUTH
        | CONNECT_ATTRS
        | PLUGIN_AUTH_LENENC_CLIENT_DATA
        | SESSION_TRACK
        | DEPRECATE_EOF;
}

/// Server status flags sent in OK and EOF packets.
pub mod status {
    /// `SERVER_STATUS_IN_TRANS`: a transaction is open.
    pub const IN_TRANS: u16 = 1;
    /// `SERVER_STATUS_AUTOCOMMIT`: autocommit is on.
    pub const AUTOCOMMIT: u16 = 2;
}

/// The largest payload of one packet; a longer one continues in the next.
const MAX_CHUNK: usize = 0xff_ff_ff;

/// The charset numbers column definitions carry: utf8mb4 for text, `binary` for the rest.
pub const UTF8MB4_GENERAL_CI: u16 = 45;
/// The `binary` character set: bytes, numbers, dates.
pub const BINARY: u16 = 63;

/// Packets over a byte stream, with their sequence numbers. Writes are buffered until
/// [`Packets::flush`], so a whole response leaves in one write.
#[derive(Debug)]
pub struct Packets<S> {
    io: BufStream<S>,
    seq: u8,
    /// The largest command a client may send (`max_allowed_packet`).
    max_payload: usize,
}

/// Why a packet could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The connection failed or closed in the middle of a packet.
    Io(io::Error),
    /// The client sent more than `max_allowed_packet`.
    TooLarge,
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        ReadError::Io(e)
    }
}

impl From<ReadError> for io::Error {
    /// For callers that treat an oversized packet as any other broken connection.
    fn from(e: ReadError) -> io::Error {
        match e {
            ReadError::Io(e) => e,
            ReadError::TooLarge => io::Error::new(
                io::ErrorKind::InvalidData,
                "a packet over max_allowed_packet",
            ),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Packets<S> {
    /// Packets over `io`, accepting payloads up to `max_payload` bytes.
    pub fn new(io: S, max_payload: usize) -> Packets<S> {
        Packets {
            io: BufStream::new(io),
            seq: 0,
            max_payload,
        }
    }

    /// Packets over `io` that never read ahead of the packet asked for: for a server's first
    /// packet, after which a client that asked for TLS starts its handshake at once (bytes read
    /// ahead would be lost to the TLS layer). See [`Packets::buffered`].
    pub fn unbuffered(io: S, max_payload: usize) -> Packets<S> {
        Packets {
            // A one-byte read buffer: every read asks for at least that, so tokio reads straight
            // into the caller's buffer and never ahead.
            io: BufStream::with_capacity(1, 8 << 10, io),
            seq: 0,
            max_payload,
        }
    }

    /// The same stream with read-ahead, keeping the sequence number.
    pub fn buffered(self) -> Packets<S> {
        Packets {
            seq: self.seq,
            max_payload: self.max_payload,
            io: BufStream::new(self.io.into_inner()),
        }
    }

    /// The stream, for a TLS upgrade. Only between packets, and only from [`Packets::unbuffered`]
    /// on the reading side (or where the peer sends nothing before an answer): whatever was
    /// read ahead is dropped.
    pub fn into_inner(self) -> S {
        self.io.into_inner()
    }

    /// Reads one whole payload (joining packets of 16 MiB - 1), or `None` when the client
    /// closed the connection between packets. The next write answers it (sequence + 1).
    pub async fn read(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        let mut payload = Vec::new();
        Ok(self
            .read_into(&mut payload, usize::MAX)
            .await?
            .then_some(payload))
    }

    /// [`Packets::read`] into `payload`, for a caller reading packet after packet into one
    /// buffer: it is cleared first, and its allocation is kept unless a packet before grew it
    /// past `keep` bytes (a large one is not held while the peer sends small ones). `false`
    /// when the peer closed the connection between packets.
    pub async fn read_into(
        &mut self,
        payload: &mut Vec<u8>,
        keep: usize,
    ) -> Result<bool, ReadError> {
        if payload.capacity() > keep {
            *payload = Vec::new();
        }
        payload.clear();
        let mut first = true;
        loop {
            let mut header = [0u8; 4];
            match self.io.read_exact(&mut header).await {
                Ok(_) => {}
                Err(e) if first && e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
                Err(e) => return Err(e.into()),
            }
            first = false;
            let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
            self.seq = header[3].wrapping_add(1);
            if payload.len() + len > self.max_payload {
                return Err(ReadError::TooLarge);
            }
            let start = payload.len();
            payload.resize(start + len, 0);
            self.io.read_exact(&mut payload[start..]).await?;
            if len < MAX_CHUNK {
                return Ok(true);
            }
        }
    }

    /// Sets the sequence number of the next packet written (a client that switched to TLS goes
    /// on where its SSL request left off).
    pub fn set_seq(&mut self, seq: u8) {
        self.seq = seq;
    }

    /// Starts a new exchange: the next packet written is sequence 0 (a client's command).
    pub fn restart(&mut self) {
        self.seq = 0;
    }

    /// Queues one payload (split into packets of 16 MiB - 1 as needed).
    pub async fn write(&mut self, payload: &[u8]) -> io::Result<()> {
        let mut rest = payload;
        loop {
            let n = rest.len().min(MAX_CHUNK);
            let len = (n as u32).to_le_bytes();
            self.io
                .write_all(&[len[0], len[1], len[2], self.seq])
                .await?;
            self.io.write_all(&rest[..n]).await?;
            self.seq = self.seq.wrapping_add(1);
            rest = &rest[n..];
            // A payload of exactly a multiple of the chunk ends with an empty packet.
            if n < MAX_CHUNK {
                return Ok(());
            }
        }
    }

    /// Sends what was queued.
    pub async fn flush(&mut self) -> io::Result<()> {
        self.io.flush().await
    }
}

/// Appends MySQL's length-encoded integer.
pub fn put_lenenc_int(out: &mut Vec<u8>, n: u64) {
    let (b, len) = lenenc_int(n);
    out.extend_from_slice(&b[..len]);
}

/// MySQL's length-encoded integer: its bytes, and how many of them are used.
fn lenenc_int(n: u64) -> ([u8; 9], usize) {
    let mut b = [0; 9];
    let width = if n < 251 {
        b[0] = n as u8;
        return (b, 1);
    } else if n < 1 << 16 {
        b[0] = 0xfc;
        2
    } else if n < 1 << 24 {
        b[0] = 0xfd;
        3
    } else {
        b[0] = 0xfe;
        8
    };
    b[1..=width].copy_from_slice(&n.to_le_bytes()[..width]);
    (b, width + 1)
}

/// Appends a length-encoded string.
pub fn put_lenenc_str(out: &mut Vec<u8>, b: &[u8]) {
    put_lenenc_int(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A reader over a received payload; every read checks the length, so a short or malformed
/// packet is an error, never a panic.
#[derive(Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

/// A packet shorter than its fields say.
pub fn malformed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "malformed packet")
}

impl<'a> Cursor<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf, at: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self.at.checked_add(n).ok_or_else(malformed)?;
        let b = self.buf.get(self.at..end).ok_or_else(malformed)?;
        self.at = end;
        Ok(b)
    }

    /// One byte.
    pub fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> io::Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> io::Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A length-encoded integer.
    pub fn lenenc_int(&mut self) -> io::Result<u64> {
        Ok(match self.u8()? {
            0xfc => u64::from(self.u16()?),
            0xfd => {
                let b = self.take(3)?;
                u64::from_le_bytes([b[0], b[1], b[2], 0, 0, 0, 0, 0])
            }
            0xfe => self.u64()?,
            n => u64::from(n),
        })
    }

    /// A length-encoded string.
    pub fn lenenc_bytes(&mut self) -> io::Result<&'a [u8]> {
        let n = usize::try_from(self.lenenc_int()?).map_err(|_| malformed())?;
        self.take(n)
    }

    /// A NUL-terminated string (the NUL is consumed); the rest when there is no NUL.
    pub fn nul_bytes(&mut self) -> io::Result<&'a [u8]> {
        let rest = &self.buf[self.at..];
        match rest.iter().position(|&b| b == 0) {
            Some(i) => {
                self.at += i + 1;
                Ok(&rest[..i])
            }
            None => {
                self.at = self.buf.len();
                Ok(rest)
            }
        }
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        let r = &self.buf[self.at..];
        self.at = self.buf.len();
        r
    }
}

/// The server's greeting (Protocol::HandshakeV10):
/// `[10] version NUL conn_id:4 salt[0..8] NUL caps_low:2 charset:1 status:2 caps_high:2
/// salt_len:1 zero:10 salt[8..20] NUL plugin NUL`.
pub fn greeting(version: &str, conn_id: u32, salt: &[u8; 20], caps: u32) -> Vec<u8> {
    let mut p = Vec::with_capacity(96);
    p.push(10);
    p.extend_from_slice(version.as_bytes());
    p.push(0);
    p.extend_from_slice(&conn_id.to_le_bytes());
    p.extend_from_slice(&salt[..8]);
    p.push(0);
    p.extend_from_slice(&(caps as u16).to_le_bytes());
    p.push(UTF8MB4_GENERAL_CI as u8);
    p.extend_from_slice(&status::AUTOCOMMIT.to_le_bytes());
    p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    p.push(21);
    p.extend_from_slice(&[0; 10]);
    p.extend_from_slice(&salt[8..]);
    p.push(0);
    p.extend_from_slice(NATIVE_PASSWORD.as_bytes());
    p.push(0);
    p
}

/// The authentication method ringrep uses.
pub const NATIVE_PASSWORD: &str = "mysql_native_password";
/// MySQL 8's default authentication method (the only one of MySQL 9's clients).
pub const CACHING_SHA2: &str = "caching_sha2_password";

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// A client's `caching_sha2_password` answer to `salt`: SHA256(password) XOR
/// SHA256(SHA256(SHA256(password)) + salt); empty for an empty password.
pub fn sha2_answer(password: &str, salt: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = sha256(&[password.as_bytes()]);
    let mask = sha256(&[&sha256(&[&stage1]), salt]);
    stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect()
}

fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut h = sha1_smol::Sha1::new();
    for p in parts {
        h.update(p);
    }
    h.digest().bytes()
}

/// Whether `answer` proves the password whose double digest is `stored` (`None`: no password,
/// and only an empty answer passes): `answer` XOR `mask` must be a value whose digest is
/// `stored`. All the bytes are compared whatever the first difference, so timing tells nothing.
fn check_scramble<const N: usize>(
    stored: Option<&[u8; N]>,
    answer: &[u8],
    mask: impl FnOnce(&[u8; N]) -> [u8; N],
    digest: impl FnOnce(&[u8]) -> [u8; N],
) -> bool {
    let Some(stored) = stored else {
        return answer.is_empty();
    };
    if answer.len() != N {
        return false;
    }
    let mask = mask(stored);
    let mut stage1 = [0u8; N];
    for i in 0..N {
        stage1[i] = answer[i] ^ mask[i];
    }
    digest(&stage1)
        .iter()
        .zip(stored)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// Whether a `mysql_native_password` answer to `salt` proves the password whose
/// SHA1(SHA1()) is `stored`: the client sent SHA1(password) XOR SHA1(salt + stored).
pub fn check_native(stored: Option<&[u8; 20]>, salt: &[u8], answer: &[u8]) -> bool {
    check_scramble(stored, answer, |st| sha1(&[salt, st]), |x| sha1(&[x]))
}

/// Whether a `caching_sha2_password` answer to `salt` proves the password whose
/// SHA256(SHA256()) is `stored`: the client sent SHA256(password) XOR SHA256(stored + salt).
pub fn check_sha2(stored: Option<&[u8; 32]>, salt: &[u8], answer: &[u8]) -> bool {
    check_scramble(stored, answer, |st| sha256(&[st, salt]), |x| sha256(&[x]))
}

/// `caching_sha2_password`'s "fast authentication succeeded": more data `0x01`, then `0x03`;
/// the OK packet follows.
pub fn sha2_fast_auth_ok() -> Vec<u8> {
    vec![0x01, 0x03]
}

/// What a client said in its handshake response (Protocol::HandshakeResponse41).
#[derive(Debug, Default)]
pub struct HandshakeResponse {
    /// The client's capabilities.
    pub caps: u32,
    /// The user name.
    pub user: String,
    /// The answer to the salt.
    pub auth: Vec<u8>,
    /// The database to start in.
    pub database: Option<String>,
    /// The authentication method the answer is for.
    pub plugin: Option<String>,
}

/// Whether a handshake response is only an SSL request (32 bytes with `CLIENT_SSL`): the
/// client switches to TLS and sends the full response over it.
pub fn is_ssl_request(payload: &[u8]) -> bool {
    payload.len() == 32 && Cursor::new(payload).u32().is_ok_and(|c| c & cap::SSL != 0)
}

/// Parses `caps:4 max_packet:4 charset:1 zero:23 user NUL auth [db NUL] [plugin NUL] [attrs]`.
pub fn parse_handshake_response(payload: &[u8]) -> io::Result<HandshakeResponse> {
    let mut c = Cursor::new(payload);
    let caps = c.u32()?;
    if caps & cap::PROTOCOL_41 == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "client does not speak protocol 4.1",
        ));
    }
    c.take(4 + 1 + 23)?;
    let user = String::from_utf8_lossy(c.nul_bytes()?).into_owned();
    let auth = if caps & cap::PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
        c.lenenc_bytes()?.to_vec()
    } else if caps & cap::SECURE_CONNECTION != 0 {
        let n = c.u8()? as usize;
        c.take(n)?.to_vec()
    } else {
        c.nul_bytes()?.to_vec()
    };
    let mut database = None;
    if caps & cap::CONNECT_WITH_DB != 0 && c.remaining() > 0 {
        let db = c.nul_bytes()?;
        if !db.is_empty() {
            database = Some(String::from_utf8_lossy(db).into_owned());
        }
    }
    let mut plugin = None;
    if caps & cap::PLUGIN_AUTH != 0 && c.remaining() > 0 {
        plugin = Some(String::from_utf8_lossy(c.nul_bytes()?).into_owned());
    }
    // Connection attributes (program name and the like) are not used.
    Ok(HandshakeResponse {
        caps,
        user,
        auth,
        database,
        plugin,
    })
}

/// Asks the client to answer the salt with `mysql_native_password` (its first answer was for
/// another method, such as MySQL 8's `caching_sha2_password`): `0xfe plugin NUL salt NUL`.
pub fn auth_switch(salt: &[u8; 20]) -> Vec<u8> {
    let mut p = vec![0xfe];
    p.extend_from_slice(NATIVE_PASSWORD.as_bytes());
    p.push(0);
    p.extend_from_slice(salt);
    p.push(0);
    p
}

/// A packet of at most [`ShortPacket::CAPACITY`] bytes (OK, EOF), built on the stack: an OK
/// packet follows every write, and a `Vec` for it was two of a write's allocation calls.
#[derive(Debug, Clone, Copy)]
pub struct ShortPacket {
    buf: [u8; ShortPacket::CAPACITY],
    len: usize,
}

impl ShortPacket {
    /// The longest: an OK packet's header, two 9-byte integers, status and warnings, and an
    /// info line (`Rows matched: ...  Changed: ...  Warnings: ...` at most 85 bytes).
    pub const CAPACITY: usize = 1 + 9 + 9 + 2 + 2 + 1 + 104;

    fn new(header: u8) -> ShortPacket {
        let mut p = ShortPacket {
            buf: [0; ShortPacket::CAPACITY],
            len: 0,
        };
        p.push(&[header]);
        p
    }

    fn push(&mut self, b: &[u8]) {
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }
}

impl std::ops::Deref for ShortPacket {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// An OK packet: `0x00 affected last_insert_id status:2 warnings:2` (`0xfe` in place of
/// `0x00` where it ends a result set under `CLIENT_DEPRECATE_EOF`).
pub fn ok(
    header: u8,
    affected: u64,
    last_insert_id: u64,
    status: u16,
    warnings: u16,
) -> ShortPacket {
    let mut p = ShortPacket::new(header);
    let (b, n) = lenenc_int(affected);
    p.push(&b[..n]);
    let (b, n) = lenenc_int(last_insert_id);
    p.push(&b[..n]);
    p.push(&status.to_le_bytes());
    p.push(&warnings.to_le_bytes());
    p
}

/// An OK packet ([`ok`]) followed by MySQL's info line for the statement (`Rows matched: 3
/// Changed: 0  Warnings: 0`), which some clients read (Node's mysql drivers take an UPDATE's
/// changed rows from it): a length-encoded string, as MySQL writes it with or without
/// `CLIENT_SESSION_TRACK` (the protocol's documentation says the rest of the packet; clients
/// read what MySQL sends). An info line longer than the packet holds is cut.
pub fn ok_with_info(
    affected: u64,
    last_insert_id: u64,
    status: u16,
    warnings: u16,
    info: &str,
) -> ShortPacket {
    let mut p = ok(0, affected, last_insert_id, status, warnings);
    if !info.is_empty() {
        let room = ShortPacket::CAPACITY - p.len - 1;
        let text = &info.as_bytes()[..info.len().min(room)];
        // Shorter than 251 bytes: a one-byte length.
        p.push(&[text.len() as u8]);
        p.push(text);
    }
    p
}

/// An EOF packet: `0xfe warnings:2 status:2`.
pub fn eof(status: u16, warnings: u16) -> ShortPacket {
    let mut p = ShortPacket::new(0xfe);
    p.push(&warnings.to_le_bytes());
    p.push(&status.to_le_bytes());
    p
}

/// An ERR packet: `0xff code:2 '#' sqlstate:5 message`.
pub fn err(code: u16, sqlstate: &str, message: &str) -> Vec<u8> {
    let mut p = vec![0xff];
    p.extend_from_slice(&code.to_le_bytes());
    p.push(b'#');
    let state = sqlstate.as_bytes();
    p.extend_from_slice(state.get(..5).unwrap_or(b"HY000"));
    p.extend_from_slice(message.as_bytes());
    p
}

/// A column definition (Protocol::ColumnDefinition41).
#[derive(Debug, Clone)]
pub struct ColumnDef {
    /// The column's name as the client shows it.
    pub name: String,
    /// `MYSQL_TYPE_*`.
    pub ty: u8,
    /// `*_FLAG` bits (unsigned, binary...).
    pub flags: u16,
    /// The character set number.
    pub charset: u16,
    /// The display length.
    pub length: u32,
    /// Digits after the point (31 for floating point).
    pub decimals: u8,
}

/// `lenenc "def" schema table org_table name org_name 0x0c charset:2 length:4 type:1 flags:2
/// decimals:1 zero:2`.
pub fn column_def(c: &ColumnDef) -> Vec<u8> {
    let mut p = Vec::with_capacity(32 + c.name.len());
    put_lenenc_str(&mut p, b"def");
    put_lenenc_str(&mut p, b"");
    put_lenenc_str(&mut p, b"");
    put_lenenc_str(&mut p, b"");
    put_lenenc_str(&mut p, c.name.as_bytes());
    put_lenenc_str(&mut p, c.name.as_bytes());
    p.push(0x0c);
    p.extend_from_slice(&c.charset.to_le_bytes());
    p.extend_from_slice(&c.length.to_le_bytes());
    p.push(c.ty);
    p.extend_from_slice(&c.flags.to_le_bytes());
    p.push(c.decimals);
    p.extend_from_slice(&[0, 0]);
    p
}

/// The answer to COM_STMT_PREPARE: `0x00 stmt_id:4 columns:2 params:2 0x00 warnings:2`.
pub fn prepare_ok(stmt: u32, columns: u16, params: u16) -> Vec<u8> {
    let mut p = vec![0];
    p.extend_from_slice(&stmt.to_le_bytes());
    p.extend_from_slice(&columns.to_le_bytes());
    p.extend_from_slice(&params.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&0u16.to_le_bytes());
    p
}

/// What a client reads in a server's greeting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeting {
    /// The server's version text.
    pub version: String,
    /// The connection's id on the server.
    pub conn_id: u32,
    /// The 20-byte salt the password answer is computed over.
    pub salt: Vec<u8>,
    /// The server's capabilities.
    pub caps: u32,
}

/// Parses a greeting ([`greeting`] writes one).
pub fn parse_greeting(payload: &[u8]) -> io::Result<Greeting> {
    let mut c = Cursor::new(payload);
    if c.u8()? != 10 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not protocol 10",
        ));
    }
    let version = String::from_utf8_lossy(c.nul_bytes()?).into_owned();
    let conn_id = c.u32()?;
    let mut salt = c.take(8)?.to_vec();
    c.u8()?;
    let low = c.u16()?;
    c.take(1 + 2)?;
    let high = c.u16()?;
    let salt_len = c.u8()? as usize;
    c.take(10)?;
    let rest = salt_len.saturating_sub(8).max(13) - 1;
    salt.extend_from_slice(c.take(rest)?);
    Ok(Greeting {
        version,
        conn_id,
        salt,
        caps: u32::from(low) | (u32::from(high) << 16),
    })
}

/// The `mysql_native_password` answer to `salt`: SHA1(password) XOR
/// SHA1(salt + SHA1(SHA1(password))); empty for an empty password.
pub fn native_answer(password: &str, salt: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = sha1(&[password.as_bytes()]);
    let mask = sha1(&[salt, &sha1(&[&stage1])]);
    stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect()
}

/// The capabilities a ringrep client asks for (its replica's network source).
pub const CLIENT: u32 = cap::LONG_PASSWORD
    | cap::LONG_FLAG
    | cap::PROTOCOL_41
    | cap::TRANSACTIONS
    | cap::SECURE_CONNECTION
    | cap::PLUGIN_AUTH
    | cap::PLUGIN_AUTH_LENENC_CLIENT_DATA
    | cap::DEPRECATE_EOF;

/// A client's handshake response (see [`parse_handshake_response`] for the layout), answering
/// with `mysql_native_password`.
pub fn handshake_response(caps: u32, user: &str, answer: &[u8], database: Option<&str>) -> Vec<u8> {
    handshake_response_for(caps, user, answer, database, NATIVE_PASSWORD)
}

/// [`handshake_response`] answering with the method `plugin` (`caching_sha2_password`).
pub fn handshake_response_for(
    caps: u32,
    user: &str,
    answer: &[u8],
    database: Option<&str>,
    plugin: &str,
) -> Vec<u8> {
    let mut caps = caps | cap::PLUGIN_AUTH_LENENC_CLIENT_DATA | cap::PLUGIN_AUTH;
    if database.is_some() {
        caps |= cap::CONNECT_WITH_DB;
    }
    let mut p = caps.to_le_bytes().to_vec();
    p.extend_from_slice(&(1u32 << 24).to_le_bytes());
    p.push(UTF8MB4_GENERAL_CI as u8);
    p.extend_from_slice(&[0; 23]);
    p.extend_from_slice(user.as_bytes());
    p.push(0);
    put_lenenc_str(&mut p, answer);
    if let Some(db) = database {
        p.extend_from_slice(db.as_bytes());
        p.push(0);
    }
    p.extend_from_slice(plugin.as_bytes());
    p.push(0);
    p
}

/// A client's SSL request: the first 32 bytes of a handshake response, with `CLIENT_SSL`; the
/// TLS handshake follows, then the full response.
pub fn ssl_request(caps: u32) -> Vec<u8> {
    let mut p = (caps | cap::SSL).to_le_bytes().to_vec();
    p.extend_from_slice(&(1u32 << 24).to_le_bytes());
    p.push(UTF8MB4_GENERAL_CI as u8);
    p.extend_from_slice(&[0; 23]);
    p
}

/// An ERR packet's code, SQLSTATE and message, if `p` is one.
pub fn parse_err(p: &[u8]) -> Option<(u16, String, String)> {
    if p.first() != Some(&0xff) || p.len() < 3 {
        return None;
    }
    let code = u16::from_le_bytes([p[1], p[2]]);
    let (state, msg) = if p.get(3) == Some(&b'#') && p.len() >= 9 {
        (String::from_utf8_lossy(&p[4..9]).into_owned(), &p[9..])
    } else {
        ("HY000".to_string(), &p[3..])
    };
    Some((code, state, String::from_utf8_lossy(msg).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_round_trips() {
        for n in [
            0u64,
            250,
            251,
            65_535,
            65_536,
            (1 << 24) - 1,
            1 << 24,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_lenenc_int(&mut b, n);
            let mut c = Cursor::new(&b);
            assert_eq!(c.lenenc_int().expect("read"), n);
            assert_eq!(c.remaining(), 0);
        }
    }

    /// The largest OK packet fills a `ShortPacket` and reads back field by field.
    #[test]
    fn ok_packets_hold_the_largest_values() {
        for (affected, id) in [(0, 0), (251, 70_000), (u64::MAX, 1 << 24)] {
            let p = ok(0, affected, id, 0x0202, 3);
            let mut c = Cursor::new(&p);
            assert_eq!(c.u8().expect("header"), 0);
            assert_eq!(c.lenenc_int().expect("affected"), affected);
            assert_eq!(c.lenenc_int().expect("id"), id);
            assert_eq!(c.take(4).expect("status, warnings"), [2, 2, 3, 0]);
            assert_eq!(c.remaining(), 0);
        }
        assert_eq!(ok(0xfe, u64::MAX, u64::MAX, 0, 0).len(), 23);
        assert_eq!(&*eof(2, 1), b"\xfe\x01\x00\x02\x00");
    }

    /// The info line follows the warnings, length-encoded; the longest an UPDATE writes
    /// fits whole.
    #[test]
    fn ok_packets_carry_the_info_line() {
        let longest = format!("Rows matched: {0}  Changed: {0}  Warnings: 65535", u64::MAX);
        for info in ["Rows matched: 3  Changed: 0  Warnings: 0", longest.as_str()] {
            let p = ok_with_info(u64::MAX, u64::MAX, 2, 0, info);
            let mut c = Cursor::new(&p);
            c.take(23).expect("the OK packet");
            assert_eq!(c.lenenc_int().expect("length"), info.len() as u64);
            assert_eq!(c.take(info.len()).expect("info"), info.as_bytes());
            assert_eq!(c.remaining(), 0);
        }
        assert_eq!(&*ok_with_info(1, 0, 2, 0, ""), &*ok(0, 1, 0, 2, 0));
    }

    /// Packets read into one buffer come out whole; a buffer a large packet grew past `keep`
    /// is let go before the next read, a small one is reused.
    #[test]
    fn packets_read_into_one_buffer_keep_only_a_small_allocation() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let (client, server) = tokio::io::duplex(1 << 16);
            let mut client = Packets::new(client, 1 << 20);
            let mut server = Packets::new(server, 1 << 20);
            let large = vec![7u8; 10_000];
            for payload in [&b"first"[..], &large, b"small", b"again"] {
                client.write(payload).await.expect("write");
                client.restart();
            }
            client.flush().await.expect("flush");
            let mut buf = Vec::new();
            assert!(server.read_into(&mut buf, 4096).await.expect("read"));
            assert_eq!(buf, b"first");
            assert!(server.read_into(&mut buf, 4096).await.expect("read"));
            assert_eq!(buf, large);
            assert!(server.read_into(&mut buf, 4096).await.expect("read"));
            assert_eq!(buf, b"small");
            assert!(buf.capacity() <= 4096, "the large buffer was let go");
            let at = buf.as_ptr();
            assert!(server.read_into(&mut buf, 4096).await.expect("read"));
            assert_eq!(buf, b"again");
            assert_eq!(buf.as_ptr(), at, "a small buffer is reused");
            drop(client);
            assert!(!server.read_into(&mut buf, 4096).await.expect("end"));
        });
    }

    /// A truncated packet is an error, never a panic.
    #[test]
    fn short_packets_are_errors() {
        let mut c = Cursor::new(&[0xfc, 1]);
        assert!(c.lenenc_int().is_err());
        let mut c = Cursor::new(&[5, b'a']);
        assert!(c.lenenc_bytes().is_err());
        assert!(parse_handshake_response(&[0x00, 0x02]).is_err());
        assert!(parse_handshake_response(&[]).is_err());
    }

    /// A handshake response as mysql_common (the client side of mysql_async) writes it
    /// parses back to the same user, answer, database and method.
    #[test]
    fn parses_a_real_clients_handshake_response() {
        use mysql_common::constants::CapabilityFlags;
        use mysql_common::packets::HandshakeResponse as Client;
        use mysql_common::proto::MySerialize;
        let caps = CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH
            | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
            | CapabilityFlags::CLIENT_CONNECT_WITH_DB;
        let resp = Client::new(
            Some(&[7u8; 20][..]),
            (8, 0, 36),
            Some(&b"root"[..]),
            Some(&b"test"[..]),
            Some(mysql_common::packets::AuthPlugin::MysqlNativePassword),
            caps,
            None,
            1 << 24,
        );
        let mut buf = Vec::new();
        resp.serialize(&mut buf);
        let parsed = parse_handshake_response(&buf).expect("parse");
        assert_eq!(parsed.user, "root");
        assert_eq!(parsed.auth, vec![7u8; 20]);
        assert_eq!(parsed.database.as_deref(), Some("test"));
        assert_eq!(parsed.plugin.as_deref(), Some(NATIVE_PASSWORD));
    }

    /// The greeting parses with mysql_common's own parser (what mysql_async reads).
    #[test]
    fn the_greeting_parses_as_a_client_reads_it() {
        use mysql_common::packets::HandshakePacket;
        use mysql_common::proto::MyDeserialize;
        let salt = *b"abcdefghijklmnopqrst";
        let g = greeting("8.0.36-ringrep", 42, &salt, cap::SERVER | cap::SSL);
        let mut buf = mysql_common::io::ParseBuf(&g);
        let p = HandshakePacket::deserialize((), &mut buf).expect("greeting");
        assert_eq!(p.connection_id(), 42);
        assert_eq!(p.nonce(), salt.to_vec());
        assert_eq!(
            p.auth_plugin_name_ref(),
            Some(&b"mysql_native_password"[..])
        );
        assert!(p
            .capabilities()
            .contains(mysql_common::constants::CapabilityFlags::CLIENT_SSL));
    }

    /// The client side reads what the server side writes, and a right answer passes the
    /// check a server makes.
    #[test]
    fn client_side_round_trips() {
        let salt = *b"abcdefghijklmnopqrst";
        let g =
            parse_greeting(&greeting("8.0.36-ringrep", 9, &salt, cap::SERVER)).expect("greeting");
        assert_eq!(
            (g.conn_id, g.salt.as_slice(), g.caps),
            (9, &salt[..], cap::SERVER)
        );
        let answer = native_answer("pw", &salt);
        let r = parse_handshake_response(&handshake_response(CLIENT, "repl", &answer, Some("db")))
            .expect("response");
        assert_eq!(
            (r.user.as_str(), r.auth, r.database.as_deref()),
            ("repl", answer, Some("db"))
        );
        assert!(native_answer("", &salt).is_empty());
        assert!(is_ssl_request(&ssl_request(CLIENT)));
        assert_eq!(
            parse_err(&err(1045, "28000", "denied")),
            Some((1045, "28000".into(), "denied".into()))
        );
    }

    #[test]
    fn err_packets_carry_code_state_and_message() {
        assert_eq!(err(1045, "28000", "no"), b"\xff\x15\x04#28000no".to_vec());
    }
}
