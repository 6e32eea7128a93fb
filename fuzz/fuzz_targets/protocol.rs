//! Feeds arbitrary bytes to what a client (or a primary, for a replica) sends first: the
//! handshake response, the server greeting, an ERR packet, and the replication statements the
//! server parses itself (CHANGE REPLICATION SOURCE TO and the like). Each may fail; none may
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ringrep_protocol::parse_handshake_response(data);
    let _ = ringrep_protocol::parse_greeting(data);
    let _ = ringrep_protocol::parse_err(data);
    let _ = ringrep_protocol::is_ssl_request(data);
    let text = String::from_utf8_lossy(data);
    let _ = ringrep_server::replica_sql::parse(&text);
    for prefix in ["CHANGE REPLICATION SOURCE TO ", "CHANGE MASTER TO ", "RESET REPLICA "] {
        let _ = ringrep_server::replica_sql::parse(&format!("{prefix}{text}"));
    }
});
