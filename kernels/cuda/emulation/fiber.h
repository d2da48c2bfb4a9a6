// Fibers for the emulated GPU's threads: a stack and a saved stack pointer,
// switched by a few instructions (fiber.cpp), so that a block of 1024
// threads can pass a barrier many times without a system call. Switches are
// announced to AddressSanitizer, which then checks each fiber's stack
// exactly (its stack bounds change at every switch).
#pragma once

#include <cstddef>

namespace remat_emulation {

class Fiber {
 public:
  using Entry = void (*)(Fiber* self);
  // A fiber that will run entry(this) on its own stack of `stack_bytes`.
  Fiber(Entry entry, size_t stack_bytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // From the host thread's own stack: runs this fiber until it calls
  // suspend(); returns then.
  void resume();
  // From inside this fiber: back to the resume() that ran it.
  void suspend();
  // Starts entry() afresh at the next resume(), forgetting where the fiber
  // stood (a block given up after an error).
  void reset();
  // The fiber's first frame: entry(this). Called by the start-up code only.
  void run_entry();

 private:

  Entry entry_;
  char* memory_ = nullptr;  // guard page, then the stack
  size_t memory_bytes_ = 0;
  char* stack_ = nullptr;
  size_t stack_bytes_ = 0;
  void* fiber_sp_ = nullptr;  // where the fiber stands while suspended
  void* host_sp_ = nullptr;   // where resume() stands while the fiber runs
  // AddressSanitizer's bookkeeping of both sides (unused without it).
  void* fiber_fake_stack_ = nullptr;
  void* host_fake_stack_ = nullptr;
  const void* host_stack_bottom_ = nullptr;
  size_t host_stack_size_ = 0;
#if !defined(__x86_64__)
  void* context_ = nullptr;  // ucontext_t of each side
  void* host_context_ = nullptr;
  bool fresh_ = true;
#endif
};

}  // namespace remat_emulation
