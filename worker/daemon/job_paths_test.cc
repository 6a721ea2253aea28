// CheckJobPaths: which fields of a spec are confined, for the built-in trainer and for command
// jobs, on a file tree in the test's temporary directory (<tmp>/<test>/root allowed,
// <tmp>/<test>/outside not).
#include "worker/daemon/job_paths.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class JobPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    ASSERT_NE(tmp, nullptr);
    const fs::path base =
        fs::canonical(tmp) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(base);
    root_ = (base / "root").string();
    outside_ = (base / "outside").string();
    fs::create_directories(root_);
    fs::create_directories(outside_);
    absl::StatusOr<AllowedRoots> roots = AllowedRoots::Create({root_});
    ASSERT_TRUE(roots.ok());
    roots_ = *roots;
    // A built-in job on synthetic data: no path at all.
    assignment_.set_job_id("job-000042");
    assignment_.set_generation(1);
    assignment_.set_world_size(1);
    assignment_.mutable_spec()->set_world_size(1);
    assignment_.mutable_spec()->mutable_data()->set_dataset("synthetic");
  }

  v1::JobSpec& spec() { return *assignment_.mutable_spec(); }
  std::string Refusal() const {
    return std::string(CheckJobPaths(assignment_, roots_).message());
  }

  std::string root_;
  std::string outside_;
  AllowedRoots roots_;
  v1::Assignment assignment_;
};

TEST_F(JobPathsTest, ASpecWithoutPathsOrWithPathsInsideIsAccepted) {
  EXPECT_TRUE(CheckJobPaths(assignment_, roots_).ok());
  spec().set_checkpoint_dir(root_ + "/checkpoints");
  spec().mutable_model()->set_init_from(root_ + "/init.safetensors");
  spec().mutable_data()->set_path(root_ + "/data");
  EXPECT_TRUE(CheckJobPaths(assignment_, roots_).ok());
}

TEST_F(JobPathsTest, EachPathFieldOfTheBuiltInTrainerIsConfined) {
  spec().set_checkpoint_dir("/etc");
  EXPECT_THAT(Refusal(), StartsWith("checkpoint_dir: /etc is outside the worker's allowed roots"));
  spec().set_checkpoint_dir(root_);
  spec().mutable_model()->set_init_from(outside_ + "/weights.safetensors");
  EXPECT_THAT(Refusal(), StartsWith(absl::StrCat("model.init_from: ", outside_,
                                                 "/weights.safetensors is outside")));
  spec().mutable_model()->clear_init_from();
  spec().mutable_data()->set_path(outside_);
  EXPECT_THAT(Refusal(), StartsWith(absl::StrCat("data.path: ", outside_, " is outside")));
}

TEST_F(JobPathsTest, FashionMnistWithoutADataPathReadsTheDefaultDirectory) {
  spec().mutable_data()->set_dataset("fashion-mnist");
  for (int width : {784, 10}) spec().mutable_model()->add_layers(width);
  EXPECT_THAT(Refusal(), StartsWith("data.path: /usr/share/datasets/fashion-mnist is outside"));
  absl::StatusOr<AllowedRoots> with_data =
      AllowedRoots::Create({root_, "/usr/share/datasets/fashion-mnist"});
  ASSERT_TRUE(with_data.ok());
  EXPECT_TRUE(CheckJobPaths(assignment_, *with_data).ok());
}

TEST_F(JobPathsTest, ACommandJobIsCheckedForWorkdirAndCheckpointDirOnly) {
  spec().add_command("/bin/true");
  // As the coordinator sends it: defaults filled in, so data.path names the Fashion-MNIST
  // directory, which a command job never reads.
  spec().mutable_data()->set_dataset("fashion-mnist");
  spec().mutable_data()->set_path("/usr/share/datasets/fashion-mnist");
  EXPECT_TRUE(CheckJobPaths(assignment_, roots_).ok());
  spec().set_workdir(outside_);
  EXPECT_THAT(Refusal(), StartsWith(absl::StrCat("workdir: ", outside_, " is outside")));
  spec().set_workdir(root_);
  spec().set_checkpoint_dir("/tmp/../etc");
  EXPECT_THAT(Refusal(), StartsWith("checkpoint_dir: /tmp/../etc resolves to /etc, which is "
                                    "outside"));
}

TEST_F(JobPathsTest, TheJobsCheckpointDirectoryAndItsEntriesMustNotLeadOut) {
  spec().set_checkpoint_dir(root_);
  // The job's own directory replaced by a link out of the root.
  fs::create_symlink(outside_, fs::path(root_) / "job-000042");
  EXPECT_THAT(Refusal(), StartsWith(absl::StrCat("checkpoint_dir: ", root_,
                                                 "/job-000042 resolves to ", outside_)));
  fs::remove(fs::path(root_) / "job-000042");
  // A file the rank would write through, planted as a link.
  fs::create_directories(fs::path(root_) / "job-000042");
  std::ofstream(fs::path(root_) / "job-000042" / "step-10.ckpt") << "ok";
  EXPECT_TRUE(CheckJobPaths(assignment_, roots_).ok());
  fs::create_symlink(outside_ + "/victim", fs::path(root_) / "job-000042" / "final.ckpt.tmp");
  EXPECT_THAT(Refusal(), HasSubstr(absl::StrCat("/job-000042/final.ckpt.tmp resolves to ",
                                                outside_, "/victim, which is outside")));
}

TEST_F(JobPathsTest, NothingIsCheckedWithoutRoots) {
  spec().set_checkpoint_dir("/etc");
  spec().mutable_data()->set_path("/etc/shadow");
  EXPECT_TRUE(CheckJobPaths(assignment_, AllowedRoots()).ok());
}

}  // namespace
}  // namespace ringleader
