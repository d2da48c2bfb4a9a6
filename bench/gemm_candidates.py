#!/usr/bin/python3
"""The measurement behind Note [GEMM library] (kernels/cpu/gemm_library.h):
GEMM float32 GFLOP/s of each candidate library installed here (OpenBLAS,
BLIS and oneDNN from Debian, each loaded alone by bench/gemm_candidates.cpp,
each with its own threads), of remat's gemm (BLIS on remat's threads,
bench_kernels' BM_Gemm; 1024^3 only) and of the MKL inside a PyTorch, side
by side: every round runs each once, in turn, and the table gives each
one's median over rounds. --shape M,N,K,TA,TB measures another product
(TA, TB: 1 for a transposed operand), e.g. W1's backward dx = dy W:
256,1024,1024,0,0.

  /usr/bin/python3 bench/gemm_candidates.py --python VENV/bin/python [--threads 1,2] [--rounds 5]
      [--shape 1024,1024,1024,0,0]

A library that is not installed is left out with a note (OpenBLAS, BLIS:
scripts/setup.sh installs them; oneDNN: libdnnl2)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gemm_compare import TORCH_GEMM, remat_gemm  # noqa: E402


LIBRARIES = ["openblas", "blis", "onednn"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the Python whose torch runs the reference (PyTorch 2.x: MKL)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shape", default="1024,1024,1024,0,0", help="M,N,K,TA,TB")
    parser.add_argument("--bench-kernels", default=os.path.join(HERE, "..", "build", "bench", "bench_kernels"))
    args = parser.parse_args()
    shape = args.shape.split(",")
    m, n, k = map(int, shape[:3])
    with_remat = shape == ["1024", "1024", "1024", "0", "0"] and os.path.exists(args.bench_kernels)

    work = tempfile.mkdtemp(prefix="gemm_candidates_")
    program = os.path.join(work, "gemm_candidates")
    subprocess.run(["g++", "-O2", "-fopenmp", os.path.join(HERE, "gemm_candidates.cpp"), "-o", program, "-ldl"],
                   check=True)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"GEMM {m}x{n}x{k} (transposed: A {shape[3]}, B {shape[4]}) float32, GFLOP/s, median of {args.rounds} "
          f"alternating rounds; {cpu}, {os.cpu_count()} cores")
    for threads in map(int, args.threads.split(",")):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   BLIS_NUM_THREADS=str(threads))
        runs = {name: [] for name in LIBRARIES + (["remat"] if with_remat else []) + ["torch"]}
        missing = {}
        for _ in range(args.rounds):
            for name in LIBRARIES:
                if name in missing:
                    continue
                run = subprocess.run([program, name, str(threads), *shape], capture_output=True, text=True, env=env)
                if run.returncode == 77:
                    missing[name] = run.stderr.strip()
                    continue
                run.check_returncode()
                runs[name].append(json.loads(run.stdout))
            if with_remat:
                runs["remat"].append(remat_gemm(args.bench_kernels, threads))
            out = subprocess.run([args.python, "-c", TORCH_GEMM, str(threads), *shape, "20"], check=True,
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
                    else results[0]["blas"] if name == "remat" else f"kernels {results[0]['kernels']}")
            print(f"  {name:9} {gflops:7.1f}  ({gflops / mkl:.2f} of MKL; {what})")


if __name__ == "__main__":
    main()
