// Sequential: child names, chained forward, push_back and indexing.
#include "nn/sequential.h"

#include <gtest/gtest.h>

#include "nn/activation.h"
#include "nn/linear.h"
#include "ops/ops.h"

namespace remat::nn {
namespace {

TEST(Sequential, ChildrenAreNamedByPosition) {
  Sequential seq(std::make_shared<Linear>(4, 8), std::make_shared<ReLU>(), std::make_shared<Linear>(8, 2, false));
  EXPECT_EQ(seq.size(), 3u);
  std::vector<std::string> names;
  for (const auto& [name, p] : seq.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight"}));
  EXPECT_EQ(seq[1]->type_name(), "ReLU");
  EXPECT_EQ(seq.num_parameters(), 4 * 8 + 8 + 8 * 2);
  EXPECT_THROW(seq[3], Error);
}

TEST(Sequential, ForwardChainsTheChildren) {
  auto first = std::make_shared<Linear>(3, 5);
  auto second = std::make_shared<Linear>(5, 2);
  Sequential seq;
  seq.push_back(first).push_back(std::make_shared<ReLU>()).push_back(second);
  const Tensor x = randn({4, 3});
  const Tensor expected = second->forward(relu(first->forward(x)));
  const Tensor y = seq.forward(x);
  EXPECT_EQ(y.shape(), (Shape{4, 2}));
  EXPECT_EQ(y.to_vector<float>(), expected.to_vector<float>());
}

TEST(Sequential, EmptyIsIdentity) {
  Sequential seq;
  const Tensor x = randn({2, 2});
  EXPECT_EQ(seq.forward(x).to_vector<float>(), x.to_vector<float>());
}

TEST(Sequential, EvalReachesChildren) {
  Sequential seq(std::make_shared<Linear>(2, 2), std::make_shared<ReLU>());
  seq.eval();
  EXPECT_FALSE(seq[0]->is_training());
  EXPECT_FALSE(seq[1]->is_training());
}

}  // namespace
}  // namespace remat::nn
