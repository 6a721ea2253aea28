// `ringleader doctor [WORKER...]` and `ringleader uncordon WORKER` (commands.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/table.h"

namespace ringleader {

int RunDoctor(const DoctorOptions& options, JobClient& client, const CommandEnvironment& env) {
  v1::RunDoctorRequest request;
  for (const std::string& worker : options.workers) request.add_workers(worker);
  if (options.min_fraction.has_value()) request.set_min_fraction(*options.min_fraction);
  request.set_wait_timeout_ms(options.wait_ms);
  absl::StatusOr<v1::RunDoctorResponse> response = client.RunDoctor(request);
  if (!response.ok()) return ReportError(response.status(), "cannot run the check", env);
  const v1::PreflightResult& result = response->result();
  if (env.json) {
    const int printed = PrintJson(*response, env);
    return printed != kExitOk ? printed : (result.clean() ? kExitOk : kExitFailure);
  }
  int quarantined = 0;
  for (const v1::PreflightWorker& worker : result.workers()) quarantined += worker.quarantined();
  *env.out << "pre-flight check " << result.job_id() << " (a worker or pair below "
           << FormatNumber(result.min_fraction()) << " of the median is named): "
           << (result.clean() ? "every worker passed"
                              : absl::StrCat(quarantined, quarantined == 1 ? " worker" : " workers",
                                             " quarantined"))
           << "\n";
  if (!result.error().empty()) *env.out << "the check did not finish: " << result.error() << "\n";

  Table workers({"WORKER", "HOST", "RANK", "GFLOP/S", "OF_MEDIAN", "RESULT"});
  for (const v1::PreflightWorker& worker : result.workers()) {
    workers.AddRow({worker.name(), worker.host(), absl::StrCat(worker.rank()),
                    worker.reported() ? FormatNumber(worker.gflops()) : "-",
                    worker.reported() ? absl::StrFormat("%.2f", worker.fraction_of_median()) : "-",
                    worker.quarantined() ? "QUARANTINED" : (worker.reported() ? "ok" : "no figures")});
  }
  *env.out << "\nworkers (median " << FormatNumber(result.median_gflops()) << " GFLOP/s)\n"
           << workers.Render();
  if (result.pairs_size() > 0) {
    Table pairs({"PAIR", "MB/S", "OF_REFERENCE", "LATENCY_US", "RESULT"});
    for (const v1::PreflightPair& pair : result.pairs()) {
      pairs.AddRow({absl::StrCat(pair.worker_a(), "-", pair.worker_b()),
                    pair.ok() ? FormatNumber(pair.bandwidth_mb_per_s()) : "-",
                    pair.ok() ? absl::StrFormat("%.2f", pair.fraction_of_median()) : "-",
                    pair.ok() ? FormatNumber(pair.latency_us()) : "-",
                    !pair.ok() ? absl::StrCat("failed: ", pair.error())
                               : (pair.bad() ? "slow" : "ok")});
    }
    *env.out << "\npairs (median " << FormatNumber(result.median_bandwidth_mb_per_s())
             << " MB/s)\n"
             << pairs.Render();
  }
  if (result.findings_size() > 0) {
    *env.out << "\nfindings\n";
    for (const std::string& finding : result.findings()) *env.out << "  " << finding << "\n";
  }
  if (quarantined > 0) {
    *env.out << "\nrelease a worker with `ringleader uncordon WORKER` once it is fixed\n";
  }
  return result.clean() ? kExitOk : kExitFailure;
}

int RunUncordon(const std::string& worker, JobClient& client, const CommandEnvironment& env) {
  absl::StatusOr<v1::UncordonWorkerResponse> response = client.Uncordon(worker);
  if (!response.ok()) return ReportError(response.status(), "cannot uncordon " + worker, env);
  if (env.json) return PrintJson(*response, env);
  *env.out << "worker " << response->worker().name() << " released: it is placed again\n";
  return kExitOk;
}

}  // namespace ringleader
