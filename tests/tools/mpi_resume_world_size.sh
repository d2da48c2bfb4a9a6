#!/usr/bin/env bash
# kjv-gpt resumed with another rank count: each rank would read another shard
# of the blocks from the saved position, so the run would not continue the
# one it resumes. It must stop with an error that names the world size the
# checkpoint was written by, both ways (1 -> 2 and 2 -> 1).
#   mpi_resume_world_size.sh MPIEXEC REMAT WORKDIR
set -euo pipefail
mpiexec=$1 remat=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir"
flags=(train --task kjv-gpt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-interval 2
       --eval-batches 1 --sample-chars 4 --threads 1)
expect_error() {  # expect_error PATTERN COMMAND...
  local pattern=$1; shift
  if output=$("$@" 2>&1); then
    echo "resumed with another rank count:"; echo "$output"; exit 1
  fi
  echo "$output" | grep -qF "$pattern" || { echo "the error does not say what it found:"; echo "$output"; exit 1; }
  echo "ok: $(echo "$output" | grep -m1 "remat: error")"
}
"$remat" "${flags[@]}" --max-steps 2 --output-dir "$dir/one" >/dev/null
expect_error "world_size is '1' in the checkpoint, '2' in this run" \
  "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$remat" "${flags[@]}" --max-steps 4 --output-dir "$dir/one" \
  --resume-from-checkpoint latest
"$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$remat" "${flags[@]}" --max-steps 2 --output-dir "$dir/two" >/dev/null
expect_error "world_size is '2' in the checkpoint, '1' in this run" \
  "$remat" "${flags[@]}" --max-steps 4 --output-dir "$dir/two" --resume-from-checkpoint latest
