#!/usr/bin/python3
"""Plots the memory/time trade-off of checkpointing policies from `remat tradeoff`.

Each CSV row is a point: peak activation memory (MiB, x) against step time (ms, y),
one marker and colour per policy, labelled with its budget when it had one. Rows
whose `engine` is `pytorch` are PyTorch reference points (stars); with no `engine`
column all rows are remat. The Pareto front of the remat rows (the points no other
beats in both memory and time) is circled and joined by a step line.

  tools/plot_tradeoff.py tradeoff.csv -o tradeoff.svg [--title "W2 ..."]   (or .png)
  tools/plot_tradeoff.py --self-test

Needs python3-matplotlib (scripts/setup.sh), hence Debian's /usr/bin/python3.
"""

import argparse
import csv
import itertools
import sys

NEEDED = ("policy", "budget_mib", "peak_activation_mib", "step_ms")
MARKERS = "osD^vPX<>ph"


def pareto_front(points):
    """The (memory, time) points no other point beats in both, sorted by memory."""
    front = []
    for memory, time in sorted(set(points)):
        if not front or time < front[-1][1]:
            front.append((memory, time))
    return front


def read_rows(path):
    """The CSV's rows as dicts of typed values; exits with a message on bad input."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        fields, records = reader.fieldnames or [], list(reader)
    missing = [c for c in NEEDED if c not in fields]
    if missing:
        sys.exit(f"{path}: missing column(s): {', '.join(missing)}")
    if not records:
        sys.exit(f"{path}: no data rows")
    rows = []
    for n, row in enumerate(records, start=1):
        budget = (row["budget_mib"] or "").strip()
        try:
            rows.append({"engine": (row.get("engine") or "remat").strip(),
                         "policy": (row["policy"] or "").strip(),
                         "budget": float(budget) if budget else None,
                         "memory": float(row["peak_activation_mib"]),
                         "time": float(row["step_ms"])})
        except (TypeError, ValueError) as e:
            sys.exit(f"{path}: data row {n}: bad number ({e})")
    return rows


def plot(rows, output, title):
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"{sys.executable}: no matplotlib; run scripts/setup.sh, use /usr/bin/python3")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5), layout="constrained")
    colours = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    markers = itertools.cycle(MARKERS)
    groups = dict.fromkeys((r["engine"], r["policy"]) for r in rows)  # first-seen order
    for engine, policy in groups:
        group = [r for r in rows if (r["engine"], r["policy"]) == (engine, policy)]
        pytorch = engine == "pytorch"
        ax.scatter([r["memory"] for r in group], [r["time"] for r in group],
                   marker="*" if pytorch else next(markers), s=180 if pytorch else 45,
                   color=next(colours), edgecolors="black" if pytorch else "none",
                   label=f"PyTorch: {policy}" if pytorch else policy, zorder=3)
        for r in group:
            if r["budget"] is not None:
                ax.annotate(f"{r['budget']:g} MiB", (r["memory"], r["time"]), fontsize=7,
                            xytext=(8, 6), textcoords="offset points", color="dimgray")

    front = pareto_front([(r["memory"], r["time"]) for r in rows if r["engine"] != "pytorch"])
    if front:
        xs, ys = zip(*front)
        ax.step(xs, ys, where="post", color="black", linestyle="--", linewidth=0.8, zorder=2)
        ax.scatter(xs, ys, s=220, facecolors="none", edgecolors="black", linewidths=1.2,
                   label="Pareto front (remat)", zorder=4)

    ax.set(xlabel="peak activation memory (MiB)", ylabel="step time (ms)", title=title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(output, dpi=150)


def self_test():
    assert pareto_front([(3, 4), (1, 5), (4, 1), (2, 3)]) == [(1, 5), (2, 3), (4, 1)]
    assert pareto_front([(1, 5), (1, 6), (2, 5), (1, 5)]) == [(1, 5)]
    print("plot_tradeoff: self-test passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv", nargs="?", help="CSV written by `remat tradeoff`")
    parser.add_argument("-o", "--output", help="image to write, .svg or .png")
    parser.add_argument("--title", default="Activation memory vs step time")
    parser.add_argument("--self-test", action="store_true", help="check pareto_front, exit")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not (args.csv and args.output):
        parser.error("needs a CSV and -o OUTPUT")
    if not args.output.lower().endswith((".svg", ".png")):
        parser.error("-o must end in .svg or .png")
    plot(read_rows(args.csv), args.output, args.title)


if __name__ == "__main__":
    main()
