#!/usr/bin/env bash
# The default build runs on any x86-64-v3 CPU (cmake/arch.cmake): no
# AVX-512 instruction in the program. AVX-512 shows in disassembly as zmm
# registers, mask registers (%k0-%k7, {%k1}), embedded broadcasts ({1toN})
# and the EVEX-only broadcast from a general register (g++ 12.2's wrong code
# in cmake/probes/vector_init.cpp is one).
#   tests/toolchain/portable_isa.sh BINARY
set -euo pipefail
binary=$1
found=$(objdump -d --no-show-raw-insn "$binary" |
        grep -E '%zmm|%k[0-7]\b|\{%k[0-7]\}|\{1to[0-9]+\}|vpbroadcast[bwdq][[:space:]]+%[re]' || true)
if [[ -n "$found" ]]; then
  echo "$binary has $(wc -l <<<"$found") AVX-512 instructions, e.g.:"
  head -5 <<<"$found"
  exit 1
fi
echo "$binary: no AVX-512 instructions ($(objdump -d "$binary" | wc -l) lines disassembled)"
