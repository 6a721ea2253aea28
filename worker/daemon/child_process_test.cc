// ChildProcess with /bin/sh as the child. Readiness of a child (its signal handlers are in place)
// is signalled through a FIFO the test blocks on, so no test waits on time.
#include "worker/daemon/child_process.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TmpPath(const std::string& name) {
  return (fs::path(std::getenv("TEST_TMPDIR")) / name).string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Blocks until the child opened `fifo` for writing and wrote a line.
std::string AwaitReady(const std::string& fifo) {
  std::ifstream in(fifo);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(SignalNameTest, NamesCommonSignals) {
  EXPECT_EQ(SignalName(SIGABRT), "SIGABRT");
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalName(12345), "signal 12345");
}

TEST(ExitInfoTest, Describes) {
  EXPECT_EQ((ExitInfo{true, 6, 0}).Describe(), "killed by signal 6 (SIGABRT)");
  EXPECT_EQ((ExitInfo{false, 0, 3}).Describe(), "exited with code 3");
  EXPECT_TRUE((ExitInfo{false, 0, 0}).success());
  EXPECT_FALSE((ExitInfo{false, 0, 1}).success());
}

TEST(ExitFailureTest, ASignalIsSignalWithItsNumberAnExitIsExitedAStopIsStopped) {
  const v1::RankFailure killed = ExitFailure(ExitInfo{true, SIGKILL, 0});
  EXPECT_EQ(killed.kind(), v1::RankFailure::SIGNAL);
  EXPECT_EQ(killed.signal(), SIGKILL);
  const v1::RankFailure exited = ExitFailure(ExitInfo{false, 0, 3});
  EXPECT_EQ(exited.kind(), v1::RankFailure::EXITED);
  EXPECT_EQ(exited.signal(), 0);
  const v1::RankFailure stopped = ExitFailure(ExitInfo{true, SIGTERM, 0}, /*stopped=*/true);
  EXPECT_EQ(stopped.kind(), v1::RankFailure::STOPPED);
  EXPECT_EQ(stopped.signal(), SIGTERM);
}

TEST(ChildProcessTest, ReportsExitCodeAndCapturesOutput) {
  const std::string log = TmpPath("exit.log");
  auto child = ChildProcess::Start({"/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"}, log);
  ASSERT_TRUE(child.ok()) << child.status();
  const ExitInfo exit = (*child)->Wait();
  EXPECT_FALSE(exit.signaled);
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_TRUE((*child)->HasExited());
  EXPECT_EQ((*child)->Wait().exit_code, 3);  // repeated Wait gives the same answer
  EXPECT_EQ(ReadFile(log), "hello\noops\n");
}

TEST(ChildProcessTest, SetsEnvironmentWorkdirAndSendsStderrToAPipe) {
  const std::string log = TmpPath("options.log");
  const std::string dir = TmpPath("workdir");
  fs::create_directories(dir);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ChildOptions options;
  options.log_path = log;
  options.stderr_fd = pipe_fds[1];
  options.env = std::vector<std::string>{"GREETING=hi there", "PATH=/usr/bin:/bin"};
  options.workdir = dir;
  auto child = ChildProcess::Start(
      {"/bin/sh", "-c", "echo \"$GREETING $HOME\"; pwd; echo to-stderr >&2"}, options);
  ASSERT_TRUE(child.ok()) << child.status();
  close(pipe_fds[1]);
  EXPECT_TRUE((*child)->Wait().success());
  char buffer[64] = {};
  const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer) - 1);
  close(pipe_fds[0]);
  EXPECT_EQ(std::string(buffer, n > 0 ? n : 0), "to-stderr\n");
  // Only the given environment: HOME is not inherited.
  EXPECT_EQ(ReadFile(log), "hi there \n" + fs::canonical(dir).string() + "\n");
}

TEST(ChildProcessTest, MissingWorkdirIsNotFound) {
  ChildOptions options;
  options.workdir = TmpPath("no-such-dir");
  auto child = ChildProcess::Start({"/bin/true"}, options);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(child.status().message(), HasSubstr("no-such-dir"));
}

TEST(ChildProcessTest, LogIsAppendedSoAReaderMayTruncateIt) {
  const std::string log = TmpPath("append.log");
  const std::string fifo = TmpPath("append.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto child = ChildProcess::Start(
      {"/bin/sh", "-c",
       "echo first-line-that-is-long; echo ready > " + fifo + "; read x < " + fifo + "; echo b"},
      log);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(AwaitReady(fifo), "ready");
  fs::resize_file(log, 0);             // what a log rotation does
  std::ofstream(fifo) << "go" << "\n";  // let the child write again
  EXPECT_TRUE((*child)->Wait().success());
  EXPECT_EQ(ReadFile(log), "b\n");  // at the new end, no hole of zeros
}

TEST(ChildProcessTest, ReportsTheKillingSignal) {
  auto child = ChildProcess::Start({"/bin/sh", "-c", "kill -ABRT $$"}, TmpPath("abrt.log"));
  ASSERT_TRUE(child.ok()) << child.status();
  const ExitInfo exit = (*child)->Wait();
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.signal, SIGABRT);
}

TEST(ChildProcessTest, MissingBinaryIsNotFound) {
  auto child = ChildProcess::Start({"/nonexistent/ringleader-rank"}, TmpPath("missing.log"));
  EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(child.status().message()), HasSubstr("/nonexistent/ringleader-rank"));
}

TEST(ChildProcessTest, TerminateSendsSigterm) {
  const std::string fifo = TmpPath("term.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto child = ChildProcess::Start({"/bin/sh", "-c", "echo ready > " + fifo + "; exec sleep 1000"},
                                   TmpPath("term.log"));
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(AwaitReady(fifo), "ready");
  EXPECT_FALSE((*child)->HasExited());
  (*child)->Terminate(absl::Seconds(30));
  EXPECT_TRUE((*child)->terminate_requested());
  const ExitInfo exit = (*child)->Wait();
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.signal, SIGTERM);
}

TEST(ChildProcessTest, TerminateEscalatesToSigkillWhenSigtermIsIgnored) {
  const std::string fifo = TmpPath("kill.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto child = ChildProcess::Start(
      {"/bin/sh", "-c", "trap '' TERM; echo ready > " + fifo + "; exec sleep 1000"},
      TmpPath("kill.log"));
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(AwaitReady(fifo), "ready");
  (*child)->Terminate(absl::Milliseconds(20));
  const ExitInfo exit = (*child)->Wait();
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.signal, SIGKILL);
}

TEST(ChildProcessTest, DestructorKillsARunningChild) {
  const std::string fifo = TmpPath("dtor.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto child = ChildProcess::Start({"/bin/sh", "-c", "echo ready > " + fifo + "; exec sleep 1000"},
                                   TmpPath("dtor.log"));
  ASSERT_TRUE(child.ok()) << child.status();
  const pid_t pid = (*child)->pid();
  EXPECT_EQ(AwaitReady(fifo), "ready");
  child->reset();  // must return (kill + reap), not hang
  EXPECT_NE(kill(pid, 0), 0) << "child " << pid << " still exists";
}

}  // namespace
}  // namespace ringleader
