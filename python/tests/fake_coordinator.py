"""A fake ringleader coordinator for tests: WorkerService.ReportProgress only.

It records every request and answers per job id, as configured:

    fake = FakeCoordinator()            # serves on 127.0.0.1:<free port>
    fake.configure("job-a", world_size=2, stop_on_unsynced="step %d: rank(s) %s not synced")
    env = fake.env("job-a", rank=0)     # the RINGLEADER_* variables for a rank
    ...
    fake.steps("job-a", rank=0)         # every StepReport rank 0 sent, in order
    fake.stop()

Answers: `steps_judged` is the highest step every rank has reported (what the real step judge
says); `stop` is set when the job was configured to stop on an unsynchronised step (a step with
collectives == 0, as the real judge's NOT_SYNCHRONIZED under checks.on_desync "fail"), or once a
rank reported `stop_after_step`.

StandbyCoordinator is a standby in front of it: every call refused with UNAVAILABLE, naming the
leader (the fake's address) in the trailing metadata "ringleader-leader", as a real standby does.
"""
from __future__ import annotations

import dataclasses
import threading
from concurrent import futures

import grpc

from ringleader._proto import ringleader_pb2 as pb
from ringleader._proto import ringleader_pb2_grpc as pb_grpc


@dataclasses.dataclass
class JobConfig:
    world_size: int = 2
    # Stop the job when a step with no collective arrives (reason formatted with step, ranks).
    stop_on_unsynced: str | None = None
    # Stop the job once any rank reported this step (0 = never), with this reason.
    stop_after_step: int = 0
    stop_reason: str = "job cancelled by the test"
    # Refuse every report with this gRPC status (e.g. UNAVAILABLE), `fail_count` times.
    fail_code: grpc.StatusCode | None = None
    fail_count: int = 0
    # Report steps_judged at all (False: the judge never gets there).
    judge: bool = True
    # Answer send_trace (hang forensics) until a rank sent its ring.
    want_trace: bool = False


@dataclasses.dataclass
class JobState:
    config: JobConfig
    reports: dict[int, list[pb.StepReport]] = dataclasses.field(default_factory=dict)
    epochs: dict[int, list[pb.EpochReport]] = dataclasses.field(default_factory=dict)
    requests: list[pb.ReportProgressRequest] = dataclasses.field(default_factory=list)
    last_step: dict[int, int] = dataclasses.field(default_factory=dict)
    stop_reason: str | None = None
    unsynced: dict[int, set[int]] = dataclasses.field(default_factory=dict)


class _Servicer(pb_grpc.WorkerServiceServicer):
    def __init__(self, fake: "FakeCoordinator") -> None:
        self._fake = fake

    def ReportProgress(self, request: pb.ReportProgressRequest,
                       context: grpc.ServicerContext) -> pb.ReportProgressResponse:
        return self._fake._report(request, context)


class StandbyCoordinator:
    """A standby coordinator (coordinator/rpc/standby_service_grpc.h): refuses every
    WorkerService and JobService call with UNAVAILABLE, naming `leader` (settable; "" = no leader
    known) in the trailing metadata "ringleader-leader". Counts the calls it refused."""

    _SERVICES = ("/ringleader.v1.WorkerService/", "/ringleader.v1.JobService/")

    def __init__(self, leader: str = "") -> None:
        self.leader = leader
        self.refused = 0
        self._lock = threading.Lock()
        standby = self

        class Handler(grpc.GenericRpcHandler):
            def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
                if not details.method.startswith(StandbyCoordinator._SERVICES):
                    return None  # UNIMPLEMENTED
                return grpc.unary_unary_rpc_method_handler(standby._refuse)

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self._server.add_generic_rpc_handlers((Handler(),))
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{port}"
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None)

    def _refuse(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        with self._lock:
            self.refused += 1
            leader = self.leader
        if not leader:
            context.abort(grpc.StatusCode.UNAVAILABLE,
                          f"coordinator {self.address} is a standby; no leader is elected yet "
                          "(retry shortly, or another coordinator of the list)")
        context.set_trailing_metadata((("ringleader-leader", leader),))
        context.abort(grpc.StatusCode.UNAVAILABLE,
                      f"coordinator {self.address} is a standby; the leader is {leader} "
                      "(retry there)")
        return b""


class FakeCoordinator:
    def __init__(self, auto_configure: bool = False, world_size: int = 2) -> None:
        """`auto_configure`: answer unknown jobs too (default JobConfig, `world_size` ranks)."""
        self._lock = threading.Lock()
        self._jobs: dict[str, JobState] = {}
        self._auto = JobConfig(world_size=world_size) if auto_configure else None
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_WorkerServiceServicer_to_server(_Servicer(self), self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{port}"
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None)

    def configure(self, job_id: str, **config: object) -> None:
        with self._lock:
            self._jobs[job_id] = JobState(JobConfig(**config))  # type: ignore[arg-type]

    def env(self, job_id: str, rank: int, generation: int = 1) -> dict[str, str]:
        return {"RINGLEADER_COORDINATOR": self.address, "RINGLEADER_JOB": job_id,
                "RINGLEADER_GENERATION": str(generation), "RINGLEADER_RANK": str(rank)}

    def jobs(self) -> list[str]:
        with self._lock:
            return list(self._jobs)

    def steps(self, job_id: str, rank: int) -> list[pb.StepReport]:
        with self._lock:
            return list(self._jobs[job_id].reports.get(rank, []))

    def epochs(self, job_id: str, rank: int) -> list[pb.EpochReport]:
        with self._lock:
            return list(self._jobs[job_id].epochs.get(rank, []))

    def requests(self, job_id: str) -> list[pb.ReportProgressRequest]:
        with self._lock:
            return list(self._jobs[job_id].requests)

    def _report(self, request: pb.ReportProgressRequest,
                context: grpc.ServicerContext) -> pb.ReportProgressResponse:
        with self._lock:
            job = self._jobs.get(request.job_id)
            if job is None and self._auto is not None:
                job = self._jobs[request.job_id] = JobState(dataclasses.replace(self._auto))
            if job is None:
                context.abort(grpc.StatusCode.NOT_FOUND, f"unknown job {request.job_id}")
            job.requests.append(request)
            config = job.config
            if config.fail_code is not None and config.fail_count > 0:
                config.fail_count -= 1
                context.abort(config.fail_code, "injected by the test")
            job.epochs.setdefault(request.rank, []).extend(request.epochs)
            reports = job.reports.setdefault(request.rank, [])
            for step in request.steps:
                reports.append(step)
                job.last_step[request.rank] = max(job.last_step.get(request.rank, 0), step.step)
                if step.collectives == 0:
                    job.unsynced.setdefault(step.step, set()).add(request.rank)
                if config.stop_after_step and step.step >= config.stop_after_step and \
                        job.stop_reason is None:
                    job.stop_reason = config.stop_reason
            judged = 0
            if config.judge and len(job.last_step) == config.world_size:
                judged = min(job.last_step.values())
            # Like the real judge: a verdict on a step needs every rank's report of it.
            if config.stop_on_unsynced and job.stop_reason is None:
                bad = sorted(step for step in job.unsynced if step <= judged)
                if bad:
                    ranks = ", ".join(str(r) for r in sorted(job.unsynced[bad[0]]))
                    job.stop_reason = config.stop_on_unsynced % (bad[0], ranks)
            if request.has_trace:
                config.want_trace = False
            return pb.ReportProgressResponse(stop=job.stop_reason is not None,
                                             stop_reason=job.stop_reason or "",
                                             steps_judged=judged,
                                             send_trace=config.want_trace)


def main() -> None:
    """Serves until SIGTERM/SIGINT, answering every job; writes host:port to --address-file and,
    at exit, a JSON summary (reports and requests per job and rank) to --summary-file."""
    import argparse
    import json
    import signal

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--address-file", required=True)
    parser.add_argument("--summary-file", default="")
    parser.add_argument("--world-size", type=int, default=2)
    args = parser.parse_args()
    fake = FakeCoordinator(auto_configure=True, world_size=args.world_size)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    tmp = args.address_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(fake.address)
    import os
    os.replace(tmp, args.address_file)
    done.wait()
    if args.summary_file:
        summary = {}
        for job in fake.jobs():
            ranks = {}
            for rank in range(args.world_size):
                reports = fake.steps(job, rank)
                ranks[str(rank)] = {"reports": len(reports),
                                    "last_step": reports[-1].step if reports else 0}
            summary[job] = {"requests": len(fake.requests(job)), "ranks": ranks}
        with open(args.summary_file, "w") as f:
            json.dump(summary, f)
    fake.stop()


if __name__ == "__main__":
    main()
