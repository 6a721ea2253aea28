#include "coordinator/core/preflight_judge.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringleader {
namespace {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::string Figure(double value) { return absl::StrFormat("%.3g", value); }

// Both ends' reports of one pair, merged.
struct MergedPair {
  uint32_t a = 0;
  uint32_t b = 0;
  bool ok = true;
  std::string error;
  double bandwidth = 0;
  double latency = 0;
  bool has_figures = false;
};

std::map<std::pair<uint32_t, uint32_t>, MergedPair> MergePairs(
    const std::vector<PreflightRank>& ranks) {
  std::map<std::pair<uint32_t, uint32_t>, MergedPair> pairs;
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].report.has_value()) continue;
    for (const v1::PreflightPairReport& reported : ranks[r].report->pairs()) {
      const uint32_t a = std::min(reported.rank_a(), reported.rank_b());
      const uint32_t b = std::max(reported.rank_a(), reported.rank_b());
      if (a == b || b >= ranks.size()) continue;  // not a pair of this check
      MergedPair& pair = pairs[{a, b}];
      pair.a = a;
      pair.b = b;
      if (!reported.ok()) {
        if (pair.ok) pair.error = reported.error();
        pair.ok = false;
        continue;
      }
      // The lower rank's figures when both sent some.
      if (!pair.has_figures || r == a) {
        pair.bandwidth = reported.bandwidth_mb_per_s();
        pair.latency = reported.latency_us();
        pair.has_figures = true;
      }
    }
  }
  return pairs;
}

std::string PairName(const std::vector<PreflightRank>& ranks, const MergedPair& pair) {
  return absl::StrCat(ranks[pair.a].name, "-", ranks[pair.b].name);
}

}  // namespace

v1::PreflightResult JudgePreflight(const std::vector<PreflightRank>& ranks, double min_fraction) {
  v1::PreflightResult result;
  result.set_min_fraction(min_fraction);
  std::vector<std::string> reasons(ranks.size());

  // Compute.
  std::vector<double> rates;
  for (const PreflightRank& rank : ranks) {
    if (rank.report.has_value()) rates.push_back(rank.report->gflops());
  }
  const double median_gflops = Median(rates);
  result.set_median_gflops(median_gflops);
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    const PreflightRank& rank = ranks[r];
    v1::PreflightWorker* worker = result.add_workers();
    worker->set_worker_id(rank.worker_id);
    worker->set_name(rank.name);
    worker->set_host(rank.host);
    worker->set_rank(r);
    if (!rank.report.has_value()) {
      result.add_findings(absl::StrCat("worker ", rank.name, " on ", rank.host,
                                       ": no figures (its rank did not report); not judged"));
      continue;
    }
    worker->set_reported(true);
    worker->set_gflops(rank.report->gflops());
    if (median_gflops <= 0) continue;
    const double fraction = rank.report->gflops() / median_gflops;
    worker->set_fraction_of_median(fraction);
    if (rates.size() >= 2 && fraction < min_fraction) {
      reasons[r] = absl::StrCat("matmul ", Figure(rank.report->gflops()), " GFLOP/s, ",
                                absl::StrFormat("%.2f", fraction), " of the median ",
                                Figure(median_gflops), " GFLOP/s (below ",
                                Figure(min_fraction), ")");
    }
  }

  // Links.
  const std::map<std::pair<uint32_t, uint32_t>, MergedPair> merged = MergePairs(ranks);
  std::vector<double> best(ranks.size(), 0);
  std::vector<double> bandwidths;
  for (const auto& [key, pair] : merged) {
    if (!pair.ok) continue;
    bandwidths.push_back(pair.bandwidth);
    best[pair.a] = std::max(best[pair.a], pair.bandwidth);
    best[pair.b] = std::max(best[pair.b], pair.bandwidth);
  }
  result.set_median_bandwidth_mb_per_s(Median(bandwidths));
  std::vector<double> bests;
  for (double b : best) {
    if (b > 0) bests.push_back(b);
  }
  const double reference = Median(bests);
  // A worker named for its matmul explains its own slow pairs (a starved CPU moves bytes slowly
  // too): for its peers those pairs are not judged. A worker is a link suspect when at least 2
  // of its judged pairs exist and all are bad; with one, the slow end cannot be told.
  std::vector<bool> compute_named(ranks.size());
  for (uint32_t r = 0; r < ranks.size(); ++r) compute_named[r] = !reasons[r].empty();
  std::vector<int> pairs_of(ranks.size(), 0);
  std::vector<int> bad_pairs_of(ranks.size(), 0);
  std::vector<std::string> bad_pair_words(ranks.size());
  std::vector<const MergedPair*> bad;
  for (const auto& [key, pair] : merged) {
    v1::PreflightPair* out = result.add_pairs();
    out->set_worker_a(ranks[pair.a].name);
    out->set_worker_b(ranks[pair.b].name);
    out->set_ok(pair.ok);
    out->set_error(pair.error);
    out->set_bandwidth_mb_per_s(pair.bandwidth);
    out->set_latency_us(pair.latency);
    if (pair.ok && reference > 0) out->set_fraction_of_median(pair.bandwidth / reference);
    const bool is_bad = !pair.ok || (reference > 0 && pair.bandwidth < min_fraction * reference);
    out->set_bad(is_bad);
    // (The ends copied: C++17 lambdas cannot capture the structured binding itself.)
    const uint32_t end_a = pair.a;
    const uint32_t end_b = pair.b;
    const auto judged_by = [&compute_named, end_a, end_b](uint32_t end) {
      return !compute_named[end == end_a ? end_b : end_a];
    };
    for (uint32_t end : {pair.a, pair.b}) {
      if (judged_by(end)) ++pairs_of[end];
    }
    if (!is_bad) continue;
    bad.push_back(&pair);
    const std::string words =
        pair.ok ? absl::StrCat(PairName(ranks, pair), " ", Figure(pair.bandwidth), " MB/s (",
                               absl::StrFormat("%.2f", pair.bandwidth / reference),
                               " of the reference ", Figure(reference), " MB/s)")
                : absl::StrCat(PairName(ranks, pair), " failed: ", pair.error);
    for (uint32_t end : {pair.a, pair.b}) {
      if (!judged_by(end)) continue;
      ++bad_pairs_of[end];
      if (!bad_pair_words[end].empty()) absl::StrAppend(&bad_pair_words[end], "; ");
      absl::StrAppend(&bad_pair_words[end], words);
    }
  }
  std::vector<uint32_t> link_suspects;
  size_t judged_workers = 0;
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    if (pairs_of[r] < 2) continue;
    ++judged_workers;
    if (bad_pairs_of[r] == pairs_of[r]) link_suspects.push_back(r);
  }
  const bool tells = !link_suspects.empty() && link_suspects.size() < judged_workers;
  if (tells) {
    for (uint32_t r : link_suspects) {
      const std::string links = absl::StrCat("every pair with it is bad: ", bad_pair_words[r]);
      reasons[r] = reasons[r].empty() ? links : absl::StrCat(reasons[r], "; ", links);
    }
  }
  // Bad pairs no named worker explains.
  for (const MergedPair* pair : bad) {
    if (!reasons[pair->a].empty() || !reasons[pair->b].empty()) continue;
    std::string why;
    if (ranks.size() == 2) {
      why = "with 2 workers the slow or broken end cannot be told";
    } else if (pairs_of[pair->a] < 2 || pairs_of[pair->b] < 2) {
      why = "an end's other pairs are with a worker named for its matmul: the slow end cannot be "
            "told";
    } else if (!link_suspects.empty() && !tells) {
      why = "every pair is bad: the network or the backend, not one worker";
    } else {
      why = "each end has good pairs with other workers: the link between them";
    }
    result.add_findings(absl::StrCat(
        "pair ", PairName(ranks, *pair),
        pair->ok ? absl::StrCat(" slow: ", Figure(pair->bandwidth), " MB/s, ",
                                absl::StrFormat("%.2f", pair->bandwidth / reference),
                                " of the reference ", Figure(reference), " MB/s")
                 : absl::StrCat(" failed: ", pair->error),
        "; ", why, "; nobody quarantined"));
  }

  bool named = false;
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    if (reasons[r].empty()) continue;
    named = true;
    v1::PreflightWorker* worker = result.mutable_workers(static_cast<int>(r));
    worker->set_quarantined(true);
    worker->set_reason(reasons[r]);
    result.add_findings(absl::StrCat("worker ", ranks[r].name, " on ", ranks[r].host, ": ",
                                     reasons[r], ": quarantined"));
  }
  result.set_clean(!named && bad.empty() && rates.size() == ranks.size());
  return result;
}

}  // namespace ringleader
