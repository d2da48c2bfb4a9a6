#!/usr/bin/python3
"""Runs workloads in remat and in PyTorch side by side and prints ratios.

The engines run alternately (remat, each PyTorch, remat, ...) for --rounds
rounds on the same thread count, so that drift of a shared machine falls on
all. --python names the Pythons whose torch runs bench/torch_reference.py
(bench/torch_llama.py for W4, which needs PyTorch 2.x; remat's side is
`remat bench --workload W4`, docs/workloads.md):
Debian's /usr/bin/python3 (PyTorch 1.13 on Debian's OpenBLAS, the default)
and, say, a virtual environment with PyTorch 2.x from PyPI (MKL). Per engine
it reports the median over rounds of each round's median step time, the
memory figures (which do not vary), and the BLAS each one used.

  /usr/bin/python3 bench/compare.py --workloads W1,W2 --threads 1 [--rounds 3] [--remat build/remat]
      [--python /usr/bin/python3,VENV/bin/python]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024.0 * 1024.0
# The PyTorch script that runs each workload (the same flags and JSON fields).
TORCH_SCRIPTS = {"W1": "torch_reference.py", "W2": "torch_reference.py", "W4": "torch_llama.py"}


def run_json(command):
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return json.loads(lines[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="W1,W2", help="comma-separated workloads of docs/workloads.md")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--remat", default=os.path.join(HERE, "..", "build", "remat"))
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="comma-separated Pythons whose torch runs the reference (default: Debian's)")
    parser.add_argument("--json", action="store_true", help="also print each run's JSON line")
    parser.add_argument("--torch-attention", default="matmul", choices=["matmul", "sdpa"],
                        help="PyTorch's W2 and W4 attention: separate ops (W2: as remat runs them; W4: as "
                             "Hugging Face's eager Llama), or its fused scaled_dot_product_attention")
    args = parser.parse_args()

    for workload in args.workloads.split(","):
        compare(workload, args)


def blas_of(result):
    """The BLAS a run's JSON line names: remat's gemm field, or torch's BLAS_INFO."""
    if "gemm" in result:
        gemm = result["gemm"]
        return f"{gemm['library']}, {gemm['kernels']} kernels ({gemm['choice']})"
    return f"torch {result['torch_version']}, {result['blas_config']}"


def compare(workload, args):
    commands = {"remat": [args.remat, "bench", "--workload", workload, "--policy", "none",
                          "--threads", str(args.threads), "--steps", str(args.steps), "--json"]}
    for python in args.python.split(","):
        commands[python] = [python, os.path.join(HERE, TORCH_SCRIPTS[workload]), "--workload", workload,
                            "--threads", str(args.threads), "--steps", str(args.steps),
                            "--attention", args.torch_attention]
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
            "blas": blas_of(results[-1]),
        }

    ours = summary("remat")
    print(f"{workload}, policy none, {args.threads} thread(s), median of {args.rounds} rounds x {args.steps} steps")
    print(f"  remat: {ours['blas']}")
    for name in commands:
        if name == "remat":
            continue
        theirs = summary(name)
        print(f"  pytorch ({name}): {theirs['blas']}")
        print(f"  {'':28}{'remat':>12}{'pytorch':>12}{'ratio':>8}")
        print(f"  {'step ms (median)':28}{ours['step_ms']:12.1f}{theirs['step_ms']:12.1f}"
              f"{ours['step_ms'] / theirs['step_ms']:8.3f}")
        print(f"  {'saved after forward (MiB)':28}{ours['saved'] / MIB:12.3f}{theirs['saved'] / MIB:12.3f}"
              f"{ours['saved'] / theirs['saved']:8.3f}")
        print(f"  {'peak activation (MiB)':28}{ours['peak'] / MIB:12.3f}{theirs['peak'] / MIB:12.3f}"
              f"{ours['peak'] / theirs['peak']:8.3f}")
    print()


if __name__ == "__main__":
    main()
