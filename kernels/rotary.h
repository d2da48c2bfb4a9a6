// The rotary embedding kernels of every device this build has: the CPU's
// (kernels/cpu/rotary.h) and, with CUDA, the GPU's (kernels/cuda/rotary.h),
// the same names and arguments, each device's stream last. An op includes
// this and calls a kernel by name; its tensors' device picks which (Note
// [Kernels by device] in engine/kernel_call.h).
#pragma once

#include "kernels/cpu/rotary.h"
#if REMAT_HAVE_CUDA
#include "kernels/cuda/rotary.h"
#endif
