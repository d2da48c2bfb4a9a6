// Private to kernels/cpu: gemm.cpp's way to make sure BLIS has started with
// the sub-configuration gemm_library.cpp chose (Note [GEMM library]) before
// it calls BLIS.
#pragma once

namespace remat::kernels::cpu {

void ensure_blis_started();

}  // namespace remat::kernels::cpu
