// What the job spec tests share: a valid spec and the check of a refusal.
#ifndef RINGLEADER_COMMON_JOB_SPEC_TEST_UTIL_H_
#define RINGLEADER_COMMON_JOB_SPEC_TEST_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace job_spec_testing {

// A valid spec: defaults plus the one field without a default.
inline v1::JobSpec ValidSpec() {
  v1::JobSpec spec;
  spec.set_world_size(2);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

// Asserts INVALID_ARGUMENT whose message contains `text`.
inline void ExpectInvalid(const v1::JobSpec& spec, const std::string& text) {
  absl::Status status = ValidateJobSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(text));
}

}  // namespace job_spec_testing
}  // namespace ringleader

#endif  // RINGLEADER_COMMON_JOB_SPEC_TEST_UTIL_H_
