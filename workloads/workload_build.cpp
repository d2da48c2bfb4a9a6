// The workloads built; see workload_build.h. The checks of a run's options
// are here too, because every run builds its workload first.
#include "workloads/workload_build.h"

#include <vector>

#include "engine/factory.h"
#include "kernels/cpu/parallel.h"
#include "nn/gpt.h"
#include "nn/gpt2_pretrained.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "train/limits.h"
#include "train/run_files.h"

namespace remat::workloads {

using namespace remat::train;  // the Trainer, its arguments and its checks
namespace {

// W1: 15 x [Linear(1024, 1024) + ReLU] + Linear(1024, 10); batch 256.
Workload build_w1(Generator& generator, Device device) {
  constexpr int64_t kWidth = 1024, kHidden = 15, kClasses = 10, kBatch = 256;
  std::vector<int64_t> sizes(kHidden + 1, kWidth);
  sizes.push_back(kClasses);
  auto model = std::make_shared<nn::MLP>(sizes, generator);
  model->to(device);
  const Tensor inputs = to(normal({kBatch, kWidth}, 0.0, 1.0, DType::Float32, generator), device);
  const Tensor targets = to(randint(kClasses, {kBatch}, generator), device);
  return {model, [=] { return cross_entropy(model->forward(inputs), targets); }};
}

// W2: GPT-mini (vocabulary 256, context 128, 6 blocks, d_model 256, 4 heads,
// untied head, dropout 0); batch 16 of random tokens.
Workload build_w2(uint64_t seed, Device device, nn::AttentionPath attention, nn::MlpPath mlp) {
  const nn::GPTConfig config{.vocab_size = 256, .block_size = 128, .n_layer = 6, .n_head = 4, .n_embd = 256,
                             .dropout = 0.0, .tie_weights = false, .seed = seed, .attention = attention,
                             .mlp = mlp};
  auto model = std::make_shared<nn::GPT>(config);
  Generator generator(seed + 2);
  model->to(device);
  const Tensor ids = to(randint(config.vocab_size, {16, config.block_size}, generator), device);
  const Tensor targets = to(randint(config.vocab_size, {16, config.block_size}, generator), device);
  return {model, [=] { return model->forward(ids, targets).loss; }};
}

// W3: GPT-2 small (124M: vocabulary 50257, context 1024, 12 blocks, d_model
// 768, 12 heads, tied head, dropout 0); batch 8 of random tokens; AdamW. A
// GPU workload (a CPU step takes minutes).
Workload build_w3(uint64_t seed, Device device, nn::AttentionPath attention, nn::MlpPath mlp) {
  const nn::GPTConfig config{.vocab_size = 50257, .block_size = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768,
                             .dropout = 0.0, .tie_weights = true, .seed = seed, .attention = attention,
                             .mlp = mlp};
  auto model = std::make_shared<nn::GPT>(config);
  model->to(device);
  Generator generator(seed + 2);
  const Tensor ids = to(randint(config.vocab_size, {8, config.block_size}, generator), device);
  const Tensor targets = to(randint(config.vocab_size, {8, config.block_size}, generator), device);
  return {model, [=] { return model->forward(ids, targets).loss; }, true};
}

// A model of the user's (ModelSpec), on a fixed random batch.
Workload build_spec(const ModelSpec& spec, uint64_t seed, Device device) {
  Generator generator(seed + 2);
  if (spec.kind == "mlp") {
    Generator init(seed);
    auto model = std::make_shared<nn::MLP>(spec.dims, init);
    model->to(device);
    const Tensor inputs = to(normal({spec.batch_size, spec.dims.front()}, 0.0, 1.0, DType::Float32, generator), device);
    const Tensor targets = to(randint(spec.dims.back(), {spec.batch_size}, generator), device);
    return {model, [=] { return cross_entropy(model->forward(inputs), targets); }};
  }
  nn::GPTConfig config = spec.gpt;
  config.seed = seed;
  if (spec.kind == "hf") config = nn::load_gpt2_config(spec.hf_dir, seed);
  config.attention = spec.attention;
  config.mlp = spec.mlp;
  auto model = std::make_shared<nn::GPT>(config);
  if (spec.kind == "hf") nn::load_gpt2_weights(*model, spec.hf_dir);
  model->to(device);
  const Tensor ids = to(randint(config.vocab_size, {spec.batch_size, config.block_size}, generator), device);
  const Tensor targets = to(randint(config.vocab_size, {spec.batch_size, config.block_size}, generator), device);
  return {model, [=] { return model->forward(ids, targets).loss; }};
}

void check_spec(const ModelSpec& spec) {
  REMAT_CHECK(spec.kind == "gpt" || spec.kind == "mlp" || spec.kind == "hf", "bench: unknown --model '{}' (available: "
              "gpt, mlp, or --hf DIR)", spec.kind);
  REMAT_CHECK(spec.batch_size >= 1, "bench: --batch-size must be at least 1, got {}", spec.batch_size);
  if (spec.kind == "mlp") {
    REMAT_CHECK(spec.dims.size() >= 2, "bench: --dims needs at least an input and an output width, got {} width(s)",
                spec.dims.size());
    for (const int64_t width : spec.dims) REMAT_CHECK(width >= 1, "bench: --dims widths must be at least 1, got {}", width);
  }
  if (spec.kind == "gpt") {
    const nn::GPTConfig& c = spec.gpt;
    REMAT_CHECK(c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1 && c.block_size >= 1 && c.vocab_size >= 1,
                "bench: --n-layer, --n-head, --n-embd, --block-size and --vocab-size must be at least 1, got {}, {}, "
                "{}, {} and {}", c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size);
    REMAT_CHECK(c.n_embd % c.n_head == 0, "bench: --n-embd {} must be a multiple of --n-head {}", c.n_embd, c.n_head);
    REMAT_CHECK(c.dropout >= 0 && c.dropout < 1, "bench: --dropout must be in [0, 1), got {}", c.dropout);
  }
}

// `rehearsal`: the workload is rehearsed on the meta device, not run
// (plan_workload with --device meta).
void check_options(const WorkloadOptions& options, bool rehearsal) {
  if (!options.model.kind.empty()) {
    check_spec(options.model);
  } else {
    REMAT_CHECK(options.workload == "W1" || options.workload == "W2" || options.workload == "W3", "bench: unknown "
                "workload '{}' (available: W1, W2, W3, or --model gpt|mlp, --hf DIR)", options.workload);
    REMAT_CHECK(options.workload != "W3" || rehearsal || device_from_name(options.device).is_cuda(), "bench: W3 "
                "(GPT-2 124M) is a GPU workload: give --device cuda (on the CPU a step takes minutes), or explain "
                "--device meta to plan it without running it");
  }
  scheduler::check_policy(options.policy);  // an unknown name is an error that lists the known ones
  check_threads(options.threads, "bench");
  REMAT_CHECK(options.steps >= 1 && options.warmup >= 0, "bench: need steps >= 1 and warmup >= 0, got {} and {}",
              options.steps, options.warmup);
  REMAT_CHECK(rehearsal || !device_from_name(options.device).is_meta(), "bench: --device meta: a workload on the "
              "meta device computes no loss to report (meta tensors have shapes and bytes only; explain plans one)");
  check_output_path(options.save_profile_path, "--save-profile");
  check_output_path(options.trace_path, "--trace");  // found now, not after the steps
  // The profile of a step that ran: the first plans from a rehearsal or is
  // profiled, and its times are planned from after it.
  REMAT_CHECK(options.save_profile_path.empty() || options.warmup + options.steps >= 2, "bench: --save-profile needs "
              "two steps or more (--warmup + --steps), got {}", options.warmup + options.steps);
  check_distinct_paths({{"--profile", options.profile_path}, {"--save-profile", options.save_profile_path},
                        {"--trace", options.trace_path}});
}

}  // namespace

std::unique_ptr<optim::Optimizer> optimizer_for(const Workload& workload) {
  if (workload.adamw) return std::make_unique<optim::AdamW>(workload.model->parameters(), optim::AdamWOptions{.lr = 6e-4});
  return std::make_unique<optim::SGD>(workload.model->parameters(), optim::SGDOptions{.lr = 0.01});
}

int64_t optimizer_state_bytes(const Workload& workload) {
  if (!workload.adamw) return 0;
  int64_t bytes = 0;
  for (const Tensor& p : workload.model->parameters()) bytes += 2 * static_cast<int64_t>(p.nbytes());
  return bytes;
}

Workload build_workload(const WorkloadOptions& options, bool rehearsal) {
  check_options(options, rehearsal);
  kernels::cpu::set_num_threads(options.threads);
  Generator generator(options.seed);
  const Device device = device_from_name(options.device);
  if (!options.model.kind.empty()) return build_spec(options.model, options.seed, device);
  if (options.workload == "W1") return build_w1(generator, device);
  return options.workload == "W2" ? build_w2(options.seed, device, options.model.attention, options.model.mlp)
                                    : build_w3(options.seed, device, options.model.attention, options.model.mlp);
}

}  // namespace remat::workloads
