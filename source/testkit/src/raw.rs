//! The MySQL protocol by hand, for tests that must send what no driver sends (garbage, a
//! packet over the limit) or not read what a driver would.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

/// A logged-in connection, spoken to packet by packet.
#[derive(Debug)]
pub struct Client(pub TcpStream);

/// Reads one packet: (sequence, payload).
pub fn read(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h)?;
    let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
    let mut p = vec![0; len];
    s.read_exact(&mut p)?;
    Ok((h[3], p))
}

/// Writes one packet with sequence number `seq`.
pub fn write(s: &mut TcpStream, seq: u8, payload: &[u8]) {
    let len = (payload.len() as u32).to_le_bytes();
    s.write_all(&[len[0], len[1], len[2], seq]).expect("write");
    s.write_all(payload).expect("write");
}

impl Client {
    /// Connects and logs in as root (no password), protocol 4.1, no EOF packets.
    pub fn login(addr: SocketAddr) -> Client {
        let mut s = TcpStream::connect(addr).expect("connect");
        let (_, greeting) = read(&mut s).expect("greeting");
        assert_eq!(greeting[0], 10, "protocol 10");
        let caps: u32 = (1 << 9) | (1 << 15) | (1 << 19) | (1 << 24);
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&(1u32 << 24).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(b"root\0");
        p.push(0); // empty answer
        p.extend_from_slice(b"mysql_native_password\0");
        write(&mut s, 1, &p);
        let (_, ok) = read(&mut s).expect("auth answer");
        assert_eq!(ok[0], 0, "OK after login: {ok:?}");
        Client(s)
    }

    /// Sends one command and reads the first packet of the answer.
    pub fn command(&mut self, payload: &[u8]) -> Vec<u8> {
        write(&mut self.0, 0, payload);
        read(&mut self.0).expect("answer").1
    }
}

/// An ERR packet's code and message.
pub fn error(p: &[u8]) -> (u16, String) {
    assert_eq!(p[0], 0xff, "an ERR packet: {p:?}");
    (
        u16::from_le_bytes([p[1], p[2]]),
        String::from_utf8_lossy(&p[9..]).into_owned(),
    )
}
