// A real etcd for tests: Debian's /usr/bin/etcd (package etcd-server, which deploy/setup.sh
// installs) on free loopback ports, its data directory under TEST_TMPDIR, killed when the object
// goes away. EtcdTestProcess is one member; EtcdTestCluster is several members of one cluster,
// each of which a test may kill and restart (quorum loss, recovery).
#ifndef RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_TEST_PROCESS_H_
#define RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_TEST_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringleader::etcd {

class EtcdTestProcess {
 public:
  // Starts etcd named `name` with its data in <base_dir>/etcd-<name> (base_dir "": TEST_TMPDIR,
  // or /tmp outside a test) and waits (at most `ready_within`) until it answers a read. Errors:
  // FAILED_PRECONDITION when the binary is missing (naming the package), UNAVAILABLE when it
  // exits or never answers (with its log's tail).
  static absl::StatusOr<std::unique_ptr<EtcdTestProcess>> Start(
      const std::string& name, absl::Duration ready_within = absl::Seconds(30),
      const std::string& base_dir = "");
  ~EtcdTestProcess();  // SIGKILL, then reaps it

  // "http://127.0.0.1:PORT".
  const std::string& endpoint() const { return endpoint_; }

 private:
  EtcdTestProcess(pid_t pid, std::string endpoint) : pid_(pid), endpoint_(std::move(endpoint)) {}
  const pid_t pid_;
  const std::string endpoint_;
};

// `members` etcd processes forming one cluster on loopback: member i is named <name>-<i>, keeps
// its data in <TEST_TMPDIR>/etcd-<name>-<i> and its client and peer ports for the cluster's
// lifetime, so that a restarted member rejoins where it was. Not thread-safe.
class EtcdTestCluster {
 public:
  // Starts every member and waits (at most `ready_within`) until the cluster commits a write.
  // Errors: as EtcdTestProcess::Start (UNAVAILABLE carries the logs' tails); INVALID_ARGUMENT
  // for members < 1.
  static absl::StatusOr<std::unique_ptr<EtcdTestCluster>> Start(
      const std::string& name, int members = 3, absl::Duration ready_within = absl::Seconds(30));
  ~EtcdTestCluster();  // SIGKILLs and reaps every running member

  int size() const { return static_cast<int>(members_.size()); }
  // Every member's client URL ("http://127.0.0.1:PORT"), running or not, in member order.
  std::vector<std::string> endpoints() const;
  const std::string& endpoint(int i) const { return members_.at(i).client_url; }
  bool running(int i) const { return members_.at(i).pid > 0; }

  // SIGKILLs member i and reaps it (no clean shutdown: a crash). Errors: FAILED_PRECONDITION
  // when it is not running.
  absl::Status Kill(int i);
  // Starts member i again on its data directory and ports (--initial-cluster-state existing):
  // it rejoins the cluster. Returns once the process runs; AwaitWritable waits for the cluster.
  // Errors: FAILED_PRECONDITION when it is running; INTERNAL when it cannot be started.
  absl::Status Restart(int i);

  // Polls (every 50 ms, at most `within`) until a write through any running member's endpoint
  // is committed by the cluster (a quorum of members). The write is a transaction whose
  // condition never holds, so it goes through consensus without changing a key. Errors:
  // UNAVAILABLE with the last failure and the logs' tails; also when a member exited.
  absl::Status AwaitWritable(absl::Duration within);

 private:
  struct Member {
    std::string name;
    std::string dir;  // data in dir/data, log in dir/etcd.log
    std::string client_url;
    std::string peer_url;
    pid_t pid = 0;  // 0: not running
  };
  explicit EtcdTestCluster(std::vector<Member> members) : members_(std::move(members)) {}
  absl::Status Spawn(int i, const std::string& cluster_state);
  // UNAVAILABLE when a running member exited on its own (reaping it), with its log's tail.
  absl::Status CheckAlive();
  std::string Logs() const;

  std::vector<Member> members_;
  std::string initial_cluster_;  // name=peer_url,...
};

// A loopback port nothing listens on now.
absl::StatusOr<int> FreeLoopbackPort();

}  // namespace ringleader::etcd

#endif  // RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_TEST_PROCESS_H_
