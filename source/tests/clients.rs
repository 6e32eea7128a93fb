//! Clients written by others, each driven through the same small scenario against a real
//! primary: connect, create a ring table, insert (the fourth insert overwrites the first),
//! read back, an error with its code, a prepared statement, and introspection of the schema
//! (`integration/clients/scenario.py` and `scenario.js`). PyMySQL, mysql-connector-python (pure
//! Python and its C extension), SQLAlchemy's table reflection and Node's mysql2. A client that
//! is not installed is skipped with a message (`.ci/run` installs them all). mysql_async (Rust)
//! runs the same scenario in-process; the mariadb client and mariadb-dump are driven below
//! and by the other server tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use mysql_async::prelude::*;
use ringrep_testkit::node::{self, Node};

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration/clients")
}

fn start_primary(data_dir: &Path) -> Node {
    node::primary(Path::new(env!("CARGO_BIN_EXE_ringrep-source")), data_dir)
}

/// Whether a client that is not installed fails the test (`.ci/run` sets it, having
/// installed them all) instead of being skipped.
fn required() -> bool {
    std::env::var_os("RINGREP_REQUIRE_CLIENTS").is_some_and(|v| v == "1")
}

fn skip(what: String) -> Option<String> {
    assert!(!required(), "RINGREP_REQUIRE_CLIENTS=1 and {what}");
    eprintln!("skipped: {what}");
    None
}

/// Runs one scenario: exit 0 passes, 2 is a client that is not installed (skipped, saying
/// so), anything else fails the test with the client's output.
fn run(program: &str, args: &[&str], node: &Node) -> Option<String> {
    let addr = node.addr;
    let out = match Command::new(program)
        .args(args)
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .current_dir(clients_dir())
        .output()
    {
        Ok(out) => out,
        Err(e) => return skip(format!("{program} {args:?}: {e}")),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => {
            assert!(text.contains("ok: "), "{text}");
            Some(text.trim().to_string())
        }
        Some(2) => skip(format!("{program} {args:?}: {}", text.trim())),
        _ => panic!("{program} {args:?} failed against ringrep:\n{text}"),
    }
}

#[test]
fn python_and_node_drivers_run_the_scenario() {
    let dir = tempfile::tempdir().expect("tempdir");
    let primary = start_primary(dir.path());
    let mut passed = Vec::new();
    for driver in ["pymysql", "connector-pure", "connector-c", "sqlalchemy"] {
        passed.extend(run("python3", &["scenario.py", driver], &primary));
    }
    passed.extend(run("node", &["scenario.js"], &primary));
    eprintln!("clients that passed: {passed:#?}");
}

/// `mariadb-dump` (or `mysqldump`), or `None` (having said why) when neither is installed.
fn dump_tool() -> Option<&'static str> {
    let found = ["mariadb-dump", "mysqldump"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        skip("no mariadb-dump or mysqldump".into());
    }
    found
}

/// `program` pointed at `node` as root.
fn client_of(program: &str, node: &Node) -> Command {
    let mut cmd = Command::new(program);
    let port = node.addr.port().to_string();
    cmd.args(["-h", "127.0.0.1", "-P", &port, "-u", "root"]);
    cmd
}

/// A dump tool's output against `node` (stdout, and whether it succeeded with stderr).
fn dump(tool: &str, node: &Node, args: &[&str]) -> (bool, String, String) {
    let out = client_of(tool, node)
        .args(args)
        .output()
        .expect("run the dump tool");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Feeds `sql` to the mariadb client on `node`: (succeeded, stderr).
fn load(client: &str, node: &Node, sql: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = client_of(client, node)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the client");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(sql.as_bytes())
        .expect("feed the client");
    let out = child.wait_with_output().expect("client");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// mariadb-dump of a primary, loaded into another through the mariadb client: schemas, stored
/// procedures (`--routines`) and the rows of plain tables come across; the rows of a ring table are refused on load with the
/// spec's 1031 (a dump's INSERT names the slot column) and the ring stays as it was. A dump
/// with mariadb-dump's defaults (LOCK TABLES ... READ LOCAL around the reads, LOCK TABLES ...
/// WRITE around each table's INSERTs in the output) dumps and loads too.
#[test]
fn mariadb_dump_output_loads_into_another_node() {
    let (Some(tool), Some(client)) = (dump_tool(), node::mysql_client()) else {
        return;
    };
    let a_dir = tempfile::tempdir().expect("tempdir");
    let b_dir = tempfile::tempdir().expect("tempdir");
    let a = start_primary(a_dir.path());
    let b = start_primary(b_dir.path());
    let setup = "CREATE DATABASE shop; USE shop; \
        CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(20), price DECIMAL(8,2), at DATETIME(3), note TEXT, UNIQUE KEY by_item (item)); \
        INSERT INTO orders VALUES (1, 'tea', 3.50, '2026-01-01 10:00:00.250', 'it''s hot'), (2, 'cake', NULL, NULL, NULL); \
        CREATE TABLE events (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), payload VARCHAR(64), PRIMARY KEY (user_id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=2'; \
        INSERT INTO events (user_id, payload) VALUES (1, 'a'), (1, 'b'), (1, 'c')";
    let (ok, _, err) = node::run_client(client, a.addr, None, setup);
    assert!(ok, "{err}");
    let (ok, err) = load(
        client,
        &a,
        "DELIMITER //\nCREATE PROCEDURE shop.add_order(IN n INT) BEGIN INSERT INTO shop.orders (id, item) VALUES (n, CONCAT('order ', n)); END//\nDELIMITER ;\n",
    );
    assert!(ok, "{err}");

    // mariadb-dump's defaults: it locks the tables it reads, and its output locks each table
    // around its rows. Loaded into a third node, the plain table's rows come across.
    let (ok, locked, err) = dump(
        tool,
        &a,
        &["--databases", "shop", "--ignore-table=shop.events"],
    );
    assert!(ok, "{err}");
    assert!(locked.contains("LOCK TABLES `orders` WRITE"), "{locked}");
    let c_dir = tempfile::tempdir().expect("tempdir");
    let c = start_primary(c_dir.path());
    let (ok, err) = load(client, &c, &locked);
    assert!(ok, "{err}");
    let q = "SELECT id, item, price, at, note FROM shop.orders ORDER BY id";
    assert_eq!(
        node::run_client(client, a.addr, None, q).1,
        node::run_client(client, c.addr, None, q).1,
        "a default dump's rows came across"
    );

    let (ok, plain, err) = dump(
        tool,
        &a,
        &[
            "--single-transaction",
            "--skip-add-locks",
            "--routines",
            "--databases",
            "shop",
            "--ignore-table=shop.events",
        ],
    );
    assert!(ok, "{err}");
    assert!(plain.contains("CREATE PROCEDURE"), "{plain}");
    let (ok, schema, err) = dump(
        tool,
        &a,
        &["--single-transaction", "--no-data", "shop", "events"],
    );
    assert!(ok, "{err}");
    assert!(
        schema.contains("COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=2'"),
        "{schema}"
    );
    let (ok, err) = load(client, &b, &plain);
    assert!(ok, "{err}");
    let (ok, err) = load(client, &b, &format!("USE shop;\n{schema}"));
    assert!(ok, "{err}");
    let q = "SELECT id, item, price, at, note FROM shop.orders ORDER BY id";
    let (_, on_a, _) = node::run_client(client, a.addr, None, q);
    let (_, on_b, _) = node::run_client(client, b.addr, None, q);
    assert_eq!(on_a, on_b, "the plain table's rows came across");
    assert!(on_a.contains("it's hot"), "{on_a}");
    // The procedure came across with the database (SHOW PROCEDURE STATUS, SHOW CREATE
    // PROCEDURE and the database collation as the dump tool compares them).
    let (ok, _, err) = node::run_client(client, b.addr, None, "CALL shop.add_order(9)");
    assert!(ok, "{err}");
    let (_, called, _) = node::run_client(
        client,
        b.addr,
        None,
        "SELECT item FROM shop.orders WHERE id = 9",
    );
    assert!(called.contains("order 9"), "{called}");
    let q = "SHOW CREATE TABLE shop.events";
    assert_eq!(
        node::run_client(client, a.addr, None, q).1,
        node::run_client(client, b.addr, None, q).1,
        "the ring table's definition came across"
    );

    // The ring's rows: the dump's INSERT names every column, the slot column included.
    let (ok, rows, err) = dump(
        tool,
        &a,
        &[
            "--single-transaction",
            "--skip-add-locks",
            "--no-create-info",
            "shop",
            "events",
        ],
    );
    assert!(ok, "{err}");
    let (ok, err) = load(client, &b, &format!("USE shop;\n{rows}"));
    assert!(!ok && err.contains("ERROR 1031"), "{err}");
    let (_, after, _) = node::run_client(client, b.addr, None, "SELECT COUNT(*) FROM shop.events");
    assert!(
        after.ends_with("0\n"),
        "the refused load left rows: {after}"
    );
}

/// The scenario of `scenario.py` through mysql_async, Rust's asynchronous driver: text and
/// binary (prepared) protocol, its error type, and the schema as its users read it.
#[test]
fn mysql_async_runs_the_scenario() {
    let dir = tempfile::tempdir().expect("tempdir");
    let primary = start_primary(dir.path());
    let rt = node::runtime();
    rt.block_on(async {
        let mut c = node::connect(primary.addr, Some("test")).await;
        c.query_drop(
            "CREATE TABLE clients_ring (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
             ring_meta VARBINARY(64), payload VARCHAR(64), amount DECIMAL(8,2), \
             PRIMARY KEY (user_id, ring_idx), KEY by_payload (payload)) \
             COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'",
        )
        .await
        .expect("create");
        for (i, p) in ["a", "b", "c", "d"].iter().enumerate() {
            c.exec_drop(
                "INSERT INTO clients_ring (user_id, payload, amount) VALUES (?, ?, ?)",
                (1, p, format!("{i}.50")),
            )
            .await
            .expect("insert");
        }
        let rows: Vec<(String, String)> = c
            .query("SELECT payload, amount FROM clients_ring WHERE user_id = 1 ORDER BY payload")
            .await
            .expect("read back");
        assert_eq!(
            rows,
            [("b", "1.50"), ("c", "2.50"), ("d", "3.50")]
                .map(|(p, a)| (p.to_string(), a.to_string()))
        );
        let e = c
            .query_drop("INSERT INTO clients_ring (user_id, ring_idx, payload) VALUES (1, 2, 'x')")
            .await
            .expect_err("an INSERT naming the slot column");
        assert_eq!(node::code(&e), 1031, "{e}");
        let e = c
            .query_drop("SELECT * FROM no_such_table")
            .await
            .expect_err("a missing table");
        assert_eq!(node::code(&e), 1146, "{e}");
        let stmt = c
            .prep("SELECT COUNT(*) FROM clients_ring WHERE user_id = ?")
            .await
            .expect("prepare");
        let n: Option<u64> = c.exec_first(&stmt, (1,)).await.expect("execute");
        assert_eq!(n, Some(3));
        let cols: Vec<(String, String, String)> = c
            .query(
                "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_KEY FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'clients_ring' \
                 ORDER BY ORDINAL_POSITION",
            )
            .await
            .expect("information_schema.COLUMNS");
        let want = [
            ("user_id", "int", "PRI"),
            ("ring_idx", "int", "PRI"),
            ("ring_meta", "varbinary", ""),
            ("payload", "varchar", "MUL"),
            ("amount", "decimal", ""),
        ]
        .map(|(a, b, k)| (a.to_string(), b.to_string(), k.to_string()));
        assert_eq!(cols, want);
        let keys: Vec<String> = c
            .query_map("SHOW INDEX FROM clients_ring", |row: mysql_async::Row| {
                row.get::<String, _>(2).unwrap_or_default()
            })
            .await
            .expect("SHOW INDEX");
        let mut keys = keys;
        keys.sort();
        keys.dedup();
        assert_eq!(keys, ["PRIMARY", "by_payload"]);
        c.query_drop("DROP TABLE clients_ring").await.expect("drop");
        c.disconnect().await.expect("disconnect");
    });
}
