#include "worker/launcher/output_tail.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringleader {

absl::StatusOr<std::unique_ptr<OutputTail>> OutputTail::Create(int tee_fd, size_t max_lines) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  return std::unique_ptr<OutputTail>(new OutputTail(fds[0], fds[1], tee_fd, max_lines));
}

OutputTail::OutputTail(int read_fd, int write_fd, int tee_fd, size_t max_lines)
    : read_fd_(read_fd), write_fd_(write_fd), tee_fd_(tee_fd), max_lines_(max_lines) {
  reader_ = std::thread(&OutputTail::ReadLoop, this);
}

OutputTail::~OutputTail() {
  Finish(absl::ZeroDuration());
  close(read_fd_);
}

void OutputTail::CloseWriteEnd() {
  if (write_fd_ >= 0) close(write_fd_);
  write_fd_ = -1;
}

void OutputTail::ReadLoop() {
  char buffer[4096];
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    pollfd readable{read_fd_, POLLIN, 0};
    const int ready = poll(&readable, 1, /*timeout_ms=*/100);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = read(read_fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    absl::MutexLock lock(&mu_);
    if (n <= 0) {
      eof_ = true;
      return;
    }
    if (tee_fd_ >= 0) {
      for (ssize_t written = 0; written < n;) {
        const ssize_t w = write(tee_fd_, buffer + written, n - written);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        written += w;
      }
    }
    TakeLocked(buffer, static_cast<size_t>(n));
  }
}

void OutputTail::TakeLocked(const char* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      lines_.push_back(std::move(partial_));
      partial_.clear();
      if (lines_.size() > max_lines_) lines_.pop_front();
    } else if (partial_.size() < kMaxTailLineBytes) {
      partial_.push_back(data[i]);
    }
  }
}

std::vector<std::string> OutputTail::Finish(absl::Duration timeout) {
  CloseWriteEnd();
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&eof_), timeout);
    stop_ = true;
  }
  if (reader_.joinable()) reader_.join();
  absl::MutexLock lock(&mu_);
  std::vector<std::string> lines(lines_.begin(), lines_.end());
  if (!partial_.empty()) lines.push_back(partial_);
  if (lines.size() > max_lines_) lines.erase(lines.begin());
  return lines;
}

}  // namespace ringleader
