// Module tree; see module.h.
//
// Parameters and children are kept in vectors of (name, value), not maps, so
// that named_parameters() follows registration order: optimizers, checkpoint
// files and parameter averaging all walk that order and must agree on it.
#include "nn/module.h"

#include <algorithm>
#include <unordered_set>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/factory.h"

namespace remat::nn {

void Module::gradient_checkpointing_enable(scheduler::PlanOptions options,
                                           const scheduler::GraphProfile* saved_profile) {
  REMAT_CHECK(!scheduler::Checkpointer::recording_on_this_thread(), "{}: gradient_checkpointing_enable inside a "
              "checkpointed forward", type_name());
  auto checkpointer = std::make_unique<scheduler::Checkpointer>(std::move(options), device());
  if (saved_profile) checkpointer->plan_from(*saved_profile);  // may refuse the budget: nothing changed then
  checkpointer_ = std::move(checkpointer);
}

void Module::gradient_checkpointing_disable() {
  REMAT_CHECK(!scheduler::Checkpointer::recording_on_this_thread(), "{}: gradient_checkpointing_disable inside a "
              "checkpointed forward", type_name());
  checkpointer_.reset();
}

void Module::rehearse_checkpointing(const std::function<void()>& step) {
  if (checkpointer_) checkpointer_->rehearse(step);
}

std::optional<scheduler::StepReport> Module::checkpointing_report() const {
  if (!checkpointer_) return std::nullopt;
  return checkpointer_->report();
}

const scheduler::PlanOptions* Module::checkpointing_options() const {
  return checkpointer_ ? &checkpointer_->options() : nullptr;
}

const scheduler::GraphProfile* Module::checkpointing_profile() const {
  return checkpointer_ ? checkpointer_->profile() : nullptr;
}

const scheduler::Plan* Module::checkpointing_plan() const { return checkpointer_ ? checkpointer_->plan() : nullptr; }

std::unique_ptr<scheduler::Checkpointer::Recording> Module::record_forward() {
  // No graph without grad (an evaluation): nothing to record or plan.
  if (!checkpointer_ || !grad_enabled() || scheduler::Checkpointer::recording_on_this_thread()) return nullptr;
  return checkpointer_->record();
}

Tensor Module::forward(const Tensor& x) {
  REMAT_FAIL("{}: this module has no forward (called with input {}); override Module::forward", type_name(), x.str());
}

void Module::check_new_name(const std::string& name) const {
  REMAT_CHECK(!name.empty(), "{}: a parameter or child module needs a non-empty name", type_name());
  REMAT_CHECK(name.find('.') == std::string::npos, "{}: name '{}' contains '.', which separates path components",
              type_name(), name);
  const auto same = [&](const auto& entry) { return entry.first == name; };
  REMAT_CHECK(std::none_of(parameters_.begin(), parameters_.end(), same), "{}: duplicate name '{}' (already a parameter)",
              type_name(), name);
  REMAT_CHECK(std::none_of(children_.begin(), children_.end(), same), "{}: duplicate name '{}' (already a child module)",
              type_name(), name);
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  check_new_name(name);
  REMAT_CHECK(value.defined(), "{}: parameter '{}' is an undefined tensor", type_name(), name);
  REMAT_CHECK(is_floating(value.dtype()), "{}: parameter '{}' has dtype {}; parameters must be float", type_name(), name,
              dtype_name(value.dtype()));
  Tensor param = value.is_leaf() ? value : value.detach();
  param.requires_grad_(true);
  param.storage()->set_category(MemoryCategory::Parameter);
  parameters_.emplace_back(name, param);
  return param;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  REMAT_CHECK(module != nullptr, "{}: child module '{}' is null", type_name(), name);
  REMAT_CHECK(module.get() != this, "{}: child module '{}' is the module itself", type_name(), name);
  if (!module->parent_) {
    module->parent_ = this;
    module->name_ = name;
  }
  children_.emplace_back(name, std::move(module));
}

Module::~Module() {
  for (const auto& [name, child] : children_) {
    if (child->parent_ == this) child->parent_ = nullptr;  // a child shared elsewhere outlives its first path
  }
}

std::string Module::path() const {
  if (!parent_) return "";
  std::string above = parent_->path();
  return above.empty() ? name_ : above + "." + name_;
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, param] : parameters_) out.emplace_back(prefix + name, param);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> all;
  collect("", all);
  // A child registered in two places would otherwise be updated twice per step.
  std::vector<std::pair<std::string, Tensor>> unique;
  std::unordered_set<const TensorImpl*> seen;
  for (auto& entry : all) {
    if (seen.insert(entry.second.impl()).second) unique.push_back(std::move(entry));
  }
  return unique;
}

namespace {

// t's storage replaced by a copy on `device` (category `category`), its
// TensorImpl kept.
void move_storage(const Tensor& t, Device device, MemoryCategory category) {
  if (t.device() == device) return;
  CategoryGuard guard(category);
  const Tensor moved = remat::to(t.detach(), device);
  TensorImpl& impl = *t.impl();
  impl.storage = moved.storage();
  impl.strides = moved.strides();
  impl.offset = moved.offset();
}

}  // namespace

Module& Module::to(Device device) {
  REMAT_CHECK(!scheduler::Checkpointer::recording_on_this_thread(), "{}: to({}) inside a checkpointed forward",
              type_name(), device.str());
  for (const auto& [name, param] : named_parameters()) {
    move_storage(param, device, MemoryCategory::Parameter);
    const Tensor grad = param.grad();
    if (grad.defined()) move_storage(grad, device, MemoryCategory::Gradient);
  }
  if (checkpointer_) checkpointer_->set_device(device);
  return *this;
}

Device Module::device() const {
  const auto params = named_parameters();
  return params.empty() ? Device::cpu() : params.front().second.device();
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, param] : named_parameters()) out.push_back(param);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t total = 0;
  for (const Tensor& param : parameters()) total += param.numel();
  return total;
}

Module& Module::train(bool training) {
  training_ = training;
  for (auto& [name, child] : children_) child->train(training);
  return *this;
}

}  // namespace remat::nn
