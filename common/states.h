// Names and predicates of the API's job and worker states, shared by the coordinator (logs,
// reasons) and the CLI (tables).
#ifndef RINGLEADER_COMMON_STATES_H_
#define RINGLEADER_COMMON_STATES_H_

#include <string>

#include "proto/ringleader.pb.h"

namespace ringleader {

// "QUEUED", "RENDEZVOUS", ... ("UNSPECIFIED" for an unset state, "UNKNOWN(n)" otherwise).
std::string JobStateName(v1::JobState state);
// "IDLE", "BUSY", "LOST" (and "UNSPECIFIED" / "UNKNOWN(n)").
std::string WorkerStateName(v1::WorkerState state);
// SUCCEEDED, FAILED or CANCELLED.
bool IsTerminal(v1::JobState state);

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_STATES_H_
