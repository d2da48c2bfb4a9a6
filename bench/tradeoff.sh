#!/usr/bin/env bash
# The memory/time trade-off figure of one workload, remat and PyTorch side by
# side on this machine (1 thread; each engine with its own GEMM library):
#   1. `remat tradeoff --paired` sweeps remat's policies and budgets (6 timed
#      steps per run, each paired with a keep-all copy stepped alternately:
#      the time is the median per-step ratio, step_ms keep-all's times it)
#      into OUT/tradeoff.csv, tradeoff.json and graph_{blocks,cost}.dot;
#   2. bench/torch_reference.py runs PyTorch keep-all and its checkpointing
#      policies (W2: per block, every 2 blocks; W1: checkpoint_sequential in
#      4 segments); each JSON line goes to OUT/pytorch.jsonl and a row with
#      engine=pytorch is appended to the CSV (time relative to PyTorch's own
#      keep-all; no budget, prediction or replay counts);
#   3. tools/plot_tradeoff.py draws OUT/tradeoff.svg (and Graphviz, if
#      installed, the plan graphs).
#
#   bench/tradeoff.sh [W1|W2] [OUT]          (defaults: W2, docs/tradeoff)
#   REMAT=build-x/remat bench/tradeoff.sh W1 /tmp/tradeoff
#   POLICIES=cost,chain,milp,auto,dtr BUDGETS=25%,50% bench/tradeoff.sh W2 /tmp/w2
#   (defaults: every policy; budgets 25%,35%,50%,60%,75%,90% of keep-all's peak)
#
# W2 takes many minutes: run it on a quiet machine, once.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
workload=${1:-W2}
out=${2:-docs/tradeoff}
remat=${REMAT:-$root/build/remat}
python=${PYTHON:-/usr/bin/python3}  # Debian's: the one that sees python3-torch and matplotlib
threads=1
steps=${STEPS:-6}
rounds=${ROUNDS:-1}
policies=${POLICIES:-blocks,sqrt,cost,chain,milp,auto,dtr}
budgets=${BUDGETS:-25%,35%,50%,60%,75%,90%}

case "$workload" in
  W1) torch_policies="none sequential4" ;;
  W2) torch_policies="none blocks every2" ;;
  *) echo "bench/tradeoff.sh: unknown workload '$workload' (W1 or W2)" >&2; exit 2 ;;
esac
if [[ ! -x "$remat" ]]; then
  echo "bench/tradeoff.sh: no remat binary at '$remat' (run scripts/build.sh, or set REMAT=path)" >&2
  exit 1
fi

echo "== remat tradeoff $workload ($threads thread, $steps steps per run)" >&2
"$remat" tradeoff --workload "$workload" --threads "$threads" --steps "$steps" --warmup 3 --rounds "$rounds" --paired \
  --policies "$policies" --budgets "$budgets" --out "$out"

echo "== PyTorch $workload: $torch_policies" >&2
: > "$out/pytorch.jsonl"
for policy in $torch_policies; do
  echo "pytorch $workload $policy ..." >&2
  "$python" "$root/bench/torch_reference.py" --workload "$workload" --policy "$policy" --threads "$threads" \
    --steps "$steps" | tail -n 1 >> "$out/pytorch.jsonl"
done

# One CSV row per PyTorch run, in the columns `remat tradeoff` writes.
"$python" - "$out/pytorch.jsonl" "$out/tradeoff.csv" <<'PY'
import csv, json, sys

LABELS = {"none": "keep all", "blocks": "checkpoint per block", "every2": "checkpoint every 2 blocks",
          "sequential4": "checkpoint_sequential 4"}
MIB = 1024.0 * 1024.0
runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
keep_all = next(r for r in runs if r["policy"] == "none")["step_ms_median"]
with open(sys.argv[2]) as f:
    header = next(csv.reader(f))
with open(sys.argv[2], "a", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
    for r in runs:
        writer.writerow({
            "workload": r["workload"], "engine": "pytorch", "policy": LABELS[r["policy"]], "budget_mib": "",
            "peak_activation_mib": "%.3f" % (r["peak_activation_bytes"] / MIB), "predicted_peak_mib": "",
            "step_ms": "%.3f" % r["step_ms_median"], "time_vs_keep_all": "%.4f" % (r["step_ms_median"] / keep_all),
            "recompute_ms": "", "saved_mib": "%.3f" % (r["saved_bytes_after_forward"] / MIB), "replayed_nodes": ""})
        print("pytorch %-26s %8.1f ms (%.2fx keep-all), peak %.2f MiB, saved %.2f MiB" % (
            LABELS[r["policy"]], r["step_ms_median"], r["step_ms_median"] / keep_all,
            r["peak_activation_bytes"] / MIB, r["saved_bytes_after_forward"] / MIB))
PY

torch_version=$("$python" -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["torch_version"])' \
  "$out/pytorch.jsonl")
"$python" "$root/tools/plot_tradeoff.py" "$out/tradeoff.csv" -o "$out/tradeoff.svg" \
  --title "$workload: peak activation memory vs step time ($threads thread; remat, PyTorch $torch_version)"
if command -v dot > /dev/null; then
  for graph in "$out"/graph_*.dot; do dot -Tsvg "$graph" -o "${graph%.dot}.svg"; done
fi
echo "wrote $out/tradeoff.csv, $out/tradeoff.json, $out/pytorch.jsonl, $out/tradeoff.svg" >&2
