"""Reads a ringrep primary's change stream with python-mysql-replication, as a CDC tool does.

    python3 cdc.py PORT FILE POS [MAX_COMMITS]

Connects as a MySQL replica, asks for the binlog from FILE:POS (a file of SHOW BINARY LOGS and
a position an event carried), and prints one JSON line per change until it has caught up
(non-blocking dump) or has seen MAX_COMMITS commits:
  {"op": "write"|"delete", "table": "db.t", "values": [...]}
  {"op": "update", "table": "db.t", "before": [...], "after": [...]}
  {"query": "CREATE TABLE ..."}                      (DDL)
  {"begin": N, "file": "binlog.000001"}             (a transaction's start: position - size)
  {"commit": XID, "file": "binlog.000001", "pos": N}  (where to resume after this commit)
Values in column order: bytes as hex, decimals and dates as text, TIME as [-]HH:MM:SS.ffffff,
BIT as its number. Exits 2 when the library is not installed.
"""

import datetime
import decimal
import json
import sys

try:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import QueryEvent, RotateEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
except ImportError as e:
    print(f"skipped: python-mysql-replication is not installed: {e}")
    sys.exit(2)


BIT = 16


def time_text(t):
    """A TIME (the library's timedelta) as MySQL writes it, with six fraction digits."""
    us = (t.days * 86400 + t.seconds) * 1000000 + t.microseconds
    sign = "-" if us < 0 else ""
    us = abs(us)
    s, f = divmod(us, 1000000)
    return f"{sign}{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}.{f:06d}"


def row(columns, values):
    """A row's values in column order; a BIT (the library's string of bits) as its number."""
    return [int(v, 2) if c.type == BIT and isinstance(v, str) else plain(v)
            for c, v in zip(columns, values.values())]


def plain(v, in_json=False):
    """A value as JSON can carry it; inside a JSON document the library gives text as bytes."""
    if isinstance(v, datetime.timedelta):
        return time_text(v)
    if isinstance(v, (bytes, bytearray)):
        return v.decode() if in_json else v.hex()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, (set, frozenset)):
        # A SET column's members (the test declares them in alphabetical order).
        return ",".join(sorted(v))
    if isinstance(v, dict):
        return {plain(k, True): plain(x, True) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x, True) for x in v]
    return v


def main():
    port, file, pos = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    max_commits = int(sys.argv[4]) if len(sys.argv) > 4 else None
    stream = BinLogStreamReader(
        connection_settings=dict(host="127.0.0.1", port=port, user="root", passwd=""),
        server_id=4242,
        blocking=False,
        log_file=file,
        log_pos=pos,
        resume_stream=True,
    )
    commits = 0
    current = file
    out = sys.stdout
    for ev in stream:
        if isinstance(ev, RotateEvent):
            current = ev.next_binlog
        elif isinstance(ev, QueryEvent):
            q = ev.query if isinstance(ev.query, str) else ev.query.decode()
            if q == "BEGIN":
                # Where the transaction starts, as Debezium computes it (position - size): its
                # restart point.
                start = ev.packet.log_pos - ev.packet.event_size
                out.write(json.dumps({"begin": start, "file": current}) + "\n")
            else:
                out.write(json.dumps({"query": q}) + "\n")
        elif isinstance(ev, (WriteRowsEvent, DeleteRowsEvent)):
            op = "write" if isinstance(ev, WriteRowsEvent) else "delete"
            for r in ev.rows:
                out.write(json.dumps({"op": op, "table": f"{ev.schema}.{ev.table}",
                                      "values": row(ev.columns, r["values"])}) + "\n")
        elif isinstance(ev, UpdateRowsEvent):
            for r in ev.rows:
                out.write(json.dumps({"op": "update", "table": f"{ev.schema}.{ev.table}",
                                      "before": row(ev.columns, r["before_values"]),
                                      "after": row(ev.columns, r["after_values"])}) + "\n")
        elif isinstance(ev, XidEvent):
            out.write(json.dumps({"commit": ev.xid, "file": current, "pos": ev.packet.log_pos}) + "\n")
            commits += 1
            if max_commits is not None and commits >= max_commits:
                break
    stream.close()


main()
