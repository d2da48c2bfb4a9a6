// Progress; see progress.h.
#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace remat::train {
namespace {

// "mm:ss", or "h:mm:ss" from an hour on.
std::string clock_time(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, std::round(seconds)));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{:02}:{:02}", s / 60, s % 60);
}

}  // namespace

std::string progress_line(int64_t step, int64_t steps, int64_t steps_run, double seconds, double loss, double samples,
                          int width) {
  const double done = steps > 0 ? std::clamp(static_cast<double>(step) / static_cast<double>(steps), 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(done * width);
  const double remaining =
      steps_run > 0 ? seconds / static_cast<double>(steps_run) * static_cast<double>(std::max<int64_t>(0, steps - step))
                    : 0.0;
  const double rate = seconds > 0 ? samples / seconds : 0.0;
  const int digits = static_cast<int>(std::to_string(steps).size());
  return fmt::format("[{}{}] {:>{}}/{} {:3.0f}% {}<{} loss {:.4f} {:.0f} samples/s", std::string(filled, '#'),
                     std::string(width - filled, '.'), step, digits, steps, 100 * done, clock_time(seconds),
                     clock_time(remaining), loss, rate);
}

Progress::Progress(std::FILE* out) : out_(out), terminal_(isatty(fileno(out)) == 1) {}

void Progress::update(int64_t step, int64_t steps, double loss, double samples) {
  samples_ += samples;
  ++steps_run_;
  const auto now = Clock::now();
  const double since_last = std::chrono::duration<double>(now - last_).count();
  // A terminal's bar at most ten times a second (and at the end), a plain
  // line every five seconds.
  if (step != steps && since_last < (terminal_ ? 0.1 : 5.0)) return;
  last_ = now;
  const std::string line =
      progress_line(step, steps, steps_run_, std::chrono::duration<double>(now - start_).count(), loss, samples_);
  if (terminal_) {
    fmt::print(out_, "\r{}", line);
    drawn_ = true;
  } else {
    fmt::print(out_, "{}\n", line);
  }
  std::fflush(out_);
}

void Progress::finish() {
  if (terminal_ && drawn_) fmt::print(out_, "\n");
  drawn_ = false;
  std::fflush(out_);
}

}  // namespace remat::train
