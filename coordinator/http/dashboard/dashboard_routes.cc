#include "coordinator/http/dashboard/dashboard_routes.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "coordinator/http/dashboard/assets.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "proto/ringleader.pb.h"

namespace ringleader {
namespace {

constexpr char kJsonContentType[] = "application/json";

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kFailedPrecondition:
      return 409;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

HttpResponse JsonAnswer(int status, const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  HttpResponse response;
  response.content_type = kJsonContentType;
  response.headers.push_back({"Cache-Control", "no-store"});
  const auto printed =
      google::protobuf::util::MessageToJsonString(message, &response.body, options);
  if (printed.ok()) {
    response.status = status;
  } else {
    response.status = 500;
    response.content_type = kTextContentType;
    response.body = absl::StrCat("cannot print ", message.GetTypeName(),
                                 " as JSON: ", std::string(printed.message()), "\n");
  }
  return response;
}

// {"code": "NOT_FOUND", "error": "unknown job job-9"} with the status's HTTP status.
HttpResponse JsonError(const absl::Status& status) {
  google::protobuf::Struct error;
  (*error.mutable_fields())["code"].set_string_value(absl::StatusCodeToString(status.code()));
  (*error.mutable_fields())["error"].set_string_value(std::string(status.message()));
  return JsonAnswer(HttpStatusOf(status.code()), error);
}

// The answer of one unary RpcHandler call.
template <typename Request, typename Response>
HttpResponse Api(RpcHandler* handler, absl::Status (RpcHandler::*call)(const Request&, Response*),
                 const Request& request) {
  Response response;
  const absl::Status status = (handler->*call)(request, &response);
  if (!status.ok()) return JsonError(status);
  return JsonAnswer(200, response);
}

HttpResponse Page(const DashboardAsset& asset) {
  HttpResponse response;
  response.content_type = DashboardContentType(asset.name);
  response.body = std::string(asset.body);
  response.headers.push_back({"Cache-Control", "no-cache"});
  return response;
}

const DashboardAsset* FindAsset(absl::string_view name) {
  for (const DashboardAsset& asset : DashboardAssets()) {
    if (asset.name == name) return &asset;
  }
  return nullptr;
}

HttpResponse NotFound(std::string text) {
  HttpResponse response;
  response.status = 404;
  response.body = std::move(text);
  return response;
}

// Every page the routes serve must be built in: a missing one is a build mistake.
absl::StatusOr<const DashboardAsset*> RequiredAsset(absl::string_view name) {
  const DashboardAsset* asset = FindAsset(name);
  if (asset == nullptr) {
    return absl::InternalError(
        absl::StrCat("the dashboard's ", name,
                     " is not built in (coordinator/http/dashboard/BUILD)"));
  }
  return asset;
}

}  // namespace

std::string DashboardContentType(absl::string_view file_name) {
  if (absl::EndsWith(file_name, ".html")) return "text/html; charset=utf-8";
  if (absl::EndsWith(file_name, ".js")) return "text/javascript; charset=utf-8";
  if (absl::EndsWith(file_name, ".css")) return "text/css; charset=utf-8";
  if (absl::EndsWith(file_name, ".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

absl::Status AddDashboardRoutes(RpcHandler* handler, HttpRouter* router) {
  ASSIGN_OR_RETURN(const DashboardAsset* index, RequiredAsset("index.html"));
  ASSIGN_OR_RETURN(const DashboardAsset* job_page, RequiredAsset("job.html"));

  RETURN_IF_ERROR(router->Get("/", "the dashboard: workers and jobs",
                              [index](const HttpRequest&) { return Page(*index); }));
  RETURN_IF_ERROR(router->Get(
      "/job/{job}", "the dashboard: one job's charts, alarms and attempts",
      [handler, job_page](const HttpRequest& request) {
        // Only for a job the coordinator knows: a mistyped id gets a clear 404, not an empty
        // page polling forever.
        v1::GetJobRequest get;
        get.set_job_id(request.Param("job"));
        v1::GetJobResponse job;
        if (const absl::Status found = handler->GetJob(get, &job); !found.ok()) {
          HttpResponse refused;
          refused.status = HttpStatusOf(found.code());
          refused.body =
              absl::StrCat(found.code() == absl::StatusCode::kNotFound ? "not found" : "refused",
                           " (HTTP ", refused.status, "): ", found.message(),
                           "\nThe coordinator's jobs are listed at /.\n");
          return refused;
        }
        return Page(*job_page);
      }));
  RETURN_IF_ERROR(router->Get(
      "/static/{file}", "the dashboard's scripts and style", [](const HttpRequest& request) {
        const std::string name = request.Param("file");
        const DashboardAsset* asset = FindAsset(name);
        if (asset == nullptr) {
          return NotFound(
              absl::StrCat("not found (HTTP 404): no file ", name, " in the dashboard\n"));
        }
        return Page(*asset);
      }));

  RETURN_IF_ERROR(
      router->Get("/api/workers", "ListWorkersResponse as JSON", [handler](const HttpRequest&) {
        return Api(handler, &RpcHandler::ListWorkers, v1::ListWorkersRequest());
      }));
  RETURN_IF_ERROR(
      router->Get("/api/jobs", "ListJobsResponse as JSON", [handler](const HttpRequest&) {
        return Api(handler, &RpcHandler::ListJobs, v1::ListJobsRequest());
      }));
  RETURN_IF_ERROR(
      router->Get("/api/jobs/{job}", "GetJobResponse as JSON", [handler](const HttpRequest& http) {
        v1::GetJobRequest request;
        request.set_job_id(http.Param("job"));
        return Api(handler, &RpcHandler::GetJob, request);
      }));
  RETURN_IF_ERROR(router->Get("/api/jobs/{job}/metrics", "GetJobMetricsResponse as JSON",
                              [handler](const HttpRequest& http) {
                                v1::GetJobMetricsRequest request;
                                request.set_job_id(http.Param("job"));
                                return Api(handler, &RpcHandler::GetJobMetrics, request);
                              }));
  // The job page's "debug" button: blocks this request's thread while the ranks answer (the
  // handler's wait, 5 s at most with the default).
  RETURN_IF_ERROR(router->Get(
      "/api/jobs/{job}/debug", "DebugJobResponse as JSON (asks the ranks for their rings)",
      [handler](const HttpRequest& http) {
        v1::DebugJobRequest request;
        request.set_job_id(http.Param("job"));
        v1::DebugJobResponse response;
        absl::Notification answered;
        absl::Status status;
        handler->DebugJob(request, &response, [&](absl::Status done) {
          status = std::move(done);
          answered.Notify();
        });
        answered.WaitForNotification();
        if (!status.ok()) return JsonError(status);
        return JsonAnswer(200, response);
      }));
  return absl::OkStatus();
}

}  // namespace ringleader
