// One rank's training: see training_loop.h for the sequence and the fault semantics.
#include "worker/rank/training_loop.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job_spec.h"
#include "common/rank_failure.h"
#include "common/spec_kinds.h"
#include "common/status_macros.h"
#include "worker/coordinator_client/coordinator_key_value_store.h"
#include "worker/data/dataset.h"
#include "worker/data/distributed_sampler.h"
#include "worker/data/fashion_mnist.h"
#include "worker/rank/checkpoint_writer.h"
#include "worker/rank/cpu_model_runner.h"
#include "worker/rank/evaluation.h"
#include "worker/rank/failure_context.h"
#include "worker/rank/gpu/gpu_model_runner.h"
#include "worker/rank/heal.h"
#include "worker/rank/heap_usage.h"
#include "worker/rank/job_data.h"
#include "worker/rank/parameter_plan.h"
#include "worker/rank/preflight_rank.h"
#include "worker/rank/rank_activity.h"
#include "worker/rank/resume.h"
#include "worker/rank/snapshots.h"
#include "worker/rank/starting_state.h"
#include "worker/rank/step_runner.h"
#include "worker/rank/trace_report.h"
#include "worker/strategy/sync_strategy.h"
#include "worker/sync/buffer_sync.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace {

absl::Status Annotate(const absl::Status& status, const std::string& where) {
  if (status.ok()) return status;
  return WithPrefix(status, absl::StrCat(where, ": "));
}

// A check of the job spec failed: the job's fault (an inner kind, if any, stays).
absl::Status JobError(const absl::Status& status) {
  return WithFailureKind(status, v1::RankFailure::JOB_ERROR);
}

// Writing a checkpoint failed: an I/O error unless the failure already has its kind (a peer).
absl::Status CheckpointError(const absl::Status& status) {
  return WithFailureKind(status, v1::RankFailure::IO_ERROR);
}

absl::Status DefaultCrash(uint64_t step) {
  std::fprintf(stderr, "injected crash fault: aborting at step %llu\n",
               static_cast<unsigned long long>(step));
  std::fflush(stderr);
  std::abort();
}

// One rank of one attempt. Members are declared so that the reducer dies before the
// collective it uses, and both before the runner whose memory and stream they use.
class RankTrainer {
 public:
  RankTrainer(const v1::Assignment& assignment, CoordinatorClient* client,
              const TrainingLoopOptions& options)
      : assignment_(assignment),
        client_(client),
        options_(options),
        clock_(options.clock ? options.clock : Clock::Real()),
        rank_(assignment.rank()),
        world_(assignment.world_size()),
        own_trace_(clock_),
        trace_(options.trace != nullptr ? options.trace : &own_trace_),
        activity_(clock_) {}

  absl::StatusOr<TrainingOutcome> Run() {
    RETURN_IF_ERROR(Annotate(Join(), absl::StrCat("rank ", rank_, ": joining")));
    StartReporting();
    if (spec_.checks().preflight()) {
      Enter(v1::RANK_PHASE_STARTING, "pre-flight check");
      RETURN_IF_ERROR(
          Annotate(PassPreflight(assignment_, client_, PreflightOptions()),
                   absl::StrCat("rank ", rank_, ": pre-flight check")));
    }
    RETURN_IF_ERROR(Annotate(Setup(), absl::StrCat("rank ", rank_, ": setting up")));
    absl::Status trained = Train();
    if (trained.ok()) {
      // final.ckpt's state, gathered while the collective is still open (sharded strategies).
      trained = Annotate(CheckpointError(writer_->PrepareFinal()),
                         absl::StrCat("rank ", rank_, ": checkpoint"));
    }
    if (trained.ok()) {
      outcome_.momentum_elements = runner_->momentum_elements();
      Enter(v1::RANK_PHASE_SHUTTING_DOWN, "closing the collective");
      // Every rank has run its last collective: end the communicator gracefully (NCCL:
      // finalize and destroy instead of abort).
      trained = Annotate(comm_->Close(collective_timeout_),
                         absl::StrCat("rank ", rank_, ": closing the collective"));
    }
    if (!trained.ok()) {
      comm_->Abort(trained);  // fail whatever is still queued at once
      // Best effort: the coordinator shows the last step this rank completed.
      reporter_->Flush(options_.reporting.flush_timeout).IgnoreError();
      // Reports are answered asynchronously, so a peer may notice the coordinator's stop one
      // step earlier and abort its collectives under this rank. Once this rank's own reports
      // have been answered with stop, that stop is the cause of whatever failed here.
      if (reporter_->stopped_by_coordinator() && trained.code() != absl::StatusCode::kAborted) {
        // The reporter's status carries its STOPPED failure (progress_reporter.h).
        return WithMessage(reporter_->status(),
                           absl::StrCat("rank ", rank_, ": ", reporter_->status().message(),
                                        " (this rank then failed: ", trained.message(), ")"));
      }
      return AddRankFailure(trained, FailureContext(trace_->Snapshot(), current_step_));
    }
    // The final reports reach the coordinator before RunRank's FinishRank.
    activity_.SetDetail("delivering the last reports");
    RETURN_IF_ERROR(Annotate(FlushWithinGrace(), absl::StrCat("rank ", rank_, ": reporting")));
    RETURN_IF_ERROR(Annotate(CheckpointError(WriteFinalCheckpoint()),
                             absl::StrCat("rank ", rank_, ": checkpoint")));
    // The job ended here: its snapshots in this worker's memory are not needed any more.
    if (snapshots_ != nullptr && snapshots_->active()) {
      Log(absl::StrCat("rank ", rank_, ": ", snapshots_->Summary()));
    }
    snapshots_.reset();
    if (!options_.snapshot_dir.empty()) RemoveSnapshots(options_.snapshot_dir);
    Log(absl::StrFormat("rank %d finished: %d steps, final loss %.4f%s", rank_, outcome_.steps,
                        outcome_.final_loss,
                        outcome_.checkpoint_path.empty()
                            ? ""
                            : absl::StrCat(", checkpoint ", outcome_.checkpoint_path)));
    return outcome_;
  }

 private:
  // From the join on, reports and keepalives carry where this rank is (rank_activity.h).
  void StartReporting() {
    ProgressReporterOptions reporting = options_.reporting;
    if (!reporting.log) reporting.log = options_.log;
    reporting.activity = [this] {
      v1::RankActivity activity = activity_.Current();
      activity.set_collectives_issued(trace_->issued());
      activity.set_collectives_completed(trace_->completed());
      return activity;
    };
    reporting.trace = [this] { return TraceToProto(trace_->Snapshot()); };
    Enter(v1::RANK_PHASE_STARTING);
    reporter_ = std::make_unique<ProgressReporter>(
        client_, assignment_.job_id(), assignment_.generation(), rank_, std::move(reporting));
  }

  // The check before training (checks.preflight): its pairs' operations time out as the job's.
  PreflightRankOptions PreflightOptions() const {
    PreflightRankOptions preflight;
    preflight.worker_id = options_.worker_id;
    preflight.make_pair = options_.make_preflight_pair;
    preflight.check.timeout = absl::Milliseconds(spec_.collective_timeout_ms());
    preflight.check.clock = clock_;
    return preflight;
  }

  // Enters `phase`; the pause fault (spec.model.faults.pause_*) holds this rank there.
  void Enter(v1::RankPhase phase, std::string detail = "") {
    activity_.Set(phase, std::move(detail));
    const v1::FaultSpec& faults = spec_.model().faults();
    if (paused_ || faults.pause_ms() == 0 || faults.pause_phase() != phase ||
        faults.pause_rank() != static_cast<int32_t>(rank_) || assignment_.generation() > 1) {
      return;
    }
    paused_ = true;
    Log(absl::StrCat("rank ", rank_, ": fault injection: pausing for ", faults.pause_ms(),
                     " ms in phase ", v1::RankPhase_Name(phase)));
    const absl::Duration pause = absl::Milliseconds(faults.pause_ms());
    if (options_.sleep) {
      options_.sleep(pause);
    } else {
      absl::SleepFor(pause);
    }
  }

  void Log(const std::string& line) const {
    if (options_.log) {
      options_.log(line);
    } else {
      std::cerr << "[ringleader-rank] " << line << std::endl;
    }
  }

  // Flush, tried again while the coordinator is unreachable, for about coordinator_grace.
  absl::Status FlushWithinGrace() {
    const absl::Duration pause = std::max(options_.coordinator_retry_pause, absl::Milliseconds(1));
    const int64_t retries = options_.coordinator_grace / pause;
    absl::Status flushed = reporter_->Flush(options_.reporting.flush_timeout);
    for (int64_t retry = 0; retry < retries && IsTransient(flushed); ++retry) {
      if (retry == 0) {
        Log(absl::StrCat("rank ", rank_, ": the coordinator is unreachable (", flushed.message(),
                         "); delivering the last reports for up to ",
                         absl::FormatDuration(options_.coordinator_grace)));
      }
      if (options_.sleep) {
        options_.sleep(pause);
      } else {
        absl::SleepFor(pause);
      }
      flushed = reporter_->Flush(options_.reporting.flush_timeout);
    }
    return flushed;
  }

  absl::Status Join() {
    v1::JobSpec received = assignment_.spec();
    if (options_.mutate_spec_for_test) {
      received.mutable_optimizer()->set_learning_rate(received.optimizer().learning_rate() * 2);
    }
    fingerprint_ = JobSpecFingerprint(received);
    v1::JoinJobRequest request;
    request.set_job_id(assignment_.job_id());
    request.set_generation(assignment_.generation());
    request.set_rank(rank_);
    request.set_worker_id(options_.worker_id);
    request.set_spec_fingerprint(fingerprint_);
    RETURN_IF_ERROR(client_->JoinJob(request).status());
    // What this rank runs is what it fingerprinted (defaults filled in, which changes nothing
    // for a spec the coordinator accepted).
    spec_ = received;
    ApplyJobSpecDefaults(&spec_);
    return absl::OkStatus();
  }

  absl::Status Setup() {
    if (world_ < 1 || rank_ >= world_) {
      return JobError(absl::InvalidArgumentError(
          absl::StrCat("assignment: rank ", rank_, " is outside world size ", world_)));
    }
    if (spec_.model().kind() != "mlp") {
      return JobError(absl::InvalidArgumentError(
          absl::StrCat("model.kind: '", spec_.model().kind(), "' is not supported (mlp)")));
    }
    if (spec_.optimizer().kind() != "sgd") {
      return JobError(absl::InvalidArgumentError(absl::StrCat(
          "optimizer.kind: '", spec_.optimizer().kind(), "' is not supported (sgd)")));
    }
    if (!options_.make_collective) {
      return absl::InvalidArgumentError("no collective factory configured");
    }
    Enter(v1::RANK_PHASE_LOADING_DATA, spec_.data().dataset());
    ASSIGN_OR_RETURN(data_, LoadJobData(spec_));
    heap_growth_.Start();  // what the training state costs, from here (heap_usage.h)

    std::vector<size_t> layers(spec_.model().layers().begin(), spec_.model().layers().end());
    MlpOptions mlp_options;
    mlp_options.with_buffers = spec_.model().with_buffers();
    auto model = std::make_unique<Mlp>(layers, spec_.seed(), mlp_options);
    RETURN_IF_ERROR(JobError(Annotate(model->CheckCompatible(data_.train), "training data")));
    RETURN_IF_ERROR(JobError(Annotate(model->CheckCompatible(data_.test), "test data")));
    absl::StatusOr<ParameterPlan> plan = PlanParameters(spec_, rank_, model->parameters());
    RETURN_IF_ERROR(JobError(plan.status()));
    plan_ = *std::move(plan);
    collective_timeout_ = absl::Milliseconds(spec_.collective_timeout_ms());
    // The strategy plans which rank owns what (worker/strategy/sync_strategy.h).
    StrategyContext strategy_context;
    strategy_context.spec = &spec_;
    strategy_context.rank = rank_;
    strategy_context.world_size = world_;
    strategy_context.plan = &plan_;
    strategy_context.model_layers = layers.size() - 1;
    strategy_context.clock = clock_;
    strategy_context.timeout = collective_timeout_;
    absl::StatusOr<std::unique_ptr<SyncStrategy>> strategy = CreateSyncStrategy(strategy_context);
    RETURN_IF_ERROR(JobError(strategy.status()));
    strategy_ = *std::move(strategy);
    // NCCL cannot carry bool buffers: refused before any GPU or collective work.
    if (spec_.sync().broadcast_buffers()) {
      RETURN_IF_ERROR(JobError(CheckBuffersForBackend(spec_.backend(), model->buffers(),
                                                      spec_.sync().ignore_bool_buffers())));
    }
    model.reset();  // BuildRunner makes the one that trains

    SgdOptions sgd;
    sgd.lr = spec_.optimizer().learning_rate();
    sgd.momentum = spec_.optimizer().momentum();
    sgd.dampening = spec_.optimizer().dampening();
    sgd.weight_decay = spec_.optimizer().weight_decay();
    sgd.nesterov = spec_.optimizer().nesterov();
    RETURN_IF_ERROR(JobError(ValidateSgdOptions(sgd)));
    // A restarted attempt resumes from the snapshot or checkpoint rank 0 chose (resume.h).
    CoordinatorKeyValueStoreOptions store_options;
    store_options.clock = clock_;
    CoordinatorKeyValueStore store(client_, assignment_.job_id(), assignment_.generation(),
                                   store_options);
    Enter(v1::RANK_PHASE_RESUMING);
    // Snapshots in memory (snapshots.h): where every rank holds the whole state.
    std::optional<SnapshotTier> snapshots;
    if (!spec_.disable_snapshots() && strategy_->holds_whole_state()) {
      snapshots = SnapshotTier{options_.snapshot_dir};
    }
    // The other ranks may start seconds later (a stopped rank's process is still being killed
    // on its worker): waiting for them is a rendezvous, not a collective.
    ASSIGN_OR_RETURN(resume_, DecideResume(assignment_, spec_, fingerprint_, &store,
                                           std::max(options_.rendezvous_timeout,
                                                    collective_timeout_),
                                           snapshots.has_value() ? &*snapshots : nullptr));
    if (snapshots.has_value() && !options_.snapshot_dir.empty()) {
      snapshots_ = std::make_unique<RankSnapshots>(options_.snapshot_dir,
                                                   spec_.snapshot_interval_steps(), clock_);
    }
    RETURN_IF_ERROR(BuildRunner(sgd, layers, mlp_options));
    sampler_ = std::make_unique<DistributedSampler>(data_.train.size, world_, rank_, spec_.seed(),
                                                    spec_.data().shuffle());

    v1::Assignment effective = assignment_;
    *effective.mutable_spec() = spec_;
    Enter(v1::RANK_PHASE_RENDEZVOUS, absl::StrCat(spec_.backend(), ", ", world_, " ranks"));
    const RendezvousProgress progress = [this](RendezvousStage stage, const std::string& detail) {
      if (stage == RendezvousStage::kConnecting) {
        Enter(v1::RANK_PHASE_CONNECTING, detail);  // each peer's connection timed on its own
      } else if (activity_.phase() == v1::RANK_PHASE_RENDEZVOUS) {
        activity_.SetDetail(detail);
      } else {
        Enter(v1::RANK_PHASE_RENDEZVOUS, detail);
      }
    };
    ASSIGN_OR_RETURN(std::unique_ptr<Collective> backend,
                     options_.make_collective(effective, runner_->placement(), progress));
    // Every collective goes through the trace: hang forensics and arrival times.
    comm_ = std::make_unique<TracedCollective>(std::move(backend), trace_);

    if (resume_.heal) RETURN_IF_ERROR(Heal(sgd, layers, mlp_options));
    RETURN_IF_ERROR(strategy_->Connect(runner_.get(), comm_.get()));
    steps_ = std::make_unique<StepRunner>(spec_, rank_, plan_, runner_.get(), comm_.get(),
                                          strategy_.get(), clock_, options_.sleep, trace_);
    writer_ = std::make_unique<CheckpointWriter>(CheckpointWriterContext{
        &assignment_, &spec_, fingerprint_, runner_.get(), strategy_.get(), comm_.get(),
        collective_timeout_,
        [this](v1::RankPhase phase, std::string detail) { Enter(phase, std::move(detail)); }});

    Log(absl::StrFormat(
        "rank %d/%d of job %s (generation %d): %s, %d train / %d test examples, %d parameters "
        "in %d buckets, strategy %s, backend %s on %s%s",
        rank_, world_, assignment_.job_id(), assignment_.generation(), spec_.data().dataset(),
        data_.train.size, data_.test.size, runner_->parameter_count(),
        strategy_->bucket_count(), strategy_->Description(), comm_->backend_name(),
        runner_->device_name(),
        resume_.path.empty() ? ""
                             : absl::StrCat(", resuming after step ", resume_step_, " from ",
                                            resume_.path)));
    for (const std::string& skipped : resume_.skipped) Log("could not resume from " + skipped);
    // This rank evaluates only its share of the test set (evaluation.h); the rest is not needed.
    const EvaluationShard shard = EvaluationShardOf(data_.test.size, rank_, world_);
    const uint64_t heap_before_slice = HeapInUseBytes();
    data_.test = Slice(data_.test, shard.begin, shard.end);
    heap_growth_.MoveBaseline(heap_before_slice, HeapInUseBytes());  // the data set's, not ours
    return absl::OkStatus();
  }

  // The model runner, starting from resume_'s state (or model.init_from, or the seed's weights):
  // parameters and buffers go into the host model before the runner copies it, the optimizer's
  // state after.
  absl::Status BuildRunner(const SgdOptions& sgd, std::vector<size_t> layers,
                           const MlpOptions& mlp_options) {
    auto model = std::make_unique<Mlp>(std::move(layers), spec_.seed(), mlp_options);
    ASSIGN_OR_RETURN(std::optional<StartingOptimizerState> optimizer_state,
                     LoadStartingState(spec_, rank_, fingerprint_, resume_, sgd, model.get()));
    if (resume_.checkpoint.has_value()) resume_step_ = resume_.checkpoint->step;
    runner_.reset();  // a healed rank's first runner goes before the second takes its memory
    if (BackendOf(spec_) == Backend::kNccl) {
      GpuRunnerOptions gpu;
      gpu.gpu = options_.gpu;
      gpu.bf16_mixed_precision = MixedPrecisionOf(spec_) == Precision::kBf16;
      ASSIGN_OR_RETURN(runner_, CreateGpuModelRunner(std::move(model), sgd, gpu));
    } else {
      runner_ = CreateCpuModelRunner(std::move(model), sgd);
    }
    // Before the resumed state goes in: a whole checkpoint's momentum is then cut to this
    // rank's shard.
    RETURN_IF_ERROR(strategy_->PrepareRunner(runner_.get()));
    if (optimizer_state.has_value()) {
      RETURN_IF_ERROR(Annotate(runner_->RestoreOptimizerState(optimizer_state->momentum,
                                                              optimizer_state->step_count),
                               optimizer_state->source));
    }
    resume_.checkpoint.reset();  // restored: the tensors are not needed any more
    return absl::OkStatus();
  }

  // Healing from a live peer (heal.h): the snapshot resume_ names goes from its source to every
  // rank over the collective; a rank that lacked it rebuilds its runner from it.
  absl::Status Heal(const SgdOptions& sgd, const std::vector<size_t>& layers,
                    const MlpOptions& mlp_options) {
    const bool lacking = resume_step_ != resume_.snapshot_step;
    Enter(v1::RANK_PHASE_RESUMING,
          absl::StrCat(lacking ? "receiving" : "sending", " the snapshot of step ",
                       resume_.snapshot_step, lacking ? " from rank " : "",
                       lacking ? absl::StrCat(resume_.heal_source) : ""));
    const absl::Time start = clock_->Now();
    ASSIGN_OR_RETURN(std::string bytes,
                     BroadcastBytes(comm_.get(), runner_->memory(), resume_.heal_source,
                                    std::move(resume_.snapshot_bytes), collective_timeout_));
    resume_.snapshot_bytes.clear();
    if (!lacking) return absl::OkStatus();
    ASSIGN_OR_RETURN(CheckpointData data, DecodeCheckpoint(resume_.path, bytes));
    if (data.step != resume_.snapshot_step || data.spec_fingerprint != fingerprint_) {
      return absl::DataLossError(absl::StrCat(
          "heal: rank ", resume_.heal_source, " sent step ", data.step, " (fingerprint ",
          data.spec_fingerprint, "), expected step ", resume_.snapshot_step, " (", fingerprint_,
          ")"));
    }
    resume_.checkpoint = std::move(data);
    RETURN_IF_ERROR(BuildRunner(sgd, layers, mlp_options));
    Log(absl::StrFormat("rank %d: healed from rank %d: the snapshot of step %d, %d bytes in %s",
                        rank_, resume_.heal_source, resume_.snapshot_step, bytes.size(),
                        absl::FormatDuration(clock_->Now() - start)));
    return absl::OkStatus();
  }

  absl::Status Train() {
    const uint32_t accumulation = spec_.sync().gradient_accumulation_steps();
    const size_t batch = spec_.batch_size();
    const size_t micro_batches = (sampler_->num_samples() + batch - 1) / batch;
    const uint64_t steps_per_epoch = micro_batches / accumulation;
    if (steps_per_epoch == 0) {
      return JobError(absl::InvalidArgumentError(
          absl::StrCat("batch_size x sync.gradient_accumulation_steps (", batch, " x ",
                       accumulation, ") needs more examples than this rank gets per epoch (",
                       sampler_->num_samples(), "): lower them or use more data")));
    }
    const uint64_t max_steps = spec_.max_steps();
    const uint64_t total_steps =
        max_steps > 0 ? std::min<uint64_t>(max_steps, steps_per_epoch * spec_.epochs())
                      : steps_per_epoch * spec_.epochs();
    const v1::FaultSpec& faults = spec_.model().faults();
    // A crash fault fires in the first attempt only, unless crash_every_attempt.
    const bool crash_here =
        faults.crash_at_step() > 0 && faults.crash_rank() == static_cast<int32_t>(rank_) &&
        (assignment_.generation() <= 1 || faults.crash_every_attempt());
    const uint32_t checkpoint_interval = spec_.checkpoint_interval_steps();

    // A resumed attempt continues inside the epoch the checkpoint's step belongs to: the
    // sampler's order depends only on (seed, epoch), so the remaining batches are the same.
    uint64_t step = resume_step_;
    outcome_.steps = step;
    bool first_report = true;
    for (uint32_t epoch = static_cast<uint32_t>(step / steps_per_epoch);
         epoch < spec_.epochs() && step < total_steps; ++epoch) {
      const std::vector<size_t> indices = sampler_->Indices(epoch);
      double loss_sum = 0;
      uint64_t epoch_steps = 0;
      for (uint64_t s = step - uint64_t{epoch} * steps_per_epoch;
           s < steps_per_epoch && step < total_steps; ++s) {
        const uint64_t this_step = step + 1;
        current_step_ = this_step;
        const std::string where =
            absl::StrCat("rank ", rank_, ", step ", this_step, " (epoch ", epoch, ")");
        Enter(v1::RANK_PHASE_TRAINING, absl::StrCat("step ", this_step));
        if (crash_here && this_step == faults.crash_at_step()) {
          RETURN_IF_ERROR(Annotate(
              options_.crash ? options_.crash(this_step) : DefaultCrash(this_step), where));
        }
        v1::StepReport report;
        std::optional<HeapSampler> heap_sampler;  // the first step's high-water mark
        if (first_report) heap_sampler.emplace(&heap_growth_, absl::Milliseconds(1));
        const absl::Time step_start = clock_->Now();
        absl::Status ran = steps_->Run(this_step, total_steps, epoch, data_.train, indices,
                                       s * accumulation * batch, &report);
        heap_sampler.reset();
        if (!ran.ok()) {
          // A diverged step still tells the coordinator its loss (the judge names rank and step).
          if (report.step() == this_step) reporter_->AddStep(report).IgnoreError();
          return Annotate(ran, where);
        }
        step = this_step;
        const uint32_t drift_interval = spec_.drift_interval_steps();
        if (drift_interval > 0 && (step % drift_interval == 0 || step == total_steps)) {
          RETURN_IF_ERROR(Annotate(steps_->MeasureDriftInto(&report), where));
        }
        if (first_report) {
          first_report = false;
          // The momentum exists from the first step on: what this rank holds, measured once.
          *report.mutable_memory() = MeasureMemory();
          outcome_.memory = report.memory();
          report.set_resumed_from_step(resume_step_);
          report.set_resumed_from(resume_.path);
          for (const std::string& skipped : resume_.skipped) {
            report.add_skipped_checkpoints(skipped);
          }
        }
        const bool checkpoint_due =
            checkpoint_interval > 0 && step % checkpoint_interval == 0 && step < total_steps;
        if (checkpoint_due) {
          // Every rank takes part (checkpoint_writer.h); rank 0 names the file it wrote.
          absl::StatusOr<std::string> written =
              writer_->WritePeriodic(step, step / steps_per_epoch);
          RETURN_IF_ERROR(
              Annotate(CheckpointError(written.status()), absl::StrCat(where, ": checkpoint")));
          if (!written->empty()) report.set_checkpoint_written(*written);
        }
        if (snapshots_ != nullptr && step < total_steps) {
          absl::Status ended = snapshots_->AfterStep(step, clock_->Now() - step_start, [&] {
            return runner_->CaptureState(step, step / steps_per_epoch, fingerprint_);
          });
          if (!ended.ok()) {
            Log(absl::StrCat("rank ", rank_, ": snapshots in memory stop after step ", step, ": ",
                             ended.message()));
          }
        }
        loss_sum += report.loss();
        ++epoch_steps;
        outcome_.steps = step;
        outcome_.final_loss = report.loss();
        RETURN_IF_ERROR(Annotate(reporter_->AddStep(report), where));
        if (!report.resumed_from().empty() || report.skipped_checkpoints_size() > 0) {
          // Where this attempt resumed is a durable job event: on its way before the next step.
          RETURN_IF_ERROR(
              Annotate(reporter_->Flush(options_.reporting.flush_timeout), where));
        }
      }
      RETURN_IF_ERROR(EndEpoch(epoch, epoch_steps > 0 ? loss_sum / epoch_steps : 0));
    }
    return absl::OkStatus();
  }

  // Every rank evaluates its share of the test set (evaluation.h); rank 0 reports the totals.
  absl::Status EndEpoch(uint32_t epoch, double train_loss) {
    const std::string where = absl::StrCat("rank ", rank_, ", end of epoch ", epoch);
    Enter(v1::RANK_PHASE_EVALUATING, absl::StrCat("epoch ", epoch));
    if (options_.before_evaluation) options_.before_evaluation(epoch, data_.test.size);
    absl::StatusOr<EvaluationTotals> totals =
        EvaluateAcrossRanks(runner_.get(), comm_.get(), data_.test, 256, collective_timeout_);
    RETURN_IF_ERROR(Annotate(totals.status(), absl::StrCat(where, ": evaluation")));
    if (rank_ != 0) {
      Log(absl::StrFormat("rank %d epoch %d: train loss %.4f", rank_, epoch, train_loss));
      return absl::OkStatus();
    }
    v1::EpochReport report;
    report.set_epoch(epoch);
    report.set_test_accuracy(totals->accuracy);
    report.set_test_loss(totals->loss);
    report.set_train_loss(train_loss);
    outcome_.last_test_accuracy = totals->accuracy;
    Log(absl::StrFormat("rank 0 epoch %d: train loss %.4f, test loss %.4f, test accuracy %.4f",
                        epoch, train_loss, totals->loss, totals->accuracy));
    return Annotate(reporter_->AddEpoch(report), where);
  }

  absl::Status WriteFinalCheckpoint() {
    // The epoch the next step would belong to.
    const uint64_t epoch = outcome_.steps == 0 ? 0 : spec_.epochs();
    ASSIGN_OR_RETURN(outcome_.checkpoint_path, writer_->WriteFinal(outcome_.steps, epoch));
    return absl::OkStatus();
  }

  // The buffers this rank holds, by kind (plan/memory_plan.h predicts the same figures).
  v1::RankMemory MeasureMemory() const {
    v1::RankMemory memory;
    strategy_->MeasureMemory(&memory);
    memory.set_optimizer_bytes(runner_->momentum_elements() * sizeof(float));
    memory.set_total_bytes(memory.parameter_bytes() + memory.gradient_bytes() +
                           memory.optimizer_bytes() + memory.comm_buffer_bytes());
    memory.set_allocator_bytes(heap_growth_.peak_bytes());
    return memory;
  }

  const v1::Assignment& assignment_;
  CoordinatorClient* const client_;
  const TrainingLoopOptions& options_;
  Clock* const clock_;
  const uint32_t rank_;
  const uint32_t world_;

  std::string fingerprint_;
  v1::JobSpec spec_;
  TrainTest data_;  // after Setup, data_.test holds only this rank's evaluation shard
  HeapGrowth heap_growth_;  // from the data set loaded through the first step
  ParameterPlan plan_;
  std::unique_ptr<ModelRunner> runner_;  // before comm_ and strategy_: destroyed after them
  std::unique_ptr<DistributedSampler> sampler_;
  // Before comm_, which records into it, and reporter_, which reads it.
  CollectiveTrace own_trace_;
  CollectiveTrace* const trace_;  // own_trace_ or options.trace
  std::unique_ptr<Collective> comm_;
  // After comm_: destroyed first (its reducer uses the collective and the runner's memory).
  std::unique_ptr<SyncStrategy> strategy_;
  std::unique_ptr<StepRunner> steps_;  // uses all of the above
  std::unique_ptr<CheckpointWriter> writer_;  // uses all of the above
  std::unique_ptr<RankSnapshots> snapshots_;  // none: this rank takes no snapshots
  RankActivityTracker activity_;        // before reporter_, whose sender thread reads it
  bool paused_ = false;                 // the pause fault fired
  std::unique_ptr<ProgressReporter> reporter_;
  absl::Duration collective_timeout_ = absl::Seconds(60);
  ResumeDecision resume_;     // where this attempt started (DecideResume)
  uint64_t resume_step_ = 0;  // the step it resumed after (0 = from the start)
  uint64_t current_step_ = 0;  // the step running or last run (a failure's step)
  TrainingOutcome outcome_;
};

}  // namespace

absl::StatusOr<TrainingOutcome> RunTraining(const v1::Assignment& assignment,
                                            CoordinatorClient* client,
                                            const TrainingLoopOptions& options) {
  RankTrainer trainer(assignment, client, options);
  return trainer.Run();
}

}  // namespace ringleader
