//! The replication scenarios of RonDB's ndb_rpl_ring_buffer test, as tests of our own: SQL on
//! a primary, the applier replaying its binlog on a replica, and the same reads on both sides.

use std::time::Duration;

use binlog_format::SyncPolicy;
use ringrep_applier::verify::{verify, VerifyOptions};
use ringrep_applier::{Applier, BinlogDirSource};
use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

struct Pair {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    primary: Engine,
    replica: Engine,
    applier: Applier,
    source: BinlogDirSource,
    p: SqlSession,
    r: SqlSession,
    rt: tokio::runtime::Runtime,
}

impl Pair {
    fn new() -> Pair {
        let (pd, rd) = (
            tempfile::tempdir().expect("tempdir"),
            tempfile::tempdir().expect("tempdir"),
        );
        let mut pc = EngineConfig::new(1);
        pc.sync = SyncPolicy::Never;
        let mut rc = EngineConfig::new(2);
        rc.sync = SyncPolicy::Never;
        rc.read_only = true;
        let primary = Engine::open(pd.path(), pc).expect("primary").0;
        let replica = Engine::open(rd.path(), rc).expect("replica").0;
        let applier = Applier::new(&replica).expect("applier");
        let source = BinlogDirSource::open(&primary.binlog_dir(), 1, primary.notifier());
        let (p, r) = (SqlSession::new(&primary), SqlSession::new(&replica));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        Pair {
            _dirs: (pd, rd),
            primary,
            replica,
            applier,
            source,
            p,
            r,
            rt,
        }
    }

    /// Runs statements on the primary (each must succeed).
    fn on_primary(&mut self, sql: &str) {
        for (stmt, res) in ringrep_sql::split_statements(sql)
            .iter()
            .zip(self.p.execute_all(sql))
        {
            if let Err(e) = res {
                panic!("primary: {stmt}: {e}");
            }
        }
    }

    /// Applies everything the primary committed so far.
    fn sync(&mut self) {
        let target = self.primary.last_seq();
        if ringrep_applier::applier::read_position(&self.replica, 1).map_or(0, |p| p.last_seq)
            >= target
        {
            return;
        }
        let (_tx, stop) = tokio::sync::watch::channel(false);
        let (applier, source) = (&mut self.applier, &mut self.source);
        let applied = self
            .rt
            .block_on(async {
                applier
                    .run(
                        source,
                        Some(target),
                        false,
                        Duration::from_secs(5),
                        &mut |_, _| {},
                        &stop,
                    )
                    .await
            })
            .expect("apply");
        assert_eq!(
            applied.max(
                ringrep_applier::applier::read_position(&self.replica, 1).map_or(0, |p| p.last_seq)
            ),
            target
        );
    }

    fn rows(s: &mut SqlSession, sql: &str) -> Vec<Vec<Option<String>>> {
        match s.execute(sql) {
            Ok(Outcome::Rows(rs)) => rs.text_rows(),
            other => panic!("{sql}: {other:?}"),
        }
    }

    /// The same SELECT on both sides after syncing; returns the replica's rows.
    fn same(&mut self, sql: &str) -> Vec<Vec<Option<String>>> {
        self.sync();
        let p = Self::rows(&mut self.p, sql);
        let r = Self::rows(&mut self.r, sql);
        assert_eq!(p, r, "primary and replica differ for {sql}");
        r
    }

    fn converged(&mut self) {
        self.sync();
        let report = verify(
            &self.primary,
            &self.replica,
            &VerifyOptions::default(),
            &mut |_| {},
        );
        assert!(report.converged, "{}", report.text());
    }
}

fn text(rows: &[Vec<Option<String>>]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|v| v.clone().unwrap_or_else(|| "NULL".into()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

const RB: &str = "CREATE TABLE test.rb (client_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), event_data VARCHAR(100), PRIMARY KEY (client_id, ring_idx)) ENGINE=NDB COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=4'";

#[test]
fn ddl_inserts_wraps_prefixes_and_meta_rows_replicate() {
    let mut t = Pair::new();
    t.on_primary(RB);
    let show = t.same("SHOW CREATE TABLE test.rb");
    assert!(show[0][1]
        .as_deref()
        .is_some_and(|s| s.contains("MAX_ROWS_PER_PK=4")));
    t.on_primary("INSERT INTO test.rb (client_id, event_data) VALUES (1, 'ev_A'); INSERT INTO test.rb (client_id, event_data) VALUES (1, 'ev_B'); INSERT INTO test.rb (client_id, event_data) VALUES (1, 'ev_C')");
    assert_eq!(text(&t.same("SELECT client_id, ring_idx, event_data FROM test.rb WHERE client_id = 1 ORDER BY ring_idx")), ["1 1 ev_A", "1 2 ev_B", "1 3 ev_C"]);
    // Wrapping: overwrites arrive as row writes.
    t.on_primary("INSERT INTO test.rb (client_id, event_data) VALUES (1, 'ev_D'); INSERT INTO test.rb (client_id, event_data) VALUES (1, 'ev_E'); INSERT INTO test.rb (client_id, event_data) VALUES (1, 'ev_F')");
    assert_eq!(text(&t.same("SELECT client_id, ring_idx, event_data FROM test.rb WHERE client_id = 1 ORDER BY ring_idx")), ["1 1 ev_E", "1 2 ev_F", "1 3 ev_C", "1 4 ev_D"]);
    // Several prefixes and a bulk insert.
    t.on_primary("INSERT INTO test.rb (client_id, event_data) VALUES (2, 'a'), (3, 'b'), (2, 'c'), (2, 'd'), (2, 'e'), (2, 'f')");
    assert_eq!(text(&t.same("SELECT client_id, ring_idx, event_data FROM test.rb WHERE client_id IN (2, 3) ORDER BY client_id, ring_idx")), ["2 1 f", "2 2 c", "2 3 d", "2 4 e", "3 1 b"]);
    // Meta rows on the replica equal the primary's.
    t.on_primary("SET ndb_ring_buffer_show_meta = ON");
    t.r.execute("SET ndb_ring_buffer_show_meta = ON")
        .expect("set");
    assert_eq!(
        text(&t.same(
            "SELECT client_id, HEX(ring_meta) FROM test.rb WHERE ring_idx = 0 ORDER BY client_id"
        )),
        [
            "1 0100000003000000040000000000000006000000000000000000000000000000",
            "2 0100000002000000040000000000000005000000000000000000000000000000",
            "3 0100000002000000010000000000000001000000000000000000000000000000",
        ]
    );
    t.converged();
}

#[test]
fn unsigned_decimals_and_sized_floats_replicate_with_their_declaration() {
    let mut t = Pair::new();
    t.on_primary("CREATE TABLE test.prices (id INT PRIMARY KEY, price DECIMAL(10,2) UNSIGNED, ratio FLOAT(7,4), big DOUBLE UNSIGNED)");
    t.on_primary("INSERT INTO test.prices VALUES (1, 19.99, 3.14159, 2.5)");
    let show = t.same("SHOW CREATE TABLE test.prices");
    assert_eq!(
        show[0][1].as_deref(),
        Some(
            "CREATE TABLE `prices` (\n  `id` int NOT NULL,\n  `price` decimal(10,2) unsigned DEFAULT NULL,\n  `ratio` float(7,4) DEFAULT NULL,\n  `big` double unsigned DEFAULT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=ndbcluster DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"
        )
    );
    assert_eq!(
        text(&t.same("SELECT * FROM test.prices")),
        ["1 19.99 3.1416 2.5"]
    );
    t.converged();
}

/// TIME and BIT columns replicate (new value tags in the binlog), in a ring's prefix key and
/// as its data, overwrites included, and the verifier compares them.
#[test]
fn time_and_bit_columns_replicate_in_keys_and_rows() {
    let mut t = Pair::new();
    t.on_primary("CREATE TABLE test.shifts (who BIT(4) NOT NULL, starts TIME(3) NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), took TIME, flags BIT(12), PRIMARY KEY (who, starts, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=2'");
    t.on_primary("INSERT INTO test.shifts (who, starts, took, flags) VALUES (b'101', '-01:00:00.5', '838:59:59', b'101000000001'), (5, '-01:00:00.5', '-1 02:03:04', 4095), (5, '-01:00:00.5', '00:00:01', 0), (0b1111, '12:00', NULL, x'0a')");
    t.on_primary("CREATE TABLE test.plain_tb (id INT PRIMARY KEY, t TIME(6), b BIT(64))");
    t.on_primary("INSERT INTO test.plain_tb VALUES (1, '-838:59:59', 18446744073709551615), (2, '00:00:00.000001', 0)");
    t.on_primary("UPDATE test.plain_tb SET t = '-00:00:00.5', b = b - 1 WHERE id = 1");
    assert_eq!(
        text(&t.same("SELECT who + 0, starts, ring_idx, took, BIN(flags) FROM test.shifts ORDER BY who, starts, ring_idx")),
        [
            "5 -01:00:00.500 1 00:00:01 0",
            "5 -01:00:00.500 2 -26:03:04 111111111111",
            "15 12:00:00.000 1 NULL 1010",
        ]
    );
    assert_eq!(
        text(&t.same("SELECT id, t, b + 0 FROM test.plain_tb ORDER BY id")),
        [
            "1 -00:00:00.500000 18446744073709551614",
            "2 00:00:00.000001 0",
        ]
    );
    t.converged();
}

#[test]
fn column_comments_replicate_with_the_definition() {
    let mut t = Pair::new();
    t.on_primary("CREATE TABLE test.notes (id INT PRIMARY KEY COMMENT 'the key', body TEXT)");
    t.on_primary("ALTER TABLE test.notes MODIFY body TEXT COMMENT 'it''s the body'");
    assert_eq!(
        text(&t.same("SELECT COLUMN_NAME, COLUMN_COMMENT FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'notes' ORDER BY ORDINAL_POSITION")),
        ["id the key", "body it's the body"]
    );
    t.converged();
}

#[test]
fn updates_deletes_truncate_and_reinserts_replicate() {
    let mut t = Pair::new();
    t.on_primary(RB);
    t.on_primary("INSERT INTO test.rb (client_id, event_data) VALUES (1, 'a'), (1, 'b'), (2, 'c')");
    // UPDATE as a write (the default) and as an update event.
    t.on_primary("UPDATE test.rb SET event_data = 'upd' WHERE client_id = 1 AND ring_idx = 2");
    t.on_primary("SET ndb_log_update_as_write = OFF; UPDATE test.rb SET event_data = 'upd2' WHERE client_id = 2; SET ndb_log_update_as_write = ON");
    assert_eq!(
        text(&t.same(
            "SELECT client_id, ring_idx, event_data FROM test.rb ORDER BY client_id, ring_idx"
        )),
        ["1 1 a", "1 2 upd", "2 1 upd2"]
    );
    // A prefix delete removes the meta row too; the next insert starts a new ring at slot 1.
    t.on_primary("DELETE FROM test.rb WHERE client_id = 1");
    t.on_primary("INSERT INTO test.rb (client_id, event_data) VALUES (1, 'fresh')");
    assert_eq!(
        text(&t.same("SELECT client_id, ring_idx, event_data FROM test.rb WHERE client_id = 1")),
        ["1 1 fresh"]
    );
    // TRUNCATE, then re-insert after truncate.
    t.on_primary("TRUNCATE TABLE test.rb");
    assert!(t.same("SELECT * FROM test.rb").is_empty());
    t.on_primary("INSERT INTO test.rb (client_id, event_data) VALUES (5, 'after_truncate')");
    assert_eq!(
        text(&t.same("SELECT client_id, ring_idx, event_data FROM test.rb")),
        ["5 1 after_truncate"]
    );
    t.converged();
}

/// Text keys compare without case or accents on both sides: a ring whose prefix was written as
/// 'Bob', 'bob' and 'BÖB' is one ring on the replica too, an UPDATE that changes only a key's
/// case updates the row in place, and the verifier finds the nodes equal.
#[test]
fn text_keys_in_mixed_case_replicate_as_one_key() {
    let mut t = Pair::new();
    t.on_primary("CREATE TABLE test.tr (who VARCHAR(10) NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), v VARCHAR(10), PRIMARY KEY (who, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=2'");
    t.on_primary("INSERT INTO test.tr (who, v) VALUES ('Bob', 'a'); INSERT INTO test.tr (who, v) VALUES ('bob', 'b'); INSERT INTO test.tr (who, v) VALUES ('BÖB', 'c')");
    assert_eq!(
        text(&t.same("SELECT who, ring_idx, v FROM test.tr ORDER BY ring_idx")),
        ["BÖB 1 c", "bob 2 b"]
    );
    t.on_primary("CREATE TABLE test.tp (name VARCHAR(10) PRIMARY KEY, n INT); INSERT INTO test.tp VALUES ('Ann', 1), ('Eve', 2)");
    t.on_primary("UPDATE test.tp SET name = 'ANN', n = 3 WHERE name = 'ann'");
    t.on_primary("SET ndb_log_update_as_write = OFF; UPDATE test.tp SET name = 'éve' WHERE name = 'EVE'; SET ndb_log_update_as_write = ON");
    assert_eq!(
        text(&t.same("SELECT name, n FROM test.tp ORDER BY name")),
        ["ANN 3", "éve 2"]
    );
    t.converged();
    t.on_primary("DELETE FROM test.tr WHERE who = 'bob'; DELETE FROM test.tp WHERE name = 'ann'");
    assert!(t.same("SELECT * FROM test.tr").is_empty());
    assert_eq!(text(&t.same("SELECT name FROM test.tp")), ["éve"]);
    t.converged();
}

#[test]
fn a_replica_that_lost_a_row_first_still_converges_through_overwrites() {
    let mut t = Pair::new();
    t.on_primary("CREATE TABLE test.rb_uaw (client_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), val VARCHAR(50), PRIMARY KEY (client_id, ring_idx)) ENGINE=NDB COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=1'");
    t.on_primary("INSERT INTO test.rb_uaw (client_id, val) VALUES (1, 'first')");
    t.sync();
    // The replica removes the row on its own (as its TTL purge would).
    let def = t.replica.table_def("test", "rb_uaw").expect("table");
    let mut local = t.replica.session();
    local.vars.applier = true;
    local
        .raw_delete(
            &def,
            vec![binlog_format::Value::Int(1), binlog_format::Value::Int(1)],
        )
        .expect("local delete");
    // The primary overwrites the slot with log_update_as_write off: still a row write, so the
    // replica gets the row back and the meta row moves on.
    t.on_primary("SET ndb_log_update_as_write = OFF; INSERT INTO test.rb_uaw (client_id, val) VALUES (1, 'wrap_2')");
    t.on_primary("SET ndb_ring_buffer_show_meta = ON");
    t.r.execute("SET ndb_ring_buffer_show_meta = ON")
        .expect("set");
    assert_eq!(
        text(&t.same(
            "SELECT client_id, ring_idx, val, HEX(ring_meta) FROM test.rb_uaw ORDER BY ring_idx"
        )),
        [
            "1 0 NULL 0100000001000000010000000000000002000000000000000000000000000000",
            "1 1 wrap_2 NULL",
        ]
    );
    // Deleting a row the replica no longer has is not an error either.
    local
        .raw_delete(
            &def,
            vec![binlog_format::Value::Int(1), binlog_format::Value::Int(1)],
        )
        .expect("local delete");
    t.on_primary("DELETE FROM test.rb_uaw WHERE client_id = 1");
    t.converged();
}

#[test]
fn triggers_replicate_as_rows_and_never_fire_on_the_replica() {
    let mut t = Pair::new();
    t.on_primary(RB);
    t.on_primary(
        "CREATE TABLE test.audit (n INT AUTO_INCREMENT PRIMARY KEY, client_id INT, ring_idx INT)",
    );
    t.on_primary("CREATE TRIGGER test.rb_ai AFTER INSERT ON test.rb FOR EACH ROW INSERT INTO test.audit (client_id, ring_idx) VALUES (NEW.client_id, NEW.ring_idx)");
    t.on_primary("CREATE TRIGGER test.rb_bi BEFORE INSERT ON test.rb FOR EACH ROW SET NEW.event_data = UPPER(NEW.event_data)");
    t.on_primary("INSERT INTO test.rb (client_id, event_data) VALUES (1, 'a'), (1, 'b'), (2, 'c')");
    // The trigger is a row of mysql.ringrep_triggers on both sides; what it wrote arrives as
    // rows of their own, once: the applier writes rows, it runs no SQL, so nothing fires.
    assert_eq!(
        text(&t.same("SELECT TRIGGER_NAME, ACTION_TIMING FROM information_schema.TRIGGERS ORDER BY TRIGGER_NAME")),
        ["rb_ai AFTER", "rb_bi BEFORE"]
    );
    assert_eq!(
        text(&t.same("SELECT n, client_id, ring_idx FROM test.audit ORDER BY n")),
        ["1 1 1", "2 1 2", "3 2 1"]
    );
    assert_eq!(
        text(&t.same(
            "SELECT client_id, ring_idx, event_data FROM test.rb ORDER BY client_id, ring_idx"
        )),
        ["1 1 A", "1 2 B", "2 1 C"]
    );
    t.converged();
}

#[test]
fn the_replica_refuses_sql_writes() {
    let mut t = Pair::new();
    t.on_primary(RB);
    t.sync();
    let err =
        t.r.execute("INSERT INTO test.rb (client_id, event_data) VALUES (1, 'x')")
            .expect_err("read only");
    assert_eq!((err.code, err.sqlstate), (1290, "HY000"));
    let err =
        t.r.execute("CREATE TABLE test.t2 (a INT PRIMARY KEY)")
            .expect_err("read only");
    assert_eq!(err.code, 1290);
    // Its apply status is readable with SQL.
    let rows = Pair::rows(
        &mut t.r,
        "SELECT server_id, last_seq FROM mysql.ringrep_apply_status",
    );
    assert_eq!(text(&rows), [format!("1 {}", t.primary.last_seq())]);
}

#[test]
fn a_replica_directory_stays_read_only_whoever_opens_it() {
    let rd = tempfile::tempdir().expect("tempdir");
    {
        let mut rc = EngineConfig::new(2);
        rc.read_only = true;
        let replica = Engine::open(rd.path(), rc).expect("replica").0;
        Applier::new(&replica).expect("applier");
    }
    // Reopened with a writable configuration (as `ringrep-source sql` would), it still
    // refuses client writes: it is a replica.
    let replica = Engine::open(rd.path(), EngineConfig::new(2))
        .expect("reopen")
        .0;
    assert!(replica.is_read_only());
    let err = SqlSession::new(&replica)
        .execute("CREATE DATABASE x")
        .expect_err("read only");
    assert_eq!(err.code, 1290);
}
