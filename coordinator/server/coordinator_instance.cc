#include "coordinator/server/coordinator_instance.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/store/sqlite_job_store.h"

namespace ringleader {

absl::StatusOr<std::unique_ptr<CoordinatorInstance>> CoordinatorInstance::Start(
    CoordinatorInstanceOptions options, CoordinatorPart* failed) {
  auto fail = [failed](CoordinatorPart part, absl::Status status) {
    if (failed != nullptr) *failed = part;
    return status;
  };
  std::unique_ptr<CoordinatorInstance> instance(new CoordinatorInstance());
  if (options.store != nullptr) {
    instance->store_ = std::move(options.store);
  } else if (options.state_dir.empty()) {
    instance->store_ = std::make_unique<InMemoryJobStore>();
  } else {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> opened =
        SqliteJobStore::Open(options.state_dir);
    if (!opened.ok()) return fail(CoordinatorPart::kJobStore, opened.status());
    if (options.log) {
      options.log(options.clock->Now(), absl::StrCat("job store: ", (*opened)->path()));
    }
    instance->store_ = std::move(*opened);
  }
  if (options.attempt_tokens) {
    // The secret lives with the state: the same tokens after a restart, for the ranks that
    // come back.
    std::string secret = std::move(options.attempt_secret);
    if (secret.empty()) {
      absl::StatusOr<std::string> loaded = AttemptTokens::LoadOrCreateSecret(
          options.state_dir.empty() ? "" : options.state_dir + "/attempt_secret");
      if (!loaded.ok()) return fail(CoordinatorPart::kAttemptSecret, loaded.status());
      secret = *std::move(loaded);
    }
    instance->attempt_tokens_ = std::make_unique<AttemptTokens>(std::move(secret));
  }
  options.coordinator.attempt_tokens = instance->attempt_tokens_.get();
  instance->coordinator_ = std::make_unique<Coordinator>(
      std::move(options.coordinator), options.clock, instance->store_.get(), options.log);
  {
    absl::StatusOr<std::vector<v1::JobStatus>> saved = instance->store_->LoadAll();
    const absl::Status restored =
        saved.ok() ? instance->coordinator_->Restore(std::move(*saved)) : saved.status();
    if (!restored.ok()) return fail(CoordinatorPart::kRestore, restored);
  }
  instance->handler_ =
      std::make_unique<RpcHandler>(instance->coordinator_.get(), &instance->rpc_stats_);
  if (options.check_every > absl::ZeroDuration()) {
    CoordinatorInstance* raw = instance.get();
    instance->ticker_ = std::thread([raw, every = options.check_every] {
      while (!raw->stop_ticker_.WaitForNotificationWithTimeout(every)) {
        raw->coordinator_->CheckStaleness();
      }
    });
  }
  if (options.retry_saves_every > absl::ZeroDuration()) {
    CoordinatorInstance* raw = instance.get();
    instance->saver_ = std::thread([raw, every = options.retry_saves_every] {
      while (!raw->stop_ticker_.WaitForNotificationWithTimeout(every)) {
        raw->coordinator_->RetryUnsavedSaves();
      }
    });
  }
  return instance;
}

CoordinatorInstance::~CoordinatorInstance() { Shutdown(); }

void CoordinatorInstance::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (!stop_ticker_.HasBeenNotified()) stop_ticker_.Notify();
  if (ticker_.joinable()) ticker_.join();
  if (saver_.joinable()) saver_.join();
  // A failed Start may have no core yet.
  if (coordinator_ != nullptr) coordinator_->Shutdown();
}

}  // namespace ringleader
