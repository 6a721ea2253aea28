// Adapts a ringleader KeyValueStore to gloo's rendezvous store interface, under a key prefix.
//
// gloo's connectFullMesh on rank r of N (the gloo built here: Debian's 0.5 snapshot of 2022-05):
// set("rank_<r>", hostname), get("rank_<i>") for i < r WITHOUT waiting first, set("<r>", blob)
// where the blob is r's N-1 pair addresses (one per peer, in rank order, all the same size),
// then wait({"<i>"}, timeout) + get("<i>") for every i != r, keeping only the address meant for
// r out of i's blob (gloo's extractAddress). So `get` here blocks until the key exists (up to
// the default timeout), like gloo's own stores.
//
// Batched rendezvous (when constructed with the rank and world size): key by key, the above is
// O(N) store calls per rank, each "<i>" read twice, and O(N^2) bytes per rank (every blob holds
// N-1 addresses). Instead:
//   * the first get of a "rank_<i>" (i < r) fetches every "rank_<j>", j < r, in ONE GetMany;
//   * the first wait or get of a "<i>" (i != r) fetches every peer's "<j>" in ONE GetMany that
//     asks only for r's part of each blob (ValueParts: N-1 parts, r's position in j's blob);
// what was fetched is kept, and later waits and gets of those keys are answered from it. gloo
// then gets a blob of N-1 addresses holding r's address where extractAddress looks (the other
// addresses are zero bytes: connectFullMesh never reads them). Parts are asked for only when
// r's own "<r>" blob splits evenly into N-1 addresses; otherwise whole values are fetched (still
// in one call). Every other key is passed on as before.
//
// gloo reports store failures only by exceptions: a failed store call throws gloo::IoException
// (the store is unreachable, the wait ran out, the attempt is stale: gloo's "recoverable" kind)
// or gloo::EnforceNotMet (any other code: a bug). The first failure's absl::Status is kept, so
// the caller can return the store's own code and message instead of gloo's text.
#ifndef RINGLEADER_WORKER_COLLECTIVE_GLOO_KV_GLOO_STORE_H_
#define RINGLEADER_WORKER_COLLECTIVE_GLOO_KV_GLOO_STORE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "gloo/rendezvous/store.h"
#include "worker/collective/collective.h"
#include "worker/collective/key_value_store.h"

namespace ringleader {

// Owned by the code doing one rendezvous (CreateGlooCollective); lives only during it.
// Thread-safe (gloo calls it from one thread, but nothing here depends on that).
class KvGlooStore : public gloo::rendezvous::Store {
 public:
  // `key_prefix` must be unique per job attempt (e.g. "<job>/<generation>/gloo/"): a reused prefix
  // hands out the previous attempt's addresses. `default_timeout` bounds `get`, `wait(keys)` and
  // `wait(keys, 0)`. `clock` (not owned, nullptr = Clock::Real()) splits a multi-key wait's
  // timeout between the keys. `rank` of `world_size` (world_size > 0) turns on the batched
  // rendezvous (file comment); without them every call is passed on key by key.
  // `progress` (may be empty) hears when the batched rendezvous waits for the peers'
  // addresses and, at each peer's address gloo takes, that it connects to that peer next.
  KvGlooStore(std::shared_ptr<KeyValueStore> store, std::string key_prefix,
              absl::Duration default_timeout, Clock* clock = nullptr, int rank = -1,
              int world_size = 0, RendezvousProgress progress = nullptr);

  // Throws gloo::IoException / gloo::EnforceNotMet on failure (see the file comment).
  void set(const std::string& key, const std::vector<char>& data) override;
  // Blocks until `key` exists or the default timeout passes. Throws like set().
  std::vector<char> get(const std::string& key) override;
  // Blocks until every key exists; the timeout covers all keys together. Throws like set().
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // The first failure of any call (OkStatus if none), with the store's code and the full key.
  absl::Status first_error() const;

  // The address each peer published for this rank, "host:port" by rank (batched rendezvous
  // only; decoded from the fetched blobs, gloo_peers.h).
  std::map<int, std::string> peer_addresses() const;

 private:
  // The keys one batched fetch covers.
  enum class Batch { kNone, kHostnames, kAddresses };
  // A fetched value: whole (parts == 0), or part `index` of a blob of `parts` equal parts.
  struct Kept {
    std::string value;
    uint32_t parts = 0;
    uint32_t index = 0;
  };

  Batch BatchOf(const std::string& key) const;
  // Fetches every key of `batch` with one GetMany and keeps the values; Fail(method) on error.
  void Fetch(Batch batch, absl::Duration timeout, const char* method);
  // The kept value of `key` as gloo sees it, if fetched.
  std::optional<std::vector<char>> KeptValue(const std::string& key) const;
  bool IsKept(const std::string& key) const;
  // Records `status` (if it is the first failure) and throws the matching gloo exception.
  [[noreturn]] void Fail(const absl::Status& status, const char* method);

  const std::shared_ptr<KeyValueStore> store_;
  const std::string key_prefix_;
  const absl::Duration default_timeout_;
  Clock* const clock_;
  const int rank_;
  const int world_size_;
  const RendezvousProgress progress_;

  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  // Size of this rank's own "<rank>" blob once set (0 = not yet).
  size_t own_blob_size_ ABSL_GUARDED_BY(mu_) = 0;
  // Fetched values by gloo key (without the prefix).
  absl::flat_hash_map<std::string, Kept> kept_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::string> peer_addresses_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_COLLECTIVE_GLOO_KV_GLOO_STORE_H_
