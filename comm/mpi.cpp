// The MPI backend; see mpi.h.
#include "comm/mpi.h"

#include <mpi.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>

namespace remat::comm {
namespace {

using Clock = std::chrono::steady_clock;

// MPI is initialised once per process and finalised at exit, after every Mpi
// is gone; an MPI_Init done by someone else (a test's main) is left to them.
void ensure_initialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  });
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    default: REMAT_FAIL("mpi: no MPI type for dtype {} (float32, float64 and int64 only)", dtype_name(dtype));
  }
}

// MPI counts are ints: larger buffers go in pieces of at most 2^30
// elements, each handed to `run(piece_start, piece_count)`.
constexpr int64_t kMaxPiece = int64_t{1} << 30;

template <class Run>
void in_pieces(void* data, int64_t count, DType dtype, Run run) {
  auto* bytes = static_cast<char*>(data);
  for (int64_t done = 0; done < count; done += kMaxPiece) {
    run(bytes + done * static_cast<int64_t>(dtype_size(dtype)), static_cast<int>(std::min(kMaxPiece, count - done)));
  }
}

template <class T>
void divide(void* data, int64_t count, double by) {
  T* values = static_cast<T*>(data);
  for (int64_t i = 0; i < count; ++i) values[i] = static_cast<T>(values[i] / by);
}

}  // namespace

struct Mpi::State {
  MPI_Comm comm = MPI_COMM_NULL;
};

bool Mpi::launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

int Mpi::launch_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

int Mpi::launch_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

void Mpi::abort_job(int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

Mpi::Mpi(double timeout_seconds) : state_(std::make_unique<State>()), timeout_seconds_(timeout_seconds) {
  REMAT_CHECK(timeout_seconds > 0, "mpi: the collective timeout must be > 0 seconds, got {}", timeout_seconds);
  ensure_initialized();
  MPI_Comm_dup(MPI_COMM_WORLD, &state_->comm);
  MPI_Comm_rank(state_->comm, &rank_);
  MPI_Comm_size(state_->comm, &world_size_);
  watchdog_ = std::make_unique<Watchdog>(timeout_seconds, fmt::format("mpi: rank {} of {}", rank_, world_size_));
}

Mpi::~Mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && state_->comm != MPI_COMM_NULL) MPI_Comm_free(&state_->comm);
}

void Mpi::abort(int exit_code) { MPI_Abort(state_->comm, exit_code); std::_Exit(exit_code); }

void Mpi::exchange_maximum(AgreementValues& values) {
  const auto watch = watchdog_->watch(check_name(values));
  MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_MAX, state_->comm);
}

void Mpi::do_allreduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  const MPI_Datatype type = mpi_type(dtype);
  const auto watch = watchdog_->watch("allreduce");
  in_pieces(data, count, dtype, [&](char* piece, int n) {
    MPI_Allreduce(MPI_IN_PLACE, piece, n, type, MPI_SUM, state_->comm);
  });
  if (op == ReduceOp::Average && world_size_ > 1) {
    dispatch_floating(dtype, "allreduce average",
                      [&]<class T>() { divide<T>(data, count, static_cast<double>(world_size_)); });
  }
}

void Mpi::do_broadcast(void* data, int64_t count, DType dtype, int root) {
  const MPI_Datatype type = mpi_type(dtype);
  const auto watch = watchdog_->watch("broadcast");
  in_pieces(data, count, dtype, [&](char* piece, int n) { MPI_Bcast(piece, n, type, root, state_->comm); });
}

void Mpi::broadcast_bytes(void* data, int64_t bytes, int root) {
  agree({Collective::Broadcast, bytes, DType::Int64, root},
        bytes >= 0 && bytes <= INT_MAX ? "" : fmt::format("broadcast_bytes: {} bytes is out of range", bytes));
  const auto watch = watchdog_->watch("broadcast");
  MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, state_->comm);
}

void Mpi::do_allgather(const void* send, void* receive, int64_t count, DType dtype) {
  // Every rank has the same count (agreed), so all of them fail here alike.
  REMAT_CHECK(count <= INT_MAX, "mpi: allgather of {} elements per rank is too large", count);
  const auto watch = watchdog_->watch("allgather");
  MPI_Allgather(send, static_cast<int>(count), mpi_type(dtype), receive, static_cast<int>(count), mpi_type(dtype),
                state_->comm);
}

void Mpi::do_barrier() {
  const auto watch = watchdog_->watch("barrier");
  MPI_Barrier(state_->comm);
}

}  // namespace remat::comm
