#!/usr/bin/python3
"""W2 beside torch.compile's activation_memory_budget: the table of docs/checkpointing.md.

One command measures, in alternating rounds on one machine and thread count,
PyTorch (eager keep-all, torch.compile at activation_memory_budget 1.0 and
at each of --budgets) through bench/torch_reference.py, and remat's policies
(keep-all, blocks, and cost/chain/milp/auto at each budget as a share of
remat's own keep-all peak) through `remat bench`. Each run is its own
process: 3 warm-ups (torch.compile compiles in them), then --steps timed
steps. Step ms is the median over rounds of each run's median; the time
ratios are medians over rounds of the ratio within the round, so drift of a
shared machine falls on both sides of each ratio. PyTorch's memory (the RSS
rise of a step, see torch_reference.py) is measured in the first round only;
remat's (its allocator) in every round, the median shown. Two more tables
follow: each point's fastest step (noise only adds time) and what each
saves and replays (inductor's partitions as torch_reference.py reads them;
remat's replayed nodes and FLOPs). For ratios paired step by step inside
one process: `remat bench --against none` and bench/torch_compile.py.

  python3 bench/compile_budget.py --remat build-pyrel/remat --python VENV/bin/python \
      [--rounds 3] [--steps 10] [--threads 1] [--budgets 0.5,0.25] [--json-out FILE]
  python3 bench/compile_budget.py --python VENV/bin/python --from-json FILE   # the tables again

--python must name a Python whose torch is 2.x (torch.compile); the script
stops at once, saying so, when it is not.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024.0 * 1024.0
REMAT_POLICIES = ("cost", "chain", "milp", "auto")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remat", default=os.path.join(HERE, "..", "build", "remat"))
    parser.add_argument("--python", help="a Python whose torch is 2.x (needed unless --from-json)")
    parser.add_argument("--workload", default="W2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--budgets", default="0.5,0.25", help="fractions of each engine's own keep-all")
    parser.add_argument("--json-out", help="write every run's JSON line here")
    parser.add_argument("--from-json", help="print the tables of a --json-out file (whole rounds) instead of measuring")
    args = parser.parse_args()
    args.budgets = [float(b) for b in args.budgets.split(",")]
    if any(not 0.0 < b < 1.0 for b in args.budgets):
        parser.error("--budgets are fractions in (0, 1), got %s" % args.budgets)
    if args.rounds < 1 or args.steps < 10:
        parser.error("--rounds >= 1 and --steps >= 10, got %d and %d" % (args.rounds, args.steps))
    return args


def check_engines(args):
    """Stops with a message unless remat runs and args.python has torch 2.x with torch.compile."""
    if args.python is None:
        raise SystemExit("compile_budget: --python must name a Python whose torch is 2.x")
    if not os.access(args.remat, os.X_OK):
        raise SystemExit("compile_budget: no remat binary at %s (--remat)" % args.remat)
    probe = subprocess.run([args.python, "-c", "import torch; print(torch.__version__, hasattr(torch, 'compile'))"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        raise SystemExit("compile_budget: %s cannot import torch (%s); --python must name a Python with "
                         "PyTorch 2.x" % (args.python, (probe.stderr.strip().splitlines() or ["?"])[-1]))
    version, has_compile = probe.stdout.split()
    if int(version.split(".")[0]) < 2 or has_compile != "True":
        raise SystemExit("compile_budget: %s has torch %s, which has no torch.compile; PyTorch 2.x is "
                         "needed" % (args.python, version))
    return version


def configs(args):
    """(engine, label, budget fraction or None, command) for every point, in the order a round runs
    them: PyTorch's and remat's alternate."""
    base = ["--workload", args.workload, "--threads", str(args.threads), "--steps", str(args.steps)]
    torch_side = [("pytorch", "eager keep-all", None, ["--policy", "none"]),
                  ("pytorch", "torch.compile", 1.0, ["--policy", "compile"])]
    torch_side += [("pytorch", "torch.compile", b, ["--policy", "compile", "--memory-budget", repr(b)])
                   for b in args.budgets]
    remat_side = [("remat", "none", None, ["--policy", "none"]), ("remat", "blocks", None, ["--policy", "blocks"])]
    remat_side += [("remat", p, b, ["--policy", p, "--budget", "%g%%" % (100 * b)])
                   for b in args.budgets for p in REMAT_POLICIES]
    order = []
    for i in range(max(len(torch_side), len(remat_side))):
        order += [side[i] for side in (remat_side, torch_side) if i < len(side)]
    out = []
    for engine, label, budget, policy in order:
        if engine == "remat":
            command = [args.remat, "bench"] + base + policy + ["--json"]
        else:
            command = [args.python, os.path.join(HERE, "torch_reference.py")] + base + policy
        out.append((engine, label, budget, command))
    return out


def run_json(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit("compile_budget: failed (exit %d): %s" % (done.returncode, " ".join(command)))
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def measure(args, points, log):
    """runs[i] = the JSON of point i in every round."""
    runs = [[] for _ in points]
    for round_index in range(args.rounds):
        for i, (engine, label, budget, command) in enumerate(points):
            if engine == "pytorch" and round_index > 0:
                command = command + ["--timing-only"]
            result = run_json(command)
            result["round"] = round_index
            runs[i].append(result)
            if log:
                log.write(json.dumps(result) + "\n")
                log.flush()
            print("round %d  %-7s %-15s %-5s %9.1f ms" % (round_index + 1, engine, label,
                  "-" if budget is None else "%g" % budget, result["step_ms_median"]), file=sys.stderr)
    return runs


def ratio(runs, i, j):
    """Median over rounds of point i's step time over point j's in the same round."""
    return statistics.median(a["step_ms_median"] / b["step_ms_median"] for a, b in zip(runs[i], runs[j]))


def peak(results):
    peaks = [r["peak_activation_bytes"] for r in results if r.get("peak_activation_bytes") is not None]
    return statistics.median(peaks)


def own_keep_all(points, i):
    """The index of point i's own keep-all: remat's none, PyTorch eager's itself, torch.compile's at 1.0."""
    engine, label, _, _ = points[i]
    if engine == "remat":
        wanted = ("remat", "none", None)
    elif label == "torch.compile":
        wanted = ("pytorch", "torch.compile", 1.0)
    else:
        wanted = ("pytorch", "eager keep-all", None)
    return next(j for j, p in enumerate(points) if p[:3] == wanted)


def budget_text(engine, label, budget):
    if budget is None:
        return "-"
    return "%g" % budget if engine == "pytorch" else "%g%%" % (100 * budget)


def print_tables(points, runs):
    eager = next(j for j, p in enumerate(points) if p[1] == "eager keep-all")
    print("| engine | policy / config | budget | peak MiB | x own keep-all peak | step ms "
          "| x own keep-all time | x PyTorch eager time |")
    print("|---|---|---|---|---|---|---|---|")
    for i in sorted(range(len(points)), key=lambda i: (points[i][0] == "remat", i)):
        engine, label, budget, _ = points[i]
        own = own_keep_all(points, i)
        step_ms = statistics.median(r["step_ms_median"] for r in runs[i])
        print("| %s | %s | %s | %.1f | %.3f | %.0f | %.3f | %.3f |" % (
            engine, label, budget_text(engine, label, budget), peak(runs[i]) / MIB,
            peak(runs[i]) / peak(runs[own]), step_ms, ratio(runs, i, own), ratio(runs, i, eager)))
    print()
    print_fastest(points, runs, eager)
    print()
    print_replays(points, runs)


def print_fastest(points, runs, eager):
    """The fastest step of every round and run: on a loaded machine noise only adds time, so the
    fastest steps are the least disturbed estimate of each point's own cost."""
    fastest = [min(r["step_ms_min"] for r in results) for results in runs]
    print("| engine | policy / config | budget | fastest step ms | x own keep-all | x PyTorch eager |")
    print("|---|---|---|---|---|---|")
    for i in sorted(range(len(points)), key=lambda i: (points[i][0] == "remat", i)):
        engine, label, budget, _ = points[i]
        print("| %s | %s | %s | %.0f | %.3f | %.3f |" % (
            engine, label, budget_text(engine, label, budget), fastest[i],
            fastest[i] / fastest[own_keep_all(points, i)], fastest[i] / fastest[eager]))


def print_replays(points, runs):
    print("| engine | policy / config | budget | saved after forward MiB | values saved | replayed ops "
          "| replayed GEMMs | replayed GFLOP | replay ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i in sorted(range(len(points)), key=lambda i: (points[i][0] == "remat", i)):
        engine, label, budget, _ = points[i]
        first = runs[i][0]
        saved = first["saved_bytes_after_forward"] / MIB
        if engine == "remat":
            cells = ("-", first["replayed_nodes"], "-", "%.2f" % (first["recompute_flops"] / 1e9),
                     "%.0f" % statistics.median(r["recompute_ms"] for r in runs[i]))
        elif "partitions" in first:
            parts = first["partitions"]
            cells = (sum(p["saved_values"] for p in parts), sum(p["replayed_ops"] for p in parts),
                     sum(p["replayed_matmuls"] for p in parts),
                     "%.2f" % (sum(p["replayed_matmul_flops"] for p in parts) / 1e9), "-")
        else:
            cells = ("-", 0, 0, "0.00", "-")
        print("| %s | %s | %s | %.1f | %s | %s | %s | %s | %s |" % (
            (engine, label, budget_text(engine, label, budget), saved) + cells))


def read_runs(path, points):
    """runs as measure() returns them, from a --json-out file; a round cut short is left out."""
    with open(path) as log:
        results = [json.loads(line) for line in log if line.strip()]
    rounds = len(results) // len(points)
    if rounds == 0:
        raise SystemExit("compile_budget: %s holds no whole round (%d of %d runs)"
                         % (path, len(results), len(points)))
    return [[results[r * len(points) + i] for r in range(rounds)] for i in range(len(points))]


def main():
    args = parse_args()
    points = configs(args)
    if args.from_json:
        runs = read_runs(args.from_json, points)
        version = next(r[0]["torch_version"] for r in runs if "torch_version" in r[0])
        args.rounds = len(runs[0])
    else:
        version = check_engines(args)
        log = open(args.json_out, "w") if args.json_out else None
        runs = measure(args, points, log)
        if log:
            log.close()
    cpu = runs[0][0].get("cpu") or "?"
    print("%s, %d thread(s) each, %d rounds x %d steps after 3 warm-ups; torch %s; remat's CPU: %s\n"
          % (args.workload, args.threads, args.rounds, args.steps, version, cpu))
    print_tables(points, runs)


if __name__ == "__main__":
    main()
