// The coordinator at scale over gRPC on loopback: the server main.cc runs (CoordinatorServer on
// 127.0.0.1:0: RpcHandler with RpcStats, in-memory job store, real clock, the staleness ticker)
// in this process, in plaintext (main.cc's --insecure; TLS is not measured), driven by real gRPC
// clients. For each world size N:
//   (a) N workers RegisterWorker and park a WaitAssignment long poll, one job of world size N is
//       submitted (JobService.SubmitJob) and every poll answered with its assignment, every rank
//       JoinJobs, and the ranks rendezvous as KvGlooStore's batched rendezvous does: per rank
//       KvSet "rank_<r>" (hostname), one KvGetMany of the lower ranks' hostnames, KvSet "<r>"
//       (its blob of N-1 pair addresses), one KvGetMany of every peer's blob cut to r's address
//       (KvGetMany parts);
//   (b) heartbeats/s of the N workers from `--threads` client threads, for `--seconds`: first
//       as unary Heartbeat calls (the clients by channel), then on heartbeat streams, one per
//       worker as each daemon holds one (N more clients over the same channels), and then on the
//       same streams and unary again with every worker's beat in flight at all times, as
//       independent daemons send them (pipelined_heartbeats.h); each with its ratio to unary;
//   (c) ReportProgress rank-steps/s of the N ranks of the running job, batches of 20 steps.
//
// Clients: the workers' own GrpcCoordinatorClient (retries off: a failed call fails the run;
// every call has a deadline), one per channel, `--channels` channels, each on its own TCP
// connection (local subchannel pool), connected before anything is timed; worker / rank i uses
// channel i % channels. Blocking calls run on a pool of `--threads` client threads. The
// WaitAssignment long polls are the one exception: N of them must be parked at once, which a
// bounded pool of blocking threads cannot do, so they go through the stub's callback API (raw
// stub, same channels, same deadline rule as the client: wait + 5 s).
//
// As in load_benchmark, the rendezvous runs phase by phase (every rank sets its hostname, then
// every rank gets, ...), so every KvGetMany finds its keys: the figures are the cost of the
// calls, not of waiting for the slowest rank. Client and server share this machine's cores: the
// CPU figures are the whole process (both ends of every call); for (b) and (c) the part spent in
// the calling threads is shown too (the client's side of the call, roughly: the rest is the
// server's threads and gRPC's own).
//
// Figures only, no assertions; goals of the "Coordinator at scale" item over gRPC: 1024 ranks
// register+assign+rendezvous < 5 s on 2 cores, heartbeats >= 50 000/s. Any failed call (or an
// answer that is not what was set) stops the run with exit status 1.
//
//   bazel run -c opt //coordinator/bench:grpc_load_benchmark_grpc -- --ranks=64,256,1024
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/bench/load_benchmark_util.h"
#include "coordinator/bench/pipelined_heartbeats.h"
#include "coordinator/server/coordinator_server.h"
#include "grpcpp/grpcpp.h"
#include "proto/ringleader.grpc.pb.h"
#include "proto/ringleader.pb.h"
#include "worker/coordinator_client/grpc_coordinator_client.h"

ABSL_FLAG(std::vector<std::string>, ranks, std::vector<std::string>({"64", "256", "1024"}),
          "World sizes to measure, comma-separated.");
ABSL_FLAG(int, threads, 8, "Client threads making the blocking calls.");
ABSL_FLAG(int, channels, 8, "gRPC channels (one TCP connection each) the clients share.");
ABSL_FLAG(double, seconds, 2.0, "How long (b) and (c) run.");
ABSL_FLAG(int, address_bytes, 136,
          "Bytes of one gloo pair address (gloo's tcp Address: sockaddr_storage + sequence).");
ABSL_FLAG(absl::Duration, call_timeout, absl::Seconds(30), "Deadline of every non-blocking call.");
ABSL_FLAG(absl::Duration, wait_timeout, absl::Seconds(60),
          "wait_timeout of the long polls (WaitAssignment, KvGetMany); their deadline is 5 s "
          "longer, as GrpcCoordinatorClient sets it.");
ABSL_FLAG(bool, mutex_deadlock_detection, true,
          "Leave absl::Mutex deadlock detection as main.cc runs (Debian's abseil is built "
          "without NDEBUG, so it is on: a global lock graph updated on lock acquisitions); "
          "false turns it off (absl::SetMutexDeadlockDetectionMode kIgnore) to measure its cost.");

namespace ringleader {
namespace {

using bench::BlobByte;
using bench::Check;
using bench::Checked;
using bench::CpuPerCall;
using bench::CpuSeconds;
using bench::Expect;
using bench::Fail;
using bench::Hostname;
using bench::kStepsPerReport;
using bench::Rate;
using bench::StepOf;
using bench::Thousands;

constexpr absl::Duration kLongPollMargin = absl::Seconds(5);  // GrpcCoordinatorClient's default

absl::Status FromGrpc(const grpc::Status& status, const char* rpc) {
  return FromGrpcStatus(status, rpc);
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

// Runs fn(i) for i in [0, n) on --threads threads, each taking the next i.
void ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < absl::GetFlag(FLAGS_threads); ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) fn(i);
    });
  }
  for (std::thread& thread : pool) thread.join();
}

// The server of main.cc with its core, in process, on 127.0.0.1:0; and the clients' channels.
struct Cluster {
  std::unique_ptr<CoordinatorServer> server;

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<GrpcCoordinatorClient>> clients;  // by channel; unary heartbeats
  // By worker, on channel w % channels: each holds its worker's heartbeat stream.
  std::vector<std::unique_ptr<GrpcCoordinatorClient>> streaming;
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs;  // by channel (long polls)
  std::unique_ptr<v1::JobService::Stub> jobs;                   // on channel 0

  GrpcCoordinatorClient& client(size_t i) { return *clients[i % clients.size()]; }
  v1::WorkerService::Stub& stub(size_t i) { return *stubs[i % stubs.size()]; }

  // The job, once assigned and joined.
  std::vector<std::string> workers;         // ids, by worker
  std::vector<std::string> rank_workers;    // ids, by rank
  std::vector<v1::Assignment> assignments;  // by rank
  std::string job_id;
  uint64_t generation = 0;

  ~Cluster() {
    jobs.reset();
    stubs.clear();
    streaming.clear();
    clients.clear();  // cancels nothing in flight: every call has returned
    channels.clear();
    if (server != nullptr) server->Shutdown(absl::Now() + absl::Seconds(5));
  }
};

std::unique_ptr<Cluster> StartCluster(uint32_t n) {
  auto cluster = std::make_unique<Cluster>();
  CoordinatorServerOptions options;
  options.instance.coordinator = bench::LoadOptions(n);
  options.listen = "127.0.0.1:0";
  cluster->server =
      Checked(CoordinatorServer::Start(std::move(options)), "CoordinatorServer::Start");

  GrpcCoordinatorClientOptions client_options;
  client_options.call_timeout = absl::GetFlag(FLAGS_call_timeout);
  client_options.long_poll_margin = kLongPollMargin;
  client_options.retry.max_attempts = 1;  // a failure is reported, never retried away
  GrpcCoordinatorClientOptions streaming_options = client_options;
  client_options.heartbeat_stream = false;
  for (int c = 0; c < absl::GetFlag(FLAGS_channels); ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);  // as GrpcCoordinatorClient::Create
    // Channels with equal arguments share one connection through the global subchannel pool;
    // these are meant to be separate connections, as separate worker processes have.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
        cluster->server->address(), grpc::InsecureChannelCredentials(), args);
    Expect(channel->WaitForConnected(DeadlineIn(absl::Seconds(10))),
           absl::StrCat("channel ", c, " connecting to ", cluster->server->address()));
    cluster->channels.push_back(channel);
    cluster->clients.push_back(std::make_unique<GrpcCoordinatorClient>(channel, client_options));
    cluster->stubs.push_back(v1::WorkerService::NewStub(channel));
  }
  cluster->jobs = v1::JobService::NewStub(cluster->channels[0]);
  for (uint32_t w = 0; w < n; ++w) {
    cluster->streaming.push_back(std::make_unique<GrpcCoordinatorClient>(
        cluster->channels[w % cluster->channels.size()], streaming_options));
  }
  return cluster;
}

// Call and byte counts of a phase.
struct Tally {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> bytes_sent{0};      // values in requests
  std::atomic<uint64_t> bytes_answered{0};  // values in answers
};

std::string Blob(uint32_t n, uint32_t r) {
  return bench::Blob(n, r, static_cast<size_t>(absl::GetFlag(FLAGS_address_bytes)));
}
uint32_t WaitMs() {
  return static_cast<uint32_t>(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_wait_timeout)));
}

struct Phases {
  absl::Duration registered, assigned, joined;                            // setup
  absl::Duration hostnames_set, hostnames_got, blobs_set, addresses_got;  // rendezvous
  absl::Duration setup() const { return registered + assigned + joined; }
  absl::Duration rendezvous() const {
    return hostnames_set + hostnames_got + blobs_set + addresses_got;
  }
};

// (a), up to the job running: register, park the polls, submit, every poll answered, join.
void StartJob(Cluster& cluster, uint32_t n, Phases* phases, Tally* tally) {
  cluster.workers.assign(n, "");
  cluster.rank_workers.assign(n, "");
  cluster.assignments.assign(n, v1::Assignment());
  v1::Device device;
  device.set_kind("cpu");

  absl::Time start = absl::Now();
  ParallelFor(n, [&](size_t w) {
    v1::RegisterWorkerRequest request;
    request.set_name(absl::StrCat("worker-", w));
    request.set_host(Hostname(static_cast<uint32_t>(w)));
    *request.add_devices() = device;
    request.set_incarnation(w + 1);
    cluster.workers[w] =
        Checked(cluster.client(w).RegisterWorker(request), "RegisterWorker").worker_id();
    ++tally->calls;
  });
  phases->registered = absl::Now() - start;

  // Every worker's long poll, parked at once through the callback API.
  start = absl::Now();
  struct Poll {
    grpc::ClientContext context;
    v1::WaitAssignmentRequest request;
    v1::WaitAssignmentResponse response;
  };
  std::unique_ptr<Poll[]> polls(new Poll[n]);
  // Shared with the callbacks, so it outlives the last one's unlock.
  struct Answers {
    absl::Mutex mu;
    uint32_t count ABSL_GUARDED_BY(mu) = 0;
    absl::Status first_error ABSL_GUARDED_BY(mu);
  };
  auto answers = std::make_shared<Answers>();
  for (uint32_t w = 0; w < n; ++w) {
    Poll& poll = polls[w];
    poll.request.set_worker_id(cluster.workers[w]);
    poll.request.set_incarnation(w + 1);
    poll.request.set_wait_timeout_ms(WaitMs());
    poll.context.set_deadline(DeadlineIn(absl::GetFlag(FLAGS_wait_timeout) + kLongPollMargin));
    cluster.stub(w).async()->WaitAssignment(
        &poll.context, &poll.request, &poll.response, [answers, &poll](grpc::Status status) {
          absl::MutexLock lock(&answers->mu);
          absl::Status& error = answers->first_error;
          if (!status.ok() && error.ok()) error = FromGrpc(status, "WaitAssignment");
          if (status.ok() && !poll.response.has_assignment() && error.ok()) {
            error = absl::DeadlineExceededError("WaitAssignment: no assignment");
          }
          ++answers->count;
        });
  }
  {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(absl::GetFlag(FLAGS_call_timeout)));
    v1::SubmitJobRequest request;
    request.mutable_spec()->set_name("load");
    request.mutable_spec()->set_world_size(n);
    v1::SubmitJobResponse response;
    Check(FromGrpc(cluster.jobs->SubmitJob(&context, request, &response), "SubmitJob"),
          "SubmitJob");
    cluster.job_id = response.job_id();
  }
  {
    absl::MutexLock lock(&answers->mu);
    Answers* a = answers.get();
    auto all = [a, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return a->count == n; };
    // Bounded: every poll has its own deadline; this is only a guard above them.
    if (!answers->mu.AwaitWithTimeout(absl::Condition(&all),
                                      absl::GetFlag(FLAGS_wait_timeout) + 2 * kLongPollMargin)) {
      Fail(absl::DeadlineExceededError(absl::StrCat(answers->count, " of ", n, " answered")),
           "WaitAssignment");
    }
    Check(answers->first_error, "WaitAssignment");
  }
  tally->calls += n + 1;
  for (uint32_t w = 0; w < n; ++w) {
    const v1::Assignment& a = polls[w].response.assignment();
    Expect(a.job_id() == cluster.job_id && a.world_size() == n && a.rank() < n &&
               cluster.rank_workers[a.rank()].empty(),
           absl::StrCat("assignment of worker ", w));
    cluster.rank_workers[a.rank()] = cluster.workers[w];
    cluster.assignments[a.rank()] = a;
    cluster.generation = a.generation();
  }
  phases->assigned = absl::Now() - start;

  start = absl::Now();
  ParallelFor(n, [&](size_t r) {
    const v1::Assignment& a = cluster.assignments[r];
    v1::JoinJobRequest request;
    request.set_job_id(a.job_id());
    request.set_generation(a.generation());
    request.set_rank(a.rank());
    request.set_worker_id(cluster.rank_workers[r]);
    request.set_spec_fingerprint(a.spec_fingerprint());
    Checked(cluster.client(r).JoinJob(request), absl::StrCat("JoinJob rank ", r));
    ++tally->calls;
  });
  phases->joined = absl::Now() - start;
}

// (a), the rendezvous: KvGlooStore's batched calls, phase by phase.
void Rendezvous(Cluster& cluster, uint32_t n, Phases* phases, Tally* tally) {
  const std::string prefix = bench::KvPrefix(cluster.job_id, cluster.generation);
  const size_t address_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_address_bytes));
  auto set = [&](size_t r, const std::string& key, std::string value) {
    v1::KvSetRequest request;
    request.set_job_id(cluster.job_id);
    request.set_generation(cluster.generation);
    request.set_key(key);
    tally->bytes_sent += value.size();
    request.set_value(std::move(value));
    Checked(cluster.client(r).KvSet(request), absl::StrCat("KvSet ", key));
    ++tally->calls;
  };
  auto get_many = [&](size_t r, v1::KvGetManyRequest* request) {
    request->set_job_id(cluster.job_id);
    request->set_generation(cluster.generation);
    request->set_wait_timeout_ms(WaitMs());
    v1::KvGetManyResponse response =
        Checked(cluster.client(r).KvGetMany(*request), absl::StrCat("KvGetMany of rank ", r));
    ++tally->calls;
    Expect(response.values_size() == request->keys_size(), absl::StrCat("KvGetMany rank ", r));
    for (const std::string& value : response.values()) tally->bytes_answered += value.size();
    return response;
  };

  absl::Time start = absl::Now();
  ParallelFor(n, [&](size_t r) {
    set(r, absl::StrCat(prefix, "rank_", r), Hostname(static_cast<uint32_t>(r)));
  });
  phases->hostnames_set = absl::Now() - start;

  start = absl::Now();
  ParallelFor(n - 1, [&](size_t i) {
    const size_t r = i + 1;  // rank 0 has no lower rank
    v1::KvGetManyRequest request;
    for (std::string& key : bench::HostnameKeys(prefix, static_cast<uint32_t>(r))) {
      request.add_keys(std::move(key));
    }
    v1::KvGetManyResponse response = get_many(r, &request);
    for (size_t j = 0; j < r; ++j) {
      Expect(response.values(static_cast<int>(j)) == Hostname(static_cast<uint32_t>(j)),
             absl::StrCat("hostname of rank ", j, " for rank ", r));
    }
  });
  phases->hostnames_got = absl::Now() - start;

  start = absl::Now();
  ParallelFor(
      n, [&](size_t r) { set(r, absl::StrCat(prefix, r), Blob(n, static_cast<uint32_t>(r))); });
  phases->blobs_set = absl::Now() - start;

  start = absl::Now();
  ParallelFor(n, [&](size_t r) {
    bench::PeerKeys peers = bench::AddressKeys(prefix, n, static_cast<uint32_t>(r));
    v1::KvGetManyRequest request;
    request.set_parts(peers.parts.count);
    for (std::string& key : peers.keys) request.add_keys(std::move(key));
    for (uint32_t part : peers.parts.index) request.add_part_index(part);
    v1::KvGetManyResponse response = get_many(r, &request);
    int at = 0;
    for (uint32_t j = 0; j < n; ++j) {
      if (j == r) continue;
      const std::string& part = response.values(at++);
      Expect(part.size() == address_bytes && part.front() == BlobByte(j),
             absl::StrCat("address of rank ", j, " for rank ", r));
    }
  });
  phases->addresses_got = absl::Now() - start;
}

// Runs body(t) on --threads threads t until --seconds passed.
Rate Sustained(const std::function<uint64_t(int)>& body) {
  return bench::Sustained(absl::GetFlag(FLAGS_threads),
                          absl::Seconds(absl::GetFlag(FLAGS_seconds)), body);
}

// (b): thread t's workers (w = t mod threads) heartbeat once each, unary or each on its own
// stream; returns heartbeats sent.
uint64_t HeartbeatRound(Cluster& cluster, int t, bool streamed) {
  v1::HeartbeatRequest request;
  auto beat = [&](size_t w) {
    request.set_worker_id(cluster.workers[w]);
    request.set_incarnation(w + 1);
    GrpcCoordinatorClient& client = streamed ? *cluster.streaming[w] : cluster.client(w);
    v1::HeartbeatResponse response = Checked(client.Heartbeat(request), "Heartbeat");
    Expect(response.abort_size() == 0, "Heartbeat: told to abort");
  };
  return bench::ForShare(t, absl::GetFlag(FLAGS_threads), cluster.workers.size(), beat);
}

// (c): thread t's ranks each report their next batch of 20 steps; returns rank-steps sent.
uint64_t ReportRound(Cluster& cluster, int t, std::vector<uint64_t>* next_step) {
  auto report = [&](size_t r) {
    const uint32_t rank = static_cast<uint32_t>(r);
    v1::ReportProgressRequest request;
    request.set_job_id(cluster.job_id);
    request.set_generation(cluster.generation);
    request.set_rank(rank);
    uint64_t& step = (*next_step)[r];
    for (int i = 0; i < kStepsPerReport; ++i) *request.add_steps() = StepOf(++step, rank);
    v1::ReportProgressResponse response =
        Checked(cluster.client(r).ReportProgress(request), "ReportProgress");
    if (response.stop()) Fail(absl::AbortedError(response.stop_reason()), "ReportProgress stop");
  };
  return kStepsPerReport * bench::ForShare(t, absl::GetFlag(FLAGS_threads),
                                           cluster.assignments.size(), report);
}

void Measure(uint32_t n) {
  std::unique_ptr<Cluster> cluster = StartCluster(n);
  Phases phases;
  Tally tally;
  const double cpu_start = CpuSeconds();
  StartJob(*cluster, n, &phases, &tally);
  Rendezvous(*cluster, n, &phases, &tally);
  const double cpu = CpuSeconds() - cpu_start;
  auto s = [](absl::Duration d) { return absl::ToDoubleSeconds(d); };
  std::printf(
      "ranks=%-5u (a) gRPC: register %.3f + assign %.3f + join %.3f = %.3f s; rendezvous "
      "%.3f s (hostnames set %.3f, got %.3f; blobs set %.3f, addresses got %.3f); total "
      "%.3f s; %s calls, %.1f MB of values sent, %.1f MB answered; %.2f CPU s\n",
      n, s(phases.registered), s(phases.assigned), s(phases.joined), s(phases.setup()),
      s(phases.rendezvous()), s(phases.hostnames_set), s(phases.hostnames_got), s(phases.blobs_set),
      s(phases.addresses_got), s(phases.setup() + phases.rendezvous()),
      Thousands(static_cast<double>(tally.calls)).c_str(), tally.bytes_sent / 1e6,
      tally.bytes_answered / 1e6, cpu);
  std::fflush(stdout);

  const Rate unary = Sustained([&](int t) { return HeartbeatRound(*cluster, t, false); });
  const Rate streamed = Sustained([&](int t) { return HeartbeatRound(*cluster, t, true); });
  // Every worker with a beat in flight at all times (pipelined_heartbeats.h); each driving
  // thread counts its workers' answers in batches of as many as it has workers.
  auto all_in_flight = [&](PipelinedHeartbeats::Mode mode) {
    std::vector<v1::WorkerService::Stub*> stubs;
    std::vector<v1::HeartbeatRequest> beats;
    for (size_t w = 0; w < cluster->workers.size(); ++w) {
      stubs.push_back(&cluster->stub(w));
      beats.emplace_back().set_worker_id(cluster->workers[w]);
      beats.back().set_incarnation(w + 1);
    }
    const int threads = absl::GetFlag(FLAGS_threads);
    const uint64_t batch = (cluster->workers.size() + threads - 1) / threads;
    PipelinedHeartbeats driver(mode, std::move(stubs), std::move(beats), threads,
                               absl::GetFlag(FLAGS_call_timeout));
    return Sustained(
        [&](int t) { return Checked(driver.Beats(t, batch), "pipelined heartbeats"); });
  };
  const Rate unary_pipelined = all_in_flight(PipelinedHeartbeats::Mode::kUnary);
  const Rate pipelined = all_in_flight(PipelinedHeartbeats::Mode::kStreamed);
  for (const auto& [name, rate] :
       {std::pair<const char*, const Rate&>{"unary", unary},
        std::pair<const char*, const Rate&>{"streamed", streamed},
        std::pair<const char*, const Rate&>{"unary, all in flight", unary_pipelined},
        std::pair<const char*, const Rate&>{"streamed, all in flight", pipelined}}) {
    std::printf(
        "ranks=%-5u (b) gRPC heartbeats, %s: %s/s (%s in %.1f s from %d threads on %d "
        "channels; %s)\n",
        n, name, Thousands(rate.per_second).c_str(),
        Thousands(static_cast<double>(rate.units)).c_str(), absl::GetFlag(FLAGS_seconds),
        absl::GetFlag(FLAGS_threads), absl::GetFlag(FLAGS_channels),
        CpuPerCall(rate, static_cast<double>(rate.units)).c_str());
  }
  auto ratio = [&](const Rate& rate) {
    return unary.per_second > 0 ? rate.per_second / unary.per_second : 0.0;
  };
  std::printf("ranks=%-5u (b) heartbeats per second over unary: streamed %.2fx; all in flight: "
              "unary %.2fx, streamed %.2fx (streamed / unary all in flight %.2fx)\n",
              n, ratio(streamed), ratio(unary_pipelined), ratio(pipelined),
              unary_pipelined.per_second > 0 ? pipelined.per_second / unary_pipelined.per_second
                                             : 0.0);
  std::fflush(stdout);

  std::vector<uint64_t> next_step(n, 0);
  const Rate steps = Sustained([&](int t) { return ReportRound(*cluster, t, &next_step); });
  v1::GetJobResponse job;
  {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(absl::GetFlag(FLAGS_call_timeout)));
    v1::GetJobRequest request;
    request.set_job_id(cluster->job_id);
    Check(FromGrpc(cluster->jobs->GetJob(&context, request, &job), "GetJob"), "GetJob");
  }
  std::printf(
      "ranks=%-5u (c) gRPC ReportProgress: %s rank-steps/s (%s rank-steps, %d per call, %.1f "
      "s, %d threads; %s; %llu steps judged, %d alarms)\n",
      n, Thousands(steps.per_second).c_str(), Thousands(static_cast<double>(steps.units)).c_str(),
      kStepsPerReport, absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_threads),
      CpuPerCall(steps, static_cast<double>(steps.units) / kStepsPerReport).c_str(),
      static_cast<unsigned long long>(job.job().verdict().steps_judged()), job.job().alarms_size());
  std::fflush(stdout);
}

int Main() {
  const std::vector<uint32_t> sizes = bench::WorldSizesOrExit(absl::GetFlag(FLAGS_ranks));
  if (absl::GetFlag(FLAGS_threads) < 1 || absl::GetFlag(FLAGS_channels) < 1 ||
      absl::GetFlag(FLAGS_seconds) <= 0 || absl::GetFlag(FLAGS_address_bytes) < 1 ||
      absl::GetFlag(FLAGS_call_timeout) <= absl::ZeroDuration() ||
      absl::GetFlag(FLAGS_wait_timeout) <= absl::ZeroDuration()) {
    std::fprintf(stderr,
                 "--threads, --channels, --seconds, --address_bytes, --call_timeout and "
                 "--wait_timeout must be positive\n");
    return 2;
  }
  if (!absl::GetFlag(FLAGS_mutex_deadlock_detection)) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  std::printf(
      "coordinator over gRPC %s (plaintext) on loopback, server and clients in this process, %u "
      "cores; %d "
      "client threads, %d channels; rendezvous calls phase by phase (no waiting); goals: 1024 "
      "ranks (a) < 5 s on 2 cores, heartbeats >= 50 000/s\n",
      grpc::Version().c_str(), std::thread::hardware_concurrency(), absl::GetFlag(FLAGS_threads),
      absl::GetFlag(FLAGS_channels));
  std::fflush(stdout);
  for (uint32_t n : sizes) Measure(n);
  return 0;
}

}  // namespace
}  // namespace ringleader

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ringleader::Main();
}
