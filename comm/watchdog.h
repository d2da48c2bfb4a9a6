// Watchdog: bounds how long this process may wait in a collective. A blocking
// MPI call cannot be interrupted, so a peer that stopped answering would
// leave it waiting forever; the watchdog's thread sees the deadline pass,
// prints what was waited for, and ends the process, so that mpirun ends the
// job with that message instead of hanging.
//
//   Watchdog watchdog(300, "mpi: rank 0 of 4");
//   { auto watch = watchdog.watch("allreduce"); MPI_Allreduce(...); }
//
// Used by Mpi around each collective (comm/mpi.cpp). Ending the process,
// not throwing, is deliberate: the call it would throw from never returns.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace remat::comm {

// The exit code of a process the watchdog ended (as timeout(1)'s).
inline constexpr int kWatchdogExitCode = 124;

class Watchdog {
 public:
  class Watch;

  // `who` starts the message ("mpi: rank 0 of 4").
  Watchdog(double timeout_seconds, std::string who);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Arms the deadline for one wait, `what` naming it, until the Watch ends.
  [[nodiscard]] Watch watch(std::string what);

 private:
  void run();
  void disarm();

  double timeout_seconds_;
  std::string who_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  bool armed_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::string what_;
  std::thread thread_;  // last: starts once the members above exist
};

class Watchdog::Watch {
 public:
  ~Watch() { watchdog_.disarm(); }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  friend class Watchdog;
  explicit Watch(Watchdog& watchdog) : watchdog_(watchdog) {}
  Watchdog& watchdog_;
};

}  // namespace remat::comm
