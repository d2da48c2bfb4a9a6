// The course's LocalSGD loop: each rank steps on its own shard and the
// models are averaged every local_sgd_steps optimizer steps.
//
//   with LocalSGD(accelerator=accelerator, model=model, local_sgd_steps=8, enabled=True) as local_sgd:
//       for batch in loader:
//           with accelerator.accumulate(model):
//               loss = model(**batch).loss
//               accelerator.backward(loss)
//               optimizer.step(); optimizer.zero_grad()
//               local_sgd.step()
//
// On Fashion-MNIST; run it under mpirun for several ranks
// (mpirun -np 4 build/example_local_sgd). `batches` (argv[1], default all)
// per epoch, 1 epoch.
#include <string>

#include "nn/mlp.h"
#include "ops/ops.h"
#include "optim/adamw.h"
#include "train/accelerator.h"
#include "data/fashion_mnist.h"
#include "train/local_sgd.h"

int main(int argc, char** argv) {
  using namespace remat;
  const int64_t batches = argc > 1 ? std::stoll(argv[1]) : -1;
  const data::Dataset train = data::load_fashion_mnist("train");

  nn::MLP model({784, 256, 256, 10});
  train::Accelerator accelerator;
  accelerator.prepare(model);
  optim::AdamW adamw(model.parameters(), {.lr = 2e-3});
  train::PreparedOptimizer optimizer = accelerator.prepare(adamw);
  const data::DataLoader loader = accelerator.prepare(data::DataLoader(train, {.batch_size = 64, .shuffle = true}));

  int64_t seen = 0;
  double loss_sum = 0;
  {
    train::LocalSGD local_sgd(accelerator, model, {.local_sgd_steps = 8, .enabled = true});
    for (const data::Batch& batch : loader.epoch(0)) {
      if (seen == batches) break;
      auto window = accelerator.accumulate(model);
      const Tensor loss = cross_entropy(model.forward(batch.inputs), batch.targets);
      accelerator.backward(loss);
      optimizer.step();
      optimizer.zero_grad();
      local_sgd.step();
      loss_sum += loss.item<double>();
      ++seen;
    }
  }  // the last average
  accelerator.print("{} rank(s), {} batches each: mean loss {:.4f}, {} allreduce calls", accelerator.num_processes(),
                    seen, loss_sum / static_cast<double>(seen), accelerator.communicator().stats().allreduce_calls);
}
