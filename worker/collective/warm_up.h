// An operation a backend issues once while it connects the ranks, so the job's first real
// operation of that kind and size finds its connections already made.
//
// Why: NCCL 2.28 connects lazily by default (NCCL_RUNTIME_CONNECT=1), and not per communicator
// but per algorithm (ring, tree, NVLS, PAT, ...), the first time an operation selects that
// algorithm. The selection depends on the operation kind and its size in bytes (and on the data
// type and reduce op, which decide whether e.g. NVLS can run it): a one-float all-reduce
// connects what small all-reduces use, not necessarily what a 25 MiB bucket, a reduce-scatter
// or an all-gather will select. The rank lists what its job issues
// (worker/rank/collective_factory.h, WarmUpOperationsFor) and the NCCL backend runs each inside
// its init deadline (worker/collective/gpu/nccl_collective.h, NcclOptions::warm_up).
#ifndef RINGLEADER_WORKER_COLLECTIVE_WARM_UP_H_
#define RINGLEADER_WORKER_COLLECTIVE_WARM_UP_H_

#include <cstddef>

#include "worker/collective/collective.h"

namespace ringleader {

struct WarmUpOperation {
  // kAllReduce, kReduceScatter, kAllGather or kBroadcast.
  CollectiveKind kind = CollectiveKind::kAllReduce;
  // The operation's whole size in elements of `dtype`: the buffer of an all-reduce or broadcast,
  // the input of a reduce-scatter, the output of an all-gather (the backend rounds the last two
  // up to a multiple of the world size). At least 1.
  size_t elements = 1;
  DataType dtype = DataType::kFloat32;
  // For kAllReduce and kReduceScatter.
  ReduceOp op = ReduceOp::kSum;

  friend bool operator==(const WarmUpOperation& a, const WarmUpOperation& b) {
    return a.kind == b.kind && a.elements == b.elements && a.dtype == b.dtype && a.op == b.op;
  }
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_WARM_UP_H_
