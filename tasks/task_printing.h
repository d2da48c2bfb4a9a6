// A task run as `remat train` runs it: the header (the arguments it trains
// with, the GEMM, the device), a progress bar, and a line or table row per
// epoch or validation, or JSON lines with `json`; the sample at the end for
// kjv-gpt. The tasks themselves print nothing (fashion_mnist_task.h,
// kjv_gpt_task.h); tools/train_command.cpp parses the flags and calls these.
#pragma once

#include "tasks/fashion_mnist_task.h"
#include "tasks/kjv_gpt_task.h"

namespace remat::tasks {

void run_fashion_mnist(const FashionMnistOptions& options, bool json);
void run_kjv_gpt(const KjvGptOptions& options, bool json);

}  // namespace remat::tasks
