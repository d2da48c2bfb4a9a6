// comm_bench: the time of one allreduce through remat's Communicator (its
// argument check included) against a bare MPI_Allreduce of the same buffer,
// from 4 bytes to 64 MiB, under mpirun. The difference is what the check
// that all ranks make the same call costs; the bandwidth column is payload
// bytes per second of one call.
//
//   mpirun -np 4 build/bench/comm_bench [--json]
//
// Each size runs at least 20 times and at least 0.2 s, alternating the two
// kinds; medians per rank 0's clock, after a barrier before each call.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "comm/mpi.h"
#include "engine/factory.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double seconds_of(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int main(int argc, char** argv) {
  const bool json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  remat::comm::Mpi comm;
  if (comm.rank() == 0 && !json) {
    std::printf("%d ranks: allreduce (sum, float32) through remat's Communicator against bare MPI_Allreduce\n",
                comm.world_size());
    std::printf("%12s %10s %10s %12s %12s\n", "bytes", "remat_us", "mpi_us", "check_us", "remat_GB/s");
  }
  for (int64_t bytes = 4; bytes <= (int64_t{64} << 20); bytes *= 8) {
    const int64_t count = bytes / 4;
    remat::Tensor buffer = remat::zeros({count});
    std::vector<double> remat_times, mpi_times;
    const auto begin = Clock::now();
    for (;;) {
      comm.barrier();
      auto start = Clock::now();
      comm.allreduce(buffer, remat::comm::ReduceOp::Sum);
      remat_times.push_back(seconds_of(start));
      comm.barrier();
      start = Clock::now();
      MPI_Allreduce(MPI_IN_PLACE, buffer.raw_data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      mpi_times.push_back(seconds_of(start));
      // Every rank stops after the same number of rounds: rank 0 decides.
      int64_t more = remat_times.size() < 20 || seconds_of(begin) < 0.2 ? 1 : 0;
      comm.broadcast(&more, 1, remat::DType::Int64, 0);
      if (more == 0) break;
    }
    const double remat_us = 1e6 * median(remat_times), mpi_us = 1e6 * median(mpi_times);
    if (comm.rank() != 0) continue;
    if (json) {
      std::printf("{\"ranks\": %d, \"bytes\": %lld, \"remat_us\": %.2f, \"mpi_us\": %.2f, \"check_us\": %.2f, "
                  "\"calls\": %zu}\n",
                  comm.world_size(), static_cast<long long>(bytes), remat_us, mpi_us, remat_us - mpi_us,
                  remat_times.size());
    } else {
      std::printf("%12lld %10.1f %10.1f %12.1f %12.3f\n", static_cast<long long>(bytes), remat_us, mpi_us,
                  remat_us - mpi_us, static_cast<double>(bytes) / (remat_us * 1e-6) / 1e9);
    }
  }
  return 0;
}
