#include "coordinator/ha/term_secret.h"

#include "absl/strings/str_cat.h"
#include "coordinator/core/attempt_tokens.h"

namespace ringleader {

absl::StatusOr<std::string> LoadOrCreateEtcdSecret(etcd::EtcdKv& kv, const std::string& key) {
  absl::StatusOr<std::string> fresh = AttemptTokens::LoadOrCreateSecret("");
  if (!fresh.ok()) return fresh.status();
  etcd::TxnRequest create;
  create.compare.push_back(etcd::Compare::Absent(key));
  create.success.push_back(etcd::Op::Put(key, *fresh));
  create.failure.push_back(etcd::Op::Get(key));
  absl::StatusOr<etcd::TxnResult> done = kv.Txn(create);
  if (!done.ok()) return done.status();
  if (done->succeeded) return *std::move(fresh);
  if (done->gets.empty() || done->gets[0].kvs.empty()) {
    return absl::UnavailableError(
        absl::StrCat(kv.Describe(), ": the attempt secret ", key, " vanished while read"));
  }
  std::string stored = std::move(done->gets[0].kvs[0].value);
  if (stored.size() < 16) {
    return absl::DataLossError(absl::StrCat(kv.Describe(), ": the attempt secret at ", key,
                                            " has ", stored.size(),
                                            " bytes (at least 16 expected): delete the key to "
                                            "make a new one (running ranks then need a restart)"));
  }
  return stored;
}

}  // namespace ringleader
