// What bench reports of a workload (workload.h): its name (describe), and
// WorkloadReport's and PairedReport's JSON, the fields bench prints. The
// runs that fill them are in workload.cpp.
#include <string>

#include <fmt/ranges.h>

#include "kernels/cpu/gemm_library.h"
#include "scheduler/profile.h"
#include "workloads/workload.h"

namespace remat::workloads {
namespace {

// The GEMM library as bench reports it (kernels/cpu/gemm_library.h).
nlohmann::ordered_json gemm_json(const kernels::cpu::GemmInfo& gemm) {
  return {{"float32", std::string(kernels::cpu::gemm_library_name(gemm.float32))},
          {"library", gemm.library},
          {"kernels", gemm.kernels},
          {"kernels_isa", std::string(kernels::cpu::isa_name(gemm.kernel_level))},
          {"cpu_isa", std::string(kernels::cpu::isa_name(gemm.cpu_level))},
          {"choice", gemm.choice},
          {"float64", gemm.float64},
          {"runtime", gemm.runtime},
          {"threads", gemm.threads}};
}

}  // namespace

std::string describe(const ModelSpec& spec, const std::string& preset) {
  const std::string paths = std::string(spec.attention == nn::AttentionPath::Explicit ? " explicit-attention" : "") +
                            (spec.mlp == nn::MlpPath::Explicit ? " explicit-mlp" : "");
  if (spec.kind.empty()) return preset + (preset != "W1" ? paths : "");
  if (spec.kind == "mlp") return fmt::format("mlp {} B{}", fmt::join(spec.dims, "-"), spec.batch_size);
  if (spec.kind == "hf") {
    return fmt::format("hf {}{} B{}", spec.hf_dir, paths, spec.batch_size);
  }
  if (spec.kind == "llama") {
    const nn::LlamaConfig& c = spec.llama;
    return fmt::format("llama {}x{} h{} kv{} ff{} T{} V{}{} {}{} B{}", c.num_hidden_layers, c.hidden_size,
                       c.num_attention_heads, c.kv_heads(), c.intermediate_size, c.max_position_embeddings,
                       c.vocab_size, c.rope_theta != 10000.0 ? fmt::format(" theta {}", c.rope_theta) : "",
                       c.tie_word_embeddings ? "tied" : "untied", paths, spec.batch_size);
  }
  const nn::GPTConfig& c = spec.gpt;
  return fmt::format("gpt {}x{} h{} T{} V{} {}{}{} B{}", c.n_layer, c.n_embd, c.n_head, c.block_size, c.vocab_size,
                     c.tie_weights ? "tied" : "untied", c.dropout > 0 ? fmt::format(" dropout {}", c.dropout) : "",
                     paths, spec.batch_size);
}

nlohmann::ordered_json solver_json(const scheduler::SolverReport& r) {
  return {{"status", r.status},     {"objective_ms", r.objective_ms}, {"bound_ms", r.bound_ms},
          {"gap", r.gap},           {"solve_seconds", r.solve_seconds}, {"variables", r.variables},
          {"constraints", r.constraints}, {"solves", r.solves}, {"note", r.note}, {"space", r.space},
          {"found_by", r.found_by}};
}

nlohmann::ordered_json WorkloadReport::to_json() const {
  nlohmann::ordered_json j;
  j["workload"] = workload;
  j["policy"] = policy;
  j["profile"] = profile.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(profile);
  j["budget_bytes"] = budget ? nlohmann::ordered_json(*budget) : nullptr;
  j["threads"] = threads;
  j["device"] = device;
  j["cpu"] = cpu;
  j["gpu"] = gpu.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(gpu);
  j["tf32"] = tf32;
  j["fused_epilogues"] = fused_epilogues;
  j["gemm"] = gemm_json(gemm);
  j["steps"] = steps;
  j["warmup"] = warmup;
  j["step_ms_median"] = step_ms_median;
  j["step_ms_min"] = step_ms_min;
  j["step_ms_max"] = step_ms_max;
  j["forward_ms_median"] = forward_ms_median;
  j["backward_ms_median"] = backward_ms_median;
  j["rest_ms_median"] = rest_ms_median;
  j["saved_bytes_after_forward"] = saved_bytes_after_forward;
  j["peak_activation_bytes"] = peak_activation_bytes;
  j["first_step_peak_activation_bytes"] = first_step_peak_activation_bytes;
  j["predicted_peak_activation_bytes"] =
      predicted_peak_activation_bytes ? nlohmann::ordered_json(*predicted_peak_activation_bytes) : nullptr;
  j["peak_total_bytes"] = peak_total_bytes;
  j["kept_bytes"] = kept_bytes;
  j["dropped_bytes"] = dropped_bytes;
  j["replayed_nodes"] = replayed_nodes;
  j["recompute_ms"] = recompute_ms;
  j["recompute_flops"] = recompute_flops;
  if (policy == "dtr") {
    j["evictions"] = evictions;
    j["evicted_bytes"] = evicted_bytes;
    j["rebuilds"] = rebuilds;
    j["over_budget_allocations"] = over_budget_allocations;
    j["max_over_budget_bytes"] = max_over_budget_bytes;
    j["evicting_ms"] = evicting_ms;
  }
  if (keep_all_peak_activation_bytes) j["keep_all_peak_activation_bytes"] = *keep_all_peak_activation_bytes;
  j["predicted_recompute_ms"] = predicted_recompute_ms ? nlohmann::ordered_json(*predicted_recompute_ms) : nullptr;
  j["planned_step_ms"] = planned_step_ms ? nlohmann::ordered_json(*planned_step_ms) : nullptr;
  j["chosen_by"] = chosen_by;
  j["planning_ms"] = planning_ms;
  if (!warnings.empty()) j["warnings"] = warnings;
  if (solver) {
    j["solver"] = solver_json(*solver);
  }
  j["loss_first"] = loss_first;
  j["loss_last"] = loss_last;
  j["parameters"] = parameters;
  j["weights_digest"] = weights_digest;
  j["engine"] = "remat";
  return j;
}

nlohmann::ordered_json PairedReport::to_json() const {
  nlohmann::ordered_json j = report.to_json();
  j["against_policy"] = baseline.policy;
  j["against_step_ms_median"] = baseline.step_ms_median;
  j["against_peak_activation_bytes"] = baseline.peak_activation_bytes;
  j["time_vs_against_median"] = median(time_ratios);
  // How far that median may be off, with this many pairs on this machine.
  const scheduler::MedianInterval interval = scheduler::median_interval(time_ratios);
  j["time_vs_against_median_interval"] = {
      {"low", interval.low}, {"high", interval.high}, {"coverage", interval.coverage}};
  j["time_vs_against"] = time_ratios;
  j["overhead_ms_median"] = {{"forward", overhead.forward_ms},
                             {"backward_without_replays", overhead.backward_without_replays_ms},
                             {"replays", overhead.replays_ms}};
  j["peak_vs_against"] = baseline.peak_activation_bytes > 0 ? static_cast<double>(report.peak_activation_bytes) /
                                                                  static_cast<double>(baseline.peak_activation_bytes)
                                                            : 0.0;
  return j;
}

}  // namespace remat::workloads
