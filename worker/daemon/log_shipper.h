// Ships a rank process's output (its rank.log: stdout and stderr, written by the child with
// O_APPEND) to the coordinator while the process runs, and keeps the file bounded on disk.
//
//   Start() ──every `interval`: read new bytes, AppendLogs them, rotate──> Finish(): a last
//   read and send after the child exited (before the daemon reports the rank's end)
//
// Offsets: bytes are numbered in the rank's output of the attempt, from 0 when the shipper
// starts; each AppendLogs carries the offset of its first byte and at most max_chunk_bytes.
//
// Coordinator answers: UNAVAILABLE or DEADLINE_EXCEEDED: the same bytes are sent again at the
// next tick; while more than max_pending_bytes wait, the oldest are dropped (the shipper skips
// ahead and the coordinator records the gap). FAILED_PRECONDITION or NOT_FOUND: the attempt is
// over (a later generation started, or the coordinator forgot the job): shipping stops. Any other
// error (UNIMPLEMENTED from an older coordinator, CANCELLED at shutdown) stops shipping too;
// status() says why. Rotation goes on regardless.
//
// Rotation: once rank.log holds more than max_log_bytes, it is copied to rank.log.1 (replacing
// an older one) and truncated; the child, writing with O_APPEND, goes on at the new end, and the
// offsets go on counting. Like logrotate's copytruncate, bytes the child writes between the end
// of the copy and the truncation (microseconds) are lost.
//
// Thread-safety: thread-compatible. Start() and Finish() once each, from one thread; between
// them only the shipper's own thread touches its state. Without Start(), ShipOnce() drives it
// (tests). The accessors are for after Finish() (or between ShipOnce calls).
#ifndef RINGLEADER_WORKER_DAEMON_LOG_SHIPPER_H_
#define RINGLEADER_WORKER_DAEMON_LOG_SHIPPER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "worker/coordinator_client/coordinator_client.h"

namespace ringleader {

struct LogShipperOptions {
  // How often new output is read and sent while the rank runs.
  absl::Duration interval = absl::Milliseconds(250);
  // Bytes of one AppendLogs call at most.
  size_t max_chunk_bytes = size_t{64} << 10;  // 64 KiB
  // Output read but not accepted yet (the coordinator unreachable) kept at most; the oldest
  // beyond it is skipped.
  size_t max_pending_bytes = size_t{4} << 20;  // 4 MiB
  // rank.log is rotated once it holds more than this; 0 = never.
  uint64_t max_log_bytes = uint64_t{64} << 20;  // 64 MiB
};

class LogShipper {
 public:
  // Ships `log_path` as the output of `rank` in (`job_id`, `generation`). `client` is not owned
  // and must outlive the shipper.
  LogShipper(CoordinatorClient* client, std::string job_id, uint64_t generation, uint32_t rank,
             std::string log_path, LogShipperOptions options);
  // Finish() if it was started and not finished.
  ~LogShipper();

  LogShipper(const LogShipper&) = delete;
  LogShipper& operator=(const LogShipper&) = delete;

  // Starts the thread that calls ShipOnce() every `interval` (a timed wait on a notification,
  // cut short by Finish()).
  void Start();
  // Stops the thread, then reads what the file holds and sends it until everything was accepted
  // or a call failed (the final drain: no retry, so a daemon whose coordinator is unreachable
  // is not held up). Idempotent.
  void Finish();

  // One tick: reads the new bytes, sends what waits, rotates the file when it is too large.
  void ShipOnce();

  // Offset after the last byte the coordinator accepted.
  uint64_t shipped() const { return pending_offset_; }
  // Bytes dropped unsent (backlog over max_pending_bytes).
  uint64_t skipped() const { return skipped_; }
  // OK while shipping; why shipping stopped otherwise.
  const absl::Status& status() const { return status_; }

 private:
  // Opens the file if needed; false when it does not exist (yet).
  bool OpenLog();
  // Reads the bytes written since the last read into pending_ (keeping at most
  // max_pending_bytes of it).
  void ReadNew();
  // Adds bytes just read from the file to pending_, dropping the oldest beyond the bound.
  void Take(absl::string_view bytes);
  // Sends pending_ in chunks until it is empty or a call fails.
  void SendPending();
  // Copies the file to <path>.1 and truncates it (see the file comment).
  void Rotate();

  CoordinatorClient* const client_;
  const std::string job_id_;
  const uint64_t generation_;
  const uint32_t rank_;
  const std::string path_;
  const LogShipperOptions options_;

  int fd_ = -1;
  uint64_t base_ = 0;      // offset in the rank's output of the file's first byte
  uint64_t read_pos_ = 0;  // bytes of the file read so far
  std::string pending_;    // read, not accepted yet: output bytes from pending_offset_
  uint64_t pending_offset_ = 0;
  uint64_t skipped_ = 0;
  absl::Status status_;

  absl::Notification stop_;
  std::thread thread_;
  bool finished_ = false;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_DAEMON_LOG_SHIPPER_H_
