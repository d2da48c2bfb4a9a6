// A job in which one rank stops answering: rank 1 either sleeps ("stuck") or
// exits at once ("dead") while the others wait in an allreduce. CTest runs it
// under mpirun and checks that the job ends with a clear error within its
// timeout instead of hanging: for a stuck peer, rank 0's watchdog names the
// call it waited in after the 2 s collective timeout and ends rank 0, and
// mpirun the job; a dead peer is seen by mpirun, which ends the job.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <unistd.h>

#include "comm/mpi.h"
#include "engine/factory.h"

int main(int argc, char** argv) {
  const bool dead = argc > 1 && std::strcmp(argv[1], "dead") == 0;
  remat::comm::Mpi comm(/*timeout_seconds=*/2);
  if (comm.rank() == 1) {
    if (dead) _exit(3);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  remat::Tensor values = remat::zeros({1000});
  comm.allreduce(values, remat::comm::ReduceOp::Sum);
  std::fprintf(stderr, "rank %d: the allreduce returned, which it must not\n", comm.rank());
  return 1;
}
