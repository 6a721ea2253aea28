// The `ringleader` command line: parses arguments, connects, and runs one command
// (commands.h). main() is a thin shell around RunCli.
//
//   ringleader [--coordinator ADDR[,ADDR...]] [--timeout DURATION] <command> [flags] [args]
//
// Exit codes: 0 success; 1 the call failed or the watched job did not pass; 2 bad usage or a
// bad job spec.
#ifndef RINGLEADER_CLIENT_CLI_H_
#define RINGLEADER_CLIENT_CLI_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/commands.h"
#include "client/job_client.h"

namespace ringleader {

inline constexpr char kDefaultCoordinator[] = "127.0.0.1:7070";

// How the CLI reaches the coordinator (from its global flags).
struct ConnectOptions {
  std::string address;          // --coordinator: host:port[,host:port...]
  absl::Duration call_timeout;  // --timeout
  // --tls_dir (ca.pem, client.pem, client.key; default $RINGLEADER_TLS_DIR) or --insecure.
  std::string tls_dir;
  bool insecure = false;
  // --token_file's contents (default $RINGLEADER_TOKEN), trimmed; "" = none.
  std::string token;
};

// Makes the client for the coordinator.
using JobClientFactory = std::function<std::unique_ptr<JobClient>(const ConnectOptions& options)>;

// Runs the command in `args` (argv without the program name). `env.coordinator_address` is
// filled from --coordinator. Returns the exit code.
int RunCli(const std::vector<std::string>& args, const CommandEnvironment& env,
           const JobClientFactory& connect);

// The help texts ("ringleader --help", "ringleader <command> --help"). An unknown command gives
// the program's usage.
std::string CliUsage(const std::string& command = "");

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_CLI_H_
