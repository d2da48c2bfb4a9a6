// Watchdog; see watchdog.h.
#include "comm/watchdog.h"

#include <cstdio>
#include <cstdlib>

namespace remat::comm {

Watchdog::Watchdog(double timeout_seconds, std::string who)
    : timeout_seconds_(timeout_seconds), who_(std::move(who)), thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_one();
  thread_.join();
}

Watchdog::Watch Watchdog::watch(std::string what) {
  {
    std::lock_guard lock(mutex_);
    armed_ = true;
    what_ = std::move(what);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(timeout_seconds_));
  }
  changed_.notify_one();
  return Watch(*this);
}

void Watchdog::disarm() {
  std::lock_guard lock(mutex_);
  armed_ = false;
}

void Watchdog::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      changed_.wait(lock);
      continue;
    }
    const auto deadline = deadline_;
    changed_.wait_until(lock, deadline);
    if (armed_ && !stopping_ && deadline_ == deadline && std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr,
                   "%s: %s got no answer within %g s: a peer rank stopped or died; ending this process (exit code "
                   "%d) so that mpirun ends the job\n",
                   who_.c_str(), what_.c_str(), timeout_seconds_, kWatchdogExitCode);
      std::fflush(stderr);
      std::_Exit(kWatchdogExitCode);
    }
  }
}

}  // namespace remat::comm
