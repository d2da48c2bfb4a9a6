// ModelAverager; see averaging.h.
#include "comm/averaging.h"

#include <cstring>
#include <unordered_map>

#include "engine/allocator.h"
#include "engine/factory.h"

namespace remat::comm {
namespace {

Tensor copy_of(const Tensor& t) {
  CategoryGuard category(MemoryCategory::OptimizerState);
  return contiguous_copy(t);
}

}  // namespace

ModelAverager::ModelAverager(Communicator& comm, std::vector<Tensor> params, AveragingOptions options)
    : comm_(comm), params_(std::move(params)), options_(options) {
  for (size_t i = 0; i < params_.size(); ++i) {
    REMAT_CHECK(params_[i].defined() && params_[i].is_contiguous() && !params_[i].device().is_meta(),
                "ModelAverager: parameter {} must be a contiguous tensor holding values", i);
    // The outer step's loops run on the CPU (averaging on a GPU is NCCL's).
    REMAT_CHECK(!options_.diloco || params_[i].device().is_cpu(), "DiLoCo: parameter {} is on {}; its outer step "
                "runs on the CPU only", i, params_[i].device().str());
  }
  if (options_.diloco) {
    REMAT_CHECK(options_.diloco->outer_lr > 0, "DiLoCo: outer_lr must be > 0, got {}", options_.diloco->outer_lr);
    REMAT_CHECK(options_.diloco->momentum >= 0 && options_.diloco->momentum < 1,
                "DiLoCo: momentum must be in [0, 1), got {}", options_.diloco->momentum);
    // The outer step starts from the parameters of the last sync, which must
    // be the same on every rank: make them so.
    if (comm_.world_size() > 1) broadcast_buckets(comm_, params_, 0, options_.bucket_bytes);
    for (const Tensor& param : params_) {
      previous_.push_back(copy_of(param));
      CategoryGuard category(MemoryCategory::OptimizerState);
      velocity_.push_back(zeros(param.shape(), param.dtype()));
    }
  }
}

void ModelAverager::sync() {
  allreduce_buckets(comm_, params_, ReduceOp::Average, options_.bucket_bytes);
  if (options_.diloco) outer_step();
  ++syncs_;
}

void ModelAverager::outer_step() {
  const double lr = options_.diloco->outer_lr;
  const double mu = options_.diloco->momentum;
  for (size_t i = 0; i < params_.size(); ++i) {
    dispatch_floating(params_[i].dtype(), "DiLoCo outer step", [&]<class T>() {
      T* param = params_[i].data<T>();
      T* previous = previous_[i].data<T>();
      T* velocity = velocity_[i].data<T>();
      for (int64_t k = 0, n = params_[i].numel(); k < n; ++k) {
        const T delta = previous[k] - param[k];
        velocity[k] = static_cast<T>(mu * velocity[k] + delta);
        previous[k] = static_cast<T>(previous[k] - lr * (delta + mu * velocity[k]));
        param[k] = previous[k];
      }
    });
  }
}

std::vector<std::pair<std::string, Tensor>> ModelAverager::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> state;
  for (size_t i = 0; i < previous_.size(); ++i) {
    state.emplace_back("diloco.previous." + std::to_string(i), previous_[i]);
    state.emplace_back("diloco.velocity." + std::to_string(i), velocity_[i]);
  }
  return state;
}

void ModelAverager::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::unordered_map<std::string, Tensor> expected;
  for (auto& [name, tensor] : state_dict()) expected.emplace(name, tensor);
  REMAT_CHECK(state.size() == expected.size(), "ModelAverager: the state holds {} tensors, this averager {}",
              state.size(), expected.size());
  for (const auto& [name, tensor] : state) {
    const auto it = expected.find(name);
    REMAT_CHECK(it != expected.end(), "ModelAverager: unknown state '{}'", name);
    REMAT_CHECK(tensor.shape() == it->second.shape() && tensor.dtype() == it->second.dtype(),
                "ModelAverager: state '{}' is {}, expected {}", name, tensor.str(), it->second.str());
  }
  for (const auto& [name, tensor] : state) {
    const Tensor dense_copy = dense(tensor);
    std::memcpy(expected.at(name).raw_data(), dense_copy.raw_data(), tensor.nbytes());
  }
}

}  // namespace remat::comm
