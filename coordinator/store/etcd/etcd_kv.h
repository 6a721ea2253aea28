// The subset of etcd's v3 key-value API the etcd job store needs, as plain C++ (no gRPC in this
// header): EtcdKvGrpc (etcd_kv_grpc.h) implements it over etcd's gRPC API; tests may fake it.
//
// Every write answers after etcd committed it (a majority of the cluster has it in its fsync'd
// log), so a write that returned OK survives a crash of the etcd members.
//
// Errors, by Abseil's rules:
//   UNAVAILABLE         no endpoint answered in time (the message names every endpoint)
//   INVALID_ARGUMENT    a request etcd refuses as malformed
//   RESOURCE_EXHAUSTED  a request above etcd's size limit, or etcd's space quota is full (the
//                       message names the key)
//   DEADLINE_EXCEEDED   is reported as UNAVAILABLE (the caller cannot tell either from a down
//                       cluster, and may retry both)
#ifndef RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_KV_H_
#define RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_KV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringleader::etcd {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;  // the revision of the key's last write
  int64_t version = 0;       // writes since the key was created; 0: absent
  int64_t lease = 0;         // the lease the key is attached to; 0: none
};

// The keys in [key, range_end) (range_end "" = only `key`).
struct RangeRequest {
  std::string key;
  std::string range_end;
  int64_t limit = 0;  // 0 = no limit
  bool descending = false;  // by key
  bool keys_only = false;
  int64_t revision = 0;  // read as of this revision (0 = the newest)
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  bool more = false;      // more keys in the range than `limit`
  int64_t revision = 0;   // the store's revision the read saw
};

// One condition of a Txn on the key `key`.
struct Compare {
  enum class Target { kVersion, kModRevision, kCreateRevision };
  enum class Result { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kModRevision;
  Result result = Result::kEqual;
  int64_t value = 0;

  // The key is absent (version 0): create-if-absent.
  static Compare Absent(std::string key);
  // The key is unchanged since `mod_revision` was read (0: it is still absent).
  static Compare Unchanged(std::string key, int64_t mod_revision);
  // The key is the one created at `create_revision` (not deleted and created again since).
  static Compare CreatedAt(std::string key, int64_t create_revision);
};

// One operation of a Txn branch.
struct Op {
  enum class Kind { kGet, kPut, kDelete };
  Kind kind = Kind::kGet;
  std::string key;
  std::string value;      // kPut
  int64_t lease = 0;      // kPut: attach the key to this lease (0: none)
  std::string range_end;  // kGet, kDelete: as in RangeRequest

  static Op Get(std::string key);
  static Op Put(std::string key, std::string value, int64_t lease = 0);
  static Op Delete(std::string key);
};

struct TxnRequest {
  std::vector<Compare> compare;
  std::vector<Op> success;  // when every compare holds
  std::vector<Op> failure;  // otherwise
};

struct TxnResult {
  bool succeeded = false;
  // One per kGet op of the branch that ran, in order.
  std::vector<RangeResult> gets;
  int64_t revision = 0;
};

class EtcdKv {
 public:
  virtual ~EtcdKv() = default;
  virtual absl::StatusOr<RangeResult> Range(const RangeRequest& request) = 0;
  // Returns the revision of the write.
  virtual absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value) = 0;
  // Returns how many keys were deleted.
  virtual absl::StatusOr<int64_t> DeleteRange(const std::string& key,
                                              const std::string& range_end) = 0;
  // Atomic: the compares and the branch that ran happen at one revision.
  virtual absl::StatusOr<TxnResult> Txn(const TxnRequest& request) = 0;
  // Where the store talks to (error messages).
  virtual std::string Describe() const = 0;

  // Leases (etcd's Lease service): a key put with a lease is deleted when the lease expires,
  // `ttl` after its last keep-alive. The defaults answer UNIMPLEMENTED (fakes without leases).
  // Returns the lease id. Errors: UNAVAILABLE.
  virtual absl::StatusOr<int64_t> LeaseGrant(absl::Duration ttl);
  // Renews lease `id` once; returns the TTL it has again. Errors: NOT_FOUND (the lease expired
  // or was revoked: its keys are gone), UNAVAILABLE.
  virtual absl::StatusOr<absl::Duration> LeaseKeepAlive(int64_t id);
  // Ends lease `id` now, deleting its keys. Errors: UNAVAILABLE (NOT_FOUND is not an error).
  virtual absl::Status LeaseRevoke(int64_t id);

  // Blocks until `key` changes (a put or a delete) at a revision above `after_revision`, or
  // `timeout` passes (etcd's Watch service). Returns whether it changed; a change that etcd
  // compacted away counts as one (read it again). Errors: UNAVAILABLE; UNIMPLEMENTED (the
  // default: callers poll instead).
  virtual absl::StatusOr<bool> AwaitChange(const std::string& key, int64_t after_revision,
                                           absl::Duration timeout);
};

// The range_end that makes [prefix, PrefixEnd(prefix)) every key starting with `prefix`
// ("\0" for an empty prefix: every key).
std::string PrefixEnd(absl::string_view prefix);

// Every key-value under `prefix`, in key order, read in pages of `page_size` at one revision
// (a consistent snapshot even when the range is larger than a page).
absl::StatusOr<std::vector<KeyValue>> RangeAll(EtcdKv& kv, const std::string& prefix,
                                               int64_t page_size);

}  // namespace ringleader::etcd

#endif  // RINGLEADER_COORDINATOR_STORE_ETCD_ETCD_KV_H_
