// What the coordinator load benchmarks (in process and over gRPC) share.
#ifndef RINGLEADER_COORDINATOR_BENCH_LOAD_BENCHMARK_UTIL_H_
#define RINGLEADER_COORDINATOR_BENCH_LOAD_BENCHMARK_UTIL_H_

#include <cstdint>
#include <string>

#include "proto/ringleader.pb.h"

namespace ringleader {
namespace bench {

// Rank `rank`'s report of `step`, with what real ranks send (every field the judge reads).
v1::StepReport StepOf(uint64_t step, uint32_t rank);

// CPU seconds used so far by this process (user + system), and by the calling thread.
double CpuSeconds();
double ThreadCpuSeconds();

// "1 234 567": a rate or count, rounded, with thousands apart.
std::string Thousands(double value);

}  // namespace bench
}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_BENCH_LOAD_BENCHMARK_UTIL_H_
