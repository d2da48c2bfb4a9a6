// The course's second way: an Accelerate loop with gradient accumulation 2
// and the model's gradient checkpointing.
//
//   accelerator = Accelerator(gradient_accumulation_steps=2)
//   model.gradient_checkpointing_enable()
//   model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
//   for batch in loader:
//       with accelerator.accumulate(model):
//           loss = model(**batch).loss
//           accelerator.backward(loss)
//           optimizer.step(); optimizer.zero_grad()
//
// A small GPT on random tokens; `steps` (argv[1], default 20) micro-batches.
#include <cstdio>
#include <string>

#include "engine/factory.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "train/accelerator.h"

int main(int argc, char** argv) {
  using namespace remat;
  const int64_t steps = argc > 1 ? std::stoll(argv[1]) : 20;
  Generator g(0);
  const data::Dataset tokens{randint(64, {256, 32}, g), randint(64, {256, 32}, g)};

  nn::GPT model({.vocab_size = 64, .block_size = 32, .n_layer = 2, .n_head = 2, .n_embd = 64, .dropout = 0.1});
  model.gradient_checkpointing_enable();  // per block, as Hugging Face's
  train::Accelerator accelerator({.gradient_accumulation_steps = 2});
  accelerator.prepare(model);
  optim::AdamW adamw(model.parameters(), {.lr = 3e-3});
  train::PreparedOptimizer optimizer = accelerator.prepare(adamw);
  const data::DataLoader loader = accelerator.prepare(data::DataLoader(tokens, {.batch_size = 16, .shuffle = true}));

  int64_t step = 0;
  for (int64_t epoch = 0; step < steps; ++epoch) {
    for (const data::Batch& batch : loader.epoch(epoch)) {
      if (step++ == steps) break;
      auto window = accelerator.accumulate(model);
      const Tensor loss = model.forward(batch.inputs, batch.targets).loss;
      accelerator.backward(loss);
      optimizer.step();
      optimizer.zero_grad();
      accelerator.print("micro-batch {}: loss {:.4f}; {}", step, loss.item<double>(),
                        model.checkpointing_report()->str());
    }
  }
}
