#include "client/arg_parser.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<FlagSpec> kGlobal = {{"coordinator", "ADDR", "address"}};
const std::vector<CommandSpec> kCommands = {
    {"submit",
     "[SPEC.yaml]",
     0,
     1,
     "submit a job",
     "",
     {{"epochs", "N", "epochs"},
      {"set", "K=V", "set", true},
      {"watch", "", "follow"},
      {"output", "FILE", "write here", false, 'o'}}},
    {"status", "JOB", 1, 1, "show a job", "", {}},
};

absl::StatusOr<CommandLine> Parse(std::vector<std::string> args) {
  return ParseCommandLine(args, kGlobal, kCommands);
}

TEST(ArgParserTest, CommandFlagsAndArguments) {
  absl::StatusOr<CommandLine> line = Parse({"--coordinator", "h:1", "submit", "spec.yaml",
                                            "--epochs=4", "--set", "a=1", "--set=b=2", "--watch"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->command, "submit");
  EXPECT_THAT(line->arguments, ElementsAre("spec.yaml"));
  EXPECT_EQ(line->Value("coordinator"), "h:1");
  EXPECT_EQ(line->Value("epochs"), "4");
  EXPECT_THAT(line->flags.at("set"), ElementsAre("a=1", "b=2"));
  EXPECT_TRUE(line->Has("watch"));
  EXPECT_FALSE(line->Has("missing"));
  EXPECT_EQ(line->Value("missing", "fallback"), "fallback");
  EXPECT_FALSE(line->help);
}

TEST(ArgParserTest, GlobalFlagAfterCommandAndDoubleDash) {
  absl::StatusOr<CommandLine> line = Parse({"status", "--coordinator=x:2", "--", "--odd-id"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->Value("coordinator"), "x:2");
  EXPECT_THAT(line->arguments, ElementsAre("--odd-id"));
}

TEST(ArgParserTest, ShortFlagNamesTheLongOne) {
  absl::StatusOr<CommandLine> line = Parse({"submit", "-o", "out.csv"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->Value("output"), "out.csv");
  EXPECT_TRUE(line->arguments.empty());
  line = Parse({"submit", "-oout.csv", "spec.yaml"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->Value("output"), "out.csv");
  EXPECT_THAT(line->arguments, ElementsAre("spec.yaml"));
  EXPECT_EQ(Parse({"submit", "-o", "a", "--output=b"}).status().message(),
            "flag --output given more than once; give it once");
  EXPECT_EQ(Parse({"submit", "-o"}).status().message(),
            "flag --output needs a value: --output FILE");
  // Short names belong to their command.
  EXPECT_THAT(std::string(Parse({"status", "j", "-o", "x"}).status().message()),
              HasSubstr("unknown flag '-o' for 'status'"));
}

TEST(ArgParserTest, HelpSkipsArgumentCount) {
  absl::StatusOr<CommandLine> line = Parse({"status", "--help"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_TRUE(line->help);
  EXPECT_EQ(line->command, "status");
  line = Parse({"-h"});
  ASSERT_TRUE(line.ok());
  EXPECT_TRUE(line->help);
  EXPECT_EQ(line->command, "");
}

TEST(ArgParserTest, Errors) {
  EXPECT_EQ(Parse({"sumbit"}).status().message(),
            "unknown command 'sumbit' (did you mean 'submit'?)");
  EXPECT_EQ(Parse({"submit", "--epoch=3"}).status().message(),
            "unknown flag --epoch for 'submit' (did you mean 'epochs'?)");
  EXPECT_EQ(Parse({"--epochs=3", "submit"}).status().message(),
            "unknown flag --epochs");  // a command flag before the command
  EXPECT_EQ(Parse({"submit", "--epochs"}).status().message(),
            "flag --epochs needs a value: --epochs N");
  EXPECT_EQ(Parse({"submit", "--epochs=1", "--epochs=2"}).status().message(),
            "flag --epochs given more than once; give it once");
  EXPECT_EQ(Parse({"submit", "--watch=yes"}).status().message(),
            "flag --watch takes no value; write just --watch");
  EXPECT_EQ(Parse({"status"}).status().message(), "'status' takes JOB, got none");
  EXPECT_EQ(Parse({"status", "a", "b"}).status().message(), "'status' takes JOB, got 2 arguments");
  EXPECT_THAT(std::string(Parse({"status", "-x"}).status().message()),
              HasSubstr("flags are written --name"));
}

TEST(ArgParserTest, UsageTexts) {
  const std::string program = ProgramUsage("rl", "Runs jobs.", kGlobal, kCommands);
  EXPECT_THAT(program, HasSubstr("usage: rl [global flags] <command> [flags] [args]"));
  EXPECT_THAT(program, HasSubstr("  submit  submit a job\n"));
  EXPECT_THAT(program, HasSubstr("--coordinator ADDR  address"));
  const std::string submit = CommandUsage("rl", kCommands[0], kGlobal);
  EXPECT_THAT(submit, HasSubstr("usage: rl submit [flags] [SPEC.yaml]"));
  EXPECT_THAT(submit, HasSubstr("  --set K=V          set (repeatable)\n"));
  EXPECT_THAT(submit, HasSubstr("  --watch            follow\n"));
  EXPECT_THAT(submit, HasSubstr("  -o, --output FILE  write here\n"));
}

}  // namespace
}  // namespace ringleader
