#include "client/run_verdict.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/format.h"

namespace ringleader {
namespace {

// Steps remembered per rank: the last common step is recent (ranks move in lockstep), so a
// window keeps memory flat on long runs.
constexpr size_t kStepsKept = 4096;

}  // namespace

void RunObserver::Observe(const v1::JobStatus& job) {
  if (job.generation() < generation_) return;
  if (job.generation() > generation_) {
    generation_ = job.generation();
    synced_norms_.clear();
    measured_.clear();
    drift_ = DriftCheck();
  }
  for (const v1::RankStatus& rank : job.ranks()) {
    if (!rank.has_last_step()) continue;
    const v1::StepReport& step = rank.last_step();
    std::map<uint64_t, double>& norms = synced_norms_[rank.rank()];
    norms[step.step()] = step.synced_grad_norm();
    if (norms.size() > kStepsKept) norms.erase(norms.begin());
    if (step.has_drift()) {
      // Count each (rank, step) measurement once although statuses repeat it.
      if (!measured_.insert({rank.rank(), step.step()}).second) continue;
      ++drift_.measurements;
      const bool first = !drift_.checked;
      drift_.checked = true;
      if (first || step.drift() > drift_.max_drift) {
        drift_.max_drift = step.drift();
        drift_.rank = rank.rank();
        drift_.step = step.step();
        drift_.parameter = step.drift_parameter();
      }
    }
  }
}

RunVerdict RunObserver::Conclude(const v1::JobStatus& final_job) {
  Observe(final_job);
  RunVerdict verdict;
  verdict.state = final_job.state();
  if (final_job.epochs_size() > 0) {
    const v1::EpochReport& last = *std::max_element(
        final_job.epochs().begin(), final_job.epochs().end(),
        [](const v1::EpochReport& a, const v1::EpochReport& b) { return a.epoch() < b.epoch(); });
    verdict.has_accuracy = true;
    verdict.final_epoch = last.epoch();
    verdict.final_accuracy = last.test_accuracy();
  }

  // The last step every rank of the job reported.
  GradNormCheck& grads = verdict.grad_norms;
  const size_t world = std::max<size_t>(final_job.ranks_size(), final_job.spec().world_size());
  if (world > 0 && synced_norms_.size() == world) {
    std::set<uint64_t> common;
    bool first = true;
    for (const auto& [rank, norms] : synced_norms_) {
      std::set<uint64_t> steps;
      for (const auto& [step, norm] : norms) {
        if (first || common.count(step) > 0) steps.insert(step);
      }
      common = std::move(steps);
      first = false;
    }
    if (!common.empty()) {
      grads.checked = true;
      grads.step = *common.rbegin();
      double low = 0, high = 0;
      bool any = false;
      for (const auto& [rank, norms] : synced_norms_) {
        const double norm = norms.at(grads.step);
        grads.norms[rank] = norm;
        low = any ? std::min(low, norm) : norm;
        high = any ? std::max(high, norm) : norm;
        any = true;
      }
      const double scale = std::max(std::fabs(low), std::fabs(high));
      grads.relative_difference = scale == 0 ? 0 : (high - low) / scale;
      // NaN norms compare false here and therefore fail.
      grads.passed = grads.relative_difference <= kGradNormTolerance;
    }
  }

  verdict.drift = drift_;
  verdict.drift.passed = !drift_.checked || drift_.max_drift == 0;
  verdict.passed = verdict.state == v1::JOB_STATE_SUCCEEDED && grads.passed && verdict.drift.passed;
  return verdict;
}

std::string FormatVerdict(const RunVerdict& verdict) {
  std::string text = absl::StrCat("verdict\n  state           ", JobStateName(verdict.state),
                                  verdict.state == v1::JOB_STATE_SUCCEEDED ? "" : "  [FAIL]", "\n");
  absl::StrAppend(&text, "  final accuracy  ",
                  verdict.has_accuracy ? absl::StrFormat("%.4f (epoch %d)", verdict.final_accuracy,
                                                         verdict.final_epoch)
                                       : std::string("- (no epoch finished)"),
                  "\n");
  const GradNormCheck& grads = verdict.grad_norms;
  if (!grads.checked) {
    absl::StrAppend(&text, "  grad norms      not checked (no step reported by every rank)\n");
  } else if (grads.passed) {
    absl::StrAppend(&text,
                    absl::StrFormat("  grad norms      equal across %d ranks at step %d (relative "
                                    "difference %.3g <= %.0e)  [ok]\n",
                                    grads.norms.size(), grads.step, grads.relative_difference,
                                    kGradNormTolerance));
  } else {
    std::string norms;
    for (const auto& [rank, norm] : grads.norms) {
      absl::StrAppend(&norms, norms.empty() ? "" : ", ", "rank ", rank, " ",
                      FormatNumber(norm, 10));
    }
    absl::StrAppend(
        &text, absl::StrFormat("  grad norms      DIFFER at step %d: %s (relative difference "
                               "%.3g > %.0e)  [FAIL]\n",
                               grads.step, norms, grads.relative_difference, kGradNormTolerance));
  }
  const DriftCheck& drift = verdict.drift;
  if (!drift.checked) {
    absl::StrAppend(&text, "  max drift       not checked (no drift measurement reported)\n");
  } else if (drift.passed) {
    absl::StrAppend(&text, absl::StrFormat("  max drift       0 over %d measurements  [ok]\n",
                                           drift.measurements));
  } else {
    absl::StrAppend(&text,
                    absl::StrFormat("  max drift       %.3g on rank %d at step %d%s (expected "
                                    "exactly 0)  [FAIL]\n",
                                    drift.max_drift, drift.rank, drift.step,
                                    drift.parameter.empty() ? "" : " in " + drift.parameter));
  }
  absl::StrAppend(&text, "result: ", verdict.passed ? "PASS" : "FAIL", "\n");
  return text;
}

}  // namespace ringleader
