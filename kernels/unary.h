// The unary kernels of every device this build has: the CPU's
// (kernels/cpu/unary.h) and, with CUDA, the GPU's (kernels/cuda/unary.h), the
// same names and arguments, each device's stream last, and the element
// maths they run (kernels/unary_math.h). An op includes this and calls a
// kernel by name, unary_forward<Gelu>(out, x, n, stream); its tensors'
// device picks which (Note [Kernels by device] in engine/kernel_call.h).
#pragma once

#include "kernels/cpu/unary.h"
#include "kernels/unary_math.h"
#if REMAT_HAVE_CUDA
#include "kernels/cuda/unary.h"
#endif
