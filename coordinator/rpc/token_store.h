// Who may call the JobService (--tokens_file): bearer tokens, read at start and again on SIGHUP.
//
//   # NAME TOKEN, one per line ('#' comments, blank lines ignored)
//   alice  3f6c0d2e9a1b4c5d8e7f60718293a4b5
//   ci     9c8b7a6f5e4d3c2b1a09f8e7d6c5b4a3
//
// A call carries "authorization: Bearer TOKEN" (the CLI: --token_file or $RINGLEADER_TOKEN).
// Mutating calls (SubmitJob, CancelJob) always need a known token; read-only calls too, unless
// the store allows anonymous reads. Tokens are compared in constant time (per token of equal
// length), so the time of a refusal says nothing about how much of a token matched. Names are
// for logs and error messages only. (Worker daemons and ranks authenticate with their TLS
// client certificate; the WorkerService takes no token.)
//
// Thread-safety: Check from any thread; Reload from one (main's SIGHUP watcher).
#ifndef RINGLEADER_COORDINATOR_RPC_TOKEN_STORE_H_
#define RINGLEADER_COORDINATOR_RPC_TOKEN_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ringleader {

// Tokens shorter than this are refused when the file is read (guessable).
inline constexpr size_t kMinTokenBytes = 16;

class TokenStore {
 public:
  enum class Access { kRead, kWrite };

  // Reads `path`. Errors: NOT_FOUND (cannot read it), INVALID_ARGUMENT naming the line (a name
  // without a token, a token shorter than kMinTokenBytes, a repeated name or token, no token
  // at all).
  static absl::StatusOr<std::unique_ptr<TokenStore>> Load(const std::string& path,
                                                          bool anonymous_reads);

  // Reads the file again; on an error the tokens in use stay and the error is returned.
  absl::Status Reload();

  // Whether a call with `authorization` (the request's "authorization" metadata, "" = none)
  // may do `access` through `method`; returns the caller's name ("anonymous" for an allowed
  // anonymous read). Errors: UNAUTHENTICATED naming the method and how to give a token
  // (no token, not "Bearer ...", an unknown token).
  absl::StatusOr<std::string> Check(absl::string_view authorization, Access access,
                                    absl::string_view method) const;

  size_t size() const;

 private:
  struct Entry {
    std::string name;
    std::string token;
  };
  TokenStore(std::string path, bool anonymous_reads) : path_(std::move(path)),
                                                       anonymous_reads_(anonymous_reads) {}
  static absl::StatusOr<std::vector<Entry>> Parse(const std::string& path);

  const std::string path_;
  const bool anonymous_reads_;
  mutable absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_RPC_TOKEN_STORE_H_
