// Stopping a training run on SIGINT (Ctrl-C) or SIGTERM (a job scheduler's
// "time is up") without losing it: the `remat train` program's answer.
// While an InterruptScope lives (tools/remat.cpp holds one around `remat
// train`), the first of these signals is only noted; the Trainer reads it
// between optimizer steps (pending_stop_signal), stops there, saves its
// checkpoint, and throws Interrupted. A second signal ends the process at
// once, by the signal's default action. Without a scope nothing is caught:
// the Python module's Trainer stops on Python's own handlers (python/train.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "engine/error.h"

namespace remat::train {

// While alive, SIGINT and SIGTERM are caught (the first one noted, and a
// line on stderr says so; a second one of either ends the process as it
// would have without the scope). The previous handlers come back when it
// ends. One at a time per process; not for a library to hold on its
// caller's behalf, since it takes the signals from the whole process.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

// The signal caught since the scope began (SIGINT or SIGTERM); 0 if none,
// or if no scope is alive.
int pending_stop_signal();

// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);

// What Trainer::train throws once a signal stopped it: the run stopped after
// optimizer step `step` and, when saving is on, saved `checkpoint` there
// ("" when nothing was saved: no output_dir, or save_strategy "no"). Its
// exit code is the shell's for a process ended by the signal (130 for
// SIGINT, 143 for SIGTERM).
class Interrupted : public Error {
 public:
  Interrupted(int signal, int64_t step, std::string checkpoint, std::string output_dir);
  int signal() const { return signal_; }
  int64_t step() const { return step_; }
  const std::string& checkpoint() const { return checkpoint_; }
  const std::string& output_dir() const { return output_dir_; }
  int exit_code() const { return 128 + signal_; }

 private:
  int signal_;
  int64_t step_;
  std::string checkpoint_, output_dir_;
};

}  // namespace remat::train
