// The per-element update of torch.optim.SGD, shared by the CPU optimizer (sgd.cc) and the GPU
// trainer's CUDA kernel. Plain float arithmetic only (no std:: calls), so it compiles under nvcc
// as a __host__ __device__ function and gives the same result on both sides.
//
// torch.optim.SGD (single-tensor path), per element, in float32:
//   d_p = g + weight_decay * p
//   if momentum != 0:
//     buf = d_p                                      at the parameter's first step
//     buf = momentum * buf + (1 - dampening) * d_p   afterwards
//     d_p = nesterov ? d_p + momentum * buf : buf
//   p = p - lr * d_p
#ifndef RINGLEADER_WORKER_TRAINER_SGD_MATH_H_
#define RINGLEADER_WORKER_TRAINER_SGD_MATH_H_

#include "common/host_device.h"

namespace ringleader {

// Hyper-parameters of one update, as float (torch applies them to float32 tensors).
struct SgdElementParams {
  float lr = 0.0f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

// Updates one parameter element in place.
//   param:            the element (read and written)
//   grad:             its gradient
//   momentum_buffer:  its momentum buffer element; ignored (may be null) when momentum == 0
//   first_step:       true when the parameter's momentum buffer does not exist yet (torch's
//                     `momentum_buffer is None`); the buffer is then initialised to d_p
RL_HOST_DEVICE inline void SgdUpdateElement(float* param, float grad, float* momentum_buffer,
                                            bool first_step, const SgdElementParams& h) {
  float d_p = grad;
  if (h.weight_decay != 0.0f) d_p = d_p + h.weight_decay * (*param);
  if (h.momentum != 0.0f) {
    float buf;
    if (first_step) {
      buf = d_p;
    } else {
      buf = h.momentum * (*momentum_buffer) + (1.0f - h.dampening) * d_p;
    }
    *momentum_buffer = buf;
    d_p = h.nesterov ? d_p + h.momentum * buf : buf;
  }
  *param = *param - h.lr * d_p;
}

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_TRAINER_SGD_MATH_H_
