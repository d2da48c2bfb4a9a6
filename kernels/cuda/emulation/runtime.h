// Inside the emulated GPU's runtime: what device.cpp (devices, errors),
// memory.cpp (the arena, allocations, copies) and streams.cpp (streams,
// events, running queued work) share beyond emulator.h; see Note [Device
// memory and streams] in device.cpp.
#pragma once

#include <mutex>

namespace remat_emulation {

// Held by every call that touches a stream, the arena or a task; recursive,
// as a call may make another (cudaFree waits for the device). In streams.cpp.
extern std::recursive_mutex g_runtime_mutex;

// The devices reported: REMAT_EMULATED_GPUS, 1 unless set (device.cpp).
int device_count_setting();

// While alive, device memory is accessible (nested: the outermost opens and
// closes). In memory.cpp; streams.cpp holds one while work runs.
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

}  // namespace remat_emulation
