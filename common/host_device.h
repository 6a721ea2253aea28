// RL_HOST_DEVICE marks small inline functions that are compiled for the CPU and, when the file
// is built by nvcc, for the GPU as well, so CPU and GPU trainers share one piece of arithmetic.
#ifndef RINGLEADER_COMMON_HOST_DEVICE_H_
#define RINGLEADER_COMMON_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define RL_HOST_DEVICE __host__ __device__
#else
#define RL_HOST_DEVICE
#endif

#endif  // RINGLEADER_COMMON_HOST_DEVICE_H_
