"""The CPU's threads and GEMM from Python: the same GEMM as the `remat`
program (Note [GEMM library] in kernels/cpu/gemm_library.h), whatever
Python loaded before, and thread counts checked as in C++."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import remat


def test_the_module_runs_the_gemm_the_program_runs():
    program = os.environ.get("REMAT_PROGRAM")
    if program is None:
        pytest.skip("REMAT_PROGRAM (the remat program to compare with) is not set; ctest sets it")
    expected = [line for line in subprocess.run([program, "--version"], check=True, capture_output=True,
                                                text=True).stdout.splitlines() if line.startswith("gemm:")]
    assert ["gemm: " + remat.gemm_summary()] == expected


def test_gemm_kernels_are_as_wide_as_the_cpu():
    info = remat.gemm_info()
    order = ["SSE", "AVX", "AVX2+FMA", "AVX-512"]
    assert order.index(info["kernels_isa"]) >= order.index(info["cpu_isa"]), info
    assert info["choice"] == "cpu-features", info
    assert info["library"].startswith({"blis": "BLIS ", "onednn": "oneDNN "}[info["float32"]]), info
    assert info["float64"].startswith("BLIS "), info


def test_numpy_and_torch_loaded_first_change_nothing():
    # Debian's NumPy (and PyTorch) load their BLAS before remat does; the
    # GEMM choice must not care. A fresh interpreter, so that the order holds.
    # (Importing torch may change OpenMP's thread count: that is not the choice.)
    script = ("import json, numpy; numpy.ones((64, 64)) @ numpy.ones((64, 64))\n"
              "try:\n    import torch\nexcept ImportError:\n    pass\n"
              "import remat; info = remat.gemm_info(); del info['threads']; print(json.dumps(info))")
    after = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    here = remat.gemm_info()
    del here["threads"]
    assert json.loads(after) == here


def test_matmul_equals_numpy():
    a = np.random.default_rng(0).standard_normal((37, 129)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((129, 65)).astype(np.float32)
    out = remat.matmul(remat.tensor(a), remat.tensor(b)).numpy()
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_thread_counts_are_checked():
    before = remat.get_num_threads()
    try:
        remat.set_num_threads(1)
        assert remat.get_num_threads() == 1
        assert remat.gemm_info()["threads"] == 1
        with pytest.raises(ValueError, match="100000"):
            remat.set_num_threads(100000)
    finally:
        remat.set_num_threads(before)
