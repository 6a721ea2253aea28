// Snapshots in memory (docs/recovery.md, "Snapshots in memory"), measured (not part of the test
// run):
//
//   bazel run -c opt //bench:snapshot_bench                      # both parts
//   bazel run -c opt //bench:snapshot_bench -- --part=heal       # or --part=stall
//
// (a) The heal: BroadcastBytes (worker/rank/heal.h) of a --heal_mb state from rank 0 to rank 1
//     over gloo on 127.0.0.1 (two ranks as threads, an in-memory rendezvous store), GB/s, min and
//     median of --repeats, with and without the receiver's DecodeCheckpoint (CRC check), against
//     the disk of the same run: ReadCheckpoint of the same state from a file under --disk_dir,
//     from the page cache and after posix_fadvise(DONTNEED) evicted the file's pages (a cold
//     read without root, when the kernel honours it), and the WriteCheckpoint (file and
//     directory fsync'd) that put it there.
// (b) The stall: a 2-rank ddp job through the real RunRank (ranks as threads over gloo, a fake
//     coordinator; worker/rank/attempt_test_util.h), on synthetic data, with snapshots off
//     (disable_snapshots), automatic (snapshot_interval_steps 0) and every step (1), the three
//     taking turns for --rounds rounds. samples/s counts the epochs after the first (the first
//     warms up and takes the automatic schedule's first snapshot): from rank 0's end of epoch 0
//     to its end of the last epoch, evaluation of the epochs between included. Each ratio is
//     against the round's own run without snapshots. Snapshots go to a directory under
//     /dev/shm, removed at the end.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint.h"
#include "common/job_spec.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/rank/attempt_test_util.h"
#include "worker/rank/heal.h"
#include "worker/sync/tensor_memory.h"
#include "worker/trainer/cpu_math.h"

ABSL_FLAG(std::string, part, "all", "heal, stall or all");
ABSL_FLAG(int, heal_mb, 200, "(a) the state's size in MB (10^6 bytes)");
ABSL_FLAG(int, repeats, 5, "(a) repetitions of each transfer");
ABSL_FLAG(std::string, disk_dir, "",
          "(a) where the checkpoint file goes (a disk, not tmpfs); empty = $TMPDIR or /tmp");
ABSL_FLAG(int, rounds, 3, "(b) rounds of off / automatic / every step");
ABSL_FLAG(std::string, models, "demo,50m",
          "(b) demo ([784,256,128,10]) and/or 50m ([784,4096,4096,4096,3072,10])");
ABSL_FLAG(int, demo_steps_per_epoch, 256, "(b) the demo job's steps per epoch");
ABSL_FLAG(int, demo_epochs, 5, "(b) the demo job's epochs (the first is not counted)");
ABSL_FLAG(int, big_steps_per_epoch, 8, "(b) the 50 M model's steps per epoch");
ABSL_FLAG(int, big_epochs, 4, "(b) the 50 M model's epochs (the first is not counted)");

namespace ringleader {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kWorld = 2;
constexpr uint32_t kBatch = 64;  // per rank

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  if (values.empty()) return 0;
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double Min(const std::vector<double>& values) {
  return values.empty() ? 0 : *std::min_element(values.begin(), values.end());
}

// ---------------------------------------------------------------------------------------------
// (a) The heal.

// A state of about `bytes` bytes: parameters and their momentum, as CaptureState makes one.
CheckpointData MakeState(size_t bytes) {
  CheckpointData data;
  data.step = 1234;
  data.epoch = 3;
  data.spec_fingerprint = "snapshot-bench";
  const size_t floats = bytes / sizeof(float);
  const size_t tensors = 8;  // 4 layers' weights, each with its momentum
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (size_t t = 0; t < tensors; ++t) {
    CheckpointTensor tensor;
    tensor.name = t % 2 == 0 ? absl::StrCat("layer", t / 2, ".weight")
                             : MomentumBufferName(absl::StrCat("layer", t / 2, ".weight"));
    const size_t count = floats / tensors;
    tensor.shape = {count};
    tensor.data.resize(count);
    for (float& x : tensor.data) x = uniform(random);
    data.tensors.push_back(std::move(tensor));
  }
  return data;
}

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::string bytes(fs::file_size(path), '\0');
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = read(fd, bytes.data() + done, bytes.size() - done);
    if (got <= 0) {
      close(fd);
      return absl::InternalError(absl::StrCat("read ", path));
    }
    done += static_cast<size_t>(got);
  }
  close(fd);
  return bytes;
}

// Asks the kernel to evict `path`'s pages from the page cache (clean pages only: they are
// synced first). True when the call succeeded; the read time after it, printed beside the
// cached one, tells whether the pages were in fact read from the disk again.
bool DropFromPageCache(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  fdatasync(fd);
  const bool ok = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  close(fd);
  return ok;
}

struct HealTimes {
  double broadcast_s = 0;  // until the receiver holds the bytes
  double decoded_s = 0;    // ... and has decoded and verified them
  double raw_s = 0;        // one gloo Broadcast of a buffer allocated and touched beforehand
};

// Two ranks over gloo on loopback; rank 0 sends `bytes` `repeats` times.
absl::StatusOr<std::vector<HealTimes>> TimeHeals(const std::string& bytes, int repeats) {
  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<HealTimes> times(repeats);
  absl::Status failed;
  absl::Mutex mu;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      GlooOptions gloo;
      gloo.rendezvous_timeout = absl::Seconds(30);
      gloo.collective_timeout = absl::Seconds(120);
      absl::StatusOr<std::unique_ptr<Collective>> comm =
          CreateGlooCollective(store, "bench/heal/", rank, 2, gloo);
      if (!comm.ok()) {
        absl::MutexLock lock(&mu);
        failed.Update(comm.status());
        return;
      }
      const std::string empty;
      for (int i = 0; i < repeats; ++i) {
        std::string payload = rank == 0 ? bytes : empty;  // handed over, as the trainer does
        // Start together: a small broadcast first (its cost is not counted).
        absl::StatusOr<std::string> go =
            BroadcastBytes(comm->get(), HostMemory(), 0, "go", absl::Seconds(120));
        const absl::Time start = absl::Now();
        absl::StatusOr<std::string> got = BroadcastBytes(comm->get(), HostMemory(), 0,
                                                         std::move(payload), absl::Seconds(120));
        const absl::Time received = absl::Now();
        if (!go.ok() || !got.ok() || got->size() != bytes.size()) {
          absl::MutexLock lock(&mu);
          failed.Update(!go.ok()    ? go.status()
                        : !got.ok() ? got.status()
                                    : absl::DataLossError("heal: short transfer"));
          return;
        }
        if (rank == 1) {
          absl::StatusOr<CheckpointData> decoded = DecodeCheckpoint("healed", *got);
          const absl::Time done = absl::Now();
          if (!decoded.ok()) {
            absl::MutexLock lock(&mu);
            failed.Update(decoded.status());
            return;
          }
          times[i].broadcast_s = absl::ToDoubleSeconds(received - start);
          times[i].decoded_s = absl::ToDoubleSeconds(done - start);
        }
      }
      // The transport alone: what BroadcastBytes adds around it is the staging buffer
      // (allocated and zeroed per call), the sender's copy into it and the receiver's copy out.
      std::vector<uint8_t> buffer(bytes.size(), rank == 0 ? 1 : 0);
      CollectiveOptions options;
      options.timeout = absl::Seconds(120);
      for (int i = 0; i < repeats; ++i) {
        absl::StatusOr<std::string> go =
            BroadcastBytes(comm->get(), HostMemory(), 0, "go", absl::Seconds(120));
        const absl::Time start = absl::Now();
        absl::Status sent =
            (*comm)->Broadcast(TensorView{buffer.data(), buffer.size(), DataType::kUInt8}, 0,
                               options)->Wait();
        const absl::Time received = absl::Now();
        if (!go.ok() || !sent.ok()) {
          absl::MutexLock lock(&mu);
          failed.Update(go.ok() ? sent : go.status());
          return;
        }
        if (rank == 1) times[i].raw_s = absl::ToDoubleSeconds(received - start);
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  if (!failed.ok()) return failed;
  return times;
}

int RunHeal() {
  const size_t target = static_cast<size_t>(absl::GetFlag(FLAGS_heal_mb)) * 1000 * 1000;
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  std::string dir = absl::GetFlag(FLAGS_disk_dir);
  if (dir.empty()) dir = getenv("TMPDIR") != nullptr ? getenv("TMPDIR") : "/tmp";
  const fs::path root = fs::path(dir) / absl::StrCat("snapshot-bench-", getpid());
  const std::string path = (root / "state.ckpt").string();

  const CheckpointData state = MakeState(target);
  // The file as the snapshot writer leaves it: what a heal sends is exactly these bytes.
  std::vector<double> write_s, cached_s, cold_s;
  bool evicted = true;
  std::string bytes;
  for (int i = 0; i < repeats; ++i) {
    fs::remove_all(root);
    const absl::Time start = absl::Now();
    absl::Status written = WriteCheckpoint(path, state);
    const absl::Time wrote = absl::Now();
    if (!written.ok()) {
      std::cerr << "write: " << written << std::endl;
      return 1;
    }
    write_s.push_back(absl::ToDoubleSeconds(wrote - start));
    // From the page cache (the file was just written).
    absl::Time t0 = absl::Now();
    absl::StatusOr<CheckpointData> cached = ReadCheckpoint(path);
    cached_s.push_back(absl::ToDoubleSeconds(absl::Now() - t0));
    // After evicting its pages.
    evicted = DropFromPageCache(path) && evicted;
    t0 = absl::Now();
    absl::StatusOr<CheckpointData> cold = ReadCheckpoint(path);
    cold_s.push_back(absl::ToDoubleSeconds(absl::Now() - t0));
    if (!cached.ok() || !cold.ok()) {
      std::cerr << "read: " << (cached.ok() ? cold.status() : cached.status()) << std::endl;
      return 1;
    }
    if (bytes.empty()) {
      absl::StatusOr<std::string> whole = ReadWhole(path);
      if (!whole.ok()) {
        std::cerr << whole.status() << std::endl;
        return 1;
      }
      bytes = *std::move(whole);
    }
  }
  fs::remove_all(root);

  absl::StatusOr<std::vector<HealTimes>> heals = TimeHeals(bytes, repeats);
  if (!heals.ok()) {
    std::cerr << "heal: " << heals.status() << std::endl;
    return 1;
  }
  std::vector<double> broadcast_s, decoded_s, raw_s;
  for (const HealTimes& t : *heals) {
    broadcast_s.push_back(t.broadcast_s);
    decoded_s.push_back(t.decoded_s);
    raw_s.push_back(t.raw_s);
  }

  const double gb = static_cast<double>(bytes.size()) / 1e9;
  auto row = [&](const std::string& what, const std::vector<double>& seconds) {
    // The fastest time is the highest rate: min time -> max GB/s.
    std::cout << absl::StrFormat("| %s | %.3f / %.3f s | %.2f / %.2f GB/s | %.2fx |\n", what,
                                 Min(seconds), Median(seconds), gb / Min(seconds),
                                 gb / Median(seconds), Median(cold_s) / Median(seconds));
  };
  std::cout << absl::StrFormat(
      "\n(a) heal: a %.1f MB state (%zu bytes), %d repetitions, rank 0 -> rank 1 over gloo on "
      "127.0.0.1; file under %s\n\n",
      static_cast<double>(bytes.size()) / 1e6, bytes.size(), repeats, dir);
  std::cout << "| | time: min / median | rate: best / median | vs ReadCheckpoint, cold |\n"
               "|---|---|---|---|\n";
  row("BroadcastBytes (heal.h)", broadcast_s);
  row("BroadcastBytes + DecodeCheckpoint", decoded_s);
  row("gloo Broadcast alone (buffer allocated beforehand)", raw_s);
  row("ReadCheckpoint, page cache", cached_s);
  row(evicted ? "ReadCheckpoint, pages evicted (fadvise DONTNEED)"
              : "ReadCheckpoint after fadvise DONTNEED (refused: cached)",
      cold_s);
  row("WriteCheckpoint (file and directory fsync'd)", write_s);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// (b) The stall.

struct Model {
  std::string name;
  std::vector<uint32_t> layers;
  int steps_per_epoch = 0;
  int epochs = 0;
};

uint64_t Parameters(const std::vector<uint32_t>& layers) {
  uint64_t p = 0;
  for (size_t i = 0; i + 1 < layers.size(); ++i) {
    p += uint64_t{layers[i]} * layers[i + 1] + layers[i + 1];
  }
  return p;
}

struct Mode {
  std::string name;
  bool disabled = false;
  uint32_t interval = 0;
};

struct Run {
  double samples_per_s = 0;
  std::string interval;    // as the rank logged it at the end ("" = not logged)
  std::string snapshots;   // "N written, M replaced" or ""
  std::string last_write;  // the writer's last write, as logged
  std::string error;
};

v1::JobSpec StallSpec(const Model& model, const Mode& mode) {
  v1::JobSpec spec;
  spec.set_name("snapshot-bench");
  spec.set_world_size(kWorld);
  spec.set_backend("gloo");
  for (uint32_t width : model.layers) spec.mutable_model()->add_layers(width);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_data()->set_max_train_examples(uint64_t{kBatch} * kWorld *
                                              static_cast<uint64_t>(model.steps_per_epoch));
  spec.mutable_data()->set_max_test_examples(64);
  spec.set_batch_size(kBatch);
  spec.set_epochs(static_cast<uint32_t>(model.epochs));
  spec.mutable_optimizer()->set_learning_rate(0.02);
  spec.set_drift_interval_steps(50);
  spec.set_collective_timeout_ms(120000);
  spec.set_disable_snapshots(mode.disabled);
  spec.set_snapshot_interval_steps(mode.interval);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

// The first number after `word` in `line`, as text ("" = none).
std::string NumberAfter(const std::string& line, const std::string& word) {
  const size_t at = line.find(word);
  if (at == std::string::npos) return "";
  size_t i = at + word.size();
  size_t j = i;
  while (j < line.size() && isdigit(static_cast<unsigned char>(line[j]))) ++j;
  return line.substr(i, j - i);
}

Run TimeRun(const Model& model, const Mode& mode, const fs::path& shm) {
  const v1::JobSpec spec = StallSpec(model, mode);
  absl::Status valid = ValidateJobSpec(spec);
  Run run;
  if (!valid.ok()) {
    run.error = valid.ToString();
    return run;
  }
  absl::Mutex mu;
  std::optional<absl::Time> first_end;  // rank 0's end of epoch 0
  absl::Time last_end;
  std::vector<std::string> lines;
  fs::remove_all(shm);
  AttemptResult attempt = RunAttempt(spec, 1, [&](uint32_t rank, TrainingLoopOptions* options) {
    options->snapshot_dir = (shm / absl::StrCat("worker-", rank) / "job-1").string();
    options->log = [&, rank](const std::string& line) {
      absl::MutexLock lock(&mu);
      if (rank == 0) lines.push_back(line);
    };
    if (rank == 0) {
      options->before_evaluation = [&](uint32_t epoch, size_t) {
        absl::MutexLock lock(&mu);
        if (epoch == 0) first_end = absl::Now();
        last_end = absl::Now();
      };
    }
  });
  fs::remove_all(shm);
  for (const RankRunResult& result : attempt.results) {
    if (!result.status.ok()) run.error = result.status.ToString();
  }
  if (!run.error.empty() || !first_end.has_value() || last_end <= *first_end) {
    if (run.error.empty()) run.error = "no timed epochs";
    return run;
  }
  const double steps = static_cast<double>(model.steps_per_epoch) * (model.epochs - 1);
  run.samples_per_s =
      steps * kBatch * kWorld / absl::ToDoubleSeconds(last_end - *first_end);
  for (const std::string& line : lines) {
    if (line.find("snapshots in memory written") == std::string::npos) continue;
    run.interval = NumberAfter(line, "every ");
    const std::string written = NumberAfter(line, ": ");
    const std::string replaced = NumberAfter(line, "(");
    run.snapshots = absl::StrCat(written, " written, ", replaced, " replaced");
    const size_t took = line.find("took ");
    if (took != std::string::npos) run.last_write = line.substr(took + 5);
  }
  return run;
}

int RunStall() {
  std::vector<Model> models;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_models), ',')) {
    if (name == "demo") {
      models.push_back({"demo [784,256,128,10]", {784, 256, 128, 10},
                        absl::GetFlag(FLAGS_demo_steps_per_epoch),
                        absl::GetFlag(FLAGS_demo_epochs)});
    } else if (name == "50m") {
      models.push_back({"[784,4096,4096,4096,3072,10]", {784, 4096, 4096, 4096, 3072, 10},
                        absl::GetFlag(FLAGS_big_steps_per_epoch),
                        absl::GetFlag(FLAGS_big_epochs)});
    } else {
      std::cerr << "--models: unknown " << name << std::endl;
      return 2;
    }
  }
  const std::vector<Mode> modes = {
      {"off (disable_snapshots)", true, 0}, {"automatic (interval 0)", false, 0},
      {"every step (interval 1)", false, 1}};
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  const fs::path shm = fs::path("/dev/shm") / absl::StrCat("ringleader-snapshot-bench-", getpid());
  int status = 0;
  for (const Model& model : models) {
    const uint64_t p = Parameters(model.layers);
    std::cout << absl::StrFormat(
                     "\n(b) stall: %s, %.1f M parameters (a snapshot %.0f MB: parameters and "
                     "momentum), 2 ranks over gloo on 127.0.0.1, batch %d per rank, synthetic "
                     "data; %d epochs of %d steps, the first not counted; %d rounds\n\n",
                     model.name, p / 1e6, 2.0 * p * sizeof(float) / 1e6, kBatch, model.epochs,
                     model.steps_per_epoch, rounds)
              << std::flush;
    std::map<std::string, std::vector<double>> rates, ratios;
    std::map<std::string, std::vector<std::string>> intervals;
    std::cout << "| round | snapshots | samples/s | vs off, same round | interval at the end | "
                 "snapshots (rank 0) | last write (rank 0) |\n|---|---|---|---|---|---|---|\n";
    for (int round = 0; round < rounds; ++round) {
      // Each mode in turn; the order rotates per round so no mode always runs first.
      std::vector<std::pair<const Mode*, Run>> done;
      double off = 0;
      for (size_t k = 0; k < modes.size(); ++k) {
        const Mode& mode = modes[(k + round) % modes.size()];
        Run run = TimeRun(model, mode, shm);
        if (!run.error.empty()) {
          std::cout << "| " << round + 1 << " | " << mode.name << " | failed: " << run.error
                    << " | | | | |" << std::endl;
          status = 1;
          continue;
        }
        if (mode.disabled) off = run.samples_per_s;
        done.emplace_back(&mode, std::move(run));
      }
      for (const auto& [mode, run] : done) {
        const double ratio = off > 0 ? run.samples_per_s / off : 0;
        rates[mode->name].push_back(run.samples_per_s);
        if (!mode->disabled && off > 0) ratios[mode->name].push_back(ratio);
        if (!run.interval.empty()) intervals[mode->name].push_back(run.interval);
        std::cout << absl::StrFormat("| %d | %s | %.0f | %s | %s | %s | %s |\n", round + 1,
                                     mode->name,
                                     run.samples_per_s,
                                     mode->disabled ? "1.000x" : absl::StrFormat("%.3fx", ratio),
                                     run.interval.empty() ? "-" : run.interval,
                                     run.snapshots.empty() ? "-" : run.snapshots,
                                     run.last_write.empty() ? "-" : run.last_write)
                  << std::flush;
      }
    }
    std::cout << "\n| snapshots | samples/s, median | vs off: median of the rounds' ratios | "
                 "stall (1 - ratio) | intervals at the end |\n|---|---|---|---|---|\n";
    for (const Mode& mode : modes) {
      const double ratio = mode.disabled ? 1.0 : Median(ratios[mode.name]);
      std::cout << absl::StrFormat("| %s | %.0f | %.3fx | %.1f%% | %s |\n", mode.name,
                                   Median(rates[mode.name]), ratio, 100 * (1 - ratio),
                                   intervals[mode.name].empty()
                                       ? "-"
                                       : absl::StrJoin(intervals[mode.name], ", "));
    }
    std::cout << std::flush;
  }
  fs::remove_all(shm);
  return status;
}

int Main() {
  // One BLAS thread per rank, as the rank binary sets (--blas_threads): two ranks, two cores.
  SetCpuMathThreads(1);
  const std::string part = absl::GetFlag(FLAGS_part);
  int status = 0;
  if (part == "heal" || part == "all") status |= RunHeal();
  if (part == "stall" || part == "all") status |= RunStall();
  if (part != "heal" && part != "stall" && part != "all") {
    std::cerr << "--part must be heal, stall or all" << std::endl;
    return 2;
  }
  return status;
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ringleader::Main();
}
