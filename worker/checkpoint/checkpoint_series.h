// Transitional: this header moved to checkpoint/checkpoint_series.h; include that instead.
// Kept until the last includes of this path are gone (see worker/checkpoint/BUILD).
#ifndef RINGLEADER_WORKER_CHECKPOINT_CHECKPOINT_SERIES_H_
#define RINGLEADER_WORKER_CHECKPOINT_CHECKPOINT_SERIES_H_

#include "checkpoint/checkpoint_series.h"

#endif  // RINGLEADER_WORKER_CHECKPOINT_CHECKPOINT_SERIES_H_
