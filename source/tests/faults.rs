//! Faults from outside, on real processes: a primary and a replica whose disk fills up (a
//! small tmpfs the test mounts; skipped with a message where it cannot). Clients get MySQL's
//! error for a full disk (1021), reads go on, nothing a client was told failed is ever seen,
//! and writes (or the replica's applying) succeed again once space is freed, without a
//! restart.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use ringrep_testkit::converge;
use ringrep_testkit::faults::SmallFs;
use ringrep_testkit::node::{self, code, connect, runtime, terminate, Node};

/// A tmpfs of `mib` MiB, or `None` (having said why) where it cannot be mounted.
fn small_fs(mib: u64) -> Option<SmallFs> {
    SmallFs::mount(mib)
        .map_err(|why| eprintln!("skipped: {why}"))
        .ok()
}

/// `ringrep-applier`, or `None` (having said why) when `cargo test` did not build it here.
fn applier() -> Option<std::path::PathBuf> {
    node::applier_next_to(Path::new(env!("CARGO_BIN_EXE_ringrep-source")))
}

fn start_primary(data_dir: &Path) -> Node {
    node::primary(Path::new(env!("CARGO_BIN_EXE_ringrep-source")), data_dir)
}

const TABLE: &str = "CREATE TABLE r (u INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
                     ring_meta VARBINARY(64), v VARCHAR(2000), PRIMARY KEY (u, ring_idx)) \
                     COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=100000'";

fn value(client: u32, n: u32) -> String {
    format!("{client}-{n:06}-{}", "p".repeat(1000))
}

/// What `SELECT v FROM r` gives, as a set.
async fn stored(addr: SocketAddr) -> BTreeSet<String> {
    let mut c = connect(addr, Some("test")).await;
    let rows: Vec<String> = c.query("SELECT v FROM r").await.expect("select");
    rows.into_iter().collect()
}

/// Inserts from `clients` connections until each has had `failures` refused inserts (or,
/// with `failures` 0, until each has `until_ok` acknowledged ones after its first try).
/// Returns what was acknowledged and every error code seen.
async fn load(
    addr: SocketAddr,
    clients: u32,
    first: u32,
    failures: usize,
) -> (Vec<String>, Vec<u16>) {
    let mut tasks = Vec::new();
    for client in 0..clients {
        tasks.push(tokio::spawn(async move {
            let mut c = connect(addr, Some("test")).await;
            let (mut acked, mut codes) = (Vec::new(), Vec::new());
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut n = first;
            while codes.len() < failures {
                assert!(Instant::now() < deadline, "the disk never filled");
                let v = value(client, n);
                n += 1;
                match c
                    .exec_drop("INSERT INTO r (u, v) VALUES (?, ?)", (client, &v))
                    .await
                {
                    Ok(()) => acked.push(v),
                    Err(e) => codes.push(code(&e)),
                }
            }
            (acked, codes)
        }));
    }
    let mut acked = Vec::new();
    let mut codes = Vec::new();
    for t in tasks {
        let (a, c) = t.await.expect("client");
        acked.extend(a);
        codes.extend(c);
    }
    (acked, codes)
}

/// Retries one insert per client until it succeeds (space was freed), then a few more.
async fn load_after(addr: SocketAddr, clients: u32, first: u32) -> Vec<String> {
    let mut acked = Vec::new();
    for client in 0..clients {
        let mut c = connect(addr, Some("test")).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut n = first;
        let mut ok = 0;
        while ok < 20 {
            let v = value(client, n);
            n += 1;
            match c
                .exec_drop("INSERT INTO r (u, v) VALUES (?, ?)", (client, &v))
                .await
            {
                Ok(()) => {
                    acked.push(v);
                    ok += 1;
                }
                Err(e) => {
                    assert_eq!(code(&e), 1021, "{e}");
                    assert!(ok == 0, "a write failed after writes succeeded again: {e}");
                    assert!(
                        Instant::now() < deadline,
                        "writes never succeeded again: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    acked
}

#[test]
fn a_primary_on_a_full_disk_refuses_writes_with_1021_and_recovers_without_restart() {
    let Some(fs) = small_fs(24) else {
        return;
    };
    let ballast = fs.ballast("ballast", 6);
    let data = fs.path.join("data");
    let mut primary = start_primary(&data);
    let rt = runtime();
    rt.block_on(async {
        connect(primary.addr, Some("test"))
            .await
            .query_drop(TABLE)
            .await
            .expect("create");
    });
    // Four clients fill the disk, and go on trying a while.
    let (mut acked, codes) = rt.block_on(load(primary.addr, 4, 0, 10));
    assert!(
        !acked.is_empty(),
        "nothing was acknowledged before the disk filled"
    );
    assert!(
        codes.iter().all(|&c| c == 1021),
        "a full disk is error 1021 and only that: {codes:?}"
    );
    // Reads go on, and show exactly what was acknowledged: nothing of a refused insert.
    let want: BTreeSet<String> = acked.iter().cloned().collect();
    assert_eq!(
        rt.block_on(stored(primary.addr)),
        want,
        "while the disk is full"
    );
    let (ok, out, err) = match node::mysql_client() {
        Some(client) => {
            node::run_client(client, primary.addr, Some("test"), "SELECT COUNT(*) FROM r")
        }
        None => (true, format!("COUNT(*)\n{}\n", want.len()), String::new()),
    };
    assert!(ok, "{err}");
    assert!(out.contains(&want.len().to_string()), "{out}");

    // Space is freed: writes succeed again, without a restart.
    std::fs::remove_file(&ballast).expect("free space");
    acked.extend(rt.block_on(load_after(primary.addr, 4, 100_000)));
    let want: BTreeSet<String> = acked.iter().cloned().collect();
    assert_eq!(
        rt.block_on(stored(primary.addr)),
        want,
        "after space was freed"
    );

    // And the data directory holds exactly that after a restart.
    assert!(terminate(&mut primary).success());
    let primary = start_primary(&data);
    assert_eq!(rt.block_on(stored(primary.addr)), want, "after a restart");
    drop(primary);
    drop(fs);
}

#[test]
fn a_replica_on_a_full_disk_pauses_and_resumes_when_space_is_freed() {
    let Some(applier) = applier() else {
        return;
    };
    let Some(fs) = small_fs(24) else {
        return;
    };
    let ballast = fs.ballast("ballast", 16);
    let pdir = tempfile::tempdir().expect("tempdir");
    let primary = start_primary(pdir.path());
    let mut replica = node::replica(&applier, &fs.path.join("replica"), primary.addr);
    let rt = runtime();
    // About 12 MiB of binlog on a small ring: more than the replica's 8 MiB free.
    rt.block_on(async {
        let mut c = connect(primary.addr, Some("test")).await;
        c.query_drop(
            "CREATE TABLE s (u INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
             ring_meta VARBINARY(64), v VARCHAR(9000), PRIMARY KEY (u, ring_idx)) \
             COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'",
        )
        .await
        .expect("create");
        for n in 0..150u32 {
            let rows: Vec<String> = (0..10)
                .map(|i| format!("({}, '{n}-{i}-{}')", i % 4, "q".repeat(8000)))
                .collect();
            c.query_drop(format!("INSERT INTO s (u, v) VALUES {}", rows.join(", ")))
                .await
                .expect("insert");
        }
    });
    let seq = rt
        .block_on(converge::query_u64(
            primary.addr,
            "SELECT @@ringrep_last_seq",
        ))
        .expect("seq");
    // The replica pauses on its full disk (and says so), rather than stopping.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match replica.log.recv_timeout(Duration::from_secs(1)) {
            Ok(line) if line.contains("replication paused") => {
                assert!(line.contains("Disk full"), "{line}");
                break;
            }
            _ => assert!(
                Instant::now() < deadline,
                "the replica never paused on its full disk"
            ),
        }
    }
    let status = rt.block_on(async {
        let mut c = connect(replica.addr, None).await;
        let row: mysql_async::Row = c
            .query_first("SHOW REPLICA STATUS")
            .await
            .expect("status")
            .expect("a row");
        row.get::<String, _>("Last_SQL_Error").unwrap_or_default()
    });
    assert!(
        status.contains("Disk full") && status.contains("paused"),
        "{status}"
    );
    // Reads go on meanwhile.
    assert!(rt
        .block_on(converge::query_u64(
            replica.addr,
            "SELECT COUNT(*) FROM test.s"
        ))
        .is_some());

    std::fs::remove_file(&ballast).expect("free space");
    converge::wait_applied(
        &rt,
        replica.addr,
        seq,
        Duration::from_secs(90),
        "after freeing space",
    );
    let (code, report) = converge::verify(&applier, primary.addr, replica.addr);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains("CONVERGED"), "{report}");
    let _ = terminate(&mut replica);
    drop(fs);
}

/// The heart of it: a reader that asks while a commit's fsync hangs is not shown that commit
/// (it waits), the fsync then fails, the writer is told so, and neither that reader, nor any
/// later one, nor a replica ever sees the row: neither one on the replication stream nor
/// one following the binlog directory, where the row's bytes were written before the fsync
/// failed. (The node is a test build: `SET GLOBAL debug` arms its failpoints.)
#[test]
fn a_commit_whose_fsync_fails_is_never_seen_by_a_reader_or_a_replica() {
    let Some(applier) = applier() else {
        return;
    };
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let ddir = tempfile::tempdir().expect("tempdir");
    let primary = start_primary(pdir.path());
    let replica = node::replica(&applier, rdir.path(), primary.addr);
    let follower = node::binlog_replica(&applier, ddir.path(), &pdir.path().join("binlog"));
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(primary.addr, Some("test")).await;
        c.query_drop(TABLE).await.expect("create");
        c.query_drop("INSERT INTO r (u, v) VALUES (1, 'kept')")
            .await
            .expect("insert");
        c.query_drop("SET GLOBAL debug = 'binlog::fsync=1*return(eio@1500)'")
            .await
            .expect("arm the failpoint");
        let writer = tokio::spawn(async move {
            c.query_drop("INSERT INTO r (u, v) VALUES (1, 'failed')")
                .await
        });
        // While that fsync hangs, a reader asks.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let asked = Instant::now();
        let mut reader = connect(primary.addr, Some("test")).await;
        let read: Result<Vec<String>, _> = reader.query("SELECT v FROM r").await;
        match &read {
            Ok(rows) => assert_eq!(rows, &["kept"], "a reader saw a commit that then failed"),
            Err(e) => assert_eq!(code(e), 1105, "{e}"),
        }
        assert!(
            asked.elapsed() >= Duration::from_millis(500),
            "the reader was answered while the commit it could see was not durable"
        );
        let e = writer.await.expect("writer").expect_err("the fsync failed");
        assert_eq!(code(&e), 1105, "{e}");
        let rows: Vec<String> = reader.query("SELECT v FROM r").await.expect("select");
        assert_eq!(rows, ["kept"]);
        reader
            .query_drop("INSERT INTO r (u, v) VALUES (1, 'after')")
            .await
            .expect("writes go on");
    });
    let seq = rt
        .block_on(converge::query_u64(
            primary.addr,
            "SELECT @@ringrep_last_seq",
        ))
        .expect("seq");
    for (name, node) in [("replica", &replica), ("directory follower", &follower)] {
        converge::wait_applied(&rt, node.addr, seq, Duration::from_secs(60), name);
        let rows: Vec<String> = rt.block_on(async {
            connect(node.addr, Some("test"))
                .await
                .query("SELECT v FROM r ORDER BY ring_idx")
                .await
                .expect("select")
        });
        assert_eq!(rows, ["kept", "after"], "the {name} had the failed commit");
        let (code, report) = converge::verify(&applier, primary.addr, node.addr);
        assert_eq!(code, Some(0), "{name}: {report}");
    }
}

fn start_primary_at(data_dir: &Path, port: u16) -> Node {
    node::primary_on(
        Path::new(env!("CARGO_BIN_EXE_ringrep-source")),
        data_dir,
        port,
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Waits until the replica reports a link error containing `needle`; returns it.
fn wait_io_error(rt: &tokio::runtime::Runtime, replica: SocketAddr, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let err = rt.block_on(async {
            let mut c = connect(replica, None).await;
            let row: Option<mysql_async::Row> =
                c.query_first("SHOW REPLICA STATUS").await.expect("status");
            row.and_then(|r| r.get::<String, _>("Last_IO_Error"))
                .unwrap_or_default()
        });
        if err.contains(needle) {
            return err;
        }
        assert!(
            Instant::now() < deadline,
            "the replica never reported {needle:?} (last error: {err:?})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A primary that lost commits its replica had received (here: its data directory put back to
/// an older copy, as a power loss with `--sync never` or a restored backup would leave it):
/// the replica is not silently streamed the primary's new history on top of its own. Ahead of
/// the primary, or holding another transaction under the same number, it is refused with
/// error 1236 naming the divergence.
#[test]
fn a_replica_that_kept_what_the_primary_lost_is_named_not_followed() {
    let Some(applier) = applier() else {
        return;
    };
    let port = node::free_port();
    let pdir = tempfile::tempdir().expect("tempdir");
    let older = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let rt = runtime();
    let insert = |addr: SocketAddr, from: u32, n: u32| {
        rt.block_on(async {
            let mut c = connect(addr, Some("test")).await;
            for i in from..from + n {
                c.query_drop(format!("INSERT INTO r (u, v) VALUES (1, 'row {i}')"))
                    .await
                    .expect("insert");
            }
        })
    };
    let mut primary = start_primary_at(pdir.path(), port);
    rt.block_on(async {
        connect(primary.addr, Some("test"))
            .await
            .query_drop(TABLE)
            .await
            .expect("create");
    });
    insert(primary.addr, 0, 5);
    assert!(terminate(&mut primary).success());
    copy_dir(pdir.path(), older.path());
    let mut primary = start_primary_at(pdir.path(), port);
    let start_replica = || {
        node::start(
            node::network_replica(
                &applier,
                rdir.path(),
                &format!("mysql://root@127.0.0.1:{port}"),
            ),
            node::REPLICA_LISTENING,
        )
    };
    let mut replica = start_replica();
    insert(primary.addr, 5, 5);
    let seq = rt
        .block_on(converge::query_u64(
            primary.addr,
            "SELECT @@ringrep_last_seq",
        ))
        .expect("seq");
    converge::wait_applied(&rt, replica.addr, seq, Duration::from_secs(60), "replica");

    // The primary loses its last five commits; the replica kept them.
    let _ = terminate(&mut replica);
    assert!(terminate(&mut primary).success());
    std::fs::remove_dir_all(pdir.path()).expect("rm");
    copy_dir(older.path(), pdir.path());
    let primary = start_primary_at(pdir.path(), port);
    let mut replica = start_replica();
    let err = wait_io_error(&rt, replica.addr, "lost");
    assert!(err.contains(&format!("up to seq {seq}")), "{err}");
    let _ = terminate(&mut replica);

    // The primary goes on past that number with other transactions.
    insert(primary.addr, 100, 10);
    let replica = start_replica();
    let err = wait_io_error(&rt, replica.addr, "diverged");
    assert!(err.contains(&format!("seq {seq}")), "{err}");
    // What the replica holds is untouched: its five rows are still there.
    let rows = rt
        .block_on(converge::query_u64(
            replica.addr,
            "SELECT COUNT(*) FROM test.r",
        ))
        .expect("count");
    assert_eq!(rows, 10);
}

/// Hostile and broken clients, all at once: connections that never log in, a flood past
/// `--max-connections`, a client that stops reading a large result while it holds a row lock,
/// and a run of wrong passwords. Each gets MySQL's error or a closed connection, and a client
/// that was already connected is served throughout.
#[test]
fn hostile_clients_get_errors_and_the_node_serves_everyone_else() {
    use ringrep_testkit::raw;
    let dir = tempfile::tempdir().expect("tempdir");
    let node = node::primary_with(
        Path::new(env!("CARGO_BIN_EXE_ringrep-source")),
        dir.path(),
        &["--max-connections", "40", "--net-write-timeout", "2"],
    );
    let addr = node.addr;
    let rt = runtime();
    let mut steady = rt.block_on(async {
        let mut c = connect(addr, Some("test")).await;
        c.query_drop("CREATE TABLE r (u INT PRIMARY KEY, v MEDIUMTEXT)")
            .await
            .expect("create");
        for u in 0..20 {
            c.query_drop(format!(
                "INSERT INTO r (u, v) VALUES ({u}, REPEAT('x', 1000000))"
            ))
            .await
            .expect("insert");
        }
        c.query_drop("CREATE USER 'app'@'%' IDENTIFIED BY 'right'")
            .await
            .expect("user");
        c.query_drop("GRANT ALL ON test.* TO 'app'@'%'")
            .await
            .expect("grant");
        c
    });
    let still_served = |c: &mut mysql_async::Conn| {
        let n: u64 = rt
            .block_on(c.query_first("SELECT COUNT(*) FROM r"))
            .expect("the steady client is served")
            .expect("a row");
        assert_eq!(n, 20);
    };

    // Half-open: 30 connections that read the greeting and say nothing.
    let mut silent = Vec::new();
    for _ in 0..30 {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        raw::read(&mut s).expect("greeting");
        silent.push(s);
    }
    // A flood past the limit: what is over it gets error 1040 in place of the greeting.
    let mut refused = 0;
    let mut flood = Vec::new();
    for _ in 0..40 {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        let (_, first) = raw::read(&mut s).expect("first packet");
        if first[0] == 0xff {
            assert_eq!(raw::error(&first).0, 1040);
            refused += 1;
        }
        flood.push(s);
    }
    assert!(refused >= 30, "only {refused} of the flood were refused");
    still_served(&mut steady);
    // The silent ones are closed after the connect timeout (10 s), freeing their slots.
    drop(flood);
    for s in &mut silent {
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut buf = [0u8; 64];
        assert!(
            matches!(std::io::Read::read(s, &mut buf), Ok(0) | Err(_)),
            "a connection that never logged in was kept"
        );
    }

    // A client that stops reading while it holds a row lock: after net_write_timeout the
    // connection is closed and its transaction rolled back, so the row can be written again.
    let mut stuck = raw::Client::login(addr);
    assert_eq!(stuck.command(b"\x03BEGIN")[0], 0);
    assert_eq!(
        stuck.command(b"\x03UPDATE test.r SET v = 'locked' WHERE u = 1")[0],
        0
    );
    raw::write(&mut stuck.0, 0, b"\x03SELECT v FROM test.r");
    let started = Instant::now();
    rt.block_on(async {
        loop {
            match steady
                .query_drop("UPDATE r SET v = 'mine' WHERE u = 1")
                .await
            {
                Ok(()) => break,
                Err(e) => {
                    assert_eq!(code(&e), 1205, "{e}");
                    assert!(
                        started.elapsed() < Duration::from_secs(30),
                        "the stuck client's lock was never released"
                    );
                }
            }
        }
    });
    let v: String = rt
        .block_on(steady.query_first("SELECT v FROM r WHERE u = 1"))
        .expect("select")
        .expect("row");
    assert_eq!(
        v, "mine",
        "the stuck client's update was rolled back, then ours applied"
    );
    drop(stuck);

    // Wrong passwords, many times: each is 1045; the right one still works.
    rt.block_on(async {
        for _ in 0..100 {
            let e = mysql_async::Conn::new(node::opts(addr, "app", Some("wrong"), None))
                .await
                .expect_err("a wrong password");
            assert_eq!(code(&e), 1045, "{e}");
        }
        let mut app = mysql_async::Conn::new(node::opts(addr, "app", Some("right"), Some("test")))
            .await
            .expect("the right password");
        let n: u64 = app
            .query_first("SELECT COUNT(*) FROM r")
            .await
            .expect("select")
            .expect("row");
        assert_eq!(n, 20);
    });
    still_served(&mut steady);
}
