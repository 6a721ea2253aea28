// Gradient-sync benchmark: a synthetic transformer-like model (~1000 tensors, ~100 MiB of fp32
// gradients) synchronised by gloo ranks running as threads of this process over 127.0.0.1.
//
// For each world size it prints time and bus bandwidth (bytes / time x 2(n-1)/n, as nccl-tests)
// of
//   (a) one flat all-reduce of all gradient bytes (the baseline),
//   (b) one all-reduce per parameter,
//   (c) the bucketed Reducer (buckets in place, no backward),
//   (d) the bucketed Reducer overlapped with a simulated backward of known cost: the backward
//       thread sleeps until each transformer block's deadline (time proportional to the
//       block's parameters), then marks the block's parameters ready, last block first,
// and the ratios the targets are stated in: (c) >= 0.95 x (a) busbw, (b) >= 5 x slower than (c),
// (d) step <= 1.15 x max(backward, communication). The backward cost is given as multiples of
// the measured communication time of (c); 1 x is the hardest case for overlap.
//
// Every timed repetition starts after a barrier; a repetition's time is the slowest rank's; the
// figure is the median over repetitions.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/sync/collective_ledger.h"
#include "worker/sync/reducer.h"

ABSL_FLAG(std::string, world_sizes, "2,4", "comma-separated world sizes to run");
ABSL_FLAG(double, total_mb, 100, "gradient MiB of the synthetic model");
ABSL_FLAG(int, tensors, 1000, "parameter tensors of the synthetic model (12 per block + 4)");
ABSL_FLAG(int, reps, 3, "timed repetitions per measurement (median reported)");
ABSL_FLAG(bool, quick, false, "quick run: 16 MiB model, 4 MiB buckets, 2 repetitions");
ABSL_FLAG(int, comm_threads, 2, "gloo communication threads per rank");
ABSL_FLAG(double, bucket_cap_mb, 0,
          "reducer bucket cap, MiB (0 = DDP's 25, or a quarter of the model with --quick)");
ABSL_FLAG(double, first_bucket_mb, 1, "reducer first bucket, MiB");
ABSL_FLAG(std::string, backward_ratios, "0.5,1,2",
          "simulated backward cost for (d), as multiples of the communication time of (c)");
ABSL_FLAG(bool, per_parameter, true, "run (b), the slowest measurement");

namespace ringleader {
namespace {

struct Model {
  std::vector<ParameterInfo> params;
  std::vector<std::vector<size_t>> blocks;  // parameter indices per backward unit
  size_t total = 0;                         // floats
};

// Blocks of {ln1.w, ln1.b, qkv.w, qkv.b, proj.w, proj.b, ln2.w, ln2.b, fc1.w, fc1.b, fc2.w,
// fc2.b} (12 d^2 + 13 d floats), then lnf.{weight,bias} and head.{weight,bias}; d is chosen to
// hit the requested size.
Model TransformerLike(double total_mb, int tensors) {
  const int blocks = std::max(1, (tensors - 4) / 12);
  const double floats = total_mb * 1024 * 1024 / 4;
  const size_t d = std::max<size_t>(
      4, static_cast<size_t>(std::sqrt(floats / (12.0 * blocks + 1))));
  Model m;
  auto add = [&](const std::string& name, std::vector<size_t> shape) {
    ParameterInfo p;
    p.name = name;
    p.shape = shape;
    p.count = 1;
    for (size_t s : shape) p.count *= s;
    m.total += p.count;
    m.params.push_back(p);
    m.blocks.back().push_back(m.params.size() - 1);
  };
  for (int b = 0; b < blocks; ++b) {
    m.blocks.emplace_back();
    const std::string pre = absl::StrCat("blocks.", b, ".");
    add(pre + "ln1.weight", {d});
    add(pre + "ln1.bias", {d});
    add(pre + "attn.qkv.weight", {3 * d, d});
    add(pre + "attn.qkv.bias", {3 * d});
    add(pre + "attn.proj.weight", {d, d});
    add(pre + "attn.proj.bias", {d});
    add(pre + "ln2.weight", {d});
    add(pre + "ln2.bias", {d});
    add(pre + "mlp.fc1.weight", {4 * d, d});
    add(pre + "mlp.fc1.bias", {4 * d});
    add(pre + "mlp.fc2.weight", {d, 4 * d});
    add(pre + "mlp.fc2.bias", {d});
  }
  m.blocks.emplace_back();
  add("lnf.weight", {d});
  add("lnf.bias", {d});
  add("head.weight", {d, d});
  add("head.bias", {d});
  return m;
}

void Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

absl::Duration Median(std::vector<absl::Duration> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void ForEachRank(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (auto& t : threads) t.join();
}

class Bench {
 public:
  Bench(int world, const Model& model, int reps) : world_(world), model_(model), reps_(reps) {
    auto store = std::make_shared<InMemoryKeyValueStore>();
    comms_.resize(world);
    GlooOptions o;
    o.comm_threads = absl::GetFlag(FLAGS_comm_threads);
    o.collective_timeout = absl::Seconds(300);
    ForEachRank(world, [&](int r) {
      auto c = CreateGlooCollective(store, absl::StrCat("bench/", world, "/"), r, world, o);
      if (!c.ok()) Die("rendezvous", c.status());
      comms_[r] = std::move(*c);
    });
    flat_.assign(world, std::vector<float>(model.total, 1.0f));
  }

  Collective* comm(int r) { return comms_[r].get(); }
  std::vector<float>& flat(int r) { return flat_[r]; }

  // The slowest rank's time for one run of body(rank, rep), started after a barrier.
  absl::Duration TimeOnce(const std::function<void(int, int)>& body, int rep = 0) {
    std::vector<absl::Duration> t(world_);
    ForEachRank(world_, [&](int r) {
      absl::Status s = comms_[r]->Barrier()->Wait();
      if (!s.ok()) Die("barrier", s);
      const absl::Time start = absl::Now();
      body(r, rep);
      t[r] = absl::Now() - start;
    });
    return *std::max_element(t.begin(), t.end());
  }

  // Median over reps of TimeOnce.
  absl::Duration Time(const std::function<void(int, int)>& body) {
    std::vector<absl::Duration> per_rep;
    for (int rep = 0; rep < reps_; ++rep) per_rep.push_back(TimeOnce(body, rep));
    return Median(per_rep);
  }

 private:
  int world_;
  const Model& model_;
  int reps_;
  std::vector<std::unique_ptr<Collective>> comms_;
  std::vector<std::vector<float>> flat_;
};

double BusBw(size_t bytes, absl::Duration t, int n) {
  return bytes / absl::ToDoubleSeconds(t) * 2.0 * (n - 1) / n / 1e9;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

void Wait(const std::shared_ptr<Work>& w, const char* what) {
  absl::Status s = w->Wait();
  if (!s.ok()) Die(what, s);
}

// Simulated backward: block b (last first) is "computed" until its deadline, start + its
// cumulative share of `total` (shares proportional to parameters, like FLOPs), then its
// parameters are marked ready (reverse registration order). Deadlines, not per-block sleeps, so
// late wake-ups on a busy machine do not add up: the backward's cost stays known.
void SimulatedBackward(const Model& m, absl::Duration total, Reducer* reducer) {
  const absl::Time start = absl::Now();
  size_t done = 0;
  for (size_t b = m.blocks.size(); b-- > 0;) {
    for (size_t p : m.blocks[b]) done += m.params[p].count;
    const absl::Time deadline = start + total * (static_cast<double>(done) / m.total);
    absl::SleepFor(deadline - absl::Now());
    if (reducer == nullptr) continue;
    for (size_t k = m.blocks[b].size(); k-- > 0;) reducer->MarkReady(m.blocks[b][k]);
  }
}

// The step / max(backward, comm) an ideal overlap would reach with this layout: bucket k is
// ready when its last block's deadline passes, buckets launch in order, and communication runs
// one bucket at a time at the rate of (c). What is left above 1 is the last bucket's transfer,
// which cannot start before backward ends (or, when comm dominates, the wait for the first
// buckets).
double IdealOverlapRatio(const Model& m, const BucketLayout& layout, double ratio) {
  const double backward = ratio, comm = 1.0;  // in units of the comm time
  std::vector<double> ready(m.params.size());
  size_t done = 0;
  for (size_t b = m.blocks.size(); b-- > 0;) {
    for (size_t p : m.blocks[b]) done += m.params[p].count;
    for (size_t p : m.blocks[b]) ready[p] = backward * done / m.total;
  }
  double launch = 0, end = 0;
  for (const Bucket& bucket : layout.buckets) {
    for (size_t p : bucket.params) launch = std::max(launch, ready[p]);
    end = std::max(end, launch) + comm * bucket.count / m.total;
  }
  return std::max(backward, end) / std::max(backward, comm);
}

void RunWorld(int n, const Model& m, int reps, double bucket_cap_mb) {
  const size_t bytes = m.total * 4;
  Bench bench(n, m, reps);
  ReducerOptions ro;
  ro.bucket_cap_mb = bucket_cap_mb;
  ro.first_bucket_mb = absl::GetFlag(FLAGS_first_bucket_mb);
  ro.timeout = absl::Seconds(300);
  std::vector<std::unique_ptr<Reducer>> reducers(n), unchecked(n), bf16(n);
  for (int r = 0; r < n; ++r) {
    auto red = Reducer::Create(bench.comm(r), m.params, ro);
    if (!red.ok()) Die("reducer", red.status());
    reducers[r] = std::move(*red);
    ReducerOptions no_check = ro;
    no_check.ledger_check_interval_steps = 0;
    red = Reducer::Create(bench.comm(r), m.params, no_check);
    if (!red.ok()) Die("reducer", red.status());
    unchecked[r] = std::move(*red);
    ReducerOptions half = ro;
    half.comm_dtype = DataType::kBFloat16;
    red = Reducer::Create(bench.comm(r), m.params, half);
    if (!red.ok()) Die("reducer", red.status());
    bf16[r] = std::move(*red);
  }
  std::printf("\n== world %d: %zu tensors, %.1f MiB fp32 gradients, %zu buckets (first %.2g MiB, "
              "cap %.3g MiB), %d comm threads, median of %d ==\n",
              n, m.params.size(), bytes / 1048576.0, reducers[0]->layout().buckets.size(),
              ro.first_bucket_mb, ro.bucket_cap_mb, absl::GetFlag(FLAGS_comm_threads), reps);

  // Warm-up: first touches of the buffers and sockets.
  bench.Time([&](int r, int) {
    Wait(bench.comm(r)->AllReduce(TensorView{bench.flat(r).data(), m.total, DataType::kFloat32},
                                  ReduceOp::kAvg),
         "warm-up");
  });

  const absl::Duration flat = bench.Time([&](int r, int) {
    Wait(bench.comm(r)->AllReduce(TensorView{bench.flat(r).data(), m.total, DataType::kFloat32},
                                  ReduceOp::kAvg),
         "flat all-reduce");
  });
  auto reducer_step = [&](std::vector<std::unique_ptr<Reducer>>& reds) {
    return [&](int r, int) {
      Reducer* red = reds[r].get();
      red->BeginMicroBatch(0);
      for (size_t p = m.params.size(); p-- > 0;) red->MarkReady(p);
      absl::Status s = red->FinishStep(nullptr);
      if (!s.ok()) Die("reducer step", s);
    };
  };
  const absl::Duration bucketed = bench.Time(reducer_step(reducers));
  const absl::Duration bucketed_unchecked = bench.Time(reducer_step(unchecked));
  const absl::Duration bucketed_bf16 = bench.Time(reducer_step(bf16));

  // The ledger check alone (it normally overlaps the forward pass).
  std::vector<absl::Duration> check_times;
  for (int i = 0; i < 20; ++i) {
    check_times.push_back(bench.Time([&](int r, int) {
      absl::Status s =
          LedgerCheck::Start(bench.comm(r), i, {}, absl::Seconds(60))->Finish();
      if (!s.ok()) Die("ledger check", s);
    }));
  }
  std::sort(check_times.begin(), check_times.end());

  std::printf("(a) flat all-reduce             %9.1f ms   busbw %6.3f GB/s\n", Ms(flat),
              BusBw(bytes, flat, n));
  if (absl::GetFlag(FLAGS_per_parameter)) {
    const absl::Duration per_param = bench.Time([&](int r, int) {
      std::vector<std::shared_ptr<Work>> works;
      size_t off = 0;
      for (const ParameterInfo& p : m.params) {
        works.push_back(bench.comm(r)->AllReduce(
            TensorView{bench.flat(r).data() + off, p.count, DataType::kFloat32}, ReduceOp::kAvg));
        off += p.count;
      }
      for (auto& w : works) Wait(w, "per-parameter all-reduce");
    });
    std::printf("(b) one all-reduce per param    %9.1f ms   busbw %6.3f GB/s   %.1fx slower than "
                "(c) [target >= 5x]\n",
                Ms(per_param), BusBw(bytes, per_param, n), absl::FDivDuration(per_param, bucketed));
  }
  std::printf("(c) bucketed reducer            %9.1f ms   busbw %6.3f GB/s   %.3f x (a) busbw "
              "[target >= 0.95]\n",
              Ms(bucketed), BusBw(bytes, bucketed, n), absl::FDivDuration(flat, bucketed));
  std::printf("    without the ledger check    %9.1f ms   busbw %6.3f GB/s\n",
              Ms(bucketed_unchecked), BusBw(bytes, bucketed_unchecked, n));
  std::printf("    ledger check alone          %9.3f ms   (median of 20; %.2f%% of (c))\n",
              Ms(check_times[check_times.size() / 2]),
              100.0 * absl::FDivDuration(check_times[check_times.size() / 2], bucketed));
  std::printf("    bf16 on the wire            %9.1f ms   (%.2fx faster than fp32 (c))\n",
              Ms(bucketed_bf16), absl::FDivDuration(bucketed, bucketed_bf16));

  std::vector<double> ratios;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_backward_ratios), ',')) {
    double v;
    if (absl::SimpleAtod(s, &v) && v > 0) ratios.push_back(v);
  }
  for (double ratio : ratios) {
    // Interleaved per repetition (comm alone, backward alone, overlapped step), so a change in
    // machine load hits all three alike.
    std::vector<absl::Duration> comm_t, backward_t, step_t;
    std::vector<StepSyncStats> stats(n);
    for (int rep = 0; rep < reps; ++rep) {
      comm_t.push_back(bench.TimeOnce(reducer_step(reducers)));
      const absl::Duration target = comm_t.back() * ratio;
      backward_t.push_back(
          bench.TimeOnce([&](int, int) { SimulatedBackward(m, target, nullptr); }));
      step_t.push_back(bench.TimeOnce([&](int r, int) {
        Reducer* red = reducers[r].get();
        red->BeginMicroBatch(0);
        SimulatedBackward(m, target, red);
        absl::Status s = red->FinishStep(&stats[r]);
        if (!s.ok()) Die("overlapped step", s);
      }));
    }
    const absl::Duration comm = Median(comm_t), backward = Median(backward_t),
                         step = Median(step_t);
    const absl::Duration bound = std::max(backward, comm);
    std::printf("(d) overlap, backward %.1fx comm: backward %7.1f ms, comm %7.1f ms, step %7.1f "
                "ms = %.3f x max [target <= 1.15; ideal for this layout %.3f]\n"
                "      last rep rank 0: hidden %.1f ms of %.1f ms busy, waited %.1f ms after "
                "backward\n",
                ratio, Ms(backward), Ms(comm), Ms(step), absl::FDivDuration(step, bound),
                IdealOverlapRatio(m, reducers[0]->layout(), ratio),
                Ms(stats[0].hidden_comm_time), Ms(stats[0].comm_time),
                Ms(stats[0].exposed_wait_time));
  }
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Benchmarks gradient synchronisation (flat / per-parameter / bucketed / overlapped) over "
      "gloo ranks as threads on 127.0.0.1.");
  absl::ParseCommandLine(argc, argv);
  double total_mb = absl::GetFlag(FLAGS_total_mb);
  int reps = absl::GetFlag(FLAGS_reps);
  double bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  if (absl::GetFlag(FLAGS_quick)) {
    total_mb = 16;
    reps = 2;
  }
  if (bucket_cap_mb <= 0) bucket_cap_mb = absl::GetFlag(FLAGS_quick) ? total_mb / 4 : 25;
  if (total_mb <= 0 || reps < 1 || absl::GetFlag(FLAGS_tensors) < 16) {
    std::fprintf(stderr, "--total_mb must be > 0, --reps >= 1 and --tensors >= 16\n");
    return 2;
  }
  const ringleader::Model model =
      ringleader::TransformerLike(total_mb, absl::GetFlag(FLAGS_tensors));
  std::printf("hardware threads: %u\n", std::thread::hardware_concurrency());
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_world_sizes), ',')) {
    int n;
    if (!absl::SimpleAtoi(s, &n) || n < 2) {
      std::fprintf(stderr, "--world_sizes: '%s' is not a world size >= 2\n", std::string(s).c_str());
      return 2;
    }
    ringleader::RunWorld(n, model, reps, bucket_cap_mb);
  }
  return 0;
}
