// The steps of a linear layer's forward and backward (its GEMMs, its bias
// and bias gradient), as linear and affine run them: ops/matmul.cpp defines
// them and its LinearNode calls them; an op that ends in a linear layer
// (ops/activation_linear.cpp) calls the same ones, so it computes with the
// same kernels in the same order, bit for bit. Internal to ops/: not an op,
// records nothing, and models never include it.
#pragma once

#include <string_view>

#include "engine/tensor.h"

namespace remat::linear_steps {

// Where a linear layer's weight keeps its input features: linear's (out, in)
// as torch.nn.Linear, or affine's (in, out) as GPT-2's Conv1D. Both reach
// GEMM as they are stored, with the transpose flag that fits; no copy.
enum class WeightLayout { OutIn, InOut };

// x (..., f) as a dense (rows, f) matrix (a copy only if x is not contiguous).
Tensor as_rows(const Tensor& x);

// Checks a linear layer's inputs (x, weight, bias if given: in.size() == 3)
// and returns the output's shape, x's with its last axis out_features.
Shape output_shape(std::string_view op, const Tensors& in, WeightLayout layout);

// Whether this weight's GEMMs carry the bias and its gradient in cuBLASLt's
// epilogues (Note [Fused epilogues] in kernels/cuda/gemm.h): a CUDA weight
// with the flag on; never on the CPU.
bool fused_bias(const Tensor& weight);

// out (rows, out) = rows (rows, in) W + bias, W as `layout` stores it; bias
// (out) dense or undefined. `fused`: fused_bias(weight).
void forward_into(const Tensor& out, const Tensor& rows, const Tensor& weight, const Tensor& bias, WeightLayout layout,
                  bool fused);

// dweight = rows^T dout (affine's (in, out)) or dout^T rows (linear's
// (out, in)), rows (rows, in) and dout (rows, out) dense. With dbias
// defined (only where `fused`), the sums over rows of dout ride in the same
// GEMM's epilogue.
void weight_grad_into(const Tensor& dweight, const Tensor& dbias, const Tensor& rows, const Tensor& dout,
                      WeightLayout layout, bool fused);

// dx (rows * in elements, dense) = dout (rows, out) W^T, W as `layout` stores it.
void input_grad_into(const Tensor& dx, const Tensor& dout, const Tensor& weight, WeightLayout layout);

// dbias (out) = the sums over rows of dout (rows, out), without a GEMM.
void bias_grad_into(const Tensor& dbias, const Tensor& dout);

}  // namespace remat::linear_steps
