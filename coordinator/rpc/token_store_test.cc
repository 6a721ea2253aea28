#include "coordinator/rpc/token_store.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

constexpr char kAlice[] = "0123456789abcdef0123";
constexpr char kCi[] = "fedcba9876543210fedc";

TEST(TokenStoreTest, AKnownBearerTokenNamesItsHolderAndAnythingElseIsUnauthenticated) {
  const std::string path = WriteFile(
      "tokens", std::string("# people\nalice ") + kAlice + "\n\n  ci\t" + kCi + "  \n");
  absl::StatusOr<std::unique_ptr<TokenStore>> store = TokenStore::Load(path, false);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->size(), 2u);
  EXPECT_EQ(*(*store)->Check(std::string("Bearer ") + kCi, TokenStore::Access::kWrite, "SubmitJob"),
            "ci");
  const absl::StatusOr<std::string> none =
      (*store)->Check("", TokenStore::Access::kWrite, "SubmitJob");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("SubmitJob needs a bearer token"));
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("RINGLEADER_TOKEN"));
  // A prefix of a token, a token with one byte changed, another scheme: all refused.
  for (const std::string& wrong :
       {std::string("Bearer 0123456789abcdef012"), std::string("Bearer 0123456789abcdef0124"),
        std::string("Basic ") + kAlice, std::string(kAlice)}) {
    EXPECT_EQ((*store)->Check(wrong, TokenStore::Access::kRead, "GetJob").status().code(),
              absl::StatusCode::kUnauthenticated)
        << wrong;
  }
  // Reads need a token too unless anonymous reads are allowed.
  EXPECT_FALSE((*store)->Check("", TokenStore::Access::kRead, "GetJob").ok());
  absl::StatusOr<std::unique_ptr<TokenStore>> open = TokenStore::Load(path, true);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(*(*open)->Check("", TokenStore::Access::kRead, "GetJob"), "anonymous");
  EXPECT_FALSE((*open)->Check("", TokenStore::Access::kWrite, "CancelJob").ok());
}

TEST(TokenStoreTest, ReloadTakesTheNewFileAndKeepsTheOldTokensWhenTheNewOneIsBad) {
  const std::string path = WriteFile("reloaded", std::string("alice ") + kAlice + "\n");
  absl::StatusOr<std::unique_ptr<TokenStore>> store = TokenStore::Load(path, false);
  ASSERT_TRUE(store.ok());
  WriteFile("reloaded", std::string("ci ") + kCi + "\n");
  ASSERT_TRUE((*store)->Reload().ok());
  EXPECT_FALSE((*store)->Check(std::string("Bearer ") + kAlice, TokenStore::Access::kRead, "m").ok());
  EXPECT_TRUE((*store)->Check(std::string("Bearer ") + kCi, TokenStore::Access::kRead, "m").ok());
  WriteFile("reloaded", "ci short\n");
  EXPECT_FALSE((*store)->Reload().ok());
  EXPECT_TRUE((*store)->Check(std::string("Bearer ") + kCi, TokenStore::Access::kRead, "m").ok());
}

TEST(TokenStoreTest, BadFilesNameTheLine) {
  const auto error = [](const std::string& text) {
    return std::string(TokenStore::Load(WriteFile("bad", text), false).status().message());
  };
  EXPECT_THAT(error("alice\n"), HasSubstr("line 1: expected NAME TOKEN"));
  EXPECT_THAT(error("alice short\n"), HasSubstr("use at least 16"));
  EXPECT_THAT(error(std::string("a ") + kAlice + "\na " + kCi + "\n"),
              HasSubstr("line 2: 'a' appears twice"));
  EXPECT_THAT(error(std::string("a ") + kAlice + "\nb " + kAlice + "\n"),
              HasSubstr("is also another name's"));
  EXPECT_THAT(error("# nothing\n"), HasSubstr("holds no token"));
  EXPECT_EQ(TokenStore::Load("/nonexistent/tokens", false).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ringleader
