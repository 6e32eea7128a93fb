//! Feeds arbitrary text to the SQL front end against a scratch engine. It may return any
//! error; it must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringrep_sql::SqlSession;
use ringrep_engine::{Engine, EngineConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(dir) = tempfile::tempdir() else { return };
    let Ok((engine, _)) = Engine::open(dir.path(), EngineConfig::new(1)) else { return };
    let mut s = SqlSession::new(&engine);
    let _ = s.execute("CREATE TABLE r (id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), v VARCHAR(20), PRIMARY KEY (id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'");
    for stmt in ringrep_sql::split_statements(text) {
        let _ = s.execute(&stmt);
    }
});
