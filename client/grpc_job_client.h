// JobClient over gRPC (ringleader.v1.JobService).
//
//   GrpcJobClientOptions options;
//   options.call_timeout = absl::Seconds(5);
//   std::unique_ptr<JobClient> client = NewGrpcJobClient("127.0.0.1:7070", options);
//
// Creating the client does not connect: an unreachable coordinator shows up as UNAVAILABLE
// on the first call. Thread-safe.
#ifndef RINGLEADER_CLIENT_GRPC_JOB_CLIENT_H_
#define RINGLEADER_CLIENT_GRPC_JOB_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/job_client.h"
#include "grpcpp/grpcpp.h"

namespace ringleader {

struct GrpcJobClientOptions {
  // Deadline of every call; WatchJob gets its wait on top.
  absl::Duration call_timeout = absl::Seconds(10);
  // Transport security (common/tls/tls_credentials.h). Null = insecure (plain TCP).
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Sent as "authorization: Bearer TOKEN" with every call ("" = none): the coordinator's
  // --tokens_file decides who may submit, cancel and read.
  std::string token;
};

// A client of the coordinator at `address` ("host:port").
std::unique_ptr<JobClient> NewGrpcJobClient(const std::string& address,
                                            const GrpcJobClientOptions& options = {});

// A client over an existing channel (in-process tests, shared channels).
std::unique_ptr<JobClient> NewGrpcJobClient(std::shared_ptr<grpc::Channel> channel,
                                            const GrpcJobClientOptions& options = {});

// grpc::Status -> absl::Status (the code numbers agree).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_GRPC_JOB_CLIENT_H_
