// remat bench: run a reference workload (docs/workloads.md), or a model of
// the user's, under a policy and print what it measured: a table of
// fields, or one JSON line with --json.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tools/command.h"
#if REMAT_HAVE_CUDA
#include "kernels/cuda/gemm.h"
#endif

namespace remat::tools {
namespace {

void run_bench(const workloads::WorkloadOptions& options, const std::string& against, bool json) {
  const nlohmann::ordered_json fields = against.empty()
                                            ? workloads::run_workload(options).to_json()
                                            : workloads::run_paired_workload(options, against).to_json();
  if (json) {
    fmt::print("{}\n", fields.dump());
    return;
  }
  for (const auto& [key, value] : fields.items()) {
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (value.is_number_integer() && key.find("bytes") != std::string::npos) text += " (" + mib(value.get<int64_t>()) + ")";
    if (value.is_array()) {
      std::vector<std::string> items;
      for (const auto& item : value) items.push_back(fmt::format("{:.3f}", item.get<double>()));
      text = fmt::format("[{}]", fmt::join(items, ", "));
    }
    fmt::print("{:<33} {}\n", key, text);
  }
}

class BenchCommand : public Command {
 public:
  void add(CLI::App& app) override {
    bench_ = app.add_subcommand("bench", "run a reference workload (docs/workloads.md) and measure it");
    add_plan_options(bench_, options_, budget_);
    add_model_options(bench_, options_.model, model_);
    bench_->add_option("--threads", options_.threads, "CPU threads")->capture_default_str();
    bench_->add_option("--steps", options_.steps, "timed steps")->capture_default_str();
    bench_->add_option("--warmup", options_.warmup, "untimed steps first (more while a plan is remade from measured times)")->capture_default_str();
    bench_->add_option("--seed", seed_, "seed of weights and batch (0)");
    bench_->add_flag("--json", json_, "print one JSON line");
    bench_->add_flag("--tf32", tf32_, kTf32Help);
    bench_->add_flag("--fused-epilogues", fused_epilogues_, kFusedEpiloguesHelp);
    bench_->add_option("--trace", options_.trace_path, "write the last step's memory timeline (Chrome trace JSON)");
    bench_->add_option("--first-step", options_.first_step, "how the first step gets its plan: rehearse (planned "
                       "from a rehearsal on the meta device: the first step already runs the policy) or profile (run "
                       "under blocks and measured)")
        ->check(CLI::IsMember({"rehearse", "profile"}))
        ->capture_default_str();
    bench_->add_option("--profile", options_.profile_path, "plan every step from this saved profile (JSON; the "
                       "same plan on every run and machine)");
    bench_->add_option("--save-profile", options_.save_profile_path, "write the profile the plan was made from (JSON)");
    bench_->add_option("--against", against_, "also run a copy under this policy (e.g. none), alternating steps, and "
                       "report the per-step time ratios");
  }

  void run() override {
    if (!seed_.empty()) options_.seed = parse_seed(seed_, "bench --seed");
    apply_budget(budget_, "bench --budget", options_);
    finish_model_spec(bench_, options_.model, model_);
#if REMAT_HAVE_CUDA
    if (tf32_) kernels::cuda::set_allow_tf32(true);
    if (fused_epilogues_) kernels::cuda::set_fused_epilogues(true);
#endif
    run_bench(options_, against_, json_);
  }

 private:
  CLI::App* bench_ = nullptr;
  workloads::WorkloadOptions options_;
  std::string budget_, seed_, against_;
  ModelFlags model_;
  bool json_ = false;
  bool tf32_ = false;
  bool fused_epilogues_ = false;
};

}  // namespace

std::unique_ptr<Command> make_bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace remat::tools
