// `ringleader plan` through the whole command line: flags, the spec file, text and JSON output,
// errors; it never connects to a coordinator.
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli.h"
#include "client/commands.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// layers [4, 3, 2]: 23 parameters (plan/memory_plan_test.cc works the figures out by hand).
constexpr char kSmallSpec[] = R"(world_size: 2
data:
  dataset: synthetic
model:
  layers: [4, 3, 2]
)";

class PlanCommandTest : public ::testing::Test {
 protected:
  PlanCommandTest() {
    env_.out = &out_;
    env_.err = &err_;
    env_.clock = &clock_;
    env_.sleep = [](absl::Duration) {};
    env_.read_file = [](const std::string& path) -> absl::StatusOr<std::string> {
      if (path == "small.yaml") return std::string(kSmallSpec);
      return absl::NotFoundError("no such file");
    };
  }

  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    return RunCli(args, env_, [this](const ConnectOptions&) -> std::unique_ptr<JobClient> {
      ++connects_;
      return nullptr;
    });
  }

  std::ostringstream out_;
  std::ostringstream err_;
  FakeClock clock_;
  CommandEnvironment env_;
  int connects_ = 0;
};

TEST_F(PlanCommandTest, PrintsATableOfEveryStrategyWithoutACoordinator) {
  ASSERT_EQ(Run({"plan", "small.yaml"}), kExitOk) << err_.str();
  const std::string text = out_.str();
  EXPECT_THAT(text, StartsWith("memory per rank: mlp 4-3-2 (23 parameters), 2 ranks, sgd "
                               "momentum 0.9, comm fp32, backend gloo\n"));
  EXPECT_THAT(text, HasSubstr("STRATEGY  PARAMETERS  GRADIENTS  OPTIMIZER  COMM_BUFFERS  "
                              "TOTAL/RANK  VS_DDP  AVAILABLE\n"));
  // ddp: 23 parameters, 24 arena floats, 23 momentum floats; zero1: rank 1's 12-element shard
  // and its gather buffers (12 + 2 x 12 floats).
  EXPECT_THAT(text, HasSubstr("ddp *     92 B        96 B       92 B       0 B           280 B"
                              "       1.00x   yes\n"));
  EXPECT_THAT(text, HasSubstr("zero1     92 B        96 B       48 B       144 B         380 B"
                              "       1.36x   yes\n"));
  // zero2: one bucket of 23 padded to 24, slices of 12: shard 12 + a one-buffer pool of 24,
  // rank 0's 12 owned elements, zero1's gather buffers; runs on gloo.
  EXPECT_THAT(text, HasSubstr("zero2     92 B        144 B      48 B       144 B         428 B"
                              "       1.53x   yes\n"));
  // fsdp: zero2's gradients and optimizer; parameters: the 12-float shard and the one bucket
  // (24 floats) both layers are gathered into; no communication buffer; runs on gloo.
  EXPECT_THAT(text, HasSubstr("fsdp      144 B       144 B      48 B       0 B           336 B"
                              "       1.20x   yes\n"));
  EXPECT_EQ(connects_, 0);
}

TEST_F(PlanCommandTest, WorldSizeAndSetChangeTheSpec) {
  ASSERT_EQ(Run({"plan", "small.yaml", "--world_size", "4", "--set", "sync.comm_dtype=bf16",
                 "--set", "optimizer.momentum=0"}),
            kExitOk)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("4 ranks, sgd momentum 0, comm bf16"));
  // ddp: no momentum, the bf16 copy of the 24-float arena.
  EXPECT_THAT(out_.str(), HasSubstr("ddp *     92 B        96 B       0 B        48 B"));
  // The defaults alone: the README's model.
  ASSERT_EQ(Run({"plan"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("mlp 784-256-128-10 (235146 parameters), 2 ranks"));
  EXPECT_EQ(connects_, 0);
}

TEST_F(PlanCommandTest, JsonIsAMemoryPlan) {
  for (const char* flag : {"--output=json", "--json"}) {
    ASSERT_EQ(Run({"plan", "small.yaml", flag}), kExitOk) << err_.str();
    v1::MemoryPlan plan;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out_.str(), &plan).ok()) << out_.str();
    EXPECT_EQ(plan.world_size(), 2u);
    EXPECT_EQ(plan.parameters(), 23u);
    EXPECT_EQ(plan.spec_strategy(), "ddp");
    ASSERT_EQ(plan.strategies_size(), 4);
    EXPECT_EQ(plan.strategies(0).memory().total_bytes(), 280u);
    EXPECT_TRUE(plan.strategies(1).available());
    EXPECT_TRUE(plan.strategies(2).available());   // zero2 on gloo
    EXPECT_TRUE(plan.strategies(3).available());   // fsdp on gloo
    EXPECT_THAT(out_.str(), HasSubstr("\"comm_buffer_bytes\""));  // proto field names
  }
  EXPECT_EQ(connects_, 0);
}

TEST_F(PlanCommandTest, ErrorsNameTheFieldAndExitTwo) {
  EXPECT_EQ(Run({"plan", "small.yaml", "--set", "strategy=zero3"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("strategy: unknown strategy 'zero3'"));
  EXPECT_EQ(Run({"plan", "missing.yaml"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("cannot read spec file missing.yaml"));
  EXPECT_EQ(Run({"plan", "small.yaml", "--set", "nonsense"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--set: expected KEY.PATH=VALUE"));
  EXPECT_EQ(Run({"plan", "--epochs", "3"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("unknown flag --epochs for 'plan'"));
  EXPECT_EQ(Run({"plan", "small.yaml", "--set", "command=[/bin/true]"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("command: a command job runs your own program"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("STRATEGY")));
  EXPECT_EQ(connects_, 0);
}

TEST_F(PlanCommandTest, HelpNamesTheFlags) {
  ASSERT_EQ(Run({"plan", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("usage: ringleader plan"));
  EXPECT_THAT(out_.str(), HasSubstr("--world_size N"));
  EXPECT_THAT(out_.str(), HasSubstr("--set KEY.PATH=VALUE"));
  ASSERT_EQ(Run({"--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("plan"));
}

}  // namespace
}  // namespace ringleader
