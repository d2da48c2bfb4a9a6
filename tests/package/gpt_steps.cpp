// A program outside remat's tree, built against an installed remat
// (tests/package/run.sh: find_package and pkg-config): a small GPT trained
// for a few steps under the cost policy, its loss and report printed, and
// the GEMM it ran, which run.sh holds to `remat --version`'s.
#include <cstdio>

#include "engine/factory.h"
#include "kernels/cpu/gemm_library.h"
#include "nn/gpt.h"
#include "optim/sgd.h"

int main() {
  using namespace remat;
  Generator g(1);
  const Tensor ids = randint(32, {4, 16}, g), targets = randint(32, {4, 16}, g);
  nn::GPT model({.vocab_size = 32, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32, .seed = 1});
  model.gradient_checkpointing_enable({.policy = "cost"});
  optim::SGD sgd(model.parameters(), {.lr = 0.1});
  double first = 0, last = 0;
  for (int step = 0; step < 5; ++step) {
    const Tensor loss = model.forward(ids, targets).loss;
    loss.backward();
    sgd.step();
    sgd.zero_grad();
    (step == 0 ? first : last) = loss.item<double>();
  }
  std::printf("gemm: %s\n", kernels::cpu::gemm_summary().c_str());
  std::printf("installed remat: loss %.4f -> %.4f; %s\n", first, last, model.checkpointing_report()->str().c_str());
  return last < first ? 0 : 1;
}
