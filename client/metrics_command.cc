// `ringleader metrics JOB [--format csv|json] [-o FILE]`: the current attempt's per-step,
// per-rank metrics (JobService.GetJobMetrics) as CSV or JSON, on stdout or written atomically
// to a file. Numbers round-trip: CSV prints each double with the fewest of 15..17 significant
// digits that parse back to the same value; JSON is protobuf's proto3 mapping of the response
// (proto field names, every field printed, 64-bit integers as strings).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "google/protobuf/util/json_util.h"

namespace ringleader {
namespace {

constexpr char kCsvHeader[] =
    "step,rank,loss,local_grad_norm,synced_grad_norm,drift,step_ms,compute_ms,comm_ms,"
    "samples_per_second\n";

// The shortest of %.15g, %.16g and %.17g that parses back to `value` ("0.1", not
// "0.10000000000000001"); "nan", "inf" and "-inf" as printf writes them.
std::string RoundTripNumber(double value) {
  if (!std::isfinite(value)) return absl::StrFormat("%g", value);
  for (int precision : {15, 16}) {
    std::string text = absl::StrFormat("%.*g", precision, value);
    double parsed = 0;
    if (absl::SimpleAtod(text, &parsed) && parsed == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

std::string CsvRow(const v1::MetricsPoint& point) {
  return absl::StrCat(point.step(), ",", point.rank(), ",", RoundTripNumber(point.loss()), ",",
                      RoundTripNumber(point.local_grad_norm()), ",",
                      RoundTripNumber(point.synced_grad_norm()), ",",
                      point.has_drift() ? RoundTripNumber(point.drift()) : "", ",",
                      RoundTripNumber(point.step_ms()), ",", RoundTripNumber(point.compute_ms()),
                      ",", RoundTripNumber(point.comm_ms()), ",",
                      RoundTripNumber(point.samples_per_second()), "\n");
}

std::string FormatCsv(const v1::GetJobMetricsResponse& metrics) {
  std::string text = kCsvHeader;
  for (const v1::MetricsPoint& point : metrics.points()) absl::StrAppend(&text, CsvRow(point));
  return text;
}

// One line of JSON: every field, proto field names.
absl::StatusOr<std::string> FormatJson(const v1::GetJobMetricsResponse& metrics) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  const auto status = google::protobuf::util::MessageToJsonString(metrics, &text, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print the metrics as JSON: ",
                                            std::string(status.message())));
  }
  return text + "\n";
}

absl::StatusOr<std::string> FormatMetrics(const v1::GetJobMetricsResponse& metrics,
                                          const std::string& format) {
  if (format == "json") return FormatJson(metrics);
  return FormatCsv(metrics);
}

// "wrote 4 points (steps 1..2, generation 3) to out.csv"
std::string WroteLine(const v1::GetJobMetricsResponse& metrics, const std::string& path) {
  const int count = metrics.points_size();
  std::string steps = "no steps yet";
  if (count > 0) {
    const auto [first, last] = std::minmax_element(
        metrics.points().begin(), metrics.points().end(),
        [](const v1::MetricsPoint& a, const v1::MetricsPoint& b) { return a.step() < b.step(); });
    steps = absl::StrCat("steps ", first->step(), "..", last->step());
  }
  return absl::StrCat("wrote ", count, count == 1 ? " point" : " points", " (", steps,
                      ", generation ", metrics.generation(), ") to ", path, "\n");
}

}  // namespace

absl::Status CheckMetricsOptions(const MetricsOptions& options) {
  if (options.format == "csv" || options.format == "json") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--format: expected csv or json, got '", options.format, "'"));
}

int RunMetrics(const std::string& job_id, const MetricsOptions& options, JobClient& client,
               const CommandEnvironment& env) {
  if (absl::Status valid = CheckMetricsOptions(options); !valid.ok()) {
    *env.err << "error: " << valid.message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<v1::GetJobMetricsResponse> metrics = client.GetJobMetrics(job_id);
  if (!metrics.ok()) return ReportError(metrics.status(), "cannot get metrics of " + job_id, env);
  absl::StatusOr<std::string> text = FormatMetrics(*metrics, options.format);
  if (!text.ok()) return ReportError(text.status(), "metrics of " + job_id, env);
  if (metrics->points_size() == 0) *env.err << "job " << job_id << " has no step metrics yet\n";

  if (options.output_path.empty()) {
    *env.out << *text;
    return kExitOk;
  }
  if (const int error = WriteFileAtomically(options.output_path, *text); error != 0) {
    *env.err << "error: cannot write " << options.output_path << ": " << std::strerror(error)
             << "\n";
    return kExitFailure;
  }
  *env.out << WroteLine(*metrics, options.output_path);
  return kExitOk;
}

}  // namespace ringleader
