//! Test fixtures built through the engine's own API (no SQL): the tables `d.r` (a ring of 3),
//! `d.p` and `d.e`, and the statements the engine's tests run on them.

use binlog_format::schema::{ColumnDef, ColumnDefault, ColumnType, IntWidth, TableDef};
use binlog_format::{SyncPolicy, Value};

use crate::ddl::prepare_table;
use crate::{Engine, EngineConfig, InsertMode, Session};

const INT: ColumnType = ColumnType::Integer {
    width: IntWidth::Int,
    unsigned: false,
};

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

fn table(
    name: &str,
    columns: Vec<ColumnDef>,
    primary_key: Vec<usize>,
    comment: Option<&str>,
) -> TableDef {
    let def = TableDef {
        id: 0,
        database: "d".into(),
        name: name.into(),
        columns,
        primary_key,
        indexes: vec![],
        ring: None,
        ttl: None,
        partitioning: None,
        comment: comment.map(str::to_string),
    };
    prepare_table(def, None, false).expect("valid table")
}

/// `r (u INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64),
/// v VARCHAR(40), PRIMARY KEY (u, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'`.
fn ring_r() -> TableDef {
    table(
        "r",
        vec![
            col("u", INT, false, ColumnDefault::None),
            col("ring_idx", INT, false, ColumnDefault::Value(Value::Int(0))),
            col(
                "ring_meta",
                ColumnType::VarBinary { len: 64 },
                true,
                ColumnDefault::None,
            ),
            col(
                "v",
                ColumnType::VarChar { len: 40 },
                true,
                ColumnDefault::None,
            ),
        ],
        vec![0, 1],
        Some("NDB_TABLE=MAX_ROWS_PER_PK=3"),
    )
}

/// `p (id INT PRIMARY KEY, v VARCHAR(1000))`.
fn plain_p() -> TableDef {
    table(
        "p",
        vec![
            col("id", INT, false, ColumnDefault::None),
            col(
                "v",
                ColumnType::VarChar { len: 1000 },
                true,
                ColumnDefault::None,
            ),
        ],
        vec![0],
        None,
    )
}

/// `name (id INT PRIMARY KEY)`.
fn ids(name: &str) -> TableDef {
    table(
        name,
        vec![col("id", INT, false, ColumnDefault::None)],
        vec![0],
        None,
    )
}

/// An engine in `dir` (synced as `sync` says) with database `d` holding `r`, `p` and `e`, and
/// an autocommit session on it.
pub(crate) fn sample_engine(dir: &std::path::Path, sync: SyncPolicy) -> (Engine, Session) {
    let mut cfg = EngineConfig::new(1);
    cfg.sync = sync;
    cfg.snapshot_every = 0;
    let (engine, _) = Engine::open(dir, cfg).expect("open");
    let mut s = engine.session();
    s.create_database("d", false).expect("create database");
    for def in [ring_r(), plain_p(), ids("e")] {
        s.create_table(def, false).expect("create table");
    }
    (engine, s)
}

fn def(s: &Session, name: &str) -> TableDef {
    s.table_def(Some("d"), name).expect("table")
}

/// `INSERT INTO r (u, v) VALUES (u, v)`.
pub(crate) fn insert_r(s: &mut Session, u: i64, v: &str) {
    let t = def(s, "r");
    s.statement(|s| {
        s.insert(
            &t,
            &[0, 3],
            vec![vec![Value::Int(u), Value::Text(v.into())]],
            InsertMode::Insert,
        )
    })
    .expect("insert into r");
}

/// `INSERT INTO p VALUES (id, v)`.
pub(crate) fn insert_p(s: &mut Session, id: i64, v: &str) {
    let t = def(s, "p");
    s.statement(|s| {
        s.insert(
            &t,
            &[0, 1],
            vec![vec![Value::Int(id), Value::Text(v.into())]],
            InsertMode::Insert,
        )
    })
    .expect("insert into p");
}

/// `INSERT INTO name VALUES (id), ...` on a table of `id` alone.
pub(crate) fn insert_ids(s: &mut Session, name: &str, ids: &[i64]) {
    let t = def(s, name);
    let rows = ids.iter().map(|&i| vec![Value::Int(i)]).collect();
    s.statement(|s| s.insert(&t, &[0], rows, InsertMode::Insert))
        .expect("insert ids");
}

fn id_of(row: &[Value]) -> i64 {
    match row[0] {
        Value::Int(i) => i,
        ref other => panic!("id {other:?}"),
    }
}

/// `UPDATE p SET v = v WHERE id < below`.
pub(crate) fn update_p_below(s: &mut Session, below: i64, v: &str) {
    let t = def(s, "p");
    s.statement(|s| {
        s.update(
            &t,
            &[1],
            &mut |row| Ok(id_of(row) < below),
            &mut |_| Ok(vec![Value::Text(v.into())]),
            None,
        )
    })
    .expect("update p");
}

/// `DELETE FROM p WHERE id >= from`.
pub(crate) fn delete_p_from(s: &mut Session, from: i64) {
    let t = def(s, "p");
    s.statement(|s| s.delete_where(&t, &mut |row| Ok(id_of(row) >= from), None))
        .expect("delete from p");
}

/// `ALTER TABLE p ADD COLUMN z INT DEFAULT 7`.
pub(crate) fn alter_p_add_z(s: &mut Session) {
    let mut t = def(s, "p");
    t.columns
        .push(col("z", INT, true, ColumnDefault::Value(Value::Int(7))));
    s.statement(|s| {
        s.alter_table(t, &mut |row, _meta| {
            let mut row = row.to_vec();
            row.push(Value::Int(7));
            Ok(Some(row))
        })
    })
    .expect("alter p");
}

/// `DROP TABLE name`.
pub(crate) fn drop_table(s: &mut Session, name: &str) {
    s.statement(|s| s.drop_table(Some("d"), name, false))
        .expect("drop table");
}

/// `CREATE TABLE name (id INT PRIMARY KEY)`.
pub(crate) fn create_ids(s: &mut Session, name: &str) {
    s.statement(|s| s.create_table(ids(name), false))
        .expect("create table");
}
