// Process-wide settings of the CPU math library (OpenBLAS) behind Mlp.
//
// OpenBLAS starts one thread per core by default. With several ranks on one host, or on a busy
// machine, those threads oversubscribe the cores and a training step gets slower, not faster
// (784-256-128-10, batch 64, on 2 cores shared with other work: about 2x slower with 2 threads
// than with 1), so the rank's main() sets 1 by default (--blas_threads; torchrun likewise sets
// OMP_NUM_THREADS=1 for each of several processes).
#ifndef RINGLEADER_WORKER_TRAINER_CPU_MATH_H_
#define RINGLEADER_WORKER_TRAINER_CPU_MATH_H_

namespace ringleader {

// Sets the number of threads each matrix multiply may use (>= 1; values below 1 mean 1).
// Process-wide; call from main() before training starts.
void SetCpuMathThreads(int threads);

// The current number of threads per matrix multiply.
int CpuMathThreads();

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_CPU_MATH_H_
