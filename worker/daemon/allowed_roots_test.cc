// AllowedRoots and ResolvePath on a real file tree in the test's temporary directory:
//   <tmp>/<test>/root/          the allowed root (sub/, file, and the links each test adds)
//   <tmp>/<test>/root-sibling/  shares the root's name as a prefix: outside
//   <tmp>/<test>/outside/       outside
#include "worker/daemon/allowed_roots.h"

#include <unistd.h>

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

class AllowedRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    ASSERT_NE(tmp, nullptr);
    // Canonical, so that expected resolutions can be spelled out (TEST_TMPDIR may be a link).
    base_ = fs::canonical(tmp) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(base_);
    root_ = (base_ / "root").string();
    outside_ = (base_ / "outside").string();
    fs::create_directories(base_ / "root" / "sub");
    fs::create_directories(base_ / "root-sibling");
    fs::create_directories(outside_);
    std::ofstream(base_ / "root" / "file") << "x";
    absl::StatusOr<AllowedRoots> roots = AllowedRoots::Create({root_});
    ASSERT_TRUE(roots.ok()) << roots.status();
    roots_ = *roots;
  }

  void Link(const std::string& target, const std::string& at) {
    fs::create_symlink(target, fs::path(root_) / at);
  }

  // The message of a refusal ("" when accepted).
  std::string Refusal(const std::string& path) const {
    return std::string(roots_.Check("checkpoint_dir", path).message());
  }

  fs::path base_;
  std::string root_;
  std::string outside_;
  AllowedRoots roots_;
};

TEST_F(AllowedRootsTest, TheRootItselfAndPathsBelowItAreInside) {
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_).ok());
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "/").ok());
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "//sub/./").ok());
  EXPECT_TRUE(roots_.Check("model.init_from", root_ + "/file").ok());
}

TEST_F(AllowedRootsTest, ARootGivenWithATrailingSlashHoldsTheSamePaths) {
  absl::StatusOr<AllowedRoots> slashed = AllowedRoots::Create({root_ + "/"});
  ASSERT_TRUE(slashed.ok());
  EXPECT_TRUE(slashed->Check("checkpoint_dir", root_).ok());
  EXPECT_TRUE(slashed->Check("checkpoint_dir", root_ + "/sub").ok());
  EXPECT_FALSE(slashed->Check("checkpoint_dir", outside_).ok());
}

TEST_F(AllowedRootsTest, ANotYetExistingDirectoryBelowTheRootIsInside) {
  // checkpoint_dir is created by the rank: its missing components are taken as written.
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "/new/deeper/still").ok());
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "/sub/new").ok());
}

TEST_F(AllowedRootsTest, APathOutsideIsRefusedNamingFieldPathRootsAndTheFix) {
  const absl::Status refused = roots_.Check("checkpoint_dir", "/etc");
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(),
            absl::StrCat("checkpoint_dir: /etc is outside the worker's allowed roots (", root_,
                         "): set checkpoint_dir under one of them, or add a root with "
                         "ringleader-worker --allowed_roots"));
  EXPECT_THAT(Refusal(outside_ + "/new"), HasSubstr(" is outside the worker's allowed roots"));
}

TEST_F(AllowedRootsTest, ASiblingSharingTheRootsNameAsAPrefixIsOutside) {
  EXPECT_FALSE(roots_.Check("checkpoint_dir", root_ + "-sibling").ok());
  EXPECT_FALSE(roots_.Check("checkpoint_dir", root_ + "-sibling/x").ok());
  EXPECT_FALSE(roots_.Check("checkpoint_dir", root_ + "x").ok());
}

TEST_F(AllowedRootsTest, DotDotThatClimbsOutIsRefusedAndOneThatStaysInsideIsNot) {
  EXPECT_THAT(Refusal(root_ + "/../outside"),
              HasSubstr(absl::StrCat(root_, "/../outside resolves to ", outside_,
                                     ", which is outside")));
  EXPECT_FALSE(roots_.Check("checkpoint_dir", root_ + "/sub/../../outside").ok());
  // Through components that do not exist yet: climbing back above the root is still outside.
  EXPECT_FALSE(roots_.Check("checkpoint_dir", root_ + "/new/../../outside/x").ok());
  EXPECT_FALSE(roots_.Check("checkpoint_dir", root_ + "/../../../../../../etc").ok());
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "/sub/../file").ok());
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "/new/../sub").ok());
}

TEST_F(AllowedRootsTest, RelativePathsAreRefused) {
  for (const std::string path : {"checkpoints", "./root", "", "../etc"}) {
    const absl::Status refused = roots_.Check("data.path", path);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(refused.message()),
                HasSubstr(absl::StrCat("data.path: '", path, "' is relative")));
  }
}

TEST_F(AllowedRootsTest, ASymlinkInsideTheRootLeadingOutIsRefused) {
  Link(outside_, "escape");
  EXPECT_EQ(Refusal(root_ + "/escape"),
            absl::StrCat("checkpoint_dir: ", root_, "/escape resolves to ", outside_,
                         ", which is outside the worker's allowed roots (", root_,
                         "): set checkpoint_dir under one of them, or add a root with "
                         "ringleader-worker --allowed_roots"));
  // Below the link, existing or not.
  EXPECT_FALSE(roots_.Check("checkpoint_dir", root_ + "/escape/job-000001").ok());
  Link("/etc", "etc");
  EXPECT_THAT(Refusal(root_ + "/etc/passwd"), HasSubstr("resolves to /etc/passwd"));
}

TEST_F(AllowedRootsTest, RelativeChainedAndDanglingLinksAreFollowed) {
  Link("../outside", "relative-escape");
  EXPECT_FALSE(roots_.Check("checkpoint_dir", root_ + "/relative-escape").ok());
  Link("relative-escape", "chain");
  EXPECT_THAT(Refusal(root_ + "/chain/x"), HasSubstr(absl::StrCat("resolves to ", outside_, "/x")));
  // A link to where nothing exists yet: creating the directory would create it out there.
  Link(outside_ + "/not-yet", "dangling");
  EXPECT_FALSE(roots_.Check("checkpoint_dir", root_ + "/dangling").ok());
  // Links that stay inside are fine.
  Link("sub", "inner");
  Link(root_ + "/sub", "inner-absolute");
  Link("sub/../not-yet", "inner-dangling");
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "/inner/x").ok());
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "/inner-absolute").ok());
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "/inner-dangling").ok());
  // ".." after a link applies to the link's target (realpath semantics): inner/.. is the root.
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "/inner/../file").ok());
  Link(outside_, "out");
  // out/.. is outside's parent (the base directory), not the root; out/../root is the root.
  EXPECT_THAT(Refusal(root_ + "/out/.."), HasSubstr(absl::StrCat("resolves to ", base_.string())));
  EXPECT_TRUE(roots_.Check("checkpoint_dir", root_ + "/out/../root/sub").ok());
}

TEST_F(AllowedRootsTest, ALinkLoopIsRefused) {
  Link("loop-b", "loop-a");
  Link("loop-a", "loop-b");
  const absl::Status refused = roots_.Check("checkpoint_dir", root_ + "/loop-a");
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("cannot be resolved"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("symbolic links"));
}

TEST_F(AllowedRootsTest, ARootThatIsALinkHoldsWhatItsTargetHolds) {
  const std::string link = (base_ / "root-link").string();
  fs::create_symlink(root_, link);
  absl::StatusOr<AllowedRoots> linked = AllowedRoots::Create({link});
  ASSERT_TRUE(linked.ok());
  EXPECT_TRUE(linked->Check("checkpoint_dir", root_ + "/sub").ok());
  EXPECT_TRUE(linked->Check("checkpoint_dir", link + "/new").ok());
  EXPECT_FALSE(linked->Check("checkpoint_dir", outside_).ok());
}

TEST_F(AllowedRootsTest, SeveralRootsAreListedInTheMessage) {
  absl::StatusOr<AllowedRoots> two = AllowedRoots::Create({root_, outside_});
  ASSERT_TRUE(two.ok());
  EXPECT_TRUE(two->Check("checkpoint_dir", outside_ + "/x").ok());
  EXPECT_THAT(std::string(two->Check("workdir", "/etc").message()),
              HasSubstr(absl::StrCat("workdir: /etc is outside the worker's allowed roots (",
                                     root_, ", ", outside_, "): set workdir under")));
}

TEST_F(AllowedRootsTest, TheRootSlashHoldsEverythingAndNoRootsConfineNothing) {
  absl::StatusOr<AllowedRoots> everything = AllowedRoots::Create({"/"});
  ASSERT_TRUE(everything.ok());
  EXPECT_TRUE(everything->confining());
  EXPECT_TRUE(everything->Check("checkpoint_dir", "/etc").ok());
  EXPECT_TRUE(everything->Check("checkpoint_dir", "/").ok());
  const AllowedRoots none;
  EXPECT_FALSE(none.confining());
  EXPECT_TRUE(none.Check("checkpoint_dir", "/etc").ok());
}

TEST_F(AllowedRootsTest, RelativeOrEmptyRootsAreRefused) {
  for (const std::string root : {"var/lib/ringleader", "", "./x"}) {
    absl::StatusOr<AllowedRoots> bad = AllowedRoots::Create({root_, root});
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << root;
    EXPECT_THAT(std::string(bad.status().message()),
                HasSubstr(absl::StrCat("'", root, "' is not an absolute path")));
  }
}

TEST(ResolvePathTest, SpellingIsNormalisedAndRelativePathsAreRefused) {
  EXPECT_EQ(*ResolvePath("/"), "/");
  EXPECT_EQ(*ResolvePath("//"), "/");
  EXPECT_EQ(*ResolvePath("/.."), "/");
  EXPECT_EQ(*ResolvePath("/no-such-dir-here/./a//b/../c/"), "/no-such-dir-here/a/c");
  EXPECT_EQ(ResolvePath("a/b").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolvePath("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AllowedRootsTest, ResolvePathFollowsLinksLikeRealpath) {
  Link("sub", "inner");
  Link(outside_, "out");
  EXPECT_EQ(*ResolvePath(root_ + "/inner"), fs::canonical(root_ + "/inner").string());
  EXPECT_EQ(*ResolvePath(root_ + "/out/new/x"), outside_ + "/new/x");
  EXPECT_EQ(*ResolvePath(root_ + "/file/below"), root_ + "/file/below");  // ENOTDIR: as written
}

}  // namespace
}  // namespace ringleader
