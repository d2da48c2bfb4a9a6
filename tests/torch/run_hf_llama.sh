#!/usr/bin/env bash
# Llama parity with transformers (hf_llama.py) through remat's Python module,
# with the virtual environment scripts/setup_hf.sh makes (transformers
# 4.40.2 over Debian's PyTorch).
#   run_hf_llama.sh PYTHON_MODULE_DIR WORKDIR VENV
# Exits 77 (CTest's skip) when that environment is missing.
set -euo pipefail
module_dir=$1 dir=$2 venv=$3
here=$(cd "$(dirname "$0")" && pwd)
if ! "$venv/bin/python" -c 'import transformers, safetensors, torch' 2>/dev/null; then
  echo "no transformers in $venv (scripts/setup_hf.sh makes it): skipped"
  exit 77
fi
rm -rf "$dir" && mkdir -p "$dir"
PYTHONPATH="$module_dir${PYTHONPATH:+:$PYTHONPATH}" OMP_WAIT_POLICY=PASSIVE "$venv/bin/python" "$here/hf_llama.py" "$dir"
