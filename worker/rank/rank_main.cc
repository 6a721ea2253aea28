// ringleader-rank: one rank of one job attempt, started by the worker daemon (see daemon.h for
// the command line) and supervised by it. Reads the Assignment file, trains (training_loop.h),
// reports FinishRank and, once the coordinator has its report, writes the report marker so the
// daemon does not report for it again.
//
// Backends: gloo trains on the CPU; nccl trains on GPU --gpu (the daemon's --gpu; one daemon per
// GPU) with the NCCL collective ordered after the trainer's compute stream. A rank that cannot
// use its GPU reports FAILED_PRECONDITION "no usable GPU: ..." through FinishRank before any
// rendezvous.
//
// A command job (JobSpec.command) runs the user's program instead (worker/launcher/
// command_rank.h), in the attempt directory unless the spec names a workdir, with the
// ringleader Python package (--python_path) first on its PYTHONPATH.
//
// Exit codes: 0 = the rank finished successfully; 1 = it failed (and said why in FinishRank,
// if the coordinator was reachable); 2 = bad command line or unreadable assignment.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "proto/ringleader.pb.h"
#include "common/job_spec.h"
#include "common/tls/tls_credentials.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/coordinator_client/coordinator_key_value_store.h"
#include "worker/coordinator_client/grpc_coordinator_client.h"
#include "worker/launcher/command_rank.h"
#include "worker/rank/collective_factory.h"
#include "worker/rank/preflight_rank.h"
#include "worker/rank/training_loop.h"
#include "worker/trainer/cpu_math.h"

ABSL_FLAG(std::string, assignment, "", "Path of the binary Assignment proto (required).");
ABSL_FLAG(std::string, coordinator, "",
          "Coordinator address, host:port, or a comma-separated list of them (the daemon's "
          "--coordinator) (required).");
ABSL_FLAG(std::string, tls_dir, "",
          "mutual TLS to the coordinator: DIR/ca.pem, DIR/worker.pem, DIR/worker.key (the "
          "daemon passes its own); required unless --insecure");
ABSL_FLAG(bool, insecure, false, "plaintext gRPC to the coordinator (no TLS)");
ABSL_FLAG(std::string, worker_id, "", "Id of the worker running this rank (required).");
ABSL_FLAG(std::string, report_marker, "",
          "File written once the coordinator has this rank's FinishRank report.");
ABSL_FLAG(int, gpu, -1, "GPU index for backend nccl (set by the daemon's --gpu).");
ABSL_FLAG(std::string, snapshot_dir, "",
          "Directory for this rank's snapshots in memory (set by the daemon: its --snapshot_dir "
          "and the job); empty = none. A command job's program gets it as "
          "RINGLEADER_SNAPSHOT_DIR.");
ABSL_FLAG(std::string, collective_host, "127.0.0.1",
          "Address this rank's gloo listener binds to and peers connect to; set it to the "
          "host's cluster-facing address for multi-host jobs.");
ABSL_FLAG(int, comm_threads, 2, "Communication threads of the gloo backend.");
ABSL_FLAG(int, blas_threads, 1,
          "Threads per matrix multiply (OpenBLAS) on CPU. 1 by default, as torchrun sets "
          "OMP_NUM_THREADS=1: several ranks on one host must not oversubscribe its cores. A host "
          "running a single rank can give it more (the daemon's --rank_args=--blas_threads=N).");
ABSL_FLAG(absl::Duration, rendezvous_timeout, absl::Seconds(120),
          "How long the collective rendezvous (gloo) or communicator init (NCCL) may wait for "
          "the other ranks.");
ABSL_FLAG(absl::Duration, victim_report_delay, absl::Seconds(2),
          "How long a rank whose collective failed because a peer vanished waits for the "
          "coordinator to name that peer before reporting itself (the daemon sets it from the "
          "coordinator's heartbeat timeout).");
ABSL_FLAG(absl::Duration, coordinator_grace, absl::Seconds(60),
          "How long this rank keeps trying to deliver its last reports and its result while the "
          "coordinator is unreachable (the daemon sets it from the coordinator's grace).");
ABSL_FLAG(std::string, python_path, "",
          "Root of the ringleader Python package, put first on a command job's PYTHONPATH; empty "
          "= python/pkg next to this binary's directory (where the build puts it), if there.");
ABSL_FLAG(absl::Duration, kill_grace, absl::Seconds(5),
          "A command job's program gets SIGTERM, then SIGKILL after this long, when the "
          "coordinator stops the attempt.");
ABSL_FLAG(std::string, test_only_mutate_spec, "",
          "TEST HOOK, never in real jobs: JOB_NAME:RANK makes that rank of jobs named JOB_NAME "
          "double its learning rate before fingerprinting its spec.");

namespace ringleader {
namespace {

// Whether --test_only_mutate_spec targets this rank of this job.
bool MutateSpecHookApplies(const std::string& hook, const v1::Assignment& assignment) {
  if (hook.empty()) return false;
  const std::vector<std::string> parts = absl::StrSplit(hook, absl::MaxSplits(':', 1));
  uint32_t rank = 0;
  return parts.size() == 2 && parts[0] == assignment.spec().name() &&
         absl::SimpleAtoi(parts[1], &rank) && rank == assignment.rank();
}

// --python_path, or <dir of this binary>/../python/pkg when that exists (a build tree).
std::string PythonPackageRoot() {
  if (std::string flag = absl::GetFlag(FLAGS_python_path); !flag.empty()) return flag;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "";
  const std::filesystem::path root = self.parent_path().parent_path() / "python" / "pkg";
  return std::filesystem::is_directory(root, error) ? root.string() : "";
}

// A command job (JobSpec.command): this process launches the user's program.
RankRunResult RunCommandJob(const v1::Assignment& assignment, CoordinatorClient* client,
                            const std::string& coordinator, const std::string& attempt_dir) {
  CoordinatorKeyValueStore store(client, assignment.job_id(), assignment.generation());
  CommandRankOptions options;
  options.worker_id = absl::GetFlag(FLAGS_worker_id);
  options.coordinator_address = coordinator;
  options.tls_dir = absl::GetFlag(FLAGS_tls_dir);
  options.collective_host = absl::GetFlag(FLAGS_collective_host);
  options.python_path = PythonPackageRoot();
  options.default_workdir = attempt_dir;
  options.gpu = absl::GetFlag(FLAGS_gpu);
  options.snapshot_dir = absl::GetFlag(FLAGS_snapshot_dir);
  for (char** entry = environ; *entry != nullptr; ++entry) options.inherited_env.push_back(*entry);
  options.rendezvous_timeout = absl::GetFlag(FLAGS_rendezvous_timeout);
  options.coordinator_grace = absl::GetFlag(FLAGS_coordinator_grace);
  options.kill_grace = absl::GetFlag(FLAGS_kill_grace);
  options.store = &store;
  return RunCommandRank(assignment, client, options);
}

int Finish(const RankRunResult& result);

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "One rank of a ringleader job attempt (started by ringleader-worker).");
  absl::ParseCommandLine(argc, argv);
  const std::string assignment_path = absl::GetFlag(FLAGS_assignment);
  const std::string coordinator = absl::GetFlag(FLAGS_coordinator);
  if (assignment_path.empty() || coordinator.empty()) {
    std::cerr << "ringleader-rank: --assignment and --coordinator are required\n";
    return 2;
  }
  v1::Assignment assignment;
  {
    std::ifstream in(assignment_path, std::ios::binary);
    if (!in || !assignment.ParseFromIstream(&in)) {
      std::cerr << "ringleader-rank: cannot read the assignment file " << assignment_path << "\n";
      return 2;
    }
  }

  const TlsConfig tls{absl::GetFlag(FLAGS_tls_dir), "worker", absl::GetFlag(FLAGS_insecure)};
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor(tls);
  if (!credentials.ok()) {
    std::cerr << "ringleader-rank: " << credentials.status().message() << "\n";
    return 2;
  }
  GrpcCoordinatorClientOptions client_options;
  client_options.credentials = *credentials;
  std::unique_ptr<GrpcCoordinatorClient> client =
      GrpcCoordinatorClient::Create(coordinator, std::move(client_options));
  client->AddAttemptToken(assignment.job_id(), assignment.generation(),
                          assignment.attempt_token());
  if (assignment.spec().command_size() > 0) {
    const RankRunResult result =
        RunCommandJob(assignment, client.get(), coordinator,
                      std::filesystem::path(assignment_path).parent_path().string());
    return Finish(result);
  }
  GlooOptions gloo;
  gloo.hostname = absl::GetFlag(FLAGS_collective_host);
  gloo.comm_threads = absl::GetFlag(FLAGS_comm_threads);
  gloo.rendezvous_timeout = absl::GetFlag(FLAGS_rendezvous_timeout);

  if (absl::GetFlag(FLAGS_blas_threads) < 1) {
    std::cerr << "[ringleader-rank] --blas_threads must be >= 1, got "
              << absl::GetFlag(FLAGS_blas_threads) << std::endl;
    return 2;
  }
  SetCpuMathThreads(absl::GetFlag(FLAGS_blas_threads));

  if (assignment.spec().model().kind() == kPreflightModelKind) {
    PreflightRankOptions preflight;
    preflight.worker_id = absl::GetFlag(FLAGS_worker_id);
    preflight.make_pair = MakePreflightPairFactory(client.get(), assignment, gloo);
    preflight.check.timeout = absl::Milliseconds(assignment.spec().collective_timeout_ms());
    preflight.coordinator_grace = absl::GetFlag(FLAGS_coordinator_grace);
    const PreflightRankResult checked = RunPreflightRank(assignment, client.get(), preflight);
    return Finish(RankRunResult{checked.status, {}, checked.finish_reported});
  }

  TrainingLoopOptions options;
  options.worker_id = absl::GetFlag(FLAGS_worker_id);
  options.make_preflight_pair = MakePreflightPairFactory(client.get(), assignment, gloo);
  options.victim_report_delay = absl::GetFlag(FLAGS_victim_report_delay);
  options.coordinator_grace = absl::GetFlag(FLAGS_coordinator_grace);
  // Tells the coordinator this process is alive even while it is blocked in a collective, so a
  // frozen rank can be told from the peers waiting for it (see the coordinator's
  // silent_rank_after).
  options.reporting.keepalive_interval = absl::Seconds(1);
  options.gpu = absl::GetFlag(FLAGS_gpu);
  options.snapshot_dir = absl::GetFlag(FLAGS_snapshot_dir);
  options.rendezvous_timeout = absl::GetFlag(FLAGS_rendezvous_timeout);
  options.mutate_spec_for_test =
      MutateSpecHookApplies(absl::GetFlag(FLAGS_test_only_mutate_spec), assignment);
  options.make_collective = MakeCollectiveFactory(client.get(), gloo);

  return Finish(RunRank(assignment, client.get(), options));
}

// Writes the report marker (the daemon then knows this rank spoke for itself); the exit code.
int Finish(const RankRunResult& result) {
  if (result.finish_reported) {
    if (const std::string marker = absl::GetFlag(FLAGS_report_marker); !marker.empty()) {
      std::ofstream(marker) << (result.status.ok() ? "ok\n" : "failed\n");
    }
  }
  if (!result.status.ok()) {
    std::cerr << "[ringleader-rank] failed: " << result.status << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) { return ringleader::Main(argc, argv); }
