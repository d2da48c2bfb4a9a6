// Bucketed collectives; see buckets.h.
#include "comm/buckets.h"

#include <functional>

#include "engine/allocator.h"
#include "engine/factory.h"
#include "optim/optimizer.h"

namespace remat::comm {
namespace {

// Runs `collective` (a Communicator's tensor form) on each bucket of
// `tensors`: on the tensor itself when a bucket is one tensor, else on a
// flat buffer that the bucket's tensors are copied into before and out of
// after. On a GPU the copies are queued on the compute stream and NCCL's
// collectives on their own: the tensor forms wait for the compute stream
// before the collective reads the bucket, and return once it has finished,
// before the copies out are queued.
void for_each_bucket(const std::vector<Tensor>& tensors, int64_t bucket_bytes,
                     const std::function<void(const Tensor&)>& collective) {
  for (const std::vector<size_t>& bucket : plan_buckets(tensors, bucket_bytes)) {
    const Tensor& first = tensors[bucket.front()];
    const Device device = first.device();
    if (bucket.size() == 1) {
      collective(first);
      continue;
    }
    int64_t elements = 0;
    for (size_t i : bucket) elements += tensors[i].numel();
    Tensor flat;
    {
      CategoryGuard temporary(MemoryCategory::Temporary);
      flat = empty({elements}, first.dtype(), device);
    }
    auto* base = static_cast<char*>(flat.raw_data());
    size_t offset = 0;
    for (size_t i : bucket) {
      copy_bytes(base + offset, device, tensors[i].raw_data(), device, tensors[i].nbytes());
      offset += tensors[i].nbytes();
    }
    collective(flat);
    offset = 0;
    for (size_t i : bucket) {
      copy_bytes(tensors[i].raw_data(), device, base + offset, device, tensors[i].nbytes());
      offset += tensors[i].nbytes();
    }
  }
}

}  // namespace

std::vector<std::vector<size_t>> plan_buckets(const std::vector<Tensor>& tensors, int64_t bucket_bytes) {
  REMAT_CHECK(bucket_bytes > 0, "buckets: bucket_bytes must be > 0, got {}", bucket_bytes);
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    REMAT_CHECK(tensors[i].defined(), "buckets: tensor {} of {} is undefined", i, tensors.size());
    REMAT_CHECK(tensors[i].is_contiguous() && !tensors[i].device().is_meta(),
                "buckets: tensor {} of {} ({}) must be contiguous and hold values (not meta)", i, tensors.size(),
                tensors[i].str());
    const auto bytes = static_cast<int64_t>(tensors[i].nbytes());
    const bool fits = !buckets.empty() && filled + bytes <= bucket_bytes &&
                      tensors[buckets.back().front()].dtype() == tensors[i].dtype() &&
                      tensors[buckets.back().front()].device() == tensors[i].device();
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += bytes;
  }
  return buckets;
}

void allreduce_buckets(Communicator& comm, const std::vector<Tensor>& tensors, ReduceOp op, int64_t bucket_bytes) {
  for_each_bucket(tensors, bucket_bytes, [&](const Tensor& flat) { comm.allreduce(flat, op); });
}

void broadcast_buckets(Communicator& comm, const std::vector<Tensor>& tensors, int root, int64_t bucket_bytes) {
  for_each_bucket(tensors, bucket_bytes, [&](const Tensor& flat) { comm.broadcast(flat, root); });
}

void average_gradients(Communicator& comm, const std::vector<Tensor>& params, int64_t bucket_bytes) {
  std::vector<Tensor> gradients;
  gradients.reserve(params.size());
  for (const Tensor& param : params) {
    Tensor gradient = optim::dense_grad_of(param, "average_gradients");
    if (!gradient.defined()) {
      CategoryGuard category(MemoryCategory::Gradient);
      gradient = zeros(param.shape(), param.dtype(), param.device());
      param.set_grad(gradient);
    }
    gradients.push_back(gradient);
  }
  allreduce_buckets(comm, gradients, ReduceOp::Average, bucket_bytes);
}

}  // namespace remat::comm
