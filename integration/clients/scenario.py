"""One small scenario, run through a Python MySQL driver against a ringrep node.

    python3 scenario.py DRIVER HOST PORT

DRIVER is pymysql, connector-pure, connector-c or sqlalchemy. The scenario: connect, create a
ring table of three rows per prefix, insert four rows (the fourth overwrites the first), read
them back, get an error with its code (an INSERT that names the slot column, refused by the
spec with 1031; a missing table, 1146), run a prepared statement, count an UPDATE's rows with and
without CLIENT_FOUND_ROWS (PyMySQL), and introspect the schema as
the driver's users do (information_schema; SQLAlchemy's reflection). Exits 0 with "ok: ..." when
every check holds, 1 naming the first that does not, 2 when the driver is not installed.
"""

import sys
from importlib.metadata import version

TABLE = "clients_ring"
CREATE = (
    f"CREATE TABLE {TABLE} (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, "
    "ring_meta VARBINARY(64), payload VARCHAR(64), amount DECIMAL(8,2), "
    "PRIMARY KEY (user_id, ring_idx), KEY by_payload (payload)) "
    "COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'"
)


def fail(what):
    print(f"FAILED: {what}")
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


def error_code(e):
    """The MySQL error number of a driver's exception, whatever the driver."""
    for attr in ("errno",):
        if hasattr(e, attr) and isinstance(getattr(e, attr), int):
            return getattr(e, attr)
    orig = getattr(e, "orig", None)
    if orig is not None:
        return error_code(orig)
    args = getattr(e, "args", ())
    if args and isinstance(args[0], int):
        return args[0]
    return None


def dbapi_scenario(conn, paramstyle, prepared_cursor):
    """The scenario on a DB-API connection (autocommit on)."""
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
    cur.execute(CREATE)
    for i, p in enumerate(["a", "b", "c", "d"]):
        cur.execute(
            f"INSERT INTO {TABLE} (user_id, payload, amount) VALUES ({paramstyle}, {paramstyle}, {paramstyle})",
            (1, p, f"{i}.50"),
        )
    cur.execute(f"SELECT payload, amount FROM {TABLE} WHERE user_id = 1 ORDER BY payload")
    rows = [(r[0], str(r[1])) for r in cur.fetchall()]
    check(rows == [("b", "1.50"), ("c", "2.50"), ("d", "3.50")], f"ring rows read back: {rows}")
    try:
        cur.execute(f"INSERT INTO {TABLE} (user_id, ring_idx, payload) VALUES (1, 2, 'x')")
        fail("an INSERT naming the slot column was accepted")
    except Exception as e:  # the driver's own error class
        check(error_code(e) == 1031, f"slot column INSERT: code {error_code(e)} ({e})")
    try:
        cur.execute("SELECT * FROM no_such_table")
        fail("a missing table was read")
    except Exception as e:
        check(error_code(e) == 1146, f"missing table: code {error_code(e)} ({e})")
    pc = prepared_cursor()
    pc.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE user_id = {paramstyle}", (1,))
    check(pc.fetchall()[0][0] == 3, "prepared count")
    pc.close()
    cur.execute(
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_KEY FROM information_schema.COLUMNS "
        f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{TABLE}' ORDER BY ORDINAL_POSITION"
    )
    cols = [tuple(r) for r in cur.fetchall()]
    check(
        cols
        == [
            ("user_id", "int", "PRI"),
            ("ring_idx", "int", "PRI"),
            ("ring_meta", "varbinary", ""),
            ("payload", "varchar", "MUL"),
            ("amount", "decimal", ""),
        ],
        f"information_schema.COLUMNS: {cols}",
    )
    cur.execute(f"SHOW INDEX FROM {TABLE}")
    keys = sorted({r[2] for r in cur.fetchall()})
    check(keys == ["PRIMARY", "by_payload"], f"SHOW INDEX: {keys}")
    cur.execute(f"DROP TABLE {TABLE}")
    cur.close()


def update_counts(plain, found_rows):
    """An UPDATE's row count: the rows it changed, or under CLIENT_FOUND_ROWS the rows it
    matched (what ORMs' optimistic locking compares with the rows it expected); an upsert's
    likewise."""
    cur = plain.cursor()
    cur.execute("DROP TABLE IF EXISTS clients_counts")
    cur.execute("CREATE TABLE clients_counts (id INT PRIMARY KEY, v INT)")
    cur.execute("INSERT INTO clients_counts VALUES (1, 0), (2, 0), (3, 5)")
    cur.execute("UPDATE clients_counts SET v = 5")
    check(cur.rowcount == 2, f"UPDATE changing 2 of 3 rows: rowcount {cur.rowcount}")
    found = found_rows.cursor()
    found.execute("UPDATE clients_counts SET v = 5")
    check(found.rowcount == 3, f"UPDATE matching 3, changing none, CLIENT_FOUND_ROWS: {found.rowcount}")
    # An upsert that leaves its row as it was: 0, or 1 for a row found.
    upsert = "INSERT INTO clients_counts VALUES (3, 5) ON DUPLICATE KEY UPDATE v = VALUES(v)"
    cur.execute(upsert)
    check(cur.rowcount == 0, f"upsert changing nothing: rowcount {cur.rowcount}")
    found.execute(upsert)
    check(found.rowcount == 1, f"upsert changing nothing, CLIENT_FOUND_ROWS: {found.rowcount}")
    # ROW_COUNT() says what the OK packet said.
    found.execute("SELECT ROW_COUNT()")
    row_count = found.fetchone()[0]
    check(row_count == 1, f"ROW_COUNT() after it, CLIENT_FOUND_ROWS: {row_count}")
    cur.execute(upsert)
    cur.execute("SELECT ROW_COUNT()")
    row_count = cur.fetchone()[0]
    check(row_count == 0, f"ROW_COUNT() after it: {row_count}")
    cur.execute("DROP TABLE clients_counts")


def run_pymysql(host, port):
    import pymysql
    from pymysql.constants import CLIENT

    conn = pymysql.connect(host=host, port=port, user="root", database="test", autocommit=True)
    # PyMySQL has no server-side prepared statements: its parameters are quoted client-side.
    dbapi_scenario(conn, "%s", conn.cursor)
    found_rows = pymysql.connect(
        host=host, port=port, user="root", database="test", autocommit=True,
        client_flag=CLIENT.FOUND_ROWS,
    )
    update_counts(conn, found_rows)
    found_rows.close()
    conn.close()
    return f"PyMySQL {version('PyMySQL')}"


def run_connector(host, port, use_pure):
    import mysql.connector

    if not use_pure:
        try:
            import _mysql_connector  # noqa: F401
        except ImportError as e:
            print(f"skipped: mysql-connector-python's C extension does not load here: {e}")
            sys.exit(2)
    conn = mysql.connector.connect(
        host=host, port=port, user="root", database="test", autocommit=True, use_pure=use_pure
    )
    dbapi_scenario(conn, "%s", lambda: conn.cursor(prepared=True))
    conn.close()
    kind = "pure Python" if use_pure else "C extension"
    return f"mysql-connector-python {mysql.connector.__version__} ({kind})"


def run_sqlalchemy(host, port):
    import sqlalchemy as sa

    engine = sa.create_engine(f"mysql+pymysql://root@{host}:{port}/test")
    with engine.connect() as c:
        c.execute(sa.text(f"DROP TABLE IF EXISTS {TABLE}"))
        c.execute(sa.text(CREATE))
        for p in ["a", "b", "c", "d"]:
            c.execute(
                sa.text(f"INSERT INTO {TABLE} (user_id, payload) VALUES (:u, :p)"),
                {"u": 1, "p": p},
            )
        c.commit()
    insp = sa.inspect(engine)
    check(TABLE in insp.get_table_names(), f"get_table_names: {insp.get_table_names()}")
    cols = [(col["name"], str(col["type"]), col["nullable"]) for col in insp.get_columns(TABLE)]
    check(
        cols
        == [
            ("user_id", "INTEGER", False),
            ("ring_idx", "INTEGER", False),
            ("ring_meta", "VARBINARY(64)", True),
            ("payload", "VARCHAR(64)", True),
            ("amount", "DECIMAL(8, 2)", True),
        ],
        f"get_columns: {cols}",
    )
    pk = insp.get_pk_constraint(TABLE)["constrained_columns"]
    check(pk == ["user_id", "ring_idx"], f"get_pk_constraint: {pk}")
    idx = [(i["name"], i["column_names"], i["unique"]) for i in insp.get_indexes(TABLE)]
    check(idx == [("by_payload", ["payload"], False)], f"get_indexes: {idx}")
    table = sa.Table(TABLE, sa.MetaData(), autoload_with=engine)
    with engine.connect() as c:
        rows = c.execute(
            sa.select(table.c.payload).where(table.c.user_id == 1).order_by(table.c.payload)
        ).all()
        check([r[0] for r in rows] == ["b", "c", "d"], f"reflected table read: {rows}")
        try:
            c.execute(table.insert().values(user_id=1, ring_idx=2, payload="x"))
            fail("an INSERT naming the slot column was accepted")
        except sa.exc.DBAPIError as e:
            check(error_code(e) == 1031, f"slot column INSERT: {e}")
        c.rollback()
        c.execute(sa.text(f"DROP TABLE {TABLE}"))
        c.commit()
    return f"SQLAlchemy {sa.__version__} reflection (PyMySQL {version('PyMySQL')})"


def main():
    driver, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    runs = {
        "pymysql": lambda: run_pymysql(host, port),
        "connector-pure": lambda: run_connector(host, port, True),
        "connector-c": lambda: run_connector(host, port, False),
        "sqlalchemy": lambda: run_sqlalchemy(host, port),
    }
    try:
        name = runs[driver]()
    except ImportError as e:
        print(f"skipped: {driver} is not installed ({e})")
        sys.exit(2)
    print(f"ok: {name}")


if __name__ == "__main__":
    main()
