// The flags and helpers several of remat's subcommands share (command.h):
// seeds, budgets, the plan's flags of bench and explain, and the flags of a
// model of the user's, GPT, Llama or MLP (bench, explain, tradeoff).
#include <fmt/format.h>

#include <charconv>
#include <utility>

#include "comm/mpi.h"
#include "engine/error.h"
#include "tools/command.h"
#include "train/parse.h"

namespace remat::tools {

const char* const kTf32Help = "TF32 tensor-core math for float32 matrix products on the GPU (cuBLAS's "
                              "CUBLAS_TF32_TENSOR_OP_MATH, about 1e-3 relative error; off by default, as in "
                              "PyTorch); no effect on the CPU";

const char* const kFusedEpiloguesHelp = "cuBLASLt GEMM epilogues on the GPU: a linear layer's bias (and GPT's MLP "
                                        "GELU) applied inside its GEMM, the bias gradient taken in the weight "
                                        "gradient's GEMM (float rounding apart from the unfused kernels; off by "
                                        "default); no effect on the CPU";

uint64_t parse_seed(const std::string& text, std::string_view flag) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  REMAT_CHECK(!text.empty() && error == std::errc() && end == text.data() + text.size(), "{} must be an integer from "
              "0 to 18446744073709551615, got '{}'", flag, text);
  return value;
}

double parse_percent(const std::string& text, std::string_view what) {
  double value = 0;
  const std::string_view number(text.data(), text.size() - 1);
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  REMAT_CHECK(error == std::errc() && end == number.data() + number.size() && value > 0 && value <= 100,
              "{}: '{}' is not a share of keep-all's peak in (0, 100]% (examples: 25%, 50%)", what, text);
  return value / 100;
}

std::string mib(int64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

bool main_process() { return comm::Mpi::launch_rank() == 0; }

void add_plan_options(CLI::App* command, workloads::WorkloadOptions& options, std::string& budget) {
  command->add_option("--workload", options.workload, "W1, W2, W3 (GPT-2 124M, --device cuda), W4 (Llama 6x384) or "
                      "W5 (Llama at 1B shape, --device cuda)")->capture_default_str();
  command->add_option("--device", options.device, "cpu, or cuda[:N] (the CUDA kernels: not yet run on a GPU); explain: or meta (the "
                      "step rehearsed, nothing computed: its plan from shapes and bytes with nominal times)")
      ->capture_default_str();
  command->add_option("--policy", options.policy, "recompute policy: none, blocks, sqrt, cost, chain, milp, auto, "
                      "dtr, or a preset: save-matmuls, every-n-blocks:N, recompute-modules:attn,mlp,norm")
      ->capture_default_str();
  command->add_option("--budget", budget, "peak activation bytes for cost, chain, milp, auto or dtr, e.g. 64MiB, or "
                      "50% (a share of keep-all's peak)");
  command->add_option("--must-keep", options.overrides.must_keep, "nodes every plan keeps: ops (gelu) or globs over "
                      "node names (h.*.mlp.c_fc/*; `remat explain` lists them)")->delimiter(',');
  command->add_option("--must-recompute", options.overrides.must_recompute,
                      "nodes every plan replays: ops (layer_norm) or node-name globs (h.*.attn/* for attention's own ops, "
                      "h.*.attn*/* with its projections)")->delimiter(',');
  command->add_option("--prefer-keep", options.overrides.prefer_keep, "nodes kept unless the budget then fails: ops "
                      "or node-name globs")->delimiter(',');
  command->add_option("--prefer-recompute", options.overrides.prefer_recompute, "nodes replayed unless the budget "
                      "then fails: ops or node-name globs")->delimiter(',');
  command->add_option("--solver-time-limit", options.solver_time_limit_s, "milp: seconds for its search per plan "
                      "(the best plan found by then, with its bound and gap)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
}

void apply_budget(const std::string& budget, std::string_view what, workloads::WorkloadOptions& options) {
  if (!budget.empty() && budget.ends_with('%')) {
    // A share of keep-all's measured peak (workloads/workload.h, budget_fraction).
    options.budget_fraction = parse_percent(budget, what);
  } else if (!budget.empty()) {
    options.budget = train::parse_bytes(budget, what);
  }
}

void add_model_options(CLI::App* command, workloads::ModelSpec& spec, ModelFlags& flags) {
  flags.model = command->add_option("--model", spec.kind, "a model of your own instead of --workload: gpt, llama or "
                                    "mlp")->check(CLI::IsMember({"gpt", "llama", "mlp"}));
  flags.hf = command->add_option("--hf", spec.hf_dir, "a Hugging Face GPT-2 or Llama folder (config.json, "
                                 "model.safetensors) instead of --workload");
  command->add_option("--batch-size", spec.batch_size, "with --model or --hf: rows (sequences) per batch (16; "
                      "llama 8)");
  flags.shared = {command->add_option("--n-layer", flags.n_layer, "--model gpt|llama: blocks (6)"),
                  command->add_option("--n-embd", flags.n_embd, "--model gpt|llama: channels (gpt 256, llama 384)"),
                  command->add_option("--n-head", flags.n_head, "--model gpt|llama: query heads (gpt 4, llama 6)"),
                  command->add_option("--block-size", flags.block_size, "--model gpt|llama: context (gpt 128, "
                                      "llama 256)"),
                  command->add_option("--vocab-size", flags.vocab_size, "--model gpt|llama: vocabulary (gpt 256, "
                                      "llama 65)"),
                  command->add_option("--head", flags.head, "--model gpt|llama: tied or untied lm_head (untied)")
                      ->check(CLI::IsMember({"tied", "untied"}))};
  flags.gpt = {command->add_option("--dropout", spec.gpt.dropout, "--model gpt: dropout")->capture_default_str()};
  flags.llama = {
      command->add_option("--n-kv-head", spec.llama.num_key_value_heads, "--model llama: key/value heads, dividing "
                          "--n-head")->capture_default_str(),
      command->add_option("--intermediate-size", spec.llama.intermediate_size, "--model llama: the MLP's width")
          ->capture_default_str(),
      command->add_option("--rope-theta", spec.llama.rope_theta, "--model llama: RoPE's base")->capture_default_str(),
      command->add_option("--rms-norm-eps", spec.llama.rms_norm_eps, "--model llama: RMSNorm's epsilon")
          ->capture_default_str()};
  flags.attention_flag = command->add_option("--attention", flags.attention, "a GPT's attention (W2, W3, --model "
                                             "gpt, --hf): fused (the fused op) or explicit (q k^T, causal softmax, "
                                             "product; also whenever --dropout > 0)")
                             ->check(CLI::IsMember({"fused", "explicit"}))->capture_default_str();
  command->add_option("--mlp", flags.mlp_path, "the MLP of a GPT or Llama (W2-W5, --model, --hf): fused (the "
                      "activation and the output projection as one op, keeping the activation's inputs only) or "
                      "explicit (c_fc, gelu, c_proj; gate/up, swiglu, down_proj)")
      ->check(CLI::IsMember({"fused", "explicit"}))->capture_default_str();
  flags.mlp = {command->add_option("--dims", spec.dims, "--model mlp: widths, input to classes (784,1024,1024,10)")
                   ->delimiter(',')};
}

void finish_model_spec(const CLI::App* app, workloads::ModelSpec& spec, const ModelFlags& flags) {
  const std::string command = app->get_name();
  if (flags.hf->count() > 0) {
    REMAT_CHECK(flags.model->count() == 0, "{}: give --model or --hf, not both", command);
    spec.kind = "hf";
  }
  REMAT_CHECK(spec.kind.empty() || app->get_option("--workload")->count() == 0, "{}: give --workload or a model of "
              "your own (--model, --hf), not both", command);
  REMAT_CHECK(!spec.kind.empty() || app->get_option("--batch-size")->count() == 0, "{}: --batch-size is a flag of "
              "--model and --hf (a --workload has its own batch)", command);
  const auto kinds = {std::pair{"gpt", &flags.gpt}, std::pair{"llama", &flags.llama}, std::pair{"mlp", &flags.mlp}};
  for (const auto& [kind, options] : kinds) {
    for (const CLI::Option* option : *options) {
      REMAT_CHECK(option->count() == 0 || spec.kind == kind, "{}: {} is a flag of --model {}{}", command,
                  option->get_name(), kind, spec.kind.empty() ? "" : fmt::format(", not of --model {}", spec.kind));
    }
  }
  for (const CLI::Option* option : flags.shared) {
    REMAT_CHECK(option->count() == 0 || spec.kind == "gpt" || spec.kind == "llama", "{}: {} is a flag of --model "
                "gpt or llama{}", command, option->get_name(),
                spec.kind.empty() ? "" : fmt::format(", not of --model {}", spec.kind));
  }
  REMAT_CHECK(flags.attention_flag->count() == 0 || spec.kind != "llama", "{}: --attention is a GPT's; a Llama runs "
              "the fused attention only", command);
  spec.attention = nn::parse_attention_path(flags.attention);
  spec.mlp = nn::parse_mlp_path(flags.mlp_path);
  if (spec.kind == "gpt") {
    nn::GPTConfig& c = spec.gpt;
    c.n_layer = flags.n_layer.value_or(c.n_layer);
    c.n_embd = flags.n_embd.value_or(c.n_embd);
    c.n_head = flags.n_head.value_or(c.n_head);
    c.block_size = flags.block_size.value_or(c.block_size);
    c.vocab_size = flags.vocab_size.value_or(c.vocab_size);
    c.tie_weights = flags.head == "tied";
  }
  if (spec.kind == "llama") {
    nn::LlamaConfig& c = spec.llama;
    c.num_hidden_layers = flags.n_layer.value_or(c.num_hidden_layers);
    c.hidden_size = flags.n_embd.value_or(c.hidden_size);
    c.num_attention_heads = flags.n_head.value_or(c.num_attention_heads);
    c.max_position_embeddings = flags.block_size.value_or(c.max_position_embeddings);
    c.vocab_size = flags.vocab_size.value_or(c.vocab_size);
    c.tie_word_embeddings = flags.head == "tied";
    if (app->get_option("--batch-size")->count() == 0) spec.batch_size = 8;  // W4's
  }
}

}  // namespace remat::tools
