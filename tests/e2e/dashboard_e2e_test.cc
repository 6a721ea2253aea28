// The web dashboard in a real browser: Debian's Chromium (/usr/bin/chromium; this test fails
// without it), headless, loads the pages from a real cluster's coordinator (--http_listen on a
// free port), runs their scripts against the JSON API and dumps the DOM it rendered. A finished
// job's page must show its id, state and verdict, one chart line per rank and panel with as many
// points as the API holds for that rank, its alarms and its attempt; the fleet page the workers
// and the job; a running job's page must keep polling and show the job's progress, and stop
// once the job has ended.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/e2e/cluster.h"
#include "worker/daemon/child_process.h"

namespace ringleader {
namespace e2e {
namespace {

namespace fs = std::filesystem;

using ::testing::HasSubstr;

constexpr char kChromium[] = "/usr/bin/chromium";
// The panels the job page draws, and the series each draws per rank.
const std::vector<std::pair<std::string, std::vector<std::string>>>& Panels() {
  static const auto* panels = new std::vector<std::pair<std::string, std::vector<std::string>>>{
      {"loss", {"value"}},    {"grad_norm", {"synced", "local"}}, {"drift", {"value"}},
      {"step_ms", {"value"}}, {"samples_per_second", {"value"}},
  };
  return *panels;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Text as Chromium serialises it in the DOM (text nodes and attribute values).
std::string Escaped(const std::string& text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
}

using Attributes = std::map<std::string, std::string>;

// The attributes of every start tag <name ...> in `html`, in document order.
std::vector<Attributes> StartTags(const std::string& html, const std::string& name) {
  std::vector<Attributes> tags;
  const std::string open = "<" + name + " ";
  for (size_t at = html.find(open); at != std::string::npos; at = html.find(open, at + 1)) {
    const size_t end = html.find('>', at);
    if (end == std::string::npos) break;
    const std::string inside = html.substr(at + open.size(), end - at - open.size());
    Attributes attributes;
    size_t p = 0;
    while (true) {
      const size_t eq = inside.find("=\"", p);
      if (eq == std::string::npos) break;
      const size_t close = inside.find('"', eq + 2);
      if (close == std::string::npos) break;
      std::string key = inside.substr(p, eq - p);
      key.erase(0, key.find_first_not_of(' '));
      attributes[key] = inside.substr(eq + 2, close - eq - 2);
      p = close + 1;
    }
    tags.push_back(std::move(attributes));
  }
  return tags;
}

// The markup from the first `start` to the next `end_tag` (included), or "".
std::string ElementFrom(const std::string& html, const std::string& start,
                        const std::string& end_tag) {
  const size_t at = html.find(start);
  if (at == std::string::npos) return "";
  const size_t end = html.find(end_tag, at);
  return html.substr(at, end == std::string::npos ? std::string::npos : end + end_tag.size() - at);
}

int Attribute(const Attributes& tag, const std::string& key) {
  int value = -1;
  const auto found = tag.find(key);
  if (found == tag.end() || !absl::SimpleAtoi(found->second, &value)) return -1;
  return value;
}

// The numbers of a points="x,y x,y ..." list.
std::vector<double> Coordinates(const std::string& points) {
  std::vector<double> numbers;
  for (absl::string_view part : absl::StrSplit(points, absl::ByAnyChar(" ,"), absl::SkipEmpty())) {
    double value = 0;
    numbers.push_back(absl::SimpleAtod(part, &value) ? value : -1e9);
  }
  return numbers;
}

// The step the job page's progress bar shows ("step N / M"); 0 when none.
uint64_t ProgressStep(const std::string& html) {
  for (const Attributes& div : StartTags(html, "div")) {
    const auto cls = div.find("class");
    const auto title = div.find("title");
    if (cls == div.end() || cls->second != "progress" || title == div.end()) continue;
    const std::vector<std::string> words = absl::StrSplit(title->second, ' ');
    uint64_t step = 0;
    if (words.size() >= 2 && words[0] == "step" && absl::SimpleAtoi(words[1], &step)) return step;
  }
  return 0;
}

class DashboardE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access(kChromium, X_OK), 0)
        << kChromium << " is missing: install Debian's chromium package (deploy/setup.sh)";
    ClusterOptions options;
    options.coordinator_flags = {"--http_listen=127.0.0.1:0"};
    absl::StatusOr<std::unique_ptr<Cluster>> started = Cluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started);
    absl::StatusOr<std::string> http = cluster_->HttpAddress();
    ASSERT_TRUE(http.ok()) << http.status();
    http_ = *http;
  }

  // Chromium's DOM of `path` after `virtual_time` of the page's own (virtual) time: timers
  // fire, the page's fetches are answered by the real coordinator. Fails the test when Chromium
  // does not end within a minute or fails.
  std::string DumpDom(const std::string& path, absl::Duration virtual_time) {
    const int run = ++browser_runs_;
    const fs::path tmp = std::getenv("TEST_TMPDIR");
    const fs::path dom = tmp / absl::StrCat("dom-", run, ".html");
    const fs::path log = tmp / absl::StrCat("chromium-", run, ".log");
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    EXPECT_GE(log_fd, 0) << log;
    ChildOptions child;
    child.log_path = dom.string();  // stdout: the DOM
    child.stderr_fd = log_fd;
    absl::StatusOr<std::unique_ptr<ChildProcess>> chromium = ChildProcess::Start(
        {kChromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--user-data-dir=" + (tmp / absl::StrCat("chromium-profile-", run)).string(),
         absl::StrCat("--virtual-time-budget=", absl::ToInt64Milliseconds(virtual_time)),
         "--dump-dom", absl::StrCat("http://", http_, path)},
        child);
    ::close(log_fd);
    if (!chromium.ok()) {
      ADD_FAILURE() << chromium.status();
      return "";
    }
    const absl::Status ended =
        WaitUntil([&] { return (*chromium)->HasExited(); }, absl::Minutes(1), "chromium ends");
    if (!ended.ok()) (*chromium)->Terminate(absl::Seconds(2));
    const ExitInfo exit = (*chromium)->Wait();
    const std::string html = ReadFile(dom);
    EXPECT_TRUE(ended.ok() && exit.success())
        << "chromium " << path << ": " << ended << " " << exit.Describe() << "\n"
        << ReadFile(log);
    EXPECT_THAT(html, HasSubstr("</html>")) << "no DOM from chromium:\n" << ReadFile(log);
    return html;
  }

  std::unique_ptr<Cluster> cluster_;
  std::string http_;
  int browser_runs_ = 0;
};

// Points per (rank) in the API's metrics: all steps, and the drift-measured ones.
struct RankPoints {
  int all = 0;
  int drift = 0;
};

std::map<uint32_t, RankPoints> PointsByRank(const v1::GetJobMetricsResponse& metrics) {
  std::map<uint32_t, RankPoints> by_rank;
  for (const v1::MetricsPoint& point : metrics.points()) {
    ++by_rank[point.rank()].all;
    if (point.has_drift()) ++by_rank[point.rank()].drift;
  }
  return by_rank;
}

TEST_F(DashboardE2eTest, AFinishedJobsPageShowsItsChartsAlarmsAndAttempt) {
  // Rank 1 steps with its local gradients; under "warn" the job runs on with two alarms.
  v1::JobSpec spec = SmallSyntheticSpec("dashboard");
  spec.set_epochs(2);  // 32 steps, drift measured every 4
  spec.mutable_model()->mutable_faults()->set_bypass_sync(true);
  spec.mutable_model()->mutable_faults()->set_bypass_sync_rank(1);
  spec.mutable_checks()->set_on_desync("warn");
  absl::StatusOr<std::string> job_id = cluster_->Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  const JobHistory history = cluster_->WaitForEnd(*job_id, absl::Seconds(60));
  ASSERT_TRUE(history.ended) << cluster_->LogTails();
  const v1::JobStatus& job = history.final;
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << LastReason(job);
  ASSERT_GE(job.alarms_size(), 2);
  absl::StatusOr<v1::GetJobMetricsResponse> metrics = cluster_->GetMetrics(*job_id);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const std::map<uint32_t, RankPoints> expected = PointsByRank(*metrics);
  ASSERT_EQ(expected.size(), 2u);
  for (const auto& [rank, points] : expected) {
    EXPECT_EQ(points.all, 32) << rank;
    EXPECT_EQ(points.drift, 8) << rank;
  }

  const std::string dom = DumpDom("/job/" + *job_id, absl::Seconds(5));
  ASSERT_FALSE(dom.empty());
  std::vector<Attributes> body = StartTags(dom, "body");
  ASSERT_EQ(body.size(), 1u) << dom;
  EXPECT_EQ(body[0]["data-page"], "job");
  EXPECT_EQ(body[0]["data-job"], *job_id);
  EXPECT_EQ(body[0]["data-state"], "SUCCEEDED");
  EXPECT_EQ(body[0]["data-live"], "false") << "polling stops once the job has ended";
  EXPECT_GE(Attribute(body[0], "data-polls"), 1);
  EXPECT_THAT(dom, HasSubstr(absl::StrCat("<b id=\"job-id\">", *job_id, "</b>")));
  EXPECT_THAT(ElementFrom(dom, "<span id=\"job-state\"", "</span></span>"),
              HasSubstr(">SUCCEEDED<"));
  EXPECT_THAT(ElementFrom(dom, "<span id=\"job-state\"", "</span></span>"), HasSubstr(">WARN<"));
  EXPECT_THAT(ElementFrom(dom, "<div id=\"error\"", "</div>"), HasSubstr("hidden"))
      << "the page reports an error";

  // One chart per panel; in it one polyline per rank (and series) with every point the API
  // holds for that rank, inside the chart's viewBox.
  std::map<std::string, std::vector<double>> view_boxes;
  for (const Attributes& svg : StartTags(dom, "svg")) {
    const auto panel = svg.find("data-panel");
    if (panel == svg.end()) continue;
    EXPECT_EQ(view_boxes.count(panel->second), 0u) << "two charts of " << panel->second;
    view_boxes[panel->second] = Coordinates(svg.at("viewBox"));
  }
  EXPECT_EQ(view_boxes.size(), Panels().size());
  std::map<std::string, int> lines;
  for (const Attributes& line : StartTags(dom, "polyline")) {
    const std::string panel = line.at("data-panel");
    const int rank = Attribute(line, "data-rank");
    const std::string series = line.at("data-series");
    ++lines[absl::StrCat(panel, "/", rank, "/", series)];
    ASSERT_TRUE(expected.count(rank)) << "a line of rank " << rank;
    const int want = panel == "drift" ? expected.at(rank).drift : expected.at(rank).all;
    const std::vector<double> xy = Coordinates(line.at("points"));
    EXPECT_EQ(xy.size(), 2u * want) << panel << " rank " << rank << " " << series;
    ASSERT_TRUE(view_boxes.count(panel)) << panel;
    const std::vector<double>& box = view_boxes[panel];
    ASSERT_EQ(box.size(), 4u);
    for (size_t k = 0; k + 1 < xy.size(); k += 2) {
      EXPECT_TRUE(xy[k] >= box[0] && xy[k] <= box[0] + box[2] && xy[k + 1] >= box[1] &&
                  xy[k + 1] <= box[1] + box[3])
          << panel << " rank " << rank << ": (" << xy[k] << ", " << xy[k + 1] << ")";
    }
  }
  for (const auto& [panel, series_list] : Panels()) {
    for (uint32_t rank : {0u, 1u}) {
      for (const std::string& series : series_list) {
        EXPECT_EQ(lines[absl::StrCat(panel, "/", rank, "/", series)], 1)
            << panel << " rank " << rank << " " << series;
      }
    }
  }

  // Every alarm of the job, with its kind and the coordinator's message.
  for (const v1::Alarm& alarm : job.alarms()) {
    const std::string kind = v1::Alarm::Kind_Name(alarm.kind());
    const std::string item = ElementFrom(dom, absl::StrCat("data-kind=\"", kind, "\""), "</li>");
    ASSERT_FALSE(item.empty()) << kind << " is not listed";
    EXPECT_THAT(item, HasSubstr(Escaped(alarm.message())));
    EXPECT_THAT(item, HasSubstr(absl::StrCat("step ", alarm.step())));
    if (!alarm.tensor().empty()) {
      EXPECT_THAT(item, HasSubstr("tensor " + alarm.tensor()));
    }
  }
  EXPECT_THAT(dom, HasSubstr("data-kind=\"NOT_SYNCHRONIZED\""));
  EXPECT_THAT(dom, HasSubstr("data-kind=\"DRIFT\""));
  // Its one attempt, with the workers and how it ended.
  ASSERT_EQ(job.attempts_size(), 1);
  const std::string attempt = ElementFrom(dom, "<tr data-generation=\"1\"", "</tr>");
  ASSERT_FALSE(attempt.empty()) << "no attempt row";
  EXPECT_THAT(attempt, HasSubstr(Escaped(job.attempts(0).end_reason())));
  for (const std::string& worker : job.attempts(0).workers()) {
    EXPECT_THAT(attempt, HasSubstr(Escaped(worker)));
  }

  // The fleet page: both workers, and the job linking to its page.
  const std::string fleet = DumpDom("/", absl::Seconds(3));
  for (int i = 0; i < 2; ++i) {
    const std::string row = ElementFrom(
        fleet, absl::StrCat("<tr data-worker=\"", Cluster::WorkerName(i), "\""), "</tr>");
    ASSERT_FALSE(row.empty()) << Cluster::WorkerName(i) << " is not listed";
    EXPECT_THAT(row, HasSubstr(">IDLE<"));
    EXPECT_THAT(row, HasSubstr(">cpu"));
  }
  const std::string job_row =
      ElementFrom(fleet, absl::StrCat("<tr data-job=\"", *job_id, "\""), "</tr>");
  ASSERT_FALSE(job_row.empty()) << "the job is not listed";
  EXPECT_THAT(job_row, HasSubstr(absl::StrCat("href=\"/job/", *job_id, "\"")));
  EXPECT_THAT(job_row, HasSubstr(">SUCCEEDED<"));
  EXPECT_THAT(job_row, HasSubstr(">WARN<"));
  EXPECT_THAT(job_row, HasSubstr("step 32 / 32"));
}

TEST_F(DashboardE2eTest, ARunningJobsPageKeepsPollingAndStopsWhenTheJobEnds) {
  v1::JobSpec spec = UntilCancelledSpec("dashboard-live");
  absl::StatusOr<std::string> job_id = cluster_->Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  ASSERT_TRUE(cluster_->WaitForState(*job_id, v1::JOB_STATE_RUNNING, absl::Seconds(30)).ok())
      << cluster_->LogTails();
  // Both ranks have reported steps.
  ASSERT_TRUE(WaitUntil(
                  [&] {
                    absl::StatusOr<v1::GetJobMetricsResponse> m = cluster_->GetMetrics(*job_id);
                    return m.ok() && PointsByRank(*m).size() == 2;
                  },
                  absl::Seconds(30), "both ranks report steps")
                  .ok())
      << cluster_->LogTails();

  // 6 s of the page's time: it polls at 0, 2, 4 and 6 s.
  const std::string running = DumpDom("/job/" + *job_id, absl::Seconds(6));
  std::vector<Attributes> body = StartTags(running, "body");
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0]["data-state"], "RUNNING");
  EXPECT_EQ(body[0]["data-live"], "true");
  EXPECT_GE(Attribute(body[0], "data-polls"), 3) << "the page polls while the job runs";
  int loss_points = 0;
  for (const Attributes& line : StartTags(running, "polyline")) {
    if (line.at("data-panel") == "loss" && line.at("data-rank") == "0") {
      loss_points = Attribute(line, "data-points");
    }
  }
  EXPECT_GT(loss_points, 0) << "rank 0's loss is drawn";
  const uint64_t step_running = ProgressStep(running);
  EXPECT_GT(step_running, 0u) << "the progress shows the step reached";

  // More steps, then the job is cancelled: the page shows the later state and stops polling.
  ASSERT_TRUE(WaitUntil(
                  [&] {
                    absl::StatusOr<v1::JobStatus> job = cluster_->GetJob(*job_id);
                    return job.ok() && job->ranks_size() == 2 &&
                           job->ranks(0).last_step().step() > step_running;
                  },
                  absl::Seconds(30), "rank 0 reports more steps")
                  .ok());
  const CliResult cancelled = cluster_->RunCli({"cancel", *job_id}, absl::Seconds(10));
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.output;
  ASSERT_TRUE(cluster_->WaitForEnd(*job_id, absl::Seconds(30)).ended);
  const std::string ended = DumpDom("/job/" + *job_id, absl::Seconds(6));
  body = StartTags(ended, "body");
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0]["data-state"], "CANCELLED");
  EXPECT_EQ(body[0]["data-live"], "false");
  EXPECT_EQ(Attribute(body[0], "data-polls"), 1) << "no poll after the job has ended";
  EXPECT_GT(ProgressStep(ended), step_running);
}

TEST_F(DashboardE2eTest, AnUnknownJobIs404NamingIt) {
  httplib::Client client(http_);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  for (const char* path : {"/api/jobs/job-999999", "/api/jobs/job-999999/metrics"}) {
    httplib::Result result = client.Get(path);
    ASSERT_TRUE(result) << path << ": " << httplib::to_string(result.error());
    EXPECT_EQ(result->status, 404) << path;
    EXPECT_EQ(result->get_header_value("Content-Type"), "application/json") << path;
    EXPECT_THAT(result->body, HasSubstr("\"error\":\"unknown job job-999999\"")) << path;
  }
  httplib::Result page = client.Get("/job/job-999999");
  ASSERT_TRUE(page) << httplib::to_string(page.error());
  EXPECT_EQ(page->status, 404);
  EXPECT_THAT(page->body, HasSubstr("unknown job job-999999"));
  // What Chromium shows for it: the text, not an empty job page.
  const std::string dom = DumpDom("/job/job-999999", absl::Seconds(1));
  EXPECT_THAT(dom, HasSubstr("unknown job job-999999"));
  EXPECT_THAT(dom, ::testing::Not(HasSubstr("data-page=\"job\"")));
}

}  // namespace
}  // namespace e2e
}  // namespace ringleader
