// ringleader-worker: the worker daemon of one device. See worker/daemon.h.
//
//   ringleader-worker --coordinator=HOST:PORT [--name=NAME] [--gpu=N] [--work_dir=DIR]
//                     [--rank_binary=PATH] [--kill_grace=5s] [--rank_args=a,b]
//                     [--collective_host=ADDR] [--admin_listen=127.0.0.1:0]
//                     [--allowed_roots=DIR,DIR...] [--topology=RACK/HOST]
//
// SIGINT / SIGTERM: the running rank process (if any) is terminated, then the daemon exits 0.
// Confinement: the paths a job spec names (checkpoint_dir, data.path, model.init_from, a command
// job's workdir) must lie in --allowed_roots; by default the work dir and the Fashion-MNIST
// directory the built-in jobs read (see daemon.h, job_paths.h). --allowed_roots=/ accepts every
// absolute path.
// Multi-host jobs: ranks listen for their peers on --collective_host, by default the local
// address of the route to the coordinator (127.0.0.1 when the coordinator is on this host).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/coordinator_addresses.h"
#include "common/job_spec.h"
#include "common/topology.h"
#include "worker/coordinator_client/grpc_coordinator_client.h"
#include "common/tls/tls_credentials.h"
#include "worker/daemon/admin_server.h"
#include "worker/daemon/collective_address.h"
#include "worker/daemon/daemon.h"
#include "worker/daemon/worker_devices.h"

ABSL_FLAG(std::string, coordinator, "",
          "Coordinator address, host:port, or a comma-separated list of them (a leader and its "
          "standbys, in any order) (required).");
ABSL_FLAG(std::string, name, "",
          "Worker name; default <hostname>-cpu0, or <hostname>-gpuN with --gpu.");
ABSL_FLAG(int, gpu, -1, "Drive GPU N (CUDA device index) instead of the CPU.");
ABSL_FLAG(std::string, topology, "",
          "Where this daemon sits, RACK/HOST or HOST (letters, digits, '.', '_', '-'); the "
          "coordinator packs a job's ranks on the fewest hosts, then racks; default the host "
          "name.");
ABSL_FLAG(std::string, work_dir, "",
          "Directory for per-attempt files (assignment, rank log); default "
          "<temp dir>/ringleader-worker/<name>.");
ABSL_FLAG(std::string, snapshot_dir, "",
          "Where the ranks keep their snapshots in memory (DIR/<job>; emptied at start and at a "
          "clean stop); default /dev/shm/ringleader-snapshots/<name>-<hash of --work_dir>, or "
          "<work_dir>/snapshots without /dev/shm; "
          "'none' = no snapshots (restarts resume from checkpoints only).");
ABSL_FLAG(std::string, rank_binary, "",
          "Path of the rank binary; default ringleader-rank next to this executable.");
ABSL_FLAG(std::vector<std::string>, rank_args, {},
          "Extra arguments appended to every rank command line (comma-separated).");
ABSL_FLAG(std::string, collective_host, "",
          "Address this host's ranks listen on for their peers (gloo, a command job's "
          "MASTER_ADDR); empty = the local address of the route to the coordinator.");
ABSL_FLAG(std::string, admin_listen, "127.0.0.1:0",
          "Admin port (grpc.health.v1: SERVING while registered with the coordinator; server "
          "reflection), host:port; port 0 picks a free one (logged); empty = none.");
ABSL_FLAG(std::string, tls_dir, "",
          "mutual TLS to the coordinator: DIR/ca.pem, DIR/worker.pem, DIR/worker.key "
          "(deploy/certs.sh makes them), passed on to the ranks. Required unless --insecure");
ABSL_FLAG(bool, insecure, false, "plaintext gRPC to the coordinator (no TLS)");
ABSL_FLAG(bool, admin_port_per_gpu, false,
          "Add the --gpu index to --admin_listen's port (one unit per GPU on a host: "
          "--admin_listen=127.0.0.1:7170 gives GPU 0 port 7170, GPU 12 port 7182).");
ABSL_FLAG(std::vector<std::string>, allowed_roots, {},
          "Directories (absolute, comma-separated) that every path a job spec names must lie "
          "in, after resolving symbolic links: checkpoint_dir (and what is written below it), "
          "data.path, model.init_from, a command job's workdir. A job naming a path outside "
          "fails without restarts. Empty = --work_dir plus /usr/share/datasets/fashion-mnist "
          "(the built-in jobs' data set); --allowed_roots=/ accepts every absolute path.");
ABSL_FLAG(absl::Duration, kill_grace, absl::Seconds(5),
          "Grace between SIGTERM and SIGKILL when a rank process must stop.");
ABSL_FLAG(absl::Duration, wait_timeout, absl::Seconds(10), "Long-poll length for assignments.");

namespace ringleader {
namespace {

std::string HostName() {
  char buffer[256] = {0};
  if (gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0') return "localhost";
  return buffer;
}

std::string DefaultRankBinary() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "ringleader-rank";
  return (self.parent_path() / "ringleader-rank").string();
}

int Main(int argc, char** argv) {
  // Block the shutdown signals before any thread exists, so every thread inherits the mask and
  // only the watcher below receives them (with sigwait).
  sigset_t shutdown_signals;
  sigemptyset(&shutdown_signals);
  sigaddset(&shutdown_signals, SIGINT);
  sigaddset(&shutdown_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &shutdown_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::SetProgramUsageMessage(
      "Worker daemon: registers one device with the coordinator and runs the ranks assigned to "
      "it.\nUsage: ringleader-worker --coordinator=HOST:PORT[,HOST:PORT...] [--gpu=N] "
      "[--name=NAME]");
  absl::ParseCommandLine(argc, argv);

  WorkerDaemonOptions options;
  options.coordinator_address = absl::GetFlag(FLAGS_coordinator);
  if (options.coordinator_address.empty()) {
    std::cerr << "ringleader-worker: --coordinator is required (e.g. "
                 "--coordinator=coordinator-host:7070)\n";
    return 2;
  }
  absl::StatusOr<std::vector<std::string>> coordinators =
      ParseCoordinatorAddresses(options.coordinator_address);
  if (!coordinators.ok()) {
    std::cerr << "ringleader-worker: --coordinator: " << coordinators.status().message() << "\n";
    return 2;
  }
  TlsConfig tls{absl::GetFlag(FLAGS_tls_dir), "worker", absl::GetFlag(FLAGS_insecure)};
  // Absolute: the ranks (and a command job's script) run in other directories.
  if (!tls.dir.empty()) tls.dir = std::filesystem::absolute(tls.dir).string();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor(tls);
  if (!credentials.ok()) {
    std::cerr << "ringleader-worker: " << credentials.status().message() << "\n";
    return 2;
  }
  options.host = HostName();
  options.topology = absl::GetFlag(FLAGS_topology);
  if (options.topology.empty()) options.topology = options.host;
  if (absl::StatusOr<Topology> topology = ParseTopology(options.topology); !topology.ok()) {
    std::cerr << "ringleader-worker: --topology: " << topology.status().message()
              << (absl::GetFlag(FLAGS_topology).empty()
                      ? " (it defaults to the host name: give --topology=RACK/HOST)"
                      : "")
              << "\n";
    return 2;
  }
  options.gpu = absl::GetFlag(FLAGS_gpu);
  absl::StatusOr<std::vector<v1::Device>> devices = WorkerDevices(options.gpu);
  if (!devices.ok()) {
    std::cerr << "ringleader-worker: " << devices.status().message() << "\n";
    return 2;
  }
  options.devices = *devices;
  options.name = absl::GetFlag(FLAGS_name);
  if (options.name.empty()) {
    options.name = options.gpu >= 0 ? absl::StrCat(options.host, "-gpu", options.gpu)
                                    : absl::StrCat(options.host, "-cpu0");
  }
  options.work_dir = absl::GetFlag(FLAGS_work_dir);
  if (options.work_dir.empty()) {
    std::error_code error;
    options.work_dir =
        (std::filesystem::temp_directory_path(error) / "ringleader-worker" / options.name).string();
  }
  options.snapshot_dir = absl::GetFlag(FLAGS_snapshot_dir);
  if (options.snapshot_dir == "none") {
    options.snapshot_dir.clear();
  } else if (options.snapshot_dir.empty()) {
    // Memory, one directory per daemon: named after the worker and its work directory, so that
    // daemons of one host never share one.
    std::error_code error;
    const std::string work_dir = std::filesystem::absolute(options.work_dir, error).string();
    options.snapshot_dir =
        std::filesystem::is_directory("/dev/shm", error)
            ? absl::StrFormat("/dev/shm/ringleader-snapshots/%s-%08x", options.name,
                              static_cast<uint32_t>(std::hash<std::string>()(work_dir)))
            : (std::filesystem::path(options.work_dir) / "snapshots").string();
  }
  options.allowed_roots = absl::GetFlag(FLAGS_allowed_roots);
  if (options.allowed_roots.empty()) {
    // Secure by default: the worker's own directory and the data set the built-in jobs read.
    // (A relative --work_dir is taken from the current directory, as the daemon does.)
    std::error_code error;
    const std::filesystem::path work_dir = std::filesystem::absolute(options.work_dir, error);
    options.allowed_roots = {error ? options.work_dir : work_dir.lexically_normal().string(),
                             kDefaultFashionMnistPath};
  }
  for (const std::string& root : options.allowed_roots) {
    if (root.empty() || root[0] != '/') {
      std::cerr << "ringleader-worker: --allowed_roots: '" << root
                << "' is not an absolute path (e.g. --allowed_roots=/var/lib/ringleader,"
                   "/srv/data)\n";
      return 2;
    }
  }
  options.rank_binary = absl::GetFlag(FLAGS_rank_binary);
  if (options.rank_binary.empty()) options.rank_binary = DefaultRankBinary();
  options.rank_extra_args = absl::GetFlag(FLAGS_rank_args);
  if (!SetsCollectiveHost(options.rank_extra_args)) {
    std::string host = absl::GetFlag(FLAGS_collective_host);
    if (host.empty()) {
      // Any coordinator of the list is as good a route: they share the network.
      absl::StatusOr<std::string> routed = LocalAddressTowards(coordinators->front());
      if (!routed.ok()) {
        std::cerr << "ringleader-worker: --collective_host: " << routed.status().message()
                  << "; give the address peers reach this host at\n";
        return 2;
      }
      host = *routed;
    }
    std::cerr << "[ringleader-worker] ranks listen for peers on " << host
              << " (--collective_host)" << std::endl;
    options.rank_extra_args.push_back(absl::StrCat("--collective_host=", host));
  }
  options.kill_grace = absl::GetFlag(FLAGS_kill_grace);
  options.wait_assignment_timeout = absl::GetFlag(FLAGS_wait_timeout);

  std::unique_ptr<AdminServer> admin;
  if (std::string listen = absl::GetFlag(FLAGS_admin_listen); !listen.empty()) {
    if (absl::GetFlag(FLAGS_admin_port_per_gpu) && options.gpu >= 0) {
      absl::StatusOr<std::string> offset = OffsetListenPort(listen, options.gpu);
      if (!offset.ok()) {
        std::cerr << "ringleader-worker: " << offset.status().message() << "\n";
        return 2;
      }
      listen = *offset;
    }
    absl::StatusOr<std::unique_ptr<AdminServer>> started = AdminServer::Start(listen);
    if (!started.ok()) {
      std::cerr << "ringleader-worker: " << started.status().message() << "\n";
      return 2;
    }
    admin = std::move(*started);
    std::cerr << "[ringleader-worker] admin port (health) on " << admin->address() << std::endl;
    options.on_lease_change = [server = admin.get()](bool registered) {
      server->SetServing(registered);
    };
  }
  // The ranks reach the coordinator the same way.
  options.rank_extra_args.push_back(TlsFlagFor(tls));
  GrpcCoordinatorClientOptions client_options;
  client_options.credentials = *credentials;
  std::unique_ptr<GrpcCoordinatorClient> client =
      GrpcCoordinatorClient::Create(options.coordinator_address, std::move(client_options));
  WorkerDaemon daemon(client.get(), options);

  // The only thread that receives SIGINT/SIGTERM (all others have them blocked).
  std::atomic<bool> run_returned{false};
  std::thread watcher([&daemon, &run_returned, shutdown_signals] {
    int signal_number = 0;
    sigwait(&shutdown_signals, &signal_number);
    if (run_returned) return;  // woken by Main below, not by a real signal
    std::cerr << "[ringleader-worker] " << SignalName(signal_number) << ": shutting down"
              << std::endl;
    daemon.Stop();
  });

  const absl::Status status = daemon.Run();
  // Wake the watcher if no signal did, so it is joined before the daemon goes away.
  run_returned = true;
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  if (!status.ok()) {
    std::cerr << "ringleader-worker: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) { return ringleader::Main(argc, argv); }
