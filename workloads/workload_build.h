// The workloads' models, batches and optimizers as built for one run:
// W1, W2, W3 of docs/workloads.md or a model of the user's (ModelSpec), with
// fixed seeds, each run building its own. Shared by run_workload and
// plan_workload (workload.cpp) and the batch sweep (batch_sweep.cpp), which
// weighs what a built workload holds besides its activations. No stepping,
// timing or planning here.
#pragma once

#include <functional>
#include <memory>

#include "engine/tensor.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "workloads/workload.h"

namespace remat::workloads {

// A workload: its model, the loss of its fixed batch (one forward), and its
// optimizer (SGD for W1, W2 and the user's models, AdamW for W3, as
// docs/workloads.md has them).
struct Workload {
  std::shared_ptr<nn::Module> model;
  std::function<Tensor()> loss;
  bool adamw = false;
};

// The workload `options` names (its model and batch on options.device, the
// CPU's threads set to options.threads). Bad options are errors naming the
// value: an unknown workload or policy, a bad ModelSpec, threads, steps.
// `rehearsal`: it will be rehearsed on the meta device, never run (W3 and
// --device meta are then allowed on the CPU).
Workload build_workload(const WorkloadOptions& options, bool rehearsal = false);

// SGD (lr 0.01, no momentum: no state) or AdamW (lr 6e-4, two float32
// tensors of state per parameter, made at its first step).
std::unique_ptr<optim::Optimizer> optimizer_for(const Workload& workload);

// Bytes of optimizer state the workload's optimizer will hold once it has
// stepped: AdamW's two moments per parameter, none for SGD.
int64_t optimizer_state_bytes(const Workload& workload);

}  // namespace remat::workloads
