// generate_tokens; see generate.h.
#include "nn/generate.h"

#include <algorithm>
#include <utility>

#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/ops.h"

namespace remat::nn {

std::vector<int64_t> generate_tokens(Module& model, std::vector<int64_t> ids, int64_t max_new_tokens, int64_t window,
                                     double temperature, Generator& generator, std::string_view who) {
  REMAT_CHECK(!ids.empty(), "{}: the prompt is empty", who);
  REMAT_CHECK(temperature > 0, "{}: temperature must be positive, got {}", who, temperature);
  NoGradGuard no_grad;
  struct RestoreMode {  // even when a forward throws
    Module& module;
    bool training;
    ~RestoreMode() { module.train(training); }
  } restore{model, model.is_training()};
  model.eval();
  for (int64_t n = 0; n < max_new_tokens; ++n) {
    const size_t context = std::min<size_t>(ids.size(), static_cast<size_t>(window));
    const std::vector<int64_t> last_ids(ids.end() - static_cast<std::ptrdiff_t>(context), ids.end());
    const Tensor prompt = remat::to(from_vector(last_ids, {1, static_cast<int64_t>(context)}), model.device());
    const Tensor logits = model.forward(prompt);  // (1, T, V)
    const Tensor last = slice(logits, 1, static_cast<int64_t>(context) - 1, static_cast<int64_t>(context));
    const std::vector<double> probs = softmax(div(last, temperature), -1).to_vector<double>();
    const double u = uniform({1}, 0.0, 1.0, DType::Float64, generator).item<double>();
    double cumulative = 0;
    int64_t choice = static_cast<int64_t>(probs.size()) - 1;
    for (size_t v = 0; v < probs.size(); ++v) {
      cumulative += probs[v];
      if (u < cumulative) {
        choice = static_cast<int64_t>(v);
        break;
      }
    }
    ids.push_back(choice);
  }
  return ids;
}

}  // namespace remat::nn
