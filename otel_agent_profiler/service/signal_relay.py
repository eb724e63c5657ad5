"""Metrics and logs: passed through to the upstream unchanged, bounded and counted like spans.

An application pointed at ``serve`` (``OTEL_EXPORTER_OTLP_ENDPOINT``) sends all three signals
there. Traces are profiled (``pipeline``); metrics and logs are queued as received and forwarded
by their own ``Forwarder`` (retried with backoff while the upstream fails). What waits is held
against the same limits as spans: at ``max_pending_spans`` items (data points or log records) of
this signal, or when the bytes held by the pipeline and every pass-through together reach
``max_held_bytes``, requests are refused with ``Overloaded`` (retryable) and nothing is taken.
Without an upstream they are accepted and counted, and go no further.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import Overloaded
from .forwarder import DeliveryCounts, Forwarder, Outcome
from .signals import Signal


@dataclass
class RelayCounts(DeliveryCounts):
    """One signal's running totals: items received, forwarded, failed and rejected by the upstream,
    requests taken, items held now, and requests refused."""

    requests: int = 0
    held: int = 0
    rejected_requests: int = 0


class SignalRelay:
    """One signal's way to the upstream: admission against the limits, the forwarder, the counts."""

    def __init__(
        self,
        signal: Signal,
        forwarder: Forwarder | None,
        *,
        max_pending_items: int,
        max_held_bytes: int,
        other_held_bytes: Callable[[], int] = lambda: 0,
    ) -> None:
        self.signal = signal
        self.forwarder = forwarder
        self._max_pending_items = max_pending_items
        self._max_held_bytes = max_held_bytes
        self._other_held_bytes = other_held_bytes
        self._lock = threading.Lock()
        self._stopping = False
        self._counts = RelayCounts()
        #: Bytes of the requests held (taken, not yet delivered or given up), for the shared memory limit.
        self.held_bytes = 0
        if forwarder is not None:
            forwarder.on_done = self._settled

    def _limit_reached(self) -> str | None:
        """Why no request can be taken now, or None. Called with the lock held."""
        if self._stopping:
            return "shutting down"
        held_items = self._counts.held
        if held_items >= self._max_pending_items:
            return f"{held_items} {self.signal.item}s held (--max-pending-spans {self._max_pending_items})"
        held_bytes = self.held_bytes + self._other_held_bytes()
        if held_bytes >= self._max_held_bytes:
            return f"{held_bytes} bytes held (memory limit {self._max_held_bytes})"
        return None

    def overloaded(self) -> bool:
        with self._lock:
            return self._limit_reached() is not None

    def receive(self, request: Any, size_bytes: int) -> int:
        """Take ``request`` to forward as it is; returns its item count. Raises ``Overloaded`` (nothing taken)."""
        count = self.signal.count(request)
        with self._lock:
            reason = self._limit_reached()
            if reason is not None:
                self._counts.rejected_requests += 1
                raise Overloaded(reason)
            self._counts.requests += 1
            self._counts.received += count
            if self.forwarder is None or not count:
                return count
            self._counts.held += count
            self.held_bytes += size_bytes
        self.forwarder.submit(request, size_bytes, count)
        return count

    def _settled(self, outcome: Outcome, size_bytes: int) -> None:
        with self._lock:
            self._counts.settle(outcome)
            self._counts.held -= outcome.forwarded + outcome.failed + outcome.rejected
            self.held_bytes -= size_bytes

    def stop_receiving(self) -> None:
        with self._lock:
            self._stopping = True

    def counts(self) -> dict[str, int]:
        """What ``/health`` shows under ``signals`` (see :class:`RelayCounts`)."""
        with self._lock:
            return asdict(self._counts)
