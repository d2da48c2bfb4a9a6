// Collectives over lists of tensors (parameters, gradients), in buckets: the
// tensors are packed in order into flat buffers of at most `bucket_bytes`
// (one dtype per bucket; a tensor larger than the limit is a bucket of its
// own), and each bucket is one collective. Fewer, larger messages cost less
// latency than one per tensor; bounded buckets bound the extra memory.
//
//   comm::allreduce_buckets(comm, gradients, ReduceOp::Average, 25 << 20);
//
// Used by data parallelism (gradients), LocalSGD (parameters) and the start
// of training (parameters from rank 0). The flat buffers are Temporary bytes
// of the allocator; a bucket that is one tensor needs none. CPU tensors only:
// the trainers are CPU-only so far, and NCCL's users call its allreduce on
// device buffers directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "engine/tensor.h"

namespace remat::comm {

inline constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;  // PyTorch DDP's default

// The tensors of each bucket, as indices into `tensors`, in order.
// Errors: bucket_bytes <= 0, an undefined tensor.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<Tensor>& tensors, int64_t bucket_bytes);

// In place on every tensor (contiguous, on the CPU); every rank must pass tensors
// of the same shapes and dtypes in the same order.
void allreduce_buckets(Communicator& comm, const std::vector<Tensor>& tensors, ReduceOp op, int64_t bucket_bytes);
void broadcast_buckets(Communicator& comm, const std::vector<Tensor>& tensors, int root, int64_t bucket_bytes);

// The gradient of each parameter, averaged over the ranks in buckets. A
// parameter with no gradient on this rank takes a zero one first, so that
// every rank reduces the same buffers. A gradient that is a strided view is
// made contiguous (optim::dense_grad_of).
void average_gradients(Communicator& comm, const std::vector<Tensor>& params, int64_t bucket_bytes);

}  // namespace remat::comm
