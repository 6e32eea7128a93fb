//! The MySQL client/server protocol, server side: packets, the connection phase, and the
//! responses a node sends (OK, ERR, EOF, result sets in the text and binary protocols,
//! prepared-statement metadata).
//!
//! ringrep speaks the protocol itself instead of through a library so that it can carry the
//! commands a library does not know (the replication commands, MySQL's own error for a wrong
//! password, 1045) and so that a response is one buffered write. References: MySQL's
//! "Client/Server Protocol" pages; the byte layouts are written beside each function.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufStream};

/// Capability flags (`CLIENT_*`), as the handshake exchanges them.
pub(crate) mod cap {
    pub(crate) const LONG_PASSWORD: u32 = 1;
    pub(crate) const LONG_FLAG: u32 = 1 << 2;
    pub(crate) const CONNECT_WITH_DB: u32 = 1 << 3;
    pub(crate) const PROTOCOL_41: u32 = 1 << 9;
    pub(crate) const SSL: u32 = 1 << 11;
    pub(crate) const TRANSACTIONS: u32 = 1 << 13;
    pub(crate) const SECURE_CONNECTION: u32 = 1 << 15;
    pub(crate) const MULTI_RESULTS: u32 = 1 << 17;
    pub(crate) const PS_MULTI_RESULTS: u32 = 1 << 18;
    pub(crate) const PLUGIN_AUTH: u32 = 1 << 19;
    pub(crate) const CONNECT_ATTRS: u32 = 1 << 20;
    pub(crate) const PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 1 << 21;
    pub(crate) const DEPRECATE_EOF: u32 = 1 << 24;

    /// What ringrep offers (plus [`SSL`] when it has a certificate). Multi-statements are not
    /// offered: a statement text is one statement.
    pub(crate) const SERVER: u32 = LONG_PASSWORD
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
        | DEPRECATE_EOF;
}

/// Server status flags sent in OK and EOF packets.
pub(crate) mod status {
    pub(crate) const IN_TRANS: u16 = 1;
    pub(crate) const AUTOCOMMIT: u16 = 2;
}

/// The largest payload of one packet; a longer one continues in the next.
const MAX_CHUNK: usize = 0xff_ff_ff;

/// The charset numbers column definitions carry: utf8mb4 for text, `binary` for the rest.
pub(crate) const UTF8MB4_GENERAL_CI: u16 = 45;
/// The `binary` character set: bytes, numbers, dates.
pub(crate) const BINARY: u16 = 63;

/// Packets over a byte stream, with their sequence numbers. Writes are buffered until
/// [`Packets::flush`], so a whole response leaves in one write.
pub(crate) struct Packets<S> {
    io: BufStream<S>,
    seq: u8,
    /// The largest command a client may send (`max_allowed_packet`).
    max_payload: usize,
}

/// Why a packet could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
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

impl<S: AsyncRead + AsyncWrite + Unpin> Packets<S> {
    /// Packets over `io`, accepting payloads up to `max_payload` bytes.
    pub(crate) fn new(io: S, max_payload: usize) -> Packets<S> {
        Packets {
            io: BufStream::new(io),
            seq: 0,
            max_payload,
        }
    }

    /// The stream, for a TLS upgrade. Only between packets: nothing may be buffered.
    pub(crate) fn into_inner(self) -> S {
        self.io.into_inner()
    }

    /// Reads one whole payload (joining packets of 16 MiB - 1), or `None` when the client
    /// closed the connection between packets. The next write answers it (sequence + 1).
    pub(crate) async fn read(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        let mut payload = Vec::new();
        let mut first = true;
        loop {
            let mut header = [0u8; 4];
            match self.io.read_exact(&mut header).await {
                Ok(_) => {}
                Err(e) if first && e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
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
                return Ok(Some(payload));
            }
        }
    }

    /// Queues one payload (split into packets of 16 MiB - 1 as needed).
    pub(crate) async fn write(&mut self, payload: &[u8]) -> io::Result<()> {
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
    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        self.io.flush().await
    }
}

/// Appends MySQL's length-encoded integer.
pub(crate) fn put_lenenc_int(out: &mut Vec<u8>, n: u64) {
    if n < 251 {
        out.push(n as u8);
    } else if n < 1 << 16 {
        out.push(0xfc);
        out.extend_from_slice(&(n as u16).to_le_bytes());
    } else if n < 1 << 24 {
        out.push(0xfd);
        out.extend_from_slice(&n.to_le_bytes()[..3]);
    } else {
        out.push(0xfe);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

/// Appends a length-encoded string.
pub(crate) fn put_lenenc_str(out: &mut Vec<u8>, b: &[u8]) {
    put_lenenc_int(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A reader over a received payload; every read checks the length, so a short or malformed
/// packet is an error, never a panic.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

/// A packet shorter than its fields say.
pub(crate) fn malformed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "malformed packet")
}

impl<'a> Cursor<'a> {
    /// A reader at the start of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf, at: 0 }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self.at.checked_add(n).ok_or_else(malformed)?;
        let b = self.buf.get(self.at..end).ok_or_else(malformed)?;
        self.at = end;
        Ok(b)
    }

    /// One byte.
    pub(crate) fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian u16.
    pub(crate) fn u16(&mut self) -> io::Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// A little-endian u32.
    pub(crate) fn u32(&mut self) -> io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A little-endian u64.
    pub(crate) fn u64(&mut self) -> io::Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A length-encoded integer.
    pub(crate) fn lenenc_int(&mut self) -> io::Result<u64> {
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
    pub(crate) fn lenenc_bytes(&mut self) -> io::Result<&'a [u8]> {
        let n = usize::try_from(self.lenenc_int()?).map_err(|_| malformed())?;
        self.take(n)
    }

    /// A NUL-terminated string (the NUL is consumed); the rest when there is no NUL.
    pub(crate) fn nul_bytes(&mut self) -> io::Result<&'a [u8]> {
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
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let r = &self.buf[self.at..];
        self.at = self.buf.len();
        r
    }
}

/// The server's greeting (Protocol::HandshakeV10):
/// `[10] version NUL conn_id:4 salt[0..8] NUL caps_low:2 charset:1 status:2 caps_high:2
/// salt_len:1 zero:10 salt[8..20] NUL plugin NUL`.
pub(crate) fn greeting(version: &str, conn_id: u32, salt: &[u8; 20], caps: u32) -> Vec<u8> {
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
pub(crate) const NATIVE_PASSWORD: &str = "mysql_native_password";

/// What a client said in its handshake response (Protocol::HandshakeResponse41).
#[derive(Debug, Default)]
pub(crate) struct HandshakeResponse {
    /// The client's capabilities.
    pub(crate) caps: u32,
    /// The user name.
    pub(crate) user: String,
    /// The answer to the salt.
    pub(crate) auth: Vec<u8>,
    /// The database to start in.
    pub(crate) database: Option<String>,
    /// The authentication method the answer is for.
    pub(crate) plugin: Option<String>,
}

/// Whether a handshake response is only an SSL request (32 bytes with `CLIENT_SSL`): the
/// client switches to TLS and sends the full response over it.
pub(crate) fn is_ssl_request(payload: &[u8]) -> bool {
    payload.len() == 32 && Cursor::new(payload).u32().is_ok_and(|c| c & cap::SSL != 0)
}

/// Parses `caps:4 max_packet:4 charset:1 zero:23 user NUL auth [db NUL] [plugin NUL] [attrs]`.
pub(crate) fn parse_handshake_response(payload: &[u8]) -> io::Result<HandshakeResponse> {
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
pub(crate) fn auth_switch(salt: &[u8; 20]) -> Vec<u8> {
    let mut p = vec![0xfe];
    p.extend_from_slice(NATIVE_PASSWORD.as_bytes());
    p.push(0);
    p.extend_from_slice(salt);
    p.push(0);
    p
}

/// An OK packet: `0x00 affected last_insert_id status:2 warnings:2` (`0xfe` in place of
/// `0x00` where it ends a result set under `CLIENT_DEPRECATE_EOF`).
pub(crate) fn ok(
    header: u8,
    affected: u64,
    last_insert_id: u64,
    status: u16,
    warnings: u16,
) -> Vec<u8> {
    let mut p = vec![header];
    put_lenenc_int(&mut p, affected);
    put_lenenc_int(&mut p, last_insert_id);
    p.extend_from_slice(&status.to_le_bytes());
    p.extend_from_slice(&warnings.to_le_bytes());
    p
}

/// An EOF packet: `0xfe warnings:2 status:2`.
pub(crate) fn eof(status: u16, warnings: u16) -> Vec<u8> {
    let mut p = vec![0xfe];
    p.extend_from_slice(&warnings.to_le_bytes());
    p.extend_from_slice(&status.to_le_bytes());
    p
}

/// An ERR packet: `0xff code:2 '#' sqlstate:5 message`.
pub(crate) fn err(code: u16, sqlstate: &str, message: &str) -> Vec<u8> {
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
pub(crate) struct ColumnDef {
    /// The column's name as the client shows it.
    pub(crate) name: String,
    /// `MYSQL_TYPE_*`.
    pub(crate) ty: u8,
    /// `*_FLAG` bits (unsigned, binary...).
    pub(crate) flags: u16,
    /// The character set number.
    pub(crate) charset: u16,
    /// The display length.
    pub(crate) length: u32,
    /// Digits after the point (31 for floating point).
    pub(crate) decimals: u8,
}

/// `lenenc "def" schema table org_table name org_name 0x0c charset:2 length:4 type:1 flags:2
/// decimals:1 zero:2`.
pub(crate) fn column_def(c: &ColumnDef) -> Vec<u8> {
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
pub(crate) fn prepare_ok(stmt: u32, columns: u16, params: u16) -> Vec<u8> {
    let mut p = vec![0];
    p.extend_from_slice(&stmt.to_le_bytes());
    p.extend_from_slice(&columns.to_le_bytes());
    p.extend_from_slice(&params.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&0u16.to_le_bytes());
    p
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

    #[test]
    fn err_packets_carry_code_state_and_message() {
        assert_eq!(err(1045, "28000", "no"), b"\xff\x15\x04#28000no".to_vec());
    }
}
