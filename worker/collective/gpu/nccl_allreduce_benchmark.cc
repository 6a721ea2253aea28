// The NCCL backend's all-reduce against a raw ncclAllReduce loop, in the same run, on every
// visible GPU (one rank per GPU, ranks as threads):
//
//   raw         ncclCommInitAll communicators (blocking), `iters` ncclAllReduce calls in a row on
//               one stream, then one cudaStreamSynchronize — NCCL's own best case;
//   ringleader  CreateNcclCollective (non-blocking communicator, rendezvous through an in-memory
//               store), `iters` AllReduce calls in a row, then Wait on each Work — what the
//               reducer does (compute-stream ordering event, completion event, polling).
//
// Prints, per size, the time per all-reduce, the bus bandwidth (bytes / time x 2(n-1)/n) and
// ringleader / raw; on one GPU, which moves no data, each call's cost instead. Needs a GPU;
// without one it says why and exits 1, as it does when a rank fails to close (the ranks close
// together).
//
//   nccl_allreduce_benchmark --sizes_mib=1,16,64,256 --iters=20
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/gpu/cuda_status.h"
#include "common/gpu/gpu_devices.h"
#include "common/status_macros.h"
#include "worker/collective/gpu/nccl_collective.h"
#include "worker/collective/in_memory_key_value_store.h"
#include "worker/collective/rank_threads.h"

ABSL_FLAG(std::string, sizes_mib, "1,16,64,256", "Buffer sizes per rank in MiB (float32).");
ABSL_FLAG(int, iters, 20, "Timed all-reduces per size and variant (after 5 warm-up ones).");

namespace ringleader {
namespace gpu {
namespace {

constexpr int kWarmUp = 5;

double BusBandwidthGBs(size_t bytes, absl::Duration per_op, int n) {
  const double factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  return bytes * factor / absl::ToDoubleSeconds(per_op) / 1e9;
}

// Raw NCCL: every rank issues `count` ops back to back; the time is rank 0's, start to sync.
absl::StatusOr<absl::Duration> TimeRaw(const std::vector<ncclComm_t>& comms,
                                       const std::vector<float*>& bufs, size_t elements,
                                       int iters) {
  const int n = static_cast<int>(comms.size());
  std::vector<absl::Status> status(n);
  std::vector<absl::Duration> took(n);
  RunRanks(
      n,
      [&](int r) {
        cudaSetDevice(r);
        cudaStream_t stream;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        auto run = [&](int count) -> absl::Status {
          for (int i = 0; i < count; ++i) {
            RL_NCCL_RETURN_IF_ERROR(
                ncclAllReduce(bufs[r], bufs[r], elements, ncclFloat32, ncclSum, comms[r], stream));
          }
          RL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
          return absl::OkStatus();
        };
        status[r] = run(kWarmUp);
        const absl::Time start = absl::Now();
        if (status[r].ok()) status[r] = run(iters);
        took[r] = absl::Now() - start;
        cudaStreamDestroy(stream);
      },
      absl::Minutes(5));
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return took[0] / iters;
}

absl::StatusOr<absl::Duration> TimeRingleader(const std::vector<std::unique_ptr<Collective>>& ranks,
                                              const std::vector<float*>& bufs, size_t elements,
                                              int iters) {
  const int n = static_cast<int>(ranks.size());
  std::vector<absl::Status> status(n);
  std::vector<absl::Duration> took(n);
  RunRanks(
      n,
      [&](int r) {
        cudaSetDevice(r);
        auto run = [&](int count) -> absl::Status {
          std::vector<std::shared_ptr<Work>> works;
          for (int i = 0; i < count; ++i) {
            works.push_back(
                ranks[r]->AllReduce({bufs[r], elements, DataType::kFloat32}, ReduceOp::kSum));
          }
          for (auto& w : works) RETURN_IF_ERROR(w->Wait());
          return absl::OkStatus();
        };
        status[r] = run(kWarmUp);
        const absl::Time start = absl::Now();
        if (status[r].ok()) status[r] = run(iters);
        took[r] = absl::Now() - start;
      },
      absl::Minutes(5));
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return took[0] / iters;
}

int Main() {
  auto gpus = DetectGpus();
  if (!gpus.ok()) {
    std::fprintf(stderr, "nccl_allreduce_benchmark: %s\n", gpus.status().ToString().c_str());
    return 1;
  }
  const int n = static_cast<int>(gpus->size());
  std::vector<size_t> sizes_mib;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_sizes_mib), ',')) {
    size_t mib = 0;
    if (!absl::SimpleAtoi(part, &mib) || mib == 0) {
      std::fprintf(stderr, "--sizes_mib: '%s' is not a positive integer\n",
                   std::string(part).c_str());
      return 2;
    }
    sizes_mib.push_back(mib);
  }
  const int iters = absl::GetFlag(FLAGS_iters);
  const size_t max_elements =
      sizes_mib.empty() ? 0 : (*std::max_element(sizes_mib.begin(), sizes_mib.end())) << 18;

  std::vector<float*> bufs(n, nullptr);
  for (int r = 0; r < n; ++r) {
    cudaSetDevice(r);
    if (cudaMalloc(&bufs[r], max_elements * sizeof(float)) != cudaSuccess ||
        cudaMemset(bufs[r], 0, max_elements * sizeof(float)) != cudaSuccess) {
      std::fprintf(stderr, "cannot allocate %zu MiB on GPU %d\n", max_elements >> 18, r);
      return 1;
    }
  }
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devices(n);
  for (int r = 0; r < n; ++r) devices[r] = r;
  if (ncclResult_t e = ncclCommInitAll(comms.data(), n, devices.data()); e != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitAll: %s\n", ncclGetErrorString(e));
    return 1;
  }
  auto store = std::make_shared<InMemoryKeyValueStore>();
  std::vector<std::unique_ptr<Collective>> ranks(n);
  std::vector<absl::Status> created(n);
  RunRanks(
      n,
      [&](int r) {
        cudaSetDevice(r);
        auto c = CreateNcclCollective(store, "bench/1/", r, n, r);
        created[r] = c.status();
        if (c.ok()) ranks[r] = std::move(*c);
      },
      absl::Minutes(2));
  for (int r = 0; r < n; ++r) {
    if (!created[r].ok()) {
      std::fprintf(stderr, "rank %d: %s\n", r, created[r].ToString().c_str());
      return 1;
    }
  }

  int version = 0;
  ncclGetVersion(&version);
  std::printf("NCCL %d, %d GPU(s): %s; %d all-reduces per figure (fp32 sum)\n", version, n,
              (*gpus)[0].name().c_str(), iters);
  // One GPU moves no data between GPUs (an in-place one-rank all-reduce is a no-op for NCCL):
  // no bandwidth to report, only what each call costs.
  const bool one_gpu = n == 1;
  if (one_gpu) {
    std::printf("one GPU: an all-reduce moves no data, so no bandwidth figure; each call's cost\n");
    std::printf("%8s %14s %14s %14s\n", "MiB", "raw us/call", "rl us/call", "rl extra us");
  } else {
    std::printf("%8s %14s %14s %14s %14s %10s\n", "MiB", "raw ms", "raw GB/s", "ringleader ms",
                "ringleader GB/s", "rl/raw");
  }
  for (size_t mib : sizes_mib) {
    const size_t elements = mib << 18;
    auto raw = TimeRaw(comms, bufs, elements, iters);
    auto ours = TimeRingleader(ranks, bufs, elements, iters);
    if (!raw.ok() || !ours.ok()) {
      std::fprintf(stderr, "%zu MiB: %s\n", mib,
                   (!raw.ok() ? raw.status() : ours.status()).ToString().c_str());
      return 1;
    }
    const size_t bytes = elements * sizeof(float);
    if (one_gpu) {
      const double raw_us = absl::ToDoubleMicroseconds(*raw);
      const double ours_us = absl::ToDoubleMicroseconds(*ours);
      std::printf("%8zu %14.2f %14.2f %14.2f\n", mib, raw_us, ours_us, ours_us - raw_us);
      continue;
    }
    std::printf("%8zu %14.3f %14.2f %14.3f %14.2f %10.3f\n", mib, absl::ToDoubleMilliseconds(*raw),
                BusBandwidthGBs(bytes, *raw, n), absl::ToDoubleMilliseconds(*ours),
                BusBandwidthGBs(bytes, *ours, n),
                BusBandwidthGBs(bytes, *ours, n) / BusBandwidthGBs(bytes, *raw, n));
  }
  // Close starts with a barrier every rank must reach: the ranks close together (one after
  // another, each close would wait its whole timeout for the ranks not closing yet).
  std::vector<absl::Status> closed(ranks.size());
  RunRanks(static_cast<int>(ranks.size()),
           [&](int r) { closed[r] = ranks[r]->Close(absl::Seconds(30)); }, absl::Seconds(60));
  bool close_failed = false;
  for (size_t r = 0; r < closed.size(); ++r) {
    if (closed[r].ok()) continue;
    std::fprintf(stderr, "rank %zu: close: %s\n", r, closed[r].ToString().c_str());
    close_failed = true;
  }
  for (ncclComm_t comm : comms) ncclCommDestroy(comm);
  for (int r = 0; r < n; ++r) {
    cudaSetDevice(r);
    cudaFree(bufs[r]);
  }
  return close_failed ? 1 : 0;
}

}  // namespace
}  // namespace gpu
}  // namespace ringleader

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "NCCL backend all-reduce vs a raw ncclAllReduce loop on every visible GPU.");
  absl::ParseCommandLine(argc, argv);
  return ringleader::gpu::Main();
}
