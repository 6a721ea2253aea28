#include "worker/daemon/collective_address.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

TEST(LocalAddressTowardsTest, LoopbackCoordinatorGivesLoopback) {
  EXPECT_EQ(*LocalAddressTowards("127.0.0.1:7070"), "127.0.0.1");
  absl::StatusOr<std::string> named = LocalAddressTowards("localhost:7070");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_TRUE(named->rfind("127.", 0) == 0 || *named == "::1") << *named;
}

TEST(LocalAddressTowardsTest, BadAddressesAreNamed) {
  EXPECT_THAT(std::string(LocalAddressTowards("no-port").status().message()),
              HasSubstr("coordinator address 'no-port': expected HOST:PORT"));
  const absl::Status unresolved = LocalAddressTowards("no-such-host.invalid:7070").status();
  EXPECT_EQ(unresolved.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unresolved.message()), HasSubstr("cannot resolve 'no-such-host.invalid'"));
}

TEST(SetsCollectiveHostTest, FindsTheFlag) {
  EXPECT_TRUE(SetsCollectiveHost({"--blas_threads=2", "--collective_host=10.0.0.5"}));
  EXPECT_FALSE(SetsCollectiveHost({"--blas_threads=2"}));
}

}  // namespace
}  // namespace ringleader
