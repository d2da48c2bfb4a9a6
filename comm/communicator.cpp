// Communicator's checks and counters, SingleProcess, and world(); see
// communicator.h.
#include "comm/communicator.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "comm/mpi.h"
#include "engine/factory.h"

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

void Communicator::agree(CallArguments call, const std::string& problem) {
  call.valid = problem.empty();
  AgreementValues values = encode_for_max(call);
  exchange_maximum(values);
  if (!problem.empty()) throw CommError(fmt::format("{}: {}", backend(), problem));
  check_agreement(backend(), values, call, rank());
}

void Communicator::allreduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  std::string problem;
  if (count < 0) problem = fmt::format("allreduce: element count must be >= 0, got {}", count);
  if (op == ReduceOp::Average && !is_floating(dtype)) {
    problem = fmt::format("allreduce: average of {} elements is not defined; use sum", dtype_name(dtype));
  }
  Stopwatch watch(stats_.seconds);
  agree({Collective::Allreduce, count, dtype, static_cast<int64_t>(op)}, problem);
  ++stats_.allreduce_calls;
  stats_.allreduce_bytes += payload_bytes(count, dtype);
  do_allreduce(data, count, dtype, op);
}

void Communicator::broadcast(void* data, int64_t count, DType dtype, int root) {
  std::string problem;
  if (count < 0) problem = fmt::format("broadcast: element count must be >= 0, got {}", count);
  if (root < 0 || root >= world_size()) {
    problem = fmt::format("broadcast: root {} is not a rank of a world of {}", root, world_size());
  }
  Stopwatch watch(stats_.seconds);
  agree({Collective::Broadcast, count, dtype, root}, problem);
  ++stats_.broadcast_calls;
  stats_.broadcast_bytes += payload_bytes(count, dtype);
  do_broadcast(data, count, dtype, root);
}

void Communicator::allgather(const void* send, void* receive, int64_t count, DType dtype) {
  std::string problem;
  if (count < 0) problem = fmt::format("allgather: element count must be >= 0, got {}", count);
  Stopwatch watch(stats_.seconds);
  agree({Collective::Allgather, count, dtype, 0}, problem);
  ++stats_.allgather_calls;
  stats_.allgather_bytes += payload_bytes(count, dtype);
  do_allgather(send, receive, count, dtype);
}

void Communicator::barrier() {
  Stopwatch watch(stats_.seconds);
  agree({Collective::Barrier, 0, DType::Int64, 0}, "");
  ++stats_.barrier_calls;
  do_barrier();
}

std::string Communicator::tensor_problem(const Tensor& tensor, const char* what) const {
  if (!tensor.defined()) return fmt::format("{}: undefined tensor", what);
  if (!tensor.is_contiguous()) return fmt::format("{}: the tensor ({}) must be contiguous", what, tensor.str());
  if (!reaches(tensor.device())) {
    return fmt::format("{}: the {} backend cannot reach a tensor on {}", what, backend(), tensor.device().str());
  }
  return "";
}

// A GPU tensor's last writer is an op queued on its device's compute
// stream, which may not have run yet; NCCL reads the buffer on its own
// stream, which waits for nothing on another, so the compute stream is
// waited for first (synchronize: nothing to wait for on the CPU). The
// collective itself returns once it has finished, so later ops read its
// result. An error of that work is this rank's problem with its arguments.
std::string Communicator::wait_for_writers(const Tensor& tensor, const char* what) const {
  try {
    synchronize(tensor.device());
  } catch (const std::exception& error) {
    return fmt::format("{}: the work that wrote the tensor ({}) failed: {}", what, tensor.str(), error.what());
  }
  return "";
}

// A tensor this rank cannot send still takes part in the agreement (as an
// invalid call), so that its peers fail at once instead of waiting for it.
void Communicator::allreduce(const Tensor& tensor, ReduceOp op) {
  std::string problem = tensor_problem(tensor, "allreduce");
  if (problem.empty()) problem = wait_for_writers(tensor, "allreduce");
  if (!problem.empty()) {
    Stopwatch watch(stats_.seconds);
    agree({Collective::Allreduce, 0, DType::Float32, static_cast<int64_t>(op)}, problem);
  }
  allreduce(tensor.raw_data(), tensor.numel(), tensor.dtype(), op);
}

void Communicator::broadcast(const Tensor& tensor, int root) {
  std::string problem = tensor_problem(tensor, "broadcast");
  if (problem.empty()) problem = wait_for_writers(tensor, "broadcast");
  if (!problem.empty()) {
    Stopwatch watch(stats_.seconds);
    agree({Collective::Broadcast, 0, DType::Float32, root}, problem);
  }
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
