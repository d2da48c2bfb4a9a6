// Device: where a tensor's bytes live (cpu, cuda:N, or meta). Kernels are
// chosen per device (engine/kernel_call.h); an op that has no kernel for a
// device says so by name. A meta tensor has a shape and counted bytes and
// no data: ops on it record and account as on any device and compute
// nothing (PyTorch's meta device), which is how a step is planned before
// it runs (engine/storage.h, MetaScope).
#pragma once

#include <string>

namespace remat {

enum class DeviceType { CPU, CUDA, Meta };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  static constexpr Device meta() { return {DeviceType::Meta, 0}; }

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_meta() const { return type == DeviceType::Meta; }
  bool operator==(const Device&) const = default;
  std::string str() const {
    if (is_meta()) return "meta";
    return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
  }
};

}  // namespace remat
