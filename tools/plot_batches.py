#!/usr/bin/python3
"""Plots the batch that fits, from `remat tradeoff --memory-limit M --batch-sizes ...`.

One line per policy: samples/s (y) against batch size (x, log 2). A run that fit the
memory limit is a filled marker; one that ran over it is hollow; one that could not
start (a budget below the graph's minimum) has no point. The fastest fitting run of
all is starred, and the limit is stated in the title. The sibling of
tools/plot_tradeoff.py, which plots the policy/budget sweep.

  tools/plot_batches.py batches.csv -o batches.svg [--title "W2 ..."]   (or .png)
  tools/plot_batches.py --self-test

Needs python3-matplotlib (scripts/setup.sh), hence Debian's /usr/bin/python3.
"""

import argparse
import csv
import itertools
import sys

NEEDED = ("model", "batch_size", "policy", "memory_limit_mib", "fits", "samples_per_s")
MARKERS = "osD^vPX<>ph"


def read_rows(path):
    """The CSV's rows as dicts of typed values (samples None where the run could not start)."""
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
        samples = (row["samples_per_s"] or "").strip()
        try:
            rows.append({"model": row["model"], "batch": int(row["batch_size"]), "policy": row["policy"].strip(),
                         "limit": float(row["memory_limit_mib"]), "fits": row["fits"].strip() == "1",
                         "samples": float(samples) if samples else None})
        except (TypeError, ValueError) as e:
            sys.exit(f"{path}: data row {n}: bad number ({e})")
    return rows


def lines(rows):
    """Per policy (first-seen order), its measured points sorted by batch: (batch, samples/s, fits)."""
    out = {}
    for r in rows:
        points = out.setdefault(r["policy"], [])
        if r["samples"] is not None:
            points.append((r["batch"], r["samples"], r["fits"]))
    return {policy: sorted(points) for policy, points in out.items()}


def fastest(rows):
    """The fitting row with the most samples/s (the first of equals), or None."""
    best = None
    for r in rows:
        if r["fits"] and r["samples"] is not None and (best is None or r["samples"] > best["samples"]):
            best = r
    return best


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
    for policy, points in lines(rows).items():
        colour, marker = next(colours), next(markers)
        if not points:
            ax.plot([], [], color=colour, marker=marker, label=f"{policy} (no run)")
            continue
        xs, ys, fits = zip(*points)
        ax.plot(xs, ys, color=colour, linewidth=1, alpha=0.7, zorder=2)
        ax.plot([], [], color=colour, marker=marker, label=policy)  # the legend's entry, marker and line
        fit = [(x, y) for x, y, f in points if f]
        over = [(x, y) for x, y, f in points if not f]
        if fit:
            ax.scatter(*zip(*fit), marker=marker, s=50, color=colour, zorder=3)
        if over:
            ax.scatter(*zip(*over), marker=marker, s=50, facecolors="none", edgecolors=colour, linewidths=1.3, zorder=3)
    best = fastest(rows)
    if best:
        ax.scatter([best["batch"]], [best["samples"]], marker="*", s=320, color="gold", edgecolors="black",
                   label=f"fastest that fits: {best['policy']}, batch {best['batch']}", zorder=4)
    ax.scatter([], [], marker="o", s=50, facecolors="none", edgecolors="gray", label="over the limit (hollow)")
    ax.set_ylim(bottom=0)  # from zero: a shared machine's noise is not a trend
    ax.set_xscale("log", base=2)
    batches = sorted({r["batch"] for r in rows})
    ax.set_xticks(batches, [str(b) for b in batches])
    limit = rows[0]["limit"]
    ax.set(xlabel="batch size", ylabel="samples/s (batch / median step time)",
           title=f"{title}\nmemory limit {limit:g} MiB (every byte at the step's peak)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(output, dpi=150)


def self_test():
    rows = [{"model": "m", "batch": 16, "policy": "none", "limit": 1, "fits": False, "samples": 9.0},
            {"model": "m", "batch": 8, "policy": "none", "limit": 1, "fits": True, "samples": 5.0},
            {"model": "m", "batch": 16, "policy": "cost", "limit": 1, "fits": True, "samples": 7.0},
            {"model": "m", "batch": 32, "policy": "cost", "limit": 1, "fits": False, "samples": None}]
    assert lines(rows) == {"none": [(8, 5.0, True), (16, 9.0, False)], "cost": [(16, 7.0, True)]}
    assert fastest(rows)["policy"] == "cost"
    assert fastest([r for r in rows if r["policy"] == "none"])["batch"] == 8
    assert fastest([rows[0], rows[3]]) is None
    print("plot_batches: self-test passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv", nargs="?", help="batches.csv written by `remat tradeoff --batch-sizes`")
    parser.add_argument("-o", "--output", help="image to write, .svg or .png")
    parser.add_argument("--title", help="the plot's title (default: the model)")
    parser.add_argument("--self-test", action="store_true", help="check lines and fastest, exit")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not (args.csv and args.output):
        parser.error("needs a CSV and -o OUTPUT")
    if not args.output.lower().endswith((".svg", ".png")):
        parser.error("-o must end in .svg or .png")
    rows = read_rows(args.csv)
    plot(rows, args.output, args.title or f"The batch that fits: {rows[0]['model']}")


if __name__ == "__main__":
    main()
