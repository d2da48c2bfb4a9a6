// Inside the emulated GPU: what its parts (launch.cpp, threads.cpp,
// order.cpp, device.cpp, memory.cpp, streams.cpp, cublas.cpp, nccl.cpp)
// share. Not for device code or remat's callers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>

#include "kernels/cuda/emulation/control.h"

namespace remat_emulation {

// --- launch.cpp, threads.cpp, order.cpp: running a grid ----------------
// "" when `spec` is a launch a GPU takes, else why not (launch.cpp).
std::string check_launch(const LaunchSpec& spec);
// "(2,1,1)": a grid's or a block's dimensions, for a message (launch.cpp).
std::string dims(dim3 d);
// The thread order in force and the seed of its shuffles (order.cpp).
ThreadOrder thread_order_and_seed(uint64_t& seed);
// Runs every block of the grid, one after another; "" or what went wrong
// (a deadlock, a warp collective used wrongly), naming the kernel and block.
std::string run_grid(const LaunchSpec& spec, Invoke invoke, const void* closure);

// --- device.cpp (errors), memory.cpp (memory), streams.cpp (streams) ----
// The allocation holding [ptr, ptr + bytes), described for a message if it
// does not: "" when the whole range is inside one device allocation.
std::string check_device_range(const void* ptr, size_t bytes, const char* what);
bool is_device_pointer(const void* ptr);

// Queues `run` on `stream` (null: the device's legacy stream). `run`
// returns "" or an error, reported with `code` by the call that waits.
struct Task {
  std::string what;  // "kernel 'softmax_rows'", "cublasSgemm", ...
  std::function<std::string()> run;
  cudaError_t code = cudaErrorLaunchFailure;
};
cudaError_t enqueue(cudaStream_t stream, Task task);
// Work queued on other streams of `stream`'s device before the task now
// running was queued, and not ordered before it: "" or a description.
std::string unordered_earlier_work(cudaStream_t stream);
// "" when `stream` belongs to the current device, else the error a GPU
// reports for it (cudaErrorInvalidResourceHandle).
std::string check_stream_device(cudaStream_t stream, const char* what);
// The stream a handle stands for (null: the legacy stream of the current
// device), or null with an error for a destroyed one.
cudaStream_t resolve(cudaStream_t stream);

// Sets this host thread's last error with a message of its own, returned by
// cudaGetErrorString for that error until the next one.
cudaError_t set_error(cudaError_t error, const std::string& detail);
int current_device();

}  // namespace remat_emulation
