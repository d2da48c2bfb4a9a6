// DType: the element types a Tensor can hold, their sizes and names, and
// dispatch_floating(), which runs a templated lambda for float or double.
// bfloat16 and float16 are declared for the GPU kernels; no CPU kernel takes
// them, and dispatch reports that clearly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/error.h"

namespace remat {

enum class DType { Float32, Float64, Int64, BFloat16, Float16 };

constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
  }
  return "?";
}

constexpr bool is_floating(DType dtype) { return dtype != DType::Int64; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }

// Calls f.template operator()<T>() with T = float or double for `dtype`;
// any other dtype is an error naming the op.
template <class F>
decltype(auto) dispatch_floating(DType dtype, std::string_view op, F&& f) {
  switch (dtype) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default: REMAT_FAIL("{}: no CPU kernel for dtype {} (float32 and float64 only)", op, dtype_name(dtype));
  }
}

}  // namespace remat
