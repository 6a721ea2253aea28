"""Sends a rank's StepReports to the coordinator (WorkerService.ReportProgress).

A background thread batches the reports: `add()` never blocks training (a bounded queue; when it
is full the oldest report is dropped, which the coordinator's step judge tolerates), and at most
one ReportProgress is sent every `min_interval_s` (0.25 s) unless someone waits in `flush()`. UNAVAILABLE
and DEADLINE_EXCEEDED are retried with backoff, and so is RESOURCE_EXHAUSTED (the coordinator's
limit of calls per second per rank, --max_reports_per_second: the refused call recorded
nothing, the same batch goes again once the backoff has let the limit refill); FAILED_PRECONDITION
(a stale generation: the attempt is over) and an answer with `stop` set `stop_reason`, which the
watcher turns into JobStopped at the next optimizer step.

With a collective trace (_trace.CollectiveTrace), every request carries how many collectives the
rank issued and completed, an idle reporter sends an empty request every `keepalive_s` (so a rank
blocked in a collective still answers), and an answer with `send_trace` set makes the thread
send the ring at once (hang forensics: `ringleader debug`).

Several coordinators (a leader and its standbys): `address` may be a list, "host:port[,...]",
one channel per address, opened when first used. A standby answers UNAVAILABLE and names the
leader in the trailing metadata "ringleader-leader" without recording anything: the same
request goes to that leader at once (a few such hops per call at most). An UNAVAILABLE without
that hint moves on to the next address, and the backoff above applies.
"""
from __future__ import annotations

import collections
import os
import sys
import threading
import time
from typing import Any

import grpc

from ringleader import _env
from ringleader._proto import ringleader_pb2 as pb
from ringleader._proto import ringleader_pb2_grpc as pb_grpc

# Answers after which the same batch is sent again (after a backoff): the coordinator could not
# be reached, or refused the call as over its per-rank rate limit without recording it.
_RETRIED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.StatusCode.RESOURCE_EXHAUSTED)


# How many times one call follows a standby's hint at once (coordinators naming each other
# during an election must not loop).
_MAX_REDIRECTS = 4


def _log(message: str) -> None:
    print(f"ringleader: {message}", file=sys.stderr, flush=True)


def _channel(address: str, tls_dir: str) -> grpc.Channel:
    """Plaintext, or mutual TLS with the worker's files (as the rank binary does)."""
    if not tls_dir:
        return grpc.insecure_channel(address)

    def read(name: str) -> bytes:
        with open(os.path.join(tls_dir, name), "rb") as f:
            return f.read()

    credentials = grpc.ssl_channel_credentials(root_certificates=read("ca.pem"),
                                               private_key=read("worker.key"),
                                               certificate_chain=read("worker.pem"))
    return grpc.secure_channel(address, credentials)


def _leader_hint(error: grpc.RpcError) -> str:
    """The leader a standby coordinator named in its refusal's trailing metadata; "" if none."""
    trailing = getattr(error, "trailing_metadata", None)
    try:
        metadata = trailing() if callable(trailing) else None
    except Exception:  # noqa: BLE001 - an error without metadata is simply not a hint
        metadata = None
    for key, value in metadata or ():
        if key == _env.LEADER_METADATA_KEY:
            return value.decode() if isinstance(value, bytes) else str(value)
    return ""


class _Coordinators:
    """The coordinator addresses, one channel each (opened when first used), and the one calls
    go to now. Thread-safe."""

    def __init__(self, address: str, tls_dir: str) -> None:
        try:
            self._addresses = _env.parse_coordinator_addresses(address)
        except ValueError:
            self._addresses = [address]  # not a list: one gRPC target, as given
        self._tls_dir = tls_dir
        self._current = 0
        self._lock = threading.Lock()
        self._stubs: dict[str, Any] = {}
        self._channels: list[grpc.Channel] = []
        self._closed = False

    def current(self) -> tuple[str, Any]:
        """The current address and its WorkerService stub."""
        with self._lock:
            if self._closed:
                raise ValueError("Cannot invoke RPC: the reporter's channels are closed")
            address = self._addresses[self._current]
            stub = self._stubs.get(address)
            if stub is None:
                channel = _channel(address, self._tls_dir)
                self._channels.append(channel)
                stub = self._stubs[address] = pb_grpc.WorkerServiceStub(channel)
            return address, stub

    def refused(self, address: str, leader: str) -> None:
        """`address` answered UNAVAILABLE: go to `leader` (a standby's hint; added when new), or
        without one to the address after `address`, unless another call moved on already."""
        with self._lock:
            if leader:
                if leader not in self._addresses:
                    self._addresses.append(leader)
                self._current = self._addresses.index(leader)
            elif self._addresses[self._current] == address:
                self._current = (self._current + 1) % len(self._addresses)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._channels = self._channels, []
            self._stubs.clear()
        for channel in channels:
            channel.close()


class Reporter:
    """One rank's report channel to the coordinator. Thread-safe."""

    def __init__(self, address: str, job_id: str, generation: int, rank: int, *,
                 min_interval_s: float = 0.25, max_queue: int = 4096, max_batch: int = 512,
                 rpc_timeout_s: float = 10.0, retry_for_s: float = 60.0,
                 tls_dir: str = "", attempt_token: str = "", trace: Any = None,
                 keepalive_s: float = 1.0) -> None:
        self.address = address
        self.job_id = job_id
        self.generation = generation
        self.rank = rank
        self._min_interval_s = min_interval_s
        self._max_queue = max_queue
        self._max_batch = max_batch
        self._rpc_timeout_s = rpc_timeout_s
        self._retry_for_s = retry_for_s
        self._trace = trace
        self._keepalive_s = keepalive_s
        self._trace_wanted = False

        self._coordinators = _Coordinators(address, tls_dir)
        # The attempt's credential (coordinator/core/attempt_tokens.h), on every call.
        self._metadata = (("ringleader-attempt-token", attempt_token),) if attempt_token else ()

        self._cv = threading.Condition()
        # Step reports in order; None marks an epoch report added (they travel in _epochs).
        self._queue: collections.deque[pb.StepReport | None] = collections.deque()
        self._epochs: list[pb.EpochReport] = []  # sent with the next request
        self._enqueued = 0  # reports ever added
        self._done = 0  # reports sent or dropped
        self._flushing = 0  # callers waiting in flush()
        self._closing = False
        self._last_send = 0.0
        self._stop_reason: str | None = None
        self._steps_judged = 0
        self.dropped = 0  # reports dropped (queue full or undeliverable)
        self.sent_batches = 0
        self._warned: set[grpc.StatusCode] = set()

        self._thread = threading.Thread(target=self._run, name="ringleader-reporter", daemon=True)
        self._thread.start()

    # -- what training sees -------------------------------------------------------------------

    @property
    def stop_reason(self) -> str | None:
        """Why the coordinator wants this attempt stopped; None while it runs on."""
        return self._stop_reason

    @property
    def steps_judged(self) -> int:
        """Steps of this attempt the coordinator's judge has judged (latest answer)."""
        return self._steps_judged

    def add(self, report: pb.StepReport) -> None:
        """Queues one report; never blocks (drops the oldest queued report when full)."""
        with self._cv:
            if self._closing:
                return
            if len(self._queue) >= self._max_queue:
                if self._queue.popleft() is not None:  # None: an epoch marker (epoch kept)
                    self.dropped += 1
                self._done += 1
            self._queue.append(report)
            self._enqueued += 1
            if len(self._queue) == 1 or self._flushing:
                self._cv.notify_all()

    def add_epoch(self, report: pb.EpochReport) -> None:
        """Queues one epoch report (sent with the next batch; an epoch alone counts as one
        report for flush())."""
        with self._cv:
            if self._closing:
                return
            self._epochs.append(report)
            self._queue.append(None)
            self._enqueued += 1
            self._cv.notify_all()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Waits until every report added so far was sent (or dropped). False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            target = self._enqueued
            self._flushing += 1
            self._cv.notify_all()
            try:
                while self._done < target:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._thread.is_alive():
                        return False
                    self._cv.wait(left)
                return True
            finally:
                self._flushing -= 1

    def poll(self) -> bool:
        """One ReportProgress without reports (asks for stop / steps_judged). False when the
        coordinator could not be reached, or refused the poll as over its rate limit
        (RESOURCE_EXHAUSTED, not logged: poll again later)."""
        request = self._request([], [])
        try:
            response = self._report_progress(request)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                return False
            return self._note_error(error, reports=0)
        self._note_answer(response)
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Flushes (at most `timeout_s`), stops the thread and closes the channel. Idempotent."""
        with self._cv:
            if self._closing:
                return
        if not self.flush(timeout_s):
            with self._cv:
                left = len(self._queue)
            if left:
                _log(f"{left} step reports not delivered to {self.address} before exit")
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self._thread.join(timeout=1.0)
        self._coordinators.close()

    # -- the sender thread --------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cv:
                idle_since = time.monotonic()
                keepalive = False
                while not self._queue and not self._closing and not self._trace_wanted:
                    if self._trace is None:
                        self._cv.wait()
                        continue
                    left = idle_since + self._keepalive_s - time.monotonic()
                    if left <= 0:
                        keepalive = True
                        break
                    self._cv.wait(left)
                if self._closing and not self._queue:
                    return
                if (keepalive or self._trace_wanted) and not self._queue:
                    send_trace, self._trace_wanted = self._trace_wanted, False
                    taken = []
                else:
                    send_trace = False
                    taken = None
            if taken is not None:  # a keepalive, or the ring the coordinator asked for
                self._send([], [], send_trace=send_trace)
                with self._cv:
                    self._last_send = time.monotonic()
                continue
            with self._cv:
                # Linger so that one RPC carries many steps, unless someone waits for them.
                while not self._flushing and not self._closing:
                    left = self._last_send + self._min_interval_s - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
                taken = [self._queue.popleft()
                         for _ in range(min(len(self._queue), self._max_batch))]
                epochs, self._epochs = self._epochs, []
                send_trace, self._trace_wanted = self._trace_wanted, False
            batch = [report for report in taken if report is not None]
            delivered = self._send(batch, epochs, send_trace=send_trace)
            with self._cv:
                self._last_send = time.monotonic()
                self.sent_batches += 1
                if not delivered:
                    self.dropped += len(batch)
                self._done += len(taken)
                self._cv.notify_all()

    def _request(self, batch: list[pb.StepReport], epochs: list[pb.EpochReport],
                 send_trace: bool = False) -> pb.ReportProgressRequest:
        request = pb.ReportProgressRequest(job_id=self.job_id, generation=self.generation,
                                           rank=self.rank, steps=batch, epochs=epochs)
        if self._trace is not None:
            # No phase: the launcher reports the rank's phase; these counts are the script's.
            request.activity.collectives_issued = self._trace.issued
            request.activity.collectives_completed = self._trace.completed
            if send_trace:
                request.has_trace = True
                request.trace.extend(self._trace.entries())
        return request

    def _send(self, batch: list[pb.StepReport], epochs: list[pb.EpochReport],
              send_trace: bool = False) -> bool:
        request = self._request(batch, epochs, send_trace)
        give_up = time.monotonic() + self._retry_for_s
        backoff = 0.05
        while True:
            try:
                response = self._report_progress(request)
            except grpc.RpcError as error:
                retry = error.code() in _RETRIED
                if not retry or time.monotonic() + backoff > give_up or self._closing:
                    self._note_error(error, reports=len(batch))
                    return False
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            self._note_answer(response)
            return True

    def _report_progress(self, request: pb.ReportProgressRequest) -> pb.ReportProgressResponse:
        """One ReportProgress on the current coordinator, sent again at once to the leader a
        standby names; any other error is raised (the address moved on after an UNAVAILABLE)."""
        redirects = 0
        while True:
            address, stub = self._coordinators.current()
            try:
                return stub.ReportProgress(request, timeout=self._rpc_timeout_s,
                                           metadata=self._metadata)
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                leader = _leader_hint(error)
                if leader == address:
                    leader = ""  # not a standby's hint: the leader itself failed
                self._coordinators.refused(address, leader)
                redirects += 1
                if not leader or redirects > _MAX_REDIRECTS:
                    raise

    def _note_answer(self, response: pb.ReportProgressResponse) -> None:
        with self._cv:
            if response.steps_judged > self._steps_judged:
                self._steps_judged = response.steps_judged
            if response.send_trace and self._trace is not None:
                self._trace_wanted = True
                self._cv.notify_all()
            if response.stop and self._stop_reason is None:
                self._stop_reason = response.stop_reason or "the coordinator stopped this attempt"

    def _note_error(self, error: grpc.RpcError, reports: int) -> bool:
        code = error.code()
        details = error.details() or code.name
        if code == grpc.StatusCode.FAILED_PRECONDITION:
            # A stale generation (or a finished job): this attempt must be abandoned.
            with self._cv:
                if self._stop_reason is None:
                    self._stop_reason = f"the coordinator refused this attempt's reports: {details}"
            return False
        if code not in self._warned:
            self._warned.add(code)
            what = f"{reports} step reports" if reports else "a progress poll"
            _log(f"ReportProgress to {self.address} failed ({code.name}: {details}); "
                 f"{what} lost (said once per error kind)")
        return False
