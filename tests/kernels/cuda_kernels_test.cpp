// Each CUDA kernel against its CPU twin on the same inputs (label cuda;
// skipped, with a message, where no GPU is present or the build has no
// CUDA), and the launchers' error paths and shared scratch. Values agree
// when |cuda - cpu| <= rtol |cpu| + atol: rtol 1e-5 and atol 1e-6 for
// float32, 1e-12 and 1e-14 for float64 (atol only matters for values near
// 0); a NaN on the CPU must be a NaN on the GPU. The dropout masks and the
// optimizer updates of both devices are the same elements. Sizes span many
// blocks, and a grid's worth and more for the elementwise kernels.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/dropout.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/optim.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cpu/unary.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/unary.h"
#include "kernels/unary_math.h"
#include "tests/support/gpu.h"
#if REMAT_CUDA_EMULATION
#include "kernels/cuda/launch.cuh"  // scratch_on, and launch() for a kernel that fails as it runs
#endif

namespace remat::kernels {
namespace {

namespace cpu_k = kernels::cpu;
namespace cuda_k = kernels::cuda;
using test::DeviceBuffer;
using test::random_values;

// The first element outside |cuda - cpu| <= rtol |cpu| + atol (the rule at
// the top of the file), as one failure line instead of a million.
template <class T>
void expect_close(const std::vector<T>& cuda, const std::vector<T>& cpu, const char* what) {
  const double rtol = sizeof(T) == 4 ? 1e-5 : 1e-12, atol = sizeof(T) == 4 ? 1e-6 : 1e-14;
  ASSERT_EQ(cuda.size(), cpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double want = static_cast<double>(cpu[i]), got = static_cast<double>(cuda[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << what << " at " << i << ": got " << got << ", the CPU has NaN";
      continue;
    }
    ASSERT_LE(std::abs(got - want), rtol * std::abs(want) + atol) << what << " at " << i << ": got " << got
                                                                   << ", the CPU has " << want;
  }
}

// n elements: more than one grid's worth, and not a multiple of a block.
constexpr size_t kElements = 4096 * 256 + 77;

// One math of kernels/unary_math.h on both devices: inputs from its domain,
// backward reading the input or the CPU's output as the math says.
template <class Math, class T>
void unary_parity_of() {
  const std::string name = Math::kName;
  const std::vector<T> x = random_values<T>(kElements, Math::kDomain.low, Math::kDomain.high, 1);
  const std::vector<T> dout = random_values<T>(kElements, -1, 1, 3);
  const int64_t n = static_cast<int64_t>(kElements);
  const cuda_k::Stream s = DeviceBuffer<T>::stream();
  std::vector<T> y(kElements), dx(kElements);
  cpu_k::unary_forward<Math>(y.data(), x.data(), n);
  DeviceBuffer<T> d_x(x), d_y{std::vector<T>(kElements)}, d_dout(dout), d_dx{std::vector<T>(kElements)};
  cuda_k::unary_forward<Math>(d_y.ptr, d_x.ptr, n, s);
  expect_close(d_y.read(), y, (name + " forward").c_str());
  const bool reads_output = Math::kReads == UnaryReads::Output;
  cpu_k::unary_backward<Math>(dx.data(), dout.data(), reads_output ? y.data() : x.data(), n);
  cuda_k::unary_backward<Math>(d_dx.ptr, d_dout.ptr, reads_output ? d_y.ptr : d_x.ptr, n, s);
  expect_close(d_dx.read(), dx, (name + " backward").c_str());
}

template <class T>
void unary_parity() {
#define REMAT_PARITY(Math) unary_parity_of<Math, T>();
  REMAT_UNARY_MATHS(REMAT_PARITY)
#undef REMAT_PARITY
}

TEST(CudaKernels, UnaryKernelsMatchTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  unary_parity<float>();
  unary_parity<double>();
}

TEST(CudaKernels, FillAndScaleMatchTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const std::vector<float> x = random_values<float>(kElements, -2, 2, 5);
  DeviceBuffer<float> d_x(x), d_out{std::vector<float>(kElements)};
  cuda_k::scale<float>(d_out.ptr, d_x.ptr, -1.5f, static_cast<int64_t>(kElements), d_x.stream());
  std::vector<float> cpu(kElements);
  cpu_k::scale<float>(cpu.data(), x.data(), -1.5f, static_cast<int64_t>(kElements));
  EXPECT_EQ(d_out.read(), cpu);  // one multiply: the same bits
  DeviceBuffer<int64_t> d_ids{std::vector<int64_t>(1000)};
  cuda_k::fill<int64_t>(d_ids.ptr, 7, 1000, d_ids.stream());
  EXPECT_EQ(d_ids.read(), std::vector<int64_t>(1000, 7));
}

TEST(CudaKernels, DropoutKeepsTheSameElementsAsTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const std::vector<float> x = random_values<float>(kElements, -2, 2, 6);
  const DropoutMask mask{.seed = 12345, .offset = 678, .threshold = static_cast<uint32_t>(std::ceil(0.3 * 16777216.0))};
  std::vector<float> cpu(kElements);
  cpu_k::dropout_forward<float>(cpu.data(), x.data(), static_cast<int64_t>(kElements), mask, 1.0f / 0.7f);
  DeviceBuffer<float> d_x(x), d_out{std::vector<float>(kElements)};
  cuda_k::dropout_forward<float>(d_out.ptr, d_x.ptr, static_cast<int64_t>(kElements), mask, 1.0f / 0.7f, d_x.stream());
  EXPECT_EQ(d_out.read(), cpu);  // the same mask, the same one multiply
}

TEST(CudaKernels, OptimizerStepsMatchTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const size_t n = 100003;
  std::vector<double> param = random_values<double>(n, -1, 1, 7), grad = random_values<double>(n, -1, 1, 8);
  std::vector<double> m = random_values<double>(n, -0.1, 0.1, 9), v = random_values<double>(n, 0, 0.01, 10);
  const AdamwHyper hyper{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                         .step_size = 1e-3 / (1 - 0.9 * 0.9), .bias_correction2_sqrt = std::sqrt(1 - 0.95 * 0.95)};
  DeviceBuffer<double> d_param(param), d_m(m), d_v(v), d_grad(grad);
  cuda_k::adamw_step<double>(d_param.ptr, d_m.ptr, d_v.ptr, d_grad.ptr, static_cast<int64_t>(n), hyper, d_m.stream());
  cpu_k::adamw_step<double>(param.data(), m.data(), v.data(), grad.data(), static_cast<int64_t>(n), hyper);
  expect_close(d_param.read(), param, "adamw param");
  expect_close(d_m.read(), m, "adamw exp_avg");
  expect_close(d_v.read(), v, "adamw exp_avg_sq");

  std::vector<float> p32 = random_values<float>(n, -1, 1, 11), g32 = random_values<float>(n, -1, 1, 12);
  std::vector<float> buf(n);
  const SgdHyper sgd{.lr = 0.1, .momentum = 0.9, .dampening = 0, .weight_decay = 0.01, .nesterov = true};
  DeviceBuffer<float> d_p(p32), d_g(g32), d_buf(buf);
  cuda_k::sgd_step<float>(d_p.ptr, d_buf.ptr, d_g.ptr, static_cast<int64_t>(n), sgd, true, d_p.stream());
  cpu_k::sgd_step<float>(p32.data(), buf.data(), g32.data(), static_cast<int64_t>(n), sgd, true);
  expect_close(d_p.read(), p32, "sgd param");
  expect_close(d_buf.read(), buf, "sgd momentum");
}

TEST(CudaKernels, SquaredNormMatchesTheCpuAndRepeats) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const std::vector<float> x = random_values<float>(kElements, -1, 1, 13);
  DeviceBuffer<float> d_x(x);
  const double cuda = cuda_k::squared_norm<float>(d_x.ptr, static_cast<int64_t>(kElements), d_x.stream());
  const double cpu = cpu_k::squared_norm<float>(x.data(), static_cast<int64_t>(kElements));
  EXPECT_NEAR(cuda, cpu, 1e-12 * cpu);
  EXPECT_EQ(cuda_k::squared_norm<float>(d_x.ptr, static_cast<int64_t>(kElements), d_x.stream()), cuda);  // bit for bit
}

// k == 0 is the empty sum: C = beta C, and with beta == 0 C is written, never
// read (as cuBLAS and the CPU promise), so that NaN in recycled pool memory
// gives zeros. Only the (m, n) window of C is written: the padding of its
// rows keeps its NaN.
TEST(CudaKernels, GemmWithAnEmptyInnerAxisWritesBetaTimesC) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const int64_t m = 300, n = 257, ldc = n + 3;  // 77,100 outputs: many blocks
  const size_t size = static_cast<size_t>(m * ldc);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const DeviceBuffer<float> unread{std::vector<float>(1)};  // A and B: k == 0, never read
  DeviceBuffer<float> c{std::vector<float>(size, nan)};
  cuda_k::gemm<float>(false, false, m, n, 0, 1.0f, unread.ptr, 1, unread.ptr, n, 0.0f, c.ptr, ldc, c.stream());
  const std::vector<float> zeroed = c.read();
  for (size_t e = 0; e < size; ++e) {
    if (static_cast<int64_t>(e) % ldc < n) {
      ASSERT_EQ(zeroed[e], 0.0f) << "C[" << e / ldc << ", " << e % ldc << "]";
    } else {
      ASSERT_TRUE(std::isnan(zeroed[e])) << "padding C[" << e / ldc << ", " << e % ldc << "] was written";
    }
  }
  // beta 2 over finite values: the CPU's one multiply, the same bits.
  std::vector<float> cpu = random_values<float>(size, -1, 1, 20);
  DeviceBuffer<float> scaled(cpu);
  cuda_k::gemm<float>(true, true, m, n, 0, 1.0f, unread.ptr, m, unread.ptr, 1, 2.0f, scaled.ptr, ldc, c.stream());
  const float host_unread = 0;
  cpu_k::gemm<float>(true, true, m, n, 0, 1.0f, &host_unread, m, &host_unread, 1, 2.0f, cpu.data(), ldc);
  EXPECT_EQ(scaled.read(), cpu);
  // The batched form has no beta: zeros over NaN.
  DeviceBuffer<double> batched{std::vector<double>(6 * 40 * 50, std::numeric_limits<double>::quiet_NaN())};
  const DeviceBuffer<double> unread64{std::vector<double>(1)};
  cuda_k::gemm_batched<double>(false, false, 40, 50, 0, 1.0, unread64.ptr, {0}, 1, unread64.ptr, {0}, 50, batched.ptr,
                               {6}, c.stream());
  EXPECT_EQ(batched.read(), std::vector<double>(6 * 40 * 50, 0.0));
}

// Targets (rows): random classes in [0, classes), about one in ten ignored (-100).
std::vector<int64_t> targets_for(int64_t rows, int64_t classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> targets(static_cast<size_t>(rows));
  for (int64_t& t : targets) t = rng() % 10 == 0 ? -100 : static_cast<int64_t>(rng() % static_cast<uint64_t>(classes));
  return targets;
}

TEST(CudaKernels, CrossEntropyMatchesTheCpuAndNamesTheRowOfABadTarget) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const int64_t rows = 2000, classes = 37;  // 250 blocks of warp rows
  const std::vector<float> logits = random_values<float>(static_cast<size_t>(rows * classes), -4, 4, 21);
  std::vector<int64_t> targets = targets_for(rows, classes, 22);
  std::vector<float> cpu_stats(static_cast<size_t>(rows * 2));
  DeviceBuffer<float> d_logits(logits), d_stats{std::vector<float>(cpu_stats.size())};
  double cpu_loss = 0, gpu_loss = 0;
  int64_t cpu_count = 0, gpu_count = 0, cpu_bad = -1, gpu_bad = -1;
  {
    DeviceBuffer<int64_t> d_targets(targets);
    ASSERT_TRUE(cuda_k::cross_entropy_forward<float>(&gpu_loss, &gpu_count, d_stats.ptr, &gpu_bad, d_logits.ptr,
                                                     d_targets.ptr, rows, classes, -100, d_logits.stream()));
    ASSERT_TRUE(cpu_k::cross_entropy_forward<float>(&cpu_loss, &cpu_count, cpu_stats.data(), &cpu_bad,
                                                    logits.data(), targets.data(), rows, classes, -100));
    expect_close(d_stats.read(), cpu_stats, "stats");
    EXPECT_EQ(gpu_count, cpu_count);
    EXPECT_NEAR(gpu_loss, cpu_loss, 1e-5 * cpu_loss);
  }
  for (const int64_t bad_target : {classes, int64_t{-5}}) {
    SCOPED_TRACE("target " + std::to_string(bad_target));
    targets[1234] = bad_target;
    DeviceBuffer<int64_t> d_targets(targets);
    EXPECT_FALSE(cuda_k::cross_entropy_forward<float>(&gpu_loss, &gpu_count, d_stats.ptr, &gpu_bad, d_logits.ptr,
                                                      d_targets.ptr, rows, classes, -100, d_logits.stream()));
    EXPECT_EQ(gpu_bad, 1234);
    EXPECT_FALSE(cpu_k::cross_entropy_forward<float>(&cpu_loss, &cpu_count, cpu_stats.data(), &cpu_bad,
                                                     logits.data(), targets.data(), rows, classes, -100));
    EXPECT_EQ(cpu_bad, 1234);
  }
}

// Forward and backward against the CPU on repeated ids, then an id outside
// the table: both directions name its position and write nothing (backward
// may see ids that changed after forward checked them).
TEST(CudaKernels, EmbeddingMatchesTheCpuAndNamesAnIdOutsideTheTable) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const int64_t vocab = 300, channels = 64, n = 1000;
  std::mt19937_64 rng(23);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
  const std::vector<double> weight = random_values<double>(static_cast<size_t>(vocab * channels), -1, 1, 24);
  const std::vector<double> dout = random_values<double>(static_cast<size_t>(n * channels), -1, 1, 25);
  std::vector<double> cpu_out(static_cast<size_t>(n * channels)), cpu_dweight(weight.size());
  DeviceBuffer<double> d_weight(weight), d_dout(dout), d_out{cpu_out}, d_dweight{cpu_dweight};
  {
    DeviceBuffer<int64_t> d_ids(ids);
    EXPECT_EQ(cuda_k::embedding_forward<double>(d_out.ptr, d_weight.ptr, d_ids.ptr, n, channels, vocab, d_ids.stream()),
              -1);
    EXPECT_EQ(cpu_k::embedding_forward<double>(cpu_out.data(), weight.data(), ids.data(), n, channels, vocab), -1);
    EXPECT_EQ(d_out.read(), cpu_out);  // a gather: the same bits
    EXPECT_EQ(cuda_k::embedding_backward<double>(d_dweight.ptr, d_dout.ptr, d_ids.ptr, n, channels, vocab,
                                                 d_ids.stream()),
              -1);
    EXPECT_EQ(cpu_k::embedding_backward<double>(cpu_dweight.data(), dout.data(), ids.data(), n, channels, vocab), -1);
    EXPECT_EQ(d_dweight.read(), cpu_dweight);  // each row's sum in the ids' order on both
  }
  const std::vector<double> before = d_dweight.read();
  for (const int64_t bad_id : {vocab, int64_t{-1}, int64_t{1} << 40}) {
    SCOPED_TRACE("id " + std::to_string(bad_id));
    ids[777] = bad_id;
    DeviceBuffer<int64_t> d_ids(ids);
    EXPECT_EQ(cuda_k::embedding_forward<double>(d_out.ptr, d_weight.ptr, d_ids.ptr, n, channels, vocab, d_ids.stream()),
              777);
    EXPECT_EQ(cuda_k::embedding_backward<double>(d_dweight.ptr, d_dout.ptr, d_ids.ptr, n, channels, vocab,
                                                 d_ids.stream()),
              777);
    EXPECT_EQ(d_dweight.read(), before);
    std::vector<double> untouched = cpu_dweight;
    EXPECT_EQ(cpu_k::embedding_backward<double>(untouched.data(), dout.data(), ids.data(), n, channels, vocab), 777);
    EXPECT_EQ(untouched, cpu_dweight);
  }
}

// Two host threads running cross-entropy on one GPU at once, each on its
// own buffers: the launcher's temporaries (per-row losses and states) are
// device scratch kept per slot (runtime.cu's scratch_on), and each call must
// read back its own rows' losses, whatever the other thread does meanwhile
// (grow the scratch, or launch into it). Small problems and many calls, so
// that the moments when a call has launched but not read back are a large
// share of the time; AScratchLeaseKeepsItsBufferFromOtherThreads below
// checks the rule itself.
TEST(CudaKernels, LaunchersOnTwoHostThreadsEachReadTheirOwnScratch) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  constexpr int64_t kClasses = 20;
  struct Problem {
    Problem(int64_t rows, uint64_t seed)
        : rows(rows),
          logits(random_values<float>(static_cast<size_t>(rows * kClasses), -3, 3, seed)),
          stats(std::vector<float>(static_cast<size_t>(rows * 2))),
          targets(targets_for(rows, kClasses, seed + 1)) {}
    int64_t rows;
    DeviceBuffer<float> logits, stats;
    DeviceBuffer<int64_t> targets;
    double loss = 0;  // the first run's, on one thread
  };
  std::vector<std::unique_ptr<Problem>> problems;
  for (const int64_t rows : {16, 40, 24, 56}) {
    problems.push_back(std::make_unique<Problem>(rows, 30 + static_cast<uint64_t>(rows)));
  }
  const auto run = [&](Problem& p, double& loss) {
    int64_t count = 0, bad = -1;
    return cuda_k::cross_entropy_forward<float>(&loss, &count, p.stats.ptr, &bad, p.logits.ptr, p.targets.ptr,
                                                p.rows, kClasses, -100, p.logits.stream());
  };
  for (auto& p : problems) ASSERT_TRUE(run(*p, p->loss));
  std::atomic<int> wrong{0};
  std::string error;  // the first exception of either thread
  std::atomic<bool> failed{false};
  const auto worker = [&](size_t first) {
    try {
      for (int i = 0; i < 500 && !failed; ++i) {
        Problem& p = *problems[first + static_cast<size_t>(i % 2)];
        double loss = 0;
        if (!run(p, loss) || loss != p.loss) ++wrong;  // bit for bit: the same launches on the same values
      }
    } catch (const std::exception& e) {
      if (!failed.exchange(true)) error = e.what();
    }
  };
  std::thread other(worker, 2);
  worker(0);
  other.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(wrong.load(), 0) << "calls that read another call's losses";
}

#if REMAT_CUDA_EMULATION
// Lanes 16..31 return before the others shuffle over the whole warp: an
// error the emulated GPU reports when the kernel runs, at the next wait.
__global__ void shuffle_over_half_a_warp(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
}

// Growing a scratch buffer frees the old one first; that cudaFree waits for
// the device and returns the error of any kernel that failed meanwhile. The
// buffer it freed must not be freed again by the next call.
TEST(CudaKernels, AScratchBufferWhoseFreeFailedIsNotFreedAgain) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const cuda_k::Stream stream = DeviceBuffer<float>::stream();
  // rows x 2 logits, every target 1; the buffers are made (and waited for)
  // before the failing kernel is queued.
  struct Problem {
    explicit Problem(int64_t rows)
        : rows(rows),
          logits(random_values<float>(static_cast<size_t>(rows * 2), -1, 1, 50)),
          stats(std::vector<float>(static_cast<size_t>(rows * 2))),
          targets(std::vector<int64_t>(static_cast<size_t>(rows), 1)) {}
    bool run(cuda_k::Stream stream) {
      int64_t bad = -1;
      return cuda_k::cross_entropy_forward<float>(&loss, &count, stats.ptr, &bad, logits.ptr, targets.ptr, rows, 2,
                                                  -100, stream);
    }
    int64_t rows;
    DeviceBuffer<float> logits, stats;
    DeviceBuffer<int64_t> targets;
    double loss = 0;
    int64_t count = 0;
  };
  // large: more rows than any other test of this program asks for, in
  // whatever order they run, so that its scratch must grow.
  Problem small(8), large(8192);
  ASSERT_TRUE(small.run(stream));  // the scratch holds a buffer, smaller than large's
  const DeviceBuffer<float> out{std::vector<float>(32)};
  launch("shuffle_over_half_a_warp", shuffle_over_half_a_warp, {1, 32}, stream, out.ptr);
  try {
    large.run(stream);
    ADD_FAILURE() << "no error from the kernel that failed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("shuffle_over_half_a_warp"), std::string::npos) << e.what();
  }
  // A fresh buffer: the one whose free failed is forgotten, not freed again.
  ASSERT_TRUE(large.run(stream));
  EXPECT_EQ(large.count, 8192);
}

// A lease is its holder's alone: another thread asking for the same slot
// waits until the lease ends.
TEST(CudaKernels, AScratchLeaseKeepsItsBufferFromOtherThreads) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const cuda_k::Stream stream = DeviceBuffer<float>::stream();
  std::atomic<bool> second_got_it{false};
  std::thread other;
  {
    const cuda_k::ScratchLease lease = cuda_k::scratch_on(stream, cuda_k::Scratch::SquaredNormPartials, 64);
    other = std::thread([&] {
      const cuda_k::ScratchLease second = cuda_k::scratch_on(stream, cuda_k::Scratch::SquaredNormPartials, 64);
      second_got_it = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(second_got_it) << "a second thread got the buffer while the first held it";
  }
  other.join();
  EXPECT_TRUE(second_got_it);
}
#endif

}  // namespace
}  // namespace remat::kernels

#else

TEST(CudaKernels, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): CUDA kernels not built"; }

#endif
