// TLS for every gRPC connection of ringleader: mutual TLS between the coordinator and its
// workers, ranks and CLI, from the files `deploy/certs.sh DIR` makes.
//
//   --tls_dir=DIR     DIR/ca.pem (the cluster's CA), DIR/<role>.pem and DIR/<role>.key, role
//                     = coordinator (server), worker (daemons and their ranks) or client (CLI)
//   --insecure        plaintext instead (then the coordinator listens on 127.0.0.1 unless told
//                     otherwise)
//
// The coordinator requires and verifies a client certificate signed by the CA on every
// connection; clients verify the coordinator's certificate (its SANs must name the address
// they dial: certs.sh --host). Certificates are read by gRPC's file-watcher provider and
// re-read every `refresh` while the process runs: replace the files to rotate them, no
// restart.
#ifndef RINGLEADER_COMMON_TLS_TLS_CREDENTIALS_H_
#define RINGLEADER_COMMON_TLS_TLS_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace ringleader {

struct TlsConfig {
  // Empty = plaintext (only with `insecure`).
  std::string dir;
  // "coordinator", "worker" or "client": which pair in `dir` this process presents.
  std::string role;
  bool insecure = false;
  // How often the files are re-read.
  absl::Duration refresh = absl::Seconds(10);
};

// Checks the config: exactly one of --tls_dir / --insecure, and the three files readable.
// Errors: INVALID_ARGUMENT naming the flag and the fix (deploy/certs.sh), NOT_FOUND naming the
// missing file.
absl::Status CheckTlsConfig(const TlsConfig& config);

// The coordinator's server credentials (mutual TLS, client certificate required and verified
// against ca.pem), or insecure ones. Errors: CheckTlsConfig's.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const TlsConfig& config);

// A client's channel credentials (verifies the server against ca.pem, presents its own pair),
// or insecure ones. Errors: CheckTlsConfig's.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const TlsConfig& config);

// The flags a worker daemon passes on to its rank processes for the same config
// ("--tls_dir=DIR" or "--insecure").
std::string TlsFlagFor(const TlsConfig& config);

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_TLS_TLS_CREDENTIALS_H_
