#!/usr/bin/python3
"""The measurement behind Note [GEMM library] (kernels/cpu/gemm_library.h):
GEMM float32 GFLOP/s of each candidate library installed here (OpenBLAS,
BLIS and oneDNN from Debian, each loaded alone by bench/gemm_candidates.cpp)
and of the MKL inside a PyTorch, side by side: every round runs each once,
in turn, and the table gives each one's median over rounds.

  /usr/bin/python3 bench/gemm_candidates.py --python VENV/bin/python [--threads 1,2] [--rounds 5] [--size 1024]

A library that is not installed is left out with a note (BLIS: libblis4-openmp,
which scripts/setup.sh does not install)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gemm_compare import TORCH_GEMM  # noqa: E402

LIBRARIES = ["openblas", "blis", "onednn"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the Python whose torch runs the reference (PyTorch 2.x: MKL)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="gemm_candidates_")
    program = os.path.join(work, "gemm_candidates")
    subprocess.run(["g++", "-O2", "-fopenmp", os.path.join(HERE, "gemm_candidates.cpp"), "-o", program, "-ldl"],
                   check=True)
    size = str(args.size)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"GEMM {size}^3 float32, GFLOP/s, median of {args.rounds} alternating rounds; {cpu}, {os.cpu_count()} cores")
    for threads in map(int, args.threads.split(",")):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   BLIS_NUM_THREADS=str(threads))
        runs = {name: [] for name in LIBRARIES + ["torch"]}
        missing = {}
        for _ in range(args.rounds):
            for name in LIBRARIES:
                if name in missing:
                    continue
                run = subprocess.run([program, name, str(threads), size, size, size], capture_output=True, text=True,
                                     env=env)
                if run.returncode == 77:
                    missing[name] = run.stderr.strip()
                    continue
                run.check_returncode()
                runs[name].append(json.loads(run.stdout))
            out = subprocess.run([args.python, "-c", TORCH_GEMM, str(threads), size, "20"], check=True,
                                 capture_output=True, text=True, env=env).stdout
            runs["torch"].append(json.loads(out.splitlines()[-1]))
        mkl = statistics.median(r["gflops"] for r in runs["torch"])
        print(f"{threads} thread{'s' if threads > 1 else ''}:")
        for name, results in runs.items():
            if name in missing:
                print(f"  {name:9} not installed ({missing[name]})")
                continue
            gflops = statistics.median(r["gflops"] for r in results)
            what = (f"torch {results[0]['torch']}, BLAS_INFO={results[0]['blas']}" if name == "torch"
                    else f"kernels {results[0]['kernels']}")
            print(f"  {name:9} {gflops:7.1f}  ({gflops / mkl:.2f} of MKL; {what})")


if __name__ == "__main__":
    main()
