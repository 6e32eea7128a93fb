#!/usr/bin/env bash
# Compares two builds of ringrep on this noisy machine the way BENCHMARKS.md does: their
# `ringrep-bench peers --systems ringrep` runs alternate (A, B, A, B, ...), each on a fresh
# data directory, so that both see the same minutes of the VM. Prints the ranges per build.
#
#   integration/bench/alternate.sh OUT BUILD_A BUILD_B [ROUNDS] [-- PEERS_ARGS...]
#
# BUILD_A and BUILD_B are directories holding ringrep-source, ringrep-applier and
# ringrep-bench of one build each (copy them out of target/release: the benchmark starts the
# ringrep-source and ringrep-applier beside the ringrep-bench it runs). ROUNDS defaults to 2;
# PEERS_ARGS default to `--seconds 5 --warmup 2 --backlog 3`. The raw table rows go to OUT.
# The data directories are made under ${RINGREP_BENCH_DIR:-/root/peerbench}: keep it on the
# disk being measured.
set -euo pipefail

[ $# -ge 3 ] || { sed -n '2,13p' "$0"; exit 2; }
out=$1 a=$2 b=$3
shift 3
rounds=2
if [ $# -gt 0 ] && [ "$1" != "--" ]; then rounds=$1; shift; fi
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--seconds 5 --warmup 2 --backlog 3)
base=${RINGREP_BENCH_DIR:-/root/peerbench}
for build in "$a" "$b"; do
  for bin in ringrep-source ringrep-applier ringrep-bench; do
    [ -x "$build/$bin" ] || { echo "alternate.sh: no $build/$bin" >&2; exit 2; }
  done
done
: > "$out"
for i in $(seq 1 "$rounds"); do
  for build in "$a" "$b"; do
    dir="$base/alternate-$(basename "$build")-$i"
    rm -rf "$dir"
    echo "=== $build round $i $(date +%T)" >> "$out"
    "$build/ringrep-bench" peers --systems ringrep --dir "$dir" "${args[@]}" 2>&1 |
      grep -E '^\| ringrep \| [0-9]+ \| [0-9]|^disk|CONVERGED|DIVERGED' >> "$out" || true
    rm -rf "$dir"
  done
done
# Ranges per build and client count: ops/s, primary CPU µs/op, lag p50 and p99 ms.
awk -F'|' '
  /^===/ { build = $0; sub(/^=== /, "", build); sub(/ round.*/, "", build); next }
  /^\| ringrep \| [0-9]+ \| [0-9]+ \| [0-9.]+ \|/ {
    key = build SUBSEP ($3 + 0); keys[key] = 1
    for (f = 4; f <= 10; f++) v[f] = $f + 0
    upd(key, "ops", v[4]); upd(key, "cpu", v[7]); upd(key, "p50", v[9]); upd(key, "p99", v[10])
  }
  function upd(k, n, x) {
    if (!((k, n, "lo") in r) || x < r[k, n, "lo"]) r[k, n, "lo"] = x
    if (!((k, n, "hi") in r) || x > r[k, n, "hi"]) r[k, n, "hi"] = x
  }
  END {
    print "| build | clients | ops/s | CPU µs/op primary | lag p50 ms | lag p99 ms |"
    print "|---|---:|---:|---:|---:|---:|"
    n = 0
    for (k in keys) order[++n] = k
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) {
      split(order[i], x, SUBSEP); split(order[j], y, SUBSEP)
      if (x[2] + 0 > y[2] + 0 || (x[2] == y[2] && x[1] > y[1])) { t = order[i]; order[i] = order[j]; order[j] = t }
    }
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, p, SUBSEP)
      printf "| %s | %s | %d – %d | %d – %d | %.2f – %.2f | %.2f – %.2f |\n", p[1], p[2],
        r[k, "ops", "lo"], r[k, "ops", "hi"], r[k, "cpu", "lo"], r[k, "cpu", "hi"],
        r[k, "p50", "lo"], r[k, "p50", "hi"], r[k, "p99", "lo"], r[k, "p99", "hi"]
    }
  }' "$out"
