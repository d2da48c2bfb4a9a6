// Training checkpoints; see checkpoint.h.
#include "train/checkpoint.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "engine/autograd.h"
#include "engine/factory.h"
#include "train/parse.h"

namespace remat::train {
namespace {

constexpr std::string_view kModel = "model.", kOptimizer = "optimizer.", kLocalSgd = "local_sgd.";

// The position and value of the first NaN or infinity of a float tensor
// (contiguous, as read_safetensors and contiguous_copy make them).
template <class T>
std::optional<std::pair<int64_t, double>> first_non_finite(const T* values, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) return std::pair{i, static_cast<double>(values[i])};
  }
  return std::nullopt;
}

std::optional<std::pair<int64_t, double>> first_non_finite(const Tensor& t) {
  const Tensor values = dense(t);
  if (values.dtype() == DType::Float32) return first_non_finite(values.data<float>(), values.numel());
  if (values.dtype() == DType::Float64) return first_non_finite(values.data<double>(), values.numel());
  return std::nullopt;
}

// A file's optimizer state must be one a run could have made: v = E[g^2]
// is never negative, and no parameter took more steps than the file's step
// (the largest count is that step, when any parameter has stepped).
void check_optimizer_state(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& state,
                           int64_t step) {
  int64_t most = -1;
  for (const auto& entry : state) {
    const std::string& name = entry.first;  // named, not bound: clang 14 lambdas cannot capture a binding
    const Tensor& t = entry.second;
    if (name.ends_with(".exp_avg_sq") && (t.dtype() == DType::Float32 || t.dtype() == DType::Float64)) {
      dispatch_floating(t.dtype(), "load_checkpoint", [&]<class T>() {
        const std::vector<T> v = t.to_vector<T>();
        const auto it = std::find_if(v.begin(), v.end(), [](T x) { return x < 0; });
        REMAT_CHECK(it == v.end(), "load_checkpoint '{}': optimizer.{} holds a negative value {} at {} (a second "
                    "moment is never negative: the file is corrupt)", path, name, *it, it - v.begin());
      });
    }
    if (name.ends_with(".step") && t.dtype() == DType::Int64 && t.numel() == 1) {
      const int64_t count = t.item<int64_t>();
      REMAT_CHECK(count >= 1 && count <= step, "load_checkpoint '{}': optimizer.{} is {}, but the file's step is {} "
                  "(a parameter takes at most one optimizer step per step: the file is corrupt or mixed)", path, name,
                  count, step);
      most = std::max(most, count);
    }
  }
  REMAT_CHECK(most < 0 || most == step, "load_checkpoint '{}': the optimizer's step counts reach {}, but the file's "
              "step is {} (the file is corrupt or mixed)", path, most, step);
}

// A value for a message: quoted, with control bytes escaped (vocabularies
// hold newlines).
std::string shown(const std::string& value) {
  std::string out = "'";
  for (const char c : value) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else out += c;
  }
  return out + "'";
}

std::vector<std::pair<std::string, Tensor>> copies(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : state) out.emplace_back(name, contiguous_copy(t));
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer& optimizer, int64_t step,
                     nn::SafetensorsMetadata metadata, const LocalSGD* local_sgd) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  // Read on the CPU (a GPU's tensors are copied).
  const auto add = [&](std::string_view prefix, const std::string& name, const Tensor& t) {
    tensors.emplace_back(std::string(prefix) + name, to(t, Device::cpu()));
  };
  for (const auto& [name, p] : model.named_parameters()) add(kModel, name, p);
  for (const auto& [name, t] : optimizer.state_dict()) add(kOptimizer, name, t);
  if (local_sgd != nullptr) {
    for (const auto& [name, t] : local_sgd->state_dict()) add(kLocalSgd, name, t);
    metadata["local_sgd_steps"] = std::to_string(local_sgd->steps());
  }
  // A run that diverged must not replace its last good checkpoint.
  for (const auto& [name, t] : tensors) {
    const auto bad = first_non_finite(t);
    REMAT_CHECK(!bad, "save_checkpoint '{}': {} holds {} at {} (step {}); nothing was written", path, name,
                bad ? bad->second : 0.0, bad ? bad->first : 0, step);
  }
  metadata["step"] = std::to_string(step);
  nn::write_safetensors(path, tensors, metadata);
}

int64_t load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& optimizer,
                        LocalSGD* local_sgd) {
  const nn::SafetensorsMetadata metadata = nn::read_safetensors_metadata(path);
  const auto step_entry = metadata.find("step");
  REMAT_CHECK(step_entry != metadata.end(), "load_checkpoint '{}': no \"step\" in its metadata (not a checkpoint?)", path);
  const auto step = parse_integer<int64_t>(step_entry->second, fmt::format("load_checkpoint '{}': step", path));
  REMAT_CHECK(step >= 0, "load_checkpoint '{}': negative step {}", path, step);

  std::map<std::string, Tensor> model_tensors;
  std::vector<std::pair<std::string, Tensor>> optimizer_state, local_sgd_state;
  for (auto& [name, t] : nn::read_safetensors(path)) {
    const auto bad = first_non_finite(t);
    REMAT_CHECK(!bad, "load_checkpoint '{}': tensor '{}' holds {} at {} (a run stops before it saves such values: "
                "the file is corrupt)", path, name, bad ? bad->second : 0.0, bad ? bad->first : 0);
    if (name.starts_with(kModel)) model_tensors.emplace(name.substr(kModel.size()), t);
    else if (name.starts_with(kOptimizer)) optimizer_state.emplace_back(name.substr(kOptimizer.size()), t);
    else if (name.starts_with(kLocalSgd)) local_sgd_state.emplace_back(name.substr(kLocalSgd.size()), t);
    else REMAT_FAIL("load_checkpoint '{}': tensor '{}' is neither model., optimizer. nor local_sgd.", path, name);
  }
  int64_t local_sgd_steps = 0;
  if (local_sgd != nullptr) {
    const auto entry = metadata.find("local_sgd_steps");
    REMAT_CHECK(entry != metadata.end(), "load_checkpoint '{}': no \"local_sgd_steps\" in its metadata (saved without "
                "LocalSGD?)", path);
    local_sgd_steps = parse_integer<int64_t>(entry->second, fmt::format("load_checkpoint '{}': local_sgd_steps", path));
  } else {
    REMAT_CHECK(local_sgd_state.empty(), "load_checkpoint '{}': the file holds LocalSGD state ('{}'), but no LocalSGD "
                "was given to restore it", path, local_sgd_state.empty() ? "" : local_sgd_state.front().first);
  }
  check_optimizer_state(path, optimizer_state, step);
  const auto parameters = model.named_parameters();
  for (const auto& [name, p] : parameters) {
    const auto it = model_tensors.find(name);
    REMAT_CHECK(it != model_tensors.end(), "load_checkpoint '{}': parameter '{}' is missing", path, name);
    REMAT_CHECK(it->second.shape() == p.shape() && it->second.dtype() == p.dtype(), "load_checkpoint '{}': parameter "
                "'{}' is {} in the file, {} in the model", path, name, it->second.str(), p.str());
  }
  REMAT_CHECK(model_tensors.size() == parameters.size(), "load_checkpoint '{}': the file has {} model tensors, the "
              "model {} parameters", path, model_tensors.size(), parameters.size());
  // Each load is all or nothing on its own; LocalSGD's goes back to what it
  // was if the optimizer's fails. The model copy below cannot fail on the CPU
  // (onto a GPU only a CUDA error would stop it).
  if (local_sgd != nullptr) {
    const auto before = copies(local_sgd->state_dict());
    local_sgd->load_state_dict(local_sgd_state);
    try {
      optimizer.load_state_dict(optimizer_state);
    } catch (...) {
      local_sgd->load_state_dict(before);
      throw;
    }
    local_sgd->set_steps(local_sgd_steps);
  } else {
    optimizer.load_state_dict(optimizer_state);
  }
  NoGradGuard no_grad;
  for (const auto& [name, p] : parameters) copy_into(p, model_tensors.at(name));
  return step;
}

void check_checkpoint_matches(const std::string& path, const nn::SafetensorsMetadata& run) {
  const nn::SafetensorsMetadata file = nn::read_safetensors_metadata(path);
  std::vector<std::string> differences;
  for (const auto& [key, value] : run) {
    const auto it = file.find(key);
    if (it == file.end()) {
      differences.push_back(fmt::format("{} is not recorded (a file of an older remat?; this run has {})", key,
                                        shown(value)));
    } else if (it->second != value) {
      differences.push_back(fmt::format("{} is {} in the checkpoint, {} in this run", key, shown(it->second),
                                        shown(value)));
    }
  }
  REMAT_CHECK(differences.empty(), "resume: the checkpoint '{}' was written by another run: {}. Resume with the "
              "settings it was written with, or start over without resuming", path, fmt::join(differences, "; "));
}

}  // namespace remat::train
