// The Prometheus text exposition format (version 0.0.4), and the coordinator's series in it.
//
// PrometheusTextWriter writes metric families: a `# HELP` and a `# TYPE` line, then the samples,
// label values escaped (\\, \", \n), numbers as Go's strconv parses them (shortest exact form,
// NaN, +Inf, -Inf). Histograms get `NAME_bucket{...,le="B"}` lines (cumulative, ending with
// le="+Inf"), `NAME_sum` and `NAME_count`.
//
// CoordinatorMetricsText formats a Coordinator::MetricsSnapshot and an RpcStats::Snapshot:
//
//   ringleader_workers{state}                        gauge    idle | busy | lost
//   ringleader_jobs{state}                           gauge    queued | rendezvous | running |
//                                                             succeeded | failed | cancelled
//                                                             (in memory: archived ones not
//                                                             counted)
//   ringleader_alarms{kind}                          gauge    grad_norm_mismatch | ... | straggler
//   ringleader_heartbeats_received_total             counter
//   ringleader_job_restarts_total                    counter
//   ringleader_jobs_archived_total                   counter  finished jobs archived
//   ringleader_rank_step{job_id,rank}                gauge    RUNNING jobs' ranks, latest report
//   ringleader_rank_loss{job_id,rank}                gauge
//   ringleader_rank_samples_per_second{job_id,rank}  gauge
//   ringleader_rank_local_grad_norm{job_id,rank}     gauge
//   ringleader_rank_synced_grad_norm{job_id,rank}    gauge
//   ringleader_rank_drift{job_id,rank}               gauge    the last drift measured
//   ringleader_rank_step_seconds{job_id,rank}        gauge    the latest step's time
//   ringleader_rank_comm_seconds{job_id,rank}        gauge    its communication time
//   ringleader_rank_straggler_score{job_id,rank}     gauge    0 fastest .. 1 slowest
//   ringleader_rank_straggler_flagged{job_id,rank}   gauge    1 = flagged as a straggler
//   ringleader_rpcs_total{method,code}               counter  RPCs answered
//   ringleader_rpc_duration_seconds{method,code}     histogram
//
// The ringleader job is `job_id`, not `job`: Prometheus gives every scraped series its own
// `job` label (the scrape config's job_name) and would rename ours to `exported_job`.
//
// Plain C++ (no HTTP): http_server.h serves the text.
#ifndef RINGLEADER_COORDINATOR_HTTP_PROMETHEUS_TEXT_H_
#define RINGLEADER_COORDINATOR_HTTP_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/rpc/rpc_stats.h"

namespace ringleader {

// Label name → value, in the order written.
using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

// Not thread-safe; one writer per exposition.
class PrometheusTextWriter {
 public:
  struct Sample {
    PrometheusLabels labels;
    double value = 0;
  };
  struct HistogramSample {
    PrometheusLabels labels;
    std::vector<double> bounds;       // bucket upper bounds, strictly ascending (no +Inf)
    std::vector<uint64_t> cumulative;  // one per bound, non-decreasing, each <= count
    uint64_t count = 0;
    double sum = 0;
  };

  // Each adds a family (HELP, TYPE, samples). A family without samples is written with its
  // HELP and TYPE lines only.
  // Errors (nothing is written): INVALID_ARGUMENT for a metric name not matching
  // [a-zA-Z_:][a-zA-Z0-9_:]*, a label name not matching [a-zA-Z_][a-zA-Z0-9_]* or starting with
  // "__", a label named twice in one sample, a counter name not ending in "_total", a histogram
  // with a label "le" or with bounds/cumulative counts that do not fit the rules above;
  // ALREADY_EXISTS for a family name written before.
  absl::Status Gauge(absl::string_view name, absl::string_view help,
                     const std::vector<Sample>& samples);
  absl::Status Counter(absl::string_view name, absl::string_view help,
                       const std::vector<Sample>& samples);
  absl::Status Histogram(absl::string_view name, absl::string_view help,
                         const std::vector<HistogramSample>& samples);

  // Everything written so far.
  const std::string& text() const { return text_; }

 private:
  absl::Status Simple(absl::string_view type, absl::string_view name, absl::string_view help,
                      const std::vector<Sample>& samples);
  absl::Status StartFamily(absl::string_view name);
  void WriteHeader(absl::string_view type, absl::string_view name, absl::string_view help);

  std::string text_;
  std::set<std::string> families_;
};

// "1", "0.25", "1e-06", "NaN", "+Inf", "-Inf": the shortest text that parses back to `value`.
std::string FormatPrometheusValue(double value);

// `value` with \ → \\, " → \", newline → \n (label values).
std::string EscapePrometheusLabelValue(absl::string_view value);

// The coordinator's whole /metrics page (see the file comment).
std::string CoordinatorMetricsText(const Coordinator::MetricsSnapshot& coordinator,
                                   const RpcStats::Snapshot& rpcs);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_HTTP_PROMETHEUS_TEXT_H_
