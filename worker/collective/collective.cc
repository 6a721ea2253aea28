#include "worker/collective/collective.h"

namespace ringleader {

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return 4;
    case DataType::kBFloat16:
      return 2;
    case DataType::kUInt8:
      return 1;
  }
  return 0;  // unreachable: every enumerator is handled above
}

const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "fp32";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kUInt8:
      return "uint8";
  }
  return "?";  // unreachable
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
  }
  return "?";  // unreachable
}

namespace {

// Host backends' mark: the caller's compute is done when it issues an operation.
class HostComputeMark : public ComputeMark {};

}  // namespace

absl::StatusOr<std::shared_ptr<const ComputeMark>> Collective::MarkCompute() {
  static const std::shared_ptr<const ComputeMark>* const mark =
      new std::shared_ptr<const ComputeMark>(std::make_shared<HostComputeMark>());
  return *mark;
}

const char* CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kNone:
      return "nothing";
    case CollectiveKind::kAllReduce:
      return "allreduce";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kAllGather:
      return "allgather";
    case CollectiveKind::kReduceScatter:
      return "reducescatter";
    case CollectiveKind::kBarrier:
      return "barrier";
  }
  return "unknown";
}

}  // namespace ringleader
