// Writes the binary seeds of fuzz/corpus/ with the project's own writers (the text seeds, YAML
// and the hand-made edge cases, are kept as files). Deterministic: running it again gives the
// same bytes.
//
//   bazel run //fuzz:write_seed_corpus -- fuzz/corpus     (a path relative to the repository)
//
// checkpoint/    a 4-3-2 model with buffers and momentum (what a job writes), an empty one, one
//                with attributes, a scalar and an empty tensor, and a cut-off one
// safetensors/   the same model exported (F32), a BF16/F16 file with metadata, an empty one
// idx/           tiny images and labels files, plain and gzipped, and an empty one
// job_spec/      serialized JobSpecs: the defaults, a command job, fault injection, bf16
// rpc_handler/   RPC sequences a real coordinator answered: a job's whole life on two workers,
//                a restart after a failed rank, a cancel, a lost worker, logs
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/export.h"
#include "checkpoint/little_endian.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/rpc/rpc_handler.h"
#include "coordinator/store/job_store.h"
#include "fuzz/rpc_sequence.h"
#include "proto/ringleader.pb.h"
#include "worker/checkpoint/training_state.h"
#include "worker/trainer/mlp.h"
#include "worker/trainer/sgd.h"

namespace ringleader {
namespace {

namespace fs = std::filesystem;

void Check(const absl::Status& status, const std::string& what) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", what.c_str(), status.ToString().c_str());
    std::exit(1);
  }
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::printf("wrote %s (%zu bytes)\n", path.c_str(), bytes.size());
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// ---- checkpoint/ and safetensors/ ----

// The model the checkpoint and safetensors fuzz targets load files into: 4-3-2 with buffers.
CheckpointData ModelCheckpoint() {
  Mlp model({4, 3, 2}, /*seed=*/7, MlpOptions{/*with_buffers=*/true});
  SgdOptions options;
  options.momentum = 0.9;
  SgdOptimizer optimizer(model.parameters(), options);
  for (const ParameterInfo& p : model.parameters()) {
    std::vector<float> buffer(p.count);
    for (size_t k = 0; k < p.count; ++k) buffer[k] = -0.125f * static_cast<float>(k);
    Check(optimizer.RestoreMomentumBuffer(p.name, std::move(buffer)), "momentum");
  }
  return CaptureTrainingState(&model, optimizer, /*step=*/12, /*epoch=*/1, "0123456789abcdef");
}

void WriteCheckpoints(const fs::path& dir) {
  const fs::path scratch = fs::temp_directory_path() / "ringleader-seed-corpus.ckpt";
  auto write = [&](const std::string& name, const CheckpointData& data) {
    Check(WriteCheckpoint(scratch.string(), data), name);
    WriteFile(dir / name, ReadFile(scratch));
    fs::remove(scratch);
  };
  const CheckpointData model = ModelCheckpoint();
  write("model-4-3-2.ckpt", model);
  write("empty.ckpt", CheckpointData{});
  CheckpointData odd;
  odd.step = 3;
  odd.epoch = 1;
  odd.spec_fingerprint = "fedcba9876543210";
  odd.attributes = {{"data.order", "shuffled"}, {"note", ""}};
  odd.tensors.push_back({"scalar", {}, {1.5f}});
  odd.tensors.push_back({"empty", {0, 3}, {}});
  odd.tensors.push_back({"row", {1, 2}, {-0.0f, 2.0f}});
  write("attributes-scalar-empty.ckpt", odd);
  // Cut off inside the first tensor.
  Check(WriteCheckpoint(scratch.string(), model), "model");
  WriteFile(dir / "truncated.ckpt", ReadFile(scratch).substr(0, 80));
  fs::remove(scratch);
}

// A safetensors file from its JSON header and data, as another writer (PyTorch) would make it.
std::string Safetensors(const std::string& header, const std::string& data) {
  std::string bytes;
  AppendLittleEndian<uint64_t>(&bytes, header.size());
  return bytes + header + data;
}

void WriteSafetensorsSeeds(const fs::path& dir) {
  const fs::path scratch = fs::temp_directory_path() / "ringleader-seed-corpus.safetensors";
  Check(ExportSafetensors(ModelCheckpoint(), scratch.string()), "export");
  WriteFile(dir / "model-4-3-2.safetensors", ReadFile(scratch));
  fs::remove(scratch);
  // BF16 (1.0, -2.0) and F16 (0.5, inf, a subnormal) with metadata; a scalar F32.
  std::string data;
  for (uint16_t v : {0x3f80, 0xc000, 0x3800, 0x7c00, 0x0001}) AppendLittleEndian<uint16_t>(&data, v);
  AppendFloat32(&data, 3.25f);
  WriteFile(dir / "bf16-f16-metadata.safetensors",
            Safetensors(R"({"__metadata__":{"format":"pt"},)"
                        R"("a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F16","shape":[3,1],"data_offsets":[4,10]},)"
                        R"("s":{"dtype":"F32","shape":[],"data_offsets":[10,14]}})",
                        data));
  WriteFile(dir / "empty.safetensors", Safetensors("{}      ", ""));
}

// ---- idx/ ----

std::string BigEndian32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string Gzip(const std::string& bytes) {
  const fs::path scratch = fs::temp_directory_path() / "ringleader-seed-corpus.gz";
  gzFile f = gzopen(scratch.c_str(), "wb9");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  std::string out = ReadFile(scratch);
  fs::remove(scratch);
  // Bytes 4..7 of a gzip header are the modification time: zero for the same bytes every run.
  for (int i = 4; i < 8 && static_cast<size_t>(i) < out.size(); ++i) out[i] = 0;
  return out;
}

void WriteIdx(const fs::path& dir) {
  std::string images = BigEndian32(0x00000803) + BigEndian32(3) + BigEndian32(2) + BigEndian32(2);
  for (int i = 0; i < 12; ++i) images.push_back(static_cast<char>(i * 21));
  std::string labels = BigEndian32(0x00000801) + BigEndian32(3);
  for (char label : {0, 9, 4}) labels.push_back(label);
  WriteFile(dir / "images-3x2x2-idx3-ubyte", images);
  WriteFile(dir / "labels-3-idx1-ubyte", labels);
  WriteFile(dir / "images-3x2x2-idx3-ubyte.gz", Gzip(images));
  WriteFile(dir / "labels-3-idx1-ubyte.gz", Gzip(labels));
  WriteFile(dir / "images-0x28x28-idx3-ubyte",
            BigEndian32(0x00000803) + BigEndian32(0) + BigEndian32(28) + BigEndian32(28));
}

// ---- job_spec/ ----

void WriteJobSpecs(const fs::path& dir) {
  v1::JobSpec defaults;
  defaults.set_world_size(2);
  ApplyJobSpecDefaults(&defaults);
  WriteFile(dir / "defaults.pb", defaults.SerializeAsString());

  v1::JobSpec command = defaults;
  command.set_name("pytorch");
  command.add_command("/usr/bin/python3");
  command.add_command("train.py");
  (*command.mutable_env())["PYTHONUNBUFFERED"] = "1";
  command.set_workdir("/srv/train");
  WriteFile(dir / "command.pb", command.SerializeAsString());

  v1::JobSpec faults = defaults;
  faults.mutable_model()->add_frozen_parameters("fc1.weight");
  v1::FaultSpec* f = faults.mutable_model()->mutable_faults();
  f->set_bypass_sync(true);
  f->set_bypass_sync_rank(1);
  f->add_unused_parameters_on_rank("fc2.bias");
  f->set_unused_parameter_rank(0);
  f->set_crash_at_step(3);
  f->set_crash_rank(1);
  faults.mutable_checks()->set_on_desync("warn");
  WriteFile(dir / "faults.pb", faults.SerializeAsString());

  v1::JobSpec bf16 = defaults;
  bf16.set_backend("nccl");
  bf16.set_mixed_precision("bf16");
  bf16.mutable_sync()->set_comm_dtype("bf16");
  bf16.mutable_optimizer()->set_nesterov(true);
  bf16.set_checkpoint_dir("/ckpt");
  bf16.set_checkpoint_interval_steps(100);
  WriteFile(dir / "nccl-bf16.pb", bf16.SerializeAsString());

  v1::JobSpec bare;  // nothing set: defaults not applied, world_size 0
  WriteFile(dir / "unset.pb", bare.SerializeAsString());
}

// ---- rpc_handler/ ----

// Runs RPCs on a real coordinator (fake clock) and records them as a fuzz input.
class Recorder {
 public:
  explicit Recorder(uint8_t options) : coordinator_(Options(options), &clock_, &store_),
                                       handler_(&coordinator_) {
    bytes_.push_back(static_cast<char>(options));
  }
  static CoordinatorOptions Options(uint8_t options) {
    CoordinatorOptions o;
    o.allow_fault_injection = (options & fuzz::kAllowFaultInjection) != 0;
    return o;
  }
  ~Recorder() { coordinator_.Shutdown(); }

  template <typename Request, typename Response>
  Response Call(fuzz::Operation op, const Request& request,
                absl::Status (RpcHandler::*method)(const Request&, Response*)) {
    fuzz::AppendRecord(&bytes_, op, request.SerializeAsString());
    Response response;
    (handler_.*method)(request, &response).IgnoreError();
    return response;
  }
  template <typename Request, typename Response>
  Response Poll(fuzz::Operation op, const Request& request,
                void (RpcHandler::*method)(const Request&, Response*, StatusCallback)) {
    fuzz::AppendRecord(&bytes_, op, request.SerializeAsString());
    auto response = std::make_shared<Response>();
    (handler_.*method)(request, response.get(), [response](absl::Status) {});
    return *response;
  }
  void Advance(uint32_t ms) {
    fuzz::AppendRecord(&bytes_, fuzz::kAdvanceClock, fuzz::Milliseconds(ms));
    clock_.Advance(absl::Milliseconds(ms));
    coordinator_.CheckStaleness();
  }

  std::string Register(const std::string& name, uint64_t incarnation = 1) {
    v1::RegisterWorkerRequest request;
    request.set_name(name);
    request.set_host("host-" + name);
    request.add_devices()->set_kind("cpu");
    request.set_incarnation(incarnation);
    return Call(fuzz::kRegisterWorker, request, &RpcHandler::RegisterWorker).worker_id();
  }
  v1::SubmitJobResponse Submit(const v1::JobSpec& spec) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    return Call(fuzz::kSubmitJob, request, &RpcHandler::SubmitJob);
  }
  v1::Assignment Wait(const std::string& worker, uint32_t wait_ms = 0) {
    v1::WaitAssignmentRequest request;
    request.set_worker_id(worker);
    request.set_incarnation(1);
    request.set_wait_timeout_ms(wait_ms);
    return Poll(fuzz::kWaitAssignment, request, &RpcHandler::WaitAssignment).assignment();
  }
  void Join(const v1::Assignment& a, const std::string& worker) {
    v1::JoinJobRequest request;
    request.set_job_id(a.job_id());
    request.set_generation(a.generation());
    request.set_rank(a.rank());
    request.set_worker_id(worker);
    request.set_spec_fingerprint(a.spec_fingerprint());
    Call(fuzz::kJoinJob, request, &RpcHandler::JoinJob);
  }
  void Heartbeat(const std::string& worker, const std::string& state = "running") {
    v1::HeartbeatRequest request;
    request.set_worker_id(worker);
    request.set_incarnation(1);
    request.set_rank_process_state(state);
    Call(fuzz::kHeartbeat, request, &RpcHandler::Heartbeat);
  }
  void Report(const v1::Assignment& a, uint64_t step, double local_norm, double synced_norm,
              v1::RankPhase phase = v1::RANK_PHASE_TRAINING) {
    v1::ReportProgressRequest request;
    request.set_job_id(a.job_id());
    request.set_generation(a.generation());
    request.set_rank(a.rank());
    v1::StepReport* s = request.add_steps();
    s->set_step(step);
    s->set_epoch(0);
    s->set_loss(2.3 - 0.1 * static_cast<double>(step));
    s->set_local_grad_norm(local_norm);
    s->set_synced_grad_norm(synced_norm);
    s->set_step_ms(12);
    s->set_compute_ms(8);
    s->set_comm_ms(3);
    s->set_collective_digest(0x1234 + step);
    s->set_collectives(2);
    s->set_total_steps(4);
    if (step % 2 == 0) {
      s->set_has_drift(true);
      s->set_drift(0);
      s->set_drift_parameter("fc1.weight");
    }
    request.mutable_activity()->set_phase(phase);
    request.mutable_activity()->set_detail(absl::StrCat("step ", step));
    if (step == 4) {
      v1::EpochReport* e = request.add_epochs();
      e->set_epoch(0);
      e->set_test_accuracy(0.8);
      e->set_test_loss(0.5);
      e->set_train_loss(0.6);
    }
    Call(fuzz::kReportProgress, request, &RpcHandler::ReportProgress);
  }
  void Finish(const v1::Assignment& a, bool ok, const std::string& error = "") {
    v1::FinishRankRequest request;
    request.set_job_id(a.job_id());
    request.set_generation(a.generation());
    request.set_rank(a.rank());
    request.set_ok(ok);
    request.set_error(error);
    if (ok && a.rank() == 0) request.set_checkpoint_path("/ckpt/job-1/final.ckpt");
    if (!ok) {
      v1::RankFailure* failure = request.mutable_failure();
      failure->set_kind(v1::RankFailure::PEER_CLOSED);
      failure->set_has_peer(true);
      failure->set_peer_rank(1 - a.rank());
      failure->set_peer_address("127.0.0.1:41729");
    }
    Call(fuzz::kFinishRank, request, &RpcHandler::FinishRank);
  }
  void Logs(const v1::Assignment& a, uint64_t offset, const std::string& data) {
    v1::AppendLogsRequest request;
    request.set_job_id(a.job_id());
    request.set_generation(a.generation());
    request.set_rank(a.rank());
    request.set_offset(offset);
    request.set_data(data);
    Call(fuzz::kAppendLogs, request, &RpcHandler::AppendLogs);
  }
  // Reads the job back every way a client can; prints its state and generation.
  void Queries(const std::string& job) {
    v1::GetJobRequest get;
    get.set_job_id(job);
    const v1::JobStatus status = Call(fuzz::kGetJob, get, &RpcHandler::GetJob).job();
    std::printf("  %s: %s, generation %llu, %d alarm(s), last transition: %s\n", job.c_str(),
                v1::JobState_Name(status.state()).c_str(),
                static_cast<unsigned long long>(status.generation()), status.alarms_size(),
                status.transitions_size() > 0
                    ? status.transitions(status.transitions_size() - 1).ShortDebugString().c_str()
                    : "none");
    v1::GetJobMetricsRequest metrics;
    metrics.set_job_id(job);
    Call(fuzz::kGetJobMetrics, metrics, &RpcHandler::GetJobMetrics);
    Call(fuzz::kListJobs, v1::ListJobsRequest(), &RpcHandler::ListJobs);
    Call(fuzz::kListWorkers, v1::ListWorkersRequest(), &RpcHandler::ListWorkers);
    v1::WatchJobRequest watch;
    watch.set_job_id(job);
    watch.set_after_version(1);
    watch.set_wait_timeout_ms(500);
    Poll(fuzz::kWatchJob, watch, &RpcHandler::WatchJob);
    v1::GetLogsRequest logs;
    logs.set_job_id(job);
    v1::LogCursor* cursor = logs.add_after();
    cursor->set_rank(0);
    cursor->set_offset(3);
    logs.set_wait_timeout_ms(1000);
    Poll(fuzz::kGetLogs, logs, &RpcHandler::GetLogs);
  }

  const std::string& bytes() const { return bytes_; }

 private:
  FakeClock clock_;
  InMemoryJobStore store_;
  Coordinator coordinator_;
  RpcHandler handler_;
  std::string bytes_;
};

v1::JobSpec SmallSpec(uint32_t world_size, uint32_t max_restarts) {
  v1::JobSpec spec;
  spec.set_name("fuzz");
  spec.set_world_size(world_size);
  spec.set_max_restarts(max_restarts);
  spec.set_epochs(1);
  spec.mutable_data()->set_dataset("synthetic");
  spec.mutable_model()->add_layers(4);
  spec.mutable_model()->add_layers(3);
  spec.mutable_model()->add_layers(2);
  return spec;
}

// Two workers run a 2-rank job to the end: rendezvous through the key-value store, steps,
// an epoch, logs, both ranks finish.
std::string WholeJob() {
  Recorder r(fuzz::kCountCalls);
  const std::string a = r.Register("a");
  const std::string b = r.Register("b");
  const v1::SubmitJobResponse job = r.Submit(SmallSpec(2, 0));
  const v1::Assignment ra = r.Wait(a);
  const v1::Assignment rb = r.Wait(b);
  r.Join(ra, a);
  r.Join(rb, b);
  v1::KvSetRequest set;
  set.set_job_id(job.job_id());
  set.set_generation(ra.generation());
  set.set_key("rank/0");
  set.set_value("127.0.0.1:41729;127.0.0.1:41730");
  r.Call(fuzz::kKvSet, set, &RpcHandler::KvSet);
  set.set_key("rank/1");
  set.set_value("127.0.0.1:41731;127.0.0.1:41732");
  r.Call(fuzz::kKvSet, set, &RpcHandler::KvSet);
  v1::KvGetRequest get;
  get.set_job_id(job.job_id());
  get.set_generation(ra.generation());
  get.set_key("rank/1");
  get.set_wait_timeout_ms(1000);
  r.Poll(fuzz::kKvGet, get, &RpcHandler::KvGet);
  v1::KvGetManyRequest many;
  many.set_job_id(job.job_id());
  many.set_generation(ra.generation());
  many.add_keys("rank/0");
  many.add_keys("rank/1");
  many.set_parts(2);
  many.add_part_index(1);
  many.add_part_index(0);
  many.set_wait_timeout_ms(1000);
  r.Poll(fuzz::kKvGetMany, many, &RpcHandler::KvGetMany);
  for (uint64_t step = 1; step <= 4; ++step) {
    r.Report(ra, step, 1.4, 1.3);
    r.Report(rb, step, 1.2, 1.3);
    r.Advance(100);
  }
  r.Logs(ra, 0, "epoch 0: loss 0.6\n");
  r.Logs(rb, 0, "epoch 0: loss 0.6\n");
  r.Heartbeat(a);
  r.Heartbeat(b);
  r.Finish(ra, true);
  r.Finish(rb, true);
  r.Queries(job.job_id());
  return r.bytes();
}

// A rank fails; the job restarts as generation 2 after its backoff and is then cancelled.
std::string RestartThenCancel() {
  Recorder r(0);
  const std::string a = r.Register("a");
  const std::string b = r.Register("b");
  const v1::SubmitJobResponse job = r.Submit(SmallSpec(2, 1));
  const v1::Assignment ra = r.Wait(a);
  const v1::Assignment rb = r.Wait(b);
  r.Join(ra, a);
  r.Join(rb, b);
  r.Report(ra, 1, 1.4, 1.3, v1::RANK_PHASE_CONNECTING);
  r.Finish(rb, false, "gloo: connection closed by peer");
  r.Heartbeat(a);
  r.Advance(1500);
  const v1::Assignment ra2 = r.Wait(a, 200);
  r.Wait(b, 200);
  r.Join(ra2, a);
  r.Report(ra, 2, 1.0, 1.0);  // stale generation
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.job_id());
  cancel.set_reason("operator");
  r.Call(fuzz::kCancelJob, cancel, &RpcHandler::CancelJob);
  r.Heartbeat(a);
  r.Queries(job.job_id());
  return r.bytes();
}

// Fault injection allowed: rank 1 bypasses sync (judged NOT_SYNCHRONIZED); worker b then goes
// silent and is declared lost.
std::string DesyncAndLostWorker() {
  Recorder r(fuzz::kAllowFaultInjection);
  const std::string a = r.Register("a");
  const std::string b = r.Register("b");
  v1::JobSpec spec = SmallSpec(2, 0);
  spec.mutable_model()->mutable_faults()->set_bypass_sync(true);
  spec.mutable_model()->mutable_faults()->set_bypass_sync_rank(1);
  spec.mutable_checks()->set_on_desync("warn");
  const v1::SubmitJobResponse job = r.Submit(spec);
  const v1::Assignment ra = r.Wait(a);
  const v1::Assignment rb = r.Wait(b);
  r.Join(ra, a);
  r.Join(rb, b);
  r.Report(ra, 1, 1.4, 1.3);
  r.Report(rb, 1, 1.38, 1.38);
  r.Advance(6000);
  r.Heartbeat(a);
  r.Advance(6000);
  r.Heartbeat(b, "stopped");
  r.Queries(job.job_id());
  return r.bytes();
}

// Every request kind once, with unknown ids: the error paths.
std::string UnknownIds() {
  Recorder r(0);
  v1::JobSpec spec;  // world_size 0: refused
  r.Submit(spec);
  r.Heartbeat("w-9");
  r.Wait("w-9");
  v1::Assignment ghost;
  ghost.set_job_id("job-9");
  ghost.set_generation(1);
  r.Join(ghost, "w-9");
  r.Report(ghost, 1, 1, 1);
  r.Logs(ghost, 5, "x");
  r.Finish(ghost, false, "?");
  r.Queries("job-9");
  return r.bytes();
}

void WriteRpcSequences(const fs::path& dir) {
  WriteFile(dir / "whole-job.bin", WholeJob());
  WriteFile(dir / "restart-then-cancel.bin", RestartThenCancel());
  WriteFile(dir / "desync-and-lost-worker.bin", DesyncAndLostWorker());
  WriteFile(dir / "unknown-ids.bin", UnknownIds());
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (e.g. fuzz/corpus)\n", argv[0]);
    return 2;
  }
  std::filesystem::path root = argv[1];
  // Under `bazel run` the working directory is the runfiles tree: resolve against the repository.
  if (root.is_relative()) {
    if (const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY")) root = workspace / root;
  }
  ringleader::WriteCheckpoints(root / "checkpoint");
  ringleader::WriteSafetensorsSeeds(root / "safetensors");
  ringleader::WriteIdx(root / "idx");
  ringleader::WriteJobSpecs(root / "job_spec");
  ringleader::WriteRpcSequences(root / "rpc_handler");
  return 0;
}
