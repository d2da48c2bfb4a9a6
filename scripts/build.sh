#!/usr/bin/env bash
# Configures remat (Ninja, Release) into build/ and builds every target.
#   scripts/build.sh [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$(nproc)"
