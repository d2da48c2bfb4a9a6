// Communicator's checks and counters, SingleProcess, and world(); see
// communicator.h.
#include "comm/communicator.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "comm/mpi.h"

namespace remat::comm {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the wall time of its scope to `seconds`, also when a collective throws.
class Stopwatch {
 public:
  explicit Stopwatch(double& seconds) : seconds_(seconds), start_(Clock::now()) {}
  ~Stopwatch() { seconds_ += std::chrono::duration<double>(Clock::now() - start_).count(); }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  double& seconds_;
  Clock::time_point start_;
};

int64_t payload_bytes(int64_t count, DType dtype) { return count * static_cast<int64_t>(dtype_size(dtype)); }

}  // namespace

std::string_view reduce_op_name(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : "average"; }

void Communicator::allreduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  REMAT_CHECK(count >= 0, "allreduce: element count must be >= 0, got {}", count);
  REMAT_CHECK(op == ReduceOp::Sum || is_floating(dtype), "allreduce: average of {} elements is not defined; use sum",
              dtype_name(dtype));
  Stopwatch watch(stats_.seconds);
  ++stats_.allreduce_calls;
  stats_.allreduce_bytes += payload_bytes(count, dtype);
  do_allreduce(data, count, dtype, op);
}

void Communicator::broadcast(void* data, int64_t count, DType dtype, int root) {
  REMAT_CHECK(count >= 0, "broadcast: element count must be >= 0, got {}", count);
  REMAT_CHECK(root >= 0 && root < world_size(), "broadcast: root {} is not a rank of a world of {}", root,
              world_size());
  Stopwatch watch(stats_.seconds);
  ++stats_.broadcast_calls;
  stats_.broadcast_bytes += payload_bytes(count, dtype);
  do_broadcast(data, count, dtype, root);
}

void Communicator::allgather(const void* send, void* receive, int64_t count, DType dtype) {
  REMAT_CHECK(count >= 0, "allgather: element count must be >= 0, got {}", count);
  Stopwatch watch(stats_.seconds);
  ++stats_.allgather_calls;
  do_allgather(send, receive, count, dtype);
}

void Communicator::barrier() {
  Stopwatch watch(stats_.seconds);
  ++stats_.barrier_calls;
  do_barrier();
}

void Communicator::check_tensor(const Tensor& tensor, const char* what) const {
  REMAT_CHECK(tensor.defined(), "{}: undefined tensor", what);
  REMAT_CHECK(tensor.is_contiguous(), "{}: the tensor ({}) must be contiguous", what, tensor.str());
  REMAT_CHECK(reaches(tensor.device()), "{}: the {} backend cannot reach a tensor on {}", what, backend(),
              tensor.device().str());
}

void Communicator::allreduce(const Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "allreduce");
  allreduce(tensor.raw_data(), tensor.numel(), tensor.dtype(), op);
}

void Communicator::broadcast(const Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast");
  broadcast(tensor.raw_data(), tensor.numel(), tensor.dtype(), root);
}

void SingleProcess::abort(int exit_code) { std::_Exit(exit_code); }

void SingleProcess::do_allgather(const void* send, void* receive, int64_t count, DType dtype) {
  if (count > 0 && send != receive) std::memcpy(receive, send, static_cast<size_t>(payload_bytes(count, dtype)));
}

std::unique_ptr<Communicator> world(double timeout_seconds) {
  if (Mpi::launched_by_mpi()) return std::make_unique<Mpi>(timeout_seconds);
  return std::make_unique<SingleProcess>();
}

}  // namespace remat::comm
