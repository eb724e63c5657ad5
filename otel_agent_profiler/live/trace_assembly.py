"""Spans of the traces in flight, held until each trace is complete.

Thread-safe, with O(1) work per span under one short lock, and bounded: at most
``max_traces`` traces (in flight or waiting to be profiled) and ``max_spans_per_trace`` spans
each. Whatever a cap pushes out is handed back to be exported unprofiled, never dropped.
Spans are opaque here: anything with an id and a trace id.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

SpanT = TypeVar("SpanT")

#: Why spans were exported without a profile.
EVICTED = "unprofiled_trace_cap"
OVERSIZED = "unprofiled_span_cap"
LATE = "unprofiled_late"


@dataclass
class TraceState(Generic[SpanT]):
    trace_id: int
    #: Clock time of the trace's last span start or end: the wait for completion counts
    #: from there, so a long run that is still active is not cut short.
    last_activity: float
    spans: list[SpanT] = field(default_factory=list)
    open_span_ids: set[int] = field(default_factory=set)
    local_root_ended: bool = False


@dataclass
class Passthrough(Generic[SpanT]):
    """Spans to export unprofiled right away, and why."""

    reason: str
    spans: list[SpanT]


class TraceBuffer(Generic[SpanT]):
    def __init__(self, max_traces: int, max_spans_per_trace: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._max_traces = max_traces
        self._max_spans = max_spans_per_trace
        self._clock = clock
        self._lock = threading.Lock()
        self._in_flight: OrderedDict[int, TraceState[SpanT]] = OrderedDict()
        self._ready: deque[TraceState[SpanT]] = deque()
        # Traces already let go of (profiled, evicted, oversized, timed out): their later spans
        # are exported unprofiled. Bounded; the oldest ids are forgotten first.
        self._released: OrderedDict[int, str] = OrderedDict()
        self._max_released = max(1024, 8 * max_traces)

    def __len__(self) -> int:
        with self._lock:
            return len(self._in_flight) + len(self._ready)

    def _release(self, trace_id: int, reason: str) -> None:
        self._released[trace_id] = reason
        if len(self._released) > self._max_released:
            self._released.popitem(last=False)

    def _make_room(self) -> Passthrough[SpanT] | None:
        # The oldest data goes first: a trace waiting to be profiled is older than any in flight.
        if self._ready:
            state = self._ready.popleft()
        elif self._in_flight:
            _, state = self._in_flight.popitem(last=False)
        else:
            return None
        self._release(state.trace_id, EVICTED)
        return Passthrough(EVICTED, state.spans)

    def span_started(self, trace_id: int, span_id: int) -> Passthrough[SpanT] | None:
        """Note an open span. Returns spans pushed out to make room, if any."""
        with self._lock:
            state = self._in_flight.get(trace_id)
            if state is None:
                if trace_id in self._released:
                    return None
                evicted = None
                if len(self._in_flight) + len(self._ready) >= self._max_traces:
                    evicted = self._make_room()
                state = self._in_flight[trace_id] = TraceState(trace_id, self._clock())
                state.open_span_ids.add(span_id)
                return evicted
            state.open_span_ids.add(span_id)
            state.last_activity = self._clock()
            # Least recently active first: that is the order traces time out and are evicted in.
            self._in_flight.move_to_end(trace_id)
            return None

    def span_ended(
        self, trace_id: int, span_id: int, span: SpanT, is_local_root: bool
    ) -> tuple[list[Passthrough[SpanT]], bool]:
        """Hold an ended span. Returns the spans to export unprofiled now (usually none) and
        whether a trace became ready to profile."""
        passthrough: list[Passthrough[SpanT]] = []
        with self._lock:
            state = self._in_flight.get(trace_id)
            if state is None:
                reason = self._released.get(trace_id)
                if reason is not None:
                    return [Passthrough(reason if reason in (EVICTED, OVERSIZED) else LATE, [span])], False
                # A span we never saw start: the profiler was added while it was open.
                if len(self._in_flight) + len(self._ready) >= self._max_traces:
                    evicted = self._make_room()
                    if evicted is not None:
                        passthrough.append(evicted)
                state = self._in_flight[trace_id] = TraceState(trace_id, self._clock())
            state.open_span_ids.discard(span_id)
            state.last_activity = self._clock()
            self._in_flight.move_to_end(trace_id)
            if len(state.spans) >= self._max_spans:
                del self._in_flight[trace_id]
                self._release(trace_id, OVERSIZED)
                passthrough.append(Passthrough(OVERSIZED, [*state.spans, span]))
                return passthrough, False
            state.spans.append(span)
            if is_local_root:
                state.local_root_ended = True
            if state.local_root_ended and not state.open_span_ids:
                del self._in_flight[trace_id]
                self._ready.append(state)
                # From now on its spans are late, even before the worker takes the trace.
                self._release(trace_id, "profiled")
                return passthrough, True
            return passthrough, False

    def take_ready(self) -> list[TraceState[SpanT]]:
        """Complete traces, to be profiled (released when they became ready)."""
        with self._lock:
            ready = list(self._ready)
            self._ready.clear()
            return ready

    def take_expired(self, timeout_s: float) -> list[TraceState[SpanT]]:
        """Traces with no span started or ended for ``timeout_s``, to be profiled as they are."""
        deadline = self._clock() - timeout_s
        with self._lock:
            expired = []
            while self._in_flight:
                state = next(iter(self._in_flight.values()))
                if state.last_activity > deadline:
                    break
                self._in_flight.popitem(last=False)
                self._release(state.trace_id, "timed_out")
                expired.append(state)
            return expired

    def take_all(self) -> tuple[list[TraceState[SpanT]], list[TraceState[SpanT]]]:
        """Everything held: (complete traces, incomplete traces). Used by flush and shutdown."""
        with self._lock:
            ready = list(self._ready)
            self._ready.clear()
            incomplete = list(self._in_flight.values())
            self._in_flight.clear()
            for state in incomplete:
                self._release(state.trace_id, "flushed")
            return ready, incomplete

    def next_expiry(self, timeout_s: float) -> float | None:
        """Clock time at which the least recently active trace times out, if any."""
        with self._lock:
            if not self._in_flight:
                return None
            return next(iter(self._in_flight.values())).last_activity + timeout_s

    def has_ready(self) -> bool:
        with self._lock:
            return bool(self._ready)
