#include <string>

#include "client/did_you_mean.h"
#include "client/format.h"
#include "client/table.h"
#include "gtest/gtest.h"

namespace ringleader {
namespace {

TEST(TableTest, AlignsColumnsAndTrimsTrailingSpaces) {
  Table table({"RANK", "WORKER", "STEP"}, "  ");
  table.AddRow({"0", "node1-cpu0", "120"});
  table.AddRow({"10", "n2"});  // short row: padded
  EXPECT_EQ(table.Render(),
            "  RANK  WORKER      STEP\n"
            "  0     node1-cpu0  120\n"
            "  10    n2\n");
  EXPECT_EQ(table.rows(), 2u);
}

TEST(FormatTest, StatesTimesAgesNumbers) {
  EXPECT_EQ(JobStateName(v1::JOB_STATE_RUNNING), "RUNNING");
  EXPECT_EQ(JobStateName(static_cast<v1::JobState>(42)), "UNKNOWN(42)");
  EXPECT_EQ(WorkerStateName(v1::WORKER_STATE_LOST), "LOST");
  EXPECT_TRUE(IsTerminal(v1::JOB_STATE_CANCELLED));
  EXPECT_FALSE(IsTerminal(v1::JOB_STATE_RENDEZVOUS));
  EXPECT_EQ(FormatUnixMillis(1'700'000'000'123), "2023-11-14 22:13:20.123 UTC");
  EXPECT_EQ(FormatUnixMillis(0), "-");
  EXPECT_EQ(FormatAgeMillis(850), "850ms");
  EXPECT_EQ(FormatAgeMillis(4200), "4.2s");
  EXPECT_EQ(FormatAgeMillis(185'000), "3m05s");
  EXPECT_EQ(FormatAgeMillis(-1), "-");
  EXPECT_EQ(FormatNumber(0.432149), "0.4321");
  EXPECT_EQ(FormatNumber(12.34, 3), "12.3");
}

TEST(FormatTest, DeviceAndSpecSummary) {
  v1::Device device;
  device.set_kind("cuda");
  device.set_index(1);
  device.set_name("NVIDIA H100");
  EXPECT_EQ(FormatDevice(device), "cuda:1 (NVIDIA H100)");
  v1::JobSpec spec;
  spec.set_world_size(2);
  spec.set_backend("gloo");
  spec.set_batch_size(64);
  spec.set_epochs(3);
  spec.mutable_model()->set_kind("mlp");
  for (uint32_t width : {784u, 10u}) spec.mutable_model()->add_layers(width);
  spec.mutable_optimizer()->set_kind("sgd");
  spec.mutable_optimizer()->set_learning_rate(0.05);
  spec.mutable_optimizer()->set_momentum(0.9);
  spec.mutable_data()->set_dataset("fashion-mnist");
  EXPECT_EQ(SummarizeSpec(spec),
            "mlp 784-10, sgd lr 0.05 momentum 0.9, batch 64 x 2 ranks, 3 epochs, gloo, "
            "fashion-mnist");
  spec.add_command("/usr/bin/python3");
  spec.add_command("train.py");
  spec.add_command("--name=a b");
  spec.set_workdir("/srv/train");
  EXPECT_EQ(SummarizeSpec(spec),
            "command `/usr/bin/python3 train.py '--name=a b'`, 2 ranks, gloo, in /srv/train");
}

TEST(DidYouMeanTest, SuggestsOnlyCloseNames) {
  EXPECT_EQ(EditDistance("optimiser", "optimizer"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(ClosestMatch("sumbit", {"status", "submit", "watch"}), "submit");
  EXPECT_EQ(ClosestMatch("xyz", {"status", "submit"}), "");
  EXPECT_EQ(ClosestMatch("ab", {"ac"}), "");  // distance 1 is half of a 2-letter word
  EXPECT_EQ(DidYouMean("epoch", {"epochs", "seed"}), " (did you mean 'epochs'?)");
  EXPECT_EQ(DidYouMean("zzzzzz", {"epochs"}), "");
}

}  // namespace
}  // namespace ringleader
