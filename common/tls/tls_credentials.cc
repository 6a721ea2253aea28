#include "common/tls/tls_credentials.h"

#include <unistd.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace ringleader {
namespace {

std::string PathOf(const TlsConfig& config, const std::string& file) {
  return absl::StrCat(config.dir, "/", file);
}

unsigned int RefreshSeconds(const TlsConfig& config) {
  return static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(config.refresh)));
}

std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider> Provider(
    const TlsConfig& config) {
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      PathOf(config, config.role + ".key"), PathOf(config, config.role + ".pem"),
      PathOf(config, "ca.pem"), RefreshSeconds(config));
}

}  // namespace

absl::Status CheckTlsConfig(const TlsConfig& config) {
  if (config.insecure) {
    if (!config.dir.empty()) {
      return absl::InvalidArgumentError(
          "--tls_dir and --insecure both given: choose TLS (--tls_dir) or plaintext (--insecure)");
    }
    return absl::OkStatus();
  }
  if (config.dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_dir: connections are TLS by default: give --tls_dir=DIR with ca.pem, ",
        config.role, ".pem and ", config.role,
        ".key (deploy/certs.sh DIR makes them), or --insecure for plaintext"));
  }
  for (const std::string& file : {std::string("ca.pem"), config.role + ".pem",
                                  config.role + ".key"}) {
    const std::string path = PathOf(config, file);
    if (access(path.c_str(), R_OK) != 0) {
      return absl::NotFoundError(absl::StrCat("--tls_dir: cannot read ", path,
                                              " (deploy/certs.sh ", config.dir,
                                              " makes the cluster's files)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const TlsConfig& config) {
  if (absl::Status valid = CheckTlsConfig(config); !valid.ok()) return valid;
  if (config.insecure) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(Provider(config));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const TlsConfig& config) {
  if (absl::Status valid = CheckTlsConfig(config); !valid.ok()) return valid;
  if (config.insecure) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(config));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  return grpc::experimental::TlsCredentials(options);
}

std::string TlsFlagFor(const TlsConfig& config) {
  return config.insecure ? "--insecure" : absl::StrCat("--tls_dir=", config.dir);
}

}  // namespace ringleader
