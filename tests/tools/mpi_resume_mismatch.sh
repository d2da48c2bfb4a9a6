#!/usr/bin/env bash
# kjv-gpt on 2 ranks resumed from per-rank checkpoints of different steps (as
# a job killed between the ranks' writes leaves them) must stop with an error
# that lists the steps, on every rank, instead of training on out of step.
#   mpi_resume_mismatch.sh MPIEXEC REMAT WORKDIR
set -euo pipefail
mpiexec=$1 remat=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir"
run() {
  "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$remat" train --task kjv-gpt --n-layer 1 --n-head 2 \
    --n-embd 16 --block-size 16 --batch-size 4 --eval-interval 2 --eval-batches 1 --sample-chars 4 --threads 1 \
    --local-sgd-steps 2 --checkpoint "$dir/ck" "$@"
}
run --max-steps 2 >/dev/null
cp "$dir/ck.rank0-of-2" "$dir/rank0_at_step2"
run --max-steps 4 --resume >/dev/null
cp "$dir/rank0_at_step2" "$dir/ck.rank0-of-2"  # rank 0 back at step 2, rank 1 at step 4
if output=$(run --max-steps 6 --resume 2>&1); then
  echo "resumed although the ranks' checkpoints hold steps 2 and 4:"; echo "$output"; exit 1
fi
echo "$output" | grep -q "the ranks' checkpoints hold different steps (2, 4, rank by rank)" || {
  echo "the error does not name the steps:"; echo "$output"; exit 1
}
echo "ok: $(echo "$output" | grep -m1 "remat: error")"
