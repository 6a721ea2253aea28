// `ringleader`: the command-line client of the coordinator. See client/cli.h.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "client/cli.h"
#include "client/grpc_job_client.h"
#include "common/clock.h"
#include "common/tls/tls_credentials.h"

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError("no such file or not readable");
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return absl::DataLossError("read failed");
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  ringleader::CommandEnvironment env;
  env.out = &std::cout;
  env.err = &std::cerr;
  env.out_is_tty = isatty(STDOUT_FILENO) == 1;
  env.clock = ringleader::Clock::Real();
  env.sleep = [](absl::Duration duration) { absl::SleepFor(duration); };
  env.read_file = ReadFile;
  if (const char* coordinator = std::getenv("RINGLEADER_COORDINATOR"); coordinator != nullptr) {
    env.default_coordinator = coordinator;
  }
  if (const char* tls_dir = std::getenv("RINGLEADER_TLS_DIR"); tls_dir != nullptr) {
    env.default_tls_dir = tls_dir;
  }
  if (const char* token = std::getenv("RINGLEADER_TOKEN"); token != nullptr) {
    env.default_token = token;
  }
  ringleader::JobClientFactory connect =
      [](const ringleader::ConnectOptions& connect) -> std::unique_ptr<ringleader::JobClient> {
    ringleader::GrpcJobClientOptions options;
    options.call_timeout = connect.call_timeout;
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        ringleader::ChannelCredentialsFor({connect.tls_dir, "client", connect.insecure});
    if (!credentials.ok()) {
      std::cerr << "error: " << credentials.status().message() << "\n";
      return nullptr;
    }
    options.credentials = *credentials;
    options.token = connect.token;
    return ringleader::NewGrpcJobClient(connect.address, options);
  };
  return ringleader::RunCli(std::vector<std::string>(argv + 1, argv + argc), env, connect);
}
