#include "coordinator/store/etcd/etcd_test_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/store/etcd/etcd_kv_grpc.h"

namespace ringleader::etcd {
namespace {

namespace fs = std::filesystem;
constexpr char kEtcd[] = "/usr/bin/etcd";

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  const std::string all = s.str();
  return all.size() > 3000 ? all.substr(all.size() - 3000) : all;
}

}  // namespace

absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("bind 127.0.0.1:0: ", std::strerror(errno)));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

absl::StatusOr<std::unique_ptr<EtcdTestProcess>> EtcdTestProcess::Start(
    const std::string& name, absl::Duration ready_within) {
  if (access(kEtcd, X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        kEtcd, " is missing: install Debian's etcd-server (deploy/setup.sh does)"));
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp ? tmp : "/tmp") / absl::StrCat("etcd-", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string log = (dir / "etcd.log").string();
  absl::StatusOr<int> client = FreeLoopbackPort();
  absl::StatusOr<int> peer = FreeLoopbackPort();
  if (!client.ok()) return client.status();
  if (!peer.ok()) return peer.status();
  const std::string client_url = absl::StrCat("http://127.0.0.1:", *client);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", *peer);
  std::vector<std::string> args = {
      kEtcd,
      "--name", name,
      "--data-dir", (dir / "data").string(),
      "--listen-client-urls", client_url,
      "--advertise-client-urls", client_url,
      "--listen-peer-urls", peer_url,
      "--initial-advertise-peer-urls", peer_url,
      "--initial-cluster", absl::StrCat(name, "=", peer_url),
      "--initial-cluster-state", "new",
      "--logger", "zap",
  };
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    setpgid(0, 0);
    execv(kEtcd, argv.data());
    _exit(127);
  }
  std::unique_ptr<EtcdTestProcess> process(new EtcdTestProcess(pid, client_url));

  EtcdKvGrpcOptions options;
  options.endpoints = {client_url};
  options.call_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<EtcdKvGrpc>> kv = EtcdKvGrpc::Create(options);
  if (!kv.ok()) return kv.status();
  const absl::Time deadline = absl::Now() + ready_within;
  absl::Status last;
  while (absl::Now() < deadline) {
    int wstatus = 0;
    if (waitpid(pid, &wstatus, WNOHANG) == pid) {
      process.release();  // reaped: nothing left to kill
      return absl::UnavailableError(absl::StrCat("etcd exited (status ", wstatus,
                                                 ") before answering; its log:\n", Tail(log)));
    }
    RangeRequest probe;
    probe.key = "/";
    last = (*kv)->Range(probe).status();
    if (last.ok()) return process;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::UnavailableError(absl::StrCat("etcd at ", client_url, " did not answer within ",
                                             absl::FormatDuration(ready_within), " (", last.ToString(),
                                             "); its log:\n", Tail(log)));
}

EtcdTestProcess::~EtcdTestProcess() {
  kill(pid_, SIGKILL);
  int wstatus = 0;
  waitpid(pid_, &wstatus, 0);
}

}  // namespace ringleader::etcd
