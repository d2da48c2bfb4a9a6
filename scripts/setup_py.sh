#!/usr/bin/env bash
# The Python module's build and test dependencies (python/, label python):
# a virtual environment over Debian's Python 3 (and its numpy) with
# nanobind, scikit-build-core and pytest from PyPI, in build-py/ (made once;
# left alone when it works). CMake builds the module with it when it is
# there; without PyPI it says so, and the module and its tests are left out.
#   scripts/setup_py.sh [VENV=build-py]
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${1:-build-py}
check='import nanobind, scikit_build_core, pytest, numpy; assert nanobind.__version__ == "3.1.0"'
if "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "setup_py: $venv has nanobind 3.1.0, scikit-build-core and pytest"
  exit 0
fi
if /usr/bin/python3 -m venv --system-site-packages "$venv" &&
   "$venv/bin/pip" install --quiet --disable-pip-version-check --retries 1 --timeout 30 \
     nanobind==3.1.0 scikit-build-core==1.1.2 pytest &&
   "$venv/bin/python" -c "$check"; then
  echo "setup_py: made $venv (nanobind 3.1.0)"
else
  echo "setup_py: could not make $venv (no PyPI here?); the Python module will not be built" >&2
fi
exit 0
