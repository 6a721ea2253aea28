#include "worker/trainer/cpu_math.h"

#include <cblas.h>

namespace ringleader {

void SetCpuMathThreads(int threads) { openblas_set_num_threads(threads < 1 ? 1 : threads); }

int CpuMathThreads() { return openblas_get_num_threads(); }

}  // namespace ringleader
