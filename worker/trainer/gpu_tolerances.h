// How closely the GPU trainer must track the CPU trainer, shared by the host tests (which
// calibrate the bf16 figures with HostReferenceMlp) and the GPU suite. See docs/gpu.md.
#ifndef RINGLEADER_WORKER_TRAINER_GPU_TOLERANCES_H_
#define RINGLEADER_WORKER_TRAINER_GPU_TOLERANCES_H_

namespace ringleader {
namespace gpu {

// fp32: cuBLAS and OpenBLAS add the products of a GEMM in different orders, so results agree to
// float rounding (~1e-7 relative per operation), compounded over a few steps. Checked:
// |gpu - cpu| <= atol + rtol * |cpu| for gradients, |gpu - cpu| <= param atol for parameters,
// relative difference <= rtol for the loss.
inline constexpr double kFp32Rtol = 1e-4;
inline constexpr double kFp32GradAtol = 1e-6;
inline constexpr double kFp32ParamAtol = 1e-5;

// bf16 mixed precision against the fp32 CPU trainer: every GEMM input is rounded to bfloat16
// (8-bit significand: up to 2^-9 ~ 0.2% relative per value), so losses and parameters differ by
// far more than fp32 rounding. Bounds for 10 SGD steps (lr 0.05, momentum 0.9, weight decay
// 5e-4) on the test model (layers 12-16-8-4, batch 8): the host bf16 emulation measures a loss
// difference of 3.2e-4 relative and a parameter difference of 2.1e-3 absolute (parameters are
// ~0.3 in size); the bounds leave about 5x margin.
inline constexpr double kBf16LossRtol = 5e-3;
inline constexpr double kBf16ParamAtol = 1e-2;

// bf16 GPU against the host bf16 emulation (same roundings, different summation order; an
// order change can flip one bf16 rounding, a 2^-8 relative step in one value).
inline constexpr double kBf16VsEmulationLossRtol = 5e-3;
inline constexpr double kBf16VsEmulationParamAtol = 5e-4;

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_GPU_TOLERANCES_H_
