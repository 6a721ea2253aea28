#include "coordinator/core/step_judge.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringleader {
namespace {

// |a - b| relative to the larger magnitude (0 when both are 0).
double RelativeDifference(double a, double b) {
  const double scale = std::max(std::fabs(a), std::fabs(b));
  return scale == 0 ? 0 : std::fabs(a - b) / scale;
}

// The lower median: with two ranks, the faster one's figure (the slow one is what we look for).
double Median(std::vector<float> v) {
  if (v.empty()) return 0;
  const size_t mid = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[mid];
}

std::string RankList(const std::vector<uint32_t>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ","));
}

}  // namespace

StepJudgeOptions StepJudgeOptionsFromSpec(const v1::JobSpec& spec) {
  StepJudgeOptions o;
  const v1::CheckSpec& checks = spec.checks();
  if (checks.has_grad_norm_rtol()) o.grad_norm_rtol = checks.grad_norm_rtol();
  if (checks.has_drift_tolerance()) o.drift_tolerance = checks.drift_tolerance();
  if (checks.has_straggler_factor()) o.straggler_factor = checks.straggler_factor();
  o.fail_on_desync = checks.on_desync() != "warn";
  o.samples_per_step = static_cast<double>(spec.batch_size()) *
                       std::max<uint32_t>(1, spec.sync().gradient_accumulation_steps()) *
                       spec.world_size();
  return o;
}

StepJudge::StepJudge(uint32_t world_size, StepJudgeOptions options)
    : world_(std::max<uint32_t>(world_size, 1)),
      options_(options),
      last_step_(world_, 0),
      loss_alarmed_(world_, false),
      window_compute_(world_),
      window_comm_(world_),
      window_step_(world_),
      window_caused_ms_(world_, 0),
      window_last_(world_, 0),
      straggler_streak_(world_, 0) {
  for (uint32_t r = 0; r < world_; ++r) {
    window_compute_[r].reserve(options_.straggler_window);
    window_comm_[r].reserve(options_.straggler_window);
    window_step_[r].reserve(options_.straggler_window);
  }
}

void StepJudge::Add(uint32_t rank, const v1::StepReport& report,
                    std::vector<v1::Alarm>* raised) {
  if (rank >= world_ || report.step() == 0) return;
  const uint64_t step = report.step();
  if (step <= last_step_[rank] || step < base_step_) return;  // repeated or already judged
  // Rows are kept for every step from the oldest unjudged one: a step far ahead would make
  // them all. With nothing pending (a resumed attempt's first step), judging starts there;
  // otherwise a step more than kMaxStepGap ahead is ignored (synchronous ranks are never that
  // far apart, and one forged report must not exhaust the coordinator's memory).
  if (step - base_step_ >= kMaxStepGap) {
    if (!pending_.empty()) return;
    base_step_ = step;
  }
  last_step_[rank] = step;

  if (!std::isfinite(report.loss()) && !loss_alarmed_[rank]) {
    loss_alarmed_[rank] = true;
    Raise(v1::Alarm::LOSS_NOT_FINITE, step, {rank}, "",
          absl::StrCat("step ", step, ": rank ", rank, "'s loss is ", report.loss(),
                       " (training diverged or the data holds NaN/Inf)"),
          raised);
  }

  while (pending_.size() <= step - base_step_) {
    Row row;
    row.ranks.resize(world_);
    pending_.push_back(std::move(row));
  }
  Row& row = pending_[step - base_step_];
  Figures& f = row.ranks[rank];
  f.present = true;
  f.loss = report.loss();
  f.local = report.local_grad_norm();
  f.synced = report.synced_grad_norm();
  f.has_drift = report.has_drift();
  f.drift = report.drift();
  f.digest = report.collective_digest();
  f.collectives = report.collectives();
  f.step_ms = static_cast<float>(report.step_ms());
  f.compute_ms = static_cast<float>(report.compute_ms());
  f.comm_ms = static_cast<float>(report.comm_ms());
  f.has_times = report.has_collective_times();
  f.first_collective = report.collective_times().first_sequence();
  f.times_us.assign(report.collective_times().duration_us().begin(),
                    report.collective_times().duration_us().end());
  if (report.has_drift()) {
    row.drift_tensor.resize(world_);
    row.drift_tensor[rank] = report.drift_parameter();
  }
  JudgeReadySteps(raised);
}

void StepJudge::JudgeReadySteps(std::vector<v1::Alarm>* raised) {
  const uint64_t ready_through = *std::min_element(last_step_.begin(), last_step_.end());
  while (!pending_.empty() && base_step_ <= ready_through) {
    Judge(base_step_, pending_.front(), raised);
    pending_.pop_front();
    ++base_step_;
  }
}

void StepJudge::Judge(uint64_t step, const Row& row, std::vector<v1::Alarm>* raised) {
  size_t present = 0;
  float slowest_ms = 0;
  for (const Figures& f : row.ranks) {
    if (!f.present) continue;
    ++present;
    slowest_ms = std::max(slowest_ms, f.step_ms);
  }
  if (present >= 2) {
    CheckDigests(step, row, raised);
    CheckNorms(step, row, raised);
    CheckDrift(step, row, raised);
  }

  // Straggler window (judged steps only; ranks missing a step simply contribute less).
  for (uint32_t r = 0; r < world_; ++r) {
    const Figures& f = row.ranks[r];
    if (!f.present || window_step_[r].size() >= options_.straggler_window) continue;
    window_compute_[r].push_back(f.compute_ms);
    window_comm_[r].push_back(f.comm_ms);
    window_step_[r].push_back(f.step_ms);
  }
  if (present >= 2) AddArrivals(row);
  if (window_fill_++ == 0) window_first_step_ = step;
  window_ms_ += slowest_ms;
  if (window_fill_ >= options_.straggler_window && window_ms_ >= options_.straggler_window_ms) {
    UpdateStragglers(step, raised);
  }

  ++judged_steps_;
  judged_step_ms_ += slowest_ms;
  verdict_.set_steps_judged(step);
  verdict_.set_last_step(step);
  FillFigures(row, verdict_.mutable_last());
  if (options_.samples_per_step > 0 && judged_step_ms_ > 0) {
    verdict_.set_samples_per_second(options_.samples_per_step * judged_steps_ /
                                    (judged_step_ms_ / 1000.0));
  }

  // A correctness alarm raised or repeated at this step makes it a bad step.
  bool bad_step = false;
  for (const v1::Alarm& a : alarms_) {
    if (a.last_step() == step && a.kind() != v1::Alarm::STRAGGLER) bad_step = true;
  }
  if (bad_step && verdict_.first_bad_step() == 0) {
    verdict_.set_first_bad_step(step);
    FillFigures(row, verdict_.mutable_first_bad());
  }
  v1::Verdict::Result result = v1::Verdict::PASS;
  for (const v1::Alarm& a : alarms_) {
    if (a.failed_job()) {
      result = v1::Verdict::FAIL;
      break;
    }
    result = v1::Verdict::WARN;
  }
  verdict_.set_result(result);
  ++revision_;
}

void StepJudge::CheckDigests(uint64_t step, const Row& row, std::vector<v1::Alarm>* raised) {
  // Group the ranks by (digest, collectives); one group = agreement.
  std::map<std::pair<uint64_t, uint32_t>, std::vector<uint32_t>> groups;
  for (uint32_t r = 0; r < world_; ++r) {
    if (row.ranks[r].present) {
      groups[{row.ranks[r].digest, row.ranks[r].collectives}].push_back(r);
    }
  }
  if (groups.size() < 2) return;
  size_t largest = 0;
  size_t largest_count = 0;
  for (const auto& [key, ranks] : groups) {
    if (ranks.size() > largest) {
      largest = ranks.size();
      largest_count = 1;
    } else if (ranks.size() == largest) {
      ++largest_count;
    }
  }
  std::vector<uint32_t> at_fault;
  std::vector<std::string> sides;
  for (const auto& [key, ranks] : groups) {
    // The ranks outside the one largest group (every rank when no group is the majority).
    if (largest_count > 1 || ranks.size() < largest) {
      at_fault.insert(at_fault.end(), ranks.begin(), ranks.end());
    }
    sides.push_back(absl::StrFormat("%s: %u collectives (digest %016x)", RankList(ranks),
                                    key.second, key.first));
  }
  std::sort(at_fault.begin(), at_fault.end());
  Raise(v1::Alarm::COLLECTIVE_MISMATCH, step, at_fault, "",
        absl::StrCat("step ", step, ": the ranks issued different collective sequences (",
                     absl::StrJoin(sides, "; "),
                     "): a rank took another code path (unused parameters, a rank-dependent "
                     "branch or config)"),
        raised);
}

void StepJudge::CheckNorms(uint64_t step, const Row& row, std::vector<v1::Alarm>* raised) {
  const double rtol = options_.grad_norm_rtol;
  std::vector<uint32_t> present;
  std::vector<float> synced;
  for (uint32_t r = 0; r < world_; ++r) {
    if (!row.ranks[r].present) continue;
    present.push_back(r);
    synced.push_back(static_cast<float>(row.ranks[r].synced));
  }
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (uint32_t r : present) {
    lo = std::min(lo, row.ranks[r].synced);
    hi = std::max(hi, row.ranks[r].synced);
  }
  const double spread = RelativeDifference(lo, hi);

  // A rank that issued no collective, or whose synced norm is its local norm while the synced
  // norms differ, did not synchronise its gradients.
  std::vector<uint32_t> no_collective;
  std::vector<uint32_t> unsynced;
  for (uint32_t r : present) {
    const Figures& f = row.ranks[r];
    if (f.collectives == 0) {
      no_collective.push_back(r);
    } else if (spread > rtol && RelativeDifference(f.synced, f.local) <= rtol) {
      unsynced.push_back(r);
    }
  }
  std::vector<std::string> values;
  for (uint32_t r : present) {
    values.push_back(absl::StrFormat("rank %u %.6g (local %.6g)", r, row.ranks[r].synced,
                                     row.ranks[r].local));
  }
  const std::string figures = absl::StrJoin(values, ", ");
  if (!no_collective.empty() || !unsynced.empty()) {
    std::vector<uint32_t> ranks = no_collective;
    ranks.insert(ranks.end(), unsynced.begin(), unsynced.end());
    std::sort(ranks.begin(), ranks.end());
    std::string why;
    if (ranks.size() == present.size()) {
      why = "no rank synchronised its gradients: ";
    } else {
      why = absl::StrCat(RankList(ranks), " did not synchronise its gradients: ");
    }
    std::vector<std::string> evidence;
    if (!no_collective.empty()) {
      evidence.push_back(absl::StrCat(RankList(no_collective), " issued no collective"));
    }
    if (!unsynced.empty()) {
      evidence.push_back(absl::StrCat(RankList(unsynced),
                                      " stepped with its local gradients (synced norm = local "
                                      "norm) while the synced norms differ"));
    }
    Raise(v1::Alarm::NOT_SYNCHRONIZED, step, ranks, "",
          absl::StrCat("step ", step, ": ", why, absl::StrJoin(evidence, "; "), " (", figures,
                       "): is the loss computed on the unwrapped model, outside "
                       "DistributedDataParallel?"),
          raised);
    return;
  }
  if (spread <= rtol) return;
  // Outliers: the ranks farther than rtol from the median synced norm.
  const double median = Median(synced);
  std::vector<uint32_t> outliers;
  for (uint32_t r : present) {
    if (RelativeDifference(row.ranks[r].synced, median) > rtol) outliers.push_back(r);
  }
  if (outliers.empty() || outliers.size() * 2 >= present.size()) outliers = present;
  Raise(v1::Alarm::GRAD_NORM_MISMATCH, step, outliers, "",
        absl::StrFormat("step %u: synced grad norms differ across ranks (relative difference "
                        "%.3g > checks.grad_norm_rtol %.3g): %s",
                        step, spread, rtol, figures),
        raised);
}

void StepJudge::CheckDrift(uint64_t step, const Row& row, std::vector<v1::Alarm>* raised) {
  double worst = 0;
  uint32_t worst_rank = 0;
  std::vector<uint32_t> drifted;
  for (uint32_t r = 0; r < world_; ++r) {
    const Figures& f = row.ranks[r];
    if (!f.present || !f.has_drift) continue;
    if (!(f.drift <= options_.drift_tolerance)) drifted.push_back(r);  // NaN drifts too
    if (!(f.drift <= worst)) {
      worst = f.drift;
      worst_rank = r;
    }
  }
  if (drifted.empty()) return;
  const std::string tensor =
      worst_rank < row.drift_tensor.size() ? row.drift_tensor[worst_rank] : std::string();
  Raise(v1::Alarm::DRIFT, step, drifted, tensor,
        absl::StrFormat("step %u: replicas drifted apart: max|W_r - W_0| = %.6g (tensor %s) > "
                        "checks.drift_tolerance %.3g, reported by %s: the ranks no longer hold "
                        "the same model",
                        step, worst, tensor.empty() ? "?" : tensor, options_.drift_tolerance,
                        RankList(drifted)),
        raised);
}

void StepJudge::AddArrivals(const Row& row) {
  // Every present rank timed the same collectives (same first one); compare the common prefix.
  std::vector<uint32_t> ranks;
  size_t count = std::numeric_limits<size_t>::max();
  for (uint32_t r = 0; r < world_; ++r) {
    const Figures& f = row.ranks[r];
    if (!f.present) continue;
    if (!f.has_times || (!ranks.empty() &&
                         f.first_collective != row.ranks[ranks.front()].first_collective)) {
      return;
    }
    ranks.push_back(r);
    count = std::min(count, f.times_us.size());
  }
  if (ranks.size() < 2 || count == 0) return;
  std::vector<double> caused(world_, 0);  // ms of waiting this step, by the rank waited for
  std::vector<float> excess;
  for (size_t i = 0; i < count; ++i) {
    uint32_t last = ranks.front();
    for (uint32_t r : ranks) {
      if (row.ranks[r].times_us[i] < row.ranks[last].times_us[i]) last = r;
    }
    const uint32_t transfer = row.ranks[last].times_us[i];
    excess.clear();
    for (uint32_t r : ranks) {
      if (r != last) excess.push_back(static_cast<float>(row.ranks[r].times_us[i] - transfer));
    }
    caused[last] += Median(excess) / 1000.0;
  }
  uint32_t most = ranks.front();
  double total = 0;
  for (uint32_t r : ranks) {
    window_caused_ms_[r] += caused[r];
    total += caused[r];
    if (caused[r] > caused[most]) most = r;
  }
  if (total > 0) ++window_last_[most];
  ++window_arrival_steps_;
}

void StepJudge::UpdateStragglers(uint64_t step, std::vector<v1::Alarm>* raised) {
  std::vector<float> compute(world_);
  std::vector<float> comm(world_);
  std::vector<float> total(world_);
  std::vector<uint32_t> ranks;
  for (uint32_t r = 0; r < world_; ++r) {
    if (window_step_[r].empty()) continue;
    ranks.push_back(r);
    compute[r] = static_cast<float>(Median(window_compute_[r]));
    comm[r] = static_cast<float>(Median(window_comm_[r]));
    total[r] = static_cast<float>(Median(window_step_[r]));
  }
  // Arrival evidence for most of the window, or none at all: then compute times alone.
  const bool arrivals = window_arrival_steps_ * 2 >= window_fill_ && window_arrival_steps_ > 0;
  double all_caused = 0;
  for (uint32_t r : ranks) all_caused += window_caused_ms_[r];
  const double min_share = std::min(0.75, 2.0 / std::max<size_t>(ranks.size(), 1));
  std::vector<float> compute_of_ranks;
  for (uint32_t r : ranks) compute_of_ranks.push_back(compute[r]);
  const double compute_median = Median(compute_of_ranks);
  double lo = std::numeric_limits<double>::infinity();
  double hi = 0;
  for (uint32_t r : ranks) {
    lo = std::min<double>(lo, total[r]);
    hi = std::max<double>(hi, total[r]);
  }

  stragglers_.clear();
  for (uint32_t r : ranks) {
    v1::StragglerScore s;
    s.set_rank(r);
    s.set_median_step_ms(total[r]);
    s.set_median_compute_ms(compute[r]);
    s.set_median_comm_ms(comm[r]);
    bool meets = false;
    std::string message;
    if (arrivals) {
      std::vector<float> peers;
      for (uint32_t p : ranks) {
        if (p != r) peers.push_back(compute[p]);
      }
      const double peers_compute = Median(peers);
      const double caused = window_caused_ms_[r] / window_arrival_steps_;  // per step
      const double share = all_caused > 0 ? window_caused_ms_[r] / all_caused : 0;
      const double last = static_cast<double>(window_last_[r]) / window_arrival_steps_;
      const double ratio =
          peers_compute > 0 ? (peers_compute + caused) / peers_compute : (caused > 0 ? 1e9 : 1);
      s.set_score(share);
      s.set_mean_wait_caused_ms(caused);
      s.set_last_arrival_fraction(last);
      s.set_ratio_to_median(ratio);
      meets = ranks.size() >= 2 && share >= min_share && caused >= options_.straggler_min_ms &&
              ratio > options_.straggler_factor;
      message = absl::StrFormat(
          "steps %u-%u: rank %u is a straggler: the other ranks waited %.1f ms a step for it to "
          "reach its collectives (%.0f%% of all waiting; it arrived last in %.0f%% of the "
          "steps), against %.1f ms of their own compute: it takes %.1fx as long (> %.3gx); "
          "its own compute %.1f ms; suspected cause: compute (its own work, input or host; "
          "waiting is never blamed on a link)",
          window_first_step_, step, r, caused, 100 * share, 100 * last, peers_compute, ratio,
          options_.straggler_factor, compute[r]);
    } else {
      // Compute is the rank's own work: in a synchronous job everyone's step time includes
      // waiting for the slowest, so the step time alone cannot tell who is slow.
      const double ratio =
          compute_median > 0 ? compute[r] / compute_median : (compute[r] > 0 ? 1e9 : 1);
      s.set_ratio_to_median(ratio);
      s.set_score(hi > lo ? (total[r] - lo) / (hi - lo) : 0);
      meets = ranks.size() >= 2 && compute[r] >= options_.straggler_min_ms &&
              ratio > options_.straggler_factor;
      message = absl::StrFormat(
          "steps %u-%u: rank %u is a straggler: median compute %.1f ms vs %.1f ms across ranks "
          "(%.1fx > %.3gx); suspected cause: compute (a slow or busy device or host)",
          window_first_step_, step, r, compute[r], compute_median, ratio,
          options_.straggler_factor);
    }
    straggler_streak_[r] = meets ? straggler_streak_[r] + 1 : 0;
    s.set_flagged(meets && straggler_streak_[r] >= std::max<size_t>(1, options_.straggler_windows));
    s.set_suspected_cause(s.flagged() ? "compute" : "");
    if (s.flagged()) Raise(v1::Alarm::STRAGGLER, step, {r}, "", std::move(message), raised);
    stragglers_.push_back(std::move(s));
  }
  for (uint32_t r = 0; r < world_; ++r) {
    window_compute_[r].clear();
    window_comm_[r].clear();
    window_step_[r].clear();
    window_caused_ms_[r] = 0;
    window_last_[r] = 0;
  }
  window_arrival_steps_ = 0;
  window_fill_ = 0;
  window_ms_ = 0;
}

void StepJudge::Raise(v1::Alarm::Kind kind, uint64_t step, std::vector<uint32_t> ranks,
                      std::string tensor, std::string message, std::vector<v1::Alarm>* raised) {
  for (v1::Alarm& a : alarms_) {
    if (a.kind() != kind || static_cast<size_t>(a.ranks_size()) != ranks.size() ||
        !std::equal(ranks.begin(), ranks.end(), a.ranks().begin())) {
      continue;
    }
    if (a.last_step() != step) {
      a.set_repeats(a.repeats() + 1);
      a.set_last_step(step);
      ++revision_;
    }
    return;
  }
  v1::Alarm a;
  a.set_kind(kind);
  a.set_step(step);
  a.set_last_step(step);
  for (uint32_t r : ranks) a.add_ranks(r);
  a.set_tensor(std::move(tensor));
  a.set_message(std::move(message));
  a.set_failed_job(kind != v1::Alarm::STRAGGLER && options_.fail_on_desync);
  alarms_.push_back(a);
  ++revision_;
  if (raised != nullptr) raised->push_back(std::move(a));
}

void StepJudge::SetDetectedTime(int64_t unix_ms) {
  if (unstamped_from_ < alarms_.size()) ++revision_;
  for (size_t i = unstamped_from_; i < alarms_.size(); ++i) {
    alarms_[i].set_detected_unix_ms(unix_ms);
  }
  unstamped_from_ = alarms_.size();
}

void StepJudge::FillFigures(const Row& row,
                            google::protobuf::RepeatedPtrField<v1::RankStepFigures>* out) {
  out->Clear();
  for (uint32_t r = 0; r < row.ranks.size(); ++r) {
    const Figures& f = row.ranks[r];
    if (!f.present) continue;
    v1::RankStepFigures* figures = out->Add();
    figures->set_rank(r);
    figures->set_loss(f.loss);
    figures->set_local_grad_norm(f.local);
    figures->set_synced_grad_norm(f.synced);
    figures->set_has_drift(f.has_drift);
    figures->set_drift(f.drift);
    figures->set_step_ms(f.step_ms);
  }
}

size_t StepJudge::MemoryBytes() const {
  size_t bytes = sizeof(*this);
  for (const Row& row : pending_) {
    bytes += sizeof(Row) + row.ranks.capacity() * sizeof(Figures);
    for (const Figures& f : row.ranks) bytes += f.times_us.capacity() * sizeof(uint32_t);
    for (const std::string& t : row.drift_tensor) bytes += sizeof(std::string) + t.capacity();
  }
  bytes += last_step_.capacity() * sizeof(uint64_t) + loss_alarmed_.capacity() / 8;
  for (uint32_t r = 0; r < world_; ++r) {
    bytes += (window_compute_[r].capacity() + window_comm_[r].capacity() +
              window_step_[r].capacity()) *
                 sizeof(float) +
             sizeof(double) + sizeof(uint32_t) + sizeof(size_t);
  }
  for (const v1::Alarm& a : alarms_) bytes += a.SpaceUsedLong();
  bytes += verdict_.SpaceUsedLong();
  for (const v1::StragglerScore& s : stragglers_) bytes += s.SpaceUsedLong();
  return bytes;
}

}  // namespace ringleader
