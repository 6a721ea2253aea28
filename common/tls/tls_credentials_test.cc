// Mutual TLS with the files deploy/certs.sh makes: a client with the cluster's certificate
// connects; one without a certificate, with another CA's or with an expired one does not.
#include "common/tls/tls_credentials.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace ringleader {
namespace {

std::string TmpDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

// Runs deploy/certs.sh with `args`; fails the test when it fails.
void Certs(const std::string& args) {
  const std::string command = absl::StrCat("deploy/certs.sh ", args, " >/dev/null");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

class TlsCredentialsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    good_ = TmpDir() + "/good";
    other_ = TmpDir() + "/other";
    expired_ = TmpDir() + "/expired";
    Certs(good_);
    Certs(other_);  // another CA
    Certs(absl::StrCat(expired_, " --ca-from ", good_, " --only client --days -1"));
  }

  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    TlsConfig server{good_, "coordinator"};
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
        ServerCredentialsFor(server);
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *credentials, &port_);
    builder.RegisterCallbackGenericService(&service_);  // a server needs a service
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  // Whether a client with `config` completes the TLS handshake within a few seconds.
  bool Connects(const TlsConfig& config) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        ChannelCredentialsFor(config);
    EXPECT_TRUE(credentials.ok()) << credentials.status();
    if (!credentials.ok()) return false;
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateChannel(absl::StrCat("localhost:", port_), *credentials);
    return channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(3));
  }

  static std::string good_, other_, expired_;
  int port_ = 0;
  grpc::CallbackGenericService service_;
  std::unique_ptr<grpc::Server> server_;
};

std::string TlsCredentialsTest::good_;
std::string TlsCredentialsTest::other_;
std::string TlsCredentialsTest::expired_;

TEST_F(TlsCredentialsTest, TheClustersClientConnects) {
  EXPECT_TRUE(Connects({good_, "client"}));
  EXPECT_TRUE(Connects({good_, "worker"}));
}

TEST_F(TlsCredentialsTest, AClientWithoutACertificateIsRefused) {
  EXPECT_FALSE(Connects({"", "client", /*insecure=*/true}));
}

TEST_F(TlsCredentialsTest, ACertificateFromAnotherCaIsRefused) {
  EXPECT_FALSE(Connects({other_, "client"}));
}

TEST_F(TlsCredentialsTest, AnExpiredCertificateIsRefused) {
  TlsConfig expired{expired_, "client"};
  EXPECT_FALSE(Connects(expired));
}

TEST(TlsConfigTest, MissingOrConflictingSettingsNameTheFlagAndTheFix) {
  absl::Status none = CheckTlsConfig({"", "worker"});
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(none.message()).find("deploy/certs.sh"), std::string::npos) << none;
  EXPECT_NE(std::string(none.message()).find("--insecure"), std::string::npos) << none;
  absl::Status both = CheckTlsConfig({"/some/dir", "worker", /*insecure=*/true});
  EXPECT_EQ(both.code(), absl::StatusCode::kInvalidArgument);
  absl::Status missing = CheckTlsConfig({TmpDir() + "/no-such-dir", "worker"});
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(missing.message()).find("ca.pem"), std::string::npos) << missing;
  EXPECT_TRUE(CheckTlsConfig({"", "worker", /*insecure=*/true}).ok());
}

}  // namespace
}  // namespace ringleader
