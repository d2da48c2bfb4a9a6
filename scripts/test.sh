#!/usr/bin/env bash
# The whole check, as CI runs it: install dependencies, build, run every
# CTest test (all labels: unit, slow, mpi, cuda, torch, package, python),
# say per label what ran and name each label that could not run here, then
# the unit tests again under ASan + UBSan (scripts/sanitize.sh) and each
# fuzzer for 10-30 s on its committed corpus (scripts/fuzz.sh). Runs the same
# in any order with the README's main job: build/ decides again at every
# configure whether the Python module is built (REMAT_BUILD_PYTHON=AUTO).
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/setup_hf.sh   # transformers for the Hugging Face round trip (optional: it skips without)
scripts/setup_py.sh   # nanobind and pytest for the Python module (optional: left out without)
scripts/build.sh
junit=$PWD/build/ctest-junit.xml
status=0
ctest --test-dir build -j2 --output-on-failure --output-junit "$junit" || status=$?
why=()
if [[ ! -f build/python/remat/__init__.py ]]; then
  why+=(--why "python=the module was not built: build-py/ has no nanobind (scripts/setup_py.sh needs PyPI); package.pip and package.build_order are left out with it")
fi
scripts/test_summary.py build "$junit" "${why[@]}" \
  --note "cuda=every one runs on the emulated GPU under the sanitizers below" || status=1
if [[ $status -ne 0 ]]; then
  echo "test: the Release suite failed; the sanitized run and the fuzzers were not started" >&2
  exit "$status"
fi
scripts/sanitize.sh
scripts/fuzz.sh
