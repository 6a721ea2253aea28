// Defaults, validation and fingerprint of a job spec. Messages follow one pattern,
// "<yaml.path>: <what is wrong>, got <value>" plus the fix, because the CLI prints them verbatim.
#include "common/job_spec.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/command_spec.h"
#include "common/spec_kinds.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace ringleader {
namespace {

using ::ringleader::v1::FaultSpec;
using ::ringleader::v1::JobSpec;
using ::ringleader::v1::ModelSpec;

constexpr uint32_t kFashionMnistInputs = 28 * 28;
constexpr uint32_t kFashionMnistClasses = 10;
constexpr size_t kMaxNameLength = 128;
constexpr uint32_t kMaxRestarts = 100;
constexpr uint32_t kMaxSpares = 1024;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// "fc1.weight, fc1.bias, ..." — the list shown when a parameter name is unknown.
std::string DescribeNames(const std::vector<std::string>& names) {
  constexpr size_t kShown = 6;
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(names.size(), kShown));
  std::string text = absl::StrJoin(shown, ", ");
  if (names.size() > kShown) absl::StrAppend(&text, ", ...");
  return text;
}

absl::Status ValidateModel(const JobSpec& spec, const JobSpecLimits& limits) {
  const ModelSpec& model = spec.model();
  if (model.kind() != "mlp") {
    return Invalid(
        absl::StrCat("model.kind: unknown model kind '", model.kind(), "' (expected mlp)"));
  }
  const int sizes = model.layers_size();
  if (sizes < 2) {
    return Invalid(
        absl::StrCat("model.layers: need at least 2 sizes (input and output), got ", sizes));
  }
  if (static_cast<uint32_t>(sizes - 1) > limits.max_layers) {
    return Invalid(absl::StrCat("model.layers: at most ", limits.max_layers, " linear layers (",
                                limits.max_layers + 1, " sizes), got ", sizes, " sizes"));
  }
  for (int i = 0; i < sizes; ++i) {
    if (model.layers(i) < 1 || model.layers(i) > limits.max_layer_width) {
      return Invalid(absl::StrCat("model.layers[", i, "]: must be between 1 and ",
                                  limits.max_layer_width, ", got ", model.layers(i)));
    }
  }
  if (spec.data().dataset() == "fashion-mnist") {
    if (model.layers(0) != kFashionMnistInputs) {
      return Invalid(absl::StrCat("model.layers[0]: must be ", kFashionMnistInputs,
                                  " for fashion-mnist (28x28 pixels), got ", model.layers(0)));
    }
    if (model.layers(sizes - 1) != kFashionMnistClasses) {
      return Invalid(absl::StrCat("model.layers[", sizes - 1, "]: must be ", kFashionMnistClasses,
                                  " for fashion-mnist (10 classes), got ",
                                  model.layers(sizes - 1)));
    }
  }

  const std::vector<std::string> names = ModelParameterNames(model);
  const std::set<std::string> known(names.begin(), names.end());
  std::set<std::string> frozen;
  for (int i = 0; i < model.frozen_parameters_size(); ++i) {
    const std::string& name = model.frozen_parameters(i);
    if (known.count(name) == 0) {
      return Invalid(absl::StrCat("model.frozen_parameters[", i, "]: unknown parameter '", name,
                                  "' (model has ", DescribeNames(names), ")"));
    }
    if (!frozen.insert(name).second) {
      return Invalid(absl::StrCat("model.frozen_parameters[", i, "]: '", name,
                                  "' is listed twice; list each parameter once"));
    }
  }
  if (frozen.size() == known.size()) {
    return Invalid(
        "model.frozen_parameters: every parameter is frozen, nothing would train; "
        "leave at least one out");
  }

  if (model.init_optimizer_state()) {
    if (model.init_from().empty()) {
      return Invalid(
          "model.init_optimizer_state: needs model.init_from naming a ringleader checkpoint "
          "(whose momentum it loads); set init_from or drop init_optimizer_state");
    }
    if (absl::EndsWith(model.init_from(), ".safetensors")) {
      return Invalid(absl::StrCat(
          "model.init_optimizer_state: model.init_from ", model.init_from(),
          " is a .safetensors file, which holds parameters only; name a ringleader checkpoint "
          "(e.g. <checkpoint_dir>/<job>/final.ckpt) or drop init_optimizer_state"));
    }
    if (spec.optimizer().momentum() == 0) {
      return Invalid(
          "model.init_optimizer_state: optimizer.momentum is 0, so the job keeps no momentum to "
          "load; set optimizer.momentum > 0 or drop init_optimizer_state");
    }
  }

  const FaultSpec& faults = model.faults();
  auto check_rank = [&](const char* field, int32_t rank) -> absl::Status {
    if (rank < 0 || static_cast<uint32_t>(rank) >= spec.world_size()) {
      return Invalid(absl::StrCat("model.faults.", field, ": must be a rank in [0, ",
                                  spec.world_size(), "), got ", rank));
    }
    return absl::OkStatus();
  };
  if (faults.unused_parameters_on_rank_size() > 0) {
    RETURN_IF_ERROR(check_rank("unused_parameter_rank", faults.unused_parameter_rank()));
    for (int i = 0; i < faults.unused_parameters_on_rank_size(); ++i) {
      const std::string& name = faults.unused_parameters_on_rank(i);
      if (known.count(name) == 0) {
        return Invalid(absl::StrCat("model.faults.unused_parameters_on_rank[", i,
                                    "]: unknown parameter '", name, "' (model has ",
                                    DescribeNames(names), ")"));
      }
    }
  }
  if (faults.bypass_sync()) {
    RETURN_IF_ERROR(check_rank("bypass_sync_rank", faults.bypass_sync_rank()));
  }
  if (faults.crash_at_step() > 0) {
    RETURN_IF_ERROR(check_rank("crash_rank", faults.crash_rank()));
  }
  if (faults.pause_ms() > 0) {
    RETURN_IF_ERROR(check_rank("pause_rank", faults.pause_rank()));
    if (faults.pause_phase() == v1::RANK_PHASE_UNSPECIFIED ||
        faults.pause_phase() == v1::RANK_PHASE_RUNNING_COMMAND) {
      return Invalid(
          "model.faults.pause_phase: name a phase of the built-in trainer (e.g. "
          "RANK_PHASE_CONNECTING) for pause_ms");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateOptimizer(const v1::OptimizerSpec& optimizer) {
  if (optimizer.kind() != "sgd") {
    return Invalid(
        absl::StrCat("optimizer.kind: unknown optimizer '", optimizer.kind(), "' (expected sgd)"));
  }
  const double lr = optimizer.learning_rate();
  if (!std::isfinite(lr) || lr <= 0) {
    return Invalid(absl::StrCat("optimizer.learning_rate: must be > 0, got ", lr));
  }
  const double momentum = optimizer.momentum();
  if (!std::isfinite(momentum) || momentum < 0 || momentum >= 1) {
    return Invalid(absl::StrCat("optimizer.momentum: must be in [0, 1), got ", momentum));
  }
  const double weight_decay = optimizer.weight_decay();
  if (!std::isfinite(weight_decay) || weight_decay < 0) {
    return Invalid(absl::StrCat("optimizer.weight_decay: must be >= 0, got ", weight_decay));
  }
  const double dampening = optimizer.dampening();
  if (!std::isfinite(dampening) || dampening < 0 || dampening > 1) {
    return Invalid(absl::StrCat("optimizer.dampening: must be in [0, 1], got ", dampening));
  }
  // torch.optim.SGD's rule: Nesterov momentum requires a momentum and zero dampening.
  if (optimizer.nesterov() && (momentum <= 0 || dampening != 0)) {
    return Invalid(absl::StrCat(
        "optimizer.nesterov: needs momentum > 0 and dampening 0, got momentum ", momentum,
        " and dampening ", dampening, "; set nesterov: false or fix momentum/dampening"));
  }
  return absl::OkStatus();
}

absl::Status ValidateSync(const v1::SyncSpec& sync) {
  if (!std::isfinite(sync.bucket_cap_mb()) || sync.bucket_cap_mb() <= 0) {
    return Invalid(absl::StrCat("sync.bucket_cap_mb: must be > 0, got ", sync.bucket_cap_mb()));
  }
  if (!std::isfinite(sync.first_bucket_mb()) || sync.first_bucket_mb() <= 0) {
    return Invalid(absl::StrCat("sync.first_bucket_mb: must be > 0, got ", sync.first_bucket_mb()));
  }
  if (sync.gradient_accumulation_steps() < 1) {
    return Invalid(absl::StrCat("sync.gradient_accumulation_steps: must be >= 1, got ",
                                sync.gradient_accumulation_steps()));
  }
  return ParsePrecision("sync.comm_dtype", sync.comm_dtype()).status();
}

}  // namespace

std::vector<std::string> ModelParameterNames(const ModelSpec& model) {
  std::vector<std::string> names;
  if (model.kind() != "mlp" || model.layers_size() < 2) return names;
  for (int layer = 1; layer < model.layers_size(); ++layer) {
    names.push_back(absl::StrCat("fc", layer, ".weight"));
    names.push_back(absl::StrCat("fc", layer, ".bias"));
  }
  return names;
}

void ApplyJobSpecDefaults(JobSpec* spec) {
  if (spec->backend().empty()) spec->set_backend(Name(Backend::kGloo));
  if (spec->strategy().empty()) spec->set_strategy(Name(Strategy::kDdp));

  ModelSpec* model = spec->mutable_model();
  if (model->kind().empty()) model->set_kind("mlp");
  if (model->layers_size() == 0 && model->kind() == "mlp") {
    for (uint32_t width : {784u, 256u, 128u, 10u}) model->add_layers(width);
  }

  v1::DataSpec* data = spec->mutable_data();
  if (data->dataset().empty()) data->set_dataset("fashion-mnist");
  if (!data->has_shuffle()) data->set_shuffle(true);
  if (data->path().empty() && data->dataset() == "fashion-mnist") {
    data->set_path(kDefaultFashionMnistPath);
  }

  v1::OptimizerSpec* optimizer = spec->mutable_optimizer();
  if (optimizer->kind().empty()) optimizer->set_kind("sgd");
  if (!optimizer->has_learning_rate()) optimizer->set_learning_rate(0.05);
  if (!optimizer->has_momentum()) optimizer->set_momentum(0.9);
  if (!optimizer->has_weight_decay()) optimizer->set_weight_decay(5e-4);
  if (!optimizer->has_dampening()) optimizer->set_dampening(0);

  v1::SyncSpec* sync = spec->mutable_sync();
  if (!sync->has_bucket_cap_mb()) sync->set_bucket_cap_mb(25);
  if (!sync->has_first_bucket_mb()) sync->set_first_bucket_mb(1);
  if (!sync->has_broadcast_buffers()) sync->set_broadcast_buffers(true);
  if (!sync->has_overlap()) sync->set_overlap(true);
  if (!sync->has_shared_memory()) sync->set_shared_memory(true);
  if (!sync->has_gradient_accumulation_steps()) sync->set_gradient_accumulation_steps(1);
  if (sync->comm_dtype().empty()) sync->set_comm_dtype(Name(Precision::kFp32));

  if (!spec->has_epochs()) spec->set_epochs(3);
  if (!spec->has_batch_size()) spec->set_batch_size(64);
  if (!spec->has_seed()) spec->set_seed(1);
  if (!spec->has_drift_interval_steps()) spec->set_drift_interval_steps(50);
  if (!spec->has_collective_timeout_ms()) spec->set_collective_timeout_ms(60000);
  if (!spec->has_max_restarts()) spec->set_max_restarts(3);
  if (!spec->has_keep_last_checkpoints()) spec->set_keep_last_checkpoints(2);

  v1::CheckSpec* checks = spec->mutable_checks();
  if (checks->on_desync().empty()) checks->set_on_desync("fail");
  if (!checks->has_grad_norm_rtol()) {
    checks->set_grad_norm_rtol(CommDtypeOf(*spec) == Precision::kBf16 ? 1e-4 : 1e-6);
  }
  if (!checks->has_drift_tolerance()) checks->set_drift_tolerance(1e-6);
  if (!checks->has_straggler_factor()) checks->set_straggler_factor(2.0);
  // Only where it applies, so the fingerprints of specs without a pre-flight check stay as
  // they were.
  if (checks->preflight() && !checks->has_preflight_min_fraction()) {
    checks->set_preflight_min_fraction(kDefaultPreflightMinFraction);
  }
}

namespace {

absl::Status ValidateChecks(const v1::CheckSpec& checks) {
  if (checks.on_desync() != "fail" && checks.on_desync() != "warn") {
    return Invalid(absl::StrCat("checks.on_desync: unknown policy '", checks.on_desync(),
                                "' (expected fail or warn)"));
  }
  const auto non_negative = [](double v) { return std::isfinite(v) && v >= 0; };
  if (!non_negative(checks.grad_norm_rtol())) {
    return Invalid(absl::StrCat("checks.grad_norm_rtol: must be a finite number >= 0, got ",
                                checks.grad_norm_rtol()));
  }
  if (!non_negative(checks.drift_tolerance())) {
    return Invalid(absl::StrCat("checks.drift_tolerance: must be a finite number >= 0, got ",
                                checks.drift_tolerance()));
  }
  if (!std::isfinite(checks.straggler_factor()) || checks.straggler_factor() <= 1) {
    return Invalid(absl::StrCat("checks.straggler_factor: must be > 1 (a rank this many times "
                                "slower than the median is a straggler), got ",
                                checks.straggler_factor()));
  }
  return absl::OkStatus();
}

// checks.preflight and its fraction.
absl::Status ValidatePreflight(const JobSpec& spec) {
  const v1::CheckSpec& checks = spec.checks();
  if (checks.has_preflight_min_fraction()) {
    const double fraction = checks.preflight_min_fraction();
    if (!std::isfinite(fraction) || fraction <= 0 || fraction >= 1) {
      return Invalid(absl::StrCat("checks.preflight_min_fraction: must be in (0, 1) (a worker "
                                  "below this fraction of the median is named), got ",
                                  fraction, "; omit it for the default ",
                                  kDefaultPreflightMinFraction));
    }
  }
  if (!checks.preflight()) return absl::OkStatus();
  if (spec.command_size() > 0) {
    return Invalid("checks.preflight: a command job runs no built-in check; drop checks.preflight "
                   "(run `ringleader doctor` on the workers instead)");
  }
  if (BackendOf(spec) != Backend::kGloo) {
    return Invalid(absl::StrCat("checks.preflight: runs on backend gloo only, got '",
                                spec.backend(), "'; drop checks.preflight"));
  }
  return absl::OkStatus();
}

// Restarts and periodic checkpoints.
absl::Status ValidateRecovery(const JobSpec& spec) {
  if (spec.max_restarts() > kMaxRestarts) {
    return Invalid(absl::StrCat("max_restarts: at most ", kMaxRestarts, ", got ",
                                spec.max_restarts(), " (0 = never restart)"));
  }
  if (spec.keep_last_checkpoints() < 1) {
    return Invalid("keep_last_checkpoints: must be >= 1 (omit it for the default 2)");
  }
  if (!spec.checkpoint_format().empty()) {
    RETURN_IF_ERROR(ParseCheckpointFormat(spec.checkpoint_format()).status());
  }
  if (CheckpointFormatOf(spec) == CheckpointFormat::kSharded &&
      !TraitsOf(StrategyOf(spec)).shards_optimizer_state) {
    return Invalid(
        "checkpoint_format: sharded: ddp holds everything on every rank; use consolidated");
  }
  if (spec.spares() > kMaxSpares) {
    return Invalid(absl::StrCat("spares: at most ", kMaxSpares, ", got ", spec.spares(),
                                " (hot spares held idle for this job; 0 = none)"));
  }
  if (spec.snapshot_interval_steps() > 0 && spec.disable_snapshots()) {
    return Invalid(absl::StrCat("snapshot_interval_steps: ", spec.snapshot_interval_steps(),
                                " with disable_snapshots: true; drop one of them"));
  }
  if (spec.snapshot_interval_steps() > 0 && StrategyOf(spec) != Strategy::kDdp) {
    return Invalid(absl::StrCat(
        "snapshot_interval_steps: snapshots in memory need strategy ddp (every rank holds the "
        "whole state), got '", spec.strategy(), "'; drop it (restarts resume from checkpoints)"));
  }
  if (spec.checkpoint_interval_steps() > 0 && spec.checkpoint_dir().empty()) {
    return Invalid(absl::StrCat("checkpoint_interval_steps: ", spec.checkpoint_interval_steps(),
                                " needs checkpoint_dir (a directory every rank's host can read, "
                                "where rank 0 writes); set checkpoint_dir or drop the interval"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJobSpec(const JobSpec& spec, const JobSpecLimits& limits) {
  if (const size_t bytes = spec.ByteSizeLong(); bytes > limits.max_spec_bytes) {
    return Invalid(absl::StrCat("the spec is ", bytes, " bytes serialized, over the limit of ",
                                limits.max_spec_bytes, ": shorten command, env or the lists"));
  }
  for (const auto& [field, path] :
       {std::make_pair("checkpoint_dir", &spec.checkpoint_dir()),
        std::make_pair("data.path", &spec.data().path()),
        std::make_pair("model.init_from", &spec.model().init_from())}) {
    if (path->size() > limits.max_path_bytes) {
      return Invalid(absl::StrCat(field, ": at most ", limits.max_path_bytes, " bytes, got ",
                                  path->size()));
    }
    if (path->find('\0') != std::string::npos) {
      return Invalid(absl::StrCat(field, ": must not contain NUL characters"));
    }
  }
  for (const auto& [field, mb] : {std::make_pair("sync.bucket_cap_mb", spec.sync().bucket_cap_mb()),
                                  std::make_pair("sync.first_bucket_mb",
                                                 spec.sync().first_bucket_mb())}) {
    if (mb > limits.max_bucket_mb) {
      return Invalid(absl::StrCat(field, ": at most ", limits.max_bucket_mb, " MB, got ", mb));
    }
  }
  if (spec.name().size() > kMaxNameLength) {
    return Invalid(
        absl::StrCat("name: at most ", kMaxNameLength, " characters, got ", spec.name().size()));
  }
  for (char c : spec.name()) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Invalid("name: must not contain control characters");
    }
  }
  if (spec.world_size() < 1 || spec.world_size() > limits.max_world_size) {
    return Invalid(absl::StrCat("world_size: must be between 1 and ", limits.max_world_size,
                                ", got ", spec.world_size()));
  }
  RETURN_IF_ERROR(ParseBackend(spec.backend()).status());
  RETURN_IF_ERROR(ParseStrategy(spec.strategy()).status());
  RETURN_IF_ERROR(ValidateStrategyCombination(spec));
  const std::string& dataset = spec.data().dataset();
  if (dataset != "fashion-mnist" && dataset != "synthetic") {
    return Invalid(absl::StrCat("data.dataset: unknown dataset '", dataset,
                                "' (expected fashion-mnist or synthetic)"));
  }
  RETURN_IF_ERROR(ValidateModel(spec, limits));
  RETURN_IF_ERROR(ValidateOptimizer(spec.optimizer()));
  RETURN_IF_ERROR(ValidateSync(spec.sync()));
  RETURN_IF_ERROR(ValidateChecks(spec.checks()));
  RETURN_IF_ERROR(ValidatePreflight(spec));
  if (spec.epochs() < 1 || spec.epochs() > limits.max_epochs) {
    return Invalid(
        absl::StrCat("epochs: must be between 1 and ", limits.max_epochs, ", got ", spec.epochs()));
  }
  if (spec.batch_size() < 1 || spec.batch_size() > limits.max_batch_size) {
    return Invalid(absl::StrCat("batch_size: must be between 1 and ", limits.max_batch_size,
                                ", got ", spec.batch_size()));
  }
  if (spec.collective_timeout_ms() < 100) {
    return Invalid(absl::StrCat("collective_timeout_ms: must be >= 100, got ",
                                spec.collective_timeout_ms(), " (omit it for the default 60000)"));
  }
  RETURN_IF_ERROR(ValidateRecovery(spec));
  RETURN_IF_ERROR(ValidateCommandSpec(spec));
  if (!spec.mixed_precision().empty()) {
    RETURN_IF_ERROR(ParsePrecision("mixed_precision", spec.mixed_precision()).status());
  }
  if (MixedPrecisionOf(spec) == Precision::kBf16 && BackendOf(spec) != Backend::kNccl) {
    return Invalid(absl::StrCat("mixed_precision: bf16 needs backend nccl (a GPU), got backend ",
                                spec.backend(), "; set backend: nccl or drop mixed_precision"));
  }
  return absl::OkStatus();
}

absl::Status ValidateStrategyCombination(const JobSpec& spec) {
  const Strategy strategy = StrategyOf(spec);
  const StrategyTraits& traits = TraitsOf(strategy);
  const std::string name = Name(strategy);
  if (!traits.shards_optimizer_state) return absl::OkStatus();
  // The sharding strategies shard the built-in trainer's state (CPU on gloo, GPU on nccl).
  if (!spec.command().empty()) {
    return Invalid(absl::StrCat(
        "strategy: ", name, " shards the built-in trainer's ", traits.sharded_state,
        ", and a command job runs your own program; drop strategy (your program chooses its own "
        "sharding) or command"));
  }
  if (!traits.shards_gradients) return absl::OkStatus();
  // zero2 and fsdp reduce-scatter zero2's fixed buckets (plan/zero2_plan.h).
  const v1::SyncSpec& sync = spec.sync();
  // Each bucket is split into world_size slices: a cap below one float per rank makes buckets
  // whose slices are mostly padding (and a reduce-scatter per parameter).
  for (const auto& [field, mb] : {std::make_pair("sync.bucket_cap_mb", sync.bucket_cap_mb()),
                                  std::make_pair("sync.first_bucket_mb", sync.first_bucket_mb())}) {
    const double floats = mb * (1 << 20) / sizeof(float);
    if (floats < spec.world_size()) {
      return Invalid(absl::StrFormat(
          "%s: strategy %s splits every bucket into world_size slices, and %g MB holds %.1f "
          "floats, fewer than the %u ranks; set it to at least %g",
          field, name, mb, floats, spec.world_size(),
          static_cast<double>(spec.world_size()) * sizeof(float) / (1 << 20)));
    }
  }
  if (sync.rebuild_buckets()) {
    return Invalid(absl::StrCat(
        "sync.rebuild_buckets: strategy ", name, " keeps its initial buckets for the whole "
        "run (they decide which rank owns which gradients); drop rebuild_buckets"));
  }
  if (sync.has_overlap() && !sync.overlap()) {
    return Invalid(absl::StrCat(
        "sync.overlap: strategy ", name, " reduce-scatters each bucket during backward to "
        "keep only two buckets of gradients; drop overlap: false or use strategy zero1"));
  }
  const v1::FaultSpec& faults = spec.model().faults();
  if (faults.bypass_sync() || faults.bypass_sync_all_ranks()) {
    return Invalid(absl::StrCat(
        "model.faults.bypass_sync: strategy ", name, " has no full local gradients to step "
        "with; use strategy ddp or zero1 for the bypass_sync faults"));
  }
  return absl::OkStatus();
}

std::string JobSpecFingerprint(const JobSpec& spec) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    spec.SerializeToCodedStream(&coded);
  }  // The coded stream flushes into `bytes` when it goes out of scope.
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;  // FNV-1a 64 prime
  }
  return absl::StrFormat("%016x", hash);
}

}  // namespace ringleader
