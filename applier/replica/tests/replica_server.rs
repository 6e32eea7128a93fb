//! The replica node as clients see it: `ringrep-applier serve --listen` follows a primary
//! served in this process; clients read from it over the MySQL protocol, their writes are
//! refused with MySQL's read-only error, and the apply status is a table they can query.

use ringrep_testkit::{converge, node};

use std::path::Path;
use std::time::{Duration, Instant};

use binlog_format::SyncPolicy;
use mysql_async::prelude::*;
use node::{code, connect, runtime, terminate, USER_EVENTS};
use ringrep_engine::{Engine, EngineConfig};
use ringrep_server::{Server, ServerSettings};

/// The spec's examples (`rondb-ring-buffer-tables.md`) with MAX_ROWS_PER_PK=3.
fn spec_examples() -> Vec<String> {
    vec![
        format!("{USER_EVENTS} PARTITION BY KEY(user_id)"),
        "INSERT INTO user_events (user_id, event_type, payload) VALUES (1, 'click', 'A')".into(),
        "INSERT INTO user_events (user_id, event_type, payload) VALUES (1, 'click', 'B'), (1, 'click', 'C'), (2, 'click', 'X')".into(),
        "INSERT INTO user_events (user_id, event_type, payload) VALUES (1, 'click', 'D')".into(),
        "INSERT INTO user_events (user_id, event_type, payload) VALUES (1, 'click', 'E')".into(),
        "DELETE FROM user_events WHERE user_id = 2".into(),
    ]
}

/// A statement through the command-line client: its output, or `None` without a client
/// (outside CI only).
fn cli(addr: std::net::SocketAddr, sql: &str) -> Option<String> {
    let client = node::mysql_client()?;
    let (ok, out, err) = node::run_client(client, addr, None, sql);
    assert!(ok, "{err}");
    Some(out)
}

/// `ringrep-applier verify` of two nodes or data directories: its exit code and output.
fn verify(primary: &str, replica: &str) -> (Option<i32>, String) {
    converge::verify_urls(
        Path::new(env!("CARGO_BIN_EXE_ringrep-applier")),
        primary,
        replica,
    )
}

#[test]
fn a_replica_serves_reads_refuses_writes_and_shows_its_position() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = runtime();
    let mut cfg = EngineConfig::new(1);
    cfg.sync = SyncPolicy::Never;
    let (primary, _) = Engine::open(&dir.path().join("primary"), cfg).expect("primary");
    let server = rt
        .block_on(Server::bind(primary.clone(), &ServerSettings::local(0)))
        .expect("bind");
    let paddr = server.local_addr().expect("addr");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = rt.spawn(server.run(async move {
        let _ = stop_rx.await;
    }));

    let mut replica = node::binlog_replica(
        Path::new(env!("CARGO_BIN_EXE_ringrep-applier")),
        &dir.path().join("replica"),
        &primary.binlog_dir(),
    );

    rt.block_on(async {
        let mut p = connect(paddr, Some("test")).await;
        p.query_drop("CREATE TABLE ev (k INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(32), v VARCHAR(20), PRIMARY KEY (k, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=2'")
            .await
            .expect("create");
        for v in ["a", "b", "c"] {
            p.exec_drop("INSERT INTO ev (k, v) VALUES (?, ?)", (7, v))
                .await
                .expect("insert");
        }
        let want: Vec<(i32, i32, String)> = p
            .query("SELECT k, ring_idx, v FROM ev ORDER BY ring_idx")
            .await
            .expect("primary rows");
        assert_eq!(want, vec![(7, 1, "c".into()), (7, 2, "b".into())]);
        let primary_seq = primary.last_seq();

        // The replica catches up and serves the same rows.
        let mut r = connect(replica.addr, None).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got: Result<Vec<(i32, i32, String)>, _> =
                r.query("SELECT k, ring_idx, v FROM test.ev ORDER BY ring_idx").await;
            if got.as_ref().ok() == Some(&want) {
                break;
            }
            assert!(Instant::now() < deadline, "replica never caught up: {got:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Its position is a table.
        let status: Vec<(u32, u64)> = r
            .query("SELECT server_id, last_seq FROM mysql.ringrep_apply_status")
            .await
            .expect("apply status");
        assert_eq!(status, vec![(1, primary_seq)]);

        // Client writes are refused with MySQL's read-only error, and change nothing.
        for sql in [
            "INSERT INTO test.ev (k, v) VALUES (8, 'x')",
            "DELETE FROM test.ev WHERE k = 7",
            "CREATE TABLE test.t2 (id INT PRIMARY KEY)",
            "UPDATE mysql.ringrep_apply_status SET last_seq = 0",
        ] {
            let e = r.query_drop(sql).await.expect_err(sql);
            assert_eq!(code(&e), 1290, "{sql}: {e}");
            // Everyone is refused, SUPER too: super_read_only's message, as the flags show.
            assert!(e.to_string().contains("--super-read-only"), "{sql}: {e}");
        }
        let flags: Option<(i64, i64)> = r
            .query_first("SELECT @@read_only, @@super_read_only")
            .await
            .expect("flags");
        assert_eq!(flags, Some((1, 1)));
        // Only a promotion opens a replica to clients.
        for sql in [
            "SET GLOBAL read_only = OFF",
            "SET GLOBAL super_read_only = 0",
        ] {
            let e = r.query_drop(sql).await.expect_err(sql);
            assert_eq!(code(&e), 1231, "{sql}: {e}");
        }
        r.query_drop("SET GLOBAL super_read_only = ON")
            .await
            .expect("a fence for after a promotion");
        r.query_drop("SET GLOBAL read_only = OFF")
            .await
            .expect_err("still a replica");
        let e = r
            .exec_drop("INSERT INTO test.ev (k, v) VALUES (?, ?)", (8, "x"))
            .await
            .expect_err("prepared insert");
        assert_eq!(code(&e), 1290);
        let n: i64 = r
            .query_first("SELECT COUNT(*) FROM test.ev")
            .await
            .expect("count")
            .expect("row");
        assert_eq!(n, 2);

        // The applier's writes still go through.
        p.exec_drop("INSERT INTO ev (k, v) VALUES (?, ?)", (9, "z"))
            .await
            .expect("insert");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let n: Option<i64> = r
                .query_first("SELECT COUNT(*) FROM test.ev WHERE k = 9")
                .await
                .expect("count");
            if n == Some(1) {
                break;
            }
            assert!(Instant::now() < deadline, "the applier stopped applying");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });

    // The spec's examples on the primary, read back from the replica with the mariadb client.
    rt.block_on(async {
        let mut p = connect(paddr, Some("test")).await;
        for sql in spec_examples() {
            p.query_drop(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    });
    let seq = primary.last_seq();
    let deadline = Instant::now() + Duration::from_secs(30);
    while rt.block_on(async {
        let mut r = connect(replica.addr, None).await;
        let s: Option<(u32, u64)> = r
            .query_first("SELECT server_id, last_seq FROM mysql.ringrep_apply_status")
            .await
            .expect("status");
        s.map_or(0, |s| s.1)
    }) < seq
    {
        assert!(
            Instant::now() < deadline,
            "replica did not apply the examples"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let read = "SELECT user_id, ring_idx, event_type, payload FROM test.user_events ORDER BY user_id, ring_idx";
    if let (Some(on_primary), Some(on_replica)) = (cli(paddr, read), cli(replica.addr, read)) {
        assert_eq!(on_replica, on_primary);
        // 1 has C, D, E in slots 3, 1, 2 (A and B overwritten); prefix 2 was deleted.
        assert_eq!(
            on_replica,
            "user_id\tring_idx\tevent_type\tpayload\n1\t1\tclick\tD\n1\t2\tclick\tE\n1\t3\tclick\tC\n"
        );
    }

    // The verifier reads both nodes over the MySQL protocol.
    let url = |a: std::net::SocketAddr| format!("mysql://root@{a}");
    let out = verify(&url(paddr), &url(replica.addr));
    assert_eq!(out.0, Some(0), "{}", out.1);
    assert!(out.1.contains("CONVERGED"), "{}", out.1);

    // With the replica stopped, a new primary row is missing from it, and the verifier
    // (primary over the protocol, replica as a data directory) names it.
    assert!(terminate(&mut replica).success());
    rt.block_on(async {
        let mut p = connect(paddr, Some("test")).await;
        p.exec_drop("INSERT INTO ev (k, v) VALUES (?, ?)", (11, "late"))
            .await
            .expect("insert");
    });
    let replica_dir = dir.path().join("replica");
    let out = verify(&url(paddr), replica_dir.to_str().expect("utf-8 path"));
    assert_eq!(out.0, Some(1), "{}", out.1);
    assert!(out.1.contains("k=11"), "{}", out.1);
    let _ = stop_tx.send(());
    rt.block_on(served).expect("join").expect("server run");
}

/// A node served in this process on a loopback port: its engine, address, and the sender
/// that stops it.
fn serve_node(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    server_id: u32,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<ringrep_server::ServeReport>>,
) {
    let mut cfg = EngineConfig::new(server_id);
    cfg.sync = SyncPolicy::Never;
    let (engine, _) = Engine::open(dir, cfg).expect("engine");
    let server = rt
        .block_on(Server::bind(engine, &ServerSettings::local(0)))
        .expect("bind");
    let addr = server.local_addr().expect("addr");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = rt.spawn(server.run(async move {
        let _ = stop_rx.await;
    }));
    (addr, stop_tx, served)
}

#[test]
fn tables_without_a_primary_key_are_compared_as_multisets_over_the_protocol() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = runtime();
    let (a, stop_a, served_a) = serve_node(&rt, &dir.path().join("a"), 1);
    let (b, stop_b, served_b) = serve_node(&rt, &dir.path().join("b"), 2);
    let load = |addr, rows: &'static [(i32, &'static str)]| {
        rt.block_on(async move {
            let mut c = connect(addr, Some("test")).await;
            c.query_drop("CREATE TABLE np (k INT, v VARCHAR(10))")
                .await
                .expect("create");
            for &(k, v) in rows {
                c.exec_drop("INSERT INTO np VALUES (?, ?)", (k, v))
                    .await
                    .expect("insert");
            }
        })
    };
    // The same rows, a duplicate among them, written in another order on each node: their
    // hidden row ids differ, the tables do not.
    load(a, &[(1, "x"), (2, "y"), (1, "x"), (3, "z")]);
    load(b, &[(3, "z"), (1, "x"), (2, "y"), (1, "x")]);
    let url = |addr: std::net::SocketAddr| format!("mysql://root@{addr}");
    let out = verify(&url(a), &url(b));
    assert_eq!(out.0, Some(0), "{}", out.1);
    assert!(out.1.contains("CONVERGED"), "{}", out.1);

    // One more copy of a row on one side is one difference, not a shift of the rows after it.
    rt.block_on(async {
        let mut c = connect(a, Some("test")).await;
        c.exec_drop("INSERT INTO np VALUES (?, ?)", (1, "x"))
            .await
            .expect("insert");
    });
    let out = verify(&url(a), &url(b));
    assert_eq!(out.0, Some(1), "{}", out.1);
    assert!(
        out.1.contains("missing 1, extra 0, different 0"),
        "{}",
        out.1
    );
    let named = out
        .1
        .lines()
        .filter(|l| l.contains("__ringrep_row_id="))
        .count();
    assert_eq!(named, 1, "{}", out.1);

    // A server against a data directory would name those rows in two ways: refused.
    let _ = stop_b.send(());
    rt.block_on(served_b).expect("join").expect("server b");
    let out = verify(&url(a), dir.path().join("b").to_str().expect("utf-8 path"));
    assert_eq!(out.0, Some(2), "{}", out.1);
    assert!(out.1.contains("test.np has no primary key"), "{}", out.1);
    let _ = stop_a.send(());
    rt.block_on(served_a).expect("join").expect("server a");
}

/// TIME and BIT columns read back over the protocol by the verifier (keyed by them, so the
/// table is read whole): equal rows converge, a changed TIME or BIT is named.
#[test]
fn time_and_bit_columns_are_compared_over_the_protocol() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = runtime();
    let (a, stop_a, served_a) = serve_node(&rt, &dir.path().join("a"), 1);
    let (b, stop_b, served_b) = serve_node(&rt, &dir.path().join("b"), 2);
    for addr in [a, b] {
        rt.block_on(async move {
            let mut c = connect(addr, Some("test")).await;
            c.query_drop("CREATE TABLE tb (t TIME(3) NOT NULL, b BIT(12) NOT NULL, v TIME, w BIT(64), PRIMARY KEY (t, b))")
                .await
                .expect("create");
            c.query_drop("INSERT INTO tb VALUES ('-838:59:59', 0, '12:34:56', 18446744073709551615), ('-00:00:00.5', b'111111111111', NULL, 0), ('01:02:03.004', 5, '-1 02:03:04', NULL)")
                .await
                .expect("insert");
        });
    }
    let url = |addr: std::net::SocketAddr| format!("mysql://root@{addr}");
    let out = verify(&url(a), &url(b));
    assert_eq!(out.0, Some(0), "{}", out.1);
    assert!(out.1.contains("CONVERGED"), "{}", out.1);
    rt.block_on(async {
        let mut c = connect(b, Some("test")).await;
        c.query_drop("UPDATE tb SET v = '12:34:57', w = 1 WHERE b = 0")
            .await
            .expect("update");
    });
    let out = verify(&url(a), &url(b));
    assert_eq!(out.0, Some(1), "{}", out.1);
    assert!(out.1.contains("different 1"), "{}", out.1);
    for (stop, served) in [(stop_a, served_a), (stop_b, served_b)] {
        let _ = stop.send(());
        rt.block_on(served).expect("join").expect("server");
    }
}

/// Two servers are compared a page at a time (`--chunk-rows 3` here, pages far smaller than
/// the tables): every missing, extra and different row is named, wherever it falls, at the
/// start, in the middle, at a page's edge or past the other side's last row, with a key of
/// two columns (one of them text) and a ring table's meta rows.
#[test]
fn two_servers_are_compared_page_by_page_naming_every_difference() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = runtime();
    let (a, stop_a, served_a) = serve_node(&rt, &dir.path().join("a"), 1);
    let (b, stop_b, served_b) = serve_node(&rt, &dir.path().join("b"), 2);
    let load = |addr, changes: &'static [&'static str], ring_inserts: usize| {
        rt.block_on(async move {
            let mut c = connect(addr, Some("test")).await;
            c.query_drop(
                "CREATE TABLE kv (a INT NOT NULL, b VARCHAR(10) NOT NULL, v VARCHAR(20), PRIMARY KEY (a, b))",
            )
            .await
            .expect("create kv");
            c.query_drop(
                "CREATE TABLE ring (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), payload VARCHAR(20), PRIMARY KEY (user_id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'",
            )
            .await
            .expect("create ring");
            for k in 1..=20 {
                for side in ["x", "Y"] {
                    c.exec_drop(
                        "INSERT INTO kv (a, b, v) VALUES (?, ?, ?)",
                        (k, side, format!("v{k}{side}")),
                    )
                    .await
                    .expect("insert kv");
                }
            }
            for user in 1..=4 {
                let n = if user == 2 { ring_inserts } else { 3 };
                for i in 0..n {
                    c.exec_drop(
                        "INSERT INTO ring (user_id, payload) VALUES (?, ?)",
                        (user, format!("p{i}")),
                    )
                    .await
                    .expect("insert ring");
                }
            }
            for sql in changes {
                c.query_drop(*sql).await.expect(sql);
            }
        })
    };
    load(a, &[], 4);
    load(
        b,
        &[
            "INSERT INTO kv (a, b, v) VALUES (0, 'a', 'first')",
            "DELETE FROM kv WHERE a = 3 AND b = 'x'",
            "INSERT INTO kv (a, b, v) VALUES (7, 'z', 'extra')",
            "UPDATE kv SET v = 'changed' WHERE a = 12 AND b = 'Y'",
            "DELETE FROM kv WHERE a = 20 AND b = 'Y'",
            "INSERT INTO kv (a, b, v) VALUES (21, 'a', 'past')",
        ],
        3,
    );
    let url = |addr: std::net::SocketAddr| format!("mysql://root@{addr}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringrep-applier"))
        .args(["verify", "--chunk-rows", "3", "--primary", &url(a)])
        .args(["--replica", &url(b)])
        .output()
        .expect("verify");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    for line in [
        "primary 40 rows, replica 41 rows",
        "missing 2, extra 3, different 1",
        "missing on replica (a=3, b=x)",
        "missing on replica (a=20, b=Y)",
        "extra on replica (a=0, b=a)",
        "extra on replica (a=7, b=z)",
        "extra on replica (a=21, b=a)",
        "different (a=12, b=Y): v",
        // The ring that took a fourth insert on one side: slot 1 overwritten, and its meta row.
        "different (user_id=2, ring_idx=0) (meta row): ring_meta",
        "different (user_id=2, ring_idx=1): payload",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    // Pages of 3 rows: 14 of kv's 40 rows on the primary, the last one empty.
    assert!(text.contains("41 rows, 14 chunks"), "{text}");

    // The same rows on both sides: converged, with pages of one row and of many.
    for chunk in ["1", "1000"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringrep-applier"))
            .args(["verify", "--chunk-rows", chunk, "--primary", &url(a)])
            .args(["--replica", &url(a)])
            .output()
            .expect("verify");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(text.contains("CONVERGED"), "{text}");
        // Equal CHECKSUM TABLE answers: each table one chunk, whatever the page size, and
        // no row read (pages of one row would be 41 chunks).
        for line in [
            "test.kv: primary 40 rows, replica 40 rows, 1 chunks (0 differ)",
            "test.ring: primary 16 rows, replica 16 rows, 1 chunks (0 differ)",
        ] {
            assert!(text.contains(line), "{line:?} not in:\n{text}");
        }
    }
    for (stop, served) in [(stop_a, served_a), (stop_b, served_b)] {
        let _ = stop.send(());
        rt.block_on(served).expect("join").expect("server");
    }
}
