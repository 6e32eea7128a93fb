#!/usr/bin/env bash
# Counts the allocation calls (libc's malloc, realloc and calloc) of a ringrep primary and of
# its replica per statement the primary answers, during a `ringrep-bench peers --systems
# ringrep` run of one build, as BENCHMARKS.md ("Allocations per write") does:
#
#   integration/bench/allocations.sh BUILD [CLIENTS]
#
# BUILD holds ringrep-source, ringrep-applier and ringrep-bench (as for alternate.sh);
# CLIENTS defaults to 64. Needs root (uprobes through `perf probe`) and the `mariadb` client;
# the run's data goes under ${RINGREP_BENCH_DIR:-/root/peerbench}/allocations.
set -euo pipefail

[ $# -ge 1 ] || { sed -n '2,10p' "$0"; exit 2; }
build=$(cd "$1" && pwd) clients=${2:-64}
dir=${RINGREP_BENCH_DIR:-/root/peerbench}/allocations
libc=$(ldd "$build/ringrep-source" | awk '/libc\.so/ {print $3}')
for f in malloc realloc calloc; do
  perf probe -l 2>/dev/null | grep -q "probe_libc:$f " || perf probe -q -x "$libc" "$f"
done
events=probe_libc:malloc,probe_libc:realloc,probe_libc:calloc
rm -rf "$dir"
"$build/ringrep-bench" peers --systems ringrep --dir "$dir" --clients "$clients" \
  --seconds 12 --warmup 2 --backlog 1 > "$dir.log" 2>&1 &
bench=$!
sleep 9   # the rings are filled and the load has warmed up
primary=$(pgrep -f "^$build/ringrep-source" | head -1)
replica=$(pgrep -f "^$build/ringrep-applier" | head -1)
port=$(ss -ltnpH | awk -v p="pid=$primary," '$0 ~ p {sub(/.*:/, "", $4); print $4; exit}')
questions() {
  mariadb -h 127.0.0.1 -P "$port" -u root -N -e "SHOW GLOBAL STATUS LIKE 'Questions'" | awk '{print $2}'
}
calls() { perf stat -x, -e "$events" -p "$1" -- sleep 3 2>&1 >/dev/null | awk -F, '{s += $1} END {print s}'; }
q0=$(questions); p=$(calls "$primary"); q1=$(questions); r=$(calls "$replica"); q2=$(questions)
wait "$bench" || { echo "allocations.sh: the benchmark failed, see $dir.log" >&2; exit 1; }
awk -v n="$clients" -v p="$p" -v r="$r" -v a=$((q1 - q0)) -v b=$((q2 - q1)) 'BEGIN {
  printf "%d clients: primary %.1f allocation calls per statement (%d over %d), replica %.1f (%d over %d)\n",
    n, p / a, p, a, r / b, r, b }'
