// The Trainer (train/trainer.h) on a small classification problem: the
// evaluation dicts, saved runs and their rotation, a bit-exact resume, and
// accumulation with checkpointing against one larger batch.
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "engine/factory.h"
#include "nn/mlp.h"
#include "nn/safetensors.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace remat::train {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::error_of;

// Three Gaussian blobs in 4 dimensions, `n` rows.
data::Dataset blobs(int64_t n, uint64_t seed) {
  Generator g(seed);
  const std::vector<float> noise = normal({n, 4}, 0, 0.6, DType::Float32, g).to_vector<float>();
  std::vector<float> x(noise.size());
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    y[static_cast<size_t>(i)] = i % 3;
    for (int64_t d = 0; d < 4; ++d) {
      const auto at = static_cast<size_t>(i * 4 + d);
      x[at] = noise[at] + (d == i % 3 ? 2.0f : 0.0f);
    }
  }
  return {from_vector(x, {n, 4}), from_vector(y, {n})};
}

// A fresh output folder under the test's temporary directory.
std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("remat_trainer_test_" + name);
  fs::remove_all(dir);
  return dir.string();
}

std::vector<std::vector<float>> weights_of(const nn::Module& model) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : model.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

TrainingArguments small_args() {
  TrainingArguments a;
  a.per_device_train_batch_size = 8;
  a.per_device_eval_batch_size = 16;
  a.learning_rate = 1e-2;
  a.logging_steps = 5;
  a.save_strategy = "no";
  return a;
}

TEST(Trainer, EachEvaluationIsADictInTheLogHistoryAndTheStateFile) {
  const data::Dataset train_set = blobs(96, 1), eval_set = blobs(30, 2);
  Generator g(3);
  nn::MLP model({4, 16, 3}, g);
  TrainingArguments args = small_args();
  args.output_dir = fresh_dir("eval");
  args.eval_strategy = "epoch";
  args.num_train_epochs = 2;
  std::vector<std::string> printed;
  Trainer trainer(model, args, train_set, &eval_set, classification_metrics, classifier_forward(),
                  {.on_log = [&](const Metrics& m) { printed.push_back(format_metrics(m)); }});
  const TrainOutput out = trainer.train();
  EXPECT_EQ(out.global_step, 24);  // 12 batches of 8 per epoch
  std::vector<nlohmann::ordered_json> evals;
  for (const auto& entry : trainer.log_history()) {
    if (entry.contains("eval_loss")) evals.push_back(entry);
  }
  ASSERT_EQ(evals.size(), 2u);
  EXPECT_EQ(evals[0]["epoch"].get<double>(), 1.0);
  EXPECT_EQ(evals[1]["epoch"].get<double>(), 2.0);
  for (const char* key : {"eval_accuracy", "eval_f1", "eval_precision", "eval_recall", "eval_runtime"}) {
    EXPECT_TRUE(evals[1].contains(key)) << key;
  }
  EXPECT_GT(evals[1]["eval_accuracy"].get<double>(), 0.8);
  EXPECT_LT(evals[1]["eval_loss"].get<double>(), evals[0]["eval_loss"].get<double>() + 1e-9);
  const auto eval_line = std::find_if(printed.begin(), printed.end(), [](const std::string& s) {
    return s.starts_with("{'epoch': 1.0, 'eval_loss': ");
  });
  ASSERT_NE(eval_line, printed.end());
  EXPECT_TRUE(contains(*eval_line, "'eval_accuracy': 0.")) << *eval_line;
  std::ifstream state(fs::path(args.output_dir) / "trainer_state.json");
  const nlohmann::json j = nlohmann::json::parse(state);
  EXPECT_EQ(j["global_step"].get<int64_t>(), 24);
  EXPECT_EQ(j["log_history"].size(), trainer.log_history().size());
  const Metrics alone = trainer.evaluate();
  EXPECT_EQ(alone[1].first, "eval_loss");
  EXPECT_DOUBLE_EQ(alone[1].second, evals[1]["eval_loss"].get<double>());  // the same model, evaluated again
}

TEST(Trainer, SavedCheckpointsRotateAndKeepTheirFiles) {
  const data::Dataset train_set = blobs(64, 1);
  Generator g(3);
  nn::MLP model({4, 8, 3}, g);
  TrainingArguments args = small_args();
  args.output_dir = fresh_dir("rotate");
  args.max_steps = 7;
  args.save_strategy = "steps";
  args.save_steps = 2;
  args.save_total_limit = 2;
  Trainer(model, args, train_set).train();
  std::vector<std::string> folders;
  for (const auto& entry : fs::directory_iterator(args.output_dir)) {
    if (entry.is_directory()) folders.push_back(entry.path().filename().string());
  }
  std::sort(folders.begin(), folders.end());
  EXPECT_EQ(folders, (std::vector<std::string>{"checkpoint-6", "checkpoint-7"}));  // 2, 4 rotated out; 7 at the stop
  for (const char* file : {"checkpoint.safetensors", "trainer_state.json", "training_args.json"}) {
    EXPECT_TRUE(fs::exists(fs::path(args.output_dir) / "checkpoint-7" / file)) << file;
  }
  // A second run into the same folder must say what to do.
  nn::MLP other({4, 8, 3}, g);
  const std::string message = error_of([&] { Trainer(other, args, train_set).train(); });
  EXPECT_TRUE(contains(message, "already holds checkpoints")) << message;
}

TEST(Trainer, TheOutputFolderIsLockedOnlyWhileATrainerWritesThere) {
  const data::Dataset train_set = blobs(32, 1);
  Generator g(3);
  nn::MLP model({4, 8, 3}, g), other({4, 8, 3}, g);
  TrainingArguments args = small_args();
  args.output_dir = fresh_dir("lock");
  args.max_steps = 2;
  args.logging_steps = 1;
  Trainer idle(other, args, train_set);  // made, not training: holds nothing
  std::string message, nested;
  Trainer* self = nullptr;
  Trainer trainer(model, args, train_set, nullptr, {}, classifier_forward(),
                  {.on_log = [&](const Metrics&) {
                    if (message.empty()) message = error_of([&] { idle.train(); });  // while `trainer` trains
                    if (nested.empty()) nested = error_of([&] { self->train(); });
                  }});
  self = &trainer;
  trainer.train();
  EXPECT_TRUE(contains(message, "output_dir") && contains(message, "in use by another run")) << message;
  EXPECT_TRUE(contains(nested, "training already")) << nested;
  EXPECT_EQ(idle.train().global_step, 2);  // `trainer` is done: free to take
}

TEST(Trainer, AnEvaluationsLogMayStopTrainingAtItsStep) {
  const data::Dataset train_set = blobs(96, 1), eval_set = blobs(30, 2);
  Generator g(3);
  nn::MLP model({4, 8, 3}, g);
  TrainingArguments args = small_args();
  args.output_dir = fresh_dir("early_stop");
  args.max_steps = 10;
  args.eval_strategy = "steps";
  args.eval_steps = 4;
  args.save_strategy = "steps";
  args.save_steps = 100;
  bool evaluated = false;  // early stopping: the first evaluation ends the run
  Trainer trainer(model, args, train_set, &eval_set, {}, classifier_forward(),
                  {.on_log = [&](const Metrics& m) { evaluated = evaluated || m[1].first == "eval_loss"; },
                   .should_stop = [&](int64_t) { return evaluated; }});
  EXPECT_EQ(trainer.train().global_step, 4);
  EXPECT_TRUE(fs::exists(fs::path(args.output_dir) / "checkpoint-4" / "checkpoint.safetensors"));
}

TEST(Trainer, AResumedRunContinuesBitForBit) {
  const data::Dataset train_set = blobs(40, 1);  // 5 batches: an epoch ends mid-run
  TrainingArguments args = small_args();
  args.max_steps = 12;
  args.lr_scheduler_type = "cosine";
  args.warmup_steps = 3;
  args.weight_decay = 0.01;
  const auto fresh_model = [] {
    Generator g(3);
    return std::make_unique<nn::MLP>(std::vector<int64_t>{4, 16, 3}, g);
  };
  const auto straight = fresh_model();
  const TrainOutput uninterrupted = Trainer(*straight, args, train_set).train();

  args.output_dir = fresh_dir("resume");
  args.save_strategy = "steps";
  args.save_steps = 1000;  // saved only where it stops
  const auto first = fresh_model();
  Trainer(*first, args, train_set, nullptr, {}, classifier_forward(),
          {.should_stop = [](int64_t step) { return step == 7; }}).train();
  ASSERT_TRUE(fs::exists(fs::path(args.output_dir) / "checkpoint-7"));
  args.resume_from_checkpoint = "latest";
  const auto resumed = fresh_model();  // other weights until the checkpoint is loaded
  Trainer trainer(*resumed, args, train_set);
  const TrainOutput out = trainer.train();
  EXPECT_EQ(out.global_step, 12);
  EXPECT_EQ(weights_of(*resumed), weights_of(*straight));
  // Issue 43, item 9: train_loss is the whole run's mean (it was the resumed steps' alone).
  EXPECT_EQ(out.training_loss, uninterrupted.training_loss);
}

// Note [Which checkpoint a resume trusts], Note [Runs never mix]
// (train/trainer_checkpoints.cpp): a saved run of checkpoints 2, 4, 6 (or
// as many as `steps` make), resumed after its files were damaged, moved or
// its settings changed.
struct SavedRun {
  data::Dataset train_set = blobs(40, 1);
  TrainingArguments args = small_args();
  explicit SavedRun(const std::string& name, int64_t steps = 6) {
    args.output_dir = fresh_dir(name);
    args.max_steps = steps;
    args.save_strategy = "steps";
    args.save_steps = 2;
    train(args);
  }
  std::string checkpoint(int64_t step) const {
    return (fs::path(args.output_dir) / fmt::format("checkpoint-{}", step)).string();
  }
  // A run on `a` with the model every run here starts from; stderr caught.
  TrainOutput train(const TrainingArguments& a, std::string* err = nullptr, TrainerCallbacks callbacks = {}) const {
    Generator g(3);
    nn::MLP model({4, 8, 3}, g);
    if (err) ::testing::internal::CaptureStderr();
    const auto captured = [&] {
      if (err) *err = ::testing::internal::GetCapturedStderr();
    };
    try {
      Trainer trainer(model, a, train_set, nullptr, {}, classifier_forward(), std::move(callbacks));
      const TrainOutput out = trainer.train();
      captured();
      return out;
    } catch (...) {
      captured();
      throw;
    }
  }
  TrainingArguments resuming(const std::string& from, int64_t steps = 8) const {
    TrainingArguments a = args;
    a.resume_from_checkpoint = from;
    a.max_steps = steps;
    return a;
  }
};

using testing::read_file;
using testing::write_file;

// `folder` as a remat before manifests saved it: no manifest.json, and no
// "manifest" key in its checkpoint.safetensors' metadata.
void as_before_manifests(const std::string& folder) {
  const std::string file = (fs::path(folder) / "checkpoint.safetensors").string();
  nn::SafetensorsMetadata metadata = nn::read_safetensors_metadata(file);
  metadata.erase("manifest");
  nn::write_safetensors(file, nn::read_safetensors(file), metadata);
  fs::remove(fs::path(folder) / "manifest.json");
}

void flip_byte(const fs::path& path, size_t at) {
  std::string bytes = read_file(path);
  ASSERT_LT(at, bytes.size()) << path;
  bytes[at] = static_cast<char>(bytes[at] ^ 0x01);
  write_file(path, bytes);
}

// Issue 43, items 3 and 4: one byte changed in any file of the newest
// checkpoint. Named explicitly it is an error naming that file and the
// older checkpoint that verifies; "latest" skips it, saying so, and resumes
// from that older one.
TEST(Trainer, AFlippedByteInAnyFileOfACheckpointIsCaught) {
  for (const std::string file : {"checkpoint.safetensors", "trainer_state.json", "training_args.json",
                                 "manifest.json"}) {
    SavedRun run("flip");
    const fs::path damaged = fs::path(run.checkpoint(6)) / file;
    const size_t size = fs::file_size(damaged);
    // The last byte of the weights file is a tensor's; of a JSON file, inside its text.
    flip_byte(damaged, file == "checkpoint.safetensors" ? size - 1 : size / 2);
    const std::string message = error_of([&] { run.train(run.resuming(run.checkpoint(6))); });
    EXPECT_TRUE(contains(message, damaged.string())) << file << ": " << message;
    EXPECT_TRUE(contains(message, "An older checkpoint verifies: '" + run.checkpoint(4) + "'")) << message;
    std::string err;
    const TrainOutput out = run.train(run.resuming("latest"), &err);
    EXPECT_EQ(out.resumed_at_step, 4) << file;
    EXPECT_EQ(out.global_step, 8);
    EXPECT_TRUE(contains(err, "warning: resume_from_checkpoint latest: skipped '" + run.checkpoint(6) + "': '" +
                                  damaged.string()))
        << file << ": " << err;
  }
}

// Two tensors' data_offsets swapped in the header: a file that reads as
// well as the original, with other values in two tensors.
TEST(Trainer, SwappedDataOffsetsAreCaught) {
  SavedRun run("swap");
  const fs::path file = fs::path(run.checkpoint(6)) / "checkpoint.safetensors";
  std::string bytes = read_file(file);
  const auto offsets_of = [&](const std::string& name) {
    const size_t at = bytes.find("\"" + name + "\"");
    const size_t begin = bytes.find("\"data_offsets\":[", at) + 16;
    return std::pair{begin, bytes.find(']', begin) - begin};
  };
  // exp_avg and exp_avg_sq of one parameter: the same shape, adjacent in the body.
  const auto [a, a_size] = offsets_of("optimizer.0.exp_avg");
  const auto [b, b_size] = offsets_of("optimizer.0.exp_avg_sq");
  ASSERT_NE(a, b);
  const std::string first = bytes.substr(a, a_size), second = bytes.substr(b, b_size);
  ASSERT_NE(first, second);
  ASSERT_LT(a, b);
  bytes = bytes.substr(0, a) + second + bytes.substr(a + a_size, b - a - a_size) + first + bytes.substr(b + b_size);
  write_file(file, bytes);
  const std::string message = error_of([&] { run.train(run.resuming(run.checkpoint(6))); });
  EXPECT_TRUE(contains(message, file.string() + "' has CRC-32")) << message;
}

// An empty checkpoint-100/ and a checkpoint-99999999999999999999 (no int64
// holds its step) are named and skipped; a checkpoint written before
// manifests resumes, said to be unverified.
TEST(Trainer, FoldersThatAreNotCheckpointsAreSkippedAndOldOnesResumeUnverified) {
  SavedRun run("strays", 4);
  fs::create_directories(run.checkpoint(100));
  const std::string overflow = (fs::path(run.args.output_dir) / "checkpoint-99999999999999999999").string();
  fs::create_directories(overflow);
  as_before_manifests(run.checkpoint(4));
  std::string err;
  const TrainOutput out = run.train(run.resuming("latest", 6), &err);
  EXPECT_EQ(out.resumed_at_step, 4);
  EXPECT_TRUE(contains(err, "skipped '" + run.checkpoint(100) + "': '" + run.checkpoint(100) +
                                "' holds neither manifest.json nor checkpoint.safetensors"))
      << err;
  EXPECT_TRUE(contains(err, "skipped '" + overflow + "': its step does not fit in 64 bits")) << err;
  EXPECT_TRUE(contains(err, "checkpoint '" + run.checkpoint(4) + "' is not verified: written before manifests"))
      << err;
  // Named, the empty folder is an error that says so.
  const std::string message = error_of([&] { run.train(run.resuming(run.checkpoint(100), 102)); });
  EXPECT_TRUE(contains(message, "resume_from_checkpoint '" + run.checkpoint(100) + "' fails its check")) << message;
  EXPECT_TRUE(contains(message, "not a checkpoint")) << message;
  // save_total_limit rotates this run's checkpoints only: the stray of a
  // higher step is neither the newest kept nor deleted, and the step just
  // saved stays (it once rotated checkpoint-8 itself away, leaving nothing
  // to resume from).
  TrainingArguments limited = run.resuming("latest", 8);
  limited.save_total_limit = 1;
  EXPECT_EQ(run.train(limited).global_step, 8);
  EXPECT_TRUE(fs::exists(fs::path(run.checkpoint(8)) / "manifest.json"));
  EXPECT_FALSE(fs::exists(run.checkpoint(6)));
  EXPECT_TRUE(fs::is_directory(run.checkpoint(100)));
  EXPECT_EQ(run.train(run.resuming("latest", 10)).resumed_at_step, 8);
}

// A manifest deleted from a checkpoint saved with one (its metadata says
// so) is damage, not an older remat's checkpoint; a manifest that leaves out
// a file a resume reads vouches for nothing.
TEST(Trainer, AManifestDeletedOrEmptiedIsDamage) {
  SavedRun run("no_manifest", 4);
  const fs::path manifest = fs::path(run.checkpoint(4)) / "manifest.json";
  const std::string listed = read_file(manifest);
  fs::remove(manifest);
  std::string message = error_of([&] { run.train(run.resuming(run.checkpoint(4), 6)); });
  EXPECT_TRUE(contains(message, manifest.string() + "' is missing, though")) << message;
  write_file(manifest, R"({"format": ")" + nlohmann::json::parse(listed)["format"].get<std::string>() +
                           R"(", "files": []})");
  message = error_of([&] { run.train(run.resuming(run.checkpoint(4), 6)); });
  EXPECT_TRUE(contains(message, "does not list checkpoint.safetensors")) << message;
  EXPECT_EQ(run.train(run.resuming("latest", 6)).resumed_at_step, 2);
}

// Issue 43, item 3: '{garbage' in trainer_state.json (of a checkpoint
// without a manifest, so that only the strict parse can tell) wiped the log
// history silently; now it is an error naming the file, and latest skips it.
TEST(Trainer, ACorruptTrainerStateIsADamagedCheckpoint) {
  SavedRun run("garbage", 4);
  const fs::path state = fs::path(run.checkpoint(4)) / "trainer_state.json";
  as_before_manifests(run.checkpoint(4));
  write_file(state, "{garbage");
  const std::string message = error_of([&] { run.train(run.resuming(run.checkpoint(4), 6)); });
  EXPECT_TRUE(contains(message, state.string() + "' is not valid JSON")) << message;
  EXPECT_TRUE(contains(message, "An older checkpoint verifies: '" + run.checkpoint(2) + "'")) << message;
  fs::remove(state);
  EXPECT_TRUE(contains(error_of([&] { run.train(run.resuming(run.checkpoint(4), 6)); }),
                       state.string() + "' is missing"));
  std::string err;
  EXPECT_EQ(run.train(run.resuming("latest", 6), &err).resumed_at_step, 2);
  EXPECT_TRUE(contains(err, "skipped '" + run.checkpoint(4) + "'")) << err;
}

// Issue 43, item 2: a resume from checkpoint-2 of a run saved to 6 wrote
// its checkpoints 4 and 6 over the first run's. Refused, naming them and
// the ways out; with overwrite_output_dir they are deleted, and said so.
TEST(Trainer, ResumingFromAnOlderCheckpointIsRefusedUnlessOverwriting) {
  SavedRun run("older");
  const std::string message = error_of([&] { run.train(run.resuming(run.checkpoint(2))); });
  EXPECT_TRUE(contains(message, "'" + run.checkpoint(4) + "', '" + run.checkpoint(6) + "'")) << message;
  for (const char* way : {"resume_from_checkpoint latest", "--output-dir", "--overwrite-output-dir"}) {
    EXPECT_TRUE(contains(message, way)) << way << ": " << message;
  }
  EXPECT_TRUE(fs::exists(run.checkpoint(6)));
  // With overwrite_output_dir, a resume refused for another reason (another
  // batch size) deletes nothing: the newer ones go once the resume has passed.
  TrainingArguments overwrite = run.resuming(run.checkpoint(2), 3);
  overwrite.overwrite_output_dir = true;
  TrainingArguments other_batch = overwrite;
  other_batch.per_device_train_batch_size += 1;
  EXPECT_TRUE(contains(error_of([&] { run.train(other_batch); }), "per_device_train_batch_size"));
  EXPECT_TRUE(fs::exists(run.checkpoint(4)));
  EXPECT_TRUE(fs::exists(run.checkpoint(6)));
  std::string err;
  EXPECT_EQ(run.train(overwrite, &err).global_step, 3);
  EXPECT_TRUE(contains(err, "overwrite_output_dir: deleted '" + run.checkpoint(4) + "', '" + run.checkpoint(6) +
                                "'"))
      << err;
  EXPECT_FALSE(fs::exists(run.checkpoint(4)));
  EXPECT_FALSE(fs::exists(run.checkpoint(6)));
  EXPECT_TRUE(fs::exists(run.checkpoint(3)));  // the new run's last step
}

// Settings that change the training, changed on resume, are listed old -> new.
TEST(Trainer, SettingsChangedOnResumeAreListed) {
  SavedRun run("changed", 4);
  TrainingArguments changed = run.resuming("latest", 6);
  changed.learning_rate = 2e-2;
  changed.lr_scheduler_type = "cosine";
  std::string err;
  run.train(changed, &err);
  EXPECT_TRUE(contains(err, "learning_rate 0.01 -> 0.02, lr_scheduler_type \"linear\" -> \"cosine\", max_steps 4 -> 6"))
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "one warning: " << err;
}

// Issue 43, items 8 and 9: a resume at or past max_steps logged a row of
// train_loss 0 (and the finished run's evaluation again). Now it says so and
// trains, logs and writes nothing.
TEST(Trainer, AResumeAtOrPastMaxStepsTrainsAndLogsNothing) {
  SavedRun run("nothing");
  const std::string state_before = read_file(fs::path(run.args.output_dir) / "trainer_state.json");
  for (const int64_t steps : {6, 4}) {
    std::string err;
    int logged = 0;
    const TrainOutput out = run.train(run.resuming("latest", steps), &err,
                                      {.on_log = [&](const Metrics&) { ++logged; }});
    EXPECT_EQ(out.global_step, 6);
    EXPECT_EQ(out.resumed_at_step, 6);
    EXPECT_EQ(logged, 0);
    EXPECT_TRUE(contains(err, fmt::format("nothing to train: the checkpoint is at step 6, max_steps is {}", steps)))
        << err;
  }
  EXPECT_EQ(read_file(fs::path(run.args.output_dir) / "trainer_state.json"), state_before);
}

// Issue 43, item 9: on a full disk the top-level trainer_state.json said
// global_step 4 although checkpoint-4 failed.
TEST(Trainer, TheTopLevelStateNamesNoStepWhoseCheckpointFailed) {
  const data::Dataset train_set = blobs(40, 1), eval_set = blobs(16, 2);
  Generator g(3);
  nn::MLP model({4, 8, 3}, g);
  TrainingArguments args = small_args();
  args.output_dir = fresh_dir("full_disk");
  args.max_steps = 6;
  args.save_strategy = "steps";
  args.save_steps = 2;
  args.eval_strategy = "steps";
  args.eval_steps = 2;
  ::setenv("REMAT_FAULT_WRITE", "ENOSPC:checkpoint-4.tmp", 1);
  const std::string message = error_of([&] { Trainer(model, args, train_set, &eval_set).train(); });
  ::unsetenv("REMAT_FAULT_WRITE");
  EXPECT_TRUE(contains(message, "saving checkpoint-4 failed") && contains(message, "ENOSPC")) << message;
  std::ifstream state(fs::path(args.output_dir) / "trainer_state.json");
  EXPECT_EQ(nlohmann::json::parse(state)["global_step"].get<int64_t>(), 2);
  EXPECT_FALSE(fs::exists(fs::path(args.output_dir) / "checkpoint-4"));
}

TEST(Trainer, AccumulationWithCheckpointingEqualsOneLargerBatch) {
  const data::Dataset train_set = blobs(64, 1);
  const auto run = [&](int64_t batch, int64_t accumulation, bool checkpointing) {
    Generator g(3);
    nn::MLP model({4, 32, 32, 3}, g);
    TrainingArguments args = small_args();
    args.per_device_train_batch_size = batch;
    args.gradient_accumulation_steps = accumulation;
    args.gradient_checkpointing = checkpointing;
    args.max_steps = 2;
    Trainer(model, args, train_set).train();
    EXPECT_EQ(model.is_gradient_checkpointing(), checkpointing);
    if (checkpointing) {
      EXPECT_EQ(model.checkpointing_report()->step, 8);  // every micro-batch recorded and planned
    }
    return weights_of(model);
  };
  const auto accumulated = run(8, 4, true), large = run(32, 1, false);
  ASSERT_EQ(accumulated.size(), large.size());
  for (size_t i = 0; i < large.size(); ++i) {
    for (size_t j = 0; j < large[i].size(); ++j) {
      ASSERT_NEAR(accumulated[i][j], large[i][j], 1e-5) << "parameter " << i << " element " << j;
    }
  }
}

// Note [The first step]: the Trainer plans a graph's first step from a
// rehearsal, under every policy that plans, so that step already runs the
// policy asked for; "profile" asks for the profiling step under blocks.
TEST(Trainer, TheFirstStepRunsThePolicyAskedForUnlessAskedToProfile) {
  const data::Dataset train_set = blobs(16, 1);
  const auto first_step = [&](const std::string& policy, const std::string& first) {
    Generator g(3);
    nn::MLP model({4, 32, 32, 3}, g);
    TrainingArguments args = small_args();
    args.gradient_checkpointing = true;
    args.gradient_checkpointing_kwargs = {.policy = policy, .first_step = first};
    args.max_steps = 1;
    Trainer(model, args, train_set).train();
    return *model.checkpointing_report();
  };
  for (const std::string policy : {"blocks", "sqrt", "cost", "auto"}) {
    const scheduler::StepReport rehearsed = first_step(policy, "rehearse");
    EXPECT_FALSE(rehearsed.profiling) << rehearsed.str();
    EXPECT_EQ(rehearsed.policy, policy);
    EXPECT_EQ(rehearsed.step, 1);
    const scheduler::StepReport profiled = first_step(policy, "profile");
    EXPECT_TRUE(profiled.profiling) << profiled.str();
  }
  TrainingArguments bad = small_args();
  bad.gradient_checkpointing = true;
  bad.gradient_checkpointing_kwargs.first_step = "warm";
  Generator g(3);
  nn::MLP model({4, 8, 3}, g);
  EXPECT_TRUE(contains(error_of([&] { Trainer(model, bad, train_set); }), "first step 'warm'"));
}

// A plan that changes nothing is said: blocks on an MLP (no blocks) keeps
// all, and the Trainer prints the plan's warning once over its steps; sqrt,
// which replays some of its layers, prints none.
TEST(Trainer, APlanThatDropsNothingIsSaidOnce) {
  const data::Dataset train_set = blobs(32, 1);
  const auto printed = [&](const std::string& policy) {
    Generator g(3);
    nn::MLP model({4, 32, 32, 32, 32, 32, 32, 3}, g);
    TrainingArguments args = small_args();
    args.gradient_checkpointing = true;
    args.gradient_checkpointing_kwargs = {.policy = policy};
    args.max_steps = 3;
    ::testing::internal::CaptureStderr();
    Trainer(model, args, train_set).train();
    return ::testing::internal::GetCapturedStderr();
  };
  const std::string blocks = printed("blocks");
  const size_t first = blocks.find("warning: policy blocks drops none");
  EXPECT_NE(first, std::string::npos) << blocks;
  EXPECT_EQ(blocks.find("warning: policy blocks drops none", first + 1), std::string::npos) << "once: " << blocks;
  const std::string sqrt = printed("sqrt");
  EXPECT_EQ(sqrt.find("warning:"), std::string::npos) << "sqrt replays some layers: " << sqrt;
}

// cosine_with_min_lr decays to its floor at the last step; every step's
// hook sees the step, its loss and its peak.
TEST(Trainer, TheCosineWithAFloorEndsAtItAndEveryStepIsReported) {
  const data::Dataset train_set = blobs(64, 1);
  Generator g(3);
  nn::MLP model({4, 16, 3}, g);
  TrainingArguments args = small_args();
  args.max_steps = 10;
  args.logging_steps = 10;
  args.lr_scheduler_type = "cosine_with_min_lr";
  args.lr_scheduler_kwargs.min_lr_rate = 0.1;
  std::vector<StepStats> steps;
  Trainer trainer(model, args, train_set, nullptr, {}, classifier_forward(),
                  {.on_log = [](const Metrics&) {}, .on_step_end = [&](const StepStats& s) { steps.push_back(s); }});
  trainer.train();
  ASSERT_EQ(steps.size(), 10u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].step, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(steps[i].steps, 10);
    EXPECT_GT(steps[i].loss, 0);
    EXPECT_GT(steps[i].peak_activation_bytes, 0);
  }
  EXPECT_DOUBLE_EQ(steps.back().learning_rate, 1e-3);  // 0.1 of 1e-2
  EXPECT_GT(steps[4].learning_rate, 1e-3);
  EXPECT_LT(steps[4].learning_rate, 1e-2);
  EXPECT_DOUBLE_EQ(trainer.log_history()[0]["learning_rate"].get<double>(), 1e-3);
}

// A batch larger than the training set is an error naming both numbers,
// before any step (it would train every step on the same rows, and count
// rows that never ran); auto_find_batch_size starts from the rows there are.
TEST(Trainer, ABatchLargerThanTheDataIsAnErrorNamingBoth) {
  const data::Dataset train_set = blobs(10, 1);
  Generator g(3);
  nn::MLP model({4, 8, 3}, g);
  TrainingArguments args = small_args();
  args.per_device_train_batch_size = 99999999999;
  args.max_steps = 2;
  int steps = 0;
  TrainerCallbacks counting{.on_log = [](const Metrics&) {}, .on_step_end = [&](const StepStats&) { ++steps; }};
  Trainer trainer(model, args, train_set, nullptr, {}, classifier_forward(), counting);
  const std::string message = error_of([&] { trainer.train(); });
  EXPECT_TRUE(contains(message, "per_device_train_batch_size (--batch-size) 99999999999 is more than the 10 rows of "
                                "the training set")) << message;
  EXPECT_EQ(steps, 0);
  args.auto_find_batch_size = true;
  args.memory_limit = int64_t{1} << 30;
  Trainer searching(model, args, train_set, nullptr, {}, classifier_forward(), counting);
  searching.train();
  EXPECT_EQ(searching.args().per_device_train_batch_size, 10);
  EXPECT_EQ(steps, 2);
}

// train_samples_per_second and each step's samples count the rows that
// ran: 10 rows in batches of 4 are 4, 4 and 2 a epoch, not 3 x 4.
TEST(Trainer, ThroughputCountsTheRowsThatRan) {
  const data::Dataset train_set = blobs(10, 1);
  Generator g(3);
  nn::MLP model({4, 8, 3}, g);
  TrainingArguments args = small_args();
  args.per_device_train_batch_size = 4;
  args.num_train_epochs = 2;
  std::vector<int64_t> samples;
  Trainer trainer(model, args, train_set, nullptr, {}, classifier_forward(),
                  {.on_log = [](const Metrics&) {}, .on_step_end = [&](const StepStats& s) { samples.push_back(s.samples); }});
  const TrainOutput output = trainer.train();
  EXPECT_EQ(samples, (std::vector<int64_t>{4, 4, 2, 4, 4, 2}));
  double runtime = 0, per_second = 0;
  for (const auto& [name, value] : output.metrics) {
    if (name == "train_runtime") runtime = value;
    if (name == "train_samples_per_second") per_second = value;
  }
  EXPECT_NEAR(per_second * runtime, 20.0, 1e-9);
}

TEST(Trainer, AnEvalStrategyWithoutAnEvalDatasetIsAnError) {
  const data::Dataset train_set = blobs(16, 1);
  Generator g(3);
  nn::MLP model({4, 3}, g);
  TrainingArguments args = small_args();
  args.eval_strategy = "steps";
  const std::string message = error_of([&] { Trainer(model, args, train_set); });
  EXPECT_TRUE(contains(message, "eval_strategy steps needs an eval_dataset")) << message;
}

TEST(Trainer, MetricsPrintAsPythonPrintsADict) {
  EXPECT_EQ(format_metrics({{"epoch", 1.0}, {"eval_loss", 0.36734}, {"eval_samples", 30}}),
            "{'epoch': 1.0, 'eval_loss': 0.3673, 'eval_samples': 30}");
  EXPECT_EQ(format_metrics({{"learning_rate", 5e-5}, {"epoch", 1.0666}}), "{'learning_rate': 5e-05, 'epoch': 1.07}");
}

}  // namespace
}  // namespace remat::train
