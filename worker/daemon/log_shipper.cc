#include "worker/daemon/log_shipper.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

namespace ringleader {
namespace {

constexpr size_t kReadBlock = size_t{64} << 10;

// Writes all of `data` to `fd`; false on an error.
bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

ssize_t ReadAt(int fd, char* buffer, size_t size, uint64_t at) {
  ssize_t n;
  do {
    n = ::pread(fd, buffer, size, static_cast<off_t>(at));
  } while (n < 0 && errno == EINTR);
  return n;
}

}  // namespace

LogShipper::LogShipper(CoordinatorClient* client, std::string job_id, uint64_t generation,
                       uint32_t rank, std::string log_path, LogShipperOptions options)
    : client_(client),
      job_id_(std::move(job_id)),
      generation_(generation),
      rank_(rank),
      path_(std::move(log_path)),
      options_(options) {}

LogShipper::~LogShipper() {
  if (thread_.joinable()) {
    stop_.Notify();
    thread_.join();
  }
  if (fd_ >= 0) ::close(fd_);
}

void LogShipper::Start() {
  thread_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(options_.interval)) ShipOnce();
  });
}

void LogShipper::Finish() {
  if (finished_) return;
  finished_ = true;
  if (thread_.joinable()) {
    stop_.Notify();
    thread_.join();
  }
  ReadNew();
  SendPending();
}

void LogShipper::ShipOnce() {
  ReadNew();
  SendPending();
  Rotate();
}

bool LogShipper::OpenLog() {
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  return fd_ >= 0;
}

void LogShipper::ReadNew() {
  if (!status_.ok() || !OpenLog()) return;
  struct stat info;
  if (::fstat(fd_, &info) != 0) return;
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size < read_pos_) {  // truncated by someone else: its new bytes follow what was read
    base_ += read_pos_;
    read_pos_ = 0;
  }
  if (size == read_pos_) return;
  // Bytes that would be dropped at once for the bound are not read at all.
  const uint64_t fresh = size - read_pos_;
  if (pending_.size() + fresh > options_.max_pending_bytes) {
    uint64_t drop = pending_.size() + fresh - options_.max_pending_bytes;
    const size_t from_pending = static_cast<size_t>(std::min<uint64_t>(drop, pending_.size()));
    pending_.erase(0, from_pending);
    pending_offset_ += from_pending;
    skipped_ += from_pending;
    drop -= from_pending;
    read_pos_ += drop;
    pending_offset_ += drop;
    skipped_ += drop;
  }
  char buffer[kReadBlock];
  while (read_pos_ < size) {
    const ssize_t n =
        ReadAt(fd_, buffer, static_cast<size_t>(std::min<uint64_t>(kReadBlock, size - read_pos_)),
               read_pos_);
    if (n <= 0) break;
    Take(absl::string_view(buffer, static_cast<size_t>(n)));
    read_pos_ += static_cast<uint64_t>(n);
  }
}

void LogShipper::Take(absl::string_view bytes) {
  if (pending_.size() + bytes.size() > options_.max_pending_bytes) {
    size_t drop = pending_.size() + bytes.size() - options_.max_pending_bytes;
    const size_t from_pending = std::min(drop, pending_.size());
    pending_.erase(0, from_pending);
    drop -= from_pending;
    bytes.remove_prefix(drop);
    pending_offset_ += from_pending + drop;
    skipped_ += from_pending + drop;
  }
  pending_.append(bytes.data(), bytes.size());
}

void LogShipper::SendPending() {
  if (!status_.ok()) return;
  size_t sent = 0;
  while (sent < pending_.size()) {
    const size_t n = std::min(options_.max_chunk_bytes, pending_.size() - sent);
    v1::AppendLogsRequest request;
    request.set_job_id(job_id_);
    request.set_generation(generation_);
    request.set_rank(rank_);
    request.set_offset(pending_offset_ + sent);
    request.set_data(pending_.substr(sent, n));
    const absl::StatusOr<v1::AppendLogsResponse> response = client_->AppendLogs(request);
    if (response.ok()) {
      sent += n;
      continue;
    }
    const absl::StatusCode code = response.status().code();
    if (code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kDeadlineExceeded) {
      status_ = response.status();  // the attempt is over, or this coordinator takes no logs
    }
    break;  // unreachable: the same offset again at the next tick
  }
  pending_.erase(0, sent);
  pending_offset_ += sent;
  if (!status_.ok()) pending_.clear();
}

void LogShipper::Rotate() {
  if (options_.max_log_bytes == 0 || !OpenLog()) return;
  struct stat info;
  if (::fstat(fd_, &info) != 0 || static_cast<uint64_t>(info.st_size) <= options_.max_log_bytes) {
    return;
  }
  ReadNew();  // so the copy below only adds what the child wrote meanwhile
  const std::string rotated = path_ + ".1";
  const std::string temporary = rotated + ".tmp";
  const int out = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return;  // tried again at the next tick
  char buffer[kReadBlock];
  uint64_t pos = 0;
  bool copied = true;
  ssize_t n;
  while ((n = ReadAt(fd_, buffer, sizeof(buffer), pos)) > 0) {
    if (!WriteAll(out, buffer, static_cast<size_t>(n))) {
      copied = false;
      break;
    }
    const uint64_t end = pos + static_cast<uint64_t>(n);
    if (status_.ok() && end > read_pos_) {
      const size_t skip = static_cast<size_t>(read_pos_ > pos ? read_pos_ - pos : 0);
      Take(absl::string_view(buffer + skip, static_cast<size_t>(n) - skip));
      read_pos_ = end;
    }
    pos = end;
  }
  copied = ::close(out) == 0 && copied && n == 0;
  if (!copied || std::rename(temporary.c_str(), rotated.c_str()) != 0 ||
      ::truncate(path_.c_str(), 0) != 0) {
    // Not rotated (disk full?): the file grows on, and rotation is tried again next tick. The
    // bytes taken above are shipped as usual.
    ::unlink(temporary.c_str());
    return;
  }
  base_ += std::max(pos, read_pos_);
  read_pos_ = 0;
}

}  // namespace ringleader
