// Note [Graph events]: what the engine tells the observer of a recording,
// in what order, and to whom.
#include "engine/recording.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/backward.h"
#include "ops/ops.h"
#include "tests/support/errors.h"

namespace remat {
namespace {

using testing::contains;
using testing::error_of;

// Writes down every event as "event op".
struct EventLog final : GraphObserver {
  std::vector<std::string> events;
  void note(const char* event, const Node& node) { events.push_back(std::string(event) + " " + std::string(node.name())); }
  void forward_started(Node& node, Device) override { note("forward_started", node); }
  void forward_finished(Node& node) override { note("forward_finished", node); }
  void recorded(Node& node) override { note("recorded", node); }
  void replay_started(Node& node, Device) override { note("replay_started", node); }
  void replayed(Node& node, bool in_place) override { note(in_place ? "replayed_in_place" : "replayed", node); }
  void backward_started(Node& node, const Tensor&) override { note("backward_started", node); }
  void backward_finished(Node& node, const Tensor&, const Tensors&) override { note("backward_finished", node); }
  void saved_value_releasing(Node& node) override { note("saved_value_releasing", node); }
  void saved_value_released(Node& node, int index) override {
    note(("saved_value_released " + std::to_string(index)).c_str(), node);
  }
  void pass_started(Node& root, Device) override { note("pass_started", root); }
  void pass_finished(Node& root) override { note("pass_finished", root); }
  void failed(Node& node) override { note("failed", node); }
};

TEST(Observer, ARecordingTellsItsObserverEveryEventInOrderEvenAfterTheScopeCloses) {
  const Tensor x = normal({4, 8}).requires_grad_();
  const Tensor w = normal({3, 8}).requires_grad_();
  const auto log = std::make_shared<EventLog>();
  Tensor loss;
  {
    GraphObserverScope observing(log);
    RecomputeScope drop_relu([](const Node& node) { return node.name() == "relu" ? Tag::Recompute : Tag::Keep; });
    loss = sum(linear(relu(x), w));
  }
  loss.backward();  // outside the scope: the nodes kept their observer
  const std::vector<std::string> expected{
      "forward_started relu", "forward_finished relu", "recorded relu",
      "forward_started linear", "forward_finished linear", "recorded linear",
      "forward_started sum", "forward_finished sum", "recorded sum",
      "pass_started sum",
      "backward_started sum", "backward_finished sum",
      // linear's saved input is relu's dropped output: replayed before
      // linear's backward, which lets go of it once dW is computed.
      "replay_started relu", "replayed relu",
      "backward_started linear", "saved_value_releasing linear", "saved_value_released 0 linear",
      "backward_finished linear",
      "backward_started relu", "backward_finished relu",
      "pass_finished sum"};
  EXPECT_EQ(log->events, expected);
}

TEST(Observer, ANodeRecordedUnderNoObserverTellsNoOne) {
  const Tensor x = normal({4, 8}).requires_grad_();
  const auto log = std::make_shared<EventLog>();
  const Tensor loss = sum(relu(x));
  {
    GraphObserverScope observing(log);  // current while backward runs, but the nodes were recorded before
    loss.backward();
  }
  EXPECT_TRUE(log->events.empty());
  EXPECT_TRUE(loss.grad_fn()->observers().empty());
}

TEST(Observer, ScopesNestAndEachAddsAListener) {
  const auto outer = std::make_shared<EventLog>(), inner = std::make_shared<EventLog>();
  const Tensor x = normal({4}).requires_grad_();
  GraphObserverScope a(outer);
  {
    GraphObserverScope b(inner);
    EXPECT_EQ(*recording_context().observers, (GraphObservers{outer, inner}));
    const Tensor y = relu(x);  // both hear it, the outer first
    EXPECT_EQ(y.grad_fn()->observers(), (GraphObservers{outer, inner}));
    EXPECT_EQ(inner->events, outer->events);
    EXPECT_FALSE(inner->events.empty());
  }
  EXPECT_EQ(*recording_context().observers, GraphObservers{outer});
  outer->events.clear();
  relu(x);
  EXPECT_FALSE(outer->events.empty());
  EXPECT_EQ(inner->events.size(), 3u);  // forward_started, forward_finished, recorded: nothing since
}

// An op whose forward or backward throws, as a bad kernel argument would.
class Throwing final : public Node {
 public:
  explicit Throwing(bool in_forward) : in_forward_(in_forward) {}
  std::string_view name() const override { return "throwing"; }
  Tensor forward(const Tensors& inputs) override {
    REMAT_CHECK(!in_forward_, "throwing: forward");
    return inputs[0].detach();
  }
  Tensors backward(const Tensor& grad) override { REMAT_FAIL("throwing: backward"); }

 private:
  bool in_forward_;
};

TEST(Observer, AnOpThatThrowsEndsItsEventWithFailedAndSoDoesItsPass) {
  const Tensor x = normal({4}).requires_grad_();
  const auto log = std::make_shared<EventLog>();
  GraphObserverScope observing(log);
  EXPECT_TRUE(contains(error_of([&] { apply_op(std::make_shared<Throwing>(true), {x}); }), "throwing: forward"));
  EXPECT_EQ(log->events, (std::vector<std::string>{"forward_started throwing", "failed throwing"}));
  log->events.clear();
  const Tensor y = apply_op(std::make_shared<Throwing>(false), {x});
  const Tensor loss = sum(y);
  EXPECT_TRUE(contains(error_of([&] { loss.backward(); }), "throwing: backward"));
  EXPECT_EQ(log->events, (std::vector<std::string>{"forward_started throwing", "forward_finished throwing",
                                                   "recorded throwing", "forward_started sum", "forward_finished sum",
                                                   "recorded sum", "pass_started sum", "backward_started sum",
                                                   "backward_finished sum", "backward_started throwing",
                                                   "failed throwing", "failed sum"}));
}

}  // namespace
}  // namespace remat
