"""Draws BENCHMARKS.md's curves from the figures recorded beside this script.

    pip install matplotlib
    python3 integration/plots/plot.py            # writes docs/img/*.png

The CSV files hold what `ringrep-bench statements` and `ringrep-bench scale` printed in the runs
BENCHMARKS.md reports (each file names its section); add a run's figures there and draw again.
"""

import csv
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "docs", "img")


def rows(name):
    with open(os.path.join(HERE, name)) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def statements():
    """Rows/s of one statement against its rows: a cost that grows faster than the rows falls."""
    series = defaultdict(list)
    for r in rows("statements.csv"):
        series[(r["statement"], r["table"])].append((int(r["rows"]), float(r["rows_per_s"])))
    before = defaultdict(list)
    for r in rows("statements_before.csv"):
        before[(r["statement"], r["table"])].append((int(r["rows"]), float(r["rows_per_s"])))
    kinds = sorted({s for s, _ in series})
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), sharex=True)
    for ax, kind in zip(axes.flat, kinds):
        for (s, table), pts in sorted(series.items()):
            if s != kind:
                continue
            xs, ys = zip(*sorted(pts))
            line = ax.plot(xs, ys, marker="o", label=table)[0]
            if (s, table) in before:
                bx, by = zip(*sorted(before[(s, table)]))
                ax.plot(bx, by, marker="x", linestyle="--", color=line.get_color(),
                        label=f"{table}, before")
        ax.set_title(kind)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("rows in one statement")
    for ax in axes[:, 0]:
        ax.set_ylabel("rows/s")
    for ax in axes.flat[len(kinds):]:
        ax.axis("off")
    fig.suptitle("One statement of n rows (ringrep-bench statements; dashed: before the fix)")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "statements.png"), dpi=90)


def scale():
    """What the data's size costs: memory, restart, the peer workload; provisioning, verifying."""
    data = rows("scale.csv")
    rep = rows("scale_replica.csv")
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8))

    def panel(ax, pts, label, ylabel, goal=None, goal_label=None):
        xs = [float(x) for x, _ in pts]
        ys = [float(y) for _, y in pts]
        ax.plot(xs, ys, marker="o", linestyle="", label=label)
        if goal is not None:
            ax.axhline(goal, color="grey", linestyle=":", label=goal_label)
        ax.set_xscale("log")
        ax.set_xlabel("rows held")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)

    panel(axes[0], [(r["rows"], r["rss_restarted_x_encoded"]) for r in data],
          "resident ÷ encoded rows, restarted", "×", 2.0, "goal ≤ 2×")
    panel(axes[1], [(r["rows"], r["restart_snapshot_s"]) for r in data],
          "restart from the snapshot", "seconds", 10.0, "goal ≤ 10 s at 10 M")
    ax = axes[2]
    panel(ax, [(r["rows"], r["rb1_ops_per_s"]) for r in data], "RB-1, 16 clients", "ops/s")
    ax2 = ax.twinx()
    ax2.plot([float(r["rows"]) for r in data], [float(r["rb1_cpu_us_per_op_primary"]) for r in data],
             marker="s", linestyle="", color="tab:red", label="primary CPU µs/op")
    ax2.set_ylabel("µs/op")
    ax2.legend(fontsize=7, loc="lower left")
    panel(axes[3], [(r["rows"], r["provision_rows_per_s"]) for r in rep],
          "provisioning a replica", "rows/s", 1e6, "goal ≥ 1 M rows/s")
    axes[3].plot([float(r["rows"]) for r in rep], [float(r["verify_rows_per_s"]) for r in rep],
                 marker="^", linestyle="", label="verify over two servers (goal 3 M)")
    axes[3].legend(fontsize=7)
    fig.suptitle("Costs as the data grows (ringrep-bench scale; two runs per size)")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "scale.png"), dpi=90)


def peers():
    """The four systems side by side: operations per second, CPU per operation, replica lag."""
    by = defaultdict(list)
    for r in rows("peers.csv"):
        by[r["system"]].append(r)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for name, col, label, log in [
        ("ops_per_s", 0, "operations/s", False),
        ("cpu_us_per_op_primary", 1, "primary CPU µs per operation", True),
        ("lag_p99_ms", 2, "replica lag p99, ms", True),
    ]:
        ax = axes[col]
        for system, rs in by.items():
            xs = [int(r["clients"]) for r in rs]
            ys = [float(r[name]) for r in rs]
            ax.plot(xs, ys, marker="o", label=system)
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 16, 64], ["1", "16", "64"])
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("clients")
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("ringrep-bench peers: every write durable (ringrep, Redis always, MariaDB) or not (Redis everysec)")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "peers.png"), dpi=90)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    statements()
    scale()
    peers()
    print("wrote statements.png, scale.png and peers.png in", os.path.normpath(OUT))
