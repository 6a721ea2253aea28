// Adapts a ringleader KeyValueStore to gloo's rendezvous store interface, under a key prefix.
//
// gloo's connectFullMesh on rank r: set("rank_<r>"), get("rank_<i>") for i < r WITHOUT waiting
// first, set("<r>", addresses), then wait({"<i>"}, timeout) + get("<i>") for every i != r. So
// `get` here blocks until the key exists (up to the default timeout), like gloo's own stores.
//
// gloo reports store failures only by exceptions: a failed store call throws gloo::IoException
// (the store is unreachable, the wait ran out, the attempt is stale: gloo's "recoverable" kind)
// or gloo::EnforceNotMet (any other code: a bug). The first failure's absl::Status is kept, so
// the caller can return the store's own code and message instead of gloo's text.
#ifndef RINGLEADER_WORKER_COLLECTIVE_KV_GLOO_STORE_H_
#define RINGLEADER_WORKER_COLLECTIVE_KV_GLOO_STORE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "gloo/rendezvous/store.h"
#include "worker/collective/key_value_store.h"

namespace ringleader {

// Owned by the code doing one rendezvous (CreateGlooCollective); lives only during it.
// Thread-safe (gloo calls it from one thread, but nothing here depends on that).
class KvGlooStore : public gloo::rendezvous::Store {
 public:
  // `key_prefix` must be unique per job attempt (e.g. "<job>/<generation>/gloo/"): a reused prefix
  // hands out the previous attempt's addresses. `default_timeout` bounds `get`, `wait(keys)` and
  // `wait(keys, 0)`. `clock` (not owned, nullptr = Clock::Real()) splits a multi-key wait's
  // timeout between the keys.
  KvGlooStore(std::shared_ptr<KeyValueStore> store, std::string key_prefix,
              absl::Duration default_timeout, Clock* clock = nullptr);

  // Throws gloo::IoException / gloo::EnforceNotMet on failure (see the file comment).
  void set(const std::string& key, const std::vector<char>& data) override;
  // Blocks until `key` exists or the default timeout passes. Throws like set().
  std::vector<char> get(const std::string& key) override;
  // Blocks until every key exists; the timeout covers all keys together. Throws like set().
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // The first failure of any call (OkStatus if none), with the store's code and the full key.
  absl::Status first_error() const;

 private:
  // Records `status` (if it is the first failure) and throws the matching gloo exception.
  [[noreturn]] void Fail(const absl::Status& status, const char* method);

  const std::shared_ptr<KeyValueStore> store_;
  const std::string key_prefix_;
  const absl::Duration default_timeout_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_KV_GLOO_STORE_H_
