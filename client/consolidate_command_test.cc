// `ringleader consolidate` (RunConsolidate, and through RunCli) on real shard files.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/shard_test_util.h"
#include "checkpoint/sharded_checkpoint.h"
#include "client/cli.h"
#include "client/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

using ::testing::HasSubstr;

class ConsolidateCommandTest : public ::testing::Test {
 protected:
  ConsolidateCommandTest() {
    env_.out = &out_;
    env_.err = &err_;
    dir_ = absl::StrCat(::testing::TempDir(), "/consolidate_command_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    whole_.step = 30;
    whole_.epoch = 1;
    whole_.spec_fingerprint = "fp";
    whole_.tensors.push_back({"fc1.weight", {2, 3}, {1, 2, 3, 4, 5, 6}});
    whole_.tensors.push_back({"fc1.bias", {2}, {0.5f, -0.5f}});
    whole_.tensors.push_back({"fc1.weight.momentum_buffer", {2, 3}, {-1, -2, -3, -4, -5, -6}});
    whole_.tensors.push_back({"fc1.bias.momentum_buffer", {2}, {0.25f, -0.25f}});
    manifest_ = WriteShards(dir_, 30, "fp", ShardLikeZero(whole_, {4, 7}));
  }

  // The command line through RunCli; any connection attempt fails the test.
  int Run(std::vector<std::string> args) {
    return RunCli(args, env_, [](const ConnectOptions&) -> std::unique_ptr<JobClient> {
      ADD_FAILURE() << "consolidate connected to a coordinator";
      return nullptr;
    });
  }

  std::ostringstream out_;
  std::ostringstream err_;
  CommandEnvironment env_;
  std::string dir_;
  CheckpointData whole_;
  std::string manifest_;
};

TEST_F(ConsolidateCommandTest, WritesEveryTensorWholeWithoutAConnection) {
  const std::string out = dir_ + "/out/consolidated.ckpt";  // its directory made as needed
  EXPECT_EQ(Run({"consolidate", manifest_, "-o", out}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), absl::StrCat("wrote the consolidated checkpoint of step 30 (3 shards, 4 "
                                     "tensors) from ",
                                     manifest_, " to ", out, "\n"));
  absl::StatusOr<CheckpointData> data = ReadCheckpoint(out);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_FALSE(IsShardedManifest(*data));
  EXPECT_EQ(data->step, 30u);
  EXPECT_EQ(data->spec_fingerprint, "fp");
  EXPECT_TRUE(data->attributes.empty());
  ASSERT_EQ(data->tensors.size(), whole_.tensors.size());
  for (size_t i = 0; i < whole_.tensors.size(); ++i) {
    EXPECT_EQ(data->tensors[i].name, whole_.tensors[i].name);
    EXPECT_EQ(data->tensors[i].shape, whole_.tensors[i].shape);
    EXPECT_EQ(data->tensors[i].data, whole_.tensors[i].data) << whole_.tensors[i].name;
  }

  // --json: one object; the file is replaced as export replaces its own.
  out_.str("");
  EXPECT_EQ(Run({"--json", "consolidate", manifest_, "-o", out}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"step\":\"30\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"shards\":\"3\""));
}

TEST_F(ConsolidateCommandTest, RefusesAConsolidatedCheckpointAndNamesMissingFiles) {
  const std::string consolidated = dir_ + "/final.ckpt";
  ASSERT_TRUE(WriteCheckpoint(consolidated, whole_).ok());
  EXPECT_EQ(RunConsolidate(consolidated, dir_ + "/x.ckpt", env_), kExitFailure);
  EXPECT_THAT(err_.str(), HasSubstr("checkpoint " + consolidated +
                                    " is not the manifest of a sharded checkpoint: it is "
                                    "already consolidated"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x.ckpt"));

  err_.str("");
  EXPECT_EQ(RunConsolidate(dir_ + "/nothing.ckpt", dir_ + "/x.ckpt", env_), kExitFailure);
  EXPECT_THAT(err_.str(), HasSubstr(dir_ + "/nothing.ckpt does not exist"));

  err_.str("");
  const std::string shard = dir_ + "/" + ShardFileName("step-000000000030.ckpt", 1, 3);
  ASSERT_TRUE(std::filesystem::remove(shard));
  EXPECT_EQ(RunConsolidate(manifest_, dir_ + "/x.ckpt", env_), kExitFailure);
  EXPECT_THAT(err_.str(), HasSubstr("error: cannot consolidate " + manifest_));
  EXPECT_THAT(err_.str(), HasSubstr(shard + " does not exist"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x.ckpt"));
}

TEST_F(ConsolidateCommandTest, OutputIsRequiredAndAnUnwritableOneIsNamed) {
  EXPECT_EQ(Run({"consolidate", manifest_}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("consolidate: -o FILE (--output) is required"));

  err_.str("");
  std::filesystem::create_directories(dir_ + "/taken");
  EXPECT_EQ(RunConsolidate(manifest_, dir_ + "/taken", env_), kExitFailure);
  EXPECT_THAT(err_.str(), HasSubstr("error: cannot write " + dir_ + "/taken"));
}

}  // namespace
}  // namespace ringleader
