// Training checkpoints; see checkpoint.h.
#include "train/checkpoint.h"

#include <cstring>
#include <map>

#include "engine/autograd.h"
#include "engine/factory.h"
#include "train/parse.h"

namespace remat::train {
namespace {

constexpr std::string_view kModel = "model.", kOptimizer = "optimizer.", kLocalSgd = "local_sgd.";

std::vector<std::pair<std::string, Tensor>> copies(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : state) out.emplace_back(name, contiguous_copy(t));
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer& optimizer, int64_t step,
                     nn::SafetensorsMetadata metadata, const LocalSGD* local_sgd) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, p] : model.named_parameters()) tensors.emplace_back(std::string(kModel) + name, p);
  for (const auto& [name, t] : optimizer.state_dict()) tensors.emplace_back(std::string(kOptimizer) + name, t);
  if (local_sgd != nullptr) {
    for (const auto& [name, t] : local_sgd->state_dict()) tensors.emplace_back(std::string(kLocalSgd) + name, t);
    metadata["local_sgd_steps"] = std::to_string(local_sgd->steps());
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
  // was if the optimizer's fails. The model copy below cannot fail.
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
  for (const auto& [name, p] : parameters) {
    std::memcpy(p.raw_data(), model_tensors.at(name).raw_data(), p.nbytes());
    p.storage()->bump_version();
  }
  return step;
}

}  // namespace remat::train
