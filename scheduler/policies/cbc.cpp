// CBC in a child process (Note [CBC in a child process] in cbc.h).
#include "scheduler/policies/cbc.h"

#include <Cbc_C_Interface.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace remat::scheduler::cbc {
namespace {

// Past its time limit, how long a child has before it is killed: CBC looks
// at its clock between nodes only, and the first node of a large program
// (GPT-2's graph of 24 blocks, tied: 80,142 columns and 249,268 rows) can
// take it seconds past a short limit. Its caller's plans stand; what it
// would have proved is lost.
double grace_seconds(double seconds) { return std::max(1.5, 0.1 * seconds); }

// How CBC is asked: as it likes, or (after a failure) avoiding the code of
// CLP's known assertions.
enum class Settings { kDefault, kCareful };

// A solve's `seconds`: CBC's own limit, and how long past it the child may
// run. solve(): all of them and its grace; solve_within(): nine tenths, and
// the tenth left.
struct Limit {
  double cbc_seconds, grace;
};
Limit limit_of(double seconds, bool within) {
  return within ? Limit{0.9 * seconds, 0.1 * seconds} : Limit{seconds, grace_seconds(seconds)};
}

// What the child sends: flags, the bound, the solutions, then the status words.
struct Header {
  int32_t optimal, infeasible, time_limit, solutions, columns, status_bytes;
  double best_possible;
};

std::string status_words(Cbc_Model* model) {
  if (Cbc_isProvenOptimal(model)) return "optimal";
  if (Cbc_isProvenInfeasible(model)) return "infeasible";
  if (Cbc_isSecondsLimitReached(model)) return "time limit";
  if (Cbc_isAbandoned(model)) return "abandoned (numerical difficulties)";
  return fmt::format("stopped (status {}, secondary {})", Cbc_status(model), Cbc_secondaryStatus(model));
}

bool write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// In the child: solve and write the outcome to fd.
bool solve_here(const Program& p, double seconds, Settings settings, int fd) {
  const auto began = std::chrono::steady_clock::now();  // before CBC's own clock starts
  Cbc_Model* model = Cbc_newModel();
  std::vector<CoinBigIndex> start(p.column_start.begin(), p.column_start.end());
  Cbc_loadProblem(model, p.columns(), p.rows(), start.data(), p.index.data(), p.value.data(), p.lower.data(),
                  p.upper.data(), p.objective.data(), p.row_lower.data(), p.row_upper.data());
  for (int j = 0; j < p.columns(); ++j) {
    if (p.integer[static_cast<size_t>(j)]) Cbc_setInteger(model, j);
  }
  Cbc_setLogLevel(model, 0);
  Cbc_setParameter(model, "timeMode", "elapsed");  // the parent's clock: wall time, not CPU time
  Cbc_setMaximumSeconds(model, seconds);
  Cbc_setAllowableGap(model, 0);
  Cbc_setAllowableFractionGap(model, 0);
  if (settings == Settings::kCareful) {
    Cbc_setParameter(model, "presolve", "off");
    Cbc_setParameter(model, "primalPivot", "dantzig");
    Cbc_setParameter(model, "dualPivot", "dantzig");
  }
  Cbc_solve(model);
  std::vector<const double*> found;
  for (int k = 0; k < Cbc_numberSavedSolutions(model); ++k) found.push_back(Cbc_savedSolution(model, k));
  if (const double* x = Cbc_bestSolution(model)) found.push_back(x);
  // CBC 2.10's preprocessing, stopped by the time limit, says "Pre-processing
  // says infeasible or unbounded" (status 0, secondary 1: proven infeasible,
  // and not Cbc_isSecondsLimitReached) of a feasible program. So a verdict
  // reached at the limit proves nothing: it is a time limit.
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  const bool out_of_time = Cbc_isSecondsLimitReached(model) != 0 || took >= 0.95 * seconds;
  const std::string status = out_of_time ? "time limit" : status_words(model);
  const Header h{.optimal = !out_of_time && Cbc_isProvenOptimal(model) != 0,
                 .infeasible = !out_of_time && Cbc_isProvenInfeasible(model) != 0,
                 .time_limit = out_of_time, .solutions = static_cast<int32_t>(found.size()),
                 .columns = p.columns(), .status_bytes = static_cast<int32_t>(status.size()),
                 .best_possible = Cbc_getBestPossibleObjValue(model)};
  bool ok = write_all(fd, &h, sizeof h);
  for (const double* x : found) ok = ok && write_all(fd, x, sizeof(double) * static_cast<size_t>(p.columns()));
  ok = ok && write_all(fd, status.data(), status.size());
  return ok;
}

// The child's whole life: no exception may unwind into the parent's code
// (its callers, a test runner's catch), and no exit handler of the
// parent's may run (_exit).
[[noreturn]] void child(const Program& p, double seconds, Settings settings, int out, int err,
                        void (*in_child)()) noexcept {
  dup2(err, STDERR_FILENO);
  dup2(err, STDOUT_FILENO);
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // what CBC prints reaches the parent even if it aborts
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // an abort would dump the engine's whole address space
  try {
    if (in_child) in_child();
    _exit(solve_here(p, seconds, settings, out) ? 0 : 3);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "CBC's process: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "CBC's process: an exception\n");
  }
  _exit(4);
}

// Reads the child's two pipes until both close or the deadline passes.
// False when the deadline passed.
bool drain(int out, int err, std::string& got, std::string& printed, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
  std::string* into[2] = {&got, &printed};
  int open = 2;
  char buffer[1 << 16];
  while (open > 0) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    const int n = poll(fds, 2, static_cast<int>(std::min(left * 1000 + 1, 1e9)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return true;  // cannot wait: let waitpid tell
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t r = read(fds[i].fd, buffer, sizeof buffer);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        fds[i].fd = -1;
        --open;
      } else {
        into[i]->append(buffer, static_cast<size_t>(r));
      }
    }
  }
  return true;
}

// The last non-empty line of what the child printed, shortened.
std::string last_line(const std::string& printed) {
  size_t end = printed.find_last_not_of("\r\n ");
  if (end == std::string::npos) return "";
  const size_t newline = printed.rfind('\n', end);
  const size_t begin = newline == std::string::npos ? 0 : newline + 1;
  std::string line = printed.substr(begin, end + 1 - begin);
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return line;
}

Outcome failure(std::string why) {
  Outcome o;
  o.failed = true;
  o.status = std::move(why);
  return o;
}

Outcome attempt(const Program& p, Limit limit, Settings settings, void (*in_child)()) {
  const double seconds = limit.cbc_seconds;
  int out[2], err[2];  // close-on-exec: another fork's exec must not keep them open
  if (pipe2(out, O_CLOEXEC) != 0) {
    return failure(fmt::format("could not start the solver (pipe: {})", std::strerror(errno)));
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return failure(fmt::format("could not start the solver (pipe: {})", std::strerror(errno)));
  }
  std::fflush(nullptr);  // the parent's buffered output is not the child's to print
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return failure(fmt::format("could not start the solver (fork: {})", std::strerror(errno)));
  }
  if (pid == 0) {
    close(out[0]);
    close(err[0]);
    child(p, seconds, settings, out[1], err[1], in_child);
  }
  close(out[1]);
  close(err[1]);
  std::string got, printed;
  const double grace = limit.grace;
  const bool in_time = drain(out[0], err[0], got, printed, seconds + grace);
  if (!in_time) kill(pid, SIGKILL);
  close(out[0]);
  close(err[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  const std::string said = last_line(printed);
  const std::string saying = said.empty() ? "" : fmt::format(": \"{}\"", said);
  if (!in_time) {
    Outcome o = failure(fmt::format("time limit (CBC was still running {:g} s past it and was stopped)", grace));
    o.time_limit = true;
    return o;
  }
  if (printed.find("Sanitizer") != std::string::npos) {  // a finding in the child: show it whole
    std::fprintf(stderr, "%s", printed.c_str());
  }
  if (WIFSIGNALED(wstatus)) {
    return failure(fmt::format("CBC died of signal {} ({}){}", WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)), saying));
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return failure(fmt::format("CBC's process exited with status {}{}", WEXITSTATUS(wstatus), saying));
  }
  Header h{};
  if (got.size() < sizeof h) return failure("CBC's process sent too little");
  std::memcpy(&h, got.data(), sizeof h);
  const size_t row = sizeof(double) * static_cast<size_t>(h.columns);
  if (h.columns != p.columns() || h.solutions < 0 || h.status_bytes < 0 ||
      got.size() != sizeof h + row * static_cast<size_t>(h.solutions) + static_cast<size_t>(h.status_bytes)) {
    return failure("CBC's process sent a malformed answer");
  }
  Outcome o;
  o.optimal = h.optimal != 0;
  o.infeasible = h.infeasible != 0;
  o.time_limit = h.time_limit != 0;
  o.best_possible = h.best_possible;
  for (int32_t k = 0; k < h.solutions; ++k) {
    std::vector<double> x(static_cast<size_t>(h.columns));
    std::memcpy(x.data(), got.data() + sizeof h + row * static_cast<size_t>(k), row);
    o.solutions.push_back(std::move(x));
  }
  o.status = got.substr(sizeof h + row * static_cast<size_t>(h.solutions));
  return o;
}

// solve() and solve_within(): a first try, and a careful one in the time
// left where the first failed.
Outcome solve_twice(const Program& program, double seconds, bool within, void (*in_child)()) {
  const auto start = std::chrono::steady_clock::now();
  Outcome first = attempt(program, limit_of(seconds, within), Settings::kDefault, in_child);
  if (!first.failed || first.time_limit) return first;
  const double left = seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (left <= 0.01) return first;
  Outcome second = attempt(program, limit_of(left, within), Settings::kCareful, in_child);
  if (!second.failed) {
    second.retried = fmt::format("solved on a second try, without presolve and with Dantzig pricing; the first: {}",
                                 first.status);
    return second;
  }
  return failure(fmt::format("{}; again without presolve and with Dantzig pricing: {}", first.status, second.status));
}

}  // namespace

Outcome solve(const Program& program, double seconds, void (*in_child)()) {
  return solve_twice(program, seconds, false, in_child);
}

Outcome solve_within(const Program& program, double seconds, void (*in_child)()) {
  return solve_twice(program, seconds, true, in_child);
}

}  // namespace remat::scheduler::cbc
