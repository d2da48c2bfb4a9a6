// AdamW; see adamw.h. The bias corrections are computed here in double, once
// per parameter and step; the kernel does the per-element work, for every
// parameter of a device and dtype at once (adamw_multi_step).
#include "optim/adamw.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/kernel_call.h"
#include "kernels/optim.h"

namespace remat::optim {

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Optimizer(std::move(params), options.lr), options_(options), state_(this->params().size()) {
  REMAT_CHECK(options.beta1 >= 0 && options.beta1 < 1, "AdamW: beta1 must be in [0, 1), got {}", options.beta1);
  REMAT_CHECK(options.beta2 >= 0 && options.beta2 < 1, "AdamW: beta2 must be in [0, 1), got {}", options.beta2);
  REMAT_CHECK(options.eps >= 0, "AdamW: eps must be non-negative, got {}", options.eps);
  REMAT_CHECK(options.weight_decay >= 0, "AdamW: weight_decay must be non-negative, got {}", options.weight_decay);
}

void AdamW::step() {
  // Every gradient first (each is checked), then the state and the groups:
  // one multi-tensor kernel per device and dtype (on CUDA one launch for
  // all the group's parameters; on the CPU one loop a parameter, as before).
  // A parameter's step count moves once its group's kernel call returned,
  // so a call that throws leaves the later groups' counts as they were.
  std::vector<Tensor> grads(params().size());
  for (size_t i = 0; i < params().size(); ++i) grads[i] = dense_grad_of(params()[i], "AdamW");
  std::vector<std::vector<size_t>> groups;  // parameter indices, by (device, dtype) in order of first appearance
  for (size_t i = 0; i < params().size(); ++i) {
    if (!grads[i].defined()) continue;
    const Tensor& p = params()[i];
    State& state = state_[i];
    if (!state.exp_avg.defined()) {
      CategoryGuard category(MemoryCategory::OptimizerState);
      state.exp_avg = zeros(p.shape(), p.dtype(), p.device());
      state.exp_avg_sq = zeros(p.shape(), p.dtype(), p.device());
    } else if (state.exp_avg.device() != p.device()) {  // the model moved (Module::to) or loaded CPU state
      CategoryGuard category(MemoryCategory::OptimizerState);
      state.exp_avg = to(state.exp_avg, p.device());
      state.exp_avg_sq = to(state.exp_avg_sq, p.device());
    }
    auto group = std::find_if(groups.begin(), groups.end(), [&](const std::vector<size_t>& g) {
      const Tensor& q = params()[g.front()];
      return q.device() == p.device() && q.dtype() == p.dtype();
    });
    if (group == groups.end()) group = groups.insert(groups.end(), std::vector<size_t>{});
    group->push_back(i);
  }
  for (const std::vector<size_t>& group : groups) {
    const Tensor& first = params()[group.front()];
    dispatch_floating(first.dtype(), "AdamW", [&]<class T>() {
      run_kernel(first, "AdamW", [&](auto stream) {
        std::vector<kernels::AdamwTensor<T>> rows;
        rows.reserve(group.size());
        for (size_t i : group) {
          const Tensor& p = params()[i];
          const State& state = state_[i];
          const double t = static_cast<double>(state.step + 1);  // committed below, once the group ran
          kernels::AdamwHyper hyper;
          hyper.lr = lr();
          hyper.beta1 = options_.beta1;
          hyper.beta2 = options_.beta2;
          hyper.eps = options_.eps;
          hyper.weight_decay = options_.weight_decay;
          hyper.step_size = lr() / (1.0 - std::pow(options_.beta1, t));
          hyper.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, t));
          rows.push_back({p.data<T>(), state.exp_avg.data<T>(), state.exp_avg_sq.data<T>(), grads[i].data<T>(),
                          p.numel(), kernels::AdamwConstants<T>(hyper)});
        }
        adamw_multi_step<T>(rows, stream);
      });
    });
    for (size_t i : group) {
      state_[i].step += 1;
      params()[i].storage()->bump_version();
    }
  }
}

std::vector<std::pair<std::string, Tensor>> AdamW::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i].step == 0) continue;
    out.emplace_back(fmt::format("{}.exp_avg", i), state_[i].exp_avg);
    out.emplace_back(fmt::format("{}.exp_avg_sq", i), state_[i].exp_avg_sq);
    CategoryGuard category(MemoryCategory::OptimizerState);
    out.emplace_back(fmt::format("{}.step", i), from_vector(std::vector<int64_t>{state_[i].step}, {1}));
  }
  return out;
}

void AdamW::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  // Check everything, then copy (all or nothing).
  std::vector<State> loaded(state_.size());
  for (const auto& [name, value] : state) {
    const size_t dot = name.find('.');
    REMAT_CHECK(dot != std::string::npos && dot > 0 && name.find_first_not_of("0123456789") == dot,
                "AdamW.load_state_dict: unexpected name '{}'", name);
    size_t i = 0;
    std::from_chars(name.data(), name.data() + dot, i);  // digits only, checked above
    const std::string field = name.substr(dot + 1);
    REMAT_CHECK(i < params().size(), "AdamW.load_state_dict: '{}' names parameter {} of {}", name, i, params().size());
    const Tensor& p = params()[i];
    if (field == "step") {
      REMAT_CHECK(value.dtype() == DType::Int64 && value.numel() == 1, "AdamW.load_state_dict: '{}' is {}, expected "
                  "int64 (1)", name, value.str());
      loaded[i].step = value.item<int64_t>();
      continue;
    }
    REMAT_CHECK(field == "exp_avg" || field == "exp_avg_sq", "AdamW.load_state_dict: unexpected name '{}'", name);
    REMAT_CHECK(value.shape() == p.shape() && value.dtype() == p.dtype(), "AdamW.load_state_dict: '{}' is {}, "
                "parameter {} is {}", name, value.str(), i, p.str());
    CategoryGuard category(MemoryCategory::OptimizerState);
    // On the parameter's device (a checkpoint is read on the CPU).
    (field == "exp_avg" ? loaded[i].exp_avg : loaded[i].exp_avg_sq) =
        value.device() == p.device() ? contiguous_copy(value) : to(value, p.device());
  }
  for (size_t i = 0; i < loaded.size(); ++i) {
    const bool complete = loaded[i].exp_avg.defined() && loaded[i].exp_avg_sq.defined() && loaded[i].step > 0;
    const bool absent = !loaded[i].exp_avg.defined() && !loaded[i].exp_avg_sq.defined() && loaded[i].step == 0;
    REMAT_CHECK(complete || absent, "AdamW.load_state_dict: the state of parameter {} is incomplete (needs exp_avg, "
                "exp_avg_sq and a positive step)", i);
  }
  state_ = std::move(loaded);
}

}  // namespace remat::optim
