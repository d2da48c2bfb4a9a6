#!/usr/bin/python3
"""The measurement behind Note [GEMM library] (kernels/cpu/gemm_library.h):
float32 GFLOP/s of remat's gemm on each library and kernels it can run here,
at the products of W1, W2, a Llama and attention's heads, against the CPU's
FMA peak, on each thread count, in alternating rounds (every round runs each
candidate once, in a rotated order; the tables give medians over rounds and
the best round). Each figure comes twice: by the wall clock, and by the CPU
time the process got (FLOPs per CPU-second times the threads): on a machine
that other programs share, the first says what a user waits, the second
what the library does with the cycles it gets (it does not see threads
waiting for each other: remat's OpenMP threads sleep when they wait).

The candidates all run remat's own gemm (bench_kernels' BM_GemmShape and
BM_GemmHeads: remat's threads, one single-threaded library call per block of
C, operands 64-byte aligned as remat's allocator gives them), told which
library and kernels to take by environment:
  blis-skx      REMAT_GEMM=blis   BLIS_ARCH_TYPE=skx       (AVX-512)
  blis-haswell  REMAT_GEMM=blis   BLIS_ARCH_TYPE=haswell   (AVX2+FMA)
  blis-zen3     REMAT_GEMM=blis   BLIS_ARCH_TYPE=zen3      (AVX2+FMA: BLIS's own pick on a Zen 3)
  onednn        REMAT_GEMM=onednn                          (oneDNN's own pick)
  onednn-avx2   REMAT_GEMM=onednn ONEDNN_MAX_CPU_ISA=AVX2  (AVX2+FMA)
On an AVX-512 CPU the two AVX2 candidates stand for an AVX2 CPU: they are
forced paths on this CPU, not a measurement of another one. On an AVX2 CPU
the AVX-512 ones fall back (the label says what ran).

The peak: each thread's clock (dependent register-to-register integer
adds, one a cycle, in the thread's CPU time, all threads busy at once)
times the FLOPs per cycle of a loop of independent FMAs, 256-bit and, on
AVX-512 CPUs, 512-bit, the faster (bench/gemm_candidates.cpp peak; 32 on
Zen 4: two 256-bit FMA pipes x 8 float32 lanes x 2 FLOPs, AVX-512 running
as two halves; 64 on an Intel Xeon with two 512-bit pipes), summed over
the threads.

--own-threads adds each library as it runs alone with its own threads
(OpenBLAS, BLIS's own kernel choice, oneDNN's; bench/gemm_candidates.cpp)
and --python a PyTorch's torch.mm (MKL), at the same shapes.

--workloads W1,W2 measures whole training steps instead: `remat bench
--workload W --threads T --json` (keep-all) for each float32 library
(REMAT_GEMM=blis, =onednn, each with its kernels for this CPU), in
alternating rounds; it prints the medians over rounds of each run's median
step, the spread (fastest and slowest round), and whether each library's
weights after the steps are the same bits in every round and on every
thread count.

  /usr/bin/python3 bench/gemm_candidates.py [--threads 1,2] [--rounds 5] [--candidates blis-skx,onednn]
      [--own-threads] [--python VENV/bin/python] [--json out.json]
  /usr/bin/python3 bench/gemm_candidates.py --workloads W1,W2 [--threads 1,2] [--rounds 5] [--json out.json]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gemm_compare import TORCH_GEMM  # noqa: E402

CANDIDATES = {
    "blis-skx": {"REMAT_GEMM": "blis", "BLIS_ARCH_TYPE": "skx"},
    "blis-haswell": {"REMAT_GEMM": "blis", "BLIS_ARCH_TYPE": "haswell"},
    "blis-zen3": {"REMAT_GEMM": "blis", "BLIS_ARCH_TYPE": "zen3"},
    "onednn": {"REMAT_GEMM": "onednn"},
    "onednn-avx2": {"REMAT_GEMM": "onednn", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}
OWN_THREADS = ["openblas", "blis", "onednn"]
# bench_kernels' benchmark name -> (M, N, K, TA, TB, what)
NAME = re.compile(r"BM_Gemm(Shape|Heads)/(\d+)/(\d+)/(\d+)/(\d)/(\d)")
HEADS = 96


def describe(kind, m, n, k, ta, tb):
    layout = ("T" if ta else "N") + ("T" if tb else "N")
    return f"{'96 x ' if kind == 'Heads' else ''}{m}x{n}x{k} {layout}"


def remat_round(binary, candidate, threads):
    env = dict(os.environ, REMAT_THREADS=str(threads), OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE",
               **CANDIDATES[candidate])
    out = subprocess.run([binary, "--benchmark_filter=^BM_Gemm(Shape|Heads)/", "--benchmark_format=json",
                          "--benchmark_min_time=0.1"], check=True, capture_output=True, text=True, env=env).stdout
    results, label = {}, ""
    for b in json.loads(out)["benchmarks"]:
        match = NAME.match(b["name"])
        if match:
            kind, *dims = match.groups()
            m, n, k = map(int, dims[:3])
            flops = 2.0 * m * n * k * (HEADS if kind == "Heads" else 1)
            assert b["time_unit"] == "ms", b
            # wall clock, and FLOPs per CPU-second of the process times the threads
            results[(kind, *map(int, dims))] = (b["GFLOP/s"], threads * flops / (b["cpu_time"] * 1e-3) / 1e9)
            label = b.get("label", label)
    return results, label.split("gemm: ", 1)[-1]


def own_round(program, library, threads, shapes):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               BLIS_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
    results, label = {}, ""
    for shape in shapes:
        if shape[0] == "Heads":
            continue  # one call per product: not how a library's own threads would run 96 of them
        run = subprocess.run([program, library, str(threads), *map(str, shape[1:]), "5"], capture_output=True,
                             text=True, env=env)
        if run.returncode == 77:
            return None, run.stderr.strip()
        run.check_returncode()
        out = json.loads(run.stdout)
        results[shape], label = (out["gflops"], None), f"{library} own threads, kernels {out['kernels']}"
    return results, label


def torch_round(python, threads, shapes):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
    results, label = {}, ""
    for shape in shapes:
        if shape[0] == "Heads":
            continue
        out = subprocess.run([python, "-c", TORCH_GEMM, str(threads), *map(str, shape[1:]), "5"], check=True,
                             capture_output=True, text=True, env=env).stdout
        line = json.loads(out.splitlines()[-1])
        results[shape], label = (line["gflops"], None), f"torch {line['torch']}, {line['blas']}"
    return results, label


def workload_rounds(args):
    """Whole steps: remat bench per workload, library and thread count, alternating."""
    remat = os.path.join(os.path.dirname(args.bench_kernels), "..", "remat")
    libraries = ["blis", "onednn"]
    runs = {}
    load = open("/proc/loadavg").read().split()[:3]
    print(f"remat bench, keep-all, median step ms over {args.rounds} alternating rounds (each run: "
          f"its median of 10 steps); load average {' '.join(load)} at the start")
    for r in range(args.rounds):
        for workload in args.workloads.split(","):
            for threads in map(int, args.threads.split(",")):
                for library in libraries[r % 2:] + libraries[:r % 2]:
                    env = dict(os.environ, REMAT_GEMM=library, OMP_NUM_THREADS=str(threads))
                    out = subprocess.run([remat, "bench", "--workload", workload, "--threads", str(threads), "--json"],
                                         check=True, capture_output=True, text=True, env=env).stdout
                    report = json.loads(out.splitlines()[-1])
                    runs.setdefault((workload, threads, library), []).append(report)
    load = open("/proc/loadavg").read().split()[:3]
    print(f"{'workload':8} {'threads':>7} " + "".join(f"{library + ' ms (spread)':>28}" for library in libraries) +
          f"{'onednn / blis':>15}")
    record = {"load_start": load, "rows": []}
    for workload in args.workloads.split(","):
        for threads in map(int, args.threads.split(",")):
            row, medians = f"{workload:8} {threads:7} ", {}
            for library in libraries:
                steps = [report["step_ms_median"] for report in runs[(workload, threads, library)]]
                medians[library] = statistics.median(steps)
                row += f"{medians[library]:12.1f} ({min(steps):6.1f}-{max(steps):6.1f})"
                record["rows"].append({"workload": workload, "threads": threads, "library": library,
                                       "step_ms_medians": steps,
                                       "gemm": runs[(workload, threads, library)][0]["gemm"]})
            print(row + f"{medians['onednn'] / medians['blis']:15.3f}")
    for workload in args.workloads.split(","):
        for library in libraries:
            by_threads = {threads: {report["weights_digest"] for report in reports}
                          for (w, threads, lib), reports in runs.items() if (w, lib) == (workload, library)}
            rounds = "the same bits in every round" if all(len(d) == 1 for d in by_threads.values()) else \
                f"DIFFER between rounds: {by_threads}"
            counts = "and on every thread count" if len(set().union(*by_threads.values())) == 1 else \
                "but not the same on every thread count"
            print(f"{workload} on {library}: weights after the steps {rounds}, {counts}")
    print(f"load average {' '.join(load)} at the end")
    record["load_end"] = load
    if args.json:
        with open(args.json, "w") as out:
            json.dump(record, out, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--own-threads", action="store_true", help="also each library alone, with its own threads")
    parser.add_argument("--python", help="also this Python's torch.mm")
    parser.add_argument("--bench-kernels", default=os.path.join(HERE, "..", "build", "bench", "bench_kernels"))
    parser.add_argument("--json", help="write every round's figures here")
    parser.add_argument("--workloads", help="whole steps of these workloads (W1,W2) instead of single GEMMs")
    args = parser.parse_args()
    if args.workloads:
        return workload_rounds(args)
    candidates = args.candidates.split(",")

    work = tempfile.mkdtemp(prefix="gemm_candidates_")
    program = os.path.join(work, "gemm_candidates")
    subprocess.run(["g++", "-O2", "-fopenmp", "-mavx2", "-mfma", os.path.join(HERE, "gemm_candidates.cpp"), "-o",
                    program, "-ldl"], check=True)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    load = open("/proc/loadavg").read().split()[:3]
    print(f"float32 GEMM through remat's gemm, GFLOP/s: median of {args.rounds} alternating rounds (best round); "
          f"{cpu}, {os.cpu_count()} cores; load average {' '.join(load)} at the start")
    record = {"cpu": cpu, "load_start": load, "rounds": args.rounds, "by_threads": {}}
    for threads in map(int, args.threads.split(",")):
        runs = {name: [] for name in candidates}
        labels, peaks, missing = {}, [], {}
        extra = (["own:" + library for library in OWN_THREADS] if args.own_threads else []) + (
            ["torch"] if args.python else [])
        runs.update({name: [] for name in extra})
        shapes = None
        for r in range(args.rounds):
            out = subprocess.run([program, "peak", str(threads)], check=True, capture_output=True, text=True).stdout
            measured = json.loads(out)
            peaks.append(measured)
            order = candidates[r % len(candidates):] + candidates[:r % len(candidates)]
            for name in order:
                results, labels[name] = remat_round(args.bench_kernels, name, threads)
                runs[name].append(results)
                shapes = shapes or list(results)
            for name in extra:
                if name in missing:
                    continue
                if name == "torch":
                    results, labels[name] = torch_round(args.python, threads, shapes)
                else:
                    results, labels[name] = own_round(program, name[4:], threads, shapes)
                if results is None:
                    missing[name] = labels[name]
                    continue
                runs[name].append(results)
        ghz = statistics.median(statistics.mean(p["ghz"]) for p in peaks)
        flops_per_cycle = statistics.median(statistics.mean(p["fma_gflops"]) / statistics.mean(p["ghz"])
                                            for p in peaks)
        peak = threads * ghz * round(flops_per_cycle)
        print(f"\n{threads} thread{'s' if threads > 1 else ''}: clock {ghz:.2f} GHz, FMA loop "
              f"{flops_per_cycle:.1f} FLOP/cycle -> peak {threads} x {ghz:.2f} x {round(flops_per_cycle)} = "
              f"{peak:.1f} GFLOP/s")
        for name in runs:
            if name in missing:
                print(f"  {name}: not measured ({missing[name]})")
            elif name in labels:
                print(f"  {name}: {labels[name]}")
        names = [name for name in runs if runs[name]]
        table = {}
        for what, index in (("wall clock: median (best round)", 0),
                            ("per CPU-second x threads: median, fraction of peak", 1)):
            print(f"  {what}")
            print("  " + f"{'M x N x K, op':22}" + "".join(f"{name:>18}" for name in names))
            for shape in shapes:
                row = "  " + f"{describe(*shape):22}"
                for name in names:
                    values = [r[shape][index] for r in runs[name] if shape in r and r[shape][index] is not None]
                    if not values:
                        row += f"{'-':>18}"
                        continue
                    median, best = statistics.median(values), max(values)
                    cell = table.setdefault(describe(*shape), {}).setdefault(name, {})
                    cell["wall" if index == 0 else "cpu"] = {"median": median, "best": best, "all": values}
                    row += f"{median:8.1f} ({best:5.1f})  " if index == 0 else f"{median:10.1f} {median / peak:4.2f}  "
                print(row)
        record["by_threads"][threads] = {"ghz": ghz, "flops_per_cycle": flops_per_cycle, "peak": peak,
                                         "labels": labels, "table": table}
    load = open("/proc/loadavg").read().split()[:3]
    print(f"\nload average {' '.join(load)} at the end")
    record["load_end"] = load
    if args.json:
        with open(args.json, "w") as out:
            json.dump(record, out, indent=1)


if __name__ == "__main__":
    main()
