"""Resident memory of a ringrep-source per stored row, as a server holds them: starts BUILD/ringrep-source
on a fresh DATA directory, loads RB-1's rings of 64 rows of 150-byte payloads (PREFIXES rings,
10,000 by default) with multi-row INSERTs through PyMySQL, then overwrites every row once (the
rings wrap), and reads VmRSS after each. BENCHMARKS.md, "The allocator, a fourth time".

    python3 integration/bench/server-memory.py BUILD DATA [PREFIXES]
"""
import re, shutil, subprocess, sys, time, threading
import pymysql

build, data = sys.argv[1], sys.argv[2]
prefixes = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
shutil.rmtree(data, ignore_errors=True)
p = subprocess.Popen([f"{build}/ringrep-source", "serve", "--data-dir", data, "--listen", "127.0.0.1:0"],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
addr = None
for line in p.stdout:
    m = re.search(r"listening on (\S+)", line)
    if m:
        addr = m.group(1); break
if addr is None:
    sys.exit(f"{build}/ringrep-source exited before it listened (status {p.wait()})")
def drain():
    # Its later output is read and dropped so that a full pipe never stops it.
    for _ in p.stdout:
        pass
threading.Thread(target=drain, daemon=True).start()
host, port = addr.rsplit(":", 1)

def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) * 1024

c = pymysql.connect(host=host, port=int(port), user="root", autocommit=True)
cur = c.cursor()
cur.execute("CREATE TABLE test.rb1 (prefix INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, "
            "ring_meta VARBINARY(32), written_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
            "payload VARCHAR(255), PRIMARY KEY (prefix, ring_idx)) ENGINE=NDB "
            "COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=64' PARTITION BY KEY(prefix)")
fill = "p" * 130
def payload(n): return f"{n:020}{fill}"
time.sleep(1)
base = rss()
def load(start):
    n = start
    for p0 in range(0, prefixes, 4):
        rows = []
        for pr in range(p0, min(p0 + 4, prefixes)):
            for _ in range(64):
                rows.append(f"({pr},'{payload(n)}')"); n += 1
        cur.execute("INSERT INTO test.rb1 (prefix, payload) VALUES " + ",".join(rows))
    return n
n = load(0)
time.sleep(2)
loaded = rss()
load(n)
time.sleep(2)
over = rss()
rows = prefixes * 64
print(f"{build}: base {base/2**20:.1f} MiB, loaded {loaded/2**20:.1f} MiB ({(loaded-base)/rows:.0f} B/row), "
      f"after one overwrite of every row {over/2**20:.1f} MiB ({(over-base)/rows:.0f} B/row)")
p.terminate(); p.wait()
shutil.rmtree(data, ignore_errors=True)
