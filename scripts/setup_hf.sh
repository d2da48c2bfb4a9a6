#!/usr/bin/env bash
# The optional test dependency of the Hugging Face round trip (label torch,
# tests/torch/run_hf.sh): a virtual environment over Debian's PyTorch with
# transformers 4.40.2 and safetensors from PyPI, in build-hf/ (made once;
# left alone when it works). Without network it says so and the test skips.
#   scripts/setup_hf.sh [VENV=build-hf]
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${1:-build-hf}
check='import transformers, safetensors, torch; assert transformers.__version__ == "4.40.2"'
if "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "setup_hf: $venv has transformers 4.40.2"
  exit 0
fi
if /usr/bin/python3 -m venv --system-site-packages "$venv" &&
   "$venv/bin/pip" install --quiet --disable-pip-version-check --retries 1 --timeout 30 \
     transformers==4.40.2 safetensors &&
   "$venv/bin/python" -c "$check"; then
  echo "setup_hf: made $venv (transformers 4.40.2)"
else
  echo "setup_hf: could not make $venv (no PyPI here?); the Hugging Face round trip test will skip" >&2
fi
exit 0
