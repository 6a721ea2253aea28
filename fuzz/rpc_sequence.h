// The input of the RPC handler fuzz target (rpc_handler_fuzzer.cc): one options byte, then
// records of (operation, request), each
//   u8 operation (taken modulo kOperationCount), u16 length (little-endian), length bytes
// where the bytes are the serialized request of that RPC (protobuf wire format), or, for
// kAdvanceClock, a u32 of milliseconds. The seed corpus writer encodes its sequences with
// AppendRecord.
#ifndef RINGLEADER_FUZZ_RPC_SEQUENCE_H_
#define RINGLEADER_FUZZ_RPC_SEQUENCE_H_

#include <cstdint>
#include <string>

namespace ringleader::fuzz {

enum Operation : uint8_t {
  kRegisterWorker,
  kHeartbeat,
  kWaitAssignment,  // long poll
  kJoinJob,
  kKvSet,
  kKvGet,      // long poll
  kKvGetMany,  // long poll
  kReportProgress,
  kFinishRank,
  kAppendLogs,
  kSubmitJob,
  kGetJob,
  kGetJobMetrics,
  kWatchJob,  // long poll
  kGetLogs,   // long poll
  kListJobs,
  kListWorkers,
  kCancelJob,
  kAdvanceClock,  // the fake clock moves on (at most an hour), then CheckStaleness()
  kOperationCount,
};

// Bits of the options byte.
inline constexpr uint8_t kAllowFaultInjection = 1;
inline constexpr uint8_t kCountCalls = 2;  // the handler records calls in an RpcStats

inline void AppendRecord(std::string* out, Operation operation, const std::string& bytes) {
  const size_t length = bytes.size() < 0xffff ? bytes.size() : 0xffff;
  out->push_back(static_cast<char>(operation));
  out->push_back(static_cast<char>(length & 0xff));
  out->push_back(static_cast<char>(length >> 8));
  out->append(bytes, 0, length);
}

inline std::string Milliseconds(uint32_t ms) {
  std::string bytes;
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((ms >> (8 * i)) & 0xff));
  return bytes;
}

}  // namespace ringleader::fuzz

#endif  // RINGLEADER_FUZZ_RPC_SEQUENCE_H_
