// What the coordinator load benchmarks (in process: load_benchmark.cc, and over gRPC:
// grpc_load_benchmark.cc) share: the coordinator's settings for a run, the simulated
// rendezvous (keys, values and the batched reads of KvGlooStore), the step reports, sustained
// runs on a pool of threads, the failure rule and the figures' formatting. Each starts its
// coordinator with coordinator/server (CoordinatorInstance in process, CoordinatorServer over
// gRPC) with LoadOptions.
#ifndef RINGLEADER_COORDINATOR_BENCH_LOAD_BENCHMARK_UTIL_H_
#define RINGLEADER_COORDINATOR_BENCH_LOAD_BENCHMARK_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/value_parts.h"
#include "coordinator/core/options.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace bench {

// Steps a ReportProgress call carries, and simulated workers per host name.
inline constexpr int kStepsPerReport = 20;
inline constexpr int kRanksPerHost = 8;

// The coordinator's settings for a run at `world_size`: waits, leases and the rendezvous
// timeout far beyond a run, and no per-rank report limit (the ranks report as fast as the
// coordinator answers: its throughput is measured, not the limit real ranks stay far below).
CoordinatorOptions LoadOptions(uint32_t world_size);

// --ranks: the world sizes to measure. One that is not a number >= 2 is a usage error: named on
// stderr, exit status 2.
std::vector<uint32_t> WorldSizesOrExit(const std::vector<std::string>& texts);

// Fails the benchmark loudly: a figure measured on a broken path means nothing. May run on any
// thread, so it leaves at once (exit status 1; no static destructors racing other threads).
[[noreturn]] void Fail(const absl::Status& status, const std::string& what);
inline void Check(const absl::Status& status, const std::string& what) {
  if (!status.ok()) Fail(status, what);
}
template <typename T>
T Checked(absl::StatusOr<T> result, const std::string& what) {
  Check(result.status(), what);
  return *std::move(result);
}
inline void Expect(bool ok, const std::string& what) {
  if (!ok) Fail(absl::InternalError("unexpected answer"), what);
}

// The simulated rendezvous, as gloo's connectFullMesh runs it through KvGlooStore: under the
// attempt's prefix "<job>/<generation>/gloo/", key "rank_<r>" holds rank r's host name and key
// "<r>" its blob of world_size - 1 pair addresses of `address_bytes` each, every byte
// BlobByte(r).
std::string KvPrefix(absl::string_view job_id, uint64_t generation);
std::string Hostname(uint32_t rank);  // also worker w's host: kRanksPerHost to a host
char BlobByte(uint32_t rank);
std::string Blob(uint32_t world_size, uint32_t rank, size_t address_bytes);
// Rank r's batched reads: one KvGetMany of the lower ranks' host names, and one of every peer's
// blob cut to r's address (ValueParts: world_size - 1 parts, part r - 1 of lower ranks' blobs,
// part r of higher ones').
std::vector<std::string> HostnameKeys(const std::string& prefix, uint32_t rank);
struct PeerKeys {
  std::vector<std::string> keys;  // peers in rank order
  ValueParts parts;
};
PeerKeys AddressKeys(const std::string& prefix, uint32_t world_size, uint32_t rank);

// Rank `rank`'s report of `step`, with what real ranks send (every field the judge reads).
v1::StepReport StepOf(uint64_t step, uint32_t rank);

// A sustained run: units done per second, and the CPU it took.
struct Rate {
  uint64_t units = 0;
  double per_second = 0;
  double cpu = 0;          // the whole process
  double calling_cpu = 0;  // the threads running the body
};
// Runs body(t) over and over on `threads` threads t, until `run` passed; body returns the
// units it did.
Rate Sustained(int threads, absl::Duration run, const std::function<uint64_t(int)>& body);
// Thread t's share of `count` items (t, t + threads, ...): calls fn(i) for each; returns how
// many.
uint64_t ForShare(int t, int threads, size_t count, const std::function<void(size_t)>& fn);

// CPU seconds used so far by this process (user + system), and by the calling thread.
double CpuSeconds();
double ThreadCpuSeconds();

// "1 234 567": a rate or count, rounded, with thousands apart.
std::string Thousands(double value);
// "X CPU us per call, Y of it in the calling threads".
std::string CpuPerCall(const Rate& rate, double calls);

}  // namespace bench
}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_BENCH_LOAD_BENCHMARK_UTIL_H_
