// Transitional: this header moved to checkpoint/checkpoint.h; include that instead.
// Kept until the last includes of this path are gone (see worker/checkpoint/BUILD).
#ifndef RINGLEADER_WORKER_CHECKPOINT_CHECKPOINT_H_
#define RINGLEADER_WORKER_CHECKPOINT_CHECKPOINT_H_

#include "checkpoint/checkpoint.h"

#endif  // RINGLEADER_WORKER_CHECKPOINT_CHECKPOINT_H_
