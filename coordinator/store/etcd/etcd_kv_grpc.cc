#include "coordinator/store/etcd/etcd_kv_grpc.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ringleader::etcd {
namespace {

absl::StatusCode CodeOf(grpc::StatusCode code) { return static_cast<absl::StatusCode>(code); }

// A key for error messages: printable as it is, escaped otherwise, cut when long.
std::string Printable(const std::string& key) {
  std::string shown = absl::CHexEscape(key.size() > 200 ? key.substr(0, 200) + "..." : key);
  return absl::StrCat("'", shown, "'");
}

void FillRange(const RangeRequest& in, etcdserverpb::RangeRequest* out) {
  out->set_key(in.key);
  out->set_range_end(in.range_end);
  out->set_limit(in.limit);
  out->set_revision(in.revision);
  out->set_keys_only(in.keys_only);
  if (in.descending) {
    out->set_sort_order(etcdserverpb::RangeRequest::DESCEND);
    out->set_sort_target(etcdserverpb::RangeRequest::KEY);
  }
}

RangeResult FromRange(const etcdserverpb::RangeResponse& in) {
  RangeResult out;
  out.more = in.more();
  out.revision = in.header().revision();
  out.kvs.reserve(in.kvs_size());
  for (const mvccpb::KeyValue& kv : in.kvs()) {
    KeyValue entry;
    entry.key = kv.key();
    entry.value = kv.value();
    entry.create_revision = kv.create_revision();
    entry.mod_revision = kv.mod_revision();
    entry.version = kv.version();
    entry.lease = kv.lease();
    out.kvs.push_back(std::move(entry));
  }
  return out;
}

void FillOp(const Op& in, etcdserverpb::RequestOp* out) {
  switch (in.kind) {
    case Op::Kind::kGet: {
      RangeRequest get;
      get.key = in.key;
      get.range_end = in.range_end;
      FillRange(get, out->mutable_request_range());
      break;
    }
    case Op::Kind::kPut:
      out->mutable_request_put()->set_key(in.key);
      out->mutable_request_put()->set_value(in.value);
      out->mutable_request_put()->set_lease(in.lease);
      break;
    case Op::Kind::kDelete:
      out->mutable_request_delete_range()->set_key(in.key);
      out->mutable_request_delete_range()->set_range_end(in.range_end);
      break;
  }
}

// "http://host:port" or "host:port" → "host:port".
absl::StatusOr<std::string> Target(const std::string& endpoint) {
  absl::string_view rest = absl::StripAsciiWhitespace(endpoint);
  if (absl::StartsWith(rest, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd endpoint '", endpoint, "': https is not supported yet; give http://host:port"));
  }
  absl::ConsumePrefix(&rest, "http://");
  absl::ConsumeSuffix(&rest, "/");
  const size_t colon = rest.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd endpoint '", endpoint, "' is not of the form http://host:port"));
  }
  return std::string(rest);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdKvGrpc>> EtcdKvGrpc::Create(const EtcdKvGrpcOptions& options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("no etcd endpoint given: give http://host:port[,...]");
  }
  std::vector<Endpoint> endpoints;
  for (const std::string& name : options.endpoints) {
    absl::StatusOr<std::string> target = Target(name);
    if (!target.ok()) return target.status();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(INT_MAX);  // a page of records may exceed gRPC's 4 MiB
    args.SetMaxSendMessageSize(INT_MAX);     // etcd itself judges the size of a request
    // Connections of its own: a new client does not inherit another's connection to an
    // endpoint that went away, and the wait before gRPC tries it again.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel(*target, grpc::InsecureChannelCredentials(), args);
    endpoints.push_back(
        Endpoint{name, etcdserverpb::KV::NewStub(channel), etcdserverpb::Lease::NewStub(channel),
                 etcdserverpb::Watch::NewStub(channel)});
  }
  return std::unique_ptr<EtcdKvGrpc>(new EtcdKvGrpc(std::move(endpoints), options.call_timeout));
}

EtcdKvGrpc::EtcdKvGrpc(std::vector<Endpoint> endpoints, absl::Duration call_timeout)
    : endpoints_(std::move(endpoints)), call_timeout_(call_timeout) {}

std::string EtcdKvGrpc::Describe() const {
  std::vector<std::string> names;
  for (const Endpoint& e : endpoints_) names.push_back(e.name);
  return absl::StrCat("etcd at ", absl::StrJoin(names, ","));
}

template <typename Call>
absl::Status EtcdKvGrpc::CallAny(const std::string& what, Call call) {
  size_t first;
  {
    absl::MutexLock lock(&mu_);
    first = preferred_;
  }
  std::vector<std::string> failures;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t index = (first + i) % endpoints_.size();
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + call_timeout_));
    const grpc::Status status = call(endpoints_[index], &context);
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      preferred_ = index;
      return absl::OkStatus();
    }
    const grpc::StatusCode code = status.error_code();
    if (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED) {
      failures.push_back(absl::StrCat(endpoints_[index].name, ": ", status.error_message()));
      continue;
    }
    return absl::Status(CodeOf(code), absl::StrCat(Describe(), ": ", what, ": ",
                                                   status.error_message()));
  }
  return absl::UnavailableError(absl::StrCat(Describe(), ": ", what, ": no endpoint answered (",
                                             absl::StrJoin(failures, "; "), ")"));
}

absl::StatusOr<RangeResult> EtcdKvGrpc::Range(const RangeRequest& request) {
  etcdserverpb::RangeRequest in;
  FillRange(request, &in);
  etcdserverpb::RangeResponse out;
  absl::Status status = CallAny(absl::StrCat("reading ", Printable(request.key)),
                                [&](Endpoint& e, grpc::ClientContext* context) {
                                  return e.kv->Range(context, in, &out);
                                });
  if (!status.ok()) return status;
  return FromRange(out);
}

absl::StatusOr<int64_t> EtcdKvGrpc::Put(const std::string& key, const std::string& value) {
  etcdserverpb::PutRequest in;
  in.set_key(key);
  in.set_value(value);
  etcdserverpb::PutResponse out;
  absl::Status status = CallAny(
      absl::StrCat("writing ", Printable(key), " (", value.size(), " bytes)"),
      [&](Endpoint& e, grpc::ClientContext* context) {
        return e.kv->Put(context, in, &out);
      });
  if (!status.ok()) return status;
  return out.header().revision();
}

absl::StatusOr<int64_t> EtcdKvGrpc::DeleteRange(const std::string& key,
                                                const std::string& range_end) {
  etcdserverpb::DeleteRangeRequest in;
  in.set_key(key);
  in.set_range_end(range_end);
  etcdserverpb::DeleteRangeResponse out;
  absl::Status status = CallAny(absl::StrCat("deleting ", Printable(key)),
                                [&](Endpoint& e, grpc::ClientContext* context) {
                                  return e.kv->DeleteRange(context, in, &out);
                                });
  if (!status.ok()) return status;
  return out.deleted();
}

absl::StatusOr<TxnResult> EtcdKvGrpc::Txn(const TxnRequest& request) {
  etcdserverpb::TxnRequest in;
  std::vector<std::string> written;
  size_t bytes = 0;
  for (const Compare& c : request.compare) {
    etcdserverpb::Compare* out = in.add_compare();
    out->set_key(c.key);
    switch (c.result) {
      case Compare::Result::kEqual: out->set_result(etcdserverpb::Compare::EQUAL); break;
      case Compare::Result::kNotEqual: out->set_result(etcdserverpb::Compare::NOT_EQUAL); break;
      case Compare::Result::kGreater: out->set_result(etcdserverpb::Compare::GREATER); break;
      case Compare::Result::kLess: out->set_result(etcdserverpb::Compare::LESS); break;
    }
    if (c.target == Compare::Target::kVersion) {
      out->set_target(etcdserverpb::Compare::VERSION);
      out->set_version(c.value);
    } else if (c.target == Compare::Target::kCreateRevision) {
      out->set_target(etcdserverpb::Compare::CREATE);
      out->set_create_revision(c.value);
    } else {
      out->set_target(etcdserverpb::Compare::MOD);
      out->set_mod_revision(c.value);
    }
  }
  for (const Op& op : request.success) {
    FillOp(op, in.add_success());
    if (op.kind == Op::Kind::kPut) {
      written.push_back(Printable(op.key));
      bytes += op.value.size();
    }
  }
  for (const Op& op : request.failure) FillOp(op, in.add_failure());
  const std::string what =
      written.empty() ? absl::StrCat("transaction on ", request.compare.empty()
                                                            ? std::string("reads")
                                                            : Printable(request.compare[0].key))
                      : absl::StrCat("writing ", absl::StrJoin(written, ", "), " (", bytes,
                                     " bytes)");
  etcdserverpb::TxnResponse out;
  absl::Status status = CallAny(what, [&](Endpoint& e, grpc::ClientContext* context) {
    return e.kv->Txn(context, in, &out);
  });
  if (!status.ok()) return status;
  TxnResult result;
  result.succeeded = out.succeeded();
  result.revision = out.header().revision();
  for (const etcdserverpb::ResponseOp& op : out.responses()) {
    if (op.has_response_range()) result.gets.push_back(FromRange(op.response_range()));
  }
  return result;
}

absl::StatusOr<int64_t> EtcdKvGrpc::LeaseGrant(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest in;
  in.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)))));
  etcdserverpb::LeaseGrantResponse out;
  absl::Status status = CallAny(absl::StrCat("granting a lease of ", in.ttl(), " s"),
                                [&](Endpoint& e, grpc::ClientContext* context) {
                                  return e.lease->LeaseGrant(context, in, &out);
                                });
  if (!status.ok()) return status;
  if (!out.error().empty()) {
    return absl::UnavailableError(
        absl::StrCat(Describe(), ": granting a lease: ", out.error()));
  }
  return out.id();
}

absl::StatusOr<absl::Duration> EtcdKvGrpc::LeaseKeepAlive(int64_t id) {
  etcdserverpb::LeaseKeepAliveRequest in;
  in.set_id(id);
  etcdserverpb::LeaseKeepAliveResponse out;
  // LeaseKeepAlive is a stream: one request, one answer, then the stream is closed.
  absl::Status status = CallAny(
      absl::StrCat("renewing lease ", id), [&](Endpoint& e, grpc::ClientContext* context) {
        std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                                 etcdserverpb::LeaseKeepAliveResponse>>
            stream = e.lease->LeaseKeepAlive(context);
        const bool sent = stream->Write(in);
        stream->WritesDone();
        const bool answered = sent && stream->Read(&out);
        grpc::Status finished = stream->Finish();
        if (answered) return grpc::Status::OK;
        return finished.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                            "the keep-alive stream closed without an answer")
                             : finished;
      });
  if (!status.ok()) return status;
  if (out.ttl() <= 0) {
    return absl::NotFoundError(
        absl::StrCat(Describe(), ": lease ", id, " has expired or was revoked"));
  }
  return absl::Seconds(out.ttl());
}

absl::Status EtcdKvGrpc::LeaseRevoke(int64_t id) {
  etcdserverpb::LeaseRevokeRequest in;
  in.set_id(id);
  etcdserverpb::LeaseRevokeResponse out;
  absl::Status status = CallAny(absl::StrCat("revoking lease ", id),
                                [&](Endpoint& e, grpc::ClientContext* context) {
                                  return e.lease->LeaseRevoke(context, in, &out);
                                });
  if (absl::IsNotFound(status)) return absl::OkStatus();
  return status;
}

absl::StatusOr<bool> EtcdKvGrpc::AwaitChange(const std::string& key, int64_t after_revision,
                                             absl::Duration timeout) {
  size_t index;
  {
    absl::MutexLock lock(&mu_);
    index = preferred_;
  }
  Endpoint& endpoint = endpoints_[index];
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  // Without a leader the member would hold the watch silently: fail instead.
  context.AddMetadata("hasleader", "true");
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>>
      stream = endpoint.watch->Watch(&context);
  etcdserverpb::WatchRequest request;
  request.mutable_create_request()->set_key(key);
  request.mutable_create_request()->set_start_revision(after_revision + 1);
  bool changed = false;
  if (stream->Write(request)) {
    etcdserverpb::WatchResponse response;
    while (stream->Read(&response)) {
      if (response.canceled() || response.events_size() > 0) {
        changed = true;
        break;
      }
    }
  }
  if (changed) {
    context.TryCancel();
    (void)stream->Finish();  // CANCELLED: ours
    return true;
  }
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  // The deadline passed (or the member closed the stream) without a change.
  if (status.ok() || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) return false;
  return absl::UnavailableError(absl::StrCat(Describe(), ": watching ", Printable(key), " on ",
                                             endpoint.name, ": ", status.error_message()));
}

}  // namespace ringleader::etcd
