// Sequential; see sequential.h.
#include "nn/sequential.h"

#include <string>

#include "engine/error.h"

namespace remat::nn {

Tensor Sequential::forward(const Tensor& x) {
  const auto recording = record_forward();
  const ModuleScope scope = name_scope();
  Tensor out = x;
  for (const auto& [name, child] : children()) out = child->forward(out);
  return out;
}

Sequential& Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(size()), std::move(module));
  return *this;
}

const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
  REMAT_CHECK(i < size(), "Sequential: index {} out of range for {} modules", i, size());
  return children()[i].second;
}

}  // namespace remat::nn
