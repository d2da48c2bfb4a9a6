// The Fashion-MNIST training task; see fashion_mnist_task.h.
#include "train/fashion_mnist_task.h"

#include <chrono>

#include "engine/allocator.h"
#include "kernels/cpu/parallel.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "optim/adamw.h"
#include "train/data_loader.h"

namespace remat::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Mean loss and accuracy of `model` over a dataset, in eval mode without grad.
std::pair<double, double> evaluate(nn::Module& model, const data::Dataset& dataset) {
  NoGradGuard no_grad;
  model.eval();
  data::DataLoader loader(dataset, {.batch_size = 1000});
  double loss_sum = 0;
  int64_t correct = 0;
  for (const data::Batch& batch : loader.epoch(0)) {
    const Tensor logits = model.forward(batch.inputs);
    const int64_t n = batch.targets.numel();
    loss_sum += cross_entropy(logits, batch.targets).item<double>() * static_cast<double>(n);
    const std::vector<int64_t> predicted = argmax(logits, 1).to_vector<int64_t>();
    const std::vector<int64_t> truth = batch.targets.to_vector<int64_t>();
    for (int64_t i = 0; i < n; ++i) correct += predicted[static_cast<size_t>(i)] == truth[static_cast<size_t>(i)];
  }
  model.train();
  const auto total = static_cast<double>(dataset.size());
  return {loss_sum / total, static_cast<double>(correct) / total};
}

}  // namespace

std::vector<EpochResult> train_fashion_mnist(const FashionMnistOptions& options,
                                             const std::function<void(const EpochResult&)>& on_epoch,
                                             const std::function<void(int64_t, int64_t, double)>& on_progress) {
  REMAT_CHECK(options.epochs >= 1, "train: --epochs must be at least 1, got {}", options.epochs);
  REMAT_CHECK(options.threads >= 1, "train: --threads must be at least 1, got {}", options.threads);
  kernels::cpu::set_num_threads(options.threads);

  const data::Dataset train_set = data::load_fashion_mnist("train", options.data_dir);
  const data::Dataset test_set = data::load_fashion_mnist("test", options.data_dir);
  std::vector<int64_t> sizes{train_set.inputs.size(1)};
  sizes.insert(sizes.end(), options.hidden.begin(), options.hidden.end());
  sizes.push_back(data::kFashionMnistClasses);

  Generator generator(options.seed);
  nn::MLP model(sizes, generator);
  optim::AdamW optimizer(model.parameters(), {.lr = options.lr, .weight_decay = options.weight_decay});
  data::DataLoader loader(train_set, {.batch_size = options.batch_size, .shuffle = true, .seed = options.seed});

  std::vector<EpochResult> results;
  Allocator& allocator = cpu_allocator();
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const auto start = Clock::now();
    auto last_report = start;
    EpochResult result{.epoch = epoch + 1};
    double loss_sum = 0;
    int64_t batches = 0;
    const int64_t planned = options.max_batches > 0 ? std::min(options.max_batches, loader.size()) : loader.size();
    for (const data::Batch& batch : loader.epoch(epoch)) {
      if (batches == planned) break;
      const int64_t transient_before = allocator.stats().live_transient;
      ScopedPeak peak;
      optimizer.zero_grad();
      Tensor loss = cross_entropy(model.forward(batch.inputs), batch.targets);
      loss.backward();
      optimizer.step();
      result.peak_activation_bytes =
          std::max(result.peak_activation_bytes, peak.stats().peak_transient - transient_before);
      loss_sum += loss.item<double>();
      ++batches;
      if (on_progress && seconds_since(last_report) > 5.0) {
        on_progress(batches, planned, loss_sum / static_cast<double>(batches));
        last_report = Clock::now();
      }
    }
    result.train_loss = loss_sum / static_cast<double>(batches);
    std::tie(result.test_loss, result.test_accuracy) = evaluate(model, test_set);
    result.seconds = seconds_since(start);
    results.push_back(result);
    if (on_epoch) on_epoch(result);
  }
  return results;
}

}  // namespace remat::train
