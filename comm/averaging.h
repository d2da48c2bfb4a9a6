// ModelAverager: the synchronisation step of LocalSGD and DiLoCo. Workers
// train their own copies of the model for a while; a sync makes the copies
// one again with a single bucketed allreduce of the parameters.
//
//   LocalSGD (Stich 2019; Lin et al. 2020):  params <- mean over ranks of params
//   DiLoCo (Douillard et al. 2023): the mean's distance from the parameters of
//   the previous sync is an outer gradient, and an outer optimizer (SGD with
//   Nesterov momentum) moves the previous sync's parameters along it:
//       delta    = previous - mean
//       velocity = momentum * velocity + delta
//       previous = previous - outer_lr * (delta + momentum * velocity)
//       params   = previous
//   With outer_lr = 1 and momentum = 0 this is LocalSGD's plain mean.
//
// DiLoCo's starting point is the parameters when the averager is made, the
// same on every rank: its constructor broadcasts them from rank 0.
// The counting of steps, and when to sync, belong to the caller (train/'s
// LocalSGD guard). Module has no buffers (no batch norm yet), so parameters
// are all there is to average.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/buckets.h"
#include "comm/communicator.h"
#include "engine/tensor.h"

namespace remat::comm {

struct DiLoCoOptions {
  double outer_lr = 0.7;   // > 0; the DiLoCo paper's value
  double momentum = 0.9;   // in [0, 1)
};

struct AveragingOptions {
  int64_t bucket_bytes = kDefaultBucketBytes;
  std::optional<DiLoCoOptions> diloco;  // empty: plain averaging (LocalSGD)
};

class ModelAverager {
 public:
  ModelAverager(Communicator& comm, std::vector<Tensor> params, AveragingOptions options = {});

  // One sync, on every rank at once: afterwards all ranks hold bit-identical
  // parameters. Counts one allreduce per bucket in comm's statistics.
  void sync();
  int64_t syncs() const { return syncs_; }
  const AveragingOptions& options() const { return options_; }

  // DiLoCo's state ("diloco.previous.<i>", "diloco.velocity.<i>") for
  // training checkpoints; empty for plain averaging.
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  // Restores what state_dict() gave: all names and shapes must match, else
  // an error naming the first that does not, and nothing changes.
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  void outer_step();

  Communicator& comm_;
  std::vector<Tensor> params_;
  AveragingOptions options_;
  std::vector<Tensor> previous_;  // DiLoCo: the parameters of the last sync
  std::vector<Tensor> velocity_;  // DiLoCo: the outer momentum
  int64_t syncs_ = 0;
};

}  // namespace remat::comm
