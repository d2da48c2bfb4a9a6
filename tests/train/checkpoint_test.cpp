// Training checkpoints: a round trip restores the model and the optimizer
// bit for bit, a resumed run ends exactly where an uninterrupted one does,
// and a checkpoint of another model changes nothing. A file no run could have
// written (NaN, a negative second moment, step counts past its step) is an
// error, and a resume of another run names what differs.
#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "engine/autograd.h"
#include "engine/factory.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "tasks/kjv_gpt_task.h"
#include "train/accelerator.h"
#include "train/local_sgd.h"

namespace remat::train {

using namespace remat::tasks;  // the kjv-gpt task, trained and resumed
namespace {

std::string temp_path(const std::string& name) { return (std::filesystem::temp_directory_path() / name).string(); }

nn::GPTConfig tiny(uint64_t seed) {
  return {.vocab_size = 9, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 8, .seed = seed};
}

void train_steps(nn::GPT& model, optim::AdamW& optimizer, int steps) {
  Generator g(3);
  for (int i = 0; i < steps; ++i) {
    optimizer.zero_grad();
    model.forward(randint(9, {2, 8}, g), randint(9, {2, 8}, g)).loss.backward();
    optimizer.step();
  }
}

TEST(Checkpoint, RoundTripRestoresModelAndOptimizer) {
  nn::GPT model(tiny(1));
  optim::AdamW optimizer(model.parameters());
  train_steps(model, optimizer, 2);
  const std::string path = temp_path("remat_checkpoint_test.safetensors");
  save_checkpoint(path, model, optimizer, 2);

  nn::GPT other(tiny(2));
  optim::AdamW other_optimizer(other.parameters());
  EXPECT_EQ(load_checkpoint(path, other, other_optimizer), 2);
  const auto a = model.named_parameters(), b = other.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(other_optimizer.step_count(i), 2);
    EXPECT_EQ(optimizer.exp_avg_sq(i).to_vector<float>(), other_optimizer.exp_avg_sq(i).to_vector<float>());
  }
  // One more step each: still identical.
  train_steps(model, optimizer, 1);
  train_steps(other, other_optimizer, 1);
  EXPECT_EQ(a[0].second.to_vector<float>(), b[0].second.to_vector<float>());
}

TEST(Checkpoint, AnotherModelIsAnErrorAndChangesNothing) {
  nn::GPT model(tiny(1));
  optim::AdamW optimizer(model.parameters());
  const std::string path = temp_path("remat_checkpoint_test2.safetensors");
  save_checkpoint(path, model, optimizer, 0);
  nn::GPTConfig wider = tiny(2);
  wider.n_embd = 16;
  nn::GPT other(wider);
  optim::AdamW other_optimizer(other.parameters());
  const std::vector<float> before = other.parameters()[0].to_vector<float>();
  EXPECT_THROW(load_checkpoint(path, other, other_optimizer), Error);
  EXPECT_EQ(other.parameters()[0].to_vector<float>(), before);
}

TEST(Checkpoint, CarriesTheLocalSgdStepCount) {
  nn::GPT model(tiny(1));
  optim::AdamW optimizer(model.parameters());
  Accelerator accelerator({.communicator = std::make_shared<comm::SingleProcess>()});
  LocalSGD local_sgd(accelerator, model, {.local_sgd_steps = 4});
  local_sgd.set_steps(7);
  const std::string path = temp_path("remat_checkpoint_local_sgd.safetensors");
  save_checkpoint(path, model, optimizer, 7, {}, &local_sgd);

  LocalSGD resumed(accelerator, model, {.local_sgd_steps = 4});
  EXPECT_EQ(load_checkpoint(path, model, optimizer, &resumed), 7);
  EXPECT_EQ(resumed.steps(), 7);
  // A checkpoint written without LocalSGD cannot restore its count.
  save_checkpoint(path, model, optimizer, 3);
  try {
    load_checkpoint(path, model, optimizer, &resumed);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no \"local_sgd_steps\""), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, AResumedRunEndsWhereAnUninterruptedOneDoes) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "abcd efg\n";
  const std::string text_path = temp_path("remat_checkpoint_text.txt");
  std::ofstream(text_path) << text;
  KjvGptOptions options{.n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = 16, .dropout = 0.1, .batch_size = 4,
                        .max_steps = 40, .time_limit_seconds = 0, .warmup_steps = 5, .eval_interval = 20,
                        .eval_batches = 2,
                        .sample_chars = 5, .prompt = "a", .text_path = text_path, .threads = 1};
  const KjvResult whole = train_kjv_gpt(options);

  // The same run saving into an output folder, then resumed from its
  // checkpoint of step 20, as a run killed after it would be.
  const std::string dir = temp_path("remat_checkpoint_run");
  std::filesystem::remove_all(dir);
  options.trainer_flags = {"--output-dir", dir};
  train_kjv_gpt(options);
  ASSERT_TRUE(std::filesystem::is_directory(dir + "/checkpoint-20"));
  std::filesystem::remove_all(dir + "/checkpoint-40");  // killed after step 20 (a newer one is no resume's to mix)
  options.trainer_flags = {"--output-dir", dir, "--resume-from-checkpoint", dir + "/checkpoint-20"};
  const KjvResult resumed = train_kjv_gpt(options);
  EXPECT_EQ(resumed.first_step, 20);
  ASSERT_EQ(resumed.curve.size(), 1u);
  EXPECT_EQ(resumed.curve[0].step, 40);
  // Bit-identical, dropout included: its generator's offset is in the checkpoint.
  EXPECT_EQ(resumed.curve[0].val_loss, whole.curve.back().val_loss);
}

// A checkpoint file changed after it was written: one tensor replaced (by
// name), or one metadata entry. Written with write_safetensors, which takes
// any values, as a corrupt or hand-mixed file would be.
std::string tampered(const std::string& path, const std::string& name, const Tensor& value,
                     const std::pair<std::string, std::string>& entry = {}) {
  auto tensors = nn::read_safetensors(path);
  for (auto& [n, t] : tensors) {
    if (n == name) t = value;
  }
  auto metadata = nn::read_safetensors_metadata(path);
  if (!entry.first.empty()) metadata[entry.first] = entry.second;
  const std::string out = path + ".tampered";
  nn::write_safetensors(out, tensors, metadata);
  return out;
}

std::string load_error(const std::string& path) {
  nn::GPT model(tiny(5));
  optim::AdamW optimizer(model.parameters());
  try {
    load_checkpoint(path, model, optimizer);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// --lr 1e30 wrote all-NaN weights over a good checkpoint, and --resume loaded them.
TEST(Checkpoint, NonFiniteValuesAreNeitherSavedNorLoaded) {
  nn::GPT model(tiny(1));
  optim::AdamW optimizer(model.parameters());
  train_steps(model, optimizer, 2);
  const std::string path = temp_path("remat_checkpoint_nan.safetensors");
  save_checkpoint(path, model, optimizer, 2);
  const std::string good = nn::read_safetensors_metadata(path).at("step");

  const auto [name, weight] = model.named_parameters()[0];
  std::vector<float> values = weight.to_vector<float>();
  values[3] = std::numeric_limits<float>::quiet_NaN();
  const Tensor with_nan = from_vector(values, weight.shape());
  const std::string message = load_error(tampered(path, "model." + name, with_nan));
  EXPECT_NE(message.find("tensor 'model." + name + "' holds nan at 3"), std::string::npos) << message;
  values[3] = std::numeric_limits<float>::infinity();
  EXPECT_NE(load_error(tampered(path, "optimizer.0.exp_avg", from_vector(values, weight.shape()))).find("holds inf"),
            std::string::npos);

  {
    NoGradGuard no_grad;
    std::memcpy(weight.raw_data(), with_nan.raw_data(), weight.nbytes());
  }
  const auto before = nn::read_safetensors(path);
  EXPECT_THROW(save_checkpoint(path, model, optimizer, 3), Error);
  const auto after = nn::read_safetensors(path);  // the good file, as it was
  EXPECT_EQ(after.front().second.to_vector<float>(), before.front().second.to_vector<float>());
  EXPECT_EQ(nn::read_safetensors_metadata(path).at("step"), good);
}

TEST(Checkpoint, ANegativeSecondMomentIsAnError) {
  nn::GPT model(tiny(1));
  optim::AdamW optimizer(model.parameters());
  train_steps(model, optimizer, 2);
  const std::string path = temp_path("remat_checkpoint_negative_v.safetensors");
  save_checkpoint(path, model, optimizer, 2);
  std::vector<float> v = optimizer.exp_avg_sq(1).to_vector<float>();
  v[0] = -1e-3f;
  const std::string message = load_error(tampered(path, "optimizer.1.exp_avg_sq", from_vector(v, optimizer.exp_avg_sq(1).shape())));
  EXPECT_NE(message.find("optimizer.1.exp_avg_sq holds a negative value"), std::string::npos) << message;
}

TEST(Checkpoint, StepCountsThatDisagreeWithTheStepAreAnError) {
  nn::GPT model(tiny(1));
  optim::AdamW optimizer(model.parameters());
  train_steps(model, optimizer, 2);
  const std::string path = temp_path("remat_checkpoint_steps.safetensors");
  save_checkpoint(path, model, optimizer, 2);
  EXPECT_EQ(load_error(path), "no error");
  // A parameter that took more steps than the file's step.
  std::string message = load_error(tampered(path, "optimizer.0.step", from_vector(std::vector<int64_t>{9}, {1})));
  EXPECT_NE(message.find("optimizer.0.step is 9, but the file's step is 2"), std::string::npos) << message;
  // The metadata claims steps the optimizer never took.
  message = load_error(tampered(path, "", Tensor(), {"step", "5"}));
  EXPECT_NE(message.find("the optimizer's step counts reach 2, but the file's step is 5"), std::string::npos)
      << message;
}

// Resuming with another --text of the same vocabulary size, or another
// --n-head, continued silently on a mis-mapped embedding or head split.
TEST(Checkpoint, AResumeOfAnotherRunIsAnErrorNamingWhatDiffers) {
  const std::string text_path = temp_path("remat_checkpoint_describe.txt");
  std::string text;
  for (int i = 0; i < 300; ++i) text += "abcd efg\n";
  std::ofstream(text_path) << text;
  KjvGptOptions options{.n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = 16, .batch_size = 4, .max_steps = 2,
                        .time_limit_seconds = 0, .eval_interval = 2, .eval_batches = 1, .sample_chars = 2,
                        .prompt = "a", .text_path = text_path, .threads = 1};
  const std::string dir = temp_path("remat_checkpoint_describe");
  std::filesystem::remove_all(dir);
  options.trainer_flags = {"--output-dir", dir};
  train_kjv_gpt(options);
  const auto metadata = nn::read_safetensors_metadata(dir + "/checkpoint-2/checkpoint.safetensors");
  EXPECT_EQ(metadata.at("task"), "kjv-gpt");
  EXPECT_EQ(metadata.at("n_head"), "2");
  EXPECT_EQ(metadata.at("n_embd"), "16");
  EXPECT_EQ(metadata.at("vocab_size"), "9");
  EXPECT_EQ(metadata.at("symbols"), "\n abcdefg");
  EXPECT_EQ(metadata.at("world_size"), "1");
  EXPECT_EQ(metadata.at("data_fingerprint").size(), 16u);

  options.trainer_flags = {"--output-dir", dir, "--resume-from-checkpoint", "latest"};
  options.max_steps = 4;
  auto error_of = [&](const KjvGptOptions& o) {
    try {
      train_kjv_gpt(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  KjvGptOptions heads = options;
  heads.n_head = 4;
  std::string message = error_of(heads);
  EXPECT_NE(message.find("n_head is '2' in the checkpoint, '4' in this run"), std::string::npos) << message;
  // Another text with the same 9 symbols: the data differs, the vocabulary not.
  std::string other;
  for (int i = 0; i < 300; ++i) other += "gfe dcba\n";
  KjvGptOptions text_changed = options;
  text_changed.text_path = temp_path("remat_checkpoint_describe2.txt");
  std::ofstream(text_changed.text_path) << other;
  message = error_of(text_changed);
  EXPECT_NE(message.find("data_fingerprint is"), std::string::npos) << message;
  EXPECT_EQ(message.find("symbols"), std::string::npos) << message;
  EXPECT_EQ(error_of(options), "no error");  // the same run resumes
}

}  // namespace
}  // namespace remat::train
