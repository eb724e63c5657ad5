"""Id generators that make trace ids chosen by a test (for sampling by trace id, and its edges)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace.id_generator import IdGenerator


class FixedTraceIds(IdGenerator):
    def __init__(self, trace_ids: Sequence[int]) -> None:
        self._trace_ids = iter(trace_ids)
        self._span_ids = itertools.count(1)
        self._lock = threading.Lock()

    def generate_span_id(self) -> int:
        with self._lock:
            return next(self._span_ids)

    def generate_trace_id(self) -> int:
        with self._lock:
            return next(self._trace_ids)
