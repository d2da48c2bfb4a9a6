#!/usr/bin/env bash
# The whole check, as CI runs it: install dependencies, build, run every
# CTest test (all labels: unit, slow, mpi, cuda, torch, package, python),
# then the unit tests again under ASan + UBSan (scripts/sanitize.sh) and
# each fuzzer for 30 s on its committed corpus (scripts/fuzz.sh).
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/setup_hf.sh   # transformers for the Hugging Face round trip (optional: it skips without)
scripts/setup_py.sh   # nanobind and pytest for the Python module (optional: left out without)
scripts/build.sh
ctest --test-dir build -j2 --output-on-failure
scripts/sanitize.sh
scripts/fuzz.sh
