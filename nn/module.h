// Module: the base of every layer and model, a tree of named parameters and
// named child modules, like torch.nn.Module.
//
//   class Block : public Module {
//    public:
//     Block() { fc_ = register_module("fc", std::make_shared<Linear>(4, 4)); }
//     Tensor forward(const Tensor& x) override { return relu(fc_->forward(x)); }
//    private:
//     std::shared_ptr<Linear> fc_;
//   };
//   block.named_parameters();   // {"fc.weight", ...}, {"fc.bias", ...}
//
// A module owns no math beyond forward(); optimizers (optim/) take its
// parameters(). Names are dotted paths in registration order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/rng.h"
#include "engine/tensor.h"
#include "scheduler/checkpointer.h"

namespace remat::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The module's kind, for messages ("Linear", "Sequential", ...).
  virtual std::string_view type_name() const { return "Module"; }
  // The default throws remat::Error naming type_name(): a module that is only
  // a container of parameters has no forward.
  virtual Tensor forward(const Tensor& x);
  // The random generators its forward draws from in training (dropout's):
  // their offsets are part of a training checkpoint. Default: none.
  virtual std::vector<Generator*> random_generators() { return {}; }

  // Makes `value` a leaf that requires grad, moves its storage's bytes to
  // MemoryCategory::Parameter, and records it under `name`. Returns the
  // registered tensor (the same handle, unless value had autograd history,
  // in which case it is value.detach()). `name` must be new in this module,
  // non-empty and free of '.'.
  Tensor register_parameter(const std::string& name, Tensor value);
  // Records `module` as a child under `name` (same rules for names).
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // Every parameter of this module and its descendants, depth first in
  // registration order, named by dotted path ("layers.0.weight"). A tensor
  // reachable twice (a shared child) is listed once, under its first name.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // Moves every parameter, and its gradient if it has one, to `device`, in
  // place: each keeps its TensorImpl, so an optimizer or an averaging made
  // before holds them still (move before an optimizer's first step: the
  // state it makes then follows its parameters). Constants a module keeps
  // (GPT's positions, attention's mask) follow the input's device at the
  // next forward. Returns *this.
  Module& to(Device device);
  // The device of the parameters (the CPU for a module without any).
  Device device() const;
  // Total elements over parameters().
  int64_t num_parameters() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  // The dotted path from the outermost module this one was registered
  // under, as its parameters are named ("transformer.h.3.mlp"); "" for a
  // module registered under none. A module registered twice keeps its
  // first path, and "" once that first parent is gone (its nodes are then
  // named as the outermost forward's: "/op").
  std::string path() const;

  // Sets training mode on this module and every descendant.
  Module& train(bool training = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // Activation checkpointing of this module's forward, planned by
  // scheduler/ (policy none, blocks, sqrt, cost, chain, milp, auto or dtr,
  // and for the last five a byte budget). The first step of a graph profiles it
  // unless rehearse_checkpointing (the Trainer's default: Note [The first
  // step] in scheduler/checkpointer.h) or a saved profile planned it; plans
  // apply from the next step on. With a saved profile of the graph
  // (scheduler/profile_json.h), every step runs under its plan, the first
  // too, and the plan is kept (never re-planned from this run's times: the
  // same on every run): a budget holds from the first step, and one below
  // the graph's minimum is an error here. Works for any module whose forward() opens
  // record_forward() first, as GPT, MLP and Sequential do.
  void gradient_checkpointing_enable(scheduler::PlanOptions options = {.policy = "blocks"},
                                     const scheduler::GraphProfile* saved_profile = nullptr);
  void gradient_checkpointing_disable();
  bool is_gradient_checkpointing() const { return checkpointer_ != nullptr; }
  // The policy and budget it plans with; null when checkpointing is off.
  const scheduler::PlanOptions* checkpointing_options() const;
  // Without a saved profile: plans the first step before it runs, from a
  // rehearsal of it on the meta device (Checkpointer::rehearse), so that a
  // budget holds from the first step too and one below the graph's minimum
  // is an error here. `step` runs this module's forward and the backward
  // from its loss, as a training step does:
  //   model.rehearse_checkpointing([&] { model.forward(ids, targets).loss.backward(); });
  // Nothing happens when checkpointing is off.
  void rehearse_checkpointing(const std::function<void()>& step);
  // The latest step's figures: kept and dropped bytes, predicted and
  // measured peak, replays (nothing when checkpointing is off).
  std::optional<scheduler::StepReport> checkpointing_report() const;
  // The profile of the graph most steps ran (Checkpointer::profile: an
  // epoch's short last batch does not displace it), to save (profile_json.h)
  // and give back to gradient_checkpointing_enable in a later run; null
  // before a graph has been planned or when checkpointing is off.
  const scheduler::GraphProfile* checkpointing_profile() const;
  // The plan applied to the latest step, with each node's tag and reason
  // (what `remat explain` prints); null after a profiling step, or when
  // checkpointing is off.
  const scheduler::Plan* checkpointing_plan() const;

 protected:
  // Opened first by forward(): records it under this module's checkpointer,
  // unless checkpointing is off or an outer module's recording is open.
  [[nodiscard]] std::unique_ptr<scheduler::Checkpointer::Recording> record_forward();
  // Opened by forward() (after record_forward()): the nodes it records are
  // named by path() and their op (Note [Node names] in engine/recording.h),
  // in rules, profiles and `remat explain`. A module whose forward opens
  // none records its nodes under its caller's name.
  [[nodiscard]] ModuleScope name_scope() const { return ModuleScope(path()); }

 private:
  void check_new_name(const std::string& name) const;
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;

  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::unique_ptr<scheduler::Checkpointer> checkpointer_;
  // The module this one was first registered under (it clears this when
  // it goes) and the name it gave: path().
  Module* parent_ = nullptr;
  std::string name_;
};

}  // namespace remat::nn
