// LocalNormNotes against the CPU runner's local norm (the sum of every note's squared L2Norm),
// with the device partials emulated on the host in the kernel's shape: the first note of a
// gradient writes its partials, later ones add, Take sums the noted parameters only.
#include "worker/rank/gpu/local_norm_notes.h"

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/trainer/mlp_math.h"
#include "worker/trainer/norm.h"

namespace ringleader {
namespace {

using gpu::kSquaredSumBlocks;
constexpr size_t kBlocks = kSquaredSumBlocks;
constexpr size_t kThreads = 256;  // gpu_mlp.cu's block size

// What LaunchSquaredSumPartials (kWrite) / LaunchAddSquaredSumPartials (kAdd) leave in one
// parameter's kBlocks partials.
void EmulateKernel(LocalNormNotes::Launch launch, const std::vector<float>& v, double* partials) {
  for (size_t block = 0; block < kBlocks; ++block) {
    double sum = 0;
    for (size_t t = 0; t < kThreads; ++t) {
      sum += gpu::SquaredSumStrided(v.data(), block * kThreads + t, v.size(), kBlocks * kThreads);
    }
    partials[block] = launch == LocalNormNotes::Launch::kAdd ? partials[block] + sum : sum;
  }
}

std::vector<float> Random(size_t n, std::mt19937* rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

double Squared(const std::vector<float>& v) {
  const double norm = L2Norm(v.data(), v.size());  // the CPU runner's NoteLocalGradient
  return norm * norm;
}

const std::vector<size_t> kCounts = {20000, 40, 3};  // a multi-block gradient, small ones

// zero2 / fsdp with two micro-batches: every gradient noted twice (bias before weight,
// backward order), each micro-batch's own values.
TEST(LocalNormNotesTest, EveryNoteOfAGradientIsAddedAsTheCpuRunnerAddsThem) {
  std::mt19937 rng(7);
  LocalNormNotes notes(kCounts.size());
  std::vector<double> partials(kCounts.size() * kBlocks, 0.0);
  double cpu = 0, last_micro_batch = 0;
  for (int micro = 0; micro < 2; ++micro) {
    last_micro_batch = 0;
    for (size_t i = kCounts.size(); i-- > 0;) {
      const std::vector<float> grad = Random(kCounts[i], &rng);
      const LocalNormNotes::Launch launch = notes.Note(i);
      EXPECT_EQ(launch, micro == 0 ? LocalNormNotes::Launch::kWrite : LocalNormNotes::Launch::kAdd)
          << "parameter " << i << " micro-batch " << micro;
      EmulateKernel(launch, grad, &partials[i * kBlocks]);
      cpu += Squared(grad);
      last_micro_batch += Squared(grad);
    }
  }
  ASSERT_TRUE(notes.any());
  const double gpu = notes.Take(partials, kBlocks);
  EXPECT_NEAR(gpu, cpu, 1e-12 * cpu);
  EXPECT_GT(gpu, 1.5 * last_micro_batch) << "both micro-batches, not the last one alone";
  EXPECT_FALSE(notes.any()) << "Take forgets the notes";
}

// After a Take, the partials still hold the last step's sums: the next step's first note of a
// gradient overwrites them, and a parameter not noted this step (skipped, or no gradient) is
// left out of the sum even though its partials are not zero.
TEST(LocalNormNotesTest, TheFirstNoteAfterATakeOverwritesAndUnnotedParametersAreLeftOut) {
  std::mt19937 rng(11);
  LocalNormNotes notes(kCounts.size());
  std::vector<double> partials(kCounts.size() * kBlocks, 0.0);
  for (size_t i = 0; i < kCounts.size(); ++i) {
    EmulateKernel(notes.Note(i), Random(kCounts[i], &rng), &partials[i * kBlocks]);
  }
  notes.Take(partials, kBlocks);

  const std::vector<float> grad = Random(kCounts[1], &rng);
  const LocalNormNotes::Launch launch = notes.Note(1);
  EXPECT_EQ(launch, LocalNormNotes::Launch::kWrite);
  EmulateKernel(launch, grad, &partials[1 * kBlocks]);
  const double expected = Squared(grad);
  EXPECT_NEAR(notes.Take(partials, kBlocks), expected, 1e-12 * expected);
}

TEST(LocalNormNotesTest, NothingNotedIsZeroAndClearForgetsTheNotes) {
  LocalNormNotes notes(2);
  const std::vector<double> stale(2 * kBlocks, 1.0);
  EXPECT_FALSE(notes.any());
  EXPECT_EQ(notes.Take(stale, kBlocks), 0.0);
  EXPECT_EQ(notes.Note(0), LocalNormNotes::Launch::kWrite);
  EXPECT_EQ(notes.Note(0), LocalNormNotes::Launch::kAdd);
  notes.Clear();
  EXPECT_FALSE(notes.any());
  EXPECT_EQ(notes.Note(0), LocalNormNotes::Launch::kWrite) << "a cleared note starts over";
  EXPECT_EQ(notes.Take(stale, kBlocks), static_cast<double>(kBlocks));
}

}  // namespace
}  // namespace ringleader
