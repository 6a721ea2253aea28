#include "worker/rank/attempt_test_util.h"

#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "worker/collective/gloo/gloo_collective.h"
#include "worker/collective/in_memory_key_value_store.h"

namespace ringleader {

absl::StatusOr<v1::KvSetResponse> KvFakeCoordinator::KvSet(const v1::KvSetRequest& request) {
  absl::MutexLock lock(&kv_mu_);
  kv_[request.key()] = request.value();
  return v1::KvSetResponse();
}

absl::StatusOr<v1::KvGetResponse> KvFakeCoordinator::KvGet(const v1::KvGetRequest& request) {
  absl::MutexLock lock(&kv_mu_);
  auto present = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return kv_.count(request.key()) > 0; };
  if (!kv_mu_.AwaitWithTimeout(absl::Condition(&present),
                               absl::Milliseconds(request.wait_timeout_ms()))) {
    return absl::DeadlineExceededError("not set yet");
  }
  v1::KvGetResponse response;
  response.set_value(kv_[request.key()]);
  return response;
}

AttemptResult RunAttempt(const v1::JobSpec& spec, uint64_t generation,
                         const std::function<void(uint32_t, TrainingLoopOptions*)>& tweak) {
  KvFakeCoordinator fake(JobSpecFingerprint(spec));
  auto store = std::make_shared<InMemoryKeyValueStore>();
  AttemptResult attempt;
  attempt.results.resize(spec.world_size());
  std::vector<std::thread> threads;
  for (uint32_t rank = 0; rank < spec.world_size(); ++rank) {
    threads.emplace_back([&, rank] {
      v1::Assignment assignment;
      assignment.set_job_id("job-1");
      assignment.set_generation(generation);
      assignment.set_rank(rank);
      assignment.set_world_size(spec.world_size());
      *assignment.mutable_spec() = spec;
      assignment.set_spec_fingerprint(JobSpecFingerprint(spec));
      TrainingLoopOptions options;
      options.worker_id = absl::StrCat("w", rank);
      options.log = [](const std::string&) {};
      options.victim_report_delay = absl::ZeroDuration();
      options.crash = [](uint64_t step) {
        return absl::InternalError(absl::StrCat("injected crash before step ", step));
      };
      const std::string prefix = absl::StrCat("job-1/", generation, "/");
      options.make_collective = [store, prefix](const v1::Assignment& a, const ComputePlacement&,
                                                const RendezvousProgress& progress) {
        GlooOptions gloo;
        gloo.on_progress = progress;
        gloo.rendezvous_timeout = absl::Seconds(20);
        gloo.collective_timeout = absl::Milliseconds(a.spec().collective_timeout_ms());
        return CreateGlooCollective(store, prefix, static_cast<int>(a.rank()),
                                    static_cast<int>(a.world_size()), gloo);
      };
      if (tweak) tweak(rank, &options);
      attempt.results[rank] = RunRank(assignment, &fake, options);
    });
  }
  for (std::thread& t : threads) t.join();
  for (uint32_t rank = 0; rank < spec.world_size(); ++rank) {
    attempt.steps.push_back(fake.steps(rank));
  }
  return attempt;
}

}  // namespace ringleader
