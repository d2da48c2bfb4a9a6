#!/usr/bin/env python3
"""Every checkpointing policy on the emulated GPU against keep-all (label cuda,
REMAT_CUDA_EMULATION builds): a reference workload trained for a few steps
with `remat bench --device cuda` under each policy must end with weights
whose bytes equal keep-all's (weights_digest), and keep-all's loss on the
emulated GPU must be the CPU's within float32 rounding of the summation
order. Prints one row per policy.

  emulated_policies.py REMAT W1|W2 [--steps N] [--warmup N] [--batch-size B]

--batch-size (W2 only): W2's GPT at B rows instead of its 16 (`--model gpt`,
whose sizes are W2's), for a run a quarter as long at B = 4.

Each policy trains from the same initial weights, so after the first step
already the weights differ unless every gradient was the same.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time

# (policy, budget): budgets as a share of keep-all's predicted peak; milp's
# solver stops after a few seconds with the best plan found by then. dtr's
# looser budget still evicts (W2: 61 replays at 60%), at a quarter of the
# time under the sanitizers. dtr's share becomes bytes of keep-all's
# measured peak here: given a share and no profile, `remat bench` first
# plans a keep-all run of its own to find that peak (W2 under the
# sanitizers, one step: dtr took 99 s where keep-all took 17 s; at batch 4,
# 29 s with the share, 6 s with its bytes).
POLICIES = [("none", None), ("blocks", None), ("sqrt", None), ("cost", "60%"), ("chain", "60%"),
            ("milp", "60%"), ("auto", "60%"), ("dtr", "75%")]


def bench(remat, workload, device, policy, budget, steps, warmup, profile=None, save_profile=None):
    command = [remat, "bench", *workload, "--device", device, "--policy", policy,
               "--steps", str(steps), "--warmup", str(warmup), "--json", "--solver-time-limit", "5"]
    if budget:
        command += ["--budget", budget]
    if profile:
        command += ["--profile", profile]
    if save_profile:
        command += ["--save-profile", save_profile]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{done.stdout}{done.stderr}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["wall_s"] = time.monotonic() - start
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("remat")
    parser.add_argument("workload", choices=["W1", "W2"])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--batch-size", type=int)
    args = parser.parse_args()
    workload = ["--workload", args.workload]
    if args.batch_size is not None:
        if args.workload != "W2":
            parser.error("--batch-size is for W2 (W1's batch is fixed)")
        workload = ["--model", "gpt", "--batch-size", str(args.batch_size)]  # W2's sizes, B rows
    failures = []
    cpu = bench(args.remat, workload, "cpu", "none", None, args.steps, args.warmup)
    with tempfile.TemporaryDirectory() as scratch:
        profile = f"{scratch}/profile.json"
        # The plans come from a profile of the graph measured on the CPU (two
        # steps; the same graph, and the emulated GPU's times mean nothing).
        bench(args.remat, workload, "cpu", "none", None, 1, 1, save_profile=profile)
        keep_all = bench(args.remat, workload, "cuda", "none", None, args.steps, args.warmup)
        # A run planned from a saved profile needs no warm-ups to settle its
        # plan, one without (dtr's) warms up until a plan would be final: each
        # is compared with keep-all run the same way, as many steps trained.
        keep_all_planned = bench(args.remat, workload, "cuda", "none", None, args.steps, args.warmup, profile=profile)
        relative = abs(keep_all["loss_last"] - cpu["loss_last"]) / abs(cpu["loss_last"])
        print(f"{args.workload} cpu  none   loss {cpu['loss_last']:.7f}  digest {cpu['weights_digest']}")
        print(f"{args.workload} cuda none   loss {keep_all['loss_last']:.7f}  digest {keep_all['weights_digest']}  "
              f"relative to cpu {relative:.2e}  ({keep_all['wall_s']:.1f} s)")
        if relative > 1e-5:
            failures.append(f"keep-all's loss on the emulated GPU is {relative:.2e} from the CPU's (more than 1e-5)")
        replaying = 0
        for policy, budget in POLICIES[1:]:
            # Planned from the saved profile: no profiling step of its own.
            # dtr plans nothing (it evicts as it runs): its budget in bytes.
            if policy == "dtr":
                budget = str(round(float(budget.rstrip("%")) / 100 * keep_all["peak_activation_bytes"]))
            report = bench(args.remat, workload, "cuda", policy, budget, args.steps, args.warmup,
                           profile=None if policy == "dtr" else profile)
            reference = keep_all if policy == "dtr" else keep_all_planned
            if report["warmup"] != reference["warmup"]:
                failures.append(f"policy {policy}: {report['warmup']} warm-up steps against keep-all's "
                                f"{reference['warmup']}: the weights cannot be compared")
            same = report["weights_digest"] == reference["weights_digest"]
            print(f"{args.workload} cuda {policy:6} loss {report['loss_last']:.7f}  digest {report['weights_digest']}  "
                  f"{'bit-identical' if same else 'DIFFERS'}  replayed {report['replayed_nodes']}  "
                  f"peak {report['peak_activation_bytes'] / 2**20:.2f} MiB  ({report['wall_s']:.1f} s)")
            if not same:
                failures.append(f"policy {policy}: weights differ from keep-all's on the emulated GPU")
            replaying += report["replayed_nodes"] > 0
        if replaying < 3:
            failures.append(f"only {replaying} policies replayed anything: the check would be nearly empty")
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))
    print(f"{args.workload}: every policy bit-identical to keep-all on the emulated GPU")


if __name__ == "__main__":
    main()
