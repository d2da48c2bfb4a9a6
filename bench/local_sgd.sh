#!/usr/bin/env bash
# Synchronous data parallel against LocalSGD and DiLoCo on Fashion-MNIST:
# N CPU ranks under mpirun (one thread each), the same per-rank batch and
# learning rate, several seeds. Writes OUT/runs.jsonl (one line per run: the
# last epoch's figures of rank 0 and the wall time of the whole mpirun) and
# OUT/table.md (per configuration: mean test accuracy with its range over the
# seeds, allreduce calls and payload bytes per rank, median wall time).
#   bench/local_sgd.sh [OUT=docs/local_sgd] [RANKS=4] [SEEDS="0 1 2"]
# The per-rank batch is 75: 15000 rows per rank make 200 steps per epoch, a
# multiple of H = 1, 4 and 8, so every average falls on a step boundary.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/local_sgd}
ranks=${2:-4}
seeds=${3:-"0 1 2"}
mkdir -p "$out"
runs="$out/runs.jsonl"
: > "$runs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE

configs=(
  "data-parallel|"
  "localsgd-H1|--local-sgd-steps 1"
  "localsgd-H4|--local-sgd-steps 4"
  "localsgd-H8|--local-sgd-steps 8"
  "localsgd-H32|--local-sgd-steps 32"
  "diloco-H8|--local-sgd-steps 8 --diloco"
  "diloco-H32|--local-sgd-steps 32 --diloco"
)
for seed in $seeds; do
  for config in "${configs[@]}"; do
    name=${config%%|*}
    flags=${config#*|}
    start=$(date +%s%N)
    # shellcheck disable=SC2086
    line=$(mpirun --oversubscribe -np "$ranks" build/remat train --task fashion-mnist --threads 1 --batch-size 75 \
             --seed "$seed" --json $flags | tail -n 1)
    wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    wall=$(printf '%d.%03d' $((wall_ms / 1000)) $((wall_ms % 1000)))
    echo "{\"config\": \"$name\", \"seed\": $seed, \"wall_seconds\": $wall, \"last_epoch\": $line}" | tee -a "$runs"
  done
done

python3 - "$runs" "$out/table.md" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
order = []
for r in runs:
    if r["config"] not in order:
        order.append(r["config"])
base_calls = statistics.median(r["last_epoch"]["allreduce_calls"] for r in runs if r["config"] == "data-parallel")
rows = ["| configuration | test accuracy, mean (min-max) | allreduce calls | of data parallel's | allreduce payload MiB | comm s | wall s (median) |",
        "|---|---|---|---|---|---|---|"]
for name in order:
    rs = [r for r in runs if r["config"] == name]
    acc = [100 * r["last_epoch"]["test_accuracy"] for r in rs]
    calls = statistics.median(r["last_epoch"]["allreduce_calls"] for r in rs)
    mib = statistics.median(r["last_epoch"]["allreduce_bytes"] for r in rs) / 2**20
    comm = statistics.median(r["last_epoch"]["comm_seconds"] for r in rs)
    wall = statistics.median(r["wall_seconds"] for r in rs)
    rows.append(f"| {name} | {statistics.mean(acc):.2f}% ({min(acc):.2f}-{max(acc):.2f}) | {calls:.0f} | "
                f"1/{base_calls / calls:.2f} | {mib:.1f} | {comm:.2f} | {wall:.1f} |")
open(sys.argv[2], "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
