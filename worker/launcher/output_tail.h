// A pipe for a child's output stream: a thread copies everything the child writes to `tee_fd`
// (the launcher's own stderr, which its worker captures and ships) and keeps the last lines, so
// a failure report can quote them (a Python traceback ends with the exception's line).
//
// Memory: at most `max_lines` lines of at most kMaxTailLineBytes bytes each (longer lines are
// cut); nothing else is kept.
//
// Thread-safety: Create, then write_fd() is given to the child; CloseWriteEnd() once the child
// started (so end-of-file comes when the child and its own children exit); Finish() from the
// same thread.
#ifndef RINGLEADER_WORKER_LAUNCHER_OUTPUT_TAIL_H_
#define RINGLEADER_WORKER_LAUNCHER_OUTPUT_TAIL_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringleader {

inline constexpr size_t kMaxTailLineBytes = 500;

class OutputTail {
 public:
  // Errors: UNAVAILABLE (no pipe could be made).
  static absl::StatusOr<std::unique_ptr<OutputTail>> Create(int tee_fd, size_t max_lines);
  ~OutputTail();

  OutputTail(const OutputTail&) = delete;
  OutputTail& operator=(const OutputTail&) = delete;

  // The pipe's write end (close-on-exec is off only in the child, via dup2).
  int write_fd() const { return write_fd_; }
  void CloseWriteEnd();

  // Waits until every writer closed the pipe or `timeout` passed (a grandchild that keeps the
  // pipe open must not hold the report back), stops reading and returns the last lines, oldest
  // first (a final line without a newline included). Idempotent.
  std::vector<std::string> Finish(absl::Duration timeout);

 private:
  OutputTail(int read_fd, int write_fd, int tee_fd, size_t max_lines);
  void ReadLoop();
  void TakeLocked(const char* data, size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int read_fd_;
  int write_fd_;
  const int tee_fd_;
  const size_t max_lines_;
  absl::Mutex mu_;
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::string> lines_ ABSL_GUARDED_BY(mu_);
  std::string partial_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_LAUNCHER_OUTPUT_TAIL_H_
