// The SwiGLU kernels of every device this build has: the CPU's
// (kernels/cpu/swiglu.h) and, with CUDA, the GPU's (kernels/cuda/swiglu.h),
// the same names and arguments, each device's stream last. An op includes
// this and calls a kernel by name; its tensors' device picks which (Note
// [Kernels by device] in engine/kernel_call.h).
#pragma once

#include "kernels/cpu/swiglu.h"
#if REMAT_HAVE_CUDA
#include "kernels/cuda/swiglu.h"
#endif
