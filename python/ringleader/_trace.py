"""A rank's collective trace for hang forensics: the ring of its last 256 bucket collectives.

The same ring the built-in trainer keeps (worker/collective/traced_collective.h): each entry has
the rank's sequence number (the same collective has the same number on every rank), kind, dtype,
bytes, bucket, the step and its state. A DDP comm hook sees a bucket when it is ready (ENQUEUED:
the process group runs it asynchronously; when it starts cannot be told from Python) and its
future when it is done (COMPLETED, or FAILED). Thread-safe: the hook adds on the autograd
thread, futures complete on the communication thread, the reporter reads on its own.
"""
from __future__ import annotations

import collections
import threading
import time

from ringleader._proto import ringleader_pb2 as pb

CAPACITY = 256

_OPS = {"all_reduce": pb.COLLECTIVE_OP_ALL_REDUCE, "broadcast": pb.COLLECTIVE_OP_BROADCAST,
        "all_gather": pb.COLLECTIVE_OP_ALL_GATHER, "reduce_scatter": pb.COLLECTIVE_OP_REDUCE_SCATTER,
        "barrier": pb.COLLECTIVE_OP_BARRIER}


class CollectiveTrace:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self._lock = threading.Lock()
        self._ring: collections.deque[pb.CollectiveTraceEntry] = collections.deque(
            maxlen=max(1, capacity))
        self._issued = 0
        self._origin = time.monotonic()

    def _now_us(self) -> int:
        return max(1, int((time.monotonic() - self._origin) * 1e6))

    def add(self, op: str, dtype: str, nbytes: int, bucket: int, step: int) -> int:
        """Records a collective just issued; returns its sequence number."""
        entry = pb.CollectiveTraceEntry(op=_OPS[op], dtype=dtype, bytes=nbytes, bucket=bucket,
                                        step=step, state=pb.CollectiveTraceEntry.ENQUEUED,
                                        enqueued_us=self._now_us())
        with self._lock:
            entry.sequence = self._issued
            self._issued += 1
            self._ring.append(entry)
            return entry.sequence

    def finish(self, sequence: int, ok: bool) -> None:
        """The collective `sequence` is done (an evicted one is ignored)."""
        now = self._now_us()
        with self._lock:
            if not self._ring or sequence < self._ring[0].sequence:
                return
            entry = self._ring[sequence - self._ring[0].sequence]
            entry.state = (pb.CollectiveTraceEntry.COMPLETED if ok
                           else pb.CollectiveTraceEntry.FAILED)
            entry.completed_us = now

    @property
    def issued(self) -> int:
        with self._lock:
            return self._issued

    @property
    def completed(self) -> int:
        """Collectives done, counted in order: the oldest one not done (issued when all are)."""
        with self._lock:
            for entry in self._ring:
                if entry.state == pb.CollectiveTraceEntry.ENQUEUED:
                    return entry.sequence
            return self._issued

    def entries(self) -> list[pb.CollectiveTraceEntry]:
        """The ring, oldest first (copies)."""
        with self._lock:
            return [pb.CollectiveTraceEntry.FromString(e.SerializeToString()) for e in self._ring]

    def durations_us(self, first: int, limit: int = 256) -> list[int]:
        """How long each collective from `first` on took, from ready to done, in order; stops at
        the first one not done (or evicted) and after `limit`."""
        with self._lock:
            out: list[int] = []
            if not self._ring or first < self._ring[0].sequence:
                return out
            for entry in list(self._ring)[first - self._ring[0].sequence:]:
                if entry.state == pb.CollectiveTraceEntry.ENQUEUED or len(out) >= limit:
                    break
                out.append(max(0, entry.completed_us - entry.enqueued_us))
            return out
