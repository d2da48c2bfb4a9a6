// Tensor factories; see factory.h. Random fills take one Philox call per four
// numbers, with counters reserved from the generator up front.
#include "engine/factory.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "engine/kernel_call.h"
#include "kernels/unary.h"

#if REMAT_HAVE_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace remat {
namespace {

template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& shape) {
  REMAT_CHECK(static_cast<int64_t>(values.size()) == numel(shape), "from_vector: {} values do not fill shape {} ({} "
              "elements)", values.size(), str(shape), numel(shape));
  Tensor out(shape, dtype_of<T>());
  if (!values.empty()) std::memcpy(out.data<T>(), values.data(), values.size() * sizeof(T));
  return out;
}

// Fills n numbers, each made from one 32-bit word (float) or two (double).
template <class T, class Make>
void fill_random(T* out, int64_t n, Generator& generator, Make make) {
  constexpr int64_t kWordsPer = sizeof(T) == 4 ? 1 : 2;
  const int64_t per_call = 4 / kWordsPer;
  const uint64_t first = generator.reserve(static_cast<uint64_t>((n + per_call - 1) / per_call));
  for (int64_t i = 0; i < n; i += per_call) {
    const auto words = philox4x32(generator.seed(), first + static_cast<uint64_t>(i / per_call));
    for (int64_t j = 0; j < per_call && i + j < n; ++j) {
      if constexpr (kWordsPer == 1) {
        out[i + j] = make(static_cast<double>(uniform_float(words[j])), words, j);
      } else {
        out[i + j] = make(uniform_double(words[2 * j], words[2 * j + 1]), words, j);
      }
    }
  }
}

}  // namespace

Tensor empty(const Shape& shape, DType dtype, Device device) { return Tensor(shape, dtype, device); }

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor out(shape, dtype, device);
  REMAT_CHECK(dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Int64, "full: no kernel for "
              "dtype {} (float32, float64 and int64)", dtype_name(dtype));
  run_kernel(out, "full", [&](auto stream) {
    switch (dtype) {
      case DType::Float32: fill(out.data<float>(), static_cast<float>(value), out.numel(), stream); break;
      case DType::Float64: fill(out.data<double>(), value, out.numel(), stream); break;
      default: fill(out.data<int64_t>(), static_cast<int64_t>(value), out.numel(), stream); break;
    }
  });
  return out;
}

Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

Tensor arange(int64_t n, DType dtype) {
  Tensor out({n}, dtype);
  dispatch_floating(dtype == DType::Int64 ? DType::Float64 : dtype, "arange", [&]<class T>() {
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == DType::Int64) out.data<int64_t>()[i] = i;
      else out.data<T>()[i] = static_cast<T>(i);
    }
  });
  return out;
}

Tensor from_vector(const std::vector<float>& values, const Shape& shape) { return from_values(values, shape); }
Tensor from_vector(const std::vector<double>& values, const Shape& shape) { return from_values(values, shape); }
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape) { return from_values(values, shape); }

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Generator& generator) {
  Tensor out(shape, dtype);
  if (out.device().is_meta()) return out;  // in a rehearsal (MetaScope): shapes only, nothing drawn
  dispatch_floating(dtype, "uniform", [&]<class T>() {
    fill_random(out.data<T>(), out.numel(), generator,
                [&](double u, const auto&, int64_t) { return static_cast<T>(low + (high - low) * u); });
  });
  return out;
}

Tensor normal(const Shape& shape, double mean, double std, DType dtype, Generator& generator) {
  Tensor out(shape, dtype);
  if (out.device().is_meta()) return out;  // in a rehearsal: shapes only, nothing drawn
  // Box-Muller on pairs of uniforms drawn from one counter: element i uses
  // the counter of its pair, so the values do not depend on threading.
  dispatch_floating(dtype, "normal", [&]<class T>() {
    T* data = out.data<T>();
    const int64_t n = out.numel();
    const uint64_t first = generator.reserve(static_cast<uint64_t>((n + 1) / 2));
    for (int64_t i = 0; i < n; i += 2) {
      const auto w = philox4x32(generator.seed(), first + static_cast<uint64_t>(i / 2));
      const double u1 = 1.0 - uniform_double(w[0], w[1]);  // (0, 1]
      const double u2 = uniform_double(w[2], w[3]);
      const double radius = std::sqrt(-2.0 * std::log(u1));
      data[i] = static_cast<T>(mean + std * radius * std::cos(2.0 * std::numbers::pi * u2));
      if (i + 1 < n) data[i + 1] = static_cast<T>(mean + std * radius * std::sin(2.0 * std::numbers::pi * u2));
    }
  });
  return out;
}

Tensor randint(int64_t high, const Shape& shape, Generator& generator) {
  REMAT_CHECK(high > 0, "randint: high must be positive, got {}", high);
  Tensor out(shape, DType::Int64);
  if (out.device().is_meta()) return out;  // in a rehearsal: shapes only, nothing drawn
  int64_t* data = out.data<int64_t>();
  const int64_t n = out.numel();
  const uint64_t first = generator.reserve(static_cast<uint64_t>((n + 1) / 2));
  for (int64_t i = 0; i < n; ++i) {
    const auto w = philox4x32(generator.seed(), first + static_cast<uint64_t>(i / 2));
    const uint64_t word = (static_cast<uint64_t>(w[2 * (i % 2)]) << 32) | w[2 * (i % 2) + 1];
    data[i] = static_cast<int64_t>(word % static_cast<uint64_t>(high));
  }
  return out;
}

Tensor to_dtype(const Tensor& t, DType dtype) {
  Tensor out(t.shape(), dtype);  // converted on the host, then moved to t's device
  dispatch_floating(dtype, "to_dtype", [&]<class T>() {
    const std::vector<T> values = t.to_vector<T>();
    if (!values.empty()) std::memcpy(out.data<T>(), values.data(), values.size() * sizeof(T));
  });
  return to(out, t.device());
}

Tensor to(const Tensor& t, Device device) {
  REMAT_CHECK(t.defined(), "to({}): the tensor is undefined", device.str());
  if (t.device() == device) return t;
  Tensor out(t.shape(), t.dtype(), device);
  if (out.device().is_meta()) return out;  // asked for, or in a rehearsal (MetaScope): nothing to copy
  REMAT_CHECK(!t.device().is_meta(), "to({}): tensor {} is on the meta device, which holds no values to copy",
              device.str(), t.str());
  const Tensor src = t.is_contiguous() ? t : contiguous_copy(t);
  copy_bytes(out.raw_data(), device, src.raw_data(), src.device(), t.nbytes());
  return out;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  REMAT_CHECK(!dst_device.is_meta() && !src_device.is_meta(), "copy: {} to {}: the meta device holds no values",
              src_device.str(), dst_device.str());
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if REMAT_HAVE_CUDA
  if (src_device.is_cpu()) {
    kernels::cuda::copy_host_to_device(dst, src, bytes, kernels::cuda::compute_stream(dst_device.index));
  } else if (dst_device.is_cpu()) {
    kernels::cuda::copy_device_to_host(dst, src, bytes, kernels::cuda::compute_stream(src_device.index));
  } else {
    REMAT_CHECK(src_device == dst_device, "copy: copies between two GPUs ({} to {}) are not supported",
                src_device.str(), dst_device.str());
    kernels::cuda::copy_device_to_device(dst, src, bytes, kernels::cuda::compute_stream(dst_device.index));
  }
#else
  REMAT_FAIL("copy: {} to {}: this build has no CUDA", src_device.str(), dst_device.str());
#endif
}

void copy_into(const Tensor& dst, const Tensor& src) {
  REMAT_CHECK(dst.defined() && src.defined(), "copy_into: a tensor is undefined");
  REMAT_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "copy_into: {} into {}: shapes or dtypes "
              "differ", src.str(), dst.str());
  REMAT_CHECK(dst.is_contiguous(), "copy_into: the destination {} is not contiguous", dst.str());
  const Tensor dense = src.is_contiguous() ? src : contiguous_copy(src);
  copy_bytes(dst.raw_data(), dst.device(), dense.raw_data(), dense.device(), dst.nbytes());
  dst.storage()->bump_version();
}

Device device_from_name(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  if (name == "meta") return Device::meta();
  if (name == "cuda") return Device::cuda(0);
  if (name.starts_with("cuda:") && name.size() > 5 && name.size() <= 8 &&
      name.find_first_not_of("0123456789", 5) == std::string::npos) {
    return Device::cuda(std::stoi(name.substr(5)));
  }
  REMAT_FAIL("device '{}': expected cpu, cuda, cuda:N or meta", name);
}

void synchronize(Device device) {
#if REMAT_HAVE_CUDA
  if (device.is_cuda()) kernels::cuda::synchronize(kernels::cuda::compute_stream(device.index));
#endif
}

std::string device_description(Device device) {
#if REMAT_HAVE_CUDA
  if (device.is_cuda()) return kernels::cuda::device_name(device.index) + "; " + kernels::cuda::versions();
#endif
  return "";
}

}  // namespace remat
