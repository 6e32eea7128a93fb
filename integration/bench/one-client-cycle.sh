#!/usr/bin/env bash
# Splits one client's operation into its steps across the three processes that share the
# machine (the benchmark's client, the primary, its replica), as BENCHMARKS.md ("One
# client: what bounds it") does: a `ringrep-bench peers --systems ringrep --clients 1` run
# of one build, two seconds of its system calls recorded with `perf record` on the
# syscall tracepoints, and `one-client-cycle.py` to read them.
#
#   integration/bench/one-client-cycle.sh BUILD [OUT]
#
# BUILD holds ringrep-source, ringrep-applier and ringrep-bench (as for alternate.sh); OUT
# (default ./one-client-cycle) gets the run's output, the recording and its text. Needs root
# for the tracepoints; the run's data goes under ${RINGREP_BENCH_DIR:-/root/peerbench}. The
# recording itself adds about a microsecond per system call to what it measures.
set -euo pipefail

[ $# -ge 1 ] || { sed -n '2,13p' "$0"; exit 2; }
build=$(cd "$1" && pwd) out=${2:-one-client-cycle}
here=$(cd "$(dirname "$0")" && pwd)
dir=${RINGREP_BENCH_DIR:-/root/peerbench}/one-client-cycle
mkdir -p "$out"
rm -rf "$dir"
"$build/ringrep-bench" peers --systems ringrep --clients 1 --dir "$dir" \
  --seconds 20 --warmup 2 --backlog 1 > "$out/run.log" 2>&1 &
bench=$!
sleep 12   # the rings are filled and the load runs
primary=$(pgrep -f "^$build/ringrep-source" | head -1)
replica=$(pgrep -f "^$build/ringrep-applier" | head -1)
echo "P=$primary R=$replica C=$bench" > "$out/pids"
events=()
for call in fdatasync sendto recvfrom epoll_wait pwrite64 pread64 futex; do
  events+=(-e "syscalls:sys_enter_$call" -e "syscalls:sys_exit_$call")
done
perf record -q -p "$primary,$replica,$bench" "${events[@]}" -o "$out/perf.data" -- sleep 2
perf script -F comm,pid,tid,cpu,time,event -i "$out/perf.data" > "$out/calls.txt" 2>/dev/null
wait "$bench"
grep -E '^\| ringrep \| 1 \||one client' "$out/run.log"
python3 "$here/one-client-cycle.py" "$out/calls.txt" "$out/pids"
