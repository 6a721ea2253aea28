// Formatting of job and worker fields for the CLI's human-readable output.
#ifndef RINGLEADER_CLIENT_FORMAT_H_
#define RINGLEADER_CLIENT_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/states.h"
#include "proto/ringleader.pb.h"

namespace ringleader {

// "2023-11-14 22:13:20.000 UTC"; "-" for 0.
std::string FormatUnixMillis(int64_t unix_ms);

// "850ms", "4.2s", "3m05s"; "-" for a negative age (unknown).
std::string FormatAgeMillis(int64_t age_ms);

// Up to `digits` significant digits, no exponent for ordinary magnitudes ("0.4321", "12.3").
std::string FormatNumber(double value, int digits = 4);

// "mlp 784-256-128-10, sgd lr 0.05 momentum 0.9, batch 64 x 2 ranks, 3 epochs, gloo"
std::string SummarizeSpec(const v1::JobSpec& spec);

// "cpu:0", "cuda:1 (NVIDIA H100)"
std::string FormatDevice(const v1::Device& device);

// Why a QUEUED job waits (JobStatus.queued_reason), on one line: "world_size 3 > 2 registered
// workers: register more workers or lower world_size". "" for a job in any other state or one
// the coordinator gave no reason for.
std::string WaitingReason(const v1::JobStatus& job);

// "NOT_FOUND: job j-9 not found" -> the message and the code name, for error lines.
std::string FormatStatus(const absl::Status& status);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_FORMAT_H_
