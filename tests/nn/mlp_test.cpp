// MLP: layer layout and names, parameter count and bytes, forward, gradients.
#include "nn/mlp.h"

#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "nn/linear.h"
#include "ops/ops.h"
#include "tests/support/gradcheck.h"

namespace remat::nn {
namespace {

TEST(MLP, NamesAndCount) {
  MLP mlp({784, 256, 256, 10});
  std::vector<std::string> names;
  for (const auto& [name, p] : mlp.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias",
                                             "layers.4.weight", "layers.4.bias"}));
  EXPECT_EQ(mlp.num_parameters(), 269322);
  EXPECT_EQ(mlp.layers()->size(), 5u);  // Linear ReLU Linear ReLU Linear: no ReLU after the last
  EXPECT_EQ((*mlp.layers())[3]->type_name(), "ReLU");
  EXPECT_EQ((*mlp.layers())[4]->type_name(), "Linear");
  EXPECT_EQ(mlp.named_parameters()[4].second.shape(), (Shape{10, 256}));
}

TEST(MLP, ParameterBytesAreExact) {
  const int64_t before = cpu_allocator().stats().live_of(MemoryCategory::Parameter);
  {
    MLP mlp({784, 256, 256, 10});
    EXPECT_EQ(cpu_allocator().stats().live_of(MemoryCategory::Parameter) - before, 269322 * 4);
  }
  EXPECT_EQ(cpu_allocator().stats().live_of(MemoryCategory::Parameter), before);
}

TEST(MLP, ForwardShapeAndEval) {
  MLP mlp({6, 5, 3});
  EXPECT_EQ(mlp.forward(randn({7, 6})).shape(), (Shape{7, 3}));
  mlp.eval();
  EXPECT_FALSE((*mlp.layers())[0]->is_training());
  EXPECT_FALSE(mlp.layers()->is_training());
}

TEST(MLP, MatchesHandWiredLayers) {
  Generator g1(9), g2(9);
  MLP mlp({3, 4, 2}, g1);
  Linear a(3, 4, true, g2), b(4, 2, true, g2);  // same draws in the same order
  const Tensor x = randn({5, 3});
  EXPECT_EQ(mlp.forward(x).to_vector<float>(), b.forward(relu(a.forward(x))).to_vector<float>());
}

TEST(MLP, InputGradientsFloat64) {
  Generator generator(2);
  MLP mlp({3, 4, 2}, generator, DType::Float64);
  EXPECT_GRADIENTS_MATCH([&](const Tensors& in) { return mlp.forward(in[0]); },
                         (Tensors{remat::testing::random_leaf({5, 3}, -1, 1, 4)}));
}

TEST(MLP, BadSizesAreErrors) {
  EXPECT_THROW(MLP({10}), Error);
  EXPECT_THROW(MLP({10, 0, 2}), Error);
}

}  // namespace
}  // namespace remat::nn
