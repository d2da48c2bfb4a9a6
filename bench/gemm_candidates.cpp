// One GEMM library's float32 speed, for bench/gemm_candidates.py (the
// measurement behind Note [GEMM library]): C (M, N) = A (M, K) B (K, N),
// row-major, through the library named on the command line, loaded with
// dlopen so that one program measures any that is installed. Prints one
// JSON line: GFLOP/s (median of the timed calls) and what the library says
// it runs. Built by the script with g++ -fopenmp; not part of the build.
//   gemm_candidates openblas|blis|onednn THREADS M N K [REPS]
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
using DnnlSgemm = int (*)(char, char, long, long, long, float, const float*, long, const float*, long, float, float*,
                          long);
constexpr int kRowMajor = 101, kNoTrans = 111;

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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s openblas|blis|onednn THREADS M N K [REPS]\n", argv[0]);
    return 2;
  }
  const std::string library = argv[1];
  const int threads = std::atoi(argv[2]);
  const long m = std::atol(argv[3]), n = std::atol(argv[4]), k = std::atol(argv[5]);
  const int reps = argc > 6 ? std::atoi(argv[6]) : 20;
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 7) * 0.02f - 0.06f;
  omp_set_num_threads(threads);

  CblasSgemm cblas = nullptr;
  DnnlSgemm dnnl = nullptr;
  std::string kernels;
  if (library == "openblas") {
    void* h = open_or_die("libopenblas.so.0");
    cblas = symbol<CblasSgemm>(h, "cblas_sgemm");
    symbol<void (*)(int)>(h, "openblas_set_num_threads")(threads);
    kernels = symbol<char* (*)()>(h, "openblas_get_corename")();
  } else if (library == "blis") {
    void* h = open_or_die("libblis.so.4");
    cblas = symbol<CblasSgemm>(h, "cblas_sgemm");
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
  auto once = [&] {
    if (cblas) {
      cblas(kRowMajor, kNoTrans, kNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    } else {
      dnnl('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
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
