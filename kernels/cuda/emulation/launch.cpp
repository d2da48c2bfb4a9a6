// Kernel launches on the emulated GPU: a launch checked against a GPU's
// limits (grid and block dimensions, dynamic shared memory up to the limit
// cudaFuncSetAttribute sets) and queued on its stream; the grid runs, when
// the stream reaches it, in threads.cpp (Note [Threads as fibers]).
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/cuda/emulation/emulator.h"

namespace remat_emulation {
namespace {

constexpr size_t kDefaultSharedLimit = size_t{48} << 10;  // without cudaFuncSetAttribute
constexpr size_t kMaxSharedLimit = size_t{227} << 10;     // an H100's or H200's opt-in limit

std::mutex g_shared_limits_mutex;
std::map<const void*, size_t> g_shared_limits;

}  // namespace

std::string dims(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

cudaError_t launch_erased(const LaunchSpec& spec, cudaStream_t stream, Invoke invoke,
                          std::shared_ptr<const void> closure) {
  const std::string error = check_launch(spec);
  if (!error.empty()) return set_error(cudaErrorInvalidConfiguration, error);
  const std::string wrong_device = check_stream_device(stream, (std::string("kernel '") + spec.name + "'").c_str());
  if (!wrong_device.empty()) return set_error(cudaErrorInvalidResourceHandle, wrong_device);
  return enqueue(stream, {std::string("kernel '") + spec.name + "'",
                          [spec, invoke, closure = std::move(closure)] { return run_grid(spec, invoke, closure.get()); }});
}

cudaError_t set_shared_limit(const void* kernel, int bytes) {
  if (bytes < 0 || static_cast<size_t>(bytes) > kMaxSharedLimit) {
    return set_error(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(bytes) +
                                                " bytes of dynamic shared memory, more than the " +
                                                std::to_string(kMaxSharedLimit) + " a block can have");
  }
  std::lock_guard lock(g_shared_limits_mutex);
  g_shared_limits[kernel] = static_cast<size_t>(bytes);
  return cudaSuccess;
}

std::string check_launch(const LaunchSpec& s) {
  const std::string where = std::string("kernel '") + s.name + "' with grid " + dims(s.grid) + ", block " +
                            dims(s.block) + ": ";
  const uint64_t threads = uint64_t{s.block.x} * s.block.y * s.block.z;
  if (s.block.x == 0 || s.block.y == 0 || s.block.z == 0 || s.grid.x == 0 || s.grid.y == 0 || s.grid.z == 0) {
    return where + "a dimension is 0";
  }
  if (threads > 1024) return where + std::to_string(threads) + " threads a block, more than 1024";
  if (s.block.z > 64) return where + "a block is at most 64 threads in z";
  if (s.grid.x > 2147483647u) return where + "grid x above 2^31 - 1";
  if (s.grid.y > 65535 || s.grid.z > 65535) return where + "grid y and z are at most 65535";
  size_t limit = kDefaultSharedLimit;
  {
    std::lock_guard lock(g_shared_limits_mutex);
    if (auto it = g_shared_limits.find(s.function); it != g_shared_limits.end()) limit = it->second;
  }
  if (s.shared_bytes > limit) {
    return where + std::to_string(s.shared_bytes) + " bytes of dynamic shared memory, above this kernel's limit of " +
           std::to_string(limit) + " (cudaFuncSetAttribute raises it to " + std::to_string(kMaxSharedLimit) + ")";
  }
  return "";
}

}  // namespace remat_emulation

cudaError_t remat_emulation_set_shared_limit(const void* kernel, int bytes) {
  return remat_emulation::set_shared_limit(kernel, bytes);
}
