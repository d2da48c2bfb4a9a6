#!/usr/bin/env bash
# The Hugging Face round trip (hf_gpt2.py) with the virtual environment that
# scripts/setup_hf.sh makes (transformers 4.40.2 over Debian's PyTorch).
#   run_hf.sh DUMP_BINARY DTYPE TIED WORKDIR VENV
# Exits 77 (CTest's skip) when that environment is missing.
set -euo pipefail
dump=$1 dtype=$2 tied=$3 dir=$4 venv=$5
here=$(cd "$(dirname "$0")" && pwd)
if ! "$venv/bin/python" -c 'import transformers, safetensors, torch' 2>/dev/null; then
  echo "no transformers in $venv (scripts/setup_hf.sh makes it): skipped"
  exit 77
fi
rm -rf "$dir" && mkdir -p "$dir"
"$venv/bin/python" "$here/hf_gpt2.py" "$dump" "$dtype" "$tied" "$dir"
