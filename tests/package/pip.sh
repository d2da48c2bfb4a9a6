#!/usr/bin/env bash
# `pip install .` as a Python user does it (label package): the wheel is
# built from SOURCE by scikit-build-core with this project's CMake (the
# build dependencies, nanobind and scikit-build-core, from VENV, the
# environment scripts/setup_py.sh made: nothing is downloaded), installed
# into a fresh virtual environment without an index, and used from outside
# the source tree: a GPT step under a checkpointing budget, a Trainer step,
# an engine error as remat.Error, and the same GEMM as the build's `remat
# --version` (REMAT). CUDA on or off and the C++ compiler as in
# the build tree: with ccache, as scripts/build.sh uses it, the libraries'
# objects are then the build tree's and only the module's bindings compile.
#   tests/package/pip.sh SOURCE VENV CUDA(ON|OFF) CXX WORK REMAT
set -euo pipefail
source=$1 venv=$2 cuda=$3 cxx=$4 work=$5 remat=$6
REMAT_EXPECTED_GEMM=$("$remat" --version | grep '^gemm:')
export REMAT_EXPECTED_GEMM
rm -rf "$work" && mkdir -p "$work"
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}

"$venv/bin/pip" wheel --no-build-isolation --no-deps --quiet --disable-pip-version-check -w "$work/wheel" \
  --config-settings="cmake.define.REMAT_CUDA=$cuda" --config-settings="cmake.define.CMAKE_CXX_COMPILER=$cxx" \
  --config-settings="build-dir=$work/build" "$source" >"$work/wheel.log" 2>&1 ||
  { tail -40 "$work/wheel.log"; exit 1; }
wheel=$(ls "$work"/wheel/remat-*.whl)
echo "built $(basename "$wheel")"

# A fresh environment over Debian's Python (its NumPy satisfies the
# wheel's one dependency), the wheel installed with no index.
/usr/bin/python3 -m venv --system-site-packages "$work/fresh"
"$work/fresh/bin/pip" install --no-index --quiet --disable-pip-version-check "$wheel"

cd "$work"  # not the source tree: the installed module, not python/remat
"$work/fresh/bin/python" - <<'PY'
import os, sys
import remat
from remat.train import Dataset, Trainer, TrainingArguments

where = os.path.dirname(remat.__file__)
assert where.startswith(sys.prefix), f"remat imported from {where}, not from the fresh environment {sys.prefix}"
model = remat.nn.GPT(vocab_size=32, block_size=16, n_layer=2, n_head=2, n_embd=32)
model.gradient_checkpointing_enable(policy="cost", budget="1MiB")
ids, targets = remat.randint(32, [4, 16], seed=1), remat.randint(32, [4, 16], seed=2)
for _ in range(2):
    loss = model(ids, targets).loss
    loss.backward()
report = model.checkpointing_report()
assert report["peak_activation_bytes"] <= 1 << 20, report
data = Dataset(remat.randn([64, 8], seed=0), remat.randint(3, [64], seed=1))
out = Trainer(model=remat.nn.MLP([8, 16, 3]), args=TrainingArguments(max_steps=2), train_dataset=data).train()
assert out.global_step == 2
try:
    remat.matmul(remat.ones([2, 3]), remat.ones([2, 3]))
    raise SystemExit("matmul of (2, 3) by (2, 3) did not raise")
except remat.Error as error:
    assert "(2, 3)" in str(error) or "[2, 3]" in str(error), error
gemm = "gemm: " + remat.gemm_summary()
assert gemm == os.environ["REMAT_EXPECTED_GEMM"], f"the module runs {gemm!r}; remat --version: {os.environ['REMAT_EXPECTED_GEMM']!r}"
print(gemm)
print(f"remat from {where}: a GPT step within 1 MiB (peak {report['peak_activation_bytes']} bytes), a Trainer, "
      f"remat.Error")
PY
