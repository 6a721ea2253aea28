#include "coordinator/http/prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace ringleader {
namespace {

bool ValidName(absl::string_view name, bool colons) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = absl::ascii_isalpha(c) || c == '_' || (colons && c == ':') ||
                    (i > 0 && absl::ascii_isdigit(c));
    if (!ok) return false;
  }
  return true;
}

absl::Status CheckLabels(absl::string_view family, const PrometheusLabels& labels) {
  std::set<std::string> seen;
  for (const auto& [name, value] : labels) {
    if (!ValidName(name, /*colons=*/false) || absl::StartsWith(name, "__")) {
      return absl::InvalidArgumentError(
          absl::StrCat(family, ": invalid label name \"", name, "\""));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(family, ": label \"", name, "\" given twice"));
    }
  }
  return absl::OkStatus();
}

// HELP text: \ → \\, newline → \n.
std::string EscapeHelp(absl::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void WriteSample(std::string* out, absl::string_view name, const PrometheusLabels& labels,
                 const std::pair<std::string, std::string>* extra, double value) {
  absl::StrAppend(out, name);
  if (!labels.empty() || extra != nullptr) {
    out->push_back('{');
    bool first = true;
    auto label = [&](const std::string& key, const std::string& val) {
      if (!first) out->push_back(',');
      first = false;
      absl::StrAppend(out, key, "=\"", EscapePrometheusLabelValue(val), "\"");
    };
    for (const auto& [key, val] : labels) label(key, val);
    if (extra != nullptr) label(extra->first, extra->second);
    out->push_back('}');
  }
  absl::StrAppend(out, " ", FormatPrometheusValue(value), "\n");
}

// "JOB_STATE_RUNNING" → "running" (`prefix` "JOB_STATE_").
std::string EnumLabel(const std::string& name, absl::string_view prefix) {
  return absl::AsciiStrToLower(absl::StripPrefix(name, prefix));
}

}  // namespace

std::string FormatPrometheusValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // The shortest of %.15g .. %.17g that reads back exactly.
  for (int precision = 15; precision < 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, value);
    if (std::strtod(text.c_str(), nullptr) == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

std::string EscapePrometheusLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

absl::Status PrometheusTextWriter::StartFamily(absl::string_view name) {
  if (!ValidName(name, /*colons=*/true)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid metric name \"", name, "\""));
  }
  if (families_.count(std::string(name)) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("metric family ", name, " written twice"));
  }
  return absl::OkStatus();
}

void PrometheusTextWriter::WriteHeader(absl::string_view type, absl::string_view name,
                                       absl::string_view help) {
  families_.insert(std::string(name));
  absl::StrAppend(&text_, "# HELP ", name, " ", EscapeHelp(help), "\n");
  absl::StrAppend(&text_, "# TYPE ", name, " ", type, "\n");
}

absl::Status PrometheusTextWriter::Simple(absl::string_view type, absl::string_view name,
                                          absl::string_view help,
                                          const std::vector<Sample>& samples) {
  if (absl::Status ok = StartFamily(name); !ok.ok()) return ok;
  for (const Sample& sample : samples) {
    if (absl::Status ok = CheckLabels(name, sample.labels); !ok.ok()) return ok;
  }
  WriteHeader(type, name, help);
  for (const Sample& sample : samples) {
    WriteSample(&text_, name, sample.labels, nullptr, sample.value);
  }
  return absl::OkStatus();
}

absl::Status PrometheusTextWriter::Gauge(absl::string_view name, absl::string_view help,
                                         const std::vector<Sample>& samples) {
  return Simple("gauge", name, help, samples);
}

absl::Status PrometheusTextWriter::Counter(absl::string_view name, absl::string_view help,
                                           const std::vector<Sample>& samples) {
  if (!absl::EndsWith(name, "_total")) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter ", name, ": a counter's name ends in _total"));
  }
  return Simple("counter", name, help, samples);
}

absl::Status PrometheusTextWriter::Histogram(absl::string_view name, absl::string_view help,
                                             const std::vector<HistogramSample>& samples) {
  if (absl::Status ok = StartFamily(name); !ok.ok()) return ok;
  for (const HistogramSample& sample : samples) {
    if (absl::Status ok = CheckLabels(name, sample.labels); !ok.ok()) return ok;
    for (const auto& label : sample.labels) {
      if (label.first == "le") {
        return absl::InvalidArgumentError(
            absl::StrCat("histogram ", name, ": \"le\" is the bucket label"));
      }
    }
    if (sample.cumulative.size() != sample.bounds.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram ", name, ": ", sample.cumulative.size(), " bucket counts for ",
          sample.bounds.size(), " bounds"));
    }
    for (size_t i = 0; i < sample.bounds.size(); ++i) {
      if (std::isnan(sample.bounds[i]) || std::isinf(sample.bounds[i]) ||
          (i > 0 && sample.bounds[i] <= sample.bounds[i - 1])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "histogram ", name, ": bucket bounds must be finite and strictly ascending"));
      }
      if ((i > 0 && sample.cumulative[i] < sample.cumulative[i - 1]) ||
          sample.cumulative[i] > sample.count) {
        return absl::InvalidArgumentError(absl::StrCat(
            "histogram ", name, ": bucket counts must be cumulative and at most the count"));
      }
    }
  }
  WriteHeader("histogram", name, help);
  const std::string bucket = absl::StrCat(name, "_bucket");
  for (const HistogramSample& sample : samples) {
    for (size_t i = 0; i < sample.bounds.size(); ++i) {
      const std::pair<std::string, std::string> le{"le", FormatPrometheusValue(sample.bounds[i])};
      WriteSample(&text_, bucket, sample.labels, &le,
                  static_cast<double>(sample.cumulative[i]));
    }
    const std::pair<std::string, std::string> inf{"le", "+Inf"};
    WriteSample(&text_, bucket, sample.labels, &inf, static_cast<double>(sample.count));
    WriteSample(&text_, absl::StrCat(name, "_sum"), sample.labels, nullptr, sample.sum);
    WriteSample(&text_, absl::StrCat(name, "_count"), sample.labels, nullptr,
                static_cast<double>(sample.count));
  }
  return absl::OkStatus();
}

std::string CoordinatorMetricsText(const Coordinator::MetricsSnapshot& coordinator,
                                   const RpcStats::Snapshot& rpcs) {
  using Sample = PrometheusTextWriter::Sample;
  PrometheusTextWriter writer;
  // Every name below is a valid constant written once: a failure is a bug here, and it shows
  // as a comment at the end of the page (the tests look for it).
  std::string errors;
  auto check = [&errors](absl::Status status) {
    if (!status.ok()) absl::StrAppend(&errors, "# error: ", status.message(), "\n");
  };

  std::vector<Sample> samples;
  for (const auto& [state, count] : coordinator.workers_by_state) {
    samples.push_back(
        {{{"state", EnumLabel(v1::WorkerState_Name(state), "WORKER_STATE_")}},
         static_cast<double>(count)});
  }
  check(writer.Gauge("ringleader_workers", "Registered worker daemons, by state.", samples));

  samples.clear();
  for (const auto& [state, count] : coordinator.jobs_by_state) {
    samples.push_back({{{"state", EnumLabel(v1::JobState_Name(state), "JOB_STATE_")}},
                       static_cast<double>(count)});
  }
  check(writer.Gauge("ringleader_jobs", "Jobs in memory, by state (archived ones not counted).",
                     samples));

  samples.clear();
  for (const auto& [kind, count] : coordinator.alarms_by_kind) {
    samples.push_back(
        {{{"kind", EnumLabel(v1::Alarm::Kind_Name(kind), "")}}, static_cast<double>(count)});
  }
  check(writer.Gauge("ringleader_alarms",
                     "Alarms of the step judge held in all jobs' statuses, by kind (one per "
                     "kind and rank set per attempt; repeats not counted).",
                     samples));

  check(writer.Counter("ringleader_heartbeats_received_total",
                       "Heartbeat calls received from worker daemons (refused ones included).",
                       {{{}, static_cast<double>(coordinator.heartbeats_received)}}));
  check(writer.Counter("ringleader_job_restarts_total",
                       "Restarts of failed job attempts, over all jobs.",
                       {{{}, static_cast<double>(coordinator.restarts)}}));
  check(writer.Counter("ringleader_jobs_archived_total",
                       "Finished jobs moved out of memory to the job store's archive "
                       "(beyond --jobs_kept).",
                       {{{}, static_cast<double>(coordinator.jobs_archived)}}));

  // Per rank of RUNNING jobs: one family per figure.
  struct RankFamily {
    const char* name;
    const char* help;
    std::function<std::optional<double>(const Coordinator::RankMetrics&)> value;
  };
  const std::vector<RankFamily> rank_families = {
      {"ringleader_rank_step", "The rank's latest reported optimizer step (running jobs).",
       [](const auto& r) { return std::optional<double>(static_cast<double>(r.step)); }},
      {"ringleader_rank_loss", "The rank's training loss at its latest step.",
       [](const auto& r) { return std::optional<double>(r.loss); }},
      {"ringleader_rank_samples_per_second",
       "The rank's training samples per second at its latest step.",
       [](const auto& r) { return r.samples_per_second; }},
      {"ringleader_rank_local_grad_norm",
       "L2 norm of the rank's gradients before synchronisation, latest step.",
       [](const auto& r) { return std::optional<double>(r.local_grad_norm); }},
      {"ringleader_rank_synced_grad_norm",
       "L2 norm of the rank's gradients after synchronisation, latest step.",
       [](const auto& r) { return std::optional<double>(r.synced_grad_norm); }},
      {"ringleader_rank_drift",
       "Cross-rank parameter drift max|W_r - W_0| the rank measured last.",
       [](const auto& r) { return r.drift; }},
      {"ringleader_rank_step_seconds", "Duration of the rank's latest step.",
       [](const auto& r) { return std::optional<double>(r.step_seconds); }},
      {"ringleader_rank_comm_seconds", "Communication time of the rank's latest step.",
       [](const auto& r) { return std::optional<double>(r.comm_seconds); }},
      {"ringleader_rank_straggler_score",
       "Straggler score over the judge's window: the rank's share (0..1) of the time ranks "
       "waited for the last one to arrive in a collective.",
       [](const auto& r) { return r.straggler_score; }},
      {"ringleader_rank_straggler_flagged",
       "1 when the step judge flags the rank as a straggler, else 0.",
       [](const auto& r) {
         return r.straggler_score.has_value()
                    ? std::optional<double>(r.straggler_flagged ? 1 : 0)
                    : std::nullopt;
       }},
  };
  for (const RankFamily& family : rank_families) {
    samples.clear();
    for (const Coordinator::RankMetrics& rank : coordinator.ranks) {
      const std::optional<double> value = family.value(rank);
      if (!value.has_value()) continue;
      samples.push_back({{{"job_id", rank.job}, {"rank", absl::StrCat(rank.rank)}}, *value});
    }
    check(writer.Gauge(family.name, family.help, samples));
  }

  samples.clear();
  std::vector<PrometheusTextWriter::HistogramSample> latencies;
  for (const RpcStats::Series& series : rpcs.series) {
    PrometheusLabels labels = {{"method", series.method}, {"code", series.code}};
    samples.push_back({labels, static_cast<double>(series.count)});
    latencies.push_back(
        {labels, rpcs.bounds, series.cumulative, series.count, series.sum_seconds});
  }
  check(writer.Counter("ringleader_rpcs_total",
                       "RPCs the coordinator answered, by method and status code.", samples));
  check(writer.Histogram("ringleader_rpc_duration_seconds",
                         "Time from an RPC's arrival at the coordinator's handler to its answer "
                         "(long polls include their wait), by method and status code.",
                         latencies));
  return absl::StrCat(writer.text(), errors);
}

}  // namespace ringleader
