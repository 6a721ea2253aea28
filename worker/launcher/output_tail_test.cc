#include "worker/launcher/output_tail.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;

void WriteAll(int fd, const std::string& text) {
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
}

TEST(OutputTailTest, KeepsTheLastLinesAndCopiesEverything) {
  int copy[2];
  ASSERT_EQ(pipe(copy), 0);
  absl::StatusOr<std::unique_ptr<OutputTail>> tail = OutputTail::Create(copy[1], 2);
  ASSERT_TRUE(tail.ok()) << tail.status();
  WriteAll((*tail)->write_fd(), "one\ntwo\nthree\nfour-without-newline");
  const std::vector<std::string> lines = (*tail)->Finish(absl::Seconds(10));
  EXPECT_THAT(lines, ElementsAre("three", "four-without-newline"));
  close(copy[1]);
  std::string copied(64, '\0');
  copied.resize(read(copy[0], copied.data(), copied.size()));
  close(copy[0]);
  EXPECT_EQ(copied, "one\ntwo\nthree\nfour-without-newline");
}

TEST(OutputTailTest, CutsLongLines) {
  absl::StatusOr<std::unique_ptr<OutputTail>> tail = OutputTail::Create(-1, 3);
  ASSERT_TRUE(tail.ok());
  WriteAll((*tail)->write_fd(), std::string(3 * kMaxTailLineBytes, 'x') + "\nend\n");
  const std::vector<std::string> lines = (*tail)->Finish(absl::Seconds(10));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].size(), kMaxTailLineBytes);
  EXPECT_EQ(lines[1], "end");
}

TEST(OutputTailTest, AWriterThatNeverClosesDoesNotHoldFinishBack) {
  absl::StatusOr<std::unique_ptr<OutputTail>> tail = OutputTail::Create(-1, 3);
  ASSERT_TRUE(tail.ok());
  const int grandchild_copy = dup((*tail)->write_fd());  // e.g. a data-loader process
  WriteAll(grandchild_copy, "still here\n");
  // The line is read before the wait ends: Finish waits for end-of-file, which never comes,
  // and then returns what it has.
  const std::vector<std::string> lines = (*tail)->Finish(absl::Seconds(2));
  close(grandchild_copy);
  EXPECT_THAT(lines, ElementsAre("still here"));
}

}  // namespace
}  // namespace ringleader
