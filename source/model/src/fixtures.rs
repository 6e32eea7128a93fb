//! Helpers shared by the engine tests.

use std::path::Path;
use std::sync::Arc;

use binlog_format::schema::*;
use binlog_format::{Key, SyncPolicy, Value};
use ringrep_engine::clock::ManualClock;
use ringrep_engine::ddl::prepare_table;
use ringrep_engine::{Engine, EngineConfig, Session};

/// The time the tests' manual clocks start at (2023-11-14), in microseconds.
pub const T0: i64 = 1_700_000_000_000_000;

/// An engine configuration for tests: server id 1, no fsync, `clock`, no automatic snapshots.
pub fn config(clock: &ManualClock) -> EngineConfig {
    let mut c = EngineConfig::new(1);
    c.sync = SyncPolicy::Never;
    c.clock = Arc::new(clock.clone());
    c.snapshot_every = 0;
    c
}

/// Opens an engine in `dir` with [`config`].
pub fn open(dir: &Path, clock: &ManualClock) -> Engine {
    Engine::open(dir, config(clock)).expect("open engine").0
}

fn col(name: &str, ty: ColumnType, nullable: bool, default: ColumnDefault) -> ColumnDef {
    ColumnDef {
        name: name.into(),
        ty,
        nullable,
        default,
        on_update_now: false,
        auto_increment: false,
        comment: String::new(),
    }
}

/// `user_events`-like ring table: (user_id, ring_idx) key, ring_meta, ts TIMESTAMP(6), payload,
/// code (unique when `unique`).
pub fn ring_table(name: &str, size: u32, ttl_secs: Option<u32>, unique: bool) -> TableDef {
    let int = ColumnType::Integer {
        width: IntWidth::Int,
        unsigned: false,
    };
    let mut comment = format!("NDB_TABLE=MAX_ROWS_PER_PK={size}");
    if let Some(t) = ttl_secs {
        comment = format!("NDB_TABLE=TTL={t}@ts,MAX_ROWS_PER_PK={size}");
    }
    let def = TableDef {
        id: 0,
        database: "test".into(),
        name: name.into(),
        columns: vec![
            col("user_id", int.clone(), false, ColumnDefault::None),
            col(
                "ring_idx",
                int.clone(),
                false,
                ColumnDefault::Value(Value::Int(0)),
            ),
            col(
                "ring_meta",
                ColumnType::VarBinary { len: 64 },
                true,
                ColumnDefault::None,
            ),
            col(
                "ts",
                ColumnType::Timestamp { fsp: 6 },
                false,
                ColumnDefault::CurrentTimestamp { fsp: 6 },
            ),
            col(
                "payload",
                ColumnType::VarChar { len: 200 },
                true,
                ColumnDefault::None,
            ),
            col("code", int, true, ColumnDefault::None),
        ],
        primary_key: vec![0, 1],
        indexes: if unique {
            vec![IndexDef {
                name: "idx_code".into(),
                kind: IndexKind::Unique,
                columns: vec![5],
            }]
        } else {
            vec![]
        },
        ring: None,
        ttl: None,
        partitioning: None,
        comment: Some(comment),
    };
    prepare_table(def, None, false).expect("valid ring table")
}

/// Creates a prepared table in database `test`; returns its definition with its id.
pub fn create(s: &mut Session, def: TableDef) -> TableDef {
    s.create_table(def.clone(), false).expect("create table");
    s.table_def(Some("test"), &def.name).expect("created")
}

/// Table name with its stored rows.
pub type TableDump = (String, Vec<(Key, Vec<Value>)>);

/// Every stored row of every table, meta and expired rows included, by table name.
pub fn dump(engine: &Engine) -> Vec<TableDump> {
    engine.with_state(|st| {
        st.tables
            .values()
            .filter(|t| t.def.database != "mysql")
            .map(|t| (t.def.qualified_name(), t.iter().collect()))
            .collect()
    })
}

/// Every transaction of the binlog in data directory `dir`, with its position, as a replica
/// would be sent them.
pub fn binlog_transactions(
    dir: &Path,
) -> Vec<(binlog_format::Position, binlog_format::Transaction)> {
    binlog_format::BinlogReader::open(&dir.join("binlog"), binlog_format::ReaderOptions::default())
        .expect("reader")
        .filter_map(|r| match r.expect("record") {
            (p, binlog_format::Record::Transaction(tx)) => Some((p, tx)),
            _ => None,
        })
        .collect()
}
