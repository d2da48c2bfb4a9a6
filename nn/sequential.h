// Sequential: child modules applied in order, each to the previous one's
// output, like torch.nn.Sequential. Children are named "0", "1", ... so
// their parameters read "0.weight", "2.bias", ...
//
//   auto net = std::make_shared<Sequential>(std::make_shared<Linear>(4, 8),
//                                           std::make_shared<ReLU>(),
//                                           std::make_shared<Linear>(8, 2));
#pragma once

#include <cstddef>
#include <memory>

#include "nn/module.h"

namespace remat::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  template <class... Ms>
  explicit Sequential(std::shared_ptr<Ms>... modules) {
    (push_back(std::move(modules)), ...);
  }

  std::string_view type_name() const override { return "Sequential"; }
  // The children in order; an empty Sequential returns x.
  Tensor forward(const Tensor& x) override;

  // Appends `module` under the name of its position.
  Sequential& push_back(std::shared_ptr<Module> module);
  size_t size() const { return children().size(); }
  // The i-th child; i must be below size().
  const std::shared_ptr<Module>& operator[](size_t i) const;
};

}  // namespace remat::nn
