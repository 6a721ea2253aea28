// LogShipper against a FakeCoordinator and a real file in the test's temporary directory,
// written with O_APPEND as the rank process writes it: offsets and chunks, retries while the
// coordinator is unreachable, the bounded backlog, the end of the attempt, rotation, and the
// final drain.
#include "worker/daemon/log_shipper.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/coordinator_client/fake_coordinator.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class LogShipperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmpdir = std::getenv("TEST_TMPDIR");
    ASSERT_NE(tmpdir, nullptr);
    const fs::path dir =
        fs::path(tmpdir) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir);
    path_ = (dir / "rank.log").string();
    options_.interval = absl::Hours(1);  // ticks come from ShipOnce() unless a test says so
  }

  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
  }

  // Writes as the rank process does (O_APPEND), creating the file on the first write.
  void Write(const std::string& text) {
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(::write(fd_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }

  LogShipper MakeShipper() { return LogShipper(&coordinator_, "job-1", 3, 1, path_, options_); }

  // The accepted appends of rank 1 as "offset:data".
  std::vector<std::string> Appends() {
    std::vector<std::string> shown;
    for (const v1::AppendLogsRequest& request : coordinator_.appends(1)) {
      EXPECT_EQ(request.job_id(), "job-1");
      EXPECT_EQ(request.generation(), 3u);
      shown.push_back(absl::StrCat(request.offset(), ":", request.data()));
    }
    return shown;
  }

  FakeCoordinator coordinator_{"fingerprint"};
  LogShipperOptions options_;
  std::string path_;
  int fd_ = -1;
};

TEST_F(LogShipperTest, NewBytesAreSentAtTheirOffsetsInBoundedChunks) {
  options_.max_chunk_bytes = 4;
  LogShipper shipper = MakeShipper();
  shipper.ShipOnce();  // the child has not created the file yet
  EXPECT_EQ(coordinator_.append_calls(), 0);
  Write("hello\n");
  shipper.ShipOnce();
  Write("ok\n");
  shipper.ShipOnce();
  shipper.ShipOnce();  // nothing new: no call
  EXPECT_THAT(Appends(), ElementsAre("0:hell", "4:o\n", "6:ok\n"));
  EXPECT_EQ(coordinator_.append_calls(), 3);
  EXPECT_EQ(shipper.shipped(), 9u);
  EXPECT_TRUE(shipper.status().ok());
}

TEST_F(LogShipperTest, WhileTheCoordinatorIsUnreachableTheSameOffsetIsSentAgain) {
  LogShipper shipper = MakeShipper();
  coordinator_.set_unreachable(true);
  Write("abc");
  shipper.ShipOnce();
  Write("def");
  shipper.ShipOnce();
  EXPECT_EQ(coordinator_.append_calls(), 2);
  EXPECT_TRUE(shipper.status().ok()) << "an outage must not stop shipping";
  coordinator_.set_unreachable(false);
  shipper.ShipOnce();
  EXPECT_THAT(Appends(), ElementsAre("0:abcdef"));
  EXPECT_EQ(shipper.skipped(), 0u);
}

TEST_F(LogShipperTest, ABacklogOverTheBoundSkipsAheadToTheNewestBytes) {
  options_.max_pending_bytes = 8;
  LogShipper shipper = MakeShipper();
  coordinator_.set_unreachable(true);
  Write("0123456789");
  shipper.ShipOnce();  // keeps "23456789"
  Write("abcd");
  shipper.ShipOnce();  // keeps "6789abcd"
  coordinator_.set_unreachable(false);
  shipper.ShipOnce();
  // The coordinator sees a gap of 6 bytes before offset 6 and tells readers so.
  EXPECT_THAT(Appends(), ElementsAre("6:6789abcd"));
  EXPECT_EQ(shipper.skipped(), 6u);
  EXPECT_EQ(shipper.shipped(), 14u);
}

TEST_F(LogShipperTest, TheEndOfTheAttemptStopsShipping) {
  LogShipper shipper = MakeShipper();
  coordinator_.set_logs_over(true);
  Write("x");
  shipper.ShipOnce();
  EXPECT_EQ(shipper.status().code(), absl::StatusCode::kFailedPrecondition);
  coordinator_.set_logs_over(false);
  Write("y");
  shipper.ShipOnce();
  shipper.Finish();
  EXPECT_EQ(coordinator_.append_calls(), 1) << "shipped on after the attempt ended";
  EXPECT_TRUE(Appends().empty());
}

TEST_F(LogShipperTest, RotationBoundsTheFileAndOffsetsGoOnCounting) {
  options_.max_log_bytes = 10;
  LogShipper shipper = MakeShipper();
  Write("0123456789AB");
  shipper.ShipOnce();
  EXPECT_EQ(ReadFile(path_ + ".1"), "0123456789AB");
  EXPECT_EQ(fs::file_size(path_), 0u);
  Write("next\n");  // O_APPEND: lands at the start of the truncated file
  shipper.ShipOnce();
  EXPECT_EQ(ReadFile(path_), "next\n");
  // A second rotation replaces the first copy; bytes not sent yet are not lost by it.
  coordinator_.set_unreachable(true);
  Write("second file");
  shipper.ShipOnce();
  EXPECT_EQ(ReadFile(path_ + ".1"), "next\nsecond file");
  EXPECT_EQ(fs::file_size(path_), 0u);
  coordinator_.set_unreachable(false);
  shipper.ShipOnce();
  EXPECT_THAT(Appends(), ElementsAre("0:0123456789AB", "12:next\n", "17:second file"));
  EXPECT_FALSE(fs::exists(path_ + ".1.tmp"));
}

TEST_F(LogShipperTest, FinishSendsWhatTheChildWroteLast) {
  LogShipper shipper = MakeShipper();
  shipper.Start();  // its first tick is an hour away
  Write("last words\n");
  shipper.Finish();
  EXPECT_THAT(Appends(), ElementsAre("0:last words\n"));
}

TEST_F(LogShipperTest, FinishDoesNotWaitForAnUnreachableCoordinator) {
  LogShipper shipper = MakeShipper();
  coordinator_.set_unreachable(true);
  Write("lost\n");
  shipper.Start();
  shipper.Finish();
  EXPECT_EQ(coordinator_.append_calls(), 1);
  shipper.Finish();  // idempotent
  EXPECT_EQ(coordinator_.append_calls(), 1);
}

TEST_F(LogShipperTest, TheThreadShipsEveryInterval) {
  options_.interval = absl::Milliseconds(1);
  LogShipper shipper = MakeShipper();
  shipper.Start();
  Write("tick\n");
  EXPECT_TRUE(coordinator_.WaitForLogs(1, 5, absl::Seconds(20)));
  Write("tock\n");
  EXPECT_TRUE(coordinator_.WaitForLogs(1, 10, absl::Seconds(20)));
  shipper.Finish();
  std::string shipped;
  for (const v1::AppendLogsRequest& request : coordinator_.appends(1)) {
    EXPECT_EQ(request.offset(), shipped.size());
    shipped += request.data();
  }
  EXPECT_EQ(shipped, "tick\ntock\n");
}

}  // namespace
}  // namespace ringleader
