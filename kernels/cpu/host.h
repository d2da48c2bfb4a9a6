// Host: the CPU's stream argument. Every kernel takes its device's stream
// last (a CUDA launcher a cudaStream_t wrapper, a CPU kernel this empty tag,
// defaulted), so that one call written in an op, `unary_forward<Gelu>(out,
// x, n, stream)`, reaches the kernel of the stream's device by
// argument-dependent lookup. The CPU runs kernels in call order: there is nothing to carry.
// Who passes it: engine/kernel_call.h (Note [Kernels by device]).
#pragma once

namespace remat::kernels::cpu {

struct Host {};

}  // namespace remat::kernels::cpu
