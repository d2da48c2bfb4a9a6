// remat: the command line program. Adds the subcommands of the table below
// (each in its own file: train_command.cpp, bench_command.cpp,
// explain_command.cpp, tradeoff_command.cpp; tools/command.h) to one CLI11
// App, parses, and runs the one given; no training or measuring logic lives
// here.
//
//   remat train --task fashion-mnist|kjv-gpt [training flags] [--json]
//   remat bench --workload W1|W2|W3 [--device cuda] [--tf32] [--fused-epilogues] --policy none|blocks|sqrt|cost|chain|milp|auto|dtr [--budget 64MiB|50%] [--against none] [--save-profile F | --profile F] [--json]
//   remat explain --workload W1|W2|W3 [--device cuda] --policy P [--budget B] [--format table|csv|json] [--save-profile F | --profile F]
//   remat tradeoff --workload W1|W2|W3 | --model ... [--policies blocks,cost,chain,milp,auto,dtr] [--budgets 25%,50%,...] [--profile F] --out DIR   (CSV, JSON, DOT of blocks and cost)
//   (bench, explain, tradeoff: --model gpt [sizes] | --model mlp --dims 784,1024,10 | --hf DIR instead of --workload)
//
// Each subcommand prints a human table by default and JSON lines with --json.
// SIGINT or SIGTERM during `remat train` stops it after an optimizer step,
// saves a checkpoint there (with --output-dir) and exits 130 or 143.
// Errors from the engine are printed as "remat: error: ..." with exit code 1;
// bad flags are reported by CLI11 with its own non-zero exit codes. The
// ranges of numbers are checked by train/ (train, bench, tradeoff), with
// messages that name the flag and the value.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "comm/mpi.h"
#include "kernels/cpu/gemm_library.h"
#include "tools/command.h"
#include "train/interrupt.h"

namespace remat::tools {

const std::vector<CommandEntry>& commands() {
  static const std::vector<CommandEntry> table{
      {"train", &make_train_command},
      {"bench", &make_bench_command},
      {"explain", &make_explain_command},
      {"tradeoff", &make_tradeoff_command},
  };
  return table;
}

}  // namespace remat::tools

namespace {

using remat::tools::CommandEntry;

// CLI11 says only "A subcommand is required" for `remat foo`: name what was
// given and what there is. Returns whether argv names a command (or asks
// for help).
bool command_given(int argc, char** argv) {
  std::vector<std::string> names;
  for (const CommandEntry& command : remat::tools::commands()) names.emplace_back(command.name);
  if (argc < 2) {
    fmt::print(stderr, "remat: error: no command given; commands: {} (remat --help, remat COMMAND --help)\n",
               fmt::join(names, ", "));
    return false;
  }
  const std::string first = argv[1];
  if (first.starts_with("-")) return true;  // --help, or a flag CLI11 reports
  for (const std::string& name : names) {
    if (first == name) return true;
  }
  fmt::print(stderr, "remat: error: unknown command '{}'; commands: {} (remat --help, remat COMMAND --help)\n", first,
             fmt::join(names, ", "));
  return false;
}

// OpenMP threads that spin while idle take the cores from whatever else
// runs beside them: other ranks under mpirun, other programs (with
// OpenBLAS's threads beside them, a 2-thread training run was 3x slower).
// GEMM and remat's loops share one OpenMP pool (Note [GEMM library]), and
// sleeping waits cost W1 and W2 about 2% at 2 threads on an idle 2-core
// machine (docs/gemm.md). libgomp reads OMP_WAIT_POLICY
// when it loads, before main(), so the program sets it and runs itself
// again, once.
void make_openmp_threads_sleep_when_idle(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then go on as we are
}

// What stopped the run and where it stands, on stderr: the checkpoint to
// continue from, or why there is none.
void say_interrupted(const remat::train::Interrupted& e) {
  const std::string stopped = fmt::format("{}remat: {}: training stopped after step {}",
                                          isatty(STDERR_FILENO) == 1 ? "\n" : "",  // below a progress bar
                                          remat::train::signal_name(e.signal()), e.step());
  if (!e.checkpoint().empty()) {
    fmt::print(stderr, "{}; saved checkpoint '{}'. To continue: the same command with --resume-from-checkpoint "
               "latest\n", stopped, e.checkpoint());
  } else if (e.output_dir().empty()) {
    fmt::print(stderr, "{}; no checkpoint saved (no --output-dir: with one, a stop saves a checkpoint to continue "
               "from with --resume-from-checkpoint latest)\n", stopped);
  } else {
    fmt::print(stderr, "{}; no checkpoint saved (--save-strategy no)\n", stopped);
  }
}

}  // namespace

int main(int argc, char** argv) {
  make_openmp_threads_sleep_when_idle(argv);
  if (!command_given(argc, argv)) return 1;
  CLI::App app{"remat: an autograd engine for efficient training"};
  app.require_subcommand(1);
  // The version and the GEMM this program runs (Note [GEMM library]); the
  // Python module's remat.gemm_summary() and programs built against the
  // installed package say the same (tests/package/).
  app.set_version_flag("--version", [] {
    return fmt::format("remat {}\ngemm: {}", REMAT_VERSION, remat::kernels::cpu::gemm_summary());
  });
  std::vector<std::unique_ptr<remat::tools::Command>> commands;
  for (const CommandEntry& entry : remat::tools::commands()) {
    commands.push_back(entry.make());
    commands.back()->add(app);
  }
  CLI11_PARSE(app, argc, argv);
  // Ctrl-C or SIGTERM during `remat train`: the run stops after its step,
  // saves its checkpoint, and the program exits 128 + the signal (a second
  // one quits at once); train/interrupt.h.
  std::optional<remat::train::InterruptScope> interrupts;
  if (app.got_subcommand("train")) interrupts.emplace();
  try {
    for (size_t i = 0; i < commands.size(); ++i) {
      if (app.got_subcommand(remat::tools::commands()[i].name)) commands[i]->run();
    }
  } catch (const remat::train::Interrupted& e) {  // on every rank alike: each one's step saved and ended
    if (std::max(0, remat::comm::Mpi::launch_rank()) == 0) say_interrupted(e);
    return e.exit_code();
  } catch (const std::exception& e) {  // remat::Error, and e.g. std::bad_alloc
    fmt::print(stderr, "remat: error{}: {}\n",
               remat::comm::Mpi::launched_by_mpi() ? fmt::format(" on rank {}", remat::comm::Mpi::launch_rank()) : "",
               e.what());
    // The other ranks would wait for this one in their next collective.
    if (remat::comm::Mpi::launched_by_mpi()) remat::comm::Mpi::abort_job(1);
    return 1;
  }
  // A signal with no training step left to stop after (it came during the
  // sample or the weights' save, or the run had nothing to train): what was
  // asked for is done, and the exit code says that the signal came.
  if (const int signal = remat::train::pending_stop_signal(); signal != 0) {
    if (std::max(0, remat::comm::Mpi::launch_rank()) == 0) {
      fmt::print(stderr, "remat: {}: no training step was left to stop after; the command finished\n",
                 remat::train::signal_name(signal));
    }
    return 128 + signal;
  }
  return 0;
}
