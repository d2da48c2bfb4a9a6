#!/usr/bin/env bash
# kjv-gpt resumed with another rank count: per-rank files are named
# PATH.rank<r>-of-<w>, so the new run found no file of its own and started
# over from step 0 in silence. It must stop with an error that names the file
# it found and the rank count that wrote it, both ways (1 -> 2 and 2 -> 1).
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
"$remat" "${flags[@]}" --max-steps 2 --checkpoint "$dir/one" >/dev/null
expect_error "but '$dir/one' is there, written by a run of 1" \
  "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$remat" "${flags[@]}" --max-steps 4 --checkpoint "$dir/one" --resume
"$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$remat" "${flags[@]}" --max-steps 2 --checkpoint "$dir/two" >/dev/null
expect_error "but '$dir/two.rank0-of-2' is there, written by a run of 2" \
  "$remat" "${flags[@]}" --max-steps 4 --checkpoint "$dir/two" --resume
