// A stand-in for ringleader-rank in the daemon's tests: it takes the same flags, reads the
// assignment file and behaves as the assignment's spec.name says:
//   "exit:N"            exit with code N without reporting
//   "abort"             print a line, then abort()
//   "sigkill"           print a line, then SIGKILL itself (an OOM killer, `kill -9`)
//   "report"            write the report marker (as a rank that called FinishRank), exit 1
//   "succeed"           exit 0 without reporting
//   "hang"              write the ready file, then wait for signals forever
//   "hang_ignore_term"  ignore SIGTERM, write the ready file, then wait forever
// The ready file is spec.data.path (if set); the command line is written, one argument per
// line, to args.txt next to the assignment file.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "proto/ringleader.pb.h"

namespace {

std::string FlagValue(int argc, char** argv, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (absl::StartsWith(argv[i], prefix)) return std::string(argv[i] + prefix.size());
  }
  return "";
}

void Touch(const std::string& path) {
  if (!path.empty()) std::ofstream(path) << "x";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string assignment_path = FlagValue(argc, argv, "assignment");
  ringleader::v1::Assignment assignment;
  std::ifstream in(assignment_path, std::ios::binary);
  if (!in || !assignment.ParseFromIstream(&in)) {
    std::cerr << "fake rank: cannot read " << assignment_path << std::endl;
    return 99;
  }
  {
    const std::string dir = assignment_path.substr(0, assignment_path.rfind('/'));
    std::ofstream args(dir + "/args.txt");
    for (int i = 0; i < argc; ++i) args << argv[i] << "\n";
  }
  const std::string mode = assignment.spec().name();
  const std::string ready = assignment.spec().data().path();
  absl::string_view code_text = mode;
  if (absl::ConsumePrefix(&code_text, "exit:")) {
    int code = 0;
    if (!absl::SimpleAtoi(code_text, &code)) return 98;
    return code;
  }
  if (mode == "abort") {
    std::cerr << "fake rank: aborting on purpose" << std::endl;
    abort();
  }
  if (mode == "sigkill") {
    std::cerr << "fake rank: killing itself" << std::endl;
    raise(SIGKILL);
  }
  if (mode == "report") {
    Touch(FlagValue(argc, argv, "report_marker"));
    return 1;
  }
  if (mode == "succeed") return 0;
  if (mode == "hang" || mode == "hang_ignore_term") {
    if (mode == "hang_ignore_term") signal(SIGTERM, SIG_IGN);
    Touch(ready);
    while (true) pause();
  }
  std::cerr << "fake rank: unknown mode '" << mode << "'" << std::endl;
  return 97;
}
