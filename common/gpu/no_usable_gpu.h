// The prefix of every error that means "this machine (or this build) has no GPU we can use".
#ifndef RINGLEADER_COMMON_GPU_NO_USABLE_GPU_H_
#define RINGLEADER_COMMON_GPU_NO_USABLE_GPU_H_

namespace ringleader {
namespace gpu {

// Starts every FAILED_PRECONDITION message about a missing, unusable or unsupported GPU, so
// callers and tests can tell "fix the machine" from other failures.
inline constexpr char kNoUsableGpu[] = "no usable GPU: ";

}  // namespace gpu
}  // namespace ringleader

#endif  // RINGLEADER_COMMON_GPU_NO_USABLE_GPU_H_
