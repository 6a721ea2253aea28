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
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// The directory tests keep their etcd data in: `base_dir`, else TEST_TMPDIR, else /tmp.
fs::path BaseDir(const std::string& base_dir) {
  if (!base_dir.empty()) return base_dir;
  const char* tmp = std::getenv("TEST_TMPDIR");
  return fs::path(tmp ? tmp : "/tmp");
}

absl::Status MissingBinary() {
  if (access(kEtcd, X_OK) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(kEtcd, " is missing: install Debian's etcd-server (deploy/setup.sh does)"));
}

// Starts etcd with `args` (argv[0] excluded) in a process group of its own, its output
// appended to `log`.
absl::StatusOr<pid_t> Spawn(std::vector<std::string> args, const std::string& log) {
  args.insert(args.begin(), kEtcd);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    setpgid(0, 0);
    execv(kEtcd, argv.data());
    _exit(127);
  }
  return pid;
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
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
    const std::string& name, absl::Duration ready_within, const std::string& base_dir) {
  if (absl::Status missing = MissingBinary(); !missing.ok()) return missing;
  const fs::path dir = BaseDir(base_dir) / absl::StrCat("etcd-", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string log = (dir / "etcd.log").string();
  absl::StatusOr<int> client = FreeLoopbackPort();
  absl::StatusOr<int> peer = FreeLoopbackPort();
  if (!client.ok()) return client.status();
  if (!peer.ok()) return peer.status();
  const std::string client_url = absl::StrCat("http://127.0.0.1:", *client);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", *peer);
  absl::StatusOr<pid_t> pid = Spawn(
      {
          "--name", name,
          "--data-dir", (dir / "data").string(),
          "--listen-client-urls", client_url,
          "--advertise-client-urls", client_url,
          "--listen-peer-urls", peer_url,
          "--initial-advertise-peer-urls", peer_url,
          "--initial-cluster", absl::StrCat(name, "=", peer_url),
          "--initial-cluster-state", "new",
          "--logger", "zap",
      },
      log);
  if (!pid.ok()) return pid.status();
  std::unique_ptr<EtcdTestProcess> process(new EtcdTestProcess(*pid, client_url));

  EtcdKvGrpcOptions options;
  options.endpoints = {client_url};
  options.call_timeout = absl::Seconds(1);
  const absl::Time deadline = absl::Now() + ready_within;
  absl::Status last;
  while (absl::Now() < deadline) {
    int wstatus = 0;
    if (waitpid(*pid, &wstatus, WNOHANG) == *pid) {
      process.release();  // reaped: nothing left to kill
      return absl::UnavailableError(absl::StrCat("etcd exited (status ", wstatus,
                                                 ") before answering; its log:\n", Tail(log)));
    }
    // A client of its own each time: gRPC may wait many seconds before it connects again to
    // an endpoint that refused it (etcd still starting).
    absl::StatusOr<std::unique_ptr<EtcdKvGrpc>> kv = EtcdKvGrpc::Create(options);
    if (!kv.ok()) return kv.status();
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

EtcdTestProcess::~EtcdTestProcess() { KillAndReap(pid_); }

absl::StatusOr<std::unique_ptr<EtcdTestCluster>> EtcdTestCluster::Start(
    const std::string& name, int members, absl::Duration ready_within) {
  if (absl::Status missing = MissingBinary(); !missing.ok()) return missing;
  if (members < 1) {
    return absl::InvalidArgumentError(absl::StrCat("an etcd cluster of ", members, " members"));
  }
  // Two ports per member, all distinct (a port just released may be handed out again).
  std::set<int> ports;
  while (ports.size() < 2 * static_cast<size_t>(members)) {
    absl::StatusOr<int> port = FreeLoopbackPort();
    if (!port.ok()) return port.status();
    ports.insert(*port);
  }
  auto port = ports.begin();
  std::vector<Member> list;
  std::vector<std::string> initial;
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = absl::StrCat(name, "-", i);
    const fs::path dir = BaseDir("") / absl::StrCat("etcd-", m.name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    m.dir = dir.string();
    m.client_url = absl::StrCat("http://127.0.0.1:", *port++);
    m.peer_url = absl::StrCat("http://127.0.0.1:", *port++);
    initial.push_back(absl::StrCat(m.name, "=", m.peer_url));
    list.push_back(std::move(m));
  }
  std::unique_ptr<EtcdTestCluster> cluster(new EtcdTestCluster(std::move(list)));
  cluster->initial_cluster_ = absl::StrJoin(initial, ",");
  for (int i = 0; i < members; ++i) {
    if (absl::Status spawned = cluster->Spawn(i, "new"); !spawned.ok()) return spawned;
  }
  if (absl::Status ready = cluster->AwaitWritable(ready_within); !ready.ok()) return ready;
  return cluster;
}

EtcdTestCluster::~EtcdTestCluster() {
  for (Member& m : members_) {
    if (m.pid > 0) KillAndReap(m.pid);
  }
}

std::vector<std::string> EtcdTestCluster::endpoints() const {
  std::vector<std::string> urls;
  for (const Member& m : members_) urls.push_back(m.client_url);
  return urls;
}

absl::Status EtcdTestCluster::Spawn(int i, const std::string& cluster_state) {
  Member& m = members_.at(i);
  absl::StatusOr<pid_t> pid = etcd::Spawn(
      {
          "--name", m.name,
          "--data-dir", (fs::path(m.dir) / "data").string(),
          "--listen-client-urls", m.client_url,
          "--advertise-client-urls", m.client_url,
          "--listen-peer-urls", m.peer_url,
          "--initial-advertise-peer-urls", m.peer_url,
          "--initial-cluster", initial_cluster_,
          "--initial-cluster-state", cluster_state,
          "--initial-cluster-token", absl::StrCat(members_[0].name, "-cluster"),
          "--logger", "zap",
      },
      (fs::path(m.dir) / "etcd.log").string());
  if (!pid.ok()) return pid.status();
  m.pid = *pid;
  return absl::OkStatus();
}

absl::Status EtcdTestCluster::Kill(int i) {
  Member& m = members_.at(i);
  if (m.pid <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("etcd member ", m.name, " is not running"));
  }
  KillAndReap(m.pid);
  m.pid = 0;
  return absl::OkStatus();
}

absl::Status EtcdTestCluster::Restart(int i) {
  Member& m = members_.at(i);
  if (m.pid > 0) {
    return absl::FailedPreconditionError(absl::StrCat("etcd member ", m.name, " is running"));
  }
  return Spawn(i, "existing");
}

absl::Status EtcdTestCluster::CheckAlive() {
  for (Member& m : members_) {
    int wstatus = 0;
    if (m.pid > 0 && waitpid(m.pid, &wstatus, WNOHANG) == m.pid) {
      m.pid = 0;  // reaped
      return absl::UnavailableError(
          absl::StrCat("etcd member ", m.name, " exited (status ", wstatus, "); its log:\n",
                       Tail((fs::path(m.dir) / "etcd.log").string())));
    }
  }
  return absl::OkStatus();
}

std::string EtcdTestCluster::Logs() const {
  std::string logs;
  for (const Member& m : members_) {
    absl::StrAppend(&logs, "--- ", m.name, (m.pid > 0 ? "" : " (not running)"), ":\n",
                    Tail((fs::path(m.dir) / "etcd.log").string()), "\n");
  }
  return logs;
}

absl::Status EtcdTestCluster::AwaitWritable(absl::Duration within) {
  std::vector<std::string> running;
  for (const Member& m : members_) {
    if (m.pid > 0) running.push_back(m.client_url);
  }
  if (running.empty()) return absl::UnavailableError("no etcd member is running");
  EtcdKvGrpcOptions options;
  options.endpoints = running;
  options.call_timeout = absl::Milliseconds(500);
  // A write that changes nothing: its condition (version < 0) never holds, but a transaction
  // with a put is committed through consensus all the same.
  TxnRequest probe;
  Compare never;
  never.key = "\x01etcd-test-cluster-probe";
  never.target = Compare::Target::kVersion;
  never.result = Compare::Result::kLess;
  never.value = 0;
  probe.compare.push_back(never);
  probe.success.push_back(Op::Put(never.key, ""));
  const absl::Time deadline = absl::Now() + within;
  absl::Status last;
  while (true) {
    if (absl::Status alive = CheckAlive(); !alive.ok()) return alive;
    // A client of its own each time: gRPC may wait many seconds before it connects again to
    // an endpoint that refused it (a member still starting).
    absl::StatusOr<std::unique_ptr<EtcdKvGrpc>> kv = EtcdKvGrpc::Create(options);
    if (!kv.ok()) return kv.status();
    absl::StatusOr<TxnResult> written = (*kv)->Txn(probe);
    last = written.status();
    if (written.ok()) {
      if (written->succeeded) return absl::InternalError("the probe's condition held");
      return absl::OkStatus();
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::UnavailableError(absl::StrCat("the etcd cluster did not commit a write within ",
                                             absl::FormatDuration(within), " (",
                                             last.ToString(), "); the logs:\n", Logs()));
}

}  // namespace ringleader::etcd
