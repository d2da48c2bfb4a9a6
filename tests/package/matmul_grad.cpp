// A program outside remat's tree that builds remat as its subdirectory
// (tests/package/run.sh): d(sum(A B))/dA = 1 B^T, checked by hand.
#include <cstdio>

#include "engine/factory.h"
#include "ops/matmul.h"
#include "ops/reduce.h"

int main() {
  using namespace remat;
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}).requires_grad_();
  const Tensor b = from_vector(std::vector<float>{5, 6, 7, 8}, {2, 2});
  sum(matmul(a, b)).backward();
  // each row of dA is B's row sums: (5 + 6, 7 + 8)
  const float* da = a.grad().data<float>();  // (2, 2), dense
  std::printf("remat as a subdirectory: dA = [[%g, %g], [%g, %g]]\n", da[0], da[1], da[2], da[3]);
  return da[0] == 11 && da[1] == 15 && da[2] == 11 && da[3] == 15 ? 0 : 1;
}
