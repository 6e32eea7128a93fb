#!/usr/bin/env python3
"""A consumer that materializes one table from its ringrep change topic, written from
docs/kafka.md alone, with confluent-kafka.

It assigns every partition of the change topic from the beginning (no consumer-group
offsets, `isolation.level=read_committed`), reads until nothing arrives for `--idle-seconds`,
and applies the records to a dict keyed by the record key:

- ringrep's envelope: `write` (and `read`) upsert `after`; `update` upserts `after` under the
  key it gives the row, and removes the row under the record key (the key before the change)
  when the update changed the key; `delete` removes the key; a tombstone removes the key.
- Debezium's envelope (`{"schema", "payload"}`, as `--kafka-format debezium` writes it): `c`,
  `u`, `r` upsert `payload.after`, decoded back to the values ringrep's envelope writes (bytes
  from base64 to hex, DATE days, DATETIME ms or µs, TIMESTAMP strings, JSON text); `d` and
  tombstones remove the key.

Every record but heartbeats carries `ringrep.seq` and `ringrep.order` (docs, "Guarantees"):
within a partition the pairs must increase strictly (a repeat or a step back is a record seen
twice), and no pair may occur twice in the topic. Records are applied in (`ringrep.seq`,
`ringrep.order`) order, which is stream order: within each partition that is the partition's
own order, and a change that moves a row to another key (another partition, maybe) is applied
where it happened relative to the other partitions' records.

The result is compared with `--expect` (a JSON list of rows, each an object column -> value as
ringrep's envelope writes values; the ring's meta rows included): the same rows, every column
equal, value types included. Prints a JSON summary; exits 0 when they are equal, 1 with the
differences otherwise.
"""

import argparse
import base64
import datetime
import json
import struct
import sys
import time
import unicodedata

from confluent_kafka import Consumer, KafkaException, TopicPartition

SEQ_HEADER = "ringrep.seq"
ORDER_HEADER = "ringrep.order"
EPOCH = datetime.datetime(1970, 1, 1)


def canonical(obj) -> str:
    """The JSON text of an object with sorted names, as record keys are written."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def fold(value):
    """A key value in its collation's folded form (docs, "Change topics"): text lower case
    with accents dropped; anything else as is."""
    if not isinstance(value, str):
        return value
    decomposed = unicodedata.normalize("NFD", value)
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn").lower()


def record_key(columns, row) -> str:
    """The record key of `row`: its primary-key columns, text folded, as canonical JSON."""
    return canonical({c: fold(row.get(c)) for c in columns})


def same(a, b) -> bool:
    """JSON values equal, types included (1 is not 1.0, true is not 1)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


# Debezium's values, back to ringrep's rendering (docs, "Debezium's envelope", "Types").

def micros_text(dt: datetime.datetime) -> str:
    return dt.strftime("%Y-%m-%d %H:%M:%S.%f")


def debezium_value(field: dict, value):
    if value is None:
        return None
    name = field.get("name")
    ty = field.get("type")
    if name == "io.debezium.time.Date":
        return (EPOCH + datetime.timedelta(days=value)).date().isoformat()
    if name == "io.debezium.time.Timestamp":
        return micros_text(EPOCH + datetime.timedelta(milliseconds=value))
    if name == "io.debezium.time.MicroTimestamp":
        return micros_text(EPOCH + datetime.timedelta(microseconds=value))
    if name == "io.debezium.time.ZonedTimestamp":
        # ISO-8601 UTC with as many fraction digits as the column's fsp; ringrep writes six.
        text = value[:-1] if value.endswith("Z") else value
        whole, _, fraction = text.partition(".")
        return f"{whole}.{(fraction + '000000')[:6]}Z"
    if name == "io.debezium.data.Json":
        return json.loads(value)
    if ty == "bytes":
        return base64.b64decode(value).hex()
    if ty == "float":
        # Java writes a float's shortest text; ringrep's envelope writes the float widened
        # to a double.
        return struct.unpack("<f", struct.pack("<f", value))[0]
    return value


def debezium_row(row_schema: dict, row: dict) -> dict:
    fields = {f["field"]: f for f in row_schema.get("fields", [])}
    return {c: debezium_value(fields.get(c, {}), v) for c, v in row.items()}


def read_topic(args):
    consumer = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": "ringrep-python-materialize",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
    })
    meta = consumer.list_topics(args.topic, timeout=30)
    topic = meta.topics.get(args.topic)
    if topic is None or topic.error is not None or not topic.partitions:
        raise SystemExit(f"topic {args.topic} not found: {topic and topic.error}")
    partitions = sorted(topic.partitions)
    consumer.assign([TopicPartition(args.topic, p, 0) for p in partitions])
    records = []
    errors = []
    idle_since = time.time()
    while time.time() - idle_since < args.idle_seconds:
        m = consumer.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().fatal():
                raise KafkaException(m.error())
            errors.append(str(m.error()))
            continue
        headers = {}
        for k, v in m.headers() or []:
            headers[k] = v.decode() if v is not None else None
        records.append({
            "partition": m.partition(),
            "offset": m.offset(),
            "key": m.key(),
            "value": m.value(),
            "seq": headers.get(SEQ_HEADER),
            "order": headers.get(ORDER_HEADER),
        })
        idle_since = time.time()
    consumer.close()
    return partitions, records, errors


def check_order(records, problems):
    """Every record's (seq, order) once, each partition's strictly increasing. Returns the
    number of pairs seen more than once."""
    seen = set()
    last = {}
    duplicates = 0
    for r in records:
        where = f"partition {r['partition']} offset {r['offset']}"
        try:
            pair = (int(r["seq"]), int(r["order"]))
        except (TypeError, ValueError):
            problems.append(f"{where}: headers {SEQ_HEADER}={r['seq']!r} {ORDER_HEADER}={r['order']!r}")
            continue
        r["pair"] = pair
        if pair in seen:
            duplicates += 1
            problems.append(f"{where}: (seq, order) {pair} seen before: a record twice")
        seen.add(pair)
        prev = last.get(r["partition"])
        if prev is not None and pair <= prev:
            problems.append(f"{where}: (seq, order) {pair} after {prev}")
        last[r["partition"]] = pair
    return duplicates


def materialize(fmt, records, problems):
    """The table the records leave, by record key; also the primary-key columns."""
    rows = {}
    key_columns = None
    counts = {}
    for r in sorted((r for r in records if "pair" in r), key=lambda r: r["pair"]):
        where = f"partition {r['partition']} offset {r['offset']}"
        if r["key"] is None:
            problems.append(f"{where}: no record key")
            continue
        key_obj = json.loads(r["key"])
        if fmt == "debezium":
            key_obj = key_obj.get("payload") if "payload" in key_obj else key_obj
        if key_columns is None:
            key_columns = sorted(key_obj)
        key = canonical(key_obj)
        if r["value"] is None:
            counts["tombstone"] = counts.get("tombstone", 0) + 1
            rows.pop(key, None)
            continue
        v = json.loads(r["value"])
        if fmt == "ringrep":
            op = v.get("op")
            counts[op] = counts.get(op, 0) + 1
            if op in ("write", "read"):
                rows[key] = v["after"]
            elif op == "update":
                after = v["after"]
                new_key = record_key(sorted(v["key"]), after)
                if new_key != key:
                    rows.pop(key, None)
                rows[new_key] = after
            elif op == "delete":
                rows.pop(key, None)
            else:
                problems.append(f"{where}: unknown op {op!r}")
        else:
            if "payload" not in v or "schema" not in v:
                problems.append(f"{where}: not a {{schema, payload}} value")
                continue
            payload = v["payload"]
            op = payload.get("op")
            counts[op] = counts.get(op, 0) + 1
            if op in ("c", "u", "r"):
                after_schema = next((f for f in v["schema"].get("fields", [])
                                     if f.get("field") == "after"), {})
                rows[key] = debezium_row(after_schema, payload["after"])
            elif op == "d":
                rows.pop(key, None)
            else:
                problems.append(f"{where}: unknown op {op!r}")
    return rows, key_columns, counts


def compare(rows, key_columns, expected, problems):
    if key_columns is None:
        if expected:
            problems.append(f"no records, {len(expected)} rows expected")
        return
    want = {}
    for row in expected:
        k = record_key(key_columns, row)
        if k in want:
            problems.append(f"--expect holds key {k} twice")
        want[k] = row
    for k in sorted(want.keys() - rows.keys()):
        problems.append(f"missing row {k}: {canonical(want[k])}")
    for k in sorted(rows.keys() - want.keys()):
        problems.append(f"extra row {k}: {canonical(rows[k])}")
    for k in sorted(want.keys() & rows.keys()):
        got, exp = rows[k], want[k]
        for c in sorted(got.keys() | exp.keys()):
            if c not in got or c not in exp or not same(got[c], exp[c]):
                problems.append(f"row {k} column {c}: got {json.dumps(got.get(c, '<absent>'))}, "
                                f"expected {json.dumps(exp.get(c, '<absent>'))}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--format", choices=["ringrep", "debezium"], default="ringrep")
    ap.add_argument("--expect", required=True, help="JSON file: a list of rows")
    ap.add_argument("--idle-seconds", type=float, default=3.0)
    args = ap.parse_args()
    with open(args.expect, encoding="utf-8") as f:
        expected = json.load(f)

    partitions, records, errors = read_topic(args)
    problems = []
    duplicates = check_order(records, problems)
    rows, key_columns, counts = materialize(args.format, records, problems)
    compare(rows, key_columns, expected, problems)
    summary = {
        "rows": len(rows),
        "expected_rows": len(expected),
        "records": len(records),
        "duplicates": duplicates,
        "partitions": len(partitions),
        "by_op": dict(sorted(counts.items())),
        "consumer_errors": errors[:5],
        "differences": len(problems),
        "problems": problems[:50],
    }
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
