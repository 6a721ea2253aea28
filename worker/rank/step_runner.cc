#include "worker/rank/step_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/sync/buffer_sync.h"
#include "worker/sync/drift.h"
#include "worker/sync/shard_sync.h"
#include "worker/trainer/mlp.h"

namespace ringleader {
namespace {

double Milliseconds(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

}  // namespace

StepRunner::StepRunner(const v1::JobSpec& spec, uint32_t rank, const ParameterPlan& plan,
                       ModelRunner* runner, Collective* comm, Reducer* reducer, Clock* clock,
                       const ShardPlan* shards, Zero2Reducer* zero2, FsdpParameters* fsdp,
                       std::function<void(absl::Duration)> sleep)
    : spec_(spec),
      plan_(plan),
      shards_(shards),
      runner_(runner),
      comm_(comm),
      reducer_(reducer),
      zero2_(zero2),
      fsdp_(fsdp),
      clock_(clock),
      collective_timeout_(absl::Milliseconds(spec.collective_timeout_ms())),
      rank_(rank),
      sleep_(sleep ? std::move(sleep) : [](absl::Duration d) { absl::SleepFor(d); }) {
  for (size_t i = 0; i < plan_.has_grad.size(); ++i) own_grads_.push_back(runner_->grad(i));
  if (zero2_ != nullptr) {
    // Every trainable gradient comes from the reducer's pool each step (slot_for): the model's
    // own full-size storage would only hold memory zero2 exists to save. (No rank bypasses
    // the reducer under zero2, so own_grads_ is never bound.)
    std::vector<bool> trainable(plan_.reducer_index.size());
    for (size_t i = 0; i < trainable.size(); ++i) trainable[i] = plan_.reducer_index[i] >= 0;
    runner_->ReleaseOwnGradients(trainable);
  }
}

CollectiveLedger* StepRunner::Ledger() {
  if (zero2_ != nullptr) return zero2_->ledger();
  return plan_.bypass_all ? nullptr : reducer_->ledger();
}

void StepRunner::BindGradients() {
  if (plan_.bypass || zero2_ != nullptr) return;  // zero2: slots come per step (slot_for)
  const std::vector<float*> slots = reducer_->gradient_slots();
  std::vector<float*> bound(plan_.reducer_index.size());
  for (size_t i = 0; i < bound.size(); ++i) {
    bound[i] = plan_.reducer_index[i] >= 0 ? slots[plan_.reducer_index[i]] : own_grads_[i];
  }
  runner_->BindGradients(bound);
}

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
  // With every rank bypassing, no rank runs the reducer: no collective for the gradients.
  const bool zero2 = zero2_ != nullptr;
  const bool use_reducer = !plan_.bypass_all && !zero2;
  if (use_reducer) reducer_->ZeroGradients();
  if (zero2) zero2_->BeginStep();
  // fsdp's frozen parameters: ready (as zeros) from the start of every micro-batch.
  const auto mark_always_ready = [&] {
    for (size_t i = 0; i < plan_.always_ready.size(); ++i) {
      if (plan_.always_ready[i]) zero2_->MarkReady(static_cast<size_t>(plan_.reducer_index[i]));
    }
  };
  if (zero2) mark_always_ready();
  if (plan_.bypass) RETURN_IF_ERROR(runner_->ZeroGradients());
  const uint64_t gathers_before = fsdp_ != nullptr ? fsdp_->gathers() : 0;

  double loss_sum = 0;
  absl::Duration compute;
  for (int k = 0; k < accumulation; ++k) {
    const bool sync = k == accumulation - 1;
    if (use_reducer) reducer_->BeginMicroBatch(k);
    const size_t begin = std::min(indices.size(), first + k * batch);
    const size_t end = std::min(indices.size(), begin + batch);
    std::vector<size_t> micro(indices.begin() + begin, indices.begin() + end);
    GatherBatch(train, micro, &x_, &y_);
    BackwardOptions backward;
    backward.loss_scale = 1.0f / static_cast<float>(accumulation);
    backward.skip = plan_.skip;
    if (zero2) {
      // Every micro-batch reduce-scatters (and notes its local gradients: under zero2 the local
      // norm is over the micro-batches' gradients, which no rank ever sums locally).
      backward.slot_for = [&](size_t i) {
        return zero2_->SlotFor(static_cast<size_t>(plan_.reducer_index[i]));
      };
      backward.on_ready = [&](size_t i) {
        // Before MarkReady: it may launch the bucket's reduce-scatter.
        runner_->NoteLocalGradient(i);
        zero2_->MarkReady(static_cast<size_t>(plan_.reducer_index[i]));
      };
    } else if (!plan_.bypass) {
      backward.on_ready = [&, sync](size_t i) {
        // Before MarkReady: it may launch the bucket, which averages this gradient in place.
        if (sync) runner_->NoteLocalGradient(i);
        reducer_->MarkReady(static_cast<size_t>(plan_.reducer_index[i]));
      };
    }
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
      return absl::FailedPreconditionError(
          absl::StrCat("loss is ", loss, ": training diverged (lower optimizer.learning_rate)"));
    }
    loss_sum += loss;
    if (zero2 && !sync) {
      RETURN_IF_ERROR(zero2_->FinishMicroBatch());
      mark_always_ready();
    }
  }
  if (plan_.bypass && use_reducer) RETURN_IF_ERROR(HandOverLocalGradients());
  if (plan_.bypass_all) {
    for (size_t i = 0; i < plan_.has_grad.size(); ++i) {
      if (plan_.has_grad[i] && !plan_.skip[i]) runner_->NoteLocalGradient(i);
    }
  }
  ASSIGN_OR_RETURN(const double local_squared, runner_->TakeLocalSquaredNorm());

  StepSyncStats stats;
  double zero2_norm = 0;
  if (use_reducer) {
    RETURN_IF_ERROR(reducer_->FinishStep(&stats));
    if (reducer_->layout_changed()) BindGradients();
  }
  if (zero2) RETURN_IF_ERROR(zero2_->FinishStep(&stats, &zero2_norm));
  CollectiveLedger* ledger = Ledger();
  BufferSyncOptions buffers;
  buffers.broadcast_buffers = spec_.sync().broadcast_buffers();
  buffers.ignore_bool_buffers = spec_.sync().ignore_bool_buffers();
  buffers.timeout = collective_timeout_;
  buffers.memory = runner_->memory();
  RETURN_IF_ERROR(BroadcastBuffers(comm_, runner_->buffers(), buffers, ledger));

  double synced_norm = zero2_norm;
  if (zero2) {
    // zero2: the reducer's global norm; the optimizer steps the owned elements with the
    // reduce-scattered shard.
    std::vector<const float*> owned(plan_.reducer_index.size(), nullptr);
    for (size_t i = 0; i < owned.size(); ++i) {
      const int t = plan_.reducer_index[i];
      if (t >= 0) owned[i] = zero2_->owned_gradient(static_cast<size_t>(t));
    }
    RETURN_IF_ERROR(runner_->OptimizerStepOwned(plan_.has_grad, owned));
  } else {
    // The gradients the optimizer uses: the bucket views, or a bypassing rank's own.
    ASSIGN_OR_RETURN(synced_norm, runner_->GradNorm(plan_.has_grad));
    RETURN_IF_ERROR(runner_->OptimizerStep(plan_.has_grad));
  }
  absl::Duration gather_time;
  if (shards_ != nullptr && fsdp_ == nullptr) {
    // zero1, zero2: this rank stepped its shard only; the others' come from their owners.
    // (fsdp keeps only its shard: the next pass gathers the layers it uses.)
    const absl::Time gather_start = clock_->Now();
    ShardSyncOptions gather;
    gather.timeout = collective_timeout_;
    gather.memory = runner_->memory();
    gather.ledger = ledger;
    size_t staging = 0;
    gather.staging_bytes = &staging;
    RETURN_IF_ERROR(
        AllGatherParameterShards(comm_, *shards_, runner_->mutable_parameter_ptrs(), gather));
    gather_staging_bytes_ = std::max(gather_staging_bytes_, staging);
    gather_time = clock_->Now() - gather_start;
  }

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
  const uint64_t gathers = fsdp_ != nullptr ? fsdp_->gathers() - gathers_before : 0;
  report->set_collectives(static_cast<uint32_t>(stats.collectives + gathers));
  return absl::OkStatus();
}

absl::Status StepRunner::HandOverLocalGradients() {
  const std::vector<float*> slots = reducer_->gradient_slots();
  const std::vector<ParameterInfo>& infos = runner_->parameters();
  for (size_t i = infos.size(); i-- > 0;) {
    if (plan_.reducer_index[i] < 0) continue;
    runner_->NoteLocalGradient(i);
    RETURN_IF_ERROR(runner_->memory()->Copy(slots[plan_.reducer_index[i]], runner_->grad(i),
                                            infos[i].count * sizeof(float)));
    if (!plan_.skip[i]) reducer_->MarkReady(static_cast<size_t>(plan_.reducer_index[i]));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> StepRunner::GatherMomentum() {
  ASSIGN_OR_RETURN(std::vector<std::vector<float>> local, runner_->MomentumBuffers());
  if (shards_ == nullptr) return local;
  ShardSyncOptions gather;
  gather.timeout = collective_timeout_;
  gather.memory = runner_->memory();
  gather.ledger = Ledger();
  return AllGatherMomentumShards(comm_, *shards_, local, gather);
}

absl::Status StepRunner::MeasureDriftInto(v1::StepReport* report) {
  DriftOptions drift_options;
  drift_options.timeout = collective_timeout_;
  drift_options.ledger = Ledger();
  drift_options.memory = runner_->memory();
  ASSIGN_OR_RETURN(const DriftResult drift,
                   fsdp_ != nullptr ? fsdp_->MeasureGatheredDrift(drift_options)
                                    : MeasureDrift(comm_, runner_->parameters(),
                                                   runner_->parameter_ptrs(), drift_options));
  report->set_has_drift(true);
  report->set_drift(drift.max_drift);
  report->set_drift_parameter(drift.worst_parameter);
  return absl::OkStatus();
}

}  // namespace ringleader
