// The workloads' models, batches and optimizers as built for one run:
// W1 ... W5 of docs/workloads.md or a model of the user's (ModelSpec), with
// fixed seeds, each run building its own. Shared by run_workload and
// plan_workload (workload.cpp) and the batch sweep (batch_sweep.cpp), which
// weighs what a built workload holds besides its activations. No stepping,
// timing or planning here.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/tensor.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "workloads/workload.h"

namespace remat::workloads {

// A workload: its model, the loss of its fixed batch (one forward), and its
// optimizer (SGD for W1, W2 and the user's GPTs and MLPs, AdamW for W3 and
// every Llama, as docs/workloads.md has them) with its learning rate.
struct Workload {
  std::shared_ptr<nn::Module> model;
  std::function<Tensor()> loss;
  bool adamw = false;
  double lr = 0.01;  // SGD's; AdamW's is 6e-4 (W3) or 3e-4 (Llamas, as bench/torch_llama.py)
};

// W4's and W5's Llamas (docs/workloads.md) as ModelSpecs of kind llama, at
// their batch sizes; another name is an error.
ModelSpec llama_workload(const std::string& workload);

// The workload `options` names (its model and batch on options.device, the
// CPU's threads set to options.threads). Bad options are errors naming the
// value: an unknown workload or policy, a bad ModelSpec, threads, steps.
// `rehearsal`: it will be rehearsed on the meta device, never run (W3, W5
// and --device meta are then allowed on the CPU). A Llama is then built on
// the meta device itself (shapes and bytes, no values: nothing is drawn or
// read from an --hf folder but its config.json), so that one of any size
// can be planned; the other models are built on the CPU.
Workload build_workload(const WorkloadOptions& options, bool rehearsal = false);

// config.json's model_type in a Hugging Face folder ("llama", "gpt2"), or ""
// where the file or the key is not there (the loaders name what is missing).
std::string hf_model_type(const std::string& folder);

// SGD (no momentum: no state) or AdamW (two float32 tensors of state per
// parameter, made at its first step), at the workload's learning rate.
std::unique_ptr<optim::Optimizer> optimizer_for(const Workload& workload);

// Bytes of optimizer state the workload's optimizer will hold once it has
// stepped: AdamW's two moments per parameter, none for SGD.
int64_t optimizer_state_bytes(const Workload& workload);

}  // namespace remat::workloads
