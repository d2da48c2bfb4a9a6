#!/usr/bin/env bash
# Configures remat (Ninja, Release; through ccache where it is) into build/
# and builds every target.
#   scripts/build.sh [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."

# ccache where it is (scripts/setup.sh installs it): rebuilds, and the
# wheel of tests/package/pip.sh, reuse the objects of an unchanged source.
# The test programs' precompiled headers (tests/CMakeLists.txt) are cached
# only with ccache's sloppiness for them (its manual, "Precompiled headers").
launcher=()
if command -v ccache >/dev/null; then
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_SLOPPINESS=pch_defines,time_macros;ccache"
            -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@"
cmake --build build -j "$(nproc)"
