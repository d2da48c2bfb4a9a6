// The Trainer's checkpoints (trainer.h): checkpoint-STEP folders written
// whole or not at all by rank 0 (weights, optimizer, LocalSGD, generators,
// where the loop stands, training_args.json, trainer_state.json, and last
// the manifest of them all), rotated to save_total_limit keeping the best,
// checked before a resume trusts them, and resumed from. The file format is
// train/checkpoint.h's, the manifest train/checkpoint_manifest.h's; the rest
// of the Trainer is in trainer.cpp.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"
#include "engine/file_write.h"
#include "nn/safetensors.h"
#include "train/accelerator.h"
#include "train/checkpoint.h"
#include "train/checkpoint_manifest.h"
#include "train/parse.h"
#include "train/trainer.h"
#include "train/trainer_run.h"

namespace remat::train {
namespace fs = std::filesystem;
using trainer_internal::kCheckpointFile;

namespace {

constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kArgsFile = "training_args.json";
// The running sum of the steps' losses and their count since the run began
// (in the checkpoint's metadata), so that a resumed run's train_loss is the
// whole run's mean, as an uninterrupted run's.
constexpr const char* kLossSum = "train_loss_sum";
constexpr const char* kLossSteps = "train_loss_steps";

// "checkpoint-" and digits: what a checkpoint folder of a run is named.
bool named_as_checkpoint(const fs::path& folder) {
  const std::string name = folder.filename().string();
  return name.starts_with("checkpoint-") && name.size() > 11 &&
         name.find_first_not_of("0123456789", 11) == std::string::npos;
}

// The step of a "checkpoint-STEP" folder name; none for another name, or
// for digits no int64 holds (checkpoint-99999999999999999999).
std::optional<int64_t> step_of(const fs::path& folder) {
  if (!named_as_checkpoint(folder)) return std::nullopt;
  const std::string name = folder.filename().string();
  int64_t step = 0;
  const auto [end, error] = std::from_chars(name.data() + 11, name.data() + name.size(), step);
  if (error != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return step;
}

// A file of a checkpoint parsed as JSON, strictly: unreadable or malformed is
// an error naming the file (a checkpoint that holds it is damaged).
nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  REMAT_CHECK(in.good(), "'{}' is missing or unreadable", file.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    REMAT_FAIL("'{}' is not valid JSON ({})", file.string(), e.what());
  }
}

// The integer a metadata entry of a checkpoint holds.
template <class Integer>
Integer metadata_integer(const nn::SafetensorsMetadata& metadata, const std::string& file, const std::string& key) {
  const auto it = metadata.find(key);
  REMAT_CHECK(it != metadata.end(), "Trainer: checkpoint '{}' has no \"{}\" in its metadata", file, key);
  return parse_integer<Integer>(it->second, fmt::format("checkpoint '{}': {}", file, key));
}

// An error's message without its " [file:line]", to be quoted inside another.
std::string message_of(const Error& e) {
  std::string text = e.what();
  const size_t at = text.rfind(" [");
  if (at != std::string::npos && text.ends_with("]")) text.resize(at);
  return text;
}

void warn(const std::string& message) {
  fmt::print(stderr, "warning: {}\n", message);
  std::fflush(stderr);
}

// What a checkpoint folder holds, checked before a resume trusts it.
struct Inspection {
  int64_t step = -1;     // checkpoint.safetensors' (-1 when it cannot be read)
  std::string problem;   // why it cannot be resumed from, naming the file; empty: it can
  std::string note;      // why it can, but unverified ("written before manifests")
};

// Its manifest (every file's size and CRC-32), then what a resume reads:
// trainer_state.json and training_args.json parse, the safetensors header
// reads, and the step agrees across them and the folder's name.
Inspection inspect(const fs::path& folder) {
  Inspection out;
  std::error_code error;
  if (!fs::is_directory(folder, error)) {
    out.problem = fmt::format("'{}' {}", folder.string(), fs::exists(folder, error) ? "is not a folder" : "does not exist");
    return out;
  }
  const ManifestCheck manifest = verify_manifest(folder.string());
  if (manifest.status == ManifestStatus::Damaged) {
    out.problem = manifest.problem;
    return out;
  }
  if (manifest.status == ManifestStatus::Verified) {
    // A manifest lists every file a resume reads: one that leaves a file
    // out (edited by hand) vouches for nothing.
    for (const char* name : {kCheckpointFile, kStateFile, kArgsFile}) {
      if (std::find(manifest.files.begin(), manifest.files.end(), name) == manifest.files.end()) {
        out.problem = fmt::format("'{}' does not list {}, which every checkpoint's manifest does",
                                  (folder / kManifestFile).string(), name);
        return out;
      }
    }
  }
  if (manifest.status == ManifestStatus::Missing) {
    if (!fs::exists(folder / kCheckpointFile, error)) {
      out.problem = fmt::format("'{}' holds neither {} nor {}: not a checkpoint (an empty folder, or one no run "
                                "finished)", folder.string(), kManifestFile, kCheckpointFile);
      return out;
    }
    // A checkpoint saved with a manifest says so in its metadata: its
    // manifest missing is damage, not an older remat's checkpoint.
    try {
      const nn::SafetensorsMetadata metadata = nn::read_safetensors_metadata((folder / kCheckpointFile).string());
      if (metadata.contains("manifest")) {
        out.problem = fmt::format("'{}' is missing, though '{}' was saved with one (deleted or lost: nothing "
                                  "vouches for the files)", (folder / kManifestFile).string(),
                                  (folder / kCheckpointFile).string());
        return out;
      }
    } catch (const Error& e) {
      out.problem = message_of(e);
      return out;
    }
    out.note = fmt::format("not verified: written before manifests (no {}: a damaged byte would go unnoticed)",
                           kManifestFile);
  }
  try {
    const nlohmann::json state = read_json(folder / kStateFile);
    REMAT_CHECK(state.is_object() && state.contains("global_step") && state["global_step"].is_number_integer() &&
                    state.contains("log_history") && state["log_history"].is_array(),
                "'{}' has no integer \"global_step\" or no \"log_history\" list", (folder / kStateFile).string());
    REMAT_CHECK(read_json(folder / kArgsFile).is_object(), "'{}' is not a JSON object",
                (folder / kArgsFile).string());
    const std::string file = (folder / kCheckpointFile).string();
    out.step = metadata_integer<int64_t>(nn::read_safetensors_metadata(file), file, "step");
    const auto state_step = state["global_step"].get<int64_t>();
    REMAT_CHECK(state_step == out.step, "'{}' says global_step {}, '{}' step {} (the files of two saves)",
                (folder / kStateFile).string(), state_step, file, out.step);
    const std::optional<int64_t> named = step_of(folder);
    REMAT_CHECK(!named_as_checkpoint(folder) || named == out.step, "'{}' holds step {} under the name of step {}",
                folder.string(), out.step, folder.filename().string().substr(11));
  } catch (const Error& e) {
    out.problem = message_of(e);
  }
  return out;
}

}  // namespace

namespace trainer_internal {

std::vector<fs::path> checkpoints_in(const std::string& output_dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code error;
  if (output_dir.empty() || !fs::is_directory(output_dir, error)) return {};
  for (const fs::directory_entry& entry : fs::directory_iterator(output_dir)) {
    const std::optional<int64_t> step = step_of(entry.path());
    if (step && entry.is_directory()) found.emplace_back(*step, entry.path());
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
  write_file_atomically(path, state.dump(2) + "\n");
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
  saved_checkpoint_ = trainer_internal::checkpoint_folder(args_.output_dir, global_step_);
}

// Every file into a temporary folder, the manifest of them last, then the
// folder renamed into place: a checkpoint-STEP folder is whole, or absent.
// Then output_dir/trainer_state.json, which so never names a step whose
// checkpoint failed.
void Trainer::write_checkpoint(Run& run) {
  const fs::path folder = trainer_internal::checkpoint_folder(args_.output_dir, global_step_);
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
  metadata["manifest"] = kManifestFile;  // saved with one: its absence is damage (inspect)
  metadata.insert({{"next_epoch", std::to_string(run.next_epoch)},
                   {"next_batch", std::to_string(run.next_batch)},
                   {"world_size", std::to_string(accelerator_->num_processes())},
                   {"per_device_train_batch_size", std::to_string(args_.per_device_train_batch_size)},
                   {"gradient_accumulation_steps", std::to_string(args_.gradient_accumulation_steps)},
                   {"seed", std::to_string(args_.seed)},
                   {kLossSum, fmt::format("{}", run.loss_sum)},  // the shortest text that reads back exactly
                   {kLossSteps, std::to_string(run.loss_steps)}});
  const std::vector<Generator*> generators = model_.random_generators();
  for (size_t i = 0; i < generators.size(); ++i) {
    metadata[fmt::format("rng_offset.{}", i)] = std::to_string(generators[i]->offset());
  }
  train::save_checkpoint((tmp / kCheckpointFile).string(), model_, *run.adamw, global_step_, metadata,
                         run.local_sgd.get());
  write_file_atomically((tmp / kArgsFile).string(), to_json(args_).dump(2) + "\n");
  write_state((tmp / kStateFile).string());
  write_manifest(tmp.string());
  fs::remove_all(folder);
  fs::rename(tmp, folder);
  sync_folder(args_.output_dir);
  rotate_checkpoints();
  write_state((fs::path(args_.output_dir) / kStateFile).string());
}

void Trainer::rotate_checkpoints() {
  if (!args_.save_total_limit) return;
  // Only this run's line of checkpoints, up to the one just saved: a stray
  // folder of a higher step (an empty checkpoint-100/, one latest skipped)
  // is not the newest, and neither counts nor is deleted.
  std::vector<fs::path> folders = checkpoints_in(args_.output_dir);
  std::erase_if(folders, [&](const fs::path& p) { return step_of(p).value_or(global_step_ + 1) > global_step_; });
  auto limit = static_cast<size_t>(*args_.save_total_limit);
  // As Hugging Face: the best stays, moved next to the newest (which stays
  // too, to resume from; a limit of 1 becomes 2 for that).
  std::error_code error;  // a best checkpoint deleted by hand is no longer kept
  const auto best = std::find_if(folders.begin(), folders.end(), [&](const fs::path& p) {
    return !best_checkpoint_.empty() && fs::equivalent(p, best_checkpoint_, error);
  });
  if (best != folders.end() && best + 1 != folders.end()) {
    std::rotate(best, best + 1, folders.end() - 1);
    limit = std::max<size_t>(limit, 2);
  }
  for (size_t i = 0; i + limit < folders.size(); ++i) fs::remove_all(folders[i]);
}

// Note [Which checkpoint a resume trusts]: a folder named explicitly must
// verify (its manifest, then the files a resume reads), else the error names
// the file that fails and the newest older checkpoint that verifies. "latest"
// takes the newest checkpoint-STEP that verifies, and says on stderr which
// newer ones it skipped and why (damaged, empty, a name whose step no int64
// holds). A checkpoint of a remat before manifests is resumed, with a
// warning that it was not verified.
std::string Trainer::checkpoint_to_resume() const {
  std::string asked = args_.resume_from_checkpoint;
  if (asked.empty()) return "";
  while (asked.size() > 1 && asked.ends_with('/')) asked.pop_back();  // "out/checkpoint-6/": its name, its folder
  const bool main_process = accelerator_->is_main_process();
  if (asked != "latest" && asked != "true") {
    const Inspection inspection = inspect(asked);
    if (!inspection.problem.empty()) {
      // The newest checkpoint beside it that verifies, as the way out (a
      // newer one is what latest takes; an older one is resumed by name).
      const std::optional<int64_t> step = step_of(asked);
      std::string other;
      bool newer = false;
      const fs::path parent = fs::path(asked).parent_path();
      const std::vector<fs::path> beside = checkpoints_in(parent.empty() ? "." : parent.string());
      for (auto it = beside.rbegin(); it != beside.rend() && other.empty(); ++it) {
        std::error_code ec;
        if (fs::equivalent(*it, asked, ec) || !inspect(*it).problem.empty()) continue;
        other = it->string();
        newer = step && step_of(*it) > *step;
      }
      REMAT_FAIL("Trainer: resume_from_checkpoint '{}' fails its check: {}. {}", asked, inspection.problem,
                 other.empty() ? std::string("No other checkpoint beside it verifies")
                 : newer       ? fmt::format("The newest checkpoint beside it that verifies is '{}' "
                                             "(resume_from_checkpoint latest takes it)", other)
                               : fmt::format("An older checkpoint verifies: '{}' (resume from it, or give "
                                             "resume_from_checkpoint latest, which skips damaged ones)", other));
    }
    if (!inspection.note.empty() && main_process) warn(fmt::format("checkpoint '{}' is {}", asked, inspection.note));
    return asked;
  }
  std::vector<fs::path> candidates = checkpoints_in(args_.output_dir);
  std::vector<std::string> skipped;
  std::error_code error;
  if (!args_.output_dir.empty() && fs::is_directory(args_.output_dir, error)) {
    for (const fs::directory_entry& entry : fs::directory_iterator(args_.output_dir)) {
      if (named_as_checkpoint(entry.path()) && !step_of(entry.path())) {
        skipped.push_back(fmt::format("'{}': its step does not fit in 64 bits (not a checkpoint remat wrote)",
                                      entry.path().string()));
      }
    }
  }
  REMAT_CHECK(!candidates.empty(), "Trainer: resume_from_checkpoint {}: no checkpoint-STEP folder in output_dir "
              "'{}'{}", asked, args_.output_dir,
              skipped.empty() ? std::string() : fmt::format(" (skipped {})", fmt::join(skipped, "; ")));
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const Inspection inspection = inspect(*it);
    if (!inspection.problem.empty()) {
      skipped.push_back(fmt::format("'{}': {}", it->string(), inspection.problem));
      continue;
    }
    if (main_process) {
      for (const std::string& s : skipped) warn(fmt::format("resume_from_checkpoint {}: skipped {}", asked, s));
      if (!inspection.note.empty()) warn(fmt::format("checkpoint '{}' is {}", it->string(), inspection.note));
    }
    return it->string();
  }
  REMAT_FAIL("Trainer: resume_from_checkpoint {}: no checkpoint in output_dir '{}' verifies: {}", asked,
             args_.output_dir, fmt::join(skipped, "; "));
}

// Note [Runs never mix]: a run resumed from checkpoint-S writes checkpoints
// S+1, S+2, ... over those of the run that wrote S and went on; a later
// "latest" would then mix the two. So newer checkpoints of output_dir that
// verify are an error, naming them and the ways out, unless
// overwrite_output_dir, which deletes them (said on stderr). Damaged ones
// are no run to keep: a save at their step replaces them.
std::function<void()> Trainer::keep_runs_apart(const std::string& folder) {
  if (args_.output_dir.empty()) return [] {};
  const std::string file = (fs::path(folder) / kCheckpointFile).string();
  const auto step = metadata_integer<int64_t>(nn::read_safetensors_metadata(file), file, "step");
  std::vector<fs::path> newer;
  std::error_code error;
  for (const fs::path& other : checkpoints_in(args_.output_dir)) {
    if (step_of(other) > step && !fs::equivalent(other, folder, error) && inspect(other).problem.empty()) {
      newer.push_back(other);
    }
  }
  if (newer.empty()) return [] {};
  std::vector<std::string> names;
  for (const fs::path& p : newer) names.push_back(fmt::format("'{}'", p.string()));
  REMAT_CHECK(args_.overwrite_output_dir, "Trainer: resume_from_checkpoint '{}' (step {}) is older than {} in "
              "output_dir '{}': the resumed run would write over {} and mix two runs. Resume from the newest "
              "(resume_from_checkpoint latest, or {}), give a new output_dir (--output-dir), or give "
              "overwrite_output_dir (--overwrite-output-dir) to delete {}",
              folder, step, fmt::join(names, ", "), args_.output_dir, newer.size() == 1 ? "it" : "them",
              names.back(), newer.size() == 1 ? "it" : "the newer ones");
  // Deleted once the resume has passed every check (its caller's), never
  // before: a resume refused for another reason loses nothing.
  return [this, newer, names, folder] {
    if (!accelerator_->is_main_process()) return;
    for (const fs::path& p : newer) fs::remove_all(p);
    warn(fmt::format("overwrite_output_dir: deleted {}, newer than '{}', the checkpoint resumed from",
                     fmt::join(names, ", "), folder));
  };
}

// Hugging Face lets the settings of a resumed run differ from its
// checkpoint's; remat does too, and says which (from training_args.json),
// since the run then leaves the path an uninterrupted one would take.
void Trainer::warn_changed_settings(const std::string& folder) const {
  static constexpr const char* kTrajectory[] = {
      "learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "warmup_ratio", "weight_decay",
      "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "per_device_train_batch_size",
      "auto_find_batch_size", "memory_limit", "gradient_accumulation_steps", "seed", "max_steps",
      "num_train_epochs", "gradient_checkpointing", "gradient_checkpointing_kwargs", "local_sgd_steps", "diloco",
      "outer_lr", "outer_momentum", "save_strategy", "save_steps", "save_total_limit", "eval_strategy",
      "eval_steps", "load_best_model_at_end", "metric_for_best_model", "greater_is_better", "tf32",
      "fused_epilogues"};
  if (!accelerator_->is_main_process()) return;
  const nlohmann::json before = read_json(fs::path(folder) / kArgsFile);
  const nlohmann::json now = nlohmann::json::parse(to_json(args_).dump());
  std::vector<std::string> changes;
  for (const char* key : kTrajectory) {
    if (before.contains(key) && now.contains(key) && before[key] != now[key]) {
      changes.push_back(fmt::format("{} {} -> {}", key, before[key].dump(), now[key].dump()));
    }
  }
  if (changes.empty()) return;
  warn(fmt::format("resuming '{}' with settings other than its run's: {} (Hugging Face lets them change, and so does "
                   "remat: the run goes on with the new ones, not as an uninterrupted run would)",
                   folder, fmt::join(changes, ", ")));
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
  warn_changed_settings(folder);
  // Strictly: a damaged trainer_state.json is a damaged checkpoint, not an
  // empty history (read before the model changes).
  nlohmann::json state;
  try {
    state = read_json(fs::path(folder) / kStateFile);
    REMAT_CHECK(state.is_object() && state.contains("log_history") && state["log_history"].is_array(),
                "'{}' has no \"log_history\" list", (fs::path(folder) / kStateFile).string());
  } catch (const Error& e) {
    REMAT_FAIL("Trainer: resume_from_checkpoint '{}' is damaged: {}", folder, message_of(e));
  }
  saved_checkpoint_ = folder;
  global_step_ = load_checkpoint(file, model_, *run.adamw, run.local_sgd.get());
  const nn::SafetensorsMetadata metadata = nn::read_safetensors_metadata(file);
  const auto number = [&](const std::string& key) { return metadata_integer<uint64_t>(metadata, file, key); };
  run.next_epoch = static_cast<int64_t>(number("next_epoch"));
  run.next_batch = static_cast<int64_t>(number("next_batch"));
  const std::vector<Generator*> generators = model_.random_generators();
  for (size_t i = 0; i < generators.size(); ++i) generators[i]->set_offset(number(fmt::format("rng_offset.{}", i)));
  // A checkpoint of a remat before the sums: train_loss will average the resumed steps only.
  if (metadata.contains(kLossSum) && metadata.contains(kLossSteps)) {
    const std::string& sum = metadata.at(kLossSum);
    char* end = nullptr;
    run.loss_sum = std::strtod(sum.c_str(), &end);
    REMAT_CHECK(end == sum.c_str() + sum.size() && !sum.empty(), "Trainer: checkpoint '{}': {} '{}' is not a number",
                file, kLossSum, sum);
    run.loss_steps = static_cast<int64_t>(number(kLossSteps));
  }
  for (int64_t s = 0; s < global_step_; ++s) run.schedule->step();
  accelerator_->resume_at(global_step_, run.next_batch);
  epoch_ = static_cast<double>(run.next_epoch) + static_cast<double>(run.next_batch) / static_cast<double>(run.batches);
  log_history_ = nlohmann::ordered_json::parse(state["log_history"].dump());
  if (state.contains("best_metric") && state["best_metric"].is_number()) {
    best_metric_ = state["best_metric"].get<double>();
  }
  if (state.contains("best_model_checkpoint") && state["best_model_checkpoint"].is_string()) {
    best_checkpoint_ = state["best_model_checkpoint"].get<std::string>();
  }
}

}  // namespace remat::train
