// Time per training step (forward + backward + SGD step) of the CPU Mlp, with a forward-only pass
// over the same batch as the in-run baseline: the ratio says what backward + update cost on top
// of inference, independent of how fast (or loaded) the machine is.
//
//   mlp_benchmark --batch=64 --layers=784,256,128,10 --steps=300 --blas_threads=1
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "worker/data/dataset.h"
#include "worker/trainer/cpu_math.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

ABSL_FLAG(int, batch, 64, "examples per step");
ABSL_FLAG(std::string, layers, "784,256,128,10", "layer sizes, comma-separated");
ABSL_FLAG(int, steps, 300, "timed steps (after 20 warm-up steps)");
ABSL_FLAG(int, blas_threads, 0, "OpenBLAS threads per matrix multiply (0 = leave OpenBLAS's default)");

namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start, int reps) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / reps;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::vector<size_t> layers;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_layers), ',')) {
    size_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v == 0) {
      std::fprintf(stderr, "--layers: \"%s\" is not a positive integer\n",
                   std::string(part).c_str());
      return 2;
    }
    layers.push_back(v);
  }
  const int batch = absl::GetFlag(FLAGS_batch);
  const int steps = absl::GetFlag(FLAGS_steps);
  if (layers.size() < 2 || batch < 1 || steps < 1) {
    std::fprintf(stderr, "need --layers with >= 2 sizes, --batch >= 1, --steps >= 1\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_blas_threads) > 0) {
    ringleader::SetCpuMathThreads(absl::GetFlag(FLAGS_blas_threads));
  }

  using ringleader::BackwardOptions;
  const ringleader::Dataset data = ringleader::MakeSyntheticDataset(
      static_cast<size_t>(batch), layers.front(), static_cast<int>(layers.back()), 1);
  ringleader::Mlp model(layers, 1);
  ringleader::SgdOptions o;
  o.lr = 0.01;
  o.momentum = 0.9;
  o.weight_decay = 5e-4;
  ringleader::SgdOptimizer opt(model.parameters(), o);
  std::vector<float*> params;
  std::vector<const float*> grads;
  for (size_t i = 0; i < model.parameters().size(); ++i) {
    params.push_back(model.param(i));
    grads.push_back(model.grad(i));
  }
  const std::vector<bool> has_grad(params.size(), true);

  auto train_step = [&] {
    model.ZeroGradients();
    if (!model.ForwardBackward(data.x.data(), data.y.data(), data.size, BackwardOptions{}).ok()) {
      std::fprintf(stderr, "ForwardBackward failed\n");
      std::exit(1);
    }
    opt.Step(params, grads, has_grad);
  };
  volatile double sink = 0;
  auto forward_only = [&] { sink = sink + model.Evaluate(data, data.size).loss; };

  for (int i = 0; i < 20; ++i) {
    train_step();
    forward_only();
  }
  // Interleave rounds so both measurements see the same machine load.
  const int rounds = 5;
  double step_ms = 1e300, forward_ms = 1e300;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < steps / rounds + 1; ++i) train_step();
    step_ms = std::min(step_ms, MillisSince(t0, steps / rounds + 1));
    t0 = Clock::now();
    for (int i = 0; i < steps / rounds + 1; ++i) forward_only();
    forward_ms = std::min(forward_ms, MillisSince(t0, steps / rounds + 1));
  }
  std::string layer_text = absl::GetFlag(FLAGS_layers);
  std::printf("mlp %s, batch %d, %zu parameters, OpenBLAS threads %d\n", layer_text.c_str(),
              batch, model.parameter_count(), ringleader::CpuMathThreads());
  std::printf("training step (fwd+bwd+sgd): %.3f ms  (%.0f steps/s, %.0f examples/s)\n", step_ms,
              1000.0 / step_ms, 1000.0 * batch / step_ms);
  std::printf("forward only (baseline):     %.3f ms\n", forward_ms);
  std::printf("ratio step / forward:        %.2f\n", step_ms / forward_ms);
  return 0;
}
