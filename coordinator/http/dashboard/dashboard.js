// The dashboard's pages: the fleet and jobs (index.html) and one job (job.html). Each page polls
// the coordinator's JSON API (protobuf's JSON mapping of the JobService answers, proto field
// names: 64-bit integers arrive as strings) every POLL_MS and redraws; a job page stops polling
// once its job has ended. Everything is built with DOM calls and textContent (no HTML from
// data). The body carries data-polls (answers drawn so far) and, on a job page, data-job and
// data-state, for tests and scripts.
"use strict";

(function () {
  var POLL_MS = 2000;
  var TERMINAL = ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"];

  // ---- helpers ------------------------------------------------------------------------------

  function $(id) { return document.getElementById(id); }

  // h("td", {class: "num"}, "3", child, ...): an element with attributes and children.
  function h(tag, attributes) {
    var node = document.createElement(tag);
    for (var key in attributes || {}) {
      if (attributes[key] !== undefined && attributes[key] !== null) {
        node.setAttribute(key, attributes[key]);
      }
    }
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === undefined || child === null) continue;
      node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function replaceChildren(node, children) {
    while (node.firstChild) node.removeChild(node.firstChild);
    children.forEach(function (child) { node.appendChild(child); });
  }

  function num(value) { return value === undefined || value === null ? 0 : Number(value); }

  function stateName(state) {
    return String(state || "").replace(/^(JOB|WORKER)_STATE_/, "") || "UNSPECIFIED";
  }

  function badge(text, kind) { return h("span", {"class": "badge " + kind}, text); }

  function stateBadge(state) {
    var name = stateName(state);
    return badge(name, "state-" + name.toLowerCase());
  }

  function verdictName(verdict) {
    var result = verdict && verdict.result;
    return !result || result === "RESULT_UNSPECIFIED" ? "not judged yet" : result;
  }

  function verdictBadge(verdict) {
    var name = verdictName(verdict);
    return badge(name, "verdict-" + name.replace(/ /g, "-").toLowerCase());
  }

  // 4 significant digits, or the exponent form for tiny and huge magnitudes.
  function figure(value) {
    var v = Number(value);
    if (!isFinite(v)) return String(value);
    if (v === 0) return "0";
    var a = Math.abs(v);
    if (a >= 1e6 || a < 1e-3) return v.toExponential(3);
    return String(Number(v.toPrecision(4)));
  }

  function time(ms) {
    var t = num(ms);
    if (t <= 0) return "";
    var d = new Date(t);
    function two(n) { return (n < 10 ? "0" : "") + n; }
    return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " +
           two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  }

  function seconds(ms) { return (num(ms) / 1000).toFixed(1) + " s"; }

  function fetchJson(url) {
    return fetch(url, {cache: "no-store"}).then(function (response) {
      return response.text().then(function (text) {
        var body = null;
        try { body = JSON.parse(text); } catch (e) { body = null; }
        if (!response.ok) {
          throw new Error((body && body.error) || ("HTTP " + response.status + ": " + text));
        }
        return body;
      });
    });
  }

  function showError(error) {
    var box = $("error");
    box.textContent = error ? "cannot reach the coordinator: " + error.message : "";
    box.hidden = !error;
  }

  function markPolled(note) {
    document.body.dataset.polls = num(document.body.dataset.polls) + 1;
    $("updated").textContent = "updated " + time(Date.now()).slice(11) + " · " + note;
  }

  // The furthest step any rank reported and the attempt's total (0 = unknown).
  function progress(job) {
    var step = 0, total = 0;
    (job.ranks || []).forEach(function (rank) {
      if (!rank.last_step) return;
      step = Math.max(step, num(rank.last_step.step));
      total = Math.max(total, num(rank.last_step.total_steps));
    });
    step = Math.max(step, num(job.verdict && job.verdict.last_step));
    var fraction = total > 0 ? Math.min(1, step / total)
                             : job.state === "JOB_STATE_SUCCEEDED" ? 1 : 0;
    return {step: step, total: total, fraction: fraction};
  }

  function progressBar(job) {
    var p = progress(job);
    var label = p.total > 0 ? "step " + p.step + " / " + p.total
                            : p.step > 0 ? "step " + p.step : "";
    return h("div", {"class": "progress", title: label},
             h("div", {"class": "bar", style: "width:" + (p.fraction * 100).toFixed(1) + "%"}),
             h("span", {}, label));
  }

  function row(values, attributes) {
    var tr = h("tr", attributes || {});
    values.forEach(function (value) { tr.appendChild(h("td", {}, value)); });
    return tr;
  }

  function emptyRow(columns, text) {
    return h("tr", {"class": "empty"}, h("td", {colspan: columns}, text));
  }

  // ---- fleet and jobs (index.html) ------------------------------------------------------------

  // "cpu:0 (cpu (2 cores), 24 GiB)", "cuda:1 (NVIDIA H100, 80 GiB)", as `ringleader workers`.
  function device(d) {
    var details = [];
    if (d.name) details.push(d.name);
    if (num(d.memory_bytes) > 0) {
      details.push((num(d.memory_bytes) / 1073741824).toFixed(0) + " GiB");
    }
    var more = details.length ? " (" + details.join(", ") + ")" : "";
    return (d.kind || "?") + ":" + num(d.index) + more;
  }

  function renderWorkers(answer) {
    var workers = answer.workers || [];
    $("worker-count").textContent = workers.length;
    replaceChildren($("workers"), workers.length === 0 ? [emptyRow(6, "no worker registered")] :
      workers.map(function (w) {
        var job = w.job_id ? h("a", {href: "/job/" + encodeURIComponent(w.job_id)}, w.job_id) : "";
        return row([w.name, w.host, (w.devices || []).map(device).join(", "),
                    stateBadge(w.state), w.job_id ? h("span", {}, job, " rank " + num(w.rank)) : "",
                    seconds(w.heartbeat_age_ms)],
                   {"data-worker": w.name});
      }));
  }

  function renderJobs(answer) {
    var jobs = (answer.jobs || []).slice().reverse();  // newest first
    $("job-count").textContent = jobs.length;
    replaceChildren($("jobs"), jobs.length === 0 ? [emptyRow(8, "no job submitted")] :
      jobs.map(function (job) {
        var spec = job.spec || {};
        return row([h("a", {href: "/job/" + encodeURIComponent(job.job_id)}, job.job_id),
                    spec.name || "", stateBadge(job.state), progressBar(job),
                    verdictBadge(job.verdict), (job.alarms || []).length,
                    num(spec.world_size), time(job.submit_time_unix_ms)],
                   {"data-job": job.job_id});
      }));
  }

  function pollFleet() {
    Promise.all([fetchJson("/api/workers"), fetchJson("/api/jobs")]).then(function (answers) {
      renderWorkers(answers[0]);
      renderJobs(answers[1]);
      showError(null);
      markPolled("polling every " + POLL_MS / 1000 + " s");
    }).catch(showError).then(function () { setTimeout(pollFleet, POLL_MS); });
  }

  // ---- one job (job.html) ---------------------------------------------------------------------

  // The panels, as `ringleader plot` draws them: [series id, value of a point, dashed].
  var PANELS = [
    {panel: "loss", title: "loss", series: [["value", function (p) { return p.loss; }]]},
    {panel: "grad_norm", title: "grad norm: synced (solid) vs local (dashed)",
     series: [["synced", function (p) { return p.synced_grad_norm; }],
              ["local", function (p) { return p.local_grad_norm; }, true]]},
    {panel: "drift", title: "drift max|W_r \u2212 W_0|", empty: "no drift measured yet",
     series: [["value", function (p) { return p.has_drift ? p.drift : NaN; }]]},
    {panel: "step_ms", title: "step time (ms)",
     series: [["value", function (p) { return p.step_ms; }]]},
    {panel: "samples_per_second", title: "samples/s",
     series: [["value", function (p) { return p.samples_per_second; }]]},
  ];

  function renderCharts(job, metrics) {
    var points = metrics.points || [];
    var ranks = {};
    for (var r = 0; r < num(job.spec && job.spec.world_size); r++) ranks[r] = true;
    points.forEach(function (p) { ranks[num(p.rank)] = true; });
    var rankList = Object.keys(ranks).map(Number).sort(function (a, b) { return a - b; });
    var charts = PANELS.map(function (panel) {
      var series = [];
      var legend = rankList.map(function (rank) {
        return {label: "rank " + rank, color: RL.rankColor(rank)};
      });
      rankList.forEach(function (rank) {
        panel.series.forEach(function (s) {
          series.push({
            rank: rank, series: s[0], dashed: !!s[2], color: RL.rankColor(rank),
            label: "rank " + rank + " " + (s[0] === "value" ? panel.title : s[0]),
            points: points.filter(function (p) { return num(p.rank) === rank; })
                          .map(function (p) { return [num(p.step), Number(s[1](p))]; }),
          });
        });
      });
      if (panel.series.length > 1) {
        legend.push({label: "synced", color: "#444"},
                    {label: "local", color: "#444", dashed: true});
      }
      return h("figure", {"class": "panel"},
               RL.lineChart({panel: panel.panel, title: panel.title, series: series,
                             legend: legend, empty: panel.empty}));
    });
    replaceChildren($("charts"), charts);
    var stride = num(metrics.decimation_stride);
    $("charts-note").textContent = points.length === 0 ? "no step reported yet" :
        "generation " + num(metrics.generation) + ", " + points.length + " points" +
        (stride > 1 ? "; older steps kept every " + stride + " steps" : "");
  }

  function renderSummary(job) {
    var spec = job.spec || {};
    var verdict = job.verdict || {};
    var transitions = job.transitions || [];
    var last = transitions.length ? transitions[transitions.length - 1] : null;
    document.body.dataset.state = stateName(job.state);
    document.title = job.job_id + " · " + stateName(job.state) + " · ringleader";
    replaceChildren($("job-state"), [stateBadge(job.state), verdictBadge(verdict)]);
    $("job-name").textContent = spec.name || "";
    var facts = [
      ["progress", progressBar(job)],
      ["generation", num(job.generation) + " (restarts " + num(job.restarts) + " of " +
                     num(spec.max_restarts) + ")"],
      ["ranks", num(spec.world_size) + " · " + (spec.backend || "") +
                (spec.command && spec.command.length ? " · command job" : "")],
      ["steps judged", num(verdict.steps_judged) +
                       (num(verdict.first_bad_step) ? " · first bad step " +
                        num(verdict.first_bad_step) : "")],
      ["train samples/s", figure(num(verdict.samples_per_second))],
      ["submitted", time(job.submit_time_unix_ms)],
    ];
    if (job.queued_reason) facts.push(["waiting", job.queued_reason]);
    if (last && last.reason) {
      facts.push(["last change", stateName(last.state) + ": " + last.reason]);
    }
    replaceChildren($("job-facts"), facts.map(function (fact) {
      return h("div", {"class": "fact"}, h("dt", {}, fact[0]), h("dd", {}, fact[1]));
    }));
  }

  function alarmKind(kind) { return String(kind || "KIND_UNSPECIFIED"); }

  function renderAlarms(job) {
    var alarms = job.alarms || [];
    $("alarm-count").textContent = alarms.length;
    replaceChildren($("alarms"), alarms.length === 0 ? [h("li", {"class": "empty"}, "no alarms")] :
      alarms.map(function (a) {
        var steps = "step " + num(a.step) +
            (num(a.repeats) > 0 ? " (+" + num(a.repeats) + " more, last at step " +
                                  num(a.last_step) + ")" : "");
        return h("li", {"class": "alarm " + (a.failed_job ? "failed" : "warned"),
                        "data-kind": alarmKind(a.kind)},
                 h("div", {"class": "alarm-head"},
                   badge(alarmKind(a.kind), "alarm-kind"), " ", steps,
                   " · ranks " + (a.ranks || []).join(", "),
                   a.tensor ? " · tensor " + a.tensor : "",
                   " · " + (a.failed_job ? "stopped the job" : "warning"),
                   " · " + time(a.detected_unix_ms)),
                 h("div", {"class": "alarm-message"}, a.message || ""));
      }));
  }

  function renderAttempts(job) {
    var attempts = job.attempts || [];
    replaceChildren($("attempts"), attempts.length === 0 ? [emptyRow(7, "not placed yet")] :
      attempts.map(function (a) {
        var end = num(a.end_time_unix_ms);
        var duration = end > 0 ? seconds(end - num(a.start_time_unix_ms)) : "running";
        return row([num(a.generation), (a.workers || []).join(", "), num(a.resumed_from_step),
                    num(a.last_step), time(a.start_time_unix_ms), duration, a.end_reason || ""],
                   {"data-generation": num(a.generation)});
      }));
  }

  function renderRanks(job) {
    var ranks = job.ranks || [];
    replaceChildren($("ranks"), ranks.length === 0 ? [emptyRow(10, "no rank yet")] :
      ranks.map(function (r) {
        var s = r.last_step || {};
        return row([num(r.rank), r.worker_name || r.worker_id || "", r.host || "",
                    num(s.step), figure(num(s.loss)), figure(num(s.local_grad_norm)),
                    figure(num(s.synced_grad_norm)), s.has_drift ? figure(num(s.drift)) : "",
                    figure(num(s.step_ms)), r.error || seconds(r.heartbeat_age_ms)],
                   {"data-rank": num(r.rank)});
      }));
  }

  function renderEpochs(job) {
    var epochs = job.epochs || [];
    $("epochs-section").hidden = epochs.length === 0;
    replaceChildren($("epochs"), epochs.map(function (e) {
      return row([num(e.epoch), figure(num(e.test_accuracy)), figure(num(e.test_loss)),
                  figure(num(e.train_loss))]);
    }));
  }

  // The hang report: the job's kept one on every poll, a fresh one from the debug button.
  function renderHang(report) {
    if (!report || !report.summary) return;
    $("hang-summary").textContent = report.summary;
    var first = num(report.first_sequence);
    var ranks = report.ranks || [];
    $("hang-table").hidden = ranks.length === 0;
    replaceChildren($("hang-ranks"), ranks.map(function (r) {
      var at = "";
      if (report.ranks_disagree) {
        var entry = (r.entries || []).filter(function (e) {
          return num(e.sequence) === first;
        })[0];
        at = entry ? String(entry.state || "").toLowerCase()
                   : (num(r.collectives_issued) <= first ? "never entered" : "");
      }
      return row([num(r.rank), r.answered ? "yes" : "no", seconds(r.silent_ms),
                  num(r.collectives_issued), num(r.collectives_completed), at],
                 {"data-rank": num(r.rank)});
    }));
  }

  function debugJob(id) {
    var button = $("debug-button");
    button.disabled = true;
    $("debug-note").textContent = "asking the ranks…";
    fetchJson("/api/jobs/" + encodeURIComponent(id) + "/debug").then(function (answer) {
      renderHang(answer.report);
      $("debug-note").textContent = "taken " + time(answer.report.created_unix_ms);
    }).catch(function (error) {
      $("debug-note").textContent = String(error && error.message || error);
    }).then(function () { button.disabled = false; });
  }

  function pollJob(id) {
    var base = "/api/jobs/" + encodeURIComponent(id);
    Promise.all([fetchJson(base), fetchJson(base + "/metrics")]).then(function (answers) {
      var job = answers[0].job || {};
      renderSummary(job);
      renderCharts(job, answers[1]);
      renderAlarms(job);
      renderAttempts(job);
      renderRanks(job);
      renderEpochs(job);
      renderHang(job.hang);
      showError(null);
      var over = TERMINAL.indexOf(job.state) >= 0;
      document.body.dataset.live = over ? "false" : "true";
      markPolled(over ? "the job has ended" : "polling every " + POLL_MS / 1000 + " s");
      if (!over) setTimeout(function () { pollJob(id); }, POLL_MS);
    }).catch(function (error) {
      showError(error);
      setTimeout(function () { pollJob(id); }, POLL_MS);
    });
  }

  // ---- start ----------------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", function () {
    document.body.dataset.polls = 0;
    if (document.body.dataset.page === "job") {
      // /job/<id>
      var id = decodeURIComponent(location.pathname.replace(/^\/job\//, "").replace(/\/$/, ""));
      document.body.dataset.job = id;
      $("job-id").textContent = id;
      $("debug-button").addEventListener("click", function () { debugJob(id); });
      pollJob(id);
    } else {
      pollFleet();
    }
  });
})();
