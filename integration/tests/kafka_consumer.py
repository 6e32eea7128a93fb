#!/usr/bin/env python3
"""A change-topic consumer written from docs/kafka.md alone, with confluent-kafka.

Reads every partition of one ringrep change topic from the beginning and checks what the
documentation promises: keys, envelopes, operations, overwrites as writes, TTL purges as
deletes, tombstones after deletes, the partition of each prefix, and per-prefix order.
Prints a summary and exits 0 when everything holds, 1 otherwise.
"""

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, TopicPartition

OPS = {"write", "update", "delete"}
CAUSES = {"insert", "overwrite", "meta_update", "update", "prefix_delete", "ttl_purge",
          "delete_oldest", "truncate", "delete"}
SOURCE_FIELDS = {"server_id", "seq", "segment", "offset", "commit_time_us", "index"}


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c), as a signed 32-bit value."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = length - rest
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def compact(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--prefix-columns", required=True, help="comma-separated")
    ap.add_argument("--database", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--idle-seconds", type=float, default=3.0)
    args = ap.parse_args()
    prefix_columns = args.prefix_columns.split(",")

    consumer = Consumer({"bootstrap.servers": args.brokers, "group.id": "ringrep-python-check",
                         "enable.auto.commit": False})
    meta = consumer.list_topics(args.topic, timeout=30)
    partitions = sorted(meta.topics[args.topic].partitions)
    consumer.assign([TopicPartition(args.topic, p, 0) for p in partitions])

    records = {p: [] for p in partitions}
    idle_since = time.time()
    while time.time() - idle_since < args.idle_seconds:
        m = consumer.poll(0.2)
        if m is None:
            continue
        if m.error():
            print(f"consumer error: {m.error()}", file=sys.stderr)
            continue
        records[m.partition()].append((m.key(), m.value()))
        idle_since = time.time()
    consumer.close()

    problems = []
    counts = {}
    for partition, recs in records.items():
        last_seq = {}
        previous = None
        for raw_key, raw_value in recs:
            key = json.loads(raw_key)
            if list(key) != sorted(key):
                problems.append(f"key columns not sorted: {raw_key!r}")
            prefix = {c: key[c] for c in prefix_columns}
            want = (murmur2(compact(prefix).encode()) & 0x7FFFFFFF) % len(partitions)
            if want != partition:
                problems.append(f"prefix {prefix} in partition {partition}, expected {want}")
            if raw_value is None:
                # A tombstone follows the delete of the same key.
                if previous is None or previous[0] != key or previous[1].get("op") != "delete":
                    problems.append(f"tombstone for {key} not right after its delete")
                previous = (key, {})
                continue
            e = json.loads(raw_value)
            op, cause = e.get("op"), e.get("cause")
            counts[(op, cause)] = counts.get((op, cause), 0) + 1
            if op not in OPS or cause not in CAUSES:
                problems.append(f"unknown op/cause {op}/{cause}")
            if e.get("database") != args.database or e.get("table") != args.table:
                problems.append(f"wrong table in {e}")
            if e.get("key") != key:
                problems.append(f"envelope key {e.get('key')} differs from record key {key}")
            if (op == "delete") != (e.get("after") is None):
                problems.append(f"'after' must be null exactly for deletes: {e}")
            if set(e.get("source", {})) != SOURCE_FIELDS:
                problems.append(f"source fields {sorted(e.get('source', {}))}")
            seq = e["source"]["seq"]
            pk = compact(prefix)
            if seq < last_seq.get(pk, 0):
                problems.append(f"prefix {pk}: seq {seq} after {last_seq[pk]}")
            last_seq[pk] = seq
            previous = (key, e)

    for needed in [("write", "overwrite"), ("delete", "ttl_purge")]:
        if counts.get(needed, 0) == 0:
            problems.append(f"no {needed[0]} with cause {needed[1]}")
    summary = {"records": sum(len(r) for r in records.values()),
               "by_op_and_cause": {f"{o}/{c}": n for (o, c), n in sorted(counts.items())},
               "problems": problems[:20]}
    print(json.dumps(summary, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
