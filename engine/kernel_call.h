// run_kernel: the one place that picks a kernel's device. Ops, the backward
// executor and the optimizers write each kernel call once, in a lambda
// taking the device's stream; this runs it for the device of the tensor the
// kernel writes, or not at all on the meta device.
#pragma once

#include <string_view>

#include "engine/error.h"
#include "engine/meta.h"
#include "engine/tensor.h"
#include "kernels/cpu/host.h"
#if REMAT_HAVE_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace remat {

// Note [Kernels by device]
// Every kernel is declared once per device, with the same name and
// arguments and the device's stream last: kernels::cpu::Host on the CPU
// (kernels/cpu/host.h), kernels::cuda::Stream for a CUDA launcher (the
// device's compute stream). An op includes the kernels of every device
// (kernels/unary.h, ...) and writes
//
//   run_kernel(out, name(), [&](auto stream) { unary_forward<Gelu>(out.data<T>(), x.data<T>(), n, stream); });
//
// and the call's name finds the kernel of the stream's device through the
// stream's type (argument-dependent lookup), so no op body names a device.
// Where `out` is on the meta device, or a MetaScope is open (engine/meta.h),
// nothing runs: meta tensors have shapes and counted bytes, and a rehearsed
// step changes no real tensor. Whatever the kernel's caller reads back from
// it (a loss, a count, an index out of range) belongs inside the lambda.
template <class Fn>
void run_kernel(const Tensor& out, std::string_view op, Fn&& fn) {
  if (MetaScope::active()) return;
  const Device device = out.device();
  switch (device.type) {
    case DeviceType::CPU: fn(kernels::cpu::Host{}); return;
    case DeviceType::Meta: return;
    case DeviceType::CUDA:
#if REMAT_HAVE_CUDA
      fn(kernels::cuda::compute_stream(device.index));
      return;
#else
      break;
#endif
  }
  REMAT_FAIL("{}: no kernel for device {} in this build (tensor {}; configured without CUDA)", op, device.str(),
             out.str());
}

}  // namespace remat
