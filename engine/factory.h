// Tensor factories: new leaf tensors filled with constants, ranges, given
// values or random numbers. None of them records autograd history.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/rng.h"
#include "engine/tensor.h"

namespace remat {

Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor zeros(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor zeros_like(const Tensor& t);
Tensor scalar_tensor(double value, DType dtype = DType::Float32);
// 0, 1, ..., n-1
Tensor arange(int64_t n, DType dtype = DType::Int64);

// A tensor of `shape` holding `values` (row-major); sizes must agree.
Tensor from_vector(const std::vector<float>& values, const Shape& shape);
Tensor from_vector(const std::vector<double>& values, const Shape& shape);
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape);

// Uniform in [low, high) and normal(mean, std), from `generator`. Inside a
// MetaScope (engine/meta.h) these and randint give meta tensors of the shape
// and draw nothing, so a model can be built on the meta device to be
// planned (nn::Llama; workloads/workload.cpp).
Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::Float32,
               Generator& generator = default_generator());
Tensor normal(const Shape& shape, double mean = 0.0, double std = 1.0, DType dtype = DType::Float32,
              Generator& generator = default_generator());
inline Tensor randn(const Shape& shape, DType dtype = DType::Float32) { return normal(shape, 0.0, 1.0, dtype); }
inline Tensor rand(const Shape& shape, DType dtype = DType::Float32) { return uniform(shape, 0.0, 1.0, dtype); }
// Integers uniform in [0, high).
Tensor randint(int64_t high, const Shape& shape, Generator& generator = default_generator());

// Same values converted to another float dtype (a new leaf).
Tensor to_dtype(const Tensor& t, DType dtype);
// t on `device`: t itself when it is there already, else a dense copy (CPU
// and CUDA both ways, through the CUDA runtime's copies); to the meta device
// a meta tensor of t's shape. A meta tensor has no values to copy anywhere
// else: an error. No gradient flows through the copy (detach() semantics).
Tensor to(const Tensor& t, Device device);
// Copies `bytes` bytes between memory of the CPU and of a GPU, either way
// or within one device (GPU copies are queued on the GPU's compute stream).
// Meta memory holds nothing to copy: an error.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Writes src's values into dst, in place: the same shape and dtype, dst
// contiguous, any devices (src made dense first). Counts as a write to dst
// (its version is bumped).
void copy_into(const Tensor& dst, const Tensor& src);

// "cpu", "cuda" (cuda:0), "cuda:N" or "meta"; anything else is an error
// naming the devices there are.
Device device_from_name(const std::string& name);
// Waits until the work queued on `device` has run (nothing to wait for on
// the CPU and the meta device): what a wall-clock time on a GPU needs.
void synchronize(Device device);
// "NVIDIA H200 (sm_90, 139.8 GiB); driver 13.0, runtime 13.0, cuBLAS 13.0.0"
// for a GPU, "" otherwise.
std::string device_description(Device device);

}  // namespace remat
