#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ in build-sanitize/ (the sanitized
# libraries of scripts/sanitize.sh) and runs each on a fresh copy of its
# committed corpus, fuzz/corpus/<target>/, FUZZ_JOBS at a time: for 30 s, or
# 10-15 s for the fuzzers whose coverage stops growing within seconds
# (below), or FUZZ_SECONDS for every one where it is set.
# A crash, sanitizer finding, failed FUZZ_CHECK, exception other than
# remat::Error, input slower than 10 s or above 2 GB of memory fails the run;
# the input is kept in build-sanitize/fuzz/artifacts/<target>/ and printed
# in base64, so that a CI log holds it. Each found input belongs in a GoogleTest
# regression test and in fuzz/corpus/<target>/.
#   scripts/fuzz.sh [target...]        (default: every fuzz/*_fuzz.cpp)
#   FUZZ_SECONDS=300 scripts/fuzz.sh idx_fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitize_env.sh
jobs=${FUZZ_JOBS:-$(nproc)}

# Seconds per target. On CI's 2-core machine (30 s each, 2026-12-07)
# budget_fuzz, idx_fuzz and text_fuzz found their last new edge within 6 s
# (at 0.1 s, 5.8 s and 0.8 s, after 4,900, 6,600 and 2,500 inputs; they
# run 58,000, 1,100 and 3,200 a second), while checkpoint_fuzz,
# profile_fuzz and safetensors_fuzz were still finding new edges at
# 28-30 s: those keep 30 s. Two at a time, the six take 65 s instead of 90.
seconds_of() {
  if [[ -n "${FUZZ_SECONDS:-}" ]]; then
    echo "$FUZZ_SECONDS"
    return
  fi
  case $1 in
    budget_fuzz | text_fuzz) echo 10 ;;
    idx_fuzz) echo 15 ;;
    *) echo 30 ;;
  esac
}

if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  targets=()
  for source in fuzz/*_fuzz.cpp; do targets+=("$(basename "$source" .cpp)"); done
fi

scripts/sanitize.sh configure >/dev/null
cmake --build build-sanitize -j "$(nproc)" --target "${targets[@]}"

work=build-sanitize/fuzz/work
rm -rf "$work"
mkdir -p "$work"

# One target: its corpus copied, then libFuzzer until the time is up or the
# first failure. The exit status goes to work/<target>.status.
fuzz_one() {
  local target=$1 corpus="$work/$1.corpus" artifacts="build-sanitize/fuzz/artifacts/$1/"
  local seconds
  seconds=$(seconds_of "$target")
  cp -r "fuzz/corpus/$target" "$corpus"
  rm -rf "$artifacts"
  mkdir -p "$artifacts"
  local status=0
  "build-sanitize/fuzz/$target" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts" -print_final_stats=1 >"$work/$target.log" 2>&1 || status=$?
  echo "$status" >"$work/$target.status"
}

for target in "${targets[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n || true; done
  fuzz_one "$target" &
done
wait

failed=0
for target in "${targets[@]}"; do
  log="$work/$target.log"
  status=$(cat "$work/$target.status")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  inputs=$(find "$work/$target.corpus" -type f | wc -l)
  echo "fuzz: $target: ${runs:-?} runs (of at most $(seconds_of "$target") s), ${coverage:-cov: ?}, corpus of $inputs, exit status $status"
  if [[ "$status" != 0 ]]; then
    failed=1
    echo "fuzz: $target FAILED; its log:" >&2
    tail -n 60 "$log" >&2
    for input in "build-sanitize/fuzz/artifacts/$target/"*; do
      [[ -f "$input" ]] || continue
      echo "fuzz: $input in base64 (first 64 KiB):" >&2
      head -c 65536 "$input" | base64 -w 0 >&2
      echo >&2
    done
  fi
done
exit "$failed"
