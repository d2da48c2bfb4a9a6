// Module: registration, dotted names, memory categories, train/eval, errors.
// Also covers the ReLU module of nn/activation.h (header only).
#include "nn/module.h"

#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "nn/activation.h"
#include "nn/gpt.h"
#include "ops/ops.h"
#include "tests/support/errors.h"

namespace remat::nn {
namespace {

int64_t live_bytes(MemoryCategory c) { return cpu_allocator().stats().live_of(c); }

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
  const int64_t param_before = live_bytes(MemoryCategory::Parameter);
  const int64_t act_before = live_bytes(MemoryCategory::Activation);
  Module m;
  m.register_parameter("w", t);
  EXPECT_EQ(live_bytes(MemoryCategory::Parameter) - param_before, 400);
  EXPECT_EQ(live_bytes(MemoryCategory::Activation) - act_before, -400);
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

// Module::to moves parameters in place, and a model's steps follow it: a GPT
// moved to the meta device (the one device besides the CPU that every
// machine has) trains a checkpointed step there that allocates nothing on
// the CPU, measured on the meta allocator, at the CPU twin's peak to the byte.
TEST(Module, ToMovesParametersInPlaceAndTheStepsFollow) {
  const GPTConfig config{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1,
                         .seed = 4};
  GPT on_cpu(config), moved(config);
  std::vector<const TensorImpl*> impls;
  for (const Tensor& p : moved.parameters()) impls.push_back(p.impl());
  const int64_t cpu_parameters = live_bytes(MemoryCategory::Parameter);
  EXPECT_EQ(&moved.to(Device::meta()), &moved);
  EXPECT_EQ(moved.device(), Device::meta());
  EXPECT_EQ(live_bytes(MemoryCategory::Parameter), cpu_parameters - moved.num_parameters() * 4);
  const std::vector<Tensor> params = moved.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].impl(), impls[i]);  // the same tensors, for optimizers made before
    EXPECT_EQ(params[i].device(), Device::meta());
  }
  on_cpu.gradient_checkpointing_enable({.policy = "blocks"});
  moved.gradient_checkpointing_enable({.policy = "blocks"});
  Generator g(1);
  CategoryGuard data(MemoryCategory::Data);
  const Tensor ids = randint(11, {3, 8}, g), targets = randint(11, {3, 8}, g);
  const Tensor meta_ids = to(ids, Device::meta()), meta_targets = to(targets, Device::meta());
  CategoryGuard activations(MemoryCategory::Activation);
  for (int step = 0; step < 2; ++step) {
    on_cpu.forward(ids, targets).loss.backward();
    const int64_t cpu_peak = on_cpu.checkpointing_report()->measured_peak_bytes;
    const int64_t transient = cpu_allocator().stats().live_transient;
    moved.forward(meta_ids, meta_targets).loss.backward();
    EXPECT_EQ(cpu_allocator().stats().live_transient, transient) << "step " << step;
    EXPECT_EQ(moved.checkpointing_report()->measured_peak_bytes, cpu_peak) << "step " << step;
  }
  for (const Tensor& p : params) EXPECT_EQ(p.grad().device(), Device::meta());
  moved.to(Device::meta());  // already there: nothing moves
  EXPECT_EQ(moved.parameters()[0].impl(), impls[0]);
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
