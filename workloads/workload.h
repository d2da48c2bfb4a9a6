// The reference workloads of docs/workloads.md, run and measured.
//
// run_workload() builds the workload's model and batch with fixed seeds,
// runs warm-up then timed steps (zero_grad + forward + backward + SGD step),
// and reports the fields docs/workloads.md lists. Memory figures come from the
// allocator's counters; times from a steady clock around each whole step.
// Called by `remat bench`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "kernels/cpu/gemm_library.h"
#include "nn/gpt.h"
#include "nn/llama.h"
#include "scheduler/plan.h"

namespace remat::workloads {

// A model of the user's, instead of a preset of docs/workloads.md: a GPT or a
// Llama by its sizes, an MLP by its widths, or a Hugging Face GPT-2 or Llama
// folder (nn/gpt2_pretrained.h, nn/llama_pretrained.h; config.json's
// model_type says which), each on a fixed random batch. GPTs and MLPs train
// with SGD (lr 0.01), Llamas with AdamW (lr 3e-4), as W2 and W4 do.
// W2 is gpt 6 x 256, 4 heads, context 128, vocabulary 256, untied, at batch
// 16 (the defaults); W4 is llama's defaults at batch 8; W1's graph is mlp
// 1024 (x 16), 10 at batch 256, though its batch is drawn from another stream.
struct ModelSpec {
  std::string kind;  // "": the workload preset; "gpt", "llama", "mlp" or "hf"
  nn::GPTConfig gpt{.vocab_size = 256, .block_size = 128, .n_layer = 6, .n_head = 4, .n_embd = 256,
                    .dropout = 0.0, .tie_weights = false};  // kind gpt (W2's sizes by default)
  // kind llama (W4's sizes by default: bench/torch_llama.py's, rms_norm_eps 1e-5 as its).
  nn::LlamaConfig llama{.vocab_size = 65, .hidden_size = 384, .intermediate_size = 1024, .num_hidden_layers = 6,
                        .num_attention_heads = 6, .num_key_value_heads = 2, .max_position_embeddings = 256,
                        .rope_theta = 10000.0, .rms_norm_eps = 1e-5, .tie_word_embeddings = false};
  std::vector<int64_t> dims{784, 1024, 1024, 10};  // kind mlp: input, hidden..., classes
  std::string hf_dir;                              // kind hf
  int64_t batch_size = 16;
  // The attention of every GPT, the presets' (W2, W3) too: the fused op or
  // the explicit path (nn/gpt.h, AttentionPath). gpt.attention is not read;
  // a Llama always runs the fused op.
  nn::AttentionPath attention = nn::AttentionPath::Fused;
  // The MLP of every GPT, likewise (nn/gpt.h, MlpPath). gpt.mlp is not read.
  nn::MlpPath mlp = nn::MlpPath::Fused;
};
// "gpt 6x256 h4 T128 V256 untied B16", "llama 6x384 h6 kv2 ff1024 T256 V65
// untied B8" (" theta 500000" after the vocabulary where rope_theta is not
// 1e4), "mlp 784-1024-1024-10 B16", "hf DIR B16" (" explicit-attention",
// " explicit-mlp" before the batch where a model runs those paths); the
// preset's name when kind is "".
std::string describe(const ModelSpec& spec, const std::string& preset);

struct WorkloadOptions {
  std::string workload = "W1";
  std::string policy = "none";
  std::optional<int64_t> budget;  // peak activation bytes, for the policies that take one (scheduler::takes_budget)
  // A budget as a fraction of keep-all's measured peak (bench --budget 50%),
  // in (0, 1]: resolve_budget (run_workload, plan_workload) takes it of
  // keep-all's predicted peak on the same graph (planned from the saved
  // profile where one is given, else from a short run under policy none).
  std::optional<double> budget_fraction;
  scheduler::Overrides overrides;  // ops always kept / always replayed
  double solver_time_limit_s = scheduler::kSolverTimeLimitS;  // milp's, per plan (scheduler::PlanOptions)
  // The first step planned from a rehearsal ("rehearse"), or run under
  // blocks and measured ("profile"): scheduler::PlanOptions::first_step.
  std::string first_step = "rehearse";
  int threads = 1;
  int steps = 10;   // timed steps
  int warmup = 3;   // untimed steps before them
  uint64_t seed = 0;
  // If set, the last timed step's memory timeline is written here as a
  // Chrome trace (engine/trace.h).
  std::string trace_path;
  // Where it runs: cpu, or cuda[:N] (model and batch moved with Module::to).
  std::string device = "cpu";
  // A profile of this workload's graph saved by an earlier run
  // (scheduler/profile_json.h): every step runs under the plan made from
  // it, never re-planned from this run's times, so the plan is the same on
  // every run and every machine. A profile of another graph is an error.
  std::string profile_path;
  // At the end, the profile the run's plan was made from (for --profile).
  std::string save_profile_path;
  // A model of the user's instead of `workload` (reported under its
  // description, describe()), and the attention of any GPT.
  ModelSpec model;
  // Told what plan_workload and resolve_budget start on ("rehearsing ...",
  // "planning ..."), for the phases that may take seconds; may be empty.
  std::function<void(const std::string& line)> progress;
};

struct WorkloadReport {
  std::string workload, policy, device = "cpu";
  std::string profile;  // the saved profile planned from ("" when planned from this run's times)
  std::optional<int64_t> budget;
  int threads = 1;
  // The machine the figures come from: the CPU's name (/proc/cpuinfo), and
  // the GEMM library, its kernels and their threads (kernels/cpu/gemm_library.h).
  std::string cpu;
  std::string gpu;  // the GPU, driver, CUDA and cuBLAS versions with --device cuda; "" on the CPU
  // The GPU's float32 matrix math (--tf32, --fused-epilogues); false on the CPU.
  bool tf32 = false, fused_epilogues = false;
  kernels::cpu::GemmInfo gemm;
  int steps = 0;
  int warmup = 0;  // untimed steps before them: the asked-for ones, or the steps until the plan was final
  double step_ms_median = 0, step_ms_min = 0, step_ms_max = 0;
  // Medians over the timed steps of the step's phases: the recorded forward
  // (the loss included; what the Checkpointer times), backward (replays
  // included), and the rest: zero_grad, the Checkpointer settling the
  // previous step at record() (profiling it, planning the first steps), the
  // SGD step.
  double forward_ms_median = 0, backward_ms_median = 0, rest_ms_median = 0;
  // Activation bytes alive when forward ends (what backward will read),
  // the input batch included (as PyTorch's saved-tensor hooks count it).
  int64_t saved_bytes_after_forward = 0;
  // How far activation + temporary bytes rose over a step above their level
  // before it (the input batch is alive before the step and not counted):
  // the allocator's counterpart of PyTorch's resident-memory rise.
  int64_t peak_activation_bytes = 0;
  // The first step's (warm-ups included), which a budget bounds too.
  int64_t first_step_peak_activation_bytes = 0;
  // Every live byte at the step's peak: parameters, gradients, optimizer
  // state, the batch, activations and temporaries.
  int64_t peak_total_bytes = 0;
  // The liveness simulator's figure for the plan of the timed steps.
  std::optional<int64_t> predicted_peak_activation_bytes;
  // That plan: whose it is (scheduler::Plan::chosen_by, auto's winner),
  // how long make_plan took, and a solver's report (milp).
  std::string chosen_by;
  double planning_ms = 0;
  std::optional<scheduler::SolverReport> solver;
  // Its warnings (scheduler::Plan::warnings): it drops nothing, or its
  // budget binds nothing.
  std::vector<std::string> warnings;
  // Bytes backward reads that the plan keeps, and that it drops (replays).
  int64_t kept_bytes = 0, dropped_bytes = 0;
  int64_t replayed_nodes = 0;
  // Time and FLOPs of replayed nodes in a step (its Checkpointer's Profiler).
  double recompute_ms = 0;
  // The plan's price for its replays, and the step time of the profile it
  // was made from (StepReport), for seeing how far the measured figures moved.
  std::optional<double> predicted_recompute_ms, planned_step_ms;
  int64_t recompute_flops = 0;
  // Policy dtr (scheduler/policies/dtr.h), the last timed step's: storages
  // evicted and their bytes, rebuilds, and allocations that went over the
  // budget with nothing left to evict (and by how much at most).
  int64_t evictions = 0, evicted_bytes = 0, rebuilds = 0;
  int64_t over_budget_allocations = 0, max_over_budget_bytes = 0;
  double evicting_ms = 0;  // choosing and freeing victims, in the step
  // keep-all's predicted peak a budget_fraction was taken of, if one was.
  std::optional<int64_t> keep_all_peak_activation_bytes;
  double loss_first = 0, loss_last = 0;
  int64_t parameters = 0;
  // FNV-1a (64-bit, hex) of every parameter's bytes after the last step, in
  // parameter order: two runs whose gradients agree bit for bit on every
  // step have the same digest (policies against keep-all, a device against
  // itself).
  std::string weights_digest;

  nlohmann::ordered_json to_json() const;
};

// A solver's report as JSON (bench's, explain's and tradeoff's "solver").
nlohmann::ordered_json solver_json(const scheduler::SolverReport& report);

// Runs a workload (W1 ... W5, or options.model) under a recompute policy of scheduler/policies/; an unknown
// workload or policy is an error that lists what exists.
WorkloadReport run_workload(const WorkloadOptions& options);

// `options` with budget_fraction resolved into budget (see there), and the
// keep-all peak it was taken of; unchanged, and nullopt, without one.
std::pair<WorkloadOptions, std::optional<int64_t>> resolve_budget(const WorkloadOptions& options);

// Where a paired run's extra time went: the medians over the pairs of its
// forward's and its backward's excess over against's (the backward's less
// that step's replays) and of its replays. Medians, so they need not add up
// to the median step difference; the rest of the step is left out.
struct OverheadBreakdown {
  double forward_ms = 0, backward_without_replays_ms = 0, replays_ms = 0;
};

// The same workload under options.policy and under `against` (usually
// "none"), as two copies with the same seed, stepped alternately: the
// per-step time ratios of a pair share the machine's state of the moment,
// so their median holds still where separate runs drift by several percent.
struct PairedReport {
  WorkloadReport report, baseline;
  std::vector<double> time_ratios;  // per timed step: options.policy's time / against's
  OverheadBreakdown overhead;
  nlohmann::ordered_json to_json() const;
};
PairedReport run_paired_workload(const WorkloadOptions& options, const std::string& against);

// Step times are reported as medians (scheduler/profile.h).
using scheduler::median;

// The workload's graph as the planner saw it (scheduler/profile.h) and the
// plan of options.policy for it (after max(1, options.warmup) + 2 steps; with
// options.profile_path, the saved profile and its plan, and nothing runs;
// with options.device "meta", the plan of a rehearsal of its first step on
// the meta device, from shapes and bytes with nominal times, and nothing
// runs: the graph returned holds no times).
struct WorkloadPlan {
  scheduler::GraphProfile graph;
  scheduler::Plan plan;
};
WorkloadPlan plan_workload(const WorkloadOptions& options);


}  // namespace remat::workloads
