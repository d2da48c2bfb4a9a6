// GpuSpan; see device_clock.h.
#include "engine/device_clock.h"

#include <utility>

#include "engine/error.h"

#if REMAT_HAVE_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace remat {

GpuSpan::GpuSpan(Device device) {
#if REMAT_HAVE_CUDA
  if (!device.is_cuda()) return;
  device_ = device.index;
  start_ = kernels::cuda::record_event(kernels::cuda::compute_stream(device_)).handle;
#else
  (void)device;
#endif
}

GpuSpan::~GpuSpan() {
#if REMAT_HAVE_CUDA
  kernels::cuda::destroy_event({start_, device_});
  kernels::cuda::destroy_event({end_, device_});
#endif
}

GpuSpan::GpuSpan(GpuSpan&& other) noexcept
    : start_(std::exchange(other.start_, nullptr)), end_(std::exchange(other.end_, nullptr)), device_(other.device_) {}

GpuSpan& GpuSpan::operator=(GpuSpan&& other) noexcept {
  if (this != &other) {
    GpuSpan old(std::move(*this));
    start_ = std::exchange(other.start_, nullptr);
    end_ = std::exchange(other.end_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void GpuSpan::stop() {
#if REMAT_HAVE_CUDA
  if (timed() && !end_) end_ = kernels::cuda::record_event(kernels::cuda::compute_stream(device_)).handle;
#endif
}

double GpuSpan::ms() const {
  REMAT_CHECK(timed() && end_ != nullptr, "GpuSpan: read before it was stopped (or not on a GPU)");
#if REMAT_HAVE_CUDA
  return kernels::cuda::elapsed_ms({start_, device_}, {end_, device_});
#else
  return 0;
#endif
}

}  // namespace remat
