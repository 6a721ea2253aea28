#include "worker/launcher/command_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/command_spec.h"

namespace ringleader {
namespace {

constexpr char kCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";

// CUDA_VISIBLE_DEVICES for a GPU worker's command (command_env.h). `worker_visible`: the
// worker's own CUDA_VISIBLE_DEVICES, nullptr when it has none.
absl::StatusOr<std::string> CommandVisibleGpus(const v1::Assignment& assignment, int gpu,
                                               const std::string* worker_visible) {
  std::vector<std::string> worker_list;
  if (worker_visible != nullptr) {
    for (absl::string_view entry : absl::StrSplit(*worker_visible, ',')) {
      worker_list.emplace_back(absl::StripAsciiWhitespace(entry));
    }
  }
  auto name = [&](int32_t index) -> absl::StatusOr<std::string> {
    if (worker_visible == nullptr) return absl::StrCat(index);
    if (index < 0 || static_cast<size_t>(index) >= worker_list.size() ||
        worker_list[index].empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GPU index ", index, " of a rank on this host is not in this worker's ",
          kCudaVisibleDevices, "=", *worker_visible, " (", worker_list.size(),
          " entries): start the host's workers with the same ", kCudaVisibleDevices));
    }
    return worker_list[index];
  };
  std::vector<int32_t> gpus(assignment.local_gpus().begin(), assignment.local_gpus().end());
  const std::string listed = absl::StrCat("[", absl::StrJoin(gpus, ", "), "]");
  if (gpus.empty()) {
    if (assignment.local_world_size() > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the assignment does not list the GPUs of the job's ", assignment.local_world_size(),
          " ranks on this host (Assignment.local_gpus; is the coordinator older than this "
          "worker?), so ", kCudaVisibleDevices, " cannot make device LOCAL_RANK this worker's "
          "GPU; upgrade the coordinator"));
    }
    gpus.push_back(gpu);  // one rank on this host
  }
  const uint32_t local_rank = assignment.local_rank();
  if (local_rank >= gpus.size() || gpus[local_rank] != gpu) {
    return absl::FailedPreconditionError(
        absl::StrCat("the assignment lists GPUs ", listed, " for the job's ranks on this host, "
                     "but this worker drives GPU ", gpu, " as local rank ", local_rank));
  }
  if (std::find(gpus.begin(), gpus.end(), -1) != gpus.end()) {
    return name(gpu);  // CPU ranks on this host: the command sees its own GPU only
  }
  std::vector<std::string> visible;
  for (int32_t index : gpus) {
    absl::StatusOr<std::string> one = name(index);
    if (!one.ok()) return one.status();
    if (std::find(visible.begin(), visible.end(), *one) != visible.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GPU ", *one, " is listed twice among the job's ranks on this host (GPU indices ",
          listed, worker_visible == nullptr ? "" : absl::StrCat(" through ", kCudaVisibleDevices,
                                                               "=", *worker_visible),
          "): each worker of a host must drive its own GPU, and the host's workers must share "
          "one ", kCudaVisibleDevices, " (or none)"));
    }
    visible.push_back(*std::move(one));
  }
  return absl::StrJoin(visible, ",");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CommandEnvironment(const v1::Assignment& assignment,
                                                            const CommandEnvInputs& inputs) {
  std::map<std::string, std::string> env;
  for (const std::string& entry : inputs.inherited) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  std::optional<std::string> visible_gpus;  // set over the job's env below
  if (inputs.gpu >= 0) {
    auto inherited_visible = env.find(kCudaVisibleDevices);
    absl::StatusOr<std::string> visible = CommandVisibleGpus(
        assignment, inputs.gpu,
        inherited_visible == env.end() ? nullptr : &inherited_visible->second);
    if (!visible.ok()) return visible.status();
    visible_gpus = *std::move(visible);
  }
  // A worker started under torchrun (or by hand with RANK set) must not leak its own values.
  for (auto it = env.begin(); it != env.end();) {
    it = IsReservedEnvName(it->first) ? env.erase(it) : std::next(it);
  }
  const v1::JobSpec& spec = assignment.spec();
  for (const auto& [name, value] : spec.env()) env[name] = value;
  if (visible_gpus.has_value()) env[kCudaVisibleDevices] = *visible_gpus;
  env.emplace("OMP_NUM_THREADS", "1");  // only when neither the job nor the worker set it
  if (!inputs.python_path.empty()) {
    auto it = env.find("PYTHONPATH");
    env["PYTHONPATH"] = it == env.end() || it->second.empty()
                            ? inputs.python_path
                            : absl::StrCat(inputs.python_path, ":", it->second);
  }
  const std::string rank = absl::StrCat(assignment.rank());
  const std::string world = absl::StrCat(assignment.world_size());
  env["RANK"] = rank;
  env["WORLD_SIZE"] = world;
  env["LOCAL_RANK"] = absl::StrCat(assignment.local_rank());
  env["LOCAL_WORLD_SIZE"] = absl::StrCat(std::max(assignment.local_world_size(), 1u));
  env["GROUP_RANK"] = absl::StrCat(assignment.group_rank());
  env["GROUP_WORLD_SIZE"] = absl::StrCat(std::max(assignment.group_world_size(), 1u));
  env["ROLE_RANK"] = rank;
  env["ROLE_WORLD_SIZE"] = world;
  env["ROLE_NAME"] = "default";
  env["MASTER_ADDR"] = inputs.master_addr;
  env["MASTER_PORT"] = absl::StrCat(inputs.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] =
      absl::StrCat(assignment.generation() > 0 ? assignment.generation() - 1 : 0);
  env["TORCHELASTIC_MAX_RESTARTS"] = absl::StrCat(spec.max_restarts());
  env["TORCHELASTIC_RUN_ID"] = assignment.job_id();
  env["RINGLEADER_COORDINATOR"] = inputs.coordinator_address;
  if (!inputs.tls_dir.empty()) env["RINGLEADER_TLS_DIR"] = inputs.tls_dir;
  if (!assignment.attempt_token().empty()) {
    env["RINGLEADER_ATTEMPT_TOKEN"] = assignment.attempt_token();
  }
  env["RINGLEADER_JOB"] = assignment.job_id();
  env["RINGLEADER_GENERATION"] = absl::StrCat(assignment.generation());
  env["RINGLEADER_RANK"] = rank;
  if (!inputs.checkpoint_dir.empty()) env["RINGLEADER_CHECKPOINT_DIR"] = inputs.checkpoint_dir;
  if (!inputs.snapshot_dir.empty()) env["RINGLEADER_SNAPSHOT_DIR"] = inputs.snapshot_dir;
  if (spec.has_drift_interval_steps()) {
    env["RINGLEADER_DRIFT_INTERVAL_STEPS"] = absl::StrCat(spec.drift_interval_steps());
  }
  std::vector<std::string> entries;
  entries.reserve(env.size());
  for (const auto& [name, value] : env) entries.push_back(absl::StrCat(name, "=", value));
  return entries;
}

absl::StatusOr<std::string> ResolveProgram(const std::string& program,
                                           const std::string& path_variable,
                                           const std::string& workdir) {
  auto executable = [](const std::string& path) { return access(path.c_str(), X_OK) == 0; };
  if (program.find('/') != std::string::npos) {
    const std::string path =
        program[0] == '/' || workdir.empty() ? program : absl::StrCat(workdir, "/", program);
    if (executable(path)) return path;
    return absl::NotFoundError(absl::StrCat("command[0]: '", path, "' is not an executable file (",
                                            std::strerror(errno),
                                            "); give the path of a program on every worker"));
  }
  for (absl::string_view dir : absl::StrSplit(path_variable, ':', absl::SkipEmpty())) {
    const std::string path = absl::StrCat(dir, "/", program);
    if (executable(path)) return path;
  }
  return absl::NotFoundError(absl::StrCat("command[0]: '", program,
                                          "' was not found in PATH (", path_variable,
                                          "); give its absolute path or set env.PATH"));
}

absl::StatusOr<int> ReserveFreePort(const std::string& host) {
  sockaddr_storage address{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    length = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    length = sizeof(sockaddr_in6);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("collective host '", host, "' is not an IPv4 or IPv6 address"));
  }
  const int fd = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("no free port on ", host, ": ", error));
  }
  close(fd);
  return ntohs(address.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
}

}  // namespace ringleader
