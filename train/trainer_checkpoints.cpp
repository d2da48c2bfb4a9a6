// The Trainer's checkpoints (trainer.h): checkpoint-STEP folders written
// whole or not at all by rank 0 (weights, optimizer, LocalSGD, generators,
// where the loop stands, training_args.json, trainer_state.json), rotated
// to save_total_limit keeping the best, and resumed from. The file format is
// train/checkpoint.h's; the rest of the Trainer is in trainer.cpp.
#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <fmt/format.h>

#include "engine/error.h"
#include "nn/safetensors.h"
#include "train/accelerator.h"
#include "train/checkpoint.h"
#include "train/parse.h"
#include "train/trainer.h"
#include "train/trainer_run.h"

namespace remat::train {
namespace fs = std::filesystem;
using trainer_internal::kCheckpointFile;

namespace {

// The step of a "checkpoint-STEP" folder name, or -1.
int64_t step_of(const fs::path& folder) {
  const std::string name = folder.filename().string();
  if (!name.starts_with("checkpoint-") || name.size() == 11) return -1;
  const std::string_view digits = std::string_view(name).substr(11);
  if (digits.find_first_not_of("0123456789") != std::string_view::npos) return -1;
  return parse_integer<int64_t>(digits, "checkpoint folder");
}

void write_text(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream file(tmp);
    file << text;
    file.close();
    REMAT_CHECK(file.good(), "Trainer: cannot write '{}'", tmp.string());
  }
  fs::rename(tmp, path);  // whole or not at all
}

}  // namespace

namespace trainer_internal {

std::vector<fs::path> checkpoints_in(const std::string& output_dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code error;
  if (output_dir.empty() || !fs::is_directory(output_dir, error)) return {};
  for (const fs::directory_entry& entry : fs::directory_iterator(output_dir)) {
    const int64_t step = step_of(entry.path());
    if (step >= 0 && entry.is_directory()) found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
  return out;
}

}  // namespace trainer_internal

using trainer_internal::checkpoints_in;

void Trainer::write_state(const std::string& path) const {
  nlohmann::ordered_json state;
  state["global_step"] = global_step_;
  state["epoch"] = epoch_;
  state["best_metric"] = best_metric_ ? nlohmann::ordered_json(*best_metric_) : nlohmann::ordered_json(nullptr);
  state["best_model_checkpoint"] =
      best_checkpoint_.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(best_checkpoint_);
  state["log_history"] = log_history_;
  write_text(path, state.dump(2) + "\n");
}

void Trainer::save_checkpoint(Run& run) {
  if (run.local_sgd) run.local_sgd->finish();  // every rank holds the model rank 0 writes
  std::string problem;
  if (accelerator_->is_main_process()) {
    try {
      write_checkpoint(run);
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  // Every rank learns whether rank 0's save succeeded, once it is done (a
  // best checkpoint loaded later is complete on every rank).
  int64_t failed = problem.empty() ? 0 : 1;
  if (accelerator_->num_processes() > 1) accelerator_->host_communicator().broadcast(&failed, 1, DType::Int64, 0);
  REMAT_CHECK(failed == 0, "Trainer: saving checkpoint-{} failed{}", global_step_,
              problem.empty() ? std::string(" on rank 0") : ": " + problem);
  saved_checkpoint_ = (fs::path(args_.output_dir) / fmt::format("checkpoint-{}", global_step_)).string();
}

void Trainer::write_checkpoint(Run& run) {
  const fs::path folder = fs::path(args_.output_dir) / fmt::format("checkpoint-{}", global_step_);
  const fs::path tmp = fs::path(args_.output_dir) / fmt::format(".checkpoint-{}.tmp-{}", global_step_, getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  struct RemoveUnlessRenamed {
    const fs::path& path;
    ~RemoveUnlessRenamed() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } cleanup{tmp};
  nn::SafetensorsMetadata metadata = run_description_;
  metadata.insert({{"next_epoch", std::to_string(run.next_epoch)},
                                   {"next_batch", std::to_string(run.next_batch)},
                                   {"world_size", std::to_string(accelerator_->num_processes())},
                                   {"per_device_train_batch_size", std::to_string(args_.per_device_train_batch_size)},
                                   {"gradient_accumulation_steps", std::to_string(args_.gradient_accumulation_steps)},
                                   {"seed", std::to_string(args_.seed)}});
  const std::vector<Generator*> generators = model_.random_generators();
  for (size_t i = 0; i < generators.size(); ++i) {
    metadata[fmt::format("rng_offset.{}", i)] = std::to_string(generators[i]->offset());
  }
  train::save_checkpoint((tmp / kCheckpointFile).string(), model_, *run.adamw, global_step_, metadata,
                         run.local_sgd.get());
  write_text(tmp / "training_args.json", to_json(args_).dump(2) + "\n");
  write_state((tmp / "trainer_state.json").string());
  fs::remove_all(folder);
  fs::rename(tmp, folder);
  rotate_checkpoints();
}

void Trainer::rotate_checkpoints() {
  if (!args_.save_total_limit) return;
  std::vector<fs::path> folders = checkpoints_in(args_.output_dir);
  auto limit = static_cast<size_t>(*args_.save_total_limit);
  // As Hugging Face: the best stays, moved next to the newest (which stays
  // too, to resume from; a limit of 1 becomes 2 for that).
  const auto best = std::find_if(folders.begin(), folders.end(), [&](const fs::path& p) {
    return !best_checkpoint_.empty() && fs::equivalent(p, best_checkpoint_);
  });
  if (best != folders.end() && best + 1 != folders.end()) {
    std::rotate(best, best + 1, folders.end() - 1);
    limit = std::max<size_t>(limit, 2);
  }
  for (size_t i = 0; i + limit < folders.size(); ++i) fs::remove_all(folders[i]);
}

std::string Trainer::checkpoint_to_resume() const {
  const std::string& asked = args_.resume_from_checkpoint;
  if (asked.empty()) return "";
  if (asked != "latest" && asked != "true") return asked;
  const std::vector<fs::path> folders = checkpoints_in(args_.output_dir);
  REMAT_CHECK(!folders.empty(), "Trainer: resume_from_checkpoint {}: no checkpoint-STEP folder in output_dir '{}'",
              asked, args_.output_dir);
  return folders.back().string();
}

void Trainer::resume(Run& run, const std::string& folder) {
  const std::string file = (fs::path(folder) / kCheckpointFile).string();
  REMAT_CHECK(fs::exists(file), "Trainer: resume_from_checkpoint '{}' holds no {}", folder, kCheckpointFile);
  nn::SafetensorsMetadata expected = run_description_;
  expected.insert({{"world_size", std::to_string(accelerator_->num_processes())},
                   {"per_device_train_batch_size", std::to_string(args_.per_device_train_batch_size)},
                   {"gradient_accumulation_steps", std::to_string(args_.gradient_accumulation_steps)},
                   {"seed", std::to_string(args_.seed)}});
  check_checkpoint_matches(file, expected);
  saved_checkpoint_ = folder;
  global_step_ = load_checkpoint(file, model_, *run.adamw, run.local_sgd.get());
  const nn::SafetensorsMetadata metadata = nn::read_safetensors_metadata(file);
  const auto number = [&](const std::string& key) {
    const auto it = metadata.find(key);
    REMAT_CHECK(it != metadata.end(), "Trainer: checkpoint '{}' has no \"{}\" in its metadata", file, key);
    return parse_integer<uint64_t>(it->second, fmt::format("checkpoint '{}': {}", file, key));
  };
  run.next_epoch = static_cast<int64_t>(number("next_epoch"));
  run.next_batch = static_cast<int64_t>(number("next_batch"));
  const std::vector<Generator*> generators = model_.random_generators();
  for (size_t i = 0; i < generators.size(); ++i) generators[i]->set_offset(number(fmt::format("rng_offset.{}", i)));
  for (int64_t s = 0; s < global_step_; ++s) run.schedule->step();
  accelerator_->resume_at(global_step_, run.next_batch);
  epoch_ = static_cast<double>(run.next_epoch) + static_cast<double>(run.next_batch) / static_cast<double>(run.batches);
  std::ifstream state_file(fs::path(folder) / "trainer_state.json");
  const nlohmann::json state = nlohmann::json::parse(state_file, nullptr, /*allow_exceptions=*/false);
  if (!state.is_discarded() && state.contains("log_history")) {
    log_history_ = nlohmann::ordered_json::parse(state["log_history"].dump());
    if (state.contains("best_metric") && state["best_metric"].is_number()) {
      best_metric_ = state["best_metric"].get<double>();
    }
    if (state.contains("best_model_checkpoint") && state["best_model_checkpoint"].is_string()) {
      best_checkpoint_ = state["best_model_checkpoint"].get<std::string>();
    }
  }
}

}  // namespace remat::train
