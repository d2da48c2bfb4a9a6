// Embedding on the GPU; see embedding.h.
#include "kernels/cuda/embedding.h"

#include <vector>

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {
namespace {

std::vector<int64_t> ids_on_host(const int64_t* ids, int64_t n, Stream stream) {
  std::vector<int64_t> host(static_cast<size_t>(n));
  if (n > 0) copy_device_to_host(host.data(), ids, host.size() * sizeof(int64_t), stream);
  return host;
}

// The position of the first id outside [0, vocab), or -1.
int64_t first_bad_id(const std::vector<int64_t>& ids, int64_t vocab) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) return static_cast<int64_t>(i);
  }
  return -1;
}

// `values` in device scratch `slot` (launch.cuh), held until the lease ends.
ScratchLease on_device(const std::vector<int64_t>& values, Scratch slot, Stream stream) {
  ScratchLease lease = scratch_on(stream, slot, values.size() * sizeof(int64_t));
  if (!values.empty()) copy_host_to_device(lease.as<int64_t>(), values.data(), values.size() * sizeof(int64_t), stream);
  return lease;
}

}  // namespace

template <class T>
int64_t embedding_forward(T* out, const T* weight, const int64_t* ids, int64_t n, int64_t channels, int64_t vocab,
                          Stream stream) {
  if (const int64_t bad = first_bad_id(ids_on_host(ids, n, stream), vocab); bad >= 0) return bad;
  launch_elementwise(n * channels, stream, [=] __device__(int64_t e) {
    const int64_t i = e / channels, c = e % channels;
    out[e] = weight[ids[i] * channels + c];
  });
  return -1;
}

template <class T>
int64_t embedding_backward(T* dweight, const T* dout, const int64_t* ids, int64_t n, int64_t channels, int64_t vocab,
                           Stream stream) {
  // The ids forward accepted may have been written since: a bad one would
  // index the host's arrays below out of bounds.
  const std::vector<int64_t> host = ids_on_host(ids, n, stream);
  if (const int64_t bad = first_bad_id(host, vocab); bad >= 0) return bad;
  // Positions grouped by id, each group in increasing position (a counting
  // sort): starts (V + 1), positions (n).
  std::vector<int64_t> starts(static_cast<size_t>(vocab) + 1, 0), positions(static_cast<size_t>(n));
  for (int64_t id : host) ++starts[static_cast<size_t>(id) + 1];
  for (size_t v = 0; v < static_cast<size_t>(vocab); ++v) starts[v + 1] += starts[v];
  std::vector<int64_t> next(starts.begin(), starts.end() - 1);
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(next[static_cast<size_t>(host[static_cast<size_t>(i)])]++)] = i;
  // Leased until the kernel that reads them is queued (Scratch's order).
  const ScratchLease starts_lease = on_device(starts, Scratch::EmbeddingStarts, stream);
  const ScratchLease positions_lease = on_device(positions, Scratch::EmbeddingPositions, stream);
  const int64_t* s = starts_lease.as<int64_t>();
  const int64_t* p = positions_lease.as<int64_t>();
  launch_elementwise(vocab * channels, stream, [=] __device__(int64_t e) {
    const int64_t v = e / channels, c = e % channels;
    T acc = T(0);
    for (int64_t k = s[v]; k < s[v + 1]; ++k) acc += dout[p[k] * channels + c];
    dweight[e] = acc;
  });
  return -1;
}

#define REMAT_INSTANTIATE_EMBEDDING(T)                                                                  \
  template int64_t embedding_forward<T>(T*, const T*, const int64_t*, int64_t, int64_t, int64_t, Stream); \
  template int64_t embedding_backward<T>(T*, const T*, const int64_t*, int64_t, int64_t, int64_t, Stream);
REMAT_INSTANTIATE_EMBEDDING(float)
REMAT_INSTANTIATE_EMBEDDING(double)
#undef REMAT_INSTANTIATE_EMBEDDING

}  // namespace remat::kernels::cuda
