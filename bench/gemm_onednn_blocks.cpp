// For docs/gemm.md ("oneDNN's blocks, and its matmul primitive"): float32
// GEMM on one thread through oneDNN 2.6's dnnl_sgemm and through its matmul
// primitive (created once per block shape and kept; transposed operands as
// strided memory descriptors, alpha as an output scale, beta as a sum
// post-op, a user scratchpad), each on blocks of C cut as gemm.cpp cut them
// (at most 512 x 512, before) or cuts them now (at most 1024 x 1024, an even
// count), or as one call, at W2's, a Llama's and W1's linear products and
// attention's per-head ones. Prints which implementation the primitive
// chose, the largest difference between candidates, then a Markdown table
// of GFLOP/s per CPU-second (the thread's CPU clock; medians of ROUNDS
// alternating rounds) and the aggregates weighted by the step. Not part of
// the build, and not remat's gemm (a copy of its cut, without threads):
//   g++ -O2 -std=c++20 -fopenmp bench/gemm_onednn_blocks.cpp -o /tmp/blocks -ldnnl
//   OMP_NUM_THREADS=1 /tmp/blocks [ROUNDS [SECONDS_PER_CANDIDATE]]
// CANDS="sgemm/512 matmul/512" keeps the candidates whose names it contains.
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

using dnnl::memory;

static double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

struct Prod {
  std::string name;
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  int batch;    // per-head: count of products
  double weight;  // times a W2/W4 step runs it
  std::string group;
};

constexpr int64_t kUnit = 16;
static std::pair<int64_t, int64_t> piece(int64_t size, int64_t count, int64_t i) {
  const int64_t units = (size + kUnit - 1) / kUnit;
  return {std::min(units * i / count * kUnit, size), std::min(units * (i + 1) / count * kUnit, size)};
}

dnnl::engine eng(dnnl::engine::kind::cpu, 0);
dnnl::stream strm(eng);

struct MatmulPrim {
  dnnl::matmul prim;
  memory::desc a, b, c;
  std::vector<char> scratch;
  memory::desc sd;
  std::string impl;
};

std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float>,
         std::unique_ptr<MatmulPrim>>
    cache;

MatmulPrim& get_prim(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                     float alpha, float beta, bool user_scratch) {
  auto key = std::make_tuple(ta, tb, m, n, k, lda, ldb, ldc * (user_scratch ? 1 : -1), alpha, beta);
  auto& slot = cache[key];
  if (!slot) {
    slot = std::make_unique<MatmulPrim>();
    auto& p = *slot;
    p.a = memory::desc({m, k}, memory::data_type::f32, ta ? memory::dims{1, lda} : memory::dims{lda, 1});
    p.b = memory::desc({k, n}, memory::data_type::f32, tb ? memory::dims{1, ldb} : memory::dims{ldb, 1});
    p.c = memory::desc({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    if (user_scratch) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (alpha != 1.f) attr.set_output_scales(0, {alpha});
    if (beta != 0.f) {
      dnnl::post_ops po;
      po.append_sum(beta);
      attr.set_post_ops(po);
    }
    dnnl::matmul::desc d(p.a, p.b, p.c);
    dnnl::matmul::primitive_desc pd(d, attr, eng);
    p.impl = pd.impl_info_str();
    p.sd = pd.scratchpad_desc();
    p.scratch.resize(p.sd.get_size() + 64);
    p.prim = dnnl::matmul(pd);
  }
  return *slot;
}

void run_matmul(MatmulPrim& p, const float* a, const float* b, float* c, bool user_scratch) {
  memory ma(p.a, eng, const_cast<float*>(a)), mb(p.b, eng, const_cast<float*>(b)), mc(p.c, eng, c);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  if (user_scratch && p.sd.get_size() > 0) args.insert({DNNL_ARG_SCRATCHPAD, memory(p.sd, eng, p.scratch.data())});
  p.prim.execute(strm, args);
}

struct CandSpec { const char* name; bool mm; int64_t rcap, ccap; bool even = false; bool pad = false; };  // pad: see gemm_one
std::vector<CandSpec> cands;
int NCand = 0;
using Cand = int;
const int SgemmBlocks = 0, MatmulBlocks = 1;

void gemm_one(Cand cand, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const bool whole = m * n * k < (int64_t{1} << 18);
  const CandSpec& cs = cands[cand];
  int64_t rows = whole ? 1 : (m + cs.rcap - 1) / cs.rcap, cols = whole ? 1 : (n + cs.ccap - 1) / cs.ccap;
  if (cs.even && rows * cols % 2 == 1 && m * n * k >= (int64_t{1} << 22)) (m * cols >= n * rows ? rows : cols) *= 2;
  const bool mm = cs.mm;
  for (int64_t i = 0; i < rows * cols; ++i) {
    auto [r0, r1] = piece(m, rows, i / cols);
    auto [c0, c1] = piece(n, cols, i % cols);
    const float* ap = ta ? a + r0 : a + r0 * lda;
    const float* bp = tb ? b + c0 * ldb : b + c0;
    float* cp = c + r0 * ldc + c0;
    // pad: an operand whose rows lie 4 KiB apart that the no-copy kernel
    // streams (B in NN, A in TN) copied, block by block, to rows 64 bytes longer.
    if (cs.pad && ((ta && !tb && lda % 1024 == 0) || (!ta && !tb && ldb % 1024 == 0))) {
      thread_local std::vector<float> tmp;
      if (ta) {  // A stored K x M: copy columns r0..r1 (K rows)
        const int64_t w = r1 - r0, ld = w + 16;
        tmp.resize(k * ld);
        for (int64_t p = 0; p < k; ++p) std::memcpy(tmp.data() + p * ld, a + p * lda + r0, w * 4);
        dnnl_sgemm('T', 'N', w, c1 - c0, k, alpha, tmp.data(), ld, bp, ldb, beta, cp, ldc);
      } else {  // B stored K x N: copy columns c0..c1
        const int64_t w = c1 - c0, ld = w + 16;
        tmp.resize(k * ld);
        for (int64_t p = 0; p < k; ++p) std::memcpy(tmp.data() + p * ld, b + p * ldb + c0, w * 4);
        dnnl_sgemm('N', 'N', r1 - r0, w, k, alpha, ap, lda, tmp.data(), ld, beta, cp, ldc);
      }
      continue;
    }
    if (mm) {
      MatmulPrim& p = get_prim(ta, tb, r1 - r0, c1 - c0, k, lda, ldb, ldc, alpha, beta, true);
      run_matmul(p, ap, bp, cp, true);
    } else {
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', r1 - r0, c1 - c0, k, alpha, ap, lda, bp, ldb, beta, cp, ldc);
    }
  }
}

struct Buffers {
  std::vector<float> a, b, c;
};

int main(int argc, char** argv) {
  omp_set_num_threads(1);
  const int64_t W = 1 << 30;
  cands = {{"sgemm/512", false, 512, 512},       {"matmul/512", true, 512, 512},
           {"sgemm/whole", false, W, W},          {"matmul/whole", true, W, W},
           {"sgemm/1024even", false, 1024, 1024, true}, {"matmul/1024even", true, 1024, 1024, true},
           {"sgemm/512pad", false, 512, 512, false, true}};
  if (getenv("CANDS")) {
    std::vector<CandSpec> keep;
    for (auto& c : cands) if (strstr(getenv("CANDS"), c.name)) keep.push_back(c);
    cands = keep;
  }
  NCand = cands.size();
  int rounds = argc > 1 ? atoi(argv[1]) : 7;
  double target = argc > 2 ? atof(argv[2]) : 0.12;
  std::vector<Prod> prods;
  // W2: affine layers (W stored (in, out)); 6 blocks. fwd NN + bias (beta 1),
  // dx = dy W^T NT, dW = x^T dy TN (K = 2048).
  for (auto [in, out] : std::vector<std::pair<int, int>>{{256, 768}, {256, 256}, {256, 1024}, {1024, 256}}) {
    const std::string s = std::to_string(in) + "->" + std::to_string(out);
    prods.push_back({"W2 fwd " + s, false, false, 2048, out, in, 1.f, 1.f, 1, 6, "W2"});
    prods.push_back({"W2 dx  " + s, false, true, 2048, in, out, 1.f, 0.f, 1, 6, "W2"});
    prods.push_back({"W2 dW  " + s, true, false, in, out, 2048, 1.f, 0.f, 1, 6, "W2"});
  }
  // W2's LM head: linear (W (out, in)): fwd NT, dx NN, dW = dy^T x TN.
  prods.push_back({"W2 fwd head", false, true, 2048, 256, 256, 1.f, 0.f, 1, 1, "W2"});
  prods.push_back({"W2 dx  head", false, false, 2048, 256, 256, 1.f, 0.f, 1, 1, "W2"});
  prods.push_back({"W2 dW  head", true, false, 256, 256, 2048, 1.f, 0.f, 1, 1, "W2"});
  // dW accumulating (beta 1)
  prods.push_back({"dW beta1 256->768", true, false, 256, 768, 2048, 1.f, 1.f, 1, 0, "extra"});
  prods.push_back({"dW beta1 1024->256", true, false, 1024, 256, 2048, 1.f, 1.f, 1, 0, "extra"});
  // W4: Llama linear layers (W (out, in)), no bias: fwd NT, dx NN, dW TN.
  for (auto [in, out, cnt] : std::vector<std::tuple<int, int, int>>{{384, 384, 2}, {384, 1024, 2}, {1024, 384, 1}}) {
    const std::string s = std::to_string(in) + "->" + std::to_string(out);
    prods.push_back({"W4 fwd " + s, false, true, 2048, out, in, 1.f, 0.f, 1, double(cnt), "W4"});
    prods.push_back({"W4 dx  " + s, false, false, 2048, in, out, 1.f, 0.f, 1, double(cnt), "W4"});
    prods.push_back({"W4 dW  " + s, true, false, out, in, 2048, 1.f, 0.f, 1, double(cnt), "W4"});
  }
  // a 768-wide GPT block at 1024 tokens (the tables above this section of docs/gemm.md)
  prods.push_back({"768w 1024x2304x768 NT", false, true, 1024, 2304, 768, 1.f, 0.f, 1, 1, "768w"});
  prods.push_back({"768w 1024x768x2304 NN", false, false, 1024, 768, 2304, 1.f, 0.f, 1, 1, "768w"});
  prods.push_back({"768w 2304x768x1024 TN", true, false, 2304, 768, 1024, 1.f, 0.f, 1, 1, "768w"});
  prods.push_back({"768w 256x1024x1024 NN", false, false, 256, 1024, 1024, 1.f, 0.f, 1, 1, "768w"});
  // per-head: 64 products each
  prods.push_back({"heads QK^T 128x128x64 a=.125", false, true, 128, 128, 64, 0.125f, 0.f, 64, 1, "heads"});
  prods.push_back({"heads PV 128x64x128", false, false, 128, 64, 128, 1.f, 0.f, 64, 1, "heads"});
  prods.push_back({"heads dS^T Q 128x64x128 TN", true, false, 128, 64, 128, 1.f, 0.f, 64, 1, "heads"});

  std::vector<Buffers> buf(prods.size());
  for (size_t p = 0; p < prods.size(); ++p) {
    const Prod& q = prods[p];
    const size_t asz = q.m * q.k * q.batch, bsz = q.k * q.n * q.batch, csz = q.m * q.n * q.batch;
    buf[p].a.resize(asz);
    buf[p].b.resize(bsz);
    buf[p].c.resize(csz);
    for (size_t i = 0; i < asz; ++i) buf[p].a[i] = float((i * 7919) % 1000) / 1000.f - 0.5f;
    for (size_t i = 0; i < bsz; ++i) buf[p].b[i] = float((i * 104729) % 1000) / 1000.f - 0.5f;
    std::fill(buf[p].c.begin(), buf[p].c.end(), 0.f);
  }
  auto call = [&](size_t p, Cand cand) {
    const Prod& q = prods[p];
    const int64_t lda = q.ta ? q.m : q.k, ldb = q.tb ? q.k : q.n, ldc = q.n;
    for (int i = 0; i < q.batch; ++i) {
      gemm_one(cand, q.ta, q.tb, q.m, q.n, q.k, q.alpha, buf[p].a.data() + i * q.m * q.k, lda,
               buf[p].b.data() + i * q.k * q.n, ldb, q.beta, buf[p].c.data() + i * q.m * q.n, ldc);
    }
  };
  // Warm up, print impl strings, check agreement.
  std::vector<std::vector<float>> ref(prods.size());
  for (size_t p = 0; p < prods.size(); ++p) {
    const Prod& q = prods[p];
    std::vector<std::vector<float>> out(NCand);
    for (int c = 0; c < NCand; ++c) {
      std::fill(buf[p].c.begin(), buf[p].c.end(), 0.25f);
      call(p, c);
      out[c] = buf[p].c;
    }
    double maxdiff = 0;
    for (int c = 1; c < NCand; ++c)
      for (size_t i = 0; i < out[0].size(); ++i) maxdiff = std::max(maxdiff, double(std::fabs(out[c][i] - out[0][i])));
    std::string impls;
    for (auto& [key, pr] : cache) {
      if (std::get<0>(key) == q.ta && std::get<1>(key) == q.tb && std::get<4>(key) == q.k && std::get<8>(key) == q.alpha &&
          std::get<9>(key) == q.beta && impls.find(pr->impl) == std::string::npos)
        impls += pr->impl + " ";
    }
    printf("# %-30s maxdiff %.2e impl %s\n", q.name.c_str(), maxdiff, impls.c_str());
  }
  // reps per product from a calibration call
  std::vector<int> reps(prods.size());
  for (size_t p = 0; p < prods.size(); ++p) {
    double t0 = cpu_now();
    call(p, SgemmBlocks);
    double dt = cpu_now() - t0;
    reps[p] = std::max(1, int(target / dt));
  }
  // times[p][c][round]
  std::vector<std::vector<std::vector<double>>> times(prods.size(), std::vector<std::vector<double>>(NCand));
  for (int r = 0; r < rounds; ++r) {
    for (size_t p = 0; p < prods.size(); ++p) {
      for (int ci = 0; ci < NCand; ++ci) {
        const int c = (ci + r) % NCand;  // alternate the order
        double t0 = cpu_now();
        for (int i = 0; i < reps[p]; ++i) call(p, c);
        times[p][c].push_back((cpu_now() - t0) / reps[p]);
      }
    }
    fprintf(stderr, "round %d done\n", r);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  printf("| product | M x N x K op |");
  for (int c = 0; c < NCand; ++c) printf(" %s |", cands[c].name);
  printf(" matmul/512 vs sgemm/512 |\n");
  
  std::map<std::string, std::vector<double>> group_t;  // per group per cand
  std::map<std::string, double> gflops;
  std::map<std::string, std::vector<double>> gtime;
  for (size_t p = 0; p < prods.size(); ++p) {
    const Prod& q = prods[p];
    const double flops = 2.0 * q.m * q.n * q.k * q.batch;
    printf("| %s | %ldx%ldx%ld %c%c%s |", q.name.c_str(), long(q.m), long(q.n), long(q.k), q.ta ? 'T' : 'N',
           q.tb ? 'T' : 'N', q.beta != 0 ? " b=1" : "");
    std::vector<double> med(NCand);
    for (int c = 0; c < NCand; ++c) {
      med[c] = median(times[p][c]);
      printf(" %.1f |", flops / med[c] * 1e-9);
    }
    printf(" %+.1f%% |\n", (med[SgemmBlocks] / med[MatmulBlocks] - 1) * 100);
    if (q.weight > 0) {
      gflops[q.group] += flops * q.weight;
      auto& g = gtime[q.group];
      g.resize(NCand);
      for (int c = 0; c < NCand; ++c) g[c] += med[c] * q.weight;
    }
  }
  for (auto& [g, f] : gflops) {
    printf("| aggregate %s (step-weighted) | |", g.c_str());
    for (int c = 0; c < NCand; ++c) printf(" %.1f |", f / gtime[g][c] * 1e-9);
    printf(" %+.1f%% |\n", (gtime[g][SgemmBlocks] / gtime[g][MatmulBlocks] - 1) * 100);
  }
}
