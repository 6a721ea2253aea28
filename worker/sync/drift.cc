#include "worker/sync/drift.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringleader {
namespace {

absl::Status Annotate(const absl::Status& s, const char* what) {
  if (s.ok()) return s;
  return WithMessage(s, absl::StrCat("drift check: ", what, " failed: ", s.message()));
}

// NaN ranks above every number, so a diverged tensor is the one reported.
bool Worse(double a, double b) { return (std::isnan(a) && !std::isnan(b)) || a > b; }

}  // namespace

absl::StatusOr<DriftResult> MeasureDrift(Collective* comm, const std::vector<ParameterInfo>& infos,
                                         const std::vector<const float*>& params,
                                         const DriftOptions& opts) {
  if (comm == nullptr) return absl::InvalidArgumentError("drift check: comm is null");
  RETURN_IF_ERROR(CheckMemoryMatches(*comm, opts.memory, "drift check"));
  TensorMemory* memory = opts.memory != nullptr ? opts.memory : HostMemory();
  if (infos.size() != params.size() || infos.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("drift check: ", infos.size(),
                                                   " parameter infos but ", params.size(),
                                                   " parameter pointers (need >= 1, equal)"));
  }
  const size_t n = infos.size();
  size_t total = 0;
  std::vector<size_t> counts(n);
  for (size_t i = 0; i < n; ++i) {
    if (params[i] == nullptr && infos[i].count > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("drift check: parameter '", infos[i].name, "' has no data"));
    }
    counts[i] = infos[i].count;
    total += infos[i].count;
  }
  CollectiveOptions copts;
  copts.timeout = opts.timeout;
  copts.bucket = kTagDrift;

  // Rank 0's parameters, packed into scratch memory next to the parameters: one broadcast
  // instead of one per tensor.
  ASSIGN_OR_RETURN(TensorBuffer<float> root, TensorBuffer<float>::Allocate(memory, total));
  std::vector<const float*> root_tensors(n);
  size_t off = 0;
  for (size_t i = 0; i < n; ++i) {
    root_tensors[i] = root.data() + off;
    if (comm->rank() == 0) {
      RETURN_IF_ERROR(
          Annotate(memory->Copy(root.data() + off, params[i], counts[i] * sizeof(float)),
                   "packing rank 0's parameters"));
    }
    off += counts[i];
  }
  if (opts.ledger != nullptr) {
    opts.ledger->Record(CollectiveKind::kBroadcast, kTagDrift, total, DataType::kFloat32);
  }
  RETURN_IF_ERROR(Annotate(
      comm->Broadcast(TensorView{root.data(), total, DataType::kFloat32}, 0, copts)->Wait(),
      "broadcast of rank 0's parameters"));

  // max|W_r - W_0| per tensor where the parameters live; only n values come back.
  std::vector<double> diffs;
  RETURN_IF_ERROR(Annotate(memory->MaxAbsDiff(params, root_tensors, counts, &diffs),
                           "comparing with rank 0's parameters"));
  DriftResult result;
  const int world = comm->world_size();
  ASSIGN_OR_RETURN(StagedBytes local, StagedBytes::Create(memory, n * sizeof(float)));
  ASSIGN_OR_RETURN(StagedBytes all, StagedBytes::Create(memory, n * world * sizeof(float)));
  for (size_t i = 0; i < n; ++i) {
    const float d = static_cast<float>(diffs[i]);
    std::memcpy(local.host() + i * sizeof(float), &d, sizeof(float));
    if (Worse(diffs[i], result.local_max_drift)) result.local_max_drift = diffs[i];
  }
  // Every rank's per-tensor maxima, so every rank returns the same verdict.
  RETURN_IF_ERROR(Annotate(local.Upload(), "staging per-tensor drift"));
  if (opts.ledger != nullptr) {
    opts.ledger->Record(CollectiveKind::kAllGather, kTagDrift, n, DataType::kFloat32);
  }
  absl::Status gathered =
      comm->AllGather(TensorView{local.wire(), n, DataType::kFloat32},
                      TensorView{all.wire(), n * world, DataType::kFloat32}, copts)
          ->Wait();
  if (gathered.ok()) gathered = all.Download();
  RETURN_IF_ERROR(Annotate(gathered, "all-gather of per-tensor drift"));
  std::vector<float> all_values(n * world);
  std::memcpy(all_values.data(), all.host(), all.size());
  result.per_parameter.assign(n, 0.0);
  size_t worst_param = 0;
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const double d = all_values[r * n + i];
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
