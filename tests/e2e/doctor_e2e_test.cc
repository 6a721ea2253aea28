// `ringleader doctor` against real processes on 127.0.0.1: three worker daemons, one of them
// (and the rank processes it starts) held to 20% of a core by a CPU cgroup (v1
// cpu.cfs_quota_us = 20000 of cpu.cfs_period_us = 100000; cpu.max "20000 100000" on v2). The
// check names and quarantines that worker, and only it, within 2 rounds and 60 s; uncordon
// releases it. The test makes and removes its own cgroup and fails, never skips, when it
// cannot (it needs root and a cpu controller).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace ringleader {
namespace e2e {
namespace {

using ::testing::HasSubstr;

namespace fs = std::filesystem;

absl::Status WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", text, "' to ", path.string()));
  return absl::OkStatus();
}

// A CPU cgroup of its own, removed (its processes moved back to the root) when destroyed.
class CpuQuotaCgroup {
 public:
  // `quota_us` of every `period_us`.
  static absl::StatusOr<std::unique_ptr<CpuQuotaCgroup>> Create(int quota_us, int period_us) {
    const std::string name = absl::StrCat("ringleader-doctor-e2e-", getpid());
    fs::path root;
    bool v2 = false;
    if (fs::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")) {
      root = "/sys/fs/cgroup/cpu";
    } else if (fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
      root = "/sys/fs/cgroup";
      v2 = true;
    } else {
      return absl::FailedPreconditionError(
          "no CPU cgroup controller: neither /sys/fs/cgroup/cpu (v1) nor /sys/fs/cgroup "
          "(v2) is mounted");
    }
    std::error_code error;
    fs::create_directory(root / name, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create the cgroup ", (root / name).string(), ": ", error.message(),
          " (this test needs root)"));
    }
    auto cgroup = std::unique_ptr<CpuQuotaCgroup>(new CpuQuotaCgroup(root, root / name));
    if (v2) {
      RETURN_IF_ERROR(WriteFile(cgroup->dir_ / "cpu.max",
                                    absl::StrCat(quota_us, " ", period_us)));
    } else {
      RETURN_IF_ERROR(WriteFile(cgroup->dir_ / "cpu.cfs_period_us", absl::StrCat(period_us)));
      RETURN_IF_ERROR(WriteFile(cgroup->dir_ / "cpu.cfs_quota_us", absl::StrCat(quota_us)));
    }
    return cgroup;
  }

  ~CpuQuotaCgroup() {
    std::ifstream procs(dir_ / "cgroup.procs");
    std::string pid;
    while (std::getline(procs, pid)) WriteFile(root_ / "cgroup.procs", pid).IgnoreError();
    std::error_code ignored;
    fs::remove(dir_, ignored);
  }

  // Moves process `pid`; the children it starts afterwards are born in the cgroup.
  absl::Status Add(pid_t pid) { return WriteFile(dir_ / "cgroup.procs", absl::StrCat(pid)); }

 private:
  CpuQuotaCgroup(fs::path root, fs::path dir) : root_(std::move(root)), dir_(std::move(dir)) {}
  fs::path root_;
  fs::path dir_;
};

TEST(DoctorE2eTest, AWorkerHeldTo20PercentOfACoreIsQuarantinedWithin2Rounds) {
  absl::StatusOr<std::unique_ptr<CpuQuotaCgroup>> cgroup = CpuQuotaCgroup::Create(20000, 100000);
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();  // fails loudly: the figure needs a cgroup
  ClusterOptions options;
  options.workers = 3;
  options.insecure = true;
  absl::StatusOr<std::unique_ptr<Cluster>> started = Cluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Cluster& cluster = **started;
  const int slow = 2;
  ASSERT_TRUE((*cgroup)->Add(cluster.WorkerPid(slow)).ok());
  const std::string slow_name = Cluster::WorkerName(slow);

  const absl::Time start = absl::Now();
  int rounds = 0;
  std::string quarantined_reason;
  CliResult last;
  while (rounds < 2 && quarantined_reason.empty()) {
    ++rounds;
    last = cluster.RunCli({"doctor"}, absl::Seconds(60));
    absl::StatusOr<std::vector<v1::WorkerStatus>> workers = cluster.ListWorkers();
    ASSERT_TRUE(workers.ok()) << workers.status();
    for (const v1::WorkerStatus& worker : *workers) {
      if (worker.name() == slow_name && worker.state() == v1::WORKER_STATE_QUARANTINED) {
        quarantined_reason = worker.quarantine_reason();
      } else {
        EXPECT_TRUE(worker.quarantine_reason().empty())
            << worker.name() << " quarantined: " << worker.quarantine_reason() << "\n"
            << last.output;
      }
    }
  }
  const absl::Duration took = absl::Now() - start;
  std::cout << "doctor: " << slow_name << " quarantined after " << rounds << " round(s) in "
            << took << "\n" << last.output << std::endl;
  ASSERT_FALSE(quarantined_reason.empty()) << last.output << cluster.LogTails();
  EXPECT_LE(took, absl::Seconds(60));
  EXPECT_THAT(quarantined_reason, HasSubstr("matmul"));
  EXPECT_EQ(last.exit_code, 1) << last.output;  // not clean
  EXPECT_THAT(last.output, HasSubstr("QUARANTINED"));

  // Placement skips it: a 3-rank job waits, saying why; uncordon lets it run.
  const CliResult listed = cluster.RunCli({"workers"}, absl::Seconds(10));
  EXPECT_THAT(listed.output, HasSubstr(slow_name + ": pre-flight check"));
  const CliResult released = cluster.RunCli({"uncordon", slow_name}, absl::Seconds(10));
  EXPECT_EQ(released.exit_code, 0) << released.output;
  absl::StatusOr<std::vector<v1::WorkerStatus>> after = cluster.ListWorkers();
  ASSERT_TRUE(after.ok());
  for (const v1::WorkerStatus& worker : *after) {
    EXPECT_EQ(worker.state(), v1::WORKER_STATE_IDLE) << worker.name();
  }
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
