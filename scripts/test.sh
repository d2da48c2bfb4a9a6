#!/usr/bin/env bash
# The whole check, as CI runs it: install dependencies, build, run every
# CTest test (all labels: unit, slow, mpi, cuda).
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh
ctest --test-dir build -j2 --output-on-failure
