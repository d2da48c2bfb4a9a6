// dropout; see dropout.h. The node records (p, seed, offset) and saves no
// tensor: forward, backward and any replay for recompute draw the same mask
// from Philox at (seed, offset), so the mask costs no bytes between forward
// and backward, and a replayed output is bit-identical to the first one.
#include "ops/dropout.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/dropout.h"

namespace remat {
namespace {

class DropoutNode final : public Node {
 public:
  DropoutNode(double p, uint64_t seed, uint64_t offset) : p_(p), seed_(seed), offset_(offset) {}
  std::string_view name() const override { return "dropout"; }

  Tensor forward(const Tensors& in) override {
    Tensor out = new_output(in, in[0].shape(), in[0].dtype());  // before dense(): that is a second reference
    const Tensor x = dense(in[0]);
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        dropout_forward<T>(out.data<T>(), x.data<T>(), x.numel(), mask(), scale<T>(), stream);
      });
    });
    return out;
  }

  // Nothing to save: the mask is a function of (seed_, offset_).

  // out = x * keep / (1 - p):  dx = dout * keep / (1 - p)
  Tensors backward(const Tensor& dout_any) override {
    const Tensor dout = dense(dout_any);
    Tensor dx(dout.shape(), dout.dtype(), dout.device());
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_kernel(dx, name(), [&](auto stream) {
        dropout_backward<T>(dx.data<T>(), dout.data<T>(), dout.numel(), mask(), scale<T>(), stream);
      });
    });
    return {dx};
  }

  OpTraits traits() const override { return {.flops = numel(record().output_shape), .overwritable_input = 0}; }

 private:
  // uniform_float(word) = (word >> 8) / 2^24 >= p  <=>  (word >> 8) >= ceil(p * 2^24),
  // exactly: p * 2^24 is exact in double and (word >> 8) is an integer.
  kernels::DropoutMask mask() const {
    return {seed_, offset_, static_cast<uint32_t>(std::ceil(p_ * 16777216.0))};
  }
  template <class T> T scale() const { return static_cast<T>(1.0 / (1.0 - p_)); }

  double p_;
  uint64_t seed_;
  uint64_t offset_;  // first Philox counter; element i reads counter offset_ + i / 4
};

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator& generator) {
  REMAT_CHECK(p >= 0.0 && p < 1.0, "dropout: p = {} is outside [0, 1)", p);
  if (!training || p == 0.0) return x;
  const uint64_t counters = (static_cast<uint64_t>(x.numel()) + 3) / 4;
  const uint64_t offset = generator.reserve(counters);
  return apply_op(std::make_shared<DropoutNode>(p, generator.seed(), offset), {x});
}

}  // namespace remat
