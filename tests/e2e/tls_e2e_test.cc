// End to end, mutual TLS: the cluster (coordinator, worker daemons, ranks, CLI) speaks TLS
// with the certificates deploy/certs.sh made; a worker daemon without a certificate, with one
// from another CA, or with an expired one never gets in; a rotated certificate is picked up
// without a restart; a CLI without TLS is told what to give.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace ringleader {
namespace e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Long enough for a daemon with good credentials to register several times over.
constexpr absl::Duration kRefusedFor = absl::Seconds(4);
// A refused daemon logs its failed registration once its client's retries (about 8 s of
// backoff) ran out.
constexpr absl::Duration kFailureLogged = absl::Seconds(30);
// gRPC's file watcher re-reads the certificates every 10 s (TlsConfig::refresh).
constexpr absl::Duration kRotation = absl::Seconds(25);  // 10 s refresh + slack

class TlsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Cluster>> started = Cluster::Start(ClusterOptions());
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started);
  }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr) std::cerr << cluster_->LogTails(25) << std::endl;
    extra_.clear();
    cluster_.reset();
  }

  // Runs deploy/certs.sh with `args`.
  void Certs(const std::string& args) {
    const std::string command =
        absl::StrCat(RunfilePath("deploy/certs.sh"), " ", args, " >/dev/null 2>&1");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }

  // Starts a worker daemon named `name` with `tls_flag`; its log is `name`.log in the cluster.
  void StartWorker(const std::string& name, const std::string& tls_flag) {
    const fs::path dir = fs::path(cluster_->dir()) / name;
    std::vector<std::string> argv = {RunfilePath("worker/ringleader-worker"),
                                     "--coordinator=" + cluster_->address(),
                                     "--name=" + name,
                                     "--work_dir=" + dir.string(),
                                     "--rank_binary=" + RunfilePath("worker/ringleader-rank"),
                                     "--wait_timeout=2s",
                                     tls_flag};
    absl::StatusOr<std::unique_ptr<ChildProcess>> worker =
        ChildProcess::Start(argv, (fs::path(cluster_->dir()) / (name + ".log")).string());
    ASSERT_TRUE(worker.ok()) << worker.status();
    extra_.push_back(std::move(*worker));
  }

  bool Registered(const std::string& name) {
    absl::StatusOr<std::vector<v1::WorkerStatus>> workers = cluster_->ListWorkers();
    if (!workers.ok()) return false;
    for (const v1::WorkerStatus& worker : *workers) {
      if (worker.name() == name) return true;
    }
    return false;
  }

  std::string Log(const std::string& name) {
    std::ifstream file(fs::path(cluster_->dir()) / (name + ".log"));
    return std::string(std::istreambuf_iterator<char>(file), {});
  }

  std::unique_ptr<Cluster> cluster_;
  std::vector<std::unique_ptr<ChildProcess>> extra_;
};

TEST_F(TlsE2eTest, AJobRunsOverMutualTls) {
  absl::StatusOr<std::string> id = cluster_->Submit(SmallSyntheticSpec("tls-e2e"));
  ASSERT_TRUE(id.ok()) << id.status();
  const JobHistory history = cluster_->WaitForEnd(*id, absl::Seconds(60));
  ASSERT_TRUE(history.ended);
  EXPECT_EQ(history.final.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(history.final);
  // The CLI too, with the cluster's client certificate.
  const CliResult listed = cluster_->RunCli({"workers"}, absl::Seconds(20));
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_THAT(listed.output, HasSubstr(Cluster::WorkerName(0)));
}

TEST_F(TlsE2eTest, WorkersWithoutAGoodCertificateNeverGetIn) {
  const std::string other_ca = (fs::path(cluster_->dir()) / "other-ca").string();
  const std::string expired = (fs::path(cluster_->dir()) / "expired").string();
  Certs(other_ca);
  Certs(absl::StrCat(expired, " --ca-from ", cluster_->tls_dir(), " --only worker --days -1"));
  StartWorker("no-cert", "--insecure");
  StartWorker("other-ca", "--tls_dir=" + other_ca);
  StartWorker("expired", "--tls_dir=" + expired);
  // A control: the cluster's own certificate gets a new daemon in.
  StartWorker("good", "--tls_dir=" + cluster_->tls_dir());
  ASSERT_TRUE(WaitUntil([&] { return Registered("good"); }, kRefusedFor, "good registers").ok());
  // Each says its registration failed (the handshake fails; by then the good daemon has
  // registered), and is still not registered.
  for (const char* name : {"no-cert", "other-ca", "expired"}) {
    EXPECT_TRUE(WaitUntil([&] { return Log(name).find("registration failed") != std::string::npos; },
                          kFailureLogged, "a logged registration failure")
                    .ok())
        << name << ":\n" << Log(name);
    EXPECT_FALSE(Registered(name)) << name;
  }
}

TEST_F(TlsE2eTest, ARotatedCertificateIsPickedUpWithoutARestart) {
  // The daemon starts with an expired certificate, then its files are replaced by good ones.
  const std::string dir = (fs::path(cluster_->dir()) / "rotating").string();
  Certs(absl::StrCat(dir, " --ca-from ", cluster_->tls_dir(), " --only worker --days -1"));
  StartWorker("rotating", "--tls_dir=" + dir);
  // It tries, and is refused, with the expired one.
  ASSERT_TRUE(WaitUntil([&] { return Log("rotating").find("registration failed") !=
                                     std::string::npos; },
                        kFailureLogged, "a refused registration")
                  .ok())
      << Log("rotating");
  ASSERT_FALSE(Registered("rotating")) << Log("rotating");
  Certs(absl::StrCat(dir, " --ca-from ", cluster_->tls_dir(), " --only worker"));
  EXPECT_TRUE(WaitUntil([&] { return Registered("rotating"); }, kRotation,
                        "the rotated certificate gets the daemon in")
                  .ok())
      << Log("rotating");
}

// Runs the CLI with `flags` (no TLS flag added) and returns its exit code and output.
CliResult RunBareCli(const Cluster& cluster, const std::string& name,
                     const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {RunfilePath("client/ringleader"), "--coordinator",
                                   cluster.address(), "--timeout", "3s"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("workers");
  const std::string log = (fs::path(cluster.dir()) / (name + ".out")).string();
  CliResult result;
  absl::StatusOr<std::unique_ptr<ChildProcess>> cli = ChildProcess::Start(argv, log);
  if (!cli.ok()) return result;
  const ExitInfo exit = (*cli)->Wait();
  result.exit_code = exit.signaled ? -exit.signal : exit.exit_code;
  std::ifstream file(log);
  result.output.assign(std::istreambuf_iterator<char>(file), {});
  return result;
}

TEST_F(TlsE2eTest, ACliWithoutTlsIsToldWhatToGive) {
  // No --tls_dir and no RINGLEADER_TLS_DIR (the test's environment has none): a usage error
  // naming the fix.
  const CliResult bare = RunBareCli(*cluster_, "cli-no-tls", {});
  EXPECT_EQ(bare.exit_code, 2) << bare.output;
  EXPECT_THAT(bare.output, HasSubstr("--tls_dir"));
  EXPECT_THAT(bare.output, HasSubstr("deploy/certs.sh"));
  // Plaintext against the TLS coordinator: nothing is served (unreachable, exit 3).
  const CliResult plain = RunBareCli(*cluster_, "cli-plain", {"--insecure"});
  EXPECT_EQ(plain.exit_code, 3) << plain.output;
}

// Bearer tokens: a coordinator with --tokens_file lets only a known token submit, cancel or
// read (no --anonymous_reads); the worker daemons (certificates only) are unaffected.
TEST(TokenE2eTest, OnlyAKnownTokenSubmitsCancelsAndReads) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  const std::string tokens = tmp + "/tokens";
  constexpr char kToken[] = "e2e-token-0123456789abcdef";
  std::ofstream(tokens) << "alice " << kToken << "\n";
  std::ofstream(tmp + "/alice.token") << kToken << "\n";
  std::ofstream(tmp + "/mallory.token") << "e2e-token-not-the-right-one" << "\n";
  ClusterOptions options;
  options.coordinator_flags = {"--tokens_file=" + tokens};
  options.token = kToken;  // the harness's own calls (waiting for workers)
  absl::StatusOr<std::unique_ptr<Cluster>> started = Cluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Cluster& cluster = **started;
  const std::string alice = "--token_file=" + tmp + "/alice.token";
  const std::string mallory = "--token_file=" + tmp + "/mallory.token";

  const CliResult anonymous = cluster.RunCli({"submit", "--max_steps", "5"}, absl::Seconds(20));
  EXPECT_EQ(anonymous.exit_code, 1) << anonymous.output;
  EXPECT_THAT(anonymous.output, HasSubstr("SubmitJob needs a bearer token"));
  const CliResult wrong = cluster.RunCli({mallory, "list"}, absl::Seconds(20));
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_THAT(wrong.output, HasSubstr("unknown token"));

  const CliResult submitted =
      cluster.RunCli({alice, "--output", "json", "submit", "--epochs", "1000"}, absl::Seconds(20));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const size_t at = submitted.output.find("job-");
  ASSERT_NE(at, std::string::npos) << submitted.output;
  const std::string job = submitted.output.substr(at, 10);
  const CliResult cancel_anonymous = cluster.RunCli({"cancel", job}, absl::Seconds(20));
  EXPECT_EQ(cancel_anonymous.exit_code, 1) << cancel_anonymous.output;
  EXPECT_THAT(cancel_anonymous.output, HasSubstr("CancelJob needs a bearer token"));
  const CliResult cancelled = cluster.RunCli({alice, "cancel", job}, absl::Seconds(20));
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.output;
  EXPECT_TRUE(cluster.WaitForState(job, v1::JOB_STATE_CANCELLED, absl::Seconds(30)).ok());
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
