// The NCCL backend; see nccl.h. Compiles to nothing without REMAT_HAVE_NCCL
// (CMake globs every .cpp of comm/ into remat_comm, CUDA or not).
#if REMAT_HAVE_NCCL

#include "comm/nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

// Both throw CommError naming the call, CUDA's or NCCL's text, and file:line.
#define REMAT_CUDA_CHECK(call)                                                                  \
  do {                                                                                          \
    const cudaError_t remat_status = (call);                                                    \
    if (remat_status != cudaSuccess) [[unlikely]] {                                             \
      ::remat::comm::fail_call(#call, cudaGetErrorString(remat_status), "", __FILE__, __LINE__); \
    }                                                                                           \
  } while (false)

#define REMAT_NCCL_CHECK(call)                                                                  \
  do {                                                                                          \
    const ncclResult_t remat_status = (call);                                                   \
    if (remat_status != ncclSuccess) [[unlikely]] {                                             \
      ::remat::comm::fail_call(#call, ncclGetErrorString(remat_status), ncclGetLastError(nullptr), \
                               __FILE__, __LINE__);                                             \
    }                                                                                           \
  } while (false)

namespace remat::comm {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail_call(const char* call, const char* error, const char* detail, const char* file, int line) {
  throw CommError(fmt::format("nccl: {} failed: {}{}{} [{}:{}]", call, error, *detail != '\0' ? ": " : "", detail,
                              file, line));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
  }
  REMAT_FAIL("nccl: no NCCL type for dtype {}", dtype_name(dtype));
}

// mpirun numbers the ranks of each host from 0: one GPU each. Without it
// (another launcher), the world rank stands in, which is right on one host.
int local_rank(int world_rank) {
  const char* text = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  int local = 0;
  if (text != nullptr && std::from_chars(text, text + std::strlen(text), local).ec == std::errc{} && local >= 0) {
    return local;
  }
  return world_rank;
}

}  // namespace

int Nccl::device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not an error for later calls
    return 0;
  }
  return count;
}

Nccl::Nccl(Mpi& bootstrap, int device, double timeout_seconds)
    : bootstrap_(bootstrap),
      rank_(bootstrap.rank()),
      world_size_(bootstrap.world_size()),
      timeout_seconds_(timeout_seconds) {
  REMAT_CHECK(timeout_seconds > 0, "nccl: the collective timeout must be > 0 seconds, got {}", timeout_seconds);
  const int devices = device_count();
  if (devices == 0) throw CommError(fmt::format("nccl: rank {} of {} sees no CUDA device", rank_, world_size_));
  device_ = device >= 0 ? device : local_rank(rank_) % devices;
  REMAT_CHECK(device_ < devices, "nccl: rank {} asks for CUDA device {}, but sees {} device(s)", rank_, device_,
              devices);
  // Nothing below has a destructor to undo it if a later step throws.
  try {
    REMAT_CUDA_CHECK(cudaSetDevice(device_));
    ncclUniqueId id{};
    if (rank_ == 0) REMAT_NCCL_CHECK(ncclGetUniqueId(&id));
    bootstrap_.broadcast_bytes(&id, sizeof id, 0);
    REMAT_NCCL_CHECK(ncclCommInitRank(&comm_, world_size_, id, rank_));
    REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    REMAT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&agree_device_), sizeof(AgreementValues)));
    REMAT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&agree_host_), sizeof(AgreementValues)));
  } catch (...) {
    release();
    throw;
  }
}

Nccl::~Nccl() { release(); }

void Nccl::release() noexcept {
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (agree_device_ != nullptr) cudaFree(agree_device_);
  if (agree_host_ != nullptr) cudaFreeHost(agree_host_);
  comm_ = nullptr;
  stream_ = nullptr;
  agree_device_ = nullptr;
  agree_host_ = nullptr;
}

void Nccl::abort(int exit_code) {
  // Frees this rank's NCCL kernels first: they may be spinning on a peer.
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
  bootstrap_.abort(exit_code);
}

void Nccl::wait(const char* what) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_seconds_);
  // An NCCL kernel waiting for a peer spins forever: aborting the
  // communicator is the only way to stop it, and leaves it unusable.
  const auto give_up = [&](const std::string& why) {
    broken_ = true;
    ncclCommAbort(comm_);
    comm_ = nullptr;
    throw CommError(fmt::format("nccl: {} on rank {} of {} {}; this communicator is unusable, end the job "
                                "(Communicator::abort)",
                                what, rank_, world_size_, why));
  };
  for (int64_t polls = 0;; ++polls) {
    const cudaError_t status = cudaStreamQuery(stream_);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) give_up(fmt::format("failed in CUDA: {}", cudaGetErrorString(status)));
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess) give_up("could not read NCCL's error state");
    if (async != ncclSuccess && async != ncclInProgress) {
      give_up(fmt::format("failed in NCCL: {}: {}", ncclGetErrorString(async), ncclGetLastError(comm_)));
    }
    if (polls < 1000) continue;
    if (Clock::now() > deadline) {
      give_up(fmt::format("got no answer within {} s: a peer rank stopped or died", timeout_seconds_));
    }
    // Ranks may share cores: give the core away while a slower peer computes.
    if (Clock::now() - start < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

// The agreement's exchange runs over NCCL itself, so that it needs no MPI
// call: the values go to the GPU, are reduced with ncclMax, and come back
// through pinned memory (a copy into pageable memory would block the thread
// and defeat the timeout).
void Nccl::exchange_maximum(AgreementValues& values) {
  REMAT_CHECK(!broken_, "nccl: this communicator failed or timed out in an earlier collective and is unusable");
  std::copy(values.begin(), values.end(), agree_host_);
  constexpr size_t kBytes = sizeof(AgreementValues);
  REMAT_CUDA_CHECK(cudaMemcpyAsync(agree_device_, agree_host_, kBytes, cudaMemcpyHostToDevice, stream_));
  REMAT_NCCL_CHECK(ncclAllReduce(agree_device_, agree_device_, values.size(), ncclInt64, ncclMax, comm_, stream_));
  REMAT_CUDA_CHECK(cudaMemcpyAsync(agree_host_, agree_device_, kBytes, cudaMemcpyDeviceToHost, stream_));
  wait(check_name(values).c_str());
  std::copy(agree_host_, agree_host_ + values.size(), values.begin());
}

void Nccl::do_allreduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  // ncclAvg divides on the GPU (in the reduction's own dtype).
  REMAT_NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype),
                                 op == ReduceOp::Average ? ncclAvg : ncclSum, comm_, stream_));
  wait("allreduce");
}

void Nccl::do_broadcast(void* data, int64_t count, DType dtype, int root) {
  REMAT_NCCL_CHECK(ncclBroadcast(data, data, static_cast<size_t>(count), nccl_type(dtype), root, comm_, stream_));
  wait("broadcast");
}

void Nccl::do_allgather(const void* send, void* receive, int64_t count, DType dtype) {
  REMAT_NCCL_CHECK(ncclAllGather(send, receive, static_cast<size_t>(count), nccl_type(dtype), comm_, stream_));
  wait("allgather");
}

// The argument check that Communicator::barrier ran first is itself an
// allreduce that every rank joined and waited for: no rank left it before
// all had entered.
void Nccl::do_barrier() {}

}  // namespace remat::comm

#endif  // REMAT_HAVE_NCCL
