#include "coordinator/core/attempt_tokens.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace ringleader {
namespace {

std::string TmpPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

TEST(AttemptTokensTest, EachAttemptHasItsOwnTokenAndOnlyItPasses) {
  const AttemptTokens tokens("0123456789abcdef0123456789abcdef");
  const std::string a1 = tokens.For("job-000001", 1);
  EXPECT_EQ(a1.size(), 64u);  // hex of 32 bytes
  EXPECT_EQ(tokens.For("job-000001", 1), a1);  // derived: the same every time
  EXPECT_NE(tokens.For("job-000001", 2), a1);
  EXPECT_NE(tokens.For("job-000002", 1), a1);
  EXPECT_NE(AttemptTokens("another secret, 32 bytes long...").For("job-000001", 1), a1);

  EXPECT_TRUE(tokens.Check("job-000001", 1, a1, "KvSet").ok());
  const absl::Status none = tokens.Check("job-000001", 1, "", "KvSet");
  EXPECT_EQ(none.code(), absl::StatusCode::kUnauthenticated);
  const absl::Status other = tokens.Check("job-000002", 1, a1, "KvGet");
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(std::string(other.message()).find("KvGet"), std::string::npos) << other;
  EXPECT_NE(std::string(other.message()).find("job-000002"), std::string::npos) << other;
  EXPECT_EQ(tokens.Check("job-000001", 1, a1.substr(0, 63), "KvSet").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(tokens.Check("job-000001", 1, a1 + "0", "KvSet").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(AttemptTokensTest, TheSecretIsCreatedOnceWithModeSixHundredAndReadBackAfterARestart) {
  const std::string path = TmpPath("attempt_secret");
  std::remove(path.c_str());
  absl::StatusOr<std::string> first = AttemptTokens::LoadOrCreateSecret(path);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size(), 32u);
  struct stat info;
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  absl::StatusOr<std::string> again = AttemptTokens::LoadOrCreateSecret(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  // Without a state dir: fresh random bytes each time.
  EXPECT_NE(*AttemptTokens::LoadOrCreateSecret(""), *AttemptTokens::LoadOrCreateSecret(""));
  std::ofstream(path, std::ios::trunc) << "short";
  EXPECT_EQ(AttemptTokens::LoadOrCreateSecret(path).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace ringleader
