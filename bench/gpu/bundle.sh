#!/usr/bin/env bash
# Packs what the GPU check needs into one archive, for a GPU machine that has
# the CUDA driver and NCCL but no package registry: test_comm built here with
# the NCCL backend (x86-64-v3, the default), the test programs that hold the
# CUDA tests (test_kernels, test_engine, test_ops, test_nn, test_optim, test_scheduler) and remat for the GPU
# bench, Open MPI's mpirun with
# its plugins and help files, and every shared library these load that a bare
# machine may lack. Only the C runtime, the CUDA driver and NCCL itself
# (218 MB here) are left to the machine; check.sh finds its NCCL.
#   bench/gpu/bundle.sh            # -> build-gpu/remat-gpu.tar.xz
#   bench/gpu/check.sh             # on the GPU machine, carrying that file
set -euo pipefail
cd "$(dirname "$0")/../.."

build=build-gpu
archive=$build/remat-gpu.tar.xz
stage=$build/remat-gpu

if ! command -v nvcc >/dev/null; then
  echo "bundle: nvcc is not on PATH; the NCCL backend needs the CUDA toolkit" >&2
  exit 1
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREMAT_BUILD_BENCH=OFF >/dev/null
if ! grep -q 'REMAT_HAVE_NCCL=1' "$build/build.ninja"; then
  echo "bundle: CMake found no NCCL, so test_comm would have no NCCL tests" >&2
  exit 1
fi
ninja -C "$build" test_comm test_kernels test_engine test_ops test_nn test_optim test_scheduler remat

openmpi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3   # Debian's Open MPI 4.1 plugins
pmix=/usr/lib/x86_64-linux-gnu/pmix2                     # and PMIx's
rm -rf "$stage"
mkdir -p "$stage"/{bin,lib,etc}
cp "$build/tests/test_comm" "$(readlink -f /usr/bin/orterun)" "$(readlink -f /usr/bin/orted)" "$stage/bin/"
for program in test_kernels test_engine test_ops test_nn test_optim test_scheduler; do
  cp "$build/tests/$program" "$stage/bin/"
done
cp "$build/remat" "$stage/bin/"
ln -s orterun "$stage/bin/mpirun"
cp -r "$openmpi" "$stage/lib/openmpi"
cp -r /usr/share/openmpi "$stage/share-openmpi"
cp -r /etc/openmpi "$stage/etc/openmpi"
cp -r "$pmix/lib/pmix" "$stage/lib/pmix"
cp -r "$pmix/share/pmix" "$stage/share-pmix"

# Every library the programs and plugins link, but for those every Linux
# machine with a GPU driver has, flattened into lib/ under its soname.
# cuBLAS (hundreds of MB) and the CUDA runtime come from the machine's CUDA
# 13 (its toolkit, or the nvidia-* wheels PyTorch brings): check.sh finds them.
provided='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libutil|libresolv|libcuda|libnccl|libcublas|libcublasLt|libcudart)\.so'
mapfile -t objects < <(find "$stage/bin" "$stage/lib" -type f \( -name '*.so*' -o -perm -u+x \))
for object in "${objects[@]}"; do
  LD_LIBRARY_PATH="$stage/lib" ldd "$object" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' || true  # not dynamic: nothing to add
done | sort -u | while read -r soname path; do
  if [[ ! "$soname" =~ $provided && ! -e "$stage/lib/$soname" ]]; then
    cp -L "$path" "$stage/lib/$soname"
  fi
done

# The commit it was built from, reported by check.sh ("-dirty": with
# uncommitted changes).
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- || echo -dirty)" >"$stage/COMMIT"
tar -C "$build" -cJf "$archive" remat-gpu
echo "bundle: $archive, $(du -h "$archive" | cut -f1); $(ls "$stage/lib" | wc -l) entries in lib/"
