// The JobStore contract (job_store.h) as one value-parametrised test suite, JobStoreConformance,
// run on every implementation: each test binary instantiates it with a JobStoreBackend factory
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, JobStoreConformance,
//                            ::testing::Values(JobStoreBackendFactory{"Sqlite", MakeSqlite}),
//                            JobStoreConformanceName);
//
// (the library is alwayslink, so its TEST_Ps are in every binary that depends on it).
#ifndef RINGLEADER_COORDINATOR_STORE_JOB_STORE_CONFORMANCE_H_
#define RINGLEADER_COORDINATOR_STORE_JOB_STORE_CONFORMANCE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/store/job_store.h"
#include "gtest/gtest.h"

namespace ringleader {

// The storage behind one test: each Open is a store over the same data, as a coordinator
// restarted on it sees it. A test destroys the store it opened before opening the next.
class JobStoreBackend {
 public:
  virtual ~JobStoreBackend() = default;
  virtual absl::StatusOr<std::shared_ptr<JobStore>> Open() = 0;
};

struct JobStoreBackendFactory {
  std::string name;
  // A backend with no jobs, private to the test `test_name`.
  std::function<std::unique_ptr<JobStoreBackend>(const std::string& test_name)> make;
};

std::string JobStoreConformanceName(
    const ::testing::TestParamInfo<JobStoreBackendFactory>& info);

class JobStoreConformance : public ::testing::TestWithParam<JobStoreBackendFactory> {
 protected:
  void SetUp() override;
  // A store over this test's backend (ASSERT it is non-null).
  std::shared_ptr<JobStore> Open();

  std::unique_ptr<JobStoreBackend> backend_;
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_STORE_JOB_STORE_CONFORMANCE_H_
