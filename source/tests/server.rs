//! The primary node as clients see it: `ringrep-source serve` as a process, driven with the
//! mysql_async driver and the `mariadb` command-line client.

use ringrep_testkit::{node, raw};

use mysql_async::prelude::*;
use mysql_async::{Row, Value};
use std::path::Path;
use std::process::Command;

use node::{code, connect, opts, runtime, terminate, Node, USER_EVENTS};

/// Starts `ringrep-source serve` on a free loopback port and waits until it listens.
fn start_primary(data_dir: &Path, extra: &[&str]) -> Node {
    node::primary_with(
        Path::new(env!("CARGO_BIN_EXE_ringrep-source")),
        data_dir,
        extra,
    )
}

#[test]
fn spec_examples_through_the_mysql_async_driver() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut c = connect(node.addr, Some("test")).await;
        c.query_drop(USER_EVENTS).await.expect("create");
        // Text protocol: a multi-row insert reports its rows.
        c.query_drop(
            "INSERT INTO user_events (user_id, event_type, payload) VALUES (1, 'click', 'A'), (1, 'click', 'B'), (1, 'click', 'C')",
        )
        .await
        .expect("insert");
        assert_eq!(c.affected_rows(), 3);
        // Prepared statements with parameters: D and E overwrite A and B.
        for p in ["D", "E"] {
            c.exec_drop(
                "INSERT INTO user_events (user_id, event_type, payload) VALUES (?, ?, ?)",
                (1, "click", p),
            )
            .await
            .expect("prepared insert");
        }
        let rows: Vec<(i32, i32, String)> = c
            .query("SELECT user_id, ring_idx, payload FROM user_events WHERE user_id = 1 ORDER BY ring_idx")
            .await
            .expect("select");
        assert_eq!(
            rows,
            vec![(1, 1, "D".into()), (1, 2, "E".into()), (1, 3, "C".into())]
        );
        // The binary protocol gives the same rows.
        let rows: Vec<(i32, String)> = c
            .exec(
                "SELECT ring_idx, payload FROM user_events WHERE user_id = ? ORDER BY ring_idx",
                (1,),
            )
            .await
            .expect("prepared select");
        assert_eq!(rows, vec![(1, "D".into()), (2, "E".into()), (3, "C".into())]);
        // Column types arrive as MySQL's: a TIMESTAMP is a date value, a count an integer.
        for binary in [false, true] {
            let sql = "SELECT created_at, COUNT(*) FROM user_events WHERE user_id = 1 GROUP BY user_id";
            let row: Row = if binary {
                c.exec_first(sql, ()).await.expect("exec").expect("row")
            } else {
                c.query_first(sql).await.expect("query").expect("row")
            };
            let cols = row.columns_ref();
            assert_eq!(cols[0].column_type(), mysql_async::consts::ColumnType::MYSQL_TYPE_TIMESTAMP);
            assert_eq!(cols[1].column_type(), mysql_async::consts::ColumnType::MYSQL_TYPE_LONGLONG);
            let created: mysql_async::Value = row.get(0).expect("created_at");
            match (binary, &created) {
                (true, Value::Date(y, ..)) => assert!(*y >= 2024),
                (false, Value::Bytes(b)) => assert_eq!(b.len(), "2026-01-01 00:00:00.000".len()),
                other => panic!("created_at came as {other:?}"),
            }
            assert_eq!(row.get::<i64, _>(1), Some(3));
        }
        // The meta row, shown on request: 5 inserts, next slot 3, 3 occupied.
        c.query_drop("SET ndb_ring_buffer_show_meta = ON").await.expect("set");
        let meta: Vec<u8> = c
            .query_first("SELECT ring_meta FROM user_events WHERE user_id = 1 AND ring_idx = 0")
            .await
            .expect("meta")
            .expect("meta row");
        assert_eq!(meta.len(), 32);
        assert_eq!(u16::from_le_bytes([meta[0], meta[1]]), 1);
        assert_eq!(u32::from_le_bytes(meta[4..8].try_into().expect("4")), 3);
        assert_eq!(u32::from_le_bytes(meta[8..12].try_into().expect("4")), 3);
        assert_eq!(u64::from_le_bytes(meta[16..24].try_into().expect("8")), 5);
        c.query_drop("SET ndb_ring_buffer_show_meta = OFF").await.expect("set");
        // Errors carry MySQL's code, and bad input changes nothing.
        let e = c
            .query_drop("INSERT INTO user_events (user_id, ring_idx, payload) VALUES (1, 2, 'x')")
            .await
            .expect_err("ring_idx in INSERT");
        assert_eq!(code(&e), 1031);
        let e = c.query_drop("SELECT * FROM nope").await.expect_err("no table");
        assert_eq!(code(&e), 1146);
        let e = c.exec_drop("SELEC ?", (1,)).await.expect_err("syntax");
        assert_eq!(code(&e), 1064);
        // Multi-statements are off.
        let e = c.query_drop("SELECT 1; SELECT 2").await.expect_err("multi");
        assert_eq!(code(&e), 1064);
        let n: i64 = c
            .query_first("SELECT COUNT(*) FROM user_events")
            .await
            .expect("count")
            .expect("row");
        assert_eq!(n, 3);
        c.disconnect().await.expect("disconnect");
    });
}

/// A query's bytes that are not UTF-8 (the binary string literals mysqldump writes for
/// VARBINARY and BLOB columns without --hex-blob) reach a binary column exactly, and compare
/// exactly; a text column refuses them with 1366 instead of storing replacement characters.
#[test]
fn binary_literals_keep_their_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut c = connect(node.addr, Some("test")).await;
        c.query_drop("CREATE TABLE bin (id INT PRIMARY KEY, vb VARBINARY(16), t VARCHAR(8))")
            .await
            .expect("create");
        c.query_drop(&b"INSERT INTO bin VALUES (1, _binary'\xff\x80a\x00', 'caf\xc3\xa9')"[..])
            .await
            .expect("insert raw bytes");
        c.query_drop(&b"INSERT INTO bin VALUES (2, '\xde\xad', 'x')"[..])
            .await
            .expect("insert raw bytes without an introducer");
        let e = c
            .query_drop(&b"INSERT INTO bin VALUES (3, NULL, 'a\xffb')"[..])
            .await
            .expect_err("not UTF-8 for a text column");
        assert!(e.to_string().contains("1366"), "{e}");
        assert!(
            e.to_string().contains("Incorrect string value: 'a\\xFFb'"),
            "{e}"
        );
        let rows: Vec<(i64, String, String)> = c
            .query("SELECT id, HEX(vb), t FROM bin ORDER BY id")
            .await
            .expect("select");
        assert_eq!(
            rows,
            [
                (1, "FF806100".to_string(), "café".to_string()),
                (2, "DEAD".to_string(), "x".to_string()),
            ]
        );
        let hit: Option<i64> = c
            .query_first(&b"SELECT id FROM bin WHERE vb = _binary'\xde\xad'"[..])
            .await
            .expect("select by raw bytes");
        assert_eq!(hit, Some(2));
    });
}

/// TIME and BIT columns through the driver: the text protocol and prepared statements (the
/// binary TIME form, BIT's bytes), and a TIME parameter.
#[test]
fn time_and_bit_columns_over_both_protocols() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut c = connect(node.addr, Some("test")).await;
        c.query_drop("CREATE TABLE tb (id INT PRIMARY KEY, t TIME(3), b BIT(10))")
            .await
            .expect("create");
        c.query_drop(
            "INSERT INTO tb VALUES (1, '-1 02:03:04.5', b'1000000001'), (2, '00:00:00', 0)",
        )
        .await
        .expect("insert");
        // A TIME parameter in the binary form: 838:59:59 as 34 days 22:59:59.
        c.exec_drop(
            "INSERT INTO tb VALUES (?, ?, ?)",
            (3, Value::Time(false, 34, 22, 59, 59, 0), 5),
        )
        .await
        .expect("insert a TIME parameter");
        let text: Vec<Row> = c
            .query("SELECT t, b FROM tb ORDER BY id")
            .await
            .expect("text protocol");
        let binary: Vec<Row> = c
            .exec("SELECT t, b FROM tb WHERE id > ? ORDER BY id", (0,))
            .await
            .expect("binary protocol");
        for rows in [&text, &binary] {
            assert_eq!(rows[0].columns_ref()[0].column_type() as u8, 11);
            assert_eq!(rows[0].columns_ref()[1].column_type() as u8, 16);
        }
        let values = |rows: &[Row]| -> Vec<(Value, Value)> {
            rows.iter()
                .map(|r| {
                    (
                        r.as_ref(0).cloned().expect("t"),
                        r.as_ref(1).cloned().expect("b"),
                    )
                })
                .collect()
        };
        assert_eq!(
            values(&text),
            [
                (
                    Value::Bytes(b"-26:03:04.500".to_vec()),
                    Value::Bytes(vec![2, 1])
                ),
                (
                    Value::Bytes(b"00:00:00.000".to_vec()),
                    Value::Bytes(vec![0, 0])
                ),
                (
                    Value::Bytes(b"838:59:59.000".to_vec()),
                    Value::Bytes(vec![0, 5])
                ),
            ]
        );
        assert_eq!(
            values(&binary),
            [
                (
                    Value::Time(true, 1, 2, 3, 4, 500_000),
                    Value::Bytes(vec![2, 1])
                ),
                (Value::Time(false, 0, 0, 0, 0, 0), Value::Bytes(vec![0, 0])),
                (
                    Value::Time(false, 34, 22, 59, 59, 0),
                    Value::Bytes(vec![0, 5])
                ),
            ]
        );
        let hit: Option<i64> = c
            .exec_first("SELECT id FROM tb WHERE t = ?", ("-26:03:04.5",))
            .await
            .expect("a TIME compared with a string parameter");
        assert_eq!(hit, Some(1));
    });
}

#[test]
fn sessions_have_their_own_variables_and_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut a = connect(node.addr, Some("test")).await;
        let mut b = connect(node.addr, Some("test")).await;
        a.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            .await
            .expect("create");
        a.query_drop("SET @x = 41").await.expect("set");
        let bx: Option<i64> = b.query_first("SELECT @x").await.expect("select").flatten();
        assert_eq!(bx, None, "user variables are per connection");
        a.query_drop("BEGIN").await.expect("begin");
        a.query_drop("INSERT INTO t VALUES (1, 1)")
            .await
            .expect("insert");
        let seen: i64 = b
            .query_first("SELECT COUNT(*) FROM t")
            .await
            .expect("count")
            .expect("row");
        assert_eq!(seen, 0, "an open transaction is not visible to others");
        a.query_drop("COMMIT").await.expect("commit");
        let seen: i64 = b
            .query_first("SELECT COUNT(*) FROM t")
            .await
            .expect("count")
            .expect("row");
        assert_eq!(seen, 1);
        // A client that goes away with an open transaction loses it.
        a.query_drop("BEGIN").await.expect("begin");
        a.query_drop("INSERT INTO t VALUES (2, 2)")
            .await
            .expect("insert");
        drop(a);
        b.query_drop("SET innodb_lock_wait_timeout = 5").await.ok();
        // The row lock is released: b can write the same key.
        b.query_drop("INSERT INTO t VALUES (2, 20)")
            .await
            .expect("insert after disconnect");
        let v: i64 = b
            .query_first("SELECT v FROM t WHERE id = 2")
            .await
            .expect("v")
            .expect("row");
        assert_eq!(v, 20);
    });
}

#[test]
fn passwords_are_checked_on_every_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &["--root-password", "s3cret"]);
    runtime().block_on(async {
        for _ in 0..3 {
            let e = mysql_async::Conn::new(opts(node.addr, "root", Some("wrong"), None))
                .await
                .expect_err("wrong password");
            // MySQL's error and text, which clients and tools check for.
            assert_eq!(code(&e), 1045, "{e}");
            assert!(
                e.to_string()
                    .contains("Access denied for user 'root'@'127.0.0.1' (using password: YES)"),
                "{e}"
            );
            let e = mysql_async::Conn::new(opts(node.addr, "root", None, None))
                .await
                .expect_err("no password");
            assert_eq!(code(&e), 1045, "{e}");
            assert!(e.to_string().contains("(using password: NO)"), "{e}");
            let e = mysql_async::Conn::new(opts(node.addr, "nobody", Some("s3cret"), None))
                .await
                .expect_err("unknown user");
            assert_eq!(code(&e), 1045, "{e}");
            let mut c = mysql_async::Conn::new(opts(node.addr, "root", Some("s3cret"), None))
                .await
                .expect("right password");
            let one: i64 = c
                .query_first("SELECT 1")
                .await
                .expect("select")
                .expect("row");
            assert_eq!(one, 1);
        }
    });
}

#[test]
fn accounts_from_the_config_file_and_the_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("ringrep.toml");
    std::fs::write(
        &cfg,
        "max_connections = 2\n[[users]]\nname = \"app\"\npassword = \"apppw\"\n",
    )
    .expect("config");
    let data = dir.path().join("data");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ringrep-source"));
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(&data)
        .arg("--config")
        .arg(&cfg)
        .args(["--listen", "127.0.0.1:0"]);
    let mut node = node::start(cmd, "listening on ");
    runtime().block_on(async {
        let mut app = mysql_async::Conn::new(opts(node.addr, "app", Some("apppw"), None))
            .await
            .expect("app account");
        let _root = connect(node.addr, None).await;
        // max_connections = 2: the third is refused with MySQL's error 1040.
        let e = mysql_async::Conn::new(opts(node.addr, "root", None, None))
            .await
            .expect_err("third connection");
        assert!(
            e.to_string().contains("1040") || e.to_string().contains("Too many"),
            "{e}"
        );
        app.query_drop("SELECT 1").await.expect("still served");
    });
    assert!(terminate(&mut node).success());
    // The root password from the environment.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ringrep-source"));
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(&data)
        .args(["--listen", "127.0.0.1:0"])
        .env("RINGREP_ROOT_PASSWORD", "envpw");
    let node = node::start(cmd, "listening on ");
    runtime().block_on(async {
        mysql_async::Conn::new(opts(node.addr, "root", None, None))
            .await
            .expect_err("root needs the password from the environment");
        mysql_async::Conn::new(opts(node.addr, "root", Some("envpw"), None))
            .await
            .expect("password from RINGREP_ROOT_PASSWORD");
    });
}

#[test]
fn no_root_password_means_loopback_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The server refuses before it binds, so nothing listens beyond loopback.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--listen", "0.0.0.0:0"])
        .env_remove("RINGREP_ROOT_PASSWORD")
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no root password"), "{err}");
}

/// Clients write continuously; SIGTERM stops the node; every acknowledged insert is there
/// after a restart, and the restart is clean.
#[test]
fn sigterm_under_load_loses_no_acknowledged_commit() {
    stopped_under_load_loses_no_acknowledged_commit(Stop::Term);
}

/// The same with SIGKILL: nothing is flushed on the way out, so an insert acknowledged before
/// its record reached the file would be missing. The restart may find a torn tail (cut back),
/// and each ring continues after its last row.
#[test]
fn sigkill_under_load_loses_no_acknowledged_commit() {
    stopped_under_load_loses_no_acknowledged_commit(Stop::Kill);
}

enum Stop {
    Term,
    Kill,
}

fn stopped_under_load_loses_no_acknowledged_commit(stop: Stop) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node = start_primary(dir.path(), &[]);
    let addr = node.addr;
    let rt = runtime();
    rt.block_on(async {
        let mut c = connect(addr, Some("test")).await;
        c.query_drop("CREATE TABLE ev (k INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(32), v BIGINT NOT NULL, PRIMARY KEY (k, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=1000000'")
            .await
            .expect("create");
    });
    let writers: Vec<_> = (0..4)
        .map(|w| {
            rt.spawn(async move {
                let mut acked = Vec::new();
                let Ok(mut c) =
                    mysql_async::Conn::new(opts(addr, "root", None, Some("test"))).await
                else {
                    return acked;
                };
                for i in 0.. {
                    let v = w * 1_000_000 + i;
                    match c
                        .exec_drop("INSERT INTO ev (k, v) VALUES (?, ?)", (w, v))
                        .await
                    {
                        Ok(()) => acked.push(v),
                        Err(_) => break,
                    }
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(700));
    match stop {
        Stop::Term => {
            let status = terminate(&mut node);
            assert!(status.success(), "clean exit on SIGTERM: {status}");
        }
        Stop::Kill => {
            node.child.kill().expect("SIGKILL");
            node.child.wait().expect("wait");
        }
    }
    let acked: Vec<i64> = rt.block_on(async {
        let mut all = Vec::new();
        for w in writers {
            all.extend(w.await.expect("writer"));
        }
        all
    });
    assert!(!acked.is_empty(), "the writers got some inserts in");
    let node = start_primary(dir.path(), &[]);
    if matches!(stop, Stop::Term) {
        let restarted = node.log.try_iter().collect::<Vec<_>>().join("\n");
        assert!(
            !restarted.contains("torn"),
            "restart after SIGTERM is clean: {restarted}"
        );
    }
    rt.block_on(async {
        let mut c = connect(node.addr, Some("test")).await;
        let present: Vec<i64> = c.query("SELECT v FROM ev").await.expect("select");
        let present: std::collections::HashSet<i64> = present.into_iter().collect();
        let lost: Vec<_> = acked.iter().filter(|v| !present.contains(v)).collect();
        assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
        // Each writer's ring continues right after its last row.
        for w in 0..4i64 {
            let last: Option<i64> = c
                .exec_first::<Option<i64>, _, _>("SELECT MAX(ring_idx) FROM ev WHERE k = ?", (w,))
                .await
                .expect("max")
                .flatten();
            c.exec_drop("INSERT INTO ev (k, v) VALUES (?, ?)", (w, -1 - w))
                .await
                .expect("insert after restart");
            let slot: Option<i64> = c
                .exec_first("SELECT ring_idx FROM ev WHERE k = ? AND v = ?", (w, -1 - w))
                .await
                .expect("slot");
            assert_eq!(slot, Some(last.unwrap_or(0) + 1), "ring {w} continues");
        }
    });
}

/// The `mariadb` command-line client runs the spec's examples and reads them back.
#[test]
fn the_mariadb_command_line_client() {
    let Some(client) = node::mysql_client() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    let run = |sql: &str| node::run_client(client, node.addr, Some("test"), sql);
    let (ok, _, err) = run(&format!(
        "{USER_EVENTS}; INSERT INTO user_events (user_id, event_type, payload) VALUES (1, 'click', 'A'), (1, 'purchase', 'B'), (2, 'click', 'C'); INSERT INTO user_events (user_id, event_type, payload) VALUES (1, 'click', 'D'), (1, 'click', 'E');"
    ));
    assert!(ok, "{err}");
    let (ok, out, err) = run(
        "SELECT user_id, ring_idx, event_type, payload FROM user_events ORDER BY user_id, ring_idx",
    );
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "user_id\tring_idx\tevent_type\tpayload\n1\t1\tclick\tE\n1\t2\tpurchase\tB\n1\t3\tclick\tD\n2\t1\tclick\tC\n"
    );
    let (ok, _, err) = run("UPDATE user_events SET ring_idx = 5 WHERE user_id = 1");
    assert!(!ok);
    assert!(
        err.contains("ERROR 1031") && err.contains("Cannot update ring_idx"),
        "{err}"
    );
}

/// With --tls-cert and --tls-key, a client that verifies the server's certificate against its
/// CA connects over TLS; plain connections still work; passwords are still checked. A server
/// without TLS refuses a client that insists on it.
#[test]
fn tls_when_configured() {
    let tls = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tls");
    let (cert, key) = (tls.join("server.crt"), tls.join("server.key"));
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(
        &dir.path().join("a"),
        &[
            "--tls-cert",
            cert.to_str().expect("utf-8"),
            "--tls-key",
            key.to_str().expect("utf-8"),
            "--root-password",
            "pw",
        ],
    );
    let ssl = || mysql_async::SslOpts::default().with_root_certs(vec![tls.join("ca.crt").into()]);
    runtime().block_on(async {
        let mut c =
            mysql_async::Conn::new(opts(node.addr, "root", Some("pw"), None).ssl_opts(ssl()))
                .await
                .expect("TLS connection");
        let one: i64 = c
            .query_first("SELECT 1")
            .await
            .expect("select")
            .expect("row");
        assert_eq!(one, 1);
        let e = mysql_async::Conn::new(opts(node.addr, "root", Some("nope"), None).ssl_opts(ssl()))
            .await
            .expect_err("wrong password over TLS");
        assert!(matches!(code(&e), 1045 | 1698), "{e}");
        let mut plain = mysql_async::Conn::new(opts(node.addr, "root", Some("pw"), None))
            .await
            .expect("plain connection");
        plain.query_drop("SELECT 1").await.expect("plain select");
    });
    let plain_node = start_primary(&dir.path().join("b"), &[]);
    runtime().block_on(async {
        mysql_async::Conn::new(opts(plain_node.addr, "root", None, None).ssl_opts(ssl()))
            .await
            .expect_err("no TLS offered");
    });
    // A certificate without its key is a startup error, not a silent plain server.
    let out = Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("c"))
        .args(["--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert)
        .output()
        .expect("run");
    assert!(!out.status.success());
    let out = Command::new(env!("CARGO_BIN_EXE_ringrep-source"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("c"))
        .args(["--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&key)
        .arg("--tls-key")
        .arg(&key)
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no certificate"), "{err}");
}

/// Bad and unknown input at the protocol level gets MySQL's errors, and the node goes on
/// serving everyone else: an unknown command (1047), a replication command ringrep does not
/// serve (COM_BINLOG_DUMP_GTID, 1235), a binlog dump of a file the node does not have (1236),
/// a garbled handshake (the connection is closed), a command over max_allowed_packet (1153,
/// then closed). A MySQL binlog dump of the oldest file starts with the artificial ROTATE.
#[test]
fn protocol_errors_leave_the_node_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    let mut c = raw::Client::login(node.addr);
    assert_eq!(raw::error(&c.command(&[0x42])).0, 1047);
    assert_eq!(raw::error(&c.command(&[])).0, 1047);
    let (code, msg) = raw::error(&c.command(&[0x1e, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]));
    assert_eq!(code, 1235, "{msg}");
    // A dump ends its connection, as MySQL's dump thread does, whether it streamed or not.
    let mut dump = vec![0x12, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    dump.extend_from_slice(b"binlog.000099");
    let (code, msg) = raw::error(&raw::Client::login(node.addr).command(&dump));
    assert_eq!(code, 1236, "{msg}");
    // The oldest file from its start: the connection becomes the stream.
    let mut stream = raw::Client::login(node.addr);
    let first = stream.command(&[0x12, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(
        (first[0], first[1 + 4]),
        (0x00, 4),
        "OK byte, then a ROTATE: {first:?}"
    );
    assert!(first.ends_with(b"binlog.000001"), "{first:?}");
    // COM_PING still works on the same connection.
    assert_eq!(c.command(&[0x0e])[0], 0);
    // A statement of the text protocol, by hand: one column, one row, then OK (0xfe).
    raw::write(&mut c.0, 0, b"\x03SELECT 41 + 1");
    let (_, count) = raw::read(&mut c.0).expect("column count");
    assert_eq!(count, [1]);
    let (_, _def) = raw::read(&mut c.0).expect("column definition");
    let (_, row) = raw::read(&mut c.0).expect("row");
    assert_eq!(row, [2, b'4', b'2']);
    let (_, end) = raw::read(&mut c.0).expect("end");
    assert_eq!(end[0], 0xfe);

    // A handshake response that is not one: the server closes that connection.
    let mut s = std::net::TcpStream::connect(node.addr).expect("connect");
    raw::read(&mut s).expect("greeting");
    raw::write(&mut s, 1, &[1, 2, 3]);
    let mut buf = [0u8; 16];
    assert!(matches!(
        std::io::Read::read(&mut s, &mut buf),
        Ok(0) | Err(_)
    ));

    // A command over max_allowed_packet (64 MiB): error 1153, then the connection closes.
    let mut big = raw::Client::login(node.addr);
    let len: u32 = 0xff_ff_ff;
    let chunk = vec![b' '; len as usize];
    let mut sent = 0usize;
    let mut seq = 0u8;
    while sent <= 64 << 20 {
        let head = len.to_le_bytes();
        if std::io::Write::write_all(&mut big.0, &[head[0], head[1], head[2], seq]).is_err()
            || std::io::Write::write_all(&mut big.0, &chunk).is_err()
        {
            break;
        }
        sent += chunk.len();
        seq = seq.wrapping_add(1);
    }
    let (_, p) = raw::read(&mut big.0).expect("an answer");
    assert_eq!(raw::error(&p).0, 1153);

    // Everyone else is still served.
    runtime().block_on(async {
        let mut c = connect(node.addr, None).await;
        let one: i64 = c
            .query_first("SELECT 1")
            .await
            .expect("select")
            .expect("row");
        assert_eq!(one, 1);
    });
    assert_eq!(c.command(&[0x0e])[0], 0);
}

/// `--metrics-listen`: `GET /metrics` in Prometheus' text format, telling the truth about the
/// node; anything else is 404.
#[test]
fn metrics_endpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &["--metrics-listen", "127.0.0.1:0"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let addr = loop {
        let line = node
            .log
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a log line");
        if let Some(rest) = line.split("metrics on http://").nth(1) {
            break rest.trim_end_matches("/metrics").trim().to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no metrics line");
    };
    let get = |path: &str| {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&addr).expect("connect");
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("request");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("response");
        out
    };
    runtime().block_on(async {
        let mut c = connect(node.addr, Some("test")).await;
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
            .await
            .expect("create");
        c.query_drop("INSERT INTO t VALUES (1), (2)")
            .await
            .expect("insert");
        let seq: u64 = c
            .query_first("SELECT @@ringrep_last_seq")
            .await
            .expect("seq")
            .expect("row");
        let page = get("/metrics");
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(
            page.contains(&format!("\nringrep_last_seq {seq}\n")),
            "{page}"
        );
        assert!(page.contains("# TYPE ringrep_binlog_bytes gauge"), "{page}");
        assert!(page.contains("\nringrep_binlog_segments 1\n"), "{page}");
        assert!(page.contains("\nringrep_client_connections 1\n"), "{page}");
        assert!(
            page.contains("# TYPE ringrep_binlog_fsyncs_total counter"),
            "{page}"
        );
        assert!(
            page.contains("# TYPE ringrep_binlog_fsyncs_when_idle_total counter"),
            "{page}"
        );
    });
    assert!(get("/other").starts_with("HTTP/1.1 404"));
}

/// What monitoring tools read: SHOW GLOBAL STATUS (MySQL's connection and statement
/// counters, the node's binlog fsyncs and sequence numbers, filtered by LIKE and WHERE), the
/// variables they ask for by `@@name` and by SHOW VARIABLES, and the fsync counter on the
/// metrics page.
#[test]
fn status_and_variables_for_monitoring_tools() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &["--max-connections", "20"]);
    runtime().block_on(async {
        let status = |rows: Vec<(String, String)>, name: &str| -> u64 {
            rows.iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("{name} in {rows:?}"))
                .1
                .parse()
                .expect("a number")
        };
        let mut other = connect(node.addr, Some("test")).await;
        let mut c = connect(node.addr, Some("test")).await;
        let before: Vec<(String, String)> = c.query("SHOW GLOBAL STATUS").await.expect("status");
        for name in [
            "Uptime",
            "Threads_connected",
            "Connections",
            "Max_used_connections",
            "Questions",
            "Ringrep_binlog_fsyncs",
            "Ringrep_binlog_fsyncs_when_idle",
            "Ringrep_last_seq",
            "Ringrep_durable_seq",
        ] {
            status(before.clone(), name);
        }
        assert_eq!(status(before.clone(), "Threads_connected"), 2);
        assert!(status(before.clone(), "Connections") >= 2);
        assert!(status(before.clone(), "Max_used_connections") >= 2);
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
            .await
            .expect("create");
        for i in 0..3 {
            other
                .query_drop(format!("INSERT INTO t VALUES ({i})"))
                .await
                .expect("insert");
        }
        let after: Vec<(String, String)> = c
            .query("SHOW STATUS WHERE Variable_name LIKE 'Ringrep_binlog_fsyncs' OR Variable_name = 'Questions'")
            .await
            .expect("status");
        assert_eq!(after.len(), 2, "{after:?}");
        // Every durable commit was fsynced (one group each: they came one at a time).
        assert!(
            status(after.clone(), "Ringrep_binlog_fsyncs")
                >= status(before.clone(), "Ringrep_binlog_fsyncs") + 4,
            "{before:?} {after:?}"
        );
        assert!(status(after.clone(), "Questions") >= status(before, "Questions") + 5);
        let uptime: Vec<(String, String)> =
            c.query("SHOW STATUS LIKE 'upt%'").await.expect("like");
        assert_eq!(
            uptime.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["Uptime", "Uptime_since_flush_status"]
        );
        let row: Row = c
            .query_first("SELECT @@port, @@max_connections, @@read_only, @@super_read_only, @@version, @@hostname")
            .await
            .expect("variables")
            .expect("row");
        assert_eq!(row.get::<u16, _>(0), Some(node.addr.port()));
        assert_eq!(row.get::<u64, _>(1), Some(20));
        assert_eq!(row.get::<i64, _>(2), Some(0));
        assert_eq!(row.get::<i64, _>(3), Some(0));
        assert!(row.get::<String, _>(4).expect("version").starts_with("8.0."));
        assert!(!row.get::<String, _>(5).expect("hostname").is_empty());
        let vars: Vec<(String, String)> = c
            .query("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('port', 'version_comment', 'max_allowed_packet')")
            .await
            .expect("show variables");
        assert_eq!(
            vars,
            [
                ("max_allowed_packet".to_string(), "67108864".to_string()),
                ("port".to_string(), node.addr.port().to_string()),
                (
                    "version_comment".to_string(),
                    "ringrep ring buffer tables".to_string()
                ),
            ]
        );
    });
}

/// `caching_sha2_password`, MySQL 8's default and the only method of MySQL 9's clients: a
/// client that answers the greeting with it is checked as it is (fast authentication: `0x01
/// 0x03`, then OK), for the node's own accounts and for those made with IDENTIFIED BY; an
/// account known only by its native hash (`AS '*HASH'`) has the client asked again for
/// `mysql_native_password`; a wrong password is 1045 either way.
#[test]
fn caching_sha2_password_clients_log_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &["--root-password", "s3cret"]);
    let login = |user: &str, password: &str| -> (std::net::TcpStream, Vec<u8>, Vec<u8>) {
        let mut s = std::net::TcpStream::connect(node.addr).expect("connect");
        let (_, greeting) = raw::read(&mut s).expect("greeting");
        let g = ringrep_protocol::parse_greeting(&greeting).expect("greeting");
        let answer = ringrep_protocol::sha2_answer(password, &g.salt);
        let hello = ringrep_protocol::handshake_response_for(
            ringrep_protocol::CLIENT,
            user,
            &answer,
            None,
            ringrep_protocol::CACHING_SHA2,
        );
        raw::write(&mut s, 1, &hello);
        let (_, first) = raw::read(&mut s).expect("answer");
        (s, first, g.salt)
    };
    // The node's own account.
    let (mut s, first, _) = login("root", "s3cret");
    assert_eq!(first, [0x01, 0x03], "fast authentication");
    let (_, ok) = raw::read(&mut s).expect("ok");
    assert_eq!(ok[0], 0, "{ok:?}");
    let (_, first, _) = login("root", "wrong");
    assert_eq!(raw::error(&first).0, 1045);
    // Accounts made in SQL.
    runtime().block_on(async {
        let mut c = mysql_async::Conn::new(opts(node.addr, "root", Some("s3cret"), None))
            .await
            .expect("root");
        c.query_drop("CREATE USER app IDENTIFIED BY 'apw'").await.expect("app");
        c.query_drop("CREATE USER old IDENTIFIED WITH mysql_native_password AS '*14E65567ABDB5135D0CFD9A70B3032C179A49EE7'")
            .await
            .expect("old");
        c.query_drop("CREATE USER eight IDENTIFIED WITH caching_sha2_password BY 'epw'")
            .await
            .expect("eight");
    });
    for (user, password) in [("app", "apw"), ("eight", "epw")] {
        let (mut s, first, _) = login(user, password);
        assert_eq!(first, [0x01, 0x03], "{user}");
        let (_, ok) = raw::read(&mut s).expect("ok");
        assert_eq!(ok[0], 0, "{user}: {ok:?}");
    }
    let (_, first, _) = login("app", "nope");
    assert_eq!(raw::error(&first).0, 1045);
    // Known by its native hash only: asked again, then in with mysql_native_password.
    let (mut s, first, salt) = login("old", "secret");
    assert_eq!(first[0], 0xfe, "an auth switch: {first:?}");
    raw::write(&mut s, 3, &ringrep_protocol::native_answer("secret", &salt));
    let (_, ok) = raw::read(&mut s).expect("ok");
    assert_eq!(ok[0], 0, "{ok:?}");
}

/// SHOW PROCESSLIST lists the connections, with the statement a waiting one runs; KILL ends the
/// connection that holds a row lock, its transaction is rolled back, and the statement that
/// waited for the lock goes through. KILL QUERY of a running statement is refused (ringrep cannot
/// interrupt one), of an idle connection does nothing; an unknown id is 1094; an account without
/// SUPER may kill only its own connections (1095) and, without PROCESS, sees only its own.
#[test]
fn show_processlist_and_kill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut admin = connect(node.addr, Some("test")).await;
        admin
            .query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            .await
            .expect("create");
        admin
            .query_drop("INSERT INTO t VALUES (1, 0)")
            .await
            .expect("insert");
        let mut holder = connect(node.addr, Some("test")).await;
        let holder_id: u32 = holder
            .query_first("SELECT CONNECTION_ID()")
            .await
            .expect("id")
            .expect("row");
        holder.query_drop("BEGIN").await.expect("begin");
        holder
            .query_drop("UPDATE t SET v = 1 WHERE id = 1")
            .await
            .expect("update holds the row");
        let mut waiter = connect(node.addr, Some("test")).await;
        let waiter_id: u32 = waiter
            .query_first("SELECT CONNECTION_ID()")
            .await
            .expect("id")
            .expect("row");
        let waiting = tokio::spawn(async move {
            let r = waiter.query_drop("UPDATE t SET v = 2 WHERE id = 1").await;
            (waiter, r)
        });
        // The waiter shows up in the list, running its UPDATE.
        let mut seen = None;
        for _ in 0..100 {
            let rows: Vec<Row> = admin.query("SHOW FULL PROCESSLIST").await.expect("list");
            seen = rows.into_iter().find(|r| {
                r.get::<u32, _>("Id") == Some(waiter_id)
                    && r.get::<String, _>("Command").as_deref() == Some("Query")
                    && r.get::<String, _>("Info")
                        .is_some_and(|i| i.starts_with("UPDATE"))
            });
            if seen.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let seen = seen.expect("the waiting connection in SHOW FULL PROCESSLIST");
        // Id and Time are numbers, as MySQL's (a driver hands out integers).
        for (i, name) in [(0, "Id"), (5, "Time")] {
            let col = &seen.columns_ref()[i];
            assert_eq!(col.name_str(), name);
            assert_eq!(
                col.column_type(),
                mysql_async::consts::ColumnType::MYSQL_TYPE_LONGLONG,
                "{name}"
            );
        }
        assert_eq!(
            seen.get::<String, _>("Info").as_deref(),
            Some("UPDATE t SET v = 2 WHERE id = 1")
        );
        assert_eq!(seen.get::<String, _>("db").as_deref(), Some("test"));
        let e = admin
            .query_drop(format!("KILL QUERY {waiter_id}"))
            .await
            .expect_err("a running statement cannot be interrupted");
        assert_eq!(code(&e), 1235, "{e}");
        admin
            .query_drop(format!("KILL QUERY {holder_id}"))
            .await
            .expect("an idle connection's query: nothing to do");
        let e = admin
            .query_drop("KILL 999999")
            .await
            .expect_err("unknown id");
        assert_eq!(code(&e), 1094, "{e}");
        admin
            .query_drop(format!("KILL {holder_id}"))
            .await
            .expect("kill the lock holder");
        let (mut waiter, r) = waiting.await.expect("waiter");
        r.expect("the waiting UPDATE goes through once the holder is gone");
        let v: i64 = waiter
            .query_first("SELECT v FROM t WHERE id = 1")
            .await
            .expect("v")
            .expect("row");
        assert_eq!(v, 2, "the killed transaction was rolled back");
        assert!(
            holder.query_drop("SELECT 1").await.is_err(),
            "the killed connection is closed"
        );
        let rows: Vec<Row> = admin.query("SHOW PROCESSLIST").await.expect("list");
        assert!(rows
            .iter()
            .all(|r| r.get::<u32, _>("Id") != Some(holder_id)));

        // An account without PROCESS or SUPER.
        admin
            .query_drop("CREATE USER app IDENTIFIED BY 'pw'")
            .await
            .expect("user");
        admin
            .query_drop("GRANT SELECT ON test.* TO app")
            .await
            .expect("grant");
        let mut app = mysql_async::Conn::new(opts(node.addr, "app", Some("pw"), Some("test")))
            .await
            .expect("app logs in");
        let rows: Vec<Row> = app.query("SHOW PROCESSLIST").await.expect("list");
        assert_eq!(rows.len(), 1, "only its own connection");
        let e = app
            .query_drop(format!("KILL {waiter_id}"))
            .await
            .expect_err("not its connection");
        assert_eq!(code(&e), 1095, "{e}");
        let app_id: u32 = app
            .query_first("SELECT CONNECTION_ID()")
            .await
            .expect("id")
            .expect("row");
        let e = app
            .query_drop(format!("KILL {app_id}"))
            .await
            .expect_err("its own: interrupted");
        assert_eq!(code(&e), 1317, "{e}");
        assert!(app.query_drop("SELECT 1").await.is_err(), "and closed");
    });
}

/// A view reads with its definer's rights: so creating one needs SELECT on everything it
/// reads (1142 otherwise), and SHOW INDEX / SHOW CREATE VIEW need SELECT on what they show.
#[test]
fn a_view_cannot_read_what_its_creator_may_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut root = connect(node.addr, Some("test")).await;
        for sql in [
            "CREATE DATABASE app",
            "CREATE TABLE test.secret (id INT PRIMARY KEY, v VARCHAR(10))",
            "INSERT INTO test.secret VALUES (1, 'hidden')",
            "CREATE TABLE app.mine (id INT PRIMARY KEY)",
            "CREATE USER dev IDENTIFIED BY 'pw'",
            "GRANT ALL ON app.* TO dev",
        ] {
            root.query_drop(sql).await.expect(sql);
        }
        let mut dev = mysql_async::Conn::new(opts(node.addr, "dev", Some("pw"), Some("app")))
            .await
            .expect("dev logs in");
        let e = dev
            .query_drop("CREATE VIEW app.leak AS SELECT * FROM test.secret")
            .await
            .expect_err("a view of a table dev may not read");
        assert_eq!(code(&e), 1142, "{e}");
        dev.query_drop("CREATE VIEW app.own AS SELECT id FROM mine")
            .await
            .expect("a view of its own table");
        let ids: Vec<i64> = dev.query("SELECT id FROM app.own").await.expect("read it");
        assert!(ids.is_empty());
        let e = dev
            .query_drop("SHOW INDEX FROM test.secret")
            .await
            .expect_err("SHOW INDEX of a table dev may not read");
        assert_eq!(code(&e), 1142, "{e}");
    });
}

/// A write that finds its ring's lock held waits for it (it cannot on the connection's task,
/// where brief statements run: it runs again where it may), and while several such writes
/// wait, more than the server has worker threads, other clients are served. A cycle of waits
/// is still found (1213), and nothing of a statement that had to move is lost or doubled.
#[test]
fn writes_that_wait_for_a_row_lock_leave_the_other_clients_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut a = connect(node.addr, Some("test")).await;
        // Rings of 10: the five writes below overwrite nothing.
        a.query_drop(USER_EVENTS.replace("MAX_ROWS_PER_PK=3", "MAX_ROWS_PER_PK=10"))
            .await
            .expect("create");
        a.query_drop("SET innodb_lock_wait_timeout = 30")
            .await
            .expect("timeout");
        a.query_drop("BEGIN").await.expect("begin");
        a.query_drop("INSERT INTO user_events (user_id, payload) VALUES (1, 'a')")
            .await
            .expect("insert");
        // Four writers to ring 1, by text and prepared, all of which must wait for `a`.
        let mut waiting = Vec::new();
        for i in 0..4 {
            let mut w = connect(node.addr, Some("test")).await;
            waiting.push(tokio::spawn(async move {
                w.query_drop("SET innodb_lock_wait_timeout = 30")
                    .await
                    .expect("timeout");
                if i % 2 == 0 {
                    w.query_drop(format!(
                        "INSERT INTO user_events (user_id, payload) VALUES (1, 'w{i}')"
                    ))
                    .await
                } else {
                    w.exec_drop(
                        "INSERT INTO user_events (user_id, payload) VALUES (?, ?)",
                        (1, format!("w{i}")),
                    )
                    .await
                }
            }));
        }
        // Another client writes other rings and reads meanwhile; it waits for none of them.
        let mut c = connect(node.addr, Some("test")).await;
        for p in 2..50 {
            c.exec_drop(
                "INSERT INTO user_events (user_id, payload) VALUES (?, 'c')",
                (p,),
            )
            .await
            .expect("a write to another ring");
        }
        let others: i64 = c
            .query_first("SELECT COUNT(*) FROM user_events WHERE user_id > 1")
            .await
            .expect("count")
            .expect("row");
        assert_eq!(others, 48);
        assert!(
            waiting.iter().all(|w| !w.is_finished()),
            "the writers of ring 1 wait for the open transaction"
        );
        a.query_drop("COMMIT").await.expect("commit");
        for w in waiting {
            w.await.expect("task").expect("the waiting write commits");
        }
        let payloads: Vec<(u32, String)> = c
            .query("SELECT ring_idx, payload FROM user_events WHERE user_id = 1 ORDER BY ring_idx")
            .await
            .expect("ring 1");
        let mut seen: Vec<&str> = payloads.iter().map(|(_, p)| p.as_str()).collect();
        assert_eq!(payloads.len(), 5, "each write once: {payloads:?}");
        assert_eq!(payloads[0].1, "a", "the first writer's row is in slot 1");
        seen.sort_unstable();
        assert_eq!(seen, ["a", "w0", "w1", "w2", "w3"]);

        // A cycle: a holds ring 100 and b ring 200, then each writes the other's ring. One of
        // them is refused at once (1213) and loses its transaction; the other then commits.
        let mut b = connect(node.addr, Some("test")).await;
        for (s, ring) in [(&mut a, 100), (&mut b, 200)] {
            s.query_drop("BEGIN").await.expect("begin");
            s.exec_drop(
                "INSERT INTO user_events (user_id, payload) VALUES (?, 'first')",
                (ring,),
            )
            .await
            .expect("insert");
        }
        let cross = |mut s: mysql_async::Conn, ring: i32| {
            tokio::spawn(async move {
                s.query_drop("SET innodb_lock_wait_timeout = 30")
                    .await
                    .expect("timeout");
                let r = s
                    .exec_drop(
                        "INSERT INTO user_events (user_id, payload) VALUES (?, 'second')",
                        (ring,),
                    )
                    .await;
                (s, r)
            })
        };
        let (a_cross, b_cross) = (cross(a, 200), cross(b, 100));
        let ((a, ra), (b, rb)) = (
            a_cross.await.expect("task"),
            b_cross.await.expect("task"),
        );
        let (mut survivor, rings) = match (ra, rb) {
            (Ok(()), Err(e)) if code(&e) == 1213 => (a, (100, 200)),
            (Err(e), Ok(())) if code(&e) == 1213 => (b, (200, 100)),
            other => panic!("one deadlock victim expected: {other:?}"),
        };
        survivor.query_drop("COMMIT").await.expect("commit");
        let rows: Vec<(i32, String)> = c
            .query("SELECT user_id, payload FROM user_events WHERE user_id IN (100, 200) ORDER BY user_id, ring_idx")
            .await
            .expect("rows");
        let mut want = vec![
            (rings.0, "first".to_string()),
            (rings.1, "second".to_string()),
        ];
        want.sort();
        assert_eq!(rows, want, "the victim's rows went with its transaction");
    });
}

#[test]
fn prepared_reads_too_long_for_the_connection_task_are_answered_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut c = connect(node.addr, Some("test")).await;
        c.query_drop("CREATE TABLE big (id INT PRIMARY KEY, v INT)")
            .await
            .expect("create");
        let values: Vec<String> = (1..=1000).map(|i| format!("({i}, {i})")).collect();
        c.query_drop(format!("INSERT INTO big VALUES {}", values.join(",")))
            .await
            .expect("insert");
        c.query_drop("CREATE VIEW small AS SELECT id FROM big WHERE id <= 300")
            .await
            .expect("view");
        // Reads of more rows than the connection's task may read run again off it, whole;
        // so do reads of a view and of the catalog.
        for (sql, param, want) in [
            ("SELECT COUNT(*) FROM big WHERE v > ?", "0", 1000),
            ("SELECT SUM(v) FROM big WHERE id = ?", "7", 7),
            ("SELECT MAX(id) FROM test.big WHERE id < ?", "501", 500),
            ("SELECT COUNT(*) FROM small WHERE id > ?", "0", 300),
            (
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?",
                "test",
                2,
            ),
        ] {
            let got: Option<i64> = c.exec_first(sql, (param,)).await.expect(sql);
            assert_eq!(got, Some(want), "{sql}");
        }
    });
}

/// LOCK TABLES across connections: another client's read of a WRITE-locked table waits (by
/// text and prepared, which start on the connection's task) while other tables stay open to
/// it, and goes on when the holder disconnects, seeing the holder's write; a READ lock lets
/// others read and holds their writes back until its UNLOCK TABLES.
#[test]
fn table_locks_hold_other_connections_until_released() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut a = connect(node.addr, Some("test")).await;
        a.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
            .await
            .expect("create");
        a.query_drop("CREATE TABLE free (id INT PRIMARY KEY)")
            .await
            .expect("create");
        a.query_drop("LOCK TABLES t WRITE").await.expect("lock");
        let mut readers = Vec::new();
        for prepared in [false, true] {
            let mut r = connect(node.addr, Some("test")).await;
            readers.push(tokio::spawn(async move {
                let n: Option<i64> = if prepared {
                    r.exec_first("SELECT COUNT(*) FROM t WHERE id > ?", (0,))
                        .await
                        .expect("prepared read")
                } else {
                    r.query_first("SELECT COUNT(*) FROM t").await.expect("read")
                };
                n
            }));
        }
        let mut c = connect(node.addr, Some("test")).await;
        c.query_drop("INSERT INTO free VALUES (1)")
            .await
            .expect("a table nobody locked");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            readers.iter().all(|r| !r.is_finished()),
            "reads of a WRITE-locked table wait"
        );
        a.query_drop("INSERT INTO t VALUES (1)")
            .await
            .expect("the holder writes");
        let e = a
            .query_drop("SELECT * FROM free")
            .await
            .expect_err("not locked");
        assert_eq!(code(&e), 1100, "{e:?}");
        a.disconnect().await.expect("disconnect");
        for r in readers {
            assert_eq!(r.await.expect("task"), Some(1), "the holder's write, once");
        }

        let mut a = connect(node.addr, Some("test")).await;
        a.query_drop("LOCK TABLES t READ").await.expect("lock");
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM t").await.expect("read");
        assert_eq!(n, Some(1), "a READ lock lets others read");
        let writer =
            tokio::spawn(async move { c.exec_drop("INSERT INTO t VALUES (?)", (2,)).await });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(!writer.is_finished(), "a write waits for the READ lock");
        let e = a
            .query_drop("INSERT INTO t VALUES (3)")
            .await
            .expect_err("read-locked");
        assert_eq!(code(&e), 1099, "{e:?}");
        a.query_drop("UNLOCK TABLES").await.expect("unlock");
        writer.await.expect("task").expect("the write goes on");
        let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM t").await.expect("read");
        assert_eq!(n, Some(2));
    });
}

/// GET_LOCK across connections: a name another connection holds is not taken at once (0), a
/// wait for it goes on when the holder disconnects, IS_USED_LOCK names the new holder, and a
/// prepared GET_LOCK waits the same way.
#[test]
fn user_level_locks_are_held_until_released_or_disconnected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut a = connect(node.addr, None).await;
        let got: Option<i64> = a
            .query_first("SELECT GET_LOCK('migrations', 0)")
            .await
            .expect("get");
        assert_eq!(got, Some(1));
        let mut b = connect(node.addr, None).await;
        let got: Option<i64> = b
            .query_first("SELECT GET_LOCK('Migrations', 0)")
            .await
            .expect("try");
        assert_eq!(got, Some(0), "held by another connection");
        let b_id: Option<u64> = b.query_first("SELECT CONNECTION_ID()").await.expect("id");
        let waiter = tokio::spawn(async move {
            let got: Option<i64> = b
                .exec_first("SELECT GET_LOCK(?, ?)", ("migrations", 30))
                .await
                .expect("prepared get");
            (b, got)
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(!waiter.is_finished(), "it waits while the lock is held");
        a.disconnect().await.expect("disconnect");
        let (mut b, got) = waiter.await.expect("task");
        assert_eq!(got, Some(1), "taken once the holder left");
        let mut c = connect(node.addr, None).await;
        let holder: Option<u64> = c
            .query_first("SELECT IS_USED_LOCK('migrations')")
            .await
            .expect("holder");
        assert_eq!(holder, b_id);
        let released: Option<i64> = c
            .query_first("SELECT RELEASE_LOCK('migrations')")
            .await
            .expect("release");
        assert_eq!(released, Some(0), "not c's to release");
        let released: Option<i64> = b
            .query_first("SELECT RELEASE_LOCK('migrations')")
            .await
            .expect("release");
        assert_eq!(released, Some(1));
    });
}

/// Metadata follows privileges over the wire as in MySQL: a replication account is shown no
/// schema but information_schema and no table, an account with SELECT on one table that table
/// and its database; `mysql` exists on a fresh node, so RonDB's `mysql.ndb_replication` can be
/// created before any account is.
#[test]
fn metadata_follows_the_account_over_the_protocol() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = start_primary(dir.path(), &[]);
    runtime().block_on(async {
        let mut root = connect(node.addr, None).await;
        for sql in [
            "CREATE TABLE mysql.ndb_replication (db VARBINARY(63), table_name VARBINARY(63), \
             server_id INT UNSIGNED, binlog_type INT UNSIGNED, conflict_fn VARBINARY(128), \
             PRIMARY KEY (db, table_name, server_id)) ENGINE=NDB",
            "CREATE DATABASE app",
            "CREATE TABLE app.t (id INT PRIMARY KEY)",
            "CREATE TABLE app.u (id INT PRIMARY KEY)",
            "CREATE USER repl IDENTIFIED BY 'r', one IDENTIFIED BY 'o'",
            "GRANT REPLICATION SLAVE ON *.* TO repl",
            "GRANT SELECT ON app.t TO one",
        ] {
            root.query_drop(sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let dbs: Vec<String> = root.query("SHOW DATABASES").await.expect("root");
        assert_eq!(dbs, ["app", "information_schema", "mysql", "test"]);

        let tables = "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES \
                      WHERE TABLE_SCHEMA <> 'information_schema' ORDER BY 1";
        let mut repl = mysql_async::Conn::new(opts(node.addr, "repl", Some("r"), None))
            .await
            .expect("repl");
        let dbs: Vec<String> = repl.query("SHOW DATABASES").await.expect("repl");
        assert_eq!(dbs, ["information_schema"]);
        let seen: Vec<String> = repl.query(tables).await.expect("repl tables");
        assert!(seen.is_empty(), "{seen:?}");
        let e = repl
            .query_drop("SHOW CREATE TABLE app.t")
            .await
            .expect_err("no privilege on app.t");
        assert_eq!(code(&e), 1142, "{e}");
        assert!(
            e.to_string()
                .contains("SHOW command denied to user 'repl'@'127.0.0.1' for table 't'"),
            "{e}"
        );

        let mut one = mysql_async::Conn::new(opts(node.addr, "one", Some("o"), None))
            .await
            .expect("one");
        let dbs: Vec<String> = one.query("SHOW DATABASES").await.expect("one");
        assert_eq!(dbs, ["app", "information_schema"]);
        let seen: Vec<String> = one.query(tables).await.expect("one tables");
        assert_eq!(seen, ["app.t"]);
        let e = one
            .query_drop("SHOW COLUMNS FROM app.u")
            .await
            .expect_err("no privilege on app.u");
        assert_eq!(code(&e), 1142, "{e}");
    });
}
