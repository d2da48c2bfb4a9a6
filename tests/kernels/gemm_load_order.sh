#!/usr/bin/env bash
# The GEMM a program runs does not depend on what the process loaded first
# (Note [GEMM library] in kernels/cpu/gemm_library.h; issue 31): `remat
# --version` prints the same gemm line when run plainly and when Debian's
# OpenBLAS is preloaded and told to run its SSE kernels, as CBC's LAPACK
# loaded it on the AVX-512 Xeon of family 6, model 207; and that line names
# kernels as wide as the CPU. Also the user's settings: REMAT_GEMM picks the
# float32 library and names it, a bad value fails naming it; BLIS_ARCH_TYPE
# is kept where the CPU can run it, set aside with the reason where it names
# no configuration.
#   tests/kernels/gemm_load_order.sh REMAT
set -euo pipefail
remat=$1

plain=$("$remat" --version | grep '^gemm:')
echo "plain:     $plain"
[[ "$plain" == *"by CPUID"* ]] || { echo "FAIL: the kernels are not the CPU's own"; exit 1; }

# The OpenBLAS this machine resolves libopenblas.so.0 to (CBC's LAPACK
# loads the same file; `ldd $remat` lists it where the link pulls it in).
libraries=$(ldconfig -p)
openblas=$(awk '$1 == "libopenblas.so.0" {print $NF}' <<<"$libraries" | head -n 1)
if [[ -z "$openblas" ]]; then
  echo "no libopenblas.so.0 on this machine: nothing can preload it"
  exit 77
fi
ldd "$remat" | grep -E 'openblas|lapack|blis' || true
preloaded=$(LD_PRELOAD="$openblas" OPENBLAS_CORETYPE=Prescott "$remat" --version | grep '^gemm:')
echo "preloaded: $preloaded (OpenBLAS $openblas with OPENBLAS_CORETYPE=Prescott)"
[[ "$plain" == "$preloaded" ]] || { echo "FAIL: the GEMM choice changed with what was loaded first"; exit 1; }
echo "same GEMM choice"

for library in blis onednn; do
  line=$(REMAT_GEMM=$library "$remat" --version | grep '^gemm:')
  echo "REMAT_GEMM=$library: $line"
  name=$([[ $library == blis ]] && echo BLIS || echo oneDNN)
  [[ "$line" == "gemm: $name "*"(REMAT_GEMM=$library, on this "* ]] ||
    { echo "FAIL: REMAT_GEMM=$library did not run $name, or the line does not say why"; exit 1; }
done
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
if REMAT_GEMM=mkl "$remat" --version >/dev/null 2>"$errors"; then
  echo "FAIL: REMAT_GEMM=mkl was accepted"; exit 1
fi
grep -q "REMAT_GEMM=mkl names no GEMM library: use blis or onednn" "$errors" ||
  { echo "FAIL: REMAT_GEMM=mkl's error does not name it:"; cat "$errors"; exit 1; }
echo "REMAT_GEMM=mkl: $(grep -o 'REMAT_GEMM=mkl.*' "$errors")"

# BLIS_ARCH_TYPE, seen where BLIS runs float32 (REMAT_GEMM=blis).
kernels() { sed -E 's/^gemm: BLIS [^,]*, ([a-z0-9_]+) kernels.*/\1/' <<<"$1"; }
plain=$(REMAT_GEMM=blis "$remat" --version | grep '^gemm:')
forced=$(REMAT_GEMM=blis BLIS_ARCH_TYPE=generic "$remat" --version | grep '^gemm:')
echo "BLIS_ARCH_TYPE=generic: $forced"
[[ $(kernels "$forced") == generic && "$forced" == *"BLIS_ARCH_TYPE=generic"* ]] ||
  { echo "FAIL: the user's BLIS_ARCH_TYPE was not kept or not named"; exit 1; }
bad=$(REMAT_GEMM=blis BLIS_ARCH_TYPE=99 "$remat" --version | grep '^gemm:')
echo "BLIS_ARCH_TYPE=99: $bad"
[[ $(kernels "$bad") == $(kernels "$plain") && "$bad" == *"BLIS_ARCH_TYPE=99 set aside: no such configuration"* ]] ||
  { echo "FAIL: an unknown BLIS_ARCH_TYPE was not set aside with its reason"; exit 1; }
echo "the user's BLIS_ARCH_TYPE: kept, or set aside with the reason"
