#!/usr/bin/python3
"""GEMM 1024^3 float32: remat's (kernels::cpu::gemm) against PyTorch's, side by side.

For each thread count, runs remat's BM_Gemm (bench_kernels) and torch.mm in
each given Python alternately for --rounds rounds, and prints GFLOP/s (median
over rounds; each round is itself a median over repetitions), the ratio, and
which BLAS each side used: remat's library and kernels (kernels/cpu/gemm_library.h) and
torch's BLAS_INFO (MKL in PyTorch 2.x from PyPI; OpenBLAS in Debian's 1.13).

  /usr/bin/python3 bench/gemm_compare.py --python /usr/bin/python3,VENV/bin/python [--threads 1,2] [--rounds 5]
"""

import argparse
import json
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = 1024

# torch.mm of op(A) (M, K) by op(B) (K, N); argv: THREADS M N K TRANS_A TRANS_B REPS. One JSON line.
TORCH_GEMM = r"""
import json, re, statistics, sys, time
import torch
threads, m, n, k, ta, tb, reps = map(int, sys.argv[1:8])
torch.set_num_threads(threads)
a = torch.rand(k, m).t() if ta else torch.rand(m, k)
b = torch.rand(n, k).t() if tb else torch.rand(k, n)
c = torch.empty(m, n)
for _ in range(3):
    torch.mm(a, b, out=c)
times = []
for _ in range(reps):
    start = time.perf_counter()
    torch.mm(a, b, out=c)
    times.append(time.perf_counter() - start)
blas = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
print(json.dumps({"gflops": 2.0 * m * n * k / statistics.median(times) / 1e9, "torch": torch.__version__,
                  "blas": blas.group(1) if blas else "unknown", "threads": torch.get_num_threads()}))
"""


def remat_gemm(binary, threads):
    env = dict(os.environ, REMAT_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
    out = subprocess.run([binary, "--benchmark_filter=^BM_Gemm(/|$)", "--benchmark_format=json",
                          "--benchmark_repetitions=5", "--benchmark_min_time=0.3"],
                         check=True, capture_output=True, text=True, env=env).stdout
    runs = [b for b in json.loads(out)["benchmarks"] if b.get("run_type") == "iteration"]
    return {"gflops": statistics.median(b["GFLOP/s"] for b in runs), "blas": runs[0]["label"]}


def torch_gemm(python, threads, reps):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
    size = str(SIZE)
    out = subprocess.run([python, "-c", TORCH_GEMM, str(threads), size, size, size, "0", "0", str(reps)],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="comma-separated Pythons whose torch to compare against")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=20, help="torch.mm calls per round")
    parser.add_argument("--bench-kernels", default=os.path.join(HERE, "..", "build", "bench", "bench_kernels"))
    parser.add_argument("--json", action="store_true", help="also print one JSON line per thread count")
    args = parser.parse_args()
    pythons = args.python.split(",")

    for threads in (int(t) for t in args.threads.split(",")):
        ours, theirs = [], {p: [] for p in pythons}
        for _ in range(args.rounds):
            ours.append(remat_gemm(args.bench_kernels, threads))
            for python in pythons:
                theirs[python].append(torch_gemm(python, threads, args.reps))
        remat_gflops = statistics.median(r["gflops"] for r in ours)
        print(f"GEMM {SIZE}^3 float32, {threads} thread(s), median of {args.rounds} alternating rounds")
        print(f"  remat            {remat_gflops:7.1f} GFLOP/s  ({ours[0]['blas']})")
        record = {"threads": threads, "remat_gflops": remat_gflops, "remat_blas": ours[0]["blas"], "torch": []}
        for python, runs in theirs.items():
            gflops = statistics.median(r["gflops"] for r in runs)
            print(f"  torch {runs[0]['torch']:<10} {gflops:7.1f} GFLOP/s  (BLAS_INFO={runs[0]['blas']}, {python})"
                  f"  remat/torch {remat_gflops / gflops:.2f}")
            record["torch"].append({"python": python, "version": runs[0]["torch"], "blas": runs[0]["blas"],
                                    "gflops": gflops, "ratio": remat_gflops / gflops})
        if args.json:
            print(json.dumps(record))


if __name__ == "__main__":
    main()
