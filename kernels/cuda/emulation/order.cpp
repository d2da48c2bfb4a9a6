// The order a block's threads start and resume in on the emulated GPU
// (control.h's ThreadOrder): REMAT_EMULATION_ORDER, read once, or what
// set_thread_order sets; threads.cpp draws its shuffles from the seed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "kernels/cuda/emulation/control.h"
#include "kernels/cuda/emulation/emulator.h"

namespace remat_emulation {
namespace {

std::mutex g_settings_mutex;
ThreadOrder g_order = ThreadOrder::InOrder;
uint64_t g_seed = 1;
bool g_settings_read = false;

void read_settings_once() {
  if (g_settings_read) return;
  g_settings_read = true;
  if (const char* text = std::getenv("REMAT_EMULATION_ORDER")) {
    const std::string value = text;
    if (value.rfind("shuffled", 0) == 0) {
      g_order = ThreadOrder::Shuffled;
      if (value.size() > 9 && value[8] == ':') g_seed = std::strtoull(value.c_str() + 9, nullptr, 10);
    } else if (value != "in-order" && !value.empty()) {
      std::fprintf(stderr, "remat CUDA emulation: REMAT_EMULATION_ORDER=%s is not in-order, shuffled or shuffled:SEED; "
                   "threads run in order\n", text);
    }
  }
}

}  // namespace

void set_thread_order(ThreadOrder order, uint64_t seed) {
  std::lock_guard lock(g_settings_mutex);
  g_settings_read = true;
  g_order = order;
  g_seed = seed;
}

ThreadOrder thread_order() {
  std::lock_guard lock(g_settings_mutex);
  read_settings_once();
  return g_order;
}

ThreadOrder thread_order_and_seed(uint64_t& seed) {
  std::lock_guard lock(g_settings_mutex);
  read_settings_once();
  seed = g_seed;
  return g_order;
}

}  // namespace remat_emulation
