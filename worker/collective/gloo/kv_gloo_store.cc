#include "worker/collective/gloo/kv_gloo_store.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "worker/collective/gloo/gloo_peers.h"

namespace ringleader {
namespace {

constexpr char kHostnamePrefix[] = "rank_";

// `text` as gloo writes a rank (std::to_string), or nullopt.
std::optional<int> ParseRank(const std::string& text) {
  int rank = 0;
  if (!absl::SimpleAtoi(text, &rank) || std::to_string(rank) != text) return std::nullopt;
  return rank;
}

}  // namespace

KvGlooStore::KvGlooStore(std::shared_ptr<KeyValueStore> store, std::string key_prefix,
                         absl::Duration default_timeout, Clock* clock, int rank, int world_size,
                         RendezvousProgress progress)
    : store_(std::move(store)),
      key_prefix_(std::move(key_prefix)),
      default_timeout_(default_timeout),
      clock_(clock != nullptr ? clock : Clock::Real()),
      rank_(rank),
      world_size_(rank >= 0 && rank < world_size ? world_size : 0),
      progress_(std::move(progress)) {}

void KvGlooStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = store_->Set(key_prefix_ + key, std::string(data.begin(), data.end()));
  if (!status.ok()) Fail(status, "set");
  if (world_size_ > 0 && key == std::to_string(rank_)) {
    absl::MutexLock lock(&mu_);
    own_blob_size_ = data.size();
  }
}

std::vector<char> KvGlooStore::get(const std::string& key) {
  const Batch batch = BatchOf(key);
  if (batch != Batch::kNone && !IsKept(key)) Fetch(batch, default_timeout_, "get");
  if (std::optional<std::vector<char>> kept = KeptValue(key)) {
    // gloo connects to peer `key` as soon as it has its address.
    if (batch == Batch::kAddresses && progress_) {
      const std::optional<int> peer = ParseRank(key);
      std::string address;
      {
        absl::MutexLock lock(&mu_);
        if (peer.has_value()) {
          if (auto it = peer_addresses_.find(*peer); it != peer_addresses_.end()) {
            address = absl::StrCat(" at ", it->second);
          }
        }
      }
      progress_(RendezvousStage::kConnecting, absl::StrCat("to rank ", key, address));
    }
    return *std::move(kept);
  }
  absl::StatusOr<std::string> value = store_->Get(key_prefix_ + key, default_timeout_);
  if (!value.ok()) Fail(value.status(), "get");
  return std::vector<char>(value->begin(), value->end());
}

void KvGlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds::zero());
}

void KvGlooStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  // gloo::kNoTimeout (zero) would mean "forever"; a rendezvous must never wait forever, so it
  // means the default timeout here.
  const absl::Duration total =
      timeout == std::chrono::milliseconds::zero() ? default_timeout_ : absl::FromChrono(timeout);
  const absl::Time deadline = clock_->Now() + total;
  for (const std::string& key : keys) {
    if (IsKept(key)) continue;
    const absl::Duration left = std::max(deadline - clock_->Now(), absl::ZeroDuration());
    if (const Batch batch = BatchOf(key); batch != Batch::kNone) {
      Fetch(batch, left, "wait");
      continue;
    }
    absl::StatusOr<std::string> value = store_->Get(key_prefix_ + key, left);
    if (!value.ok()) Fail(value.status(), "wait");
  }
}

absl::Status KvGlooStore::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

std::map<int, std::string> KvGlooStore::peer_addresses() const {
  absl::MutexLock lock(&mu_);
  return peer_addresses_;
}

KvGlooStore::Batch KvGlooStore::BatchOf(const std::string& key) const {
  if (world_size_ <= 0) return Batch::kNone;
  if (absl::StartsWith(key, kHostnamePrefix)) {
    const std::optional<int> i = ParseRank(key.substr(sizeof(kHostnamePrefix) - 1));
    return i.has_value() && *i >= 0 && *i < rank_ ? Batch::kHostnames : Batch::kNone;
  }
  const std::optional<int> i = ParseRank(key);
  return i.has_value() && *i >= 0 && *i < world_size_ && *i != rank_ ? Batch::kAddresses
                                                                      : Batch::kNone;
}

void KvGlooStore::Fetch(Batch batch, absl::Duration timeout, const char* method) {
  std::vector<std::string> names;  // gloo's keys, without the prefix
  ValueParts parts;
  if (batch == Batch::kHostnames) {
    for (int j = 0; j < rank_; ++j) names.push_back(absl::StrCat(kHostnamePrefix, j));
  } else {
    size_t own_blob_size;
    {
      absl::MutexLock lock(&mu_);
      own_blob_size = own_blob_size_;
    }
    const auto peers = static_cast<uint32_t>(world_size_ - 1);
    const bool cut = peers > 0 && own_blob_size > 0 && own_blob_size % peers == 0;
    if (cut) parts.count = peers;
    for (int j = 0; j < world_size_; ++j) {
      if (j == rank_) continue;
      names.push_back(std::to_string(j));
      // j's blob skips j itself: this rank's address sits at rank - 1 after j, at rank before.
      if (cut) parts.index.push_back(static_cast<uint32_t>(rank_ > j ? rank_ - 1 : rank_));
    }
  }
  std::vector<std::string> keys;
  keys.reserve(names.size());
  for (const std::string& name : names) keys.push_back(key_prefix_ + name);
  if (progress_) {
    progress_(RendezvousStage::kExchangingAddresses,
              batch == Batch::kHostnames
                  ? absl::StrCat("waiting for ", names.size(), " lower ranks' hostnames")
                  : absl::StrCat("waiting for ", names.size(), " peers' addresses"));
  }
  absl::StatusOr<std::vector<std::string>> values = store_->GetMany(keys, parts, timeout);
  if (!values.ok()) Fail(values.status(), method);
  absl::MutexLock lock(&mu_);
  if (batch == Batch::kAddresses) {
    for (size_t i = 0; i < names.size() && i < values->size(); ++i) {
      const std::optional<int> peer = ParseRank(names[i]);
      const std::string& value = (*values)[i];
      std::optional<std::string> address;
      if (parts.count > 0) {
        address = DecodeGlooAddress(value);
      } else if (world_size_ > 1 && value.size() % (world_size_ - 1) == 0 && peer.has_value()) {
        // The whole blob: this rank's address is part rank-1 (after the peer) or rank.
        const size_t size = value.size() / (world_size_ - 1);
        const size_t index = static_cast<size_t>(rank_ > *peer ? rank_ - 1 : rank_);
        address = DecodeGlooAddress(absl::string_view(value).substr(index * size, size));
      }
      if (peer.has_value() && address.has_value()) peer_addresses_[*peer] = *address;
    }
  }
  for (size_t i = 0; i < names.size() && i < values->size(); ++i) {
    kept_[names[i]] =
        Kept{std::move((*values)[i]), parts.count, parts.count > 0 ? parts.index[i] : 0};
  }
}

std::optional<std::vector<char>> KvGlooStore::KeptValue(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = kept_.find(key);
  if (it == kept_.end()) return std::nullopt;
  const Kept& kept = it->second;
  if (kept.parts == 0) return std::vector<char>(kept.value.begin(), kept.value.end());
  // The blob as gloo stored it, as far as this rank reads it: its own address at its place.
  std::vector<char> blob(static_cast<size_t>(kept.parts) * kept.value.size(), '\0');
  std::copy(kept.value.begin(), kept.value.end(),
            blob.begin() + static_cast<std::ptrdiff_t>(kept.index * kept.value.size()));
  return blob;
}

bool KvGlooStore::IsKept(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  return kept_.contains(key);
}

void KvGlooStore::Fail(const absl::Status& status, const char* method) {
  {
    absl::MutexLock lock(&mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  const std::string message =
      absl::StrCat("rendezvous store ", method, " under \"", key_prefix_, "\": ", status.ToString());
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      // Environmental failures: gloo's recoverable I/O kind.
      throw gloo::IoException(message);
    default:
      throw gloo::EnforceNotMet(__FILE__, __LINE__, "store call succeeded", message);
  }
}

}  // namespace ringleader
