// The check that a CPU computation's bits do not depend on the thread count:
// runs it at 1, 2 and 3 threads (NumThreadsGuard, so the split loops run
// even where OMP_NUM_THREADS=1) and compares every tensor it returns, byte
// for byte, with the one-thread run's. For tests of ops and kernels whose
// shapes are large enough to split (above 2 * kParallelGrain elements).
//
//   expect_bits_independent_of_threads("layer_norm", [&] { return Tensors{y, x.grad()}; });
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "kernels/cpu/parallel.h"

namespace remat::testing {

// A tensor's elements in row-major order as bytes (any strides).
inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor d = dense(t);
  const auto* p = static_cast<const unsigned char*>(d.raw_data());
  return {p, p + d.nbytes()};
}

inline void expect_bits_independent_of_threads(const std::string& what,
                                               const std::function<std::vector<Tensor>()>& run) {
  std::vector<std::vector<unsigned char>> first;
  for (const int threads : {1, 2, 3}) {
    const kernels::cpu::NumThreadsGuard guard(threads);
    const std::vector<Tensor> outputs = run();
    ASSERT_FALSE(outputs.empty()) << what;
    for (size_t k = 0; k < outputs.size(); ++k) {
      ASSERT_TRUE(outputs[k].defined()) << what << ": output " << k << " at " << threads << " threads";
      const std::vector<unsigned char> bytes = bytes_of(outputs[k]);
      if (threads == 1) {
        first.push_back(bytes);
        continue;
      }
      // EXPECT_TRUE, not EXPECT_EQ: a mismatch of megabytes is not printed.
      EXPECT_TRUE(bytes == first[k]) << what << ": output " << k << " at " << threads
                                     << " threads differs from one thread's";
    }
  }
}

}  // namespace remat::testing
