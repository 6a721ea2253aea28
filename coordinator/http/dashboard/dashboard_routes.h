// The coordinator's web dashboard, served by its HTTP server (http/http_server.h) on --http_listen
// next to /metrics: pages built into the binary (assets.h) and a JSON API answered by the same
// RpcHandler calls the gRPC service makes (rpc/rpc_handler.h), so the HTTP edge adds no logic of
// its own.
//
//   GET /                        index.html: the workers (devices, state) and the jobs (state,
//                                progress, verdict), polling the API every 2 s
//   GET /job/{job}               job.html: one job's per-rank charts (loss, synced vs local grad
//                                norm, drift, step time, samples/s), alarms, attempts and ranks,
//                                polling until the job ends; 404 (text) for an unknown job
//   GET /static/{file}           charts.js, dashboard.js, dashboard.css (and the pages)
//   GET /api/workers             ListWorkersResponse
//   GET /api/jobs                ListJobsResponse (every job, oldest first)
//   GET /api/jobs/{job}          GetJobResponse
//   GET /api/jobs/{job}/metrics  GetJobMetricsResponse
//
// API answers are application/json in protobuf's JSON mapping (MessageToJsonString) with the
// proto field names and every field printed, as `ringleader metrics --format json` prints: enums
// by name, 64-bit integers as strings. A failed call answers its status as HTTP (NOT_FOUND 404,
// INVALID_ARGUMENT 400, FAILED_PRECONDITION 409, UNAVAILABLE 503, others 500) with a
// google.protobuf.Struct in the same mapping: {"code": "NOT_FOUND", "error": "unknown job
// job-000009"}. API answers carry Cache-Control: no-store; pages and scripts no-cache (a new
// coordinator binary may serve new ones).
#ifndef RINGLEADER_COORDINATOR_HTTP_DASHBOARD_DASHBOARD_ROUTES_H_
#define RINGLEADER_COORDINATOR_HTTP_DASHBOARD_DASHBOARD_ROUTES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "coordinator/http/http_server.h"
#include "coordinator/rpc/rpc_handler.h"

namespace ringleader {

// Adds the routes above to `router`. `handler` is not owned and must outlive every server
// answering with `router`; it is called on the server's threads (RpcHandler is thread-safe).
// Errors: ALREADY_EXISTS when one of the patterns is already routed (added twice); INTERNAL
// when index.html or job.html is not built in (a mistake in coordinator/http/dashboard/BUILD).
absl::Status AddDashboardRoutes(RpcHandler* handler, HttpRouter* router);

// The Content-Type a dashboard file is served with, by its extension: text/html, text/javascript,
// text/css (charset=utf-8), image/svg+xml; application/octet-stream otherwise.
std::string DashboardContentType(absl::string_view file_name);

}  // namespace ringleader

#endif  // RINGLEADER_COORDINATOR_HTTP_DASHBOARD_DASHBOARD_ROUTES_H_
