// Training checkpoints: a round trip restores the model and the optimizer
// bit for bit, a resumed run ends exactly where an uninterrupted one does,
// and a checkpoint of another model changes nothing.
#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/factory.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "train/kjv_gpt_task.h"
#include "train/accelerator.h"
#include "train/local_sgd.h"

namespace remat::train {
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

  // The same run, "killed" after its checkpoint at step 20, then resumed.
  options.checkpoint_path = temp_path("remat_checkpoint_run.safetensors");
  const std::string at_20 = temp_path("remat_checkpoint_run_20.safetensors");
  std::filesystem::remove(options.checkpoint_path);
  train_kjv_gpt(options, [&](const KjvEval& e) {
    if (e.step == 20) std::filesystem::copy_file(options.checkpoint_path, at_20, std::filesystem::copy_options::overwrite_existing);
  });
  options.checkpoint_path = at_20;
  options.resume = true;
  const KjvResult resumed = train_kjv_gpt(options);
  EXPECT_EQ(resumed.first_step, 20);
  ASSERT_EQ(resumed.curve.size(), 1u);
  EXPECT_EQ(resumed.curve[0].step, 40);
  // Bit-identical, dropout included: its generator's offset is in the checkpoint.
  EXPECT_EQ(resumed.curve[0].val_loss, whole.curve.back().val_loss);
}

}  // namespace
}  // namespace remat::train
