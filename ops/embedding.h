// embedding: rows of a table picked by int64 ids; its backward adds each
// gradient row into the row of the table it came from (a scatter-add).
#pragma once

#include "engine/tensor.h"

namespace remat {

// weight (V, C), ids int64 of any shape (...) with values in [0, V) -> (..., C).
Tensor embedding(const Tensor& weight, const Tensor& ids);

}  // namespace remat
