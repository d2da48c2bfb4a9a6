// Fused optimizer updates on the GPU; see optim.h.
//
// sgd_step, adamw_step: one thread an element (launch_elementwise).
//
// The multi-tensor kernels (adamw_multi_step, clip_grads' scale) read a
// table of tensors that the host copies to the GPU once per call (scratch
// slot MultiTensorTable), as rows, then first_chunk (rows + 1): every tensor
// is cut into chunks of kChunk elements, numbered across the tensors, row k
// owning chunks [first_chunk[k], first_chunk[k + 1]). Block b takes chunks
// b, b + grid, ... and finds each one's row by a binary search of
// first_chunk; its threads stride through the chunk. One launch updates
// every tensor, however many (148 for GPT-2 124M, against 148 launches one
// a tensor). The table goes through copy_host_to_device (runtime.h): a
// pinned staging buffer, so the host neither waits for the stream nor
// keeps the table (Note [Host-to-device copies] in runtime.cu).
//
// clip_grads keeps its sums on the GPU: one launch of (kNormBlocks,
// gradients) blocks writes each gradient's block partials, exactly as
// reduce.cu's squared_norm does one gradient (block_squared_norm,
// reduce.cuh); one block then adds each gradient's partials in block order,
// the gradients' sums in gradient order, and takes the norm and coef, as
// the host did; the scale kernel reads coef from device memory. The host
// copies back the norm alone.
//
// Why it repeats bit for bit, and matches the per-tensor kernels: an
// element's update is the same function of the same values (kernels/math.h,
// the constants rounded on the host as before); which thread takes which
// element changes nothing for an elementwise update. The clip's sums are
// taken in the same fixed orders as before, with no atomics.
#include "kernels/cuda/optim.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/math.h"

namespace remat::kernels::cuda {
namespace {

constexpr int64_t kChunk = 16384;     // elements of a tensor one block takes at a time
constexpr int64_t kMaxBlocks = 4096;  // more chunks loop (a grid-stride loop over chunks)

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The row owning chunk c: the last k with first_chunk[k] <= c (a tensor of
// no chunks starts where its successor does, so it is never found).
__device__ inline int row_of(const int64_t* first_chunk, int rows, int64_t c) {
  int low = 0, high = rows;  // the answer is in [low, high)
  while (high - low > 1) {
    const int mid = (low + high) / 2;
    if (first_chunk[mid] <= c) {
      low = mid;
    } else {
      high = mid;
    }
  }
  return low;
}

// The table on the host, as the GPU will read it: rows, then first_chunk,
// each at a 256-byte boundary; `extra` bytes more of scratch follow.
template <class Row>
struct HostTable {
  std::vector<unsigned char> bytes;
  size_t first_chunk_at = 0;  // byte offset
  size_t end = 0;             // bytes of the table: `extra` starts here
  int64_t chunks = 0;
};

template <class Row>
HostTable<Row> host_table(const std::vector<Row>& rows) {
  HostTable<Row> table;
  table.first_chunk_at = aligned(rows.size() * sizeof(Row));
  table.end = aligned(table.first_chunk_at + (rows.size() + 1) * sizeof(int64_t));
  table.bytes.assign(table.first_chunk_at + (rows.size() + 1) * sizeof(int64_t), 0);
  if (!rows.empty()) std::memcpy(table.bytes.data(), rows.data(), rows.size() * sizeof(Row));
  std::vector<int64_t> first_chunk(rows.size() + 1);
  for (size_t k = 0; k < rows.size(); ++k) first_chunk[k + 1] = first_chunk[k] + (rows[k].n + kChunk - 1) / kChunk;
  std::memcpy(table.bytes.data() + table.first_chunk_at, first_chunk.data(), first_chunk.size() * sizeof(int64_t));
  table.chunks = first_chunk.back();
  return table;
}

// Queues the table's copy into `device_table` on `stream` and returns at
// once (see the top of the file).
template <class Row>
void upload(unsigned char* device_table, const HostTable<Row>& table, Stream stream) {
  copy_host_to_device(device_table, table.bytes.data(), table.bytes.size(), stream);
}

unsigned chunk_blocks(int64_t chunks) { return static_cast<unsigned>(std::clamp<int64_t>(chunks, 1, kMaxBlocks)); }

template <class T>
__global__ void adamw_multi_kernel(const AdamwTensor<T>* rows, const int64_t* first_chunk, int count, int64_t chunks) {
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int k = row_of(first_chunk, count, c);
    const AdamwTensor<T> t = rows[k];
    const int64_t begin = (c - first_chunk[k]) * kChunk, end = begin + kChunk < t.n ? begin + kChunk : t.n;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      adamw_update<T>(t.param[i], t.exp_avg[i], t.exp_avg_sq[i], t.grad[i], t.constants);
    }
  }
}

// partials (count, kNormBlocks): block (b, k) writes block b's share of
// gradient k's squares, as squared_norm's kernel does for one gradient.
template <class T>
__global__ void clip_partials(double* partials, const GradTensor<T>* rows) {
  const GradTensor<T> g = rows[blockIdx.y];
  const double sum = block_squared_norm<T>(g.data, g.n, static_cast<int>(blockIdx.x));
  if (threadIdx.x == 0) partials[static_cast<int64_t>(blockIdx.y) * kNormBlocks + blockIdx.x] = sum;
}

// One block: sums[k] = gradient k's partials added in block order (thread k
// % blockDim.x), then thread 0: squares = the sums in gradient order, and
// result = (norm, coef), the host's arithmetic before.
__global__ void clip_coefficient(double* result, double* sums, const double* partials, int count, double max_norm) {
  for (int k = static_cast<int>(threadIdx.x); k < count; k += static_cast<int>(blockDim.x)) {
    double sum = 0;
    for (int b = 0; b < kNormBlocks; ++b) sum += partials[static_cast<int64_t>(k) * kNormBlocks + b];
    sums[k] = sum;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  double squares = 0;
  for (int k = 0; k < count; ++k) squares += sums[k];
  const double norm = std::sqrt(squares);
  result[0] = norm;
  result[1] = max_norm / (norm + 1e-6);
}

// grad *= T(coef) for every gradient, when coef < 1 or NaN (coef from
// device memory, clip_coefficient's); otherwise nothing is read or written.
template <class T>
__global__ void clip_scale(const GradTensor<T>* rows, const int64_t* first_chunk, int count, int64_t chunks,
                           const double* result) {
  const double coef = result[1];
  if (!(coef < 1.0 || isnan(coef))) return;
  const T factor = static_cast<T>(coef);
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int k = row_of(first_chunk, count, c);
    const GradTensor<T> g = rows[k];
    const int64_t begin = (c - first_chunk[k]) * kChunk, end = begin + kChunk < g.n ? begin + kChunk : g.n;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) g.data[i] = g.data[i] * factor;
  }
}

}  // namespace

template <class T>
void sgd_step(T* param, T* momentum_buf, const T* grad, int64_t n, const SgdHyper& hyper, bool first, Stream stream) {
  const T lr = static_cast<T>(hyper.lr), wd = static_cast<T>(hyper.weight_decay);
  const T momentum = static_cast<T>(hyper.momentum), keep = static_cast<T>(1.0 - hyper.dampening);
  const bool decay = hyper.weight_decay != 0, nesterov = hyper.nesterov;
  launch_elementwise(n, stream, [=] __device__(int64_t i) {
    sgd_update<T>(param[i], momentum_buf ? &momentum_buf[i] : nullptr, grad[i], lr, wd, decay, momentum, keep, nesterov,
                  first);
  });
}

template <class T>
void adamw_step(T* param, T* exp_avg, T* exp_avg_sq, const T* grad, int64_t n, const AdamwHyper& hyper, Stream stream) {
  const AdamwConstants<T> constants(hyper);
  launch_elementwise(n, stream, [=] __device__(int64_t i) {
    adamw_update<T>(param[i], exp_avg[i], exp_avg_sq[i], grad[i], constants);
  });
}

template <class T>
void adamw_multi_step(const std::vector<AdamwTensor<T>>& tensors, Stream stream) {
  const HostTable<AdamwTensor<T>> table = host_table(tensors);
  if (table.chunks == 0) return;
  // Held until the launch is queued; the next holder's copy on this stream
  // runs after this launch (launch.cuh, Device scratch).
  const ScratchLease lease = scratch_on(stream, Scratch::MultiTensorTable, table.end);
  unsigned char* device = lease.as<unsigned char>();
  upload(device, table, stream);
  launch("adamw_multi_step", adamw_multi_kernel<T>, {chunk_blocks(table.chunks), kThreads}, stream,
         reinterpret_cast<const AdamwTensor<T>*>(device), reinterpret_cast<const int64_t*>(device + table.first_chunk_at),
         static_cast<int>(tensors.size()), table.chunks);
}

template <class T>
double clip_grads(const std::vector<GradTensor<T>>& grads, double max_norm, Stream stream) {
  if (grads.empty()) return 0;
  if (grads.size() > 65535) {  // a grid's y extent: the partials' launch has a row of blocks a gradient
    fail("clip_grads", std::to_string(grads.size()) + " gradients, more than the 65535 of one launch", __FILE__,
         __LINE__);
  }
  const int count = static_cast<int>(grads.size());
  const HostTable<GradTensor<T>> table = host_table(grads);
  // After the table: partials (count, kNormBlocks), sums (count), result (norm, coef).
  const size_t partials_at = table.end;
  const size_t sums_at = aligned(partials_at + static_cast<size_t>(count) * kNormBlocks * sizeof(double));
  const size_t result_at = aligned(sums_at + static_cast<size_t>(count) * sizeof(double));
  const ScratchLease lease = scratch_on(stream, Scratch::MultiTensorTable, result_at + 2 * sizeof(double));
  unsigned char* device = lease.as<unsigned char>();
  const auto* rows = reinterpret_cast<const GradTensor<T>*>(device);
  const auto* first_chunk = reinterpret_cast<const int64_t*>(device + table.first_chunk_at);
  auto* partials = reinterpret_cast<double*>(device + partials_at);
  auto* sums = reinterpret_cast<double*>(device + sums_at);
  auto* result = reinterpret_cast<double*>(device + result_at);
  upload(device, table, stream);
  launch("clip_grads_partials", clip_partials<T>, {dim3(kNormBlocks, static_cast<unsigned>(count)), kThreads}, stream,
         partials, rows);
  launch("clip_grads_coefficient", clip_coefficient, {1, kThreads}, stream, result, sums,
         static_cast<const double*>(partials), count, max_norm);
  if (table.chunks > 0) {
    launch("clip_grads_scale", clip_scale<T>, {chunk_blocks(table.chunks), kThreads}, stream, rows, first_chunk, count,
           table.chunks, static_cast<const double*>(result));
  }
  double norm = 0;
  copy_device_to_host(&norm, result, sizeof norm, stream);  // the one wait of the clip
  return norm;
}

template void sgd_step<float>(float*, float*, const float*, int64_t, const SgdHyper&, bool, Stream);
template void sgd_step<double>(double*, double*, const double*, int64_t, const SgdHyper&, bool, Stream);
template void adamw_step<float>(float*, float*, float*, const float*, int64_t, const AdamwHyper&, Stream);
template void adamw_step<double>(double*, double*, double*, const double*, int64_t, const AdamwHyper&, Stream);
template void adamw_multi_step<float>(const std::vector<AdamwTensor<float>>&, Stream);
template void adamw_multi_step<double>(const std::vector<AdamwTensor<double>>&, Stream);
template double clip_grads<float>(const std::vector<GradTensor<float>>&, double, Stream);
template double clip_grads<double>(const std::vector<GradTensor<double>>&, double, Stream);

}  // namespace remat::kernels::cuda
