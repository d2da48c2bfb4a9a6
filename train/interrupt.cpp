// InterruptScope and Interrupted; see interrupt.h. The handler does only
// what a signal handler may (POSIX's async-signal-safe list): it stores the
// signal in a lock-free atomic and writes a fixed line; on a second signal
// it puts the default action back and raises the signal again, which ends
// the process as soon as the handler returns (the signal is blocked while
// its handler runs).
#include "train/interrupt.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <utility>

namespace remat::train {
namespace {

static_assert(std::atomic<int>::is_always_lock_free, "the handler's flag must be lock-free");

std::atomic<int> pending{0};
std::atomic<bool> installed{false};
struct sigaction previous_int, previous_term;

// The lines the handler writes, made before any signal can arrive.
char int_line[160], term_line[160];

void fill(char* line, size_t size, const char* text, bool terminal) {
  // On a terminal the progress bar (or the echoed ^C) holds the line.
  std::snprintf(line, size, "%sremat: %s", terminal ? "\n" : "", text);
}

extern "C" void on_stop_signal(int signal) {
  int none = 0;
  if (pending.compare_exchange_strong(none, signal)) {
    const char* line = signal == SIGINT ? int_line : term_line;
    const ssize_t written = write(STDERR_FILENO, line, std::strlen(line));
    (void)written;  // nothing to do about a stderr that cannot be written
    return;
  }
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);
  raise(signal);
}

}  // namespace

InterruptScope::InterruptScope() {
  REMAT_CHECK(!installed.exchange(true), "InterruptScope: one is alive already (one per process)");
  pending = 0;
  const bool terminal = isatty(STDERR_FILENO) == 1;
  fill(int_line, sizeof int_line, "SIGINT: stopping after this optimizer step and saving its checkpoint (if the "
       "run saves any); Ctrl-C again quits at once\n", terminal);
  fill(term_line, sizeof term_line, "SIGTERM: stopping after this optimizer step and saving its checkpoint (if the "
       "run saves any); a second signal quits at once\n", terminal);
  struct sigaction action {};
  action.sa_handler = &on_stop_signal;
  sigemptyset(&action.sa_mask);
  // Both blocked while either's handler runs: the second waits for the first.
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  action.sa_flags = SA_RESTART;  // reads and writes under way go on instead of failing with EINTR
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
}

InterruptScope::~InterruptScope() {
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
  pending = 0;
  installed = false;
}

int pending_stop_signal() { return installed ? pending.load() : 0; }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return fmt::format("signal {}", signal);
}

namespace {

std::string interrupted_message(int signal, int64_t step, const std::string& checkpoint,
                                const std::string& output_dir) {
  const std::string saved = !checkpoint.empty()     ? fmt::format("saved checkpoint '{}'", checkpoint)
                            : output_dir.empty()     ? std::string("no checkpoint saved (no output_dir)")
                                                     : std::string("no checkpoint saved (save_strategy 'no')");
  return fmt::format("Trainer: stopped by {} after step {}; {}", signal_name(signal), step, saved);
}

}  // namespace

Interrupted::Interrupted(int signal, int64_t step, std::string checkpoint, std::string output_dir)
    : Error(interrupted_message(signal, step, checkpoint, output_dir)), signal_(signal), step_(step),
      checkpoint_(std::move(checkpoint)), output_dir_(std::move(output_dir)) {}

}  // namespace remat::train
