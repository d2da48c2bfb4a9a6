// For bench/gemm_candidates.py (the measurement behind Note [GEMM
// library]), two things remat's own bench_kernels cannot say:
// - one GEMM library's float32 speed with its own threads: C (M, N) =
//   op(A) op(B), row-major, 64-byte aligned as remat's allocator gives,
//   through the library named on the command line, loaded with dlopen so
//   that one program measures any that is installed (BLIS through its own
//   interface, as remat calls it; the others through their sgemm). Prints
//   one JSON line: GFLOP/s (median of the timed calls) and what the library
//   says it runs;
// - `peak THREADS`: the clock each of THREADS busy threads runs at (a chain
//   of dependent register-to-register adds, one a cycle) and the float32
//   FLOP/s of a loop of independent FMAs on each (2 FLOPs per lane; 256-bit,
//   and 512-bit where the CPU has AVX-512F, the faster of the two), which
//   gives the FLOPs per cycle; the script takes the peak as clock x FLOPs
//   per cycle x threads.
// Built by the script with g++ -O2 -fopenmp -mavx2 -mfma; not part of the
// build.
//   gemm_candidates openblas|blis|onednn THREADS M N K [TRANS_A TRANS_B [REPS]]
//   gemm_candidates peak THREADS
#include <dlfcn.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

namespace {

using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
using DnnlSgemm = int (*)(char, char, long, long, long, float, const float*, long, const float*, long, float, float*,
                          long);
using BlisSgemm = void (*)(int, int, long, long, long, const float*, const float*, long, long, const float*, long, long,
                           const float*, float*, long, long);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112, kBlisTrans = 0x8;

void* open_or_die(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    std::exit(77);
  }
  return handle;
}

template <class F>
F symbol(void* handle, const char* name) {
  void* address = dlsym(handle, name);
  if (address == nullptr) {
    std::fprintf(stderr, "no symbol %s\n", name);
    std::exit(1);
  }
  return reinterpret_cast<F>(address);
}

// CPU seconds of the calling thread: another program that shares the core
// delays the wall clock, not the cycles this thread gets.
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Cycles per second of the calling thread: rounds of 20 dependent adds,
// 20 cycles a round. A register operand, not an immediate: Intel's cores
// since Golden Cove execute `add $imm, reg` at register renaming, without
// its cycle of latency (a 2-core Intel Xeon, family 6, model 167, read
// 21.7 GHz with immediates and 3.99 with a register).
double add_chain_hz(long rounds) {
  long x = 0;
  const long one = 1;
  const double start = thread_seconds();
  for (long i = 0; i < rounds; ++i) {
    asm volatile(
        "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
        "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
        "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
        "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
        : "+r"(x)
        : "r"(one));
  }
  return 20.0 * static_cast<double>(rounds) / (thread_seconds() - start);
}

// FLOP/s of the calling thread on 12 independent chains of 8-lane float32
// FMAs (enough to fill two FMA pipes of 4 cycles' latency).
double fma_flops(long rounds) {
  __m256 a0 = _mm256_set1_ps(0.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
         a9 = a0, a10 = a0, a11 = a0;
  const __m256 x = _mm256_set1_ps(0.9999f), y = _mm256_set1_ps(0.0001f);
  const double start = thread_seconds();
  for (long i = 0; i < rounds; ++i) {
    a0 = _mm256_fmadd_ps(a0, x, y), a1 = _mm256_fmadd_ps(a1, x, y), a2 = _mm256_fmadd_ps(a2, x, y);
    a3 = _mm256_fmadd_ps(a3, x, y), a4 = _mm256_fmadd_ps(a4, x, y), a5 = _mm256_fmadd_ps(a5, x, y);
    a6 = _mm256_fmadd_ps(a6, x, y), a7 = _mm256_fmadd_ps(a7, x, y), a8 = _mm256_fmadd_ps(a8, x, y);
    a9 = _mm256_fmadd_ps(a9, x, y), a10 = _mm256_fmadd_ps(a10, x, y), a11 = _mm256_fmadd_ps(a11, x, y);
    asm volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8),
                 "+x"(a9), "+x"(a10), "+x"(a11));
  }
  return 12.0 * 8 * 2 * static_cast<double>(rounds) / (thread_seconds() - start);
}

// The same with 16-lane FMAs, for AVX-512 CPUs: two 512-bit FMA pipes
// (Intel's Xeons) double the 256-bit rate, and AVX-512 run as two 256-bit
// halves (Zen 4) leaves it as it is. Only this function is compiled for
// AVX-512, and it runs only where CPUID has AVX-512F.
__attribute__((target("avx512f"))) double fma512_flops(long rounds) {
  __m512 a0 = _mm512_set1_ps(0.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
         a9 = a0, a10 = a0, a11 = a0;
  const __m512 x = _mm512_set1_ps(0.9999f), y = _mm512_set1_ps(0.0001f);
  const double start = thread_seconds();
  for (long i = 0; i < rounds; ++i) {
    a0 = _mm512_fmadd_ps(a0, x, y), a1 = _mm512_fmadd_ps(a1, x, y), a2 = _mm512_fmadd_ps(a2, x, y);
    a3 = _mm512_fmadd_ps(a3, x, y), a4 = _mm512_fmadd_ps(a4, x, y), a5 = _mm512_fmadd_ps(a5, x, y);
    a6 = _mm512_fmadd_ps(a6, x, y), a7 = _mm512_fmadd_ps(a7, x, y), a8 = _mm512_fmadd_ps(a8, x, y);
    a9 = _mm512_fmadd_ps(a9, x, y), a10 = _mm512_fmadd_ps(a10, x, y), a11 = _mm512_fmadd_ps(a11, x, y);
    asm volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8),
                 "+v"(a9), "+v"(a10), "+v"(a11));
  }
  return 12.0 * 16 * 2 * static_cast<double>(rounds) / (thread_seconds() - start);
}

// Each of `threads` threads at once: its clock (GHz), then its FMA rate;
// the best of 5 tries each, in the thread's own CPU time.
int peak(int threads) {
  std::vector<double> ghz(threads), gflops(threads);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    constexpr long kRounds = 20000000;
    for (int i = 0; i < 5; ++i) ghz[t] = std::max(ghz[t], add_chain_hz(kRounds) / 1e9);
#pragma omp barrier
    const bool avx512 = __builtin_cpu_supports("avx512f");
    for (int i = 0; i < 5; ++i) {
      gflops[t] = std::max(gflops[t], fma_flops(kRounds) / 1e9);
      if (avx512) gflops[t] = std::max(gflops[t], fma512_flops(kRounds) / 1e9);
    }
  }
  std::printf("{\"threads\": %d, \"ghz\": [", threads);
  for (int t = 0; t < threads; ++t) std::printf("%s%.3f", t ? ", " : "", ghz[t]);
  std::printf("], \"fma_gflops\": [");
  for (int t = 0; t < threads; ++t) std::printf("%s%.2f", t ? ", " : "", gflops[t]);
  std::printf("]}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "peak") return peak(std::atoi(argv[2]));
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s openblas|blis|onednn THREADS M N K [TRANS_A TRANS_B [REPS]]\n", argv[0]);
    std::fprintf(stderr, "       %s peak THREADS\n", argv[0]);
    return 2;
  }
  const std::string library = argv[1];
  const int threads = std::atoi(argv[2]);
  const long m = std::atol(argv[3]), n = std::atol(argv[4]), k = std::atol(argv[5]);
  const bool ta = argc > 6 && std::atoi(argv[6]) != 0, tb = argc > 7 && std::atoi(argv[7]) != 0;
  const int reps = argc > 8 ? std::atoi(argv[8]) : 20;
  const long lda = ta ? m : k, ldb = tb ? k : n;
  auto buffer = [](long count) {
    float* p = static_cast<float*>(std::aligned_alloc(64, ((count * 4 + 63) / 64) * 64));
    for (long i = 0; i < count; ++i) p[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
    return p;
  };
  float *a = buffer(m * k), *b = buffer(k * n), *c = buffer(m * n);
  omp_set_num_threads(threads);

  CblasSgemm cblas = nullptr;
  DnnlSgemm dnnl = nullptr;
  BlisSgemm blis = nullptr;
  std::string kernels;
  if (library == "openblas") {
    void* h = open_or_die("libopenblas.so.0");
    cblas = symbol<CblasSgemm>(h, "cblas_sgemm");
    symbol<void (*)(int)>(h, "openblas_set_num_threads")(threads);
    kernels = symbol<char* (*)()>(h, "openblas_get_corename")();
  } else if (library == "blis") {
    void* h = open_or_die("libblis.so.4");
    blis = symbol<BlisSgemm>(h, "bli_sgemm");
    symbol<void (*)(long)>(h, "bli_thread_set_num_threads")(threads);
    const int id = symbol<int (*)()>(h, "bli_arch_query_id")();
    kernels = symbol<const char* (*)(int)>(h, "bli_arch_string")(id);
  } else if (library == "onednn") {
    void* h = open_or_die("libdnnl.so.2");
    dnnl = symbol<DnnlSgemm>(h, "dnnl_sgemm");
    kernels = "isa 0x" + [&] {
      char hex[16];
      std::snprintf(hex, sizeof hex, "%x", symbol<int (*)()>(h, "dnnl_get_effective_cpu_isa")());
      return std::string(hex);
    }();
  } else {
    std::fprintf(stderr, "unknown library %s\n", library.c_str());
    return 2;
  }
  const float one = 1.0f, zero = 0.0f;
  auto once = [&] {
    if (cblas) {
      cblas(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    } else if (blis) {
      blis(ta ? kBlisTrans : 0, tb ? kBlisTrans : 0, m, n, k, &one, a, lda, 1, b, ldb, 1, &zero, c, n, 1);
    } else {
      dnnl(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    }
  };
  for (int i = 0; i < 3; ++i) once();
  std::vector<double> seconds;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    once();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + reps / 2, seconds.end());
  const double median = seconds[reps / 2];
  std::printf("{\"library\": \"%s\", \"kernels\": \"%s\", \"threads\": %d, \"gflops\": %.2f}\n", library.c_str(),
              kernels.c_str(), threads, 2.0 * m * n * k / median / 1e9);
}
