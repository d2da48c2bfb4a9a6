// remat's subcommands: each is a Command in its own file (train_command.cpp,
// bench_command.cpp, explain_command.cpp, tradeoff_command.cpp), listed in
// the table of commands() that main (remat.cpp) adds to its CLI11 App, as
// scheduler/policies/registry.cpp lists the policies. Also the flags and
// helpers that several subcommands share (options.cpp). No training or
// measuring logic: that is train/'s.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/workload.h"

namespace remat::tools {

// One subcommand: add() puts it and its flags on the program's App before
// parsing; run() runs it after parsing, when it was the one given. Errors
// are thrown (remat::Error); main prints them.
class Command {
 public:
  virtual ~Command() = default;
  virtual void add(CLI::App& app) = 0;
  virtual void run() = 0;
};

struct CommandEntry {
  const char* name;
  std::unique_ptr<Command> (*make)();
};

std::unique_ptr<Command> make_train_command();
std::unique_ptr<Command> make_bench_command();
std::unique_ptr<Command> make_explain_command();
std::unique_ptr<Command> make_tradeoff_command();

// The subcommands in the order --help lists them.
const std::vector<CommandEntry>& commands();

// remat train and remat bench: --tf32, --fused-epilogues.
extern const char* const kTf32Help;
extern const char* const kFusedEpiloguesHelp;

// A seed: an integer from 0 to 2^64 - 1, nothing else ("bench --seed" names
// the flag in the error).
uint64_t parse_seed(const std::string& text, std::string_view flag);

// "50%" -> 0.5, for --budget.
double parse_percent(const std::string& text, std::string_view what);

// "12.34 MiB".
std::string mib(int64_t bytes);

// Only rank 0 of an mpirun job prints headers and summaries.
bool main_process();

// The options bench and explain share: which workload, and how to plan it.
void add_plan_options(CLI::App* command, workloads::WorkloadOptions& options, std::string& budget);

// budget ("64MiB" or "50%", from add_plan_options) into options, the error
// naming what ("bench --budget").
void apply_budget(const std::string& budget, std::string_view what, workloads::WorkloadOptions& options);

// A model of the user's instead of a --workload preset (workloads/workload.h):
// its flags, and after parsing, the check that they fit the --model given.
// The sizes a GPT and a Llama share are held here until the model is known,
// and each model's own default (W2's, W4's) stands where one is not given.
struct ModelFlags {
  std::string head;  // --head: the model's default (untied for both) when empty
  std::string attention = "fused";  // --attention
  std::string mlp_path = "fused";   // --mlp
  std::optional<int64_t> n_layer, n_embd, n_head, block_size, vocab_size;
  std::vector<CLI::Option*> shared, gpt, llama, mlp;  // shared: --model gpt or llama
  CLI::Option* model = nullptr;
  CLI::Option* hf = nullptr;
  CLI::Option* attention_flag = nullptr;
};

void add_model_options(CLI::App* command, workloads::ModelSpec& spec, ModelFlags& flags);
void finish_model_spec(const CLI::App* app, workloads::ModelSpec& spec, const ModelFlags& flags);

}  // namespace remat::tools
