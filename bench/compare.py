#!/usr/bin/python3
"""Runs workloads in remat and in PyTorch side by side and prints ratios.

Both engines run alternately (remat, pytorch, remat, ...) for --rounds rounds
on the same thread count and the same OpenBLAS, so that drift of a shared
machine falls on both. Per engine it reports the median over rounds of each
round's median step time, and the memory figures (which do not vary).

  /usr/bin/python3 bench/compare.py --workloads W1,W2 --threads 1 [--rounds 3] [--remat build/remat]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024.0 * 1024.0


def run_json(command):
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return json.loads(lines[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="W1,W2", help="comma-separated workloads of WORKLOADS.md")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--remat", default=os.path.join(HERE, "..", "build", "remat"))
    parser.add_argument("--json", action="store_true", help="also print each run's JSON line")
    args = parser.parse_args()

    for workload in args.workloads.split(","):
        compare(workload, args)


def compare(workload, args):
    commands = {
        "remat": [args.remat, "bench", "--workload", workload, "--policy", "none",
                  "--threads", str(args.threads), "--steps", str(args.steps), "--json"],
        "pytorch": [sys.executable, os.path.join(HERE, "torch_reference.py"), "--workload", workload,
                    "--threads", str(args.threads), "--steps", str(args.steps)],
    }
    runs = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, command in commands.items():
            result = run_json(command)
            runs[name].append(result)
            if args.json:
                print(json.dumps(result))

    def summary(name):
        results = runs[name]
        return {
            "step_ms": statistics.median(r["step_ms_median"] for r in results),
            "saved": results[-1]["saved_bytes_after_forward"],
            "peak": results[-1]["peak_activation_bytes"],
        }

    ours, theirs = summary("remat"), summary("pytorch")
    print(f"{workload}, policy none, {args.threads} thread(s), OpenBLAS for both, "
          f"median of {args.rounds} rounds x {args.steps} steps")
    print(f"{'':28}{'remat':>12}{'pytorch':>12}{'ratio':>8}")
    print(f"{'step ms (median)':28}{ours['step_ms']:12.1f}{theirs['step_ms']:12.1f}"
          f"{ours['step_ms'] / theirs['step_ms']:8.3f}")
    print(f"{'saved after forward (MiB)':28}{ours['saved'] / MIB:12.3f}{theirs['saved'] / MIB:12.3f}"
          f"{ours['saved'] / theirs['saved']:8.3f}")
    print(f"{'peak activation (MiB)':28}{ours['peak'] / MIB:12.3f}{theirs['peak'] / MIB:12.3f}"
          f"{ours['peak'] / theirs['peak']:8.3f}")
    print()


if __name__ == "__main__":
    main()
