// The NCCL backend of Communicator: GPU buffers, one rank per GPU, processes
// started by mpirun; an Mpi communicator carries NCCL's unique id to every
// rank. Built only where CMake finds CUDA and NCCL (REMAT_HAVE_NCCL).
//
//   comm::Mpi bootstrap;                       // under mpirun -np <GPUs per host x hosts>
//   comm::Nccl nccl(bootstrap);                // this process's GPU: its local rank
//   nccl.allreduce(device_gradients, count, DType::Float32, ReduceOp::Average);
//
// Collectives run on the communicator's own CUDA stream and return when they
// have finished, so their result is ready for any stream. The buffer must be
// ready when a collective is called: work on another stream that writes it
// must be complete (the stream is non-blocking: it does not wait for the
// legacy default stream).
//
// As in Mpi, every collective first agrees on its arguments across ranks (a
// mismatch is a CommError on every rank), and waits for at most
// `timeout_seconds`; a timeout or an NCCL error aborts the NCCL communicator,
// which is unusable afterwards: the caller reports and calls abort().
#pragma once

#if REMAT_HAVE_NCCL

#include <cstdint>
#include <string_view>

#include "comm/communicator.h"
#include "comm/mpi.h"

// The handles behind ncclComm_t and cudaStream_t, so that this header does not
// pull in nccl.h and cuda_runtime.h.
struct ncclComm;
struct CUstream_st;

namespace remat::comm {

class Nccl final : public Communicator {
 public:
  // `device` -1: the GPU of this process's rank on its host
  // (OMPI_COMM_WORLD_LOCAL_RANK, else the bootstrap rank) modulo the GPU count.
  // `bootstrap` must outlive this communicator (abort() ends the job through it).
  explicit Nccl(Mpi& bootstrap, int device = -1, double timeout_seconds = 300);
  ~Nccl() override;

  // The number of CUDA devices this process sees; 0 without a GPU or driver.
  static int device_count();

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string_view backend() const override { return "nccl"; }
  int device() const { return device_; }
  double timeout_seconds() const { return timeout_seconds_; }
  // The stream collectives run on (a cudaStream_t).
  CUstream_st* stream() const { return stream_; }
  [[noreturn]] void abort(int exit_code) override;

 protected:
  void exchange_maximum(AgreementValues& values) override;
  void do_allreduce(void* data, int64_t count, DType dtype, ReduceOp op) override;
  void do_broadcast(void* data, int64_t count, DType dtype, int root) override;
  void do_allgather(const void* send, void* receive, int64_t count, DType dtype) override;
  void do_barrier() override;
  bool reaches(Device device) const override { return device.is_cuda(); }

 private:
  void wait(const char* what);
  void release() noexcept;

  Mpi& bootstrap_;
  int rank_ = 0;
  int world_size_ = 1;
  int device_ = 0;
  double timeout_seconds_;
  ncclComm* comm_ = nullptr;        // null once aborted
  CUstream_st* stream_ = nullptr;
  int64_t* agree_device_ = nullptr;  // AgreementValues: the argument check's buffer on the GPU
  int64_t* agree_host_ = nullptr;    // the same, pinned, so copying back does not block
  bool broken_ = false;              // a collective timed out or failed
};

}  // namespace remat::comm

#endif  // REMAT_HAVE_NCCL
