// Module: registration, dotted names, memory categories, train/eval, errors.
// Also covers the ReLU module of nn/activation.h (header only).
#include "nn/module.h"

#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "nn/activation.h"
#include "ops/ops.h"
#include "tests/support/errors.h"

namespace remat::nn {
namespace {

int64_t live(MemoryCategory c) { return cpu_allocator().stats().live_of(c); }

// A module with two parameters and no forward.
class Pair : public Module {
 public:
  Pair() {
    a = register_parameter("a", zeros({2, 3}));
    b = register_parameter("b", zeros({4}));
  }
  std::string_view type_name() const override { return "Pair"; }
  Tensor a, b;
};

class Tree : public Module {
 public:
  Tree() {
    register_parameter("scale", ones({1}));
    left = register_module("left", std::make_shared<Pair>());
    right = register_module("right", std::make_shared<Pair>());
  }
  std::shared_ptr<Pair> left, right;
};

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, p] : m.named_parameters()) names.push_back(name);
  return names;
}

using remat::testing::error_of;

TEST(Module, RegisterParameterMakesALeafRequiringGrad) {
  Module m;
  const Tensor p = m.register_parameter("w", zeros({3}));
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(p.is_leaf());
  EXPECT_EQ(p.storage()->category(), MemoryCategory::Parameter);
  EXPECT_EQ(m.parameters().at(0).impl(), p.impl());  // the same handle, not a copy
}

TEST(Module, ParameterBytesMoveFromActivationToParameter) {
  const Tensor t = zeros({10, 10});  // made under the default category, Activation
  const int64_t param_before = live(MemoryCategory::Parameter);
  const int64_t act_before = live(MemoryCategory::Activation);
  Module m;
  m.register_parameter("w", t);
  EXPECT_EQ(live(MemoryCategory::Parameter) - param_before, 400);
  EXPECT_EQ(live(MemoryCategory::Activation) - act_before, -400);
}

TEST(Module, NonLeafIsDetachedIntoALeaf) {
  Tensor x = ones({2});
  x.requires_grad_();
  const Tensor y = mul(x, 2.0);
  Module m;
  const Tensor p = m.register_parameter("p", y);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{2, 2}));
}

TEST(Module, DottedNamesInRegistrationOrder) {
  const Tree tree;
  EXPECT_EQ(names_of(tree), (std::vector<std::string>{"scale", "left.a", "left.b", "right.a", "right.b"}));
  EXPECT_EQ(tree.num_parameters(), 1 + 2 * (6 + 4));
  EXPECT_EQ(tree.parameters().size(), 5u);
  EXPECT_EQ(tree.parameters()[1].impl(), tree.left->a.impl());
  ASSERT_EQ(tree.children().size(), 2u);
  EXPECT_EQ(tree.children()[1].first, "right");
}

TEST(Module, SharedChildIsListedOnce) {
  Module m;
  auto shared = std::make_shared<Pair>();
  m.register_module("first", shared);
  m.register_module("second", shared);
  EXPECT_EQ(names_of(m), (std::vector<std::string>{"first.a", "first.b"}));
  EXPECT_EQ(m.num_parameters(), 10);
}

TEST(Module, DuplicateNamesAreErrorsNamingTheName) {
  Pair pair;
  EXPECT_NE(error_of([&] { pair.register_parameter("a", zeros({1})); }).find("'a'"), std::string::npos);
  EXPECT_NE(error_of([&] { pair.register_module("b", std::make_shared<Module>()); }).find("'b'"), std::string::npos);
  Module m;
  m.register_module("child", std::make_shared<Module>());
  const std::string message = error_of([&] { m.register_parameter("child", zeros({1})); });
  EXPECT_NE(message.find("duplicate name 'child'"), std::string::npos) << message;
}

TEST(Module, BadNamesAndValuesAreErrors) {
  Module m;
  EXPECT_THROW(m.register_parameter("", zeros({1})), Error);
  EXPECT_NE(error_of([&] { m.register_parameter("a.b", zeros({1})); }).find("a.b"), std::string::npos);
  EXPECT_THROW(m.register_parameter("i", arange(3)), Error);  // int64
  EXPECT_THROW(m.register_parameter("u", Tensor()), Error);
  EXPECT_THROW(m.register_module("null", std::shared_ptr<Module>()), Error);
}

TEST(Module, DefaultForwardNamesTheModuleType) {
  Pair pair;
  const std::string message = error_of([&] { pair.forward(zeros({2})); });
  EXPECT_NE(message.find("Pair"), std::string::npos) << message;
  EXPECT_NE(message.find("forward"), std::string::npos) << message;
}

TEST(Module, TrainAndEvalReachEveryDescendant) {
  Tree tree;
  EXPECT_TRUE(tree.is_training());
  tree.eval();
  EXPECT_FALSE(tree.is_training());
  EXPECT_FALSE(tree.left->is_training());
  EXPECT_FALSE(tree.right->is_training());
  tree.left->train();  // a subtree alone
  EXPECT_TRUE(tree.left->is_training());
  EXPECT_FALSE(tree.is_training());
  tree.train(true);
  EXPECT_TRUE(tree.right->is_training());
}

TEST(ReLU, ForwardAndNoParameters) {
  ReLU relu_module;
  EXPECT_EQ(relu_module.type_name(), "ReLU");
  EXPECT_EQ(relu_module.num_parameters(), 0);
  const Tensor x = from_vector(std::vector<float>{-1, 0, 2}, {3});
  EXPECT_EQ(relu_module.forward(x).to_vector<float>(), (std::vector<float>{0, 0, 2}));
}

}  // namespace
}  // namespace remat::nn
