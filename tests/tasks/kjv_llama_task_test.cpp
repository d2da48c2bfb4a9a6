// The kjv-llama task (the kjv task with KjvGptOptions::model "llama") on a
// small synthetic text: the loss falls, a run stopped at a checkpoint and
// resumed ends on the uninterrupted run's curve, the weights are a Hugging
// Face Llama folder that --init-from reads back, and a Llama's own sizes
// are checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/error.h"
#include "nn/llama_pretrained.h"
#include "nn/safetensors.h"
#include "tasks/kjv_gpt_task.h"
#include "tests/support/files.h"

namespace remat::tasks {
namespace {

using testing::write_text;

std::string repeating_text(const std::string& name, int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i) text += "abcd efg\n";
  return write_text(name, text);
}

using testing::temp_folder;

KjvGptOptions tiny_llama(const std::string& path) {
  return {.model = "llama", .n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = 16, .n_kv_head = 1,
          .intermediate_size = 32, .batch_size = 8, .max_steps = 80, .lr = 1e-2, .warmup_steps = 10,
          .eval_interval = 40, .eval_batches = 2, .sample_chars = 20, .prompt = "ab", .text_path = path,
          .threads = 1};
}

TEST(KjvLlamaTask, LearnsARepeatingText) {
  const KjvGptOptions options = tiny_llama(repeating_text("remat_kjv_llama_learns.txt", 400));
  EXPECT_EQ(task_name(options), "kjv-llama");
  const KjvResult result = train_kjv_gpt(options);
  ASSERT_EQ(result.curve.size(), 2u);
  EXPECT_EQ(result.curve[1].step, 80);
  EXPECT_EQ(result.vocab_size, 9);
  // Uniform guessing is log 9 = 2.2 nats; the pattern is almost deterministic.
  EXPECT_LT(result.curve[1].val_loss, 0.5);
  EXPECT_LT(result.curve[1].val_loss, result.curve[0].val_loss);
  // embed_tokens (9 x 16, tied head), q, o (16 x 16), k, v (8 x 16), gate,
  // up (32 x 16), down (16 x 32), two layer norms and the final one (16).
  EXPECT_EQ(result.parameters, 9 * 16 + 2 * 256 + 2 * 128 + 3 * 512 + 3 * 16);
  EXPECT_EQ(result.sample.size(), 2u + 20u);
  EXPECT_EQ(result.sample.substr(0, 2), "ab");
}

// A run of 8 steps saves checkpoints at 4 and 8; resumed from the one at
// 4, a second run ends where the first did, to the bit: the Llama's
// weights, AdamW's state and the data order come back from the checkpoint.
TEST(KjvLlamaTask, AResumedRunEndsOnTheUninterruptedCurve) {
  KjvGptOptions options = tiny_llama(repeating_text("remat_kjv_llama_resume.txt", 200));
  options.max_steps = 8;
  options.eval_interval = 4;
  options.warmup_steps = 2;
  const std::string dir = temp_folder("remat_kjv_llama_resume");
  options.trainer_flags = {"--output-dir", dir};
  const KjvResult whole = train_kjv_gpt(options);
  ASSERT_EQ(whole.curve.size(), 2u);
  ASSERT_TRUE(std::filesystem::exists(dir + "/checkpoint-4"));
  KjvGptOptions resumed = options;
  resumed.trainer_flags = {"--output-dir", temp_folder("remat_kjv_llama_resumed"), "--resume-from-checkpoint",
                           dir + "/checkpoint-4"};
  const KjvResult second = train_kjv_gpt(resumed);
  EXPECT_EQ(second.first_step, 4);
  ASSERT_EQ(second.curve.size(), 1u);
  EXPECT_EQ(second.curve[0].step, 8);
  EXPECT_EQ(second.curve[0].val_loss, whole.curve[1].val_loss);
  EXPECT_EQ(second.curve[0].train_loss, whole.curve[1].train_loss);
  EXPECT_EQ(second.sample, whole.sample);
  // A checkpoint of another Llama is refused, naming the setting.
  resumed.n_kv_head = 2;
  resumed.trainer_flags[1] = temp_folder("remat_kjv_llama_resumed");
  try {
    train_kjv_gpt(resumed);
    ADD_FAILURE() << "a checkpoint of another model was resumed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_kv_head is '1' in the checkpoint, '2' in this run"), std::string::npos)
        << e.what();
  }
}

TEST(KjvLlamaTask, SavesAHuggingFaceLlamaFolderAndStartsFromOne) {
  KjvGptOptions options = tiny_llama(repeating_text("remat_kjv_llama_weights.txt", 100));
  options.max_steps = 4;
  options.eval_interval = 4;
  options.weights_path = temp_folder("remat_kjv_llama_weights");
  const KjvResult trained = train_kjv_gpt(options);
  const nn::LlamaConfig config = nn::load_llama_config(options.weights_path);
  EXPECT_EQ(config.vocab_size, 9);
  EXPECT_EQ(config.num_key_value_heads, 1);
  EXPECT_EQ(config.intermediate_size, 32);
  EXPECT_TRUE(config.tie_word_embeddings);
  const auto tensors = nn::read_safetensors(options.weights_path + "/model.safetensors");
  EXPECT_EQ(tensors.front().first, "model.embed_tokens.weight");

  // Started from that folder, with a step too small to move the weights:
  // the validation loss of the trained model, not of a fresh one.
  KjvGptOptions started = options;
  started.init_from = options.weights_path;
  started.weights_path.clear();
  started.n_layer = 3;  // not used: the folder's configuration is
  started.max_steps = 1;
  started.lr = 1e-12;
  started.warmup_steps = 0;
  const KjvResult from_folder = train_kjv_gpt(started);
  ASSERT_EQ(from_folder.curve.size(), 1u);
  EXPECT_EQ(from_folder.parameters, trained.parameters);
  EXPECT_NEAR(from_folder.curve[0].val_loss, trained.curve.back().val_loss, 1e-5);
}

TEST(KjvLlamaTask, ALlamasSizesAreChecked) {
  const KjvGptOptions good = tiny_llama(repeating_text("remat_kjv_llama_checks.txt", 100));
  const std::pair<void (*)(KjvGptOptions&), const char*> cases[] = {
      {[](KjvGptOptions& o) { o.n_kv_head = 3; }, "--n-kv-head 3 must be at least 1 and divide --n-head 2"},
      {[](KjvGptOptions& o) { o.n_embd = 6; }, "--n-embd / --n-head = 6 / 2 must be even"},
      {[](KjvGptOptions& o) { o.intermediate_size = 0; }, "--intermediate-size must be at least 1, got 0"},
      {[](KjvGptOptions& o) { o.rope_theta = -1; }, "--rope-theta must be finite and above 0, got -1"},
      {[](KjvGptOptions& o) { o.dropout = 0.1; }, "task kjv-llama has no dropout"},
      {[](KjvGptOptions& o) { o.model = "rnn"; }, "the kjv task's model is gpt or llama, not 'rnn'"},
  };
  for (const auto& [change, message] : cases) {
    KjvGptOptions options = good;
    change(options);
    try {
      check_options(options);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace remat::tasks
