// Test fixture for the gRPC edge: a CoordinatorServer started in process as
// ringleader-coordinator starts it (plaintext on 127.0.0.1, port 0, in-memory store, the
// staleness ticker), a channel to it, and a bounded shutdown after each test.
#ifndef RINGLEADER_COORDINATOR_SERVER_COORDINATOR_SERVER_TEST_UTIL_H_
#define RINGLEADER_COORDINATOR_SERVER_COORDINATOR_SERVER_TEST_UTIL_H_

#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/server/coordinator_server.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ringleader {

class CoordinatorServerTest : public ::testing::Test {
 protected:
  // Starts server_ with `options` and opens channel_ to it; a failure fails the test (call it
  // under ASSERT_NO_FATAL_FAILURE).
  void StartServer(CoordinatorServerOptions options = CoordinatorServerOptions()) {
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
        CoordinatorServer::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  }

  void TearDown() override {
    if (server_) server_->Shutdown(absl::Now() + absl::Seconds(2));
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_SERVER_COORDINATOR_SERVER_TEST_UTIL_H_
