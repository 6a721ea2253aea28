#include "coordinator/http/ha_metrics_text.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/http/prometheus_text.h"

namespace ringleader {

std::string HaMetricsText(const HaMetrics& metrics) {
  PrometheusTextWriter writer;
  std::string errors;
  auto check = [&errors](const absl::Status& status) {
    if (!status.ok()) absl::StrAppend(&errors, "# error: ", status.ToString(), "\n");
  };
  check(writer.Gauge("ringleader_leader", "1 while this coordinator leads, 0 as a standby.",
                     {{{}, metrics.leading ? 1.0 : 0.0}}));
  check(writer.Counter("ringleader_leader_changes_total",
                       "Leadership changes this coordinator saw: terms it won or lost, and "
                       "other coordinators taking over.",
                       {{{}, static_cast<double>(metrics.leader_changes)}}));
  check(writer.Counter("ringleader_leader_terms_total", "Terms this coordinator won.",
                       {{{}, static_cast<double>(metrics.terms_won)}}));
  std::vector<PrometheusTextWriter::Sample> counts;
  std::vector<PrometheusTextWriter::HistogramSample> latencies;
  for (const RpcStats::Series& series : metrics.etcd_calls.series) {
    PrometheusLabels labels = {{"call", series.method}, {"code", series.code}};
    counts.push_back({labels, static_cast<double>(series.count)});
    latencies.push_back({labels, metrics.etcd_calls.bounds, series.cumulative, series.count,
                         series.sum_seconds});
  }
  check(writer.Counter("ringleader_etcd_calls_total",
                       "Calls this coordinator made to etcd, by call and status code.", counts));
  check(writer.Histogram("ringleader_etcd_call_duration_seconds",
                         "Latency of this coordinator's etcd calls (a write's includes etcd's "
                         "commit), by call and status code.",
                         latencies));
  return absl::StrCat(writer.text(), errors);
}

}  // namespace ringleader
