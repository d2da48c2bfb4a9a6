// The Fashion-MNIST training task; see fashion_mnist_task.h.
#include "train/fashion_mnist_task.h"

#include <fmt/ranges.h>

#include <chrono>
#include <cmath>

#include "engine/allocator.h"
#include "engine/factory.h"
#include "kernels/cpu/parallel.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "optim/adamw.h"
#include "train/accelerator.h"
#include "train/data_loader.h"
#include "train/limits.h"
#include "train/local_sgd.h"
#include "train/rank_agreement.h"

namespace remat::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Mean loss and accuracy of `model` over a dataset, in eval mode without
// grad: each rank takes its shard of the rows, and the sums are gathered.
std::pair<double, double> evaluate(nn::Module& model, const data::Dataset& dataset, const Accelerator& accelerator) {
  NoGradGuard no_grad;
  model.eval();
  // Without padding: shard r holds rows r, r + w, ... below N.
  const int64_t n = dataset.size(), ranks = accelerator.num_processes();
  std::vector<int64_t> rows;
  for (int64_t i = accelerator.rank(); i < n; i += ranks) rows.push_back(i);
  const data::DataLoader all(dataset, {.batch_size = 1000, .device = accelerator.device()});
  double loss_sum = 0, correct = 0;
  for (size_t first = 0; first < rows.size(); first += 1000) {
    const data::Batch batch =
        all.gather(std::vector<int64_t>(rows.begin() + static_cast<std::ptrdiff_t>(first),
                                        rows.begin() + static_cast<std::ptrdiff_t>(std::min(first + 1000, rows.size()))));
    const Tensor logits = model.forward(batch.inputs);
    const int64_t count = batch.targets.numel();
    loss_sum += cross_entropy(logits, batch.targets).item<double>() * static_cast<double>(count);
    const std::vector<int64_t> predicted = argmax(logits, 1).to_vector<int64_t>();
    const std::vector<int64_t> truth = batch.targets.to_vector<int64_t>();
    for (int64_t i = 0; i < count; ++i) correct += predicted[static_cast<size_t>(i)] == truth[static_cast<size_t>(i)];
  }
  model.train();
  const std::vector<double> sums =
      accelerator.gather(from_vector(std::vector<double>{loss_sum, correct}, {2})).to_vector<double>();
  double total_loss = 0, total_correct = 0;
  for (size_t r = 0; r < sums.size(); r += 2) {
    total_loss += sums[r];
    total_correct += sums[r + 1];
  }
  return {total_loss / static_cast<double>(n), total_correct / static_cast<double>(n)};
}

// What must be the same on every rank: the model, the shuffle, the epoch's
// length and everything that decides when the ranks communicate.
std::vector<Setting> shared_settings(const FashionMnistOptions& o) {
  const auto text = [](auto value) { return fmt::format("{}", value); };
  return {{"--epochs", text(o.epochs)}, {"--batch-size", text(o.batch_size)}, {"--lr", text(o.lr)},
          {"--weight-decay", text(o.weight_decay)}, {"hidden", fmt::format("{}", fmt::join(o.hidden, "-"))},
          {"--seed", text(o.seed)}, {"--max-batches", text(o.max_batches)},
          {"--gradient-accumulation-steps", text(o.gradient_accumulation_steps)},
          {"--local-sgd-steps", text(o.local_sgd_steps)},
          {"--diloco", o.diloco ? fmt::format("outer lr {}, momentum {}", o.diloco->outer_lr, o.diloco->momentum)
                                : std::string("off")}};
}

}  // namespace

// Every option, before the data is read.
void check_options(const FashionMnistOptions& o) {
  REMAT_CHECK(check_device(o.device, "train").is_cpu() || !o.diloco, "train: --diloco's outer step runs on the "
              "CPU only, not on --device {}", o.device);
  REMAT_CHECK(o.epochs >= 1, "train: --epochs must be at least 1, got {}", o.epochs);
  REMAT_CHECK(o.batch_size >= 1, "train: --batch-size must be at least 1, got {}", o.batch_size);
  REMAT_CHECK(std::isfinite(o.lr) && o.lr > 0, "train: --lr must be > 0, got {}", o.lr);
  REMAT_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "train: --weight-decay must be >= 0, got {}",
              o.weight_decay);
  for (const int64_t width : o.hidden) REMAT_CHECK(width >= 1, "train: hidden widths must be at least 1, got {}", width);
  REMAT_CHECK(o.max_batches >= 0, "train: --max-batches must be >= 0 (0: all), got {}", o.max_batches);
  check_threads(o.threads, "train");
  check_distribution(o.gradient_accumulation_steps, o.local_sgd_steps, o.diloco);
}

std::vector<EpochResult> train_fashion_mnist(const FashionMnistOptions& options,
                                             const std::function<void(const EpochResult&)>& on_epoch,
                                             const std::function<void(int64_t, int64_t, double)>& on_progress) {
  check_options(options);
  kernels::cpu::set_num_threads(options.threads);

  Accelerator accelerator({.gradient_accumulation_steps = options.gradient_accumulation_steps,
                           .device = device_from_name(options.device)});
  check_ranks_agree(accelerator.host_communicator(), shared_settings(options), "train");
  const data::Dataset train_set = data::load_fashion_mnist("train", options.data_dir);
  const data::Dataset test_set = data::load_fashion_mnist("test", options.data_dir);
  std::vector<int64_t> sizes{train_set.inputs.size(1)};
  sizes.insert(sizes.end(), options.hidden.begin(), options.hidden.end());
  sizes.push_back(data::kFashionMnistClasses);

  Generator generator(options.seed);
  nn::MLP model(sizes, generator);
  accelerator.prepare(model);
  optim::AdamW adamw(model.parameters(), {.lr = options.lr, .weight_decay = options.weight_decay});
  PreparedOptimizer optimizer = accelerator.prepare(adamw);
  const data::DataLoader loader = accelerator.prepare(
      data::DataLoader(train_set, {.batch_size = options.batch_size, .shuffle = true, .seed = options.seed}));
  const int64_t planned = options.max_batches > 0 ? std::min(options.max_batches, loader.size()) : loader.size();
  accelerator.set_epoch_length(planned);

  std::vector<EpochResult> results;
  Allocator& allocator = allocator_for(accelerator.device());
  // One guard over all epochs, so that H counts on across them and DiLoCo's
  // outer momentum lives on; finish() averages before each evaluation.
  LocalSGD local_sgd(accelerator, model,
                     {.local_sgd_steps = std::max<int64_t>(options.local_sgd_steps, 1),
                      .enabled = options.local_sgd_steps > 0, .diloco = options.diloco});
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const auto start = Clock::now();
    auto last_report = start;
    EpochResult result{.epoch = epoch + 1};
    double loss_sum = 0;
    int64_t batches = 0;
    for (const data::Batch& batch : loader.epoch(epoch)) {
      if (batches == planned) break;
      const int64_t transient_before = allocator.stats().live_transient;
      ScopedPeak peak(accelerator.device());
      auto window = accelerator.accumulate(model);
      Tensor loss = cross_entropy(model.forward(batch.inputs), batch.targets);
      accelerator.backward(loss);
      optimizer.step();
      optimizer.zero_grad();
      local_sgd.step();
      result.peak_activation_bytes =
          std::max(result.peak_activation_bytes, peak.stats().peak_transient - transient_before);
      loss_sum += loss.item<double>();
      ++batches;
      if (on_progress && accelerator.is_main_process() && seconds_since(last_report) > 5.0) {
        on_progress(batches, planned, loss_sum / static_cast<double>(batches));
        last_report = Clock::now();
      }
    }
    local_sgd.finish();  // every rank evaluates the same model
    result.train_loss = loss_sum / static_cast<double>(batches);
    std::tie(result.test_loss, result.test_accuracy) = evaluate(model, test_set, accelerator);
    result.seconds = seconds_since(start);
    result.optimizer_steps = accelerator.optimizer_steps();
    const comm::CommStats& traffic = accelerator.communicator().stats();
    result.allreduce_calls = traffic.allreduce_calls;
    result.allreduce_bytes = traffic.allreduce_bytes;
    result.comm_seconds = traffic.seconds;
    result.ranks = accelerator.num_processes();
    results.push_back(result);
    if (on_epoch && accelerator.is_main_process()) on_epoch(result);
  }
  return results;
}

}  // namespace remat::train
