// JobClient over gRPC (ringleader.v1.JobService).
//
//   GrpcJobClientOptions options;
//   options.call_timeout = absl::Seconds(5);
//   std::unique_ptr<JobClient> client = NewGrpcJobClient("127.0.0.1:7070", options);
//
// Creating the client does not connect: an unreachable coordinator shows up as UNAVAILABLE
// on the first call. Thread-safe.
//
// Several coordinators (a leader and standbys, common/coordinator_addresses.h): the address may
// be a list, "host:port[,host:port...]", one channel per address, created when first used. A
// standby answers UNAVAILABLE naming the leader ("ringleader-leader" trailing metadata) without
// executing the call: the client sends it again to that leader at once, whatever it is (a few
// such hops per call at most). An UNAVAILABLE without a hint (connection refused) moves on to
// the next address; the calls that only read (status, list, watch, logs, metrics, debug) are
// then tried on each remaining address once, the others (submit, cancel, uncordon, doctor) are
// not sent again: the coordinator may have executed them before the connection broke. So that a
// dead first address does not fail every write, with a list a write is sent only over a
// connection that is up (waiting at most 3 s for it); an address that cannot be reached is
// skipped before anything is sent. With a single address every call is made once, as before. AnsweringLeader names the coordinator that
// answered the last call when there was a choice (a list, or a standby's hint).
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

// A client of the coordinator at `address` ("host:port", or a comma-separated list of them; a
// string ParseCoordinatorAddresses refuses is used whole, as one gRPC target).
std::unique_ptr<JobClient> NewGrpcJobClient(const std::string& address,
                                            const GrpcJobClientOptions& options = {});

// A client over an existing channel (in-process tests, shared channels).
std::unique_ptr<JobClient> NewGrpcJobClient(std::shared_ptr<grpc::Channel> channel,
                                            const GrpcJobClientOptions& options = {});

// grpc::Status -> absl::Status (the code numbers agree).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_GRPC_JOB_CLIENT_H_
