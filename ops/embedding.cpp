// embedding; see embedding.h. Backward reads only the ids (int64, one per
// row of the output), never the table or the output.
#include "ops/embedding.h"

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/embedding.h"

namespace remat {
namespace {

// The multi-index of element `flat` of a dense tensor of `shape`.
Shape unravel(int64_t flat, const Shape& shape) {
  Shape index(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

class EmbeddingNode final : public Node {
 public:
  std::string_view name() const override { return "embedding"; }

  Tensor forward(const Tensors& in) override {
    const Tensor weight = dense(in[0]);
    const Tensor ids = dense(in[1]);
    REMAT_CHECK(weight.dim() == 2, "embedding: weight must be (V, C), got {}", weight.str());
    REMAT_CHECK(ids.dtype() == DType::Int64, "embedding: ids must be int64, got {}", ids.str());
    const int64_t vocab = weight.shape()[0], channels = weight.shape()[1];
    Shape out_shape = ids.shape();
    out_shape.push_back(channels);
    Tensor out(out_shape, weight.dtype(), weight.device());
    dispatch_floating(weight.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        const int64_t bad = embedding_forward<T>(out.data<T>(), weight.data<T>(), ids.data<int64_t>(), ids.numel(),
                                                 channels, vocab, stream);
        REMAT_CHECK(bad < 0, "embedding: id {} at position {} of ids {} is outside [0, V) with V = {} (weight {})",
                    ids.to_vector<int64_t>()[static_cast<size_t>(bad)], str(unravel(bad, ids.shape())),
                    str(ids.shape()), vocab,
                    str(weight.shape()));
      });
    });
    return out;
  }

  void save(const Tensors& in, const Tensor&) override { save_value(dense(in[1])); }

  // out[i] = weight[ids[i]]:  dweight[v] = sum_{i : ids[i] == v} dout[i]
  // The kernels check the ids again: the saved ids share forward's bytes,
  // which may have been written since without a version bump (bytes a
  // tensor borrows, such as a NumPy array), and a bad id would write
  // outside dweight.
  Tensors backward(const Tensor& dout_any) override {
    const Tensor dout = dense(dout_any);
    const Tensor ids = saved(0);
    const Shape& weight_shape = record().input_shapes[0];
    Tensor dweight(weight_shape, dout.dtype(), dout.device());
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_kernel(dweight, name(), [&](auto stream) {
        const int64_t bad = embedding_backward<T>(dweight.data<T>(), dout.data<T>(), ids.data<int64_t>(), ids.numel(),
                                                  weight_shape[1], weight_shape[0], stream);
        REMAT_CHECK(bad < 0, "embedding backward: id {} at position {} of ids {} is outside [0, V) with V = {} "
                    "(weight {}); the ids were changed after forward read them",
                    ids.to_vector<int64_t>()[static_cast<size_t>(bad)], str(unravel(bad, ids.shape())),
                    str(ids.shape()), weight_shape[0], str(weight_shape));
      });
    });
    return {dweight, Tensor()};
  }
  // A gather does no arithmetic: no FLOPs (the default traits).
};

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  return apply_op(std::make_shared<EmbeddingNode>(), {weight, ids});
}

}  // namespace remat
