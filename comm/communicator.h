// Communicator: what a worker needs from the others to train together, one
// interface over three backends (docs/design.md, "Distribution"):
//
//   SingleProcess   world size 1, no peers; every collective is the identity.
//   MPI             CPU buffers, processes started by mpirun (comm/mpi.h).
//   NCCL            GPU buffers, one rank per GPU, its unique id carried by
//                   MPI (comm/nccl.h; built only where CUDA is found).
//
//   std::unique_ptr<Communicator> comm = comm::world();   // MPI under mpirun, else single
//   comm->allreduce(gradient_bucket, ReduceOp::Average);   // in place, every rank the same
//   comm->stats().allreduce_calls;
//
// Collectives are in place on contiguous buffers. Every rank must call the
// same collectives in the same order with the same element count and dtype.
// Before any data moves, the ranks agree on the call (comm/agreement.h): a
// mismatch, or arguments that one rank finds invalid, is a CommError on
// every rank, never a hang or garbage. A peer that dies or stops answering
// ends the job within the communicator's timeout, with a message naming the
// call that waited (Mpi's watchdog; Nccl throws a CommError), or sooner when
// mpirun sees the peer die.
// The counters are this rank's: calls, payload bytes (the buffer each call
// reduced or broadcast, not the bytes a ring algorithm puts on the wire) and
// the seconds spent inside collectives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "comm/agreement.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/tensor.h"

namespace remat::comm {

class CommError : public Error {
 public:
  using Error::Error;
};

enum class ReduceOp { Sum, Average };
std::string_view reduce_op_name(ReduceOp op);

struct CommStats {
  int64_t allreduce_calls = 0;
  int64_t allreduce_bytes = 0;
  int64_t broadcast_calls = 0;
  int64_t broadcast_bytes = 0;
  int64_t allgather_calls = 0;
  int64_t allgather_bytes = 0;  // this rank's contribution
  int64_t barrier_calls = 0;
  double seconds = 0;  // wall time inside collectives, all kinds, the argument checks included
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string_view backend() const = 0;  // "single", "mpi", "nccl"

  // In place over `count` elements of `dtype` at `data` (host memory, or
  // device memory for NCCL). Average divides the sum by world_size().
  void allreduce(void* data, int64_t count, DType dtype, ReduceOp op);
  // Every rank receives root's `count` elements.
  void broadcast(void* data, int64_t count, DType dtype, int root = 0);
  // `send` holds `count` elements; `receive` gets world_size() * count of
  // them, rank r's at offset r * count.
  void allgather(const void* send, void* receive, int64_t count, DType dtype);
  void barrier();

  // The same on a whole tensor, which must be contiguous and on a device
  // this backend reaches (CPU for MPI, CUDA for NCCL). A GPU tensor's
  // pending writes (ops queued on its device's compute stream) are waited
  // for first; the raw-pointer forms above leave that to the caller.
  void allreduce(const Tensor& tensor, ReduceOp op);
  void broadcast(const Tensor& tensor, int root = 0);

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  // Ends the whole job at once (MPI_Abort under MPI): for a fatal error on
  // one rank, so that the others do not wait for it in a collective.
  [[noreturn]] virtual void abort(int exit_code) = 0;

 protected:
  Communicator() = default;

  // The argument check of one call on every rank (comm/agreement.h), run by
  // each collective before its data moves; `problem` is what this rank found
  // wrong with its own arguments ("" if nothing), thrown here after the
  // peers have learnt that a rank failed. Backends that bootstrap others
  // (Mpi::broadcast_bytes) call it for their uncounted collectives.
  void agree(CallArguments call, const std::string& problem);
  // Replaces each value by its maximum over the ranks (the identity for one
  // process); the agreement's only traffic.
  virtual void exchange_maximum(AgreementValues& values) = 0;

  virtual void do_allreduce(void* data, int64_t count, DType dtype, ReduceOp op) = 0;
  virtual void do_broadcast(void* data, int64_t count, DType dtype, int root) = 0;
  virtual void do_allgather(const void* send, void* receive, int64_t count, DType dtype) = 0;
  virtual void do_barrier() = 0;
  // Whether this backend reads and writes buffers on `device`.
  virtual bool reaches(Device device) const = 0;

 private:
  std::string tensor_problem(const Tensor& tensor, const char* what) const;
  // Waits for the work queued to write `tensor` (a GPU's compute stream);
  // what went wrong there, or "".
  std::string wait_for_writers(const Tensor& tensor, const char* what) const;

  CommStats stats_;
};

// World size 1: allreduce and broadcast leave the buffer as it is (the sum
// and the average of one value are that value), allgather copies.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view backend() const override { return "single"; }
  [[noreturn]] void abort(int exit_code) override;

 protected:
  void exchange_maximum(AgreementValues&) override {}
  void do_allreduce(void*, int64_t, DType, ReduceOp) override {}
  void do_broadcast(void*, int64_t, DType, int) override {}
  void do_allgather(const void* send, void* receive, int64_t count, DType dtype) override;
  void do_barrier() override {}
  bool reaches(Device device) const override { return device.is_cpu(); }
};

// The communicator of this process: MPI when it was started by mpirun (or
// another MPI launcher, with any number of ranks), else SingleProcess.
// `timeout_seconds` bounds every MPI collective (see comm/mpi.h).
std::unique_ptr<Communicator> world(double timeout_seconds = 300);

}  // namespace remat::comm
