#include "worker/sync/drift.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

absl::Status Annotate(const absl::Status& s, const char* what) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("drift check: ", what, " failed: ", s.message()));
}

// max |a - b|, NaN if either side has a NaN (a plain max would drop it).
double MaxAbsDiff(const float* a, const float* b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(d)) return std::nan("");
    if (d > worst) worst = d;
  }
  return worst;
}

// NaN ranks above every number, so a diverged tensor is the one reported.
bool Worse(double a, double b) { return (std::isnan(a) && !std::isnan(b)) || a > b; }

}  // namespace

absl::StatusOr<DriftResult> MeasureDrift(Collective* comm, const std::vector<ParameterInfo>& infos,
                                         const std::vector<const float*>& params,
                                         const DriftOptions& opts) {
  if (comm == nullptr) return absl::InvalidArgumentError("drift check: comm is null");
  if (comm->memory_kind() != MemoryKind::kHost) {
    return absl::UnimplementedError("drift check: parameters must be in host memory");
  }
  if (infos.size() != params.size() || infos.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("drift check: ", infos.size(),
                                                   " parameter infos but ", params.size(),
                                                   " parameter pointers (need >= 1, equal)"));
  }
  size_t total = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    if (params[i] == nullptr && infos[i].count > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("drift check: parameter '", infos[i].name, "' has no data"));
    }
    total += infos[i].count;
  }
  CollectiveOptions copts;
  copts.timeout = opts.timeout;
  copts.bucket = kTagDrift;

  // Rank 0's parameters, packed: one broadcast instead of one per tensor.
  std::vector<float> root(total);
  if (comm->rank() == 0) {
    size_t off = 0;
    for (size_t i = 0; i < infos.size(); ++i) {
      std::memcpy(root.data() + off, params[i], infos[i].count * sizeof(float));
      off += infos[i].count;
    }
  }
  if (opts.ledger != nullptr) {
    opts.ledger->Record(CollectiveKind::kBroadcast, kTagDrift, total, DataType::kFloat32);
  }
  RETURN_IF_ERROR(Annotate(
      comm->Broadcast(TensorView{root.data(), total, DataType::kFloat32}, 0, copts)->Wait(),
      "broadcast of rank 0's parameters"));

  const size_t n = infos.size();
  std::vector<float> local(n);
  DriftResult result;
  size_t off = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = MaxAbsDiff(params[i], root.data() + off, infos[i].count);
    off += infos[i].count;
    local[i] = static_cast<float>(d);
    if (Worse(d, result.local_max_drift)) result.local_max_drift = d;
  }
  // Every rank's per-tensor maxima, so every rank returns the same verdict.
  const int world = comm->world_size();
  std::vector<float> all(n * world);
  if (opts.ledger != nullptr) {
    opts.ledger->Record(CollectiveKind::kAllGather, kTagDrift, n, DataType::kFloat32);
  }
  RETURN_IF_ERROR(Annotate(comm->AllGather(TensorView{local.data(), n, DataType::kFloat32},
                                           TensorView{all.data(), all.size(), DataType::kFloat32},
                                           copts)
                               ->Wait(),
                           "all-gather of per-tensor drift"));
  result.per_parameter.assign(n, 0.0);
  size_t worst_param = 0;
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const double d = all[r * n + i];
      if (Worse(d, result.per_parameter[i])) result.per_parameter[i] = d;
      if (Worse(d, result.max_drift)) {
        result.max_drift = d;
        result.worst_rank = r;
        worst_param = i;
      }
    }
  }
  result.worst_parameter = infos[worst_param].name;
  return result;
}

}  // namespace ringleader
