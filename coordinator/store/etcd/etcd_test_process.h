// A real etcd for tests: Debian's /usr/bin/etcd (package etcd-server, which deploy/setup.sh
// installs) on free loopback ports, its data directory under TEST_TMPDIR, killed when the object
// goes away.
#ifndef RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_TEST_PROCESS_H_
#define RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_TEST_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringleader::etcd {

class EtcdTestProcess {
 public:
  // Starts etcd named `name` with its data in <TEST_TMPDIR>/etcd-<name> and waits (at most
  // `ready_within`) until it answers a read. Errors: FAILED_PRECONDITION when the binary is
  // missing (naming the package), UNAVAILABLE when it exits or never answers (with its log's
  // tail).
  static absl::StatusOr<std::unique_ptr<EtcdTestProcess>> Start(
      const std::string& name, absl::Duration ready_within = absl::Seconds(30));
  ~EtcdTestProcess();  // SIGKILL, then reaps it

  // "http://127.0.0.1:PORT".
  const std::string& endpoint() const { return endpoint_; }

 private:
  EtcdTestProcess(pid_t pid, std::string endpoint) : pid_(pid), endpoint_(std::move(endpoint)) {}
  const pid_t pid_;
  const std::string endpoint_;
};

// A loopback port nothing listens on now.
absl::StatusOr<int> FreeLoopbackPort();

}  // namespace ringleader::etcd

#endif  // RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_TEST_PROCESS_H_
