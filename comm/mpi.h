// The MPI backend of Communicator: CPU buffers, one process per rank, started
// by mpirun on one host or many (OpenMPI from Debian).
//
//   mpirun -np 4 build/remat train --task fashion-mnist --local-sgd-steps 8
//
// MPI is initialised by the first Mpi in the process and finalised at exit.
// Each Mpi works on its own duplicate of MPI_COMM_WORLD.
//
// Every collective first agrees on its arguments (Communicator::agree, one
// small allreduce here): a rank that passes another size fails on every
// rank with a CommError naming the range, instead of corrupting memory or
// hanging. The payload then moves in MPI's blocking collectives (its tuned
// algorithms: the non-blocking ones were 2x slower for megabytes on two
// ranks, bench/comm_bench.cpp), each under a Watchdog: a peer that stops
// answering for `timeout_seconds` ends this process with a message naming
// the call, and mpirun the job. A peer that died is seen sooner by mpirun.
#pragma once

#include <memory>
#include <string_view>

#include "comm/communicator.h"
#include "comm/watchdog.h"

namespace remat::comm {

class Mpi final : public Communicator {
 public:
  explicit Mpi(double timeout_seconds = 300);
  ~Mpi() override;

  // Whether this process was started by an MPI launcher (mpirun sets
  // OMPI_COMM_WORLD_SIZE; other launchers PMI_SIZE or PMIX_RANK).
  static bool launched_by_mpi();
  // This process's rank as the launcher set it (0 when not launched by MPI),
  // known before any communicator exists: for printing on rank 0 only.
  static int launch_rank();
  // The job's rank count as the launcher set it; 0 when unknown.
  static int launch_size();
  // Ends every process of the job (MPI_Abort on MPI_COMM_WORLD when MPI is
  // up, else exit): for a fatal error on one rank, which the others would
  // otherwise wait for in their next collective.
  [[noreturn]] static void abort_job(int exit_code);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string_view backend() const override { return "mpi"; }
  double timeout_seconds() const { return timeout_seconds_; }
  [[noreturn]] void abort(int exit_code) override;

  // Root's `bytes` bytes at `data` to every rank, outside the counters: how
  // backends that bootstrap over MPI (NCCL) carry their unique id.
  void broadcast_bytes(void* data, int64_t bytes, int root);

 protected:
  void exchange_maximum(AgreementValues& values) override;
  void do_allreduce(void* data, int64_t count, DType dtype, ReduceOp op) override;
  void do_broadcast(void* data, int64_t count, DType dtype, int root) override;
  void do_allgather(const void* send, void* receive, int64_t count, DType dtype) override;
  void do_barrier() override;
  bool reaches(Device device) const override { return device.is_cpu(); }

 private:
  struct State;

  std::unique_ptr<State> state_;
  int rank_ = 0;
  int world_size_ = 1;
  double timeout_seconds_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace remat::comm
