#include "worker/rank/step_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rank_failure.h"
#include "common/status_macros.h"
#include "worker/sync/buffer_sync.h"
#include "worker/sync/drift.h"
#include "worker/trainer/mlp.h"

namespace ringleader {
namespace {

double Milliseconds(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// The most collectives of one step whose times go into its report (proto: CollectiveTimes).
constexpr size_t kMaxTimedCollectives = 256;

}  // namespace

StepRunner::StepRunner(const v1::JobSpec& spec, uint32_t rank, const ParameterPlan& plan,
                       ModelRunner* runner, Collective* comm, SyncStrategy* strategy,
                       Clock* clock, std::function<void(absl::Duration)> sleep,
                       CollectiveTrace* trace)
    : spec_(spec),
      plan_(plan),
      runner_(runner),
      comm_(comm),
      strategy_(strategy),
      clock_(clock),
      collective_timeout_(absl::Milliseconds(spec.collective_timeout_ms())),
      rank_(rank),
      sleep_(sleep ? std::move(sleep) : [](absl::Duration d) { absl::SleepFor(d); }),
      trace_(trace) {}

absl::Status StepRunner::Run(uint64_t step, uint64_t total_steps, uint32_t epoch,
                             const Dataset& train, const std::vector<size_t>& indices, size_t first,
                             v1::StepReport* report) {
  const absl::Time start = clock_->Now();
  const int accumulation = static_cast<int>(spec_.sync().gradient_accumulation_steps());
  const size_t batch = spec_.batch_size();
  const v1::FaultSpec& faults = spec_.model().faults();
  const int32_t rank = static_cast<int32_t>(rank_);
  const bool slow = faults.slow_ms() > 0 && faults.slow_rank() == rank;
  const bool nan_loss = faults.nan_loss_at_step() > 0 && faults.nan_loss_rank() == rank &&
                        step >= faults.nan_loss_at_step();
  uint64_t first_collective = 0;
  if (trace_ != nullptr) {
    trace_->SetStep(step);
    first_collective = trace_->issued();
  }
  RETURN_IF_ERROR(strategy_->BeginStep());
  const uint64_t gathers_before = strategy_->parameter_gathers();

  double loss_sum = 0;
  absl::Duration compute;
  for (int k = 0; k < accumulation; ++k) {
    const bool sync = k == accumulation - 1;
    BackwardOptions backward;
    backward.loss_scale = 1.0f / static_cast<float>(accumulation);
    backward.skip = plan_.skip;
    strategy_->PrepareMicroBatch(k, sync, &backward);
    const size_t begin = std::min(indices.size(), first + k * batch);
    const size_t end = std::min(indices.size(), begin + batch);
    std::vector<size_t> micro(indices.begin() + begin, indices.begin() + end);
    GatherBatch(train, micro, &x_, &y_);
    const absl::Time compute_start = clock_->Now();
    if (slow) sleep_(absl::Milliseconds(faults.slow_ms()) / accumulation);  // a straggler
    ASSIGN_OR_RETURN(double loss,
                     runner_->ForwardBackward(x_.data(), y_.data(), micro.size(), backward));
    compute += clock_->Now() - compute_start;
    if (nan_loss) loss = std::numeric_limits<double>::quiet_NaN();
    if (!std::isfinite(loss)) {
      report->set_step(step);
      report->set_total_steps(total_steps);
      report->set_epoch(epoch);
      report->set_loss(loss);
      return WithFailureKind(absl::FailedPreconditionError(absl::StrCat(
                                 "loss is ", loss,
                                 ": training diverged (lower optimizer.learning_rate)")),
                             v1::RankFailure::JOB_ERROR);
    }
    loss_sum += loss;
    RETURN_IF_ERROR(strategy_->FinishMicroBatch(sync));
  }
  RETURN_IF_ERROR(strategy_->FinishBackward());
  ASSIGN_OR_RETURN(const double local_squared, runner_->TakeLocalSquaredNorm());

  StepSyncStats stats;
  RETURN_IF_ERROR(strategy_->Synchronize(&stats));
  BufferSyncOptions buffers;
  buffers.broadcast_buffers = spec_.sync().broadcast_buffers();
  buffers.ignore_bool_buffers = spec_.sync().ignore_bool_buffers();
  buffers.timeout = collective_timeout_;
  buffers.memory = runner_->memory();
  RETURN_IF_ERROR(BroadcastBuffers(comm_, runner_->buffers(), buffers, strategy_->ledger()));
  ASSIGN_OR_RETURN(const double synced_norm, strategy_->OptimizerStep());
  ASSIGN_OR_RETURN(const absl::Duration gather_time, strategy_->GatherAfterStep());

  report->set_step(step);
  report->set_total_steps(total_steps);
  report->set_epoch(epoch);
  report->set_loss(loss_sum / accumulation);
  report->set_local_grad_norm(std::sqrt(local_squared));
  report->set_synced_grad_norm(synced_norm);
  report->set_step_ms(Milliseconds(clock_->Now() - start));
  report->set_compute_ms(Milliseconds(compute));
  report->set_comm_ms(Milliseconds(stats.comm_time + gather_time));
  report->set_overlapped_comm_ms(Milliseconds(stats.hidden_comm_time));
  report->set_collective_digest(stats.collective_digest);
  // fsdp: the step's parameter gathers (forward and backward) count too.
  const uint64_t gathers = strategy_->parameter_gathers() - gathers_before;
  report->set_collectives(static_cast<uint32_t>(stats.collectives + gathers));
  if (trace_ != nullptr) {
    v1::CollectiveTimes* times = report->mutable_collective_times();
    times->set_first_sequence(first_collective);
    for (absl::Duration d : trace_->DurationsSince(first_collective, kMaxTimedCollectives)) {
      times->add_duration_us(static_cast<uint32_t>(
          std::min<int64_t>(absl::ToInt64Microseconds(d), std::numeric_limits<uint32_t>::max())));
    }
  }
  return absl::OkStatus();
}

absl::Status StepRunner::MeasureDriftInto(v1::StepReport* report) {
  DriftOptions drift_options;
  drift_options.timeout = collective_timeout_;
  drift_options.ledger = strategy_->ledger();
  drift_options.memory = runner_->memory();
  ASSIGN_OR_RETURN(const DriftResult drift, strategy_->MeasureDrift(drift_options));
  report->set_has_drift(true);
  report->set_drift(drift.max_drift);
  report->set_drift_parameter(drift.worst_parameter);
  return absl::OkStatus();
}

}  // namespace ringleader
