// A grid's threads on the host; see Note [Threads as fibers].
//
// Note [Threads as fibers]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// The blocks of a grid run one after another on the host thread that
// reached the launch in its stream. A block's threads are started one by one
// in order (or, under REMAT_EMULATION_ORDER=shuffled, in a random order
// drawn for each block) on fibers: a thread runs until it returns, or until
// it waits at __syncthreads() or in a warp collective (__shfl_*_sync,
// __ballot_sync, __syncwarp, ...), where its fiber is put aside and the next
// thread starts or a released one resumes. A fiber whose thread returned
// starts the next thread itself, so a kernel without barriers runs its
// threads as plain calls, one fiber a block.
//
// A barrier opens when every thread of the block that has not returned
// waits at it (as on the GPU since Volta). A warp collective completes when
// every lane of its mask has called it with the same mask; a lane of the
// mask that has returned, a mask that leaves out the caller or names lanes
// the block does not have, and lanes that disagree are errors. When no
// thread can run and some have not returned, the block is in deadlock: the
// launch's error names the kernel, the block and where its threads wait.
// Such an error gives up the grid; the stream goes on with its next work.
//
// This file runs a grid's blocks, their threads, barriers and warp
// collectives; launch.cpp checks and queues a launch.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/emulation/control.h"
#include "kernels/cuda/emulation/emulator.h"
#include "kernels/cuda/emulation/fiber.h"

namespace remat_emulation {

thread_local constinit const ThreadPlace* t_place = nullptr;

namespace {

// The bookkeeping done once per emulated thread (starting it, its return)
// is left out of AddressSanitizer's instrumentation: it is the emulator's
// own, tested code, and instrumented it took a third of a W1 step under the
// sanitizers. The kernels the threads run stay instrumented. (Such a
// function inlines nothing instrumented, hence its raw pointers.)
#if defined(__clang__) || defined(__GNUC__)
#define REMAT_EMULATOR_HOT __attribute__((no_sanitize("address")))
#else
#define REMAT_EMULATOR_HOT
#endif

constexpr int kWarp = 32;
constexpr size_t kStackBytes = size_t{256} << 10;

enum class State { NotStarted, Running, AtBarrier, AtWarp, Exited };

struct Thread {
  ThreadPlace place{};
  State state = State::NotStarted;
  Fiber* fiber = nullptr;
};

struct Warp {
  bool open = false;
  WarpOp op = WarpOp::Sync;
  unsigned mask = 0, arrived = 0;
  unsigned exited = 0;  // lanes that have returned
  int width = kWarp;
  uint64_t values[kWarp] = {};
  int args[kWarp] = {};
  uint64_t results[kWarp] = {};
};

struct Block {
  const LaunchSpec* spec = nullptr;
  Invoke invoke = nullptr;
  const void* closure = nullptr;
  int count = 0;
  std::vector<Thread> threads;
  uint3 block_index{};
  bool shuffled = false;   // ThreadOrder::Shuffled
  std::vector<int> order;  // the start order when shuffled (else by index)
  size_t next_start = 0;
  int exited = 0;
  std::vector<int> barrier;  // threads waiting at __syncthreads
  std::vector<int> ready;    // released, not yet resumed: ready[ready_head..]
  size_t ready_head = 0;
  std::vector<Warp> warps;
  std::unique_ptr<unsigned char[]> shared;
  std::string error;
};

// One per host thread: its fibers and the block it runs.
struct Runner {
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::vector<Fiber*> idle;
  Block* block = nullptr;
  int current = -1;      // the thread running now
  bool went_idle = false;  // the fiber that suspended last has no thread
  std::mt19937_64 rng{1};
};
thread_local Runner t_runner;

std::atomic<uint64_t> g_grids{0}, g_blocks{0};

std::string hex(unsigned v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::Sync: return "__syncwarp";
    case WarpOp::Shfl: return "__shfl_sync";
    case WarpOp::ShflUp: return "__shfl_up_sync";
    case WarpOp::ShflDown: return "__shfl_down_sync";
    case WarpOp::ShflXor: return "__shfl_xor_sync";
    case WarpOp::Ballot: return "__ballot_sync";
    case WarpOp::Any: return "__any_sync";
    case WarpOp::All: return "__all_sync";
  }
  return "?";
}

Block& this_block(const char* what) {
  Block* b = t_runner.block;
  if (b == nullptr || t_runner.current < 0) {
    std::fprintf(stderr, "remat CUDA emulation: %s called outside a kernel\n", what);
    std::abort();
  }
  return *b;
}

// From inside a thread: gives the block up with `message`; never returns.
[[noreturn]] void fail(Block& b, const std::string& message) {
  if (b.error.empty()) b.error = message;
  Fiber* fiber = b.threads[static_cast<size_t>(t_runner.current)].fiber;
  t_runner.went_idle = false;
  fiber->suspend();
  std::fprintf(stderr, "remat CUDA emulation: a failed block was resumed\n");
  std::abort();
}

// From inside thread t: waits until the scheduler resumes it.
REMAT_EMULATOR_HOT void wait_here(Block& b, int t) {
  t_runner.went_idle = false;
  b.threads.data()[t].fiber->suspend();
}

REMAT_EMULATOR_HOT void release_barrier(Block& b, int keep_running) {
  for (int w : b.barrier) {
    b.threads.data()[w].state = State::Running;
    if (w != keep_running) b.ready.push_back(w);
  }
  b.barrier.clear();
}

REMAT_EMULATOR_HOT void thread_exit(Block& b, int t) {
  Thread* threads = b.threads.data();
  threads[t].state = State::Exited;
  ++b.exited;
  if (b.barrier.size() != 0 && static_cast<int>(b.barrier.size()) + b.exited == b.count) release_barrier(b, -1);
  Warp& w = b.warps.data()[t / kWarp];
  const unsigned bit = 1u << (t % kWarp);
  w.exited |= bit;
  if (w.open && (w.mask & bit) && !(w.arrived & bit) && b.error.size() == 0) {
    b.error = "thread " + std::to_string(t) + " (lane " + std::to_string(t % kWarp) + " of warp " +
              std::to_string(t / kWarp) + ") returned while lanes " + hex(w.arrived) + " wait for it in " +
              op_name(w.op) + "(mask " + hex(w.mask) + "): a collective over a partial warp";
  }
}

REMAT_EMULATOR_HOT void fiber_main(Fiber* self) {
  Runner& r = t_runner;
  for (;;) {
    Block& b = *r.block;
    const LaunchSpec& spec = *b.spec;
    Thread* threads = b.threads.data();
    const int* order = b.order.size() != 0 ? b.order.data() : nullptr;
    const bool flat = spec.block.y == 1 && spec.block.z == 1;
    while (b.error.size() == 0 && b.next_start < static_cast<size_t>(b.count)) {
      const size_t k = b.next_start++;
      const int t = order != nullptr ? order[k] : static_cast<int>(k);
      Thread& thread = threads[t];
      const auto u = static_cast<unsigned>(t);
      thread.place.thread = flat ? uint3{u, 0, 0}
                                 : uint3{u % spec.block.x, u / spec.block.x % spec.block.y,
                                         u / (spec.block.x * spec.block.y)};
      thread.place.block = b.block_index;
      thread.place.block_dim = spec.block;
      thread.place.grid_dim = spec.grid;
      thread.fiber = self;
      thread.state = State::Running;
      r.current = t;
      t_place = &thread.place;
      b.invoke(b.closure);
      thread_exit(b, t);
    }
    r.went_idle = true;
    self->suspend();
  }
}

Fiber* take_fiber(Runner& r) {
  if (!r.idle.empty()) {
    Fiber* f = r.idle.back();
    r.idle.pop_back();
    return f;
  }
  r.fibers.push_back(std::make_unique<Fiber>(fiber_main, kStackBytes));
  return r.fibers.back().get();
}

std::string deadlock_message(const Block& b) {
  std::vector<int> at_barrier, at_warp;
  for (int t = 0; t < b.count; ++t) {
    const State s = b.threads[static_cast<size_t>(t)].state;
    if (s == State::AtBarrier) at_barrier.push_back(t);
    if (s == State::AtWarp) at_warp.push_back(t);
  }
  std::string text = "deadlock: " + std::to_string(b.count - b.exited) + " of " + std::to_string(b.count) +
                     " threads wait and none can go on";
  if (!at_barrier.empty()) {
    text += "; " + std::to_string(at_barrier.size()) + " at __syncthreads (first: thread " +
            std::to_string(at_barrier.front()) + ")";
  }
  if (!at_warp.empty()) {
    const Warp& w = b.warps[static_cast<size_t>(at_warp.front() / kWarp)];
    text += "; " + std::to_string(at_warp.size()) + " in warp collectives (first: thread " +
            std::to_string(at_warp.front()) + " in " + op_name(w.op) + " with mask " + hex(w.mask) + ", lanes " +
            hex(w.arrived) + " arrived)";
  }
  return text;
}

REMAT_EMULATOR_HOT std::string run_block(Block& b) {
  Runner& r = t_runner;
  std::vector<Fiber*> used;
  while (b.error.empty()) {
    Fiber* fiber = nullptr;
    if (b.ready_head < b.ready.size()) {
      if (b.shuffled) {
        const size_t pick = std::uniform_int_distribution<size_t>(b.ready_head, b.ready.size() - 1)(r.rng);
        std::swap(b.ready[b.ready_head], b.ready[pick]);
      }
      const int t = b.ready[b.ready_head++];
      if (b.ready_head == b.ready.size()) {
        b.ready.clear();
        b.ready_head = 0;
        b.ready_head = 0;
      }
      r.current = t;
      t_place = &b.threads.data()[t].place;
      fiber = b.threads.data()[t].fiber;
    } else if (b.next_start < static_cast<size_t>(b.count)) {
      fiber = take_fiber(r);
      used.push_back(fiber);
    } else if (b.exited == b.count) {
      break;
    } else {
      b.error = deadlock_message(b);
      break;
    }
    fiber->resume();
    if (r.went_idle) r.idle.push_back(fiber);
  }
  r.current = -1;
  t_place = nullptr;
  if (!b.error.empty()) {
    // Fibers left inside a thread start afresh; all are free again.
    for (Fiber* f : used) {
      bool is_idle = false;
      for (Fiber* i : r.idle) is_idle = is_idle || i == f;
      if (!is_idle) {
        f->reset();
        r.idle.push_back(f);
      }
    }
  }
  return b.error;
}

// Thread t's call of a warp collective, checked against its warp: the
// warp it joins (opened by the first lane), or the block given up with
// what was wrong.
REMAT_EMULATOR_HOT Warp& join_collective(Block& b, WarpOp op, unsigned mask, int width, int t) {
  const int lane = t % kWarp, warp = t / kWarp;
  const unsigned bit = 1u << lane;
  // Built only for a message: a thread given up while it waits never
  // unwinds its stack, so nothing that owns memory may live across a wait.
  const auto who = [&] {
    return "thread " + std::to_string(t) + " (lane " + std::to_string(lane) + " of warp " + std::to_string(warp) +
           ") in " + op_name(op) + "(mask " + hex(mask) + ")";
  };
  if (!(mask & bit)) fail(b, who() + ": the mask leaves out the calling lane");
  if (width <= 0 || width > kWarp || (width & (width - 1)) != 0) {
    fail(b, who() + ": width " + std::to_string(width) + " is not a power of 2 up to 32");
  }
  const int lanes = std::min(kWarp, b.count - warp * kWarp);
  const unsigned present = lanes == kWarp ? ~0u : (1u << lanes) - 1;
  if (mask & ~present) {
    fail(b, who() + ": the mask names lanes this warp does not have (the block has " + std::to_string(b.count) +
                " threads)");
  }
  Warp& w = b.warps.data()[warp];
  if (mask & w.exited) {
    const int l = __builtin_ctz(mask & w.exited);
    fail(b, who() + ": lane " + std::to_string(l) + " of the mask has returned (a collective over a partial warp)");
  }
  if (!w.open) {
    w.open = true;
    w.op = op;
    w.mask = mask;
    w.width = width;
    w.arrived = 0;
  } else if (w.op != op || w.mask != mask || w.width != width) {
    fail(b, who() + ": lanes " + hex(w.arrived) + " of the warp wait in " + op_name(w.op) + "(mask " + hex(w.mask) +
                ", width " + std::to_string(w.width) + ") instead");
  }
  return w;
}

// Every lane's result of warp `warp`'s collective, once the last lane of
// the mask has arrived; a lane that reads one outside the mask gives the
// block up.
REMAT_EMULATOR_HOT void complete_collective(Block& b, Warp& w, WarpOp op, unsigned mask, int width, int warp) {
  uint64_t ballot = 0;
  bool any = false, all = true;
  for (int l = 0; l < kWarp; ++l) {
    if (!(mask >> l & 1u)) continue;
    ballot |= w.values[l] != 0 ? uint64_t{1} << l : 0;
    any = any || w.values[l] != 0;
    all = all && w.values[l] != 0;
  }
  for (int l = 0; l < kWarp; ++l) {
    if (!(mask >> l & 1u)) continue;
    const int segment = l & ~(width - 1), a = w.args[l];
    int source = l;
    switch (op) {
      case WarpOp::Shfl: source = segment + (((a % width) + width) % width); break;
      case WarpOp::ShflUp: source = l - a >= segment ? l - a : l; break;
      case WarpOp::ShflDown: source = l + a < segment + width ? l + a : l; break;
      case WarpOp::ShflXor: source = ((l ^ a) & ~(width - 1)) == segment ? l ^ a : l; break;
      default: break;
    }
    if (source < 0 || source >= kWarp || !(mask >> source & 1u)) {
      fail(b, "thread " + std::to_string(warp * kWarp + l) + " in " + op_name(op) + "(mask " + hex(mask) +
                  ") reads lane " + std::to_string(source) + ", which is not in the mask");
    }
    switch (op) {
      case WarpOp::Sync: w.results[l] = 0; break;
      case WarpOp::Ballot: w.results[l] = ballot; break;
      case WarpOp::Any: w.results[l] = any; break;
      case WarpOp::All: w.results[l] = all; break;
      default: w.results[l] = w.values[source]; break;
    }
  }
}

}  // namespace

Counters counters() { return {g_grids.load(), g_blocks.load()}; }

std::string run_grid(const LaunchSpec& spec, Invoke invoke, const void* closure) {
  uint64_t seed = 1;
  const bool shuffled = thread_order_and_seed(seed) == ThreadOrder::Shuffled;
  Runner& r = t_runner;
  if (r.block != nullptr) return "launched from inside a kernel";
  g_grids.fetch_add(1, std::memory_order_relaxed);
  g_blocks.fetch_add(uint64_t{spec.grid.x} * spec.grid.y * spec.grid.z, std::memory_order_relaxed);
  if (shuffled) r.rng.seed(seed);
  Block b;
  b.shuffled = shuffled;
  b.spec = &spec;
  b.invoke = invoke;
  b.closure = closure;
  b.count = static_cast<int>(spec.block.x * spec.block.y * spec.block.z);
  b.threads.resize(static_cast<size_t>(b.count));
  if (shuffled) {
    b.order.resize(static_cast<size_t>(b.count));
    std::iota(b.order.begin(), b.order.end(), 0);
  }
  b.warps.resize(static_cast<size_t>((b.count + kWarp - 1) / kWarp));
  r.block = &b;
  std::string error;
  for (unsigned z = 0; z < spec.grid.z && error.empty(); ++z) {
    for (unsigned y = 0; y < spec.grid.y && error.empty(); ++y) {
      for (unsigned x = 0; x < spec.grid.x && error.empty(); ++x) {
        for (Thread& thread : b.threads) {
          thread.state = State::NotStarted;
          thread.fiber = nullptr;
        }
        b.block_index = {x, y, z};
        if (shuffled) std::shuffle(b.order.begin(), b.order.end(), r.rng);
        b.next_start = 0;
        b.exited = 0;
        b.barrier.clear();
        b.ready.clear();
        b.ready_head = 0;
        for (Warp& w : b.warps) w = Warp{};
        // Fresh shared memory holds no values: all-ones bytes are NaN in
        // float and double, so a read before a write shows.
        b.shared.reset();
        if (spec.shared_bytes > 0) {
          b.shared = std::make_unique<unsigned char[]>(spec.shared_bytes);
          std::memset(b.shared.get(), 0xFF, spec.shared_bytes);
        }
        const std::string failure = run_block(b);
        if (!failure.empty()) {
          error = "block (" + std::to_string(x) + "," + std::to_string(y) +
                  "," + std::to_string(z) + ") of " + dims(spec.grid) + ", " + dims(spec.block) +
                  " threads: " + failure;
        }
      }
    }
  }
  r.block = nullptr;
  return error;
}

void* dynamic_shared() {
  Block& b = this_block("dynamic_shared()");
  return b.shared.get();
}

REMAT_EMULATOR_HOT void sync_threads() {
  Block& b = this_block("__syncthreads()");
  const int t = t_runner.current;
  b.threads.data()[t].state = State::AtBarrier;
  b.barrier.push_back(t);
  if (static_cast<int>(b.barrier.size()) + b.exited == b.count) {
    release_barrier(b, t);
    return;
  }
  wait_here(b, t);
}

REMAT_EMULATOR_HOT uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  Block& b = this_block(op_name(op));
  const int t = t_runner.current;
  const int lane = t % kWarp, warp = t / kWarp;
  const unsigned bit = 1u << lane;
  Warp& w = join_collective(b, op, mask, width, t);
  w.values[lane] = value;
  w.args[lane] = arg;
  w.arrived |= bit;
  if (w.arrived != w.mask) {
    b.threads.data()[t].state = State::AtWarp;
    wait_here(b, t);
    return w.results[lane];
  }
  // The last lane: every result, then the others go on.
  complete_collective(b, w, op, mask, width, warp);
  w.open = false;
  for (int l = 0; l < kWarp; ++l) {
    if (l == lane || !(mask >> l & 1u)) continue;
    const int other = warp * kWarp + l;
    b.threads.data()[other].state = State::Running;
    b.ready.push_back(other);
  }
  return w.results[lane];
}

}  // namespace remat_emulation
