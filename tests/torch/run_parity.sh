#!/usr/bin/env bash
# One GPT gradient-parity check: the C++ dump, then PyTorch's comparison.
#   run_parity.sh DUMP_BINARY DTYPE TIED WORKDIR
# Exits 77 (CTest's skip) when PyTorch is not installed.
set -euo pipefail
dump=$1 dtype=$2 tied=$3 dir=$4
here=$(cd "$(dirname "$0")" && pwd)
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "PyTorch (python3-torch) is not installed: skipped"; exit 77; }
rm -rf "$dir"
"$dump" --dtype "$dtype" --tied "$tied" --out "$dir"
/usr/bin/python3 "$here/gpt_parity.py" "$dir"
