// The series a coordinator sharing an etcd adds to /metrics (as leader and as standby):
//
//   ringleader_leader                                  gauge      1 = this coordinator leads
//   ringleader_leader_changes_total                    counter    leadership changes this
//                                                                 coordinator saw (it won or
//                                                                 lost a term, or another
//                                                                 coordinator took over)
//   ringleader_leader_terms_total                      counter    terms this coordinator won
//   ringleader_etcd_calls_total{call,code}             counter    etcd calls, by outcome
//   ringleader_etcd_call_duration_seconds{call,code}   histogram  their latency
//
// Plain C++ (no HTTP).
#ifndef RINGLEADER_COORDINATOR_HTTP_HA_METRICS_TEXT_H_
#define RINGLEADER_COORDINATOR_HTTP_HA_METRICS_TEXT_H_

#include <cstdint>
#include <string>

#include "coordinator/rpc/rpc_stats.h"

namespace ringleader {

struct HaMetrics {
  bool leading = false;
  int64_t leader_changes = 0;
  int64_t terms_won = 0;
  RpcStats::Snapshot etcd_calls;  // by call ("Txn", "LeaseKeepAlive", ...) and code
};

std::string HaMetricsText(const HaMetrics& metrics);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_HTTP_HA_METRICS_TEXT_H_
