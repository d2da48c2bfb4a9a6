// Fiber; see fiber.h. On x86-64 a switch saves the callee-saved registers
// and the floating-point control words on the old stack, stores the stack
// pointer and loads the other (System V ABI: everything else is the
// caller's to save); elsewhere ucontext's swapcontext does the same, slower.
#include "kernels/cuda/emulation/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REMAT_EMULATION_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define REMAT_EMULATION_ASAN 1
#endif
#if REMAT_EMULATION_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace remat_emulation {
namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "remat CUDA emulation: %s\n", what);
  std::abort();
}

}  // namespace
}  // namespace remat_emulation

#if defined(__x86_64__)
extern "C" void remat_emulation_switch(void** save_sp, void* load_sp);
extern "C" void remat_emulation_fiber_entry();
extern "C" void remat_emulation_fiber_start(remat_emulation::Fiber* self);

asm(R"(
    .text
    .globl remat_emulation_switch
    .type remat_emulation_switch,@function
remat_emulation_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $16, %rsp
    fnstcw (%rsp)
    stmxcsr 8(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    fldcw (%rsp)
    ldmxcsr 8(%rsp)
    addq $16, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size remat_emulation_switch,.-remat_emulation_switch

    .globl remat_emulation_fiber_entry
    .type remat_emulation_fiber_entry,@function
remat_emulation_fiber_entry:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size remat_emulation_fiber_entry,.-remat_emulation_fiber_entry
)");

extern "C" void remat_emulation_fiber_start(remat_emulation::Fiber* self) { self->run_entry(); }
#else
namespace {
thread_local remat_emulation::Fiber* t_starting = nullptr;
void ucontext_start() { t_starting->run_entry(); }
}  // namespace
#endif

namespace remat_emulation {

Fiber::Fiber(Entry entry, size_t stack_bytes) : entry_(entry) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  memory_bytes_ = stack_bytes_ + page;
  void* memory = mmap(nullptr, memory_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) die("no memory for a thread's stack");
  memory_ = static_cast<char*>(memory);
  if (mprotect(memory_, page, PROT_NONE) != 0) die("cannot set a guard page below a thread's stack");
  stack_ = memory_ + page;
#if !defined(__x86_64__)
  context_ = new ucontext_t;
  host_context_ = new ucontext_t;
#endif
  reset();
}

Fiber::~Fiber() {
#if !defined(__x86_64__)
  delete static_cast<ucontext_t*>(context_);
  delete static_cast<ucontext_t*>(host_context_);
#endif
  munmap(memory_, memory_bytes_);
}

void Fiber::reset() {
#if REMAT_EMULATION_ASAN
  // A fiber given up mid-kernel leaves its frames' redzones poisoned.
  __asan_unpoison_memory_region(stack_, stack_bytes_);
#endif
  fiber_fake_stack_ = nullptr;
#if defined(__x86_64__)
  // The frame remat_emulation_switch pops: control words, r15..rbp, then
  // the return address; the entry stub finds the fiber in r12 and the
  // function in r13, with the stack 16-byte aligned for its call.
  auto* slots = reinterpret_cast<uint64_t*>(stack_ + stack_bytes_ - 88);
  slots[0] = 0x037F;  // x87 control word: round to nearest, all exceptions masked
  slots[1] = 0x1F80;  // MXCSR: the same for SSE
  slots[2] = 0;       // r15
  slots[3] = 0;       // r14
  slots[4] = reinterpret_cast<uint64_t>(&remat_emulation_fiber_start);  // r13
  slots[5] = reinterpret_cast<uint64_t>(this);                          // r12
  slots[6] = 0;                                                         // rbx
  slots[7] = 0;  // rbp: the end of the frame chain for unwinders
  slots[8] = reinterpret_cast<uint64_t>(&remat_emulation_fiber_entry);
  fiber_sp_ = slots;
#else
  auto* context = static_cast<ucontext_t*>(context_);
  getcontext(context);
  context->uc_stack.ss_sp = stack_;
  context->uc_stack.ss_size = stack_bytes_;
  context->uc_link = nullptr;
  makecontext(context, ucontext_start, 0);
  fresh_ = true;
#endif
}

void Fiber::run_entry() {
#if REMAT_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &host_stack_bottom_, &host_stack_size_);
#endif
  entry_(this);
  die("a fiber's entry returned");
}

void Fiber::resume() {
#if REMAT_EMULATION_ASAN
  __sanitizer_start_switch_fiber(&host_fake_stack_, stack_, stack_bytes_);
#endif
#if defined(__x86_64__)
  remat_emulation_switch(&host_sp_, fiber_sp_);
#else
  if (fresh_) t_starting = this;
  fresh_ = false;
  swapcontext(static_cast<ucontext_t*>(host_context_), static_cast<ucontext_t*>(context_));
#endif
#if REMAT_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(host_fake_stack_, nullptr, nullptr);
#endif
}

void Fiber::suspend() {
#if REMAT_EMULATION_ASAN
  __sanitizer_start_switch_fiber(&fiber_fake_stack_, host_stack_bottom_, host_stack_size_);
#endif
#if defined(__x86_64__)
  remat_emulation_switch(&fiber_sp_, host_sp_);
#else
  swapcontext(static_cast<ucontext_t*>(context_), static_cast<ucontext_t*>(host_context_));
#endif
#if REMAT_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(fiber_fake_stack_, &host_stack_bottom_, &host_stack_size_);
#endif
}

}  // namespace remat_emulation
