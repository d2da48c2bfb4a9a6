// Test support: skipping a CUDA test, with a message, where no GPU is present
// (CTest label cuda). For a CUDA build only (REMAT_HAVE_CUDA).
#pragma once

#include <gtest/gtest.h>

#include "kernels/cuda/runtime.h"

// REMAT_SKIP_WITHOUT_GPU("CUDA kernels") skips with "no GPU on this machine: CUDA kernels not run".
#define REMAT_SKIP_WITHOUT_GPU(what)                    \
  if (::remat::kernels::cuda::device_count() == 0)      \
  GTEST_SKIP() << "no GPU on this machine: " what " not run"
