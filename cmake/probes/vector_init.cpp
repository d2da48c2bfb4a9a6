// Debian 12's g++ 12.2 with AVX-512 enabled builds this vector from one
// vpbroadcastq of 0.5 and prints "0.5 0.5 0.5 0.5" (issue 16); a correct
// compiler prints "0.5 0.5 0 0". cmake/arch.cmake runs it at configure time,
// and CTest runs it built with the project's flags (test build.vector_init).
#include <cstdio>
#include <vector>

int main() {
  std::vector<double> v{0.5, 0.5, 0, 0};
  for (double x : v) std::printf("%g ", x);
  std::printf("\n");
}
