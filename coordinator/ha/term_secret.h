// The ranks' attempt-token secret (core/attempt_tokens.h) kept in etcd, so that every
// coordinator that leads mints and checks the same tokens: ranks carry theirs across a
// failover.
#ifndef RINGLEADER_COORDINATOR_HA_TERM_SECRET_H_
#define RINGLEADER_COORDINATOR_HA_TERM_SECRET_H_

#include <string>

#include "absl/status/statusor.h"
#include "coordinator/store/etcd/etcd_kv.h"

namespace ringleader {

// The secret stored at `key`; when absent, fresh random bytes are created there (a Txn that
// only creates: of two racing coordinators, both end with the one stored). Write through the
// term's fenced EtcdKv. Errors: UNAVAILABLE (etcd, or a lost term), DATA_LOSS (a stored value
// shorter than 16 bytes), INTERNAL (no random bytes).
absl::StatusOr<std::string> LoadOrCreateEtcdSecret(etcd::EtcdKv& kv, const std::string& key);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_HA_TERM_SECRET_H_
