// Does compute-sanitizer's initcheck see the stores of cuBLAS's GEMM kernels?
//
// C = A * B (cublasGemmEx, fp32 output, fp32 compute, beta 0, so every element of C is written)
// into cudaMalloc'd memory that nothing wrote before, then a kernel reads every element of C, and
// the host compares C with a reference computed on the CPU. The inputs are small multiples of
// 1/8, so the products and their sums are exact in bf16 and in fp32: the difference must be 0.
//
// Under `compute-sanitizer --tool initcheck`: if the probe's values are exact but initcheck
// reports uninitialized reads in Sum, the reads saw values the GEMM wrote, so initcheck did not
// track the GEMM's stores — a limitation of the tool, not a bug of the code that reads C. On an
// H100 (CUDA 13.0) that is what the bf16 GEMM shows (36,864 reports over both shapes); the fp32
// GEMM, and the bf16 GEMM into C zeroed first, are clean. deploy/gpu_check.sh runs it before
// initcheck on the trainer suite (docs/gpu.md, "What the GPU runs found").
//
//   cublas_initcheck_probe bf16|fp32 [zero]
//     bf16|fp32  the type of A and B (C is fp32 either way; bf16 is GpuMlp's mixed precision)
//     zero       cudaMemset C to 0 before the GEMM (the control: initcheck must then be clean)
//
// Prints one line per shape with max |C - reference|. Exit status: 0 every value exact, 1 a value
// differs, 2 a CUDA or cuBLAS call failed or the arguments are wrong.
//
// A diagnostic, not product code: it uses the legacy default stream (synchronous copies), which
// //tests/build:gpu_stream_lint_test refuses in the trainer itself.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

// Returns 2 from the enclosing function when a CUDA or cuBLAS call fails (both succeed with 0).
#define PROBE_CHECK(expr)                                                          \
  do {                                                                             \
    const int probe_result = static_cast<int>(expr);                               \
    if (probe_result != 0) {                                                       \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #expr,   \
                   probe_result);                                                  \
      return 2;                                                                    \
    }                                                                              \
  } while (0)

// Reads every element of c (what initcheck checks) and sums them into *out.
__global__ void Sum(const float* c, size_t n, float* out) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, c[i]);
}

struct Shape {
  int m, n, k;
};

// One GEMM of the given shape (column-major, no transposes); 0, 1 or 2 as the exit status.
int Run(bool bf16, bool zero, Shape s) {
  const int m = s.m, n = s.n, k = s.k;
  std::vector<float> a(m * k), b(k * n), reference(m * n, 0.f);
  for (int i = 0; i < m * k; ++i) a[i] = ((i * 37) % 17 - 8) / 8.0f;
  for (int i = 0; i < k * n; ++i) b[i] = ((i * 11) % 13 - 6) / 8.0f;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      for (int p = 0; p < k; ++p) reference[i + j * m] += a[i + p * m] * b[p + j * k];
    }
  }
  const size_t element = bf16 ? 2 : 4;
  void* da = nullptr;
  void* db = nullptr;
  float* dc = nullptr;
  float* dsum = nullptr;
  PROBE_CHECK(cudaMalloc(&da, m * k * element));
  PROBE_CHECK(cudaMalloc(&db, k * n * element));
  PROBE_CHECK(cudaMalloc(&dc, m * n * sizeof(float)));  // never written unless `zero`
  PROBE_CHECK(cudaMalloc(&dsum, sizeof(float)));
  PROBE_CHECK(cudaMemset(dsum, 0, sizeof(float)));
  if (zero) PROBE_CHECK(cudaMemset(dc, 0, m * n * sizeof(float)));
  if (bf16) {
    std::vector<__nv_bfloat16> ha(m * k), hb(k * n);
    for (int i = 0; i < m * k; ++i) ha[i] = __float2bfloat16(a[i]);
    for (int i = 0; i < k * n; ++i) hb[i] = __float2bfloat16(b[i]);
    PROBE_CHECK(cudaMemcpy(da, ha.data(), m * k * element, cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(db, hb.data(), k * n * element, cudaMemcpyHostToDevice));
  } else {
    PROBE_CHECK(cudaMemcpy(da, a.data(), m * k * element, cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(db, b.data(), k * n * element, cudaMemcpyHostToDevice));
  }
  cublasHandle_t handle;
  PROBE_CHECK(cublasCreate(&handle));
  const float alpha = 1, beta = 0;
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  PROBE_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da, type, m, db,
                           type, k, &beta, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT));
  Sum<<<(m * n + 255) / 256, 256>>>(dc, m * n, dsum);
  PROBE_CHECK(cudaGetLastError());
  PROBE_CHECK(cudaDeviceSynchronize());
  std::vector<float> c(m * n);
  PROBE_CHECK(cudaMemcpy(c.data(), dc, m * n * sizeof(float), cudaMemcpyDeviceToHost));
  double max_error = 0;
  for (int i = 0; i < m * n; ++i) {
    max_error = std::fmax(max_error, std::fabs(c[i] - reference[i]));
  }
  std::printf("%s m=%d n=%d k=%d zero=%d: max |C - reference| = %g\n", bf16 ? "bf16" : "fp32",
              m, n, k, zero ? 1 : 0, max_error);
  PROBE_CHECK(cublasDestroy(handle));
  PROBE_CHECK(cudaFree(da));
  PROBE_CHECK(cudaFree(db));
  PROBE_CHECK(cudaFree(dc));
  PROBE_CHECK(cudaFree(dsum));
  return max_error == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool bf16 = argc > 1 && std::strcmp(argv[1], "bf16") == 0;
  const bool fp32 = argc > 1 && std::strcmp(argv[1], "fp32") == 0;
  const bool zero = argc > 2 && std::strcmp(argv[2], "zero") == 0;
  if (!(bf16 || fp32) || argc > 3 || (argc == 3 && !zero)) {
    std::fprintf(stderr, "usage: %s bf16|fp32 [zero]\n", argv[0]);
    return 2;
  }
  int worst = 0;
  // The trainer suite's bf16 test's first layer (16 out, batch 8, 12 in), then a larger GEMM.
  for (const Shape shape : {Shape{16, 8, 12}, Shape{256, 128, 64}}) {
    const int result = Run(bf16, zero, shape);
    if (result > worst) worst = result;
  }
  return worst;
}
