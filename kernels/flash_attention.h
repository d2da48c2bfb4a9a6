// The fused attention kernels of every device this build has: the CPU's
// (kernels/cpu/flash_attention.h) and, with CUDA, the GPU's
// (kernels/cuda/flash_attention.h), the same names and arguments, each
// device's stream last (Note [Kernels by device] in engine/kernel_call.h).
#pragma once

#include "kernels/cpu/flash_attention.h"
#if REMAT_HAVE_CUDA
#include "kernels/cuda/flash_attention.h"
#endif
