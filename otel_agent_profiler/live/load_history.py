"""The inference servers' recent samples, added to by a polling thread while spans are profiled.

The live side of ``core.backend_load``: the poller (``backend_poller.py``) adds a sample per server
about once a second, and the profiling step reads what each LLM call met. The history is the only
state; what a call met is computed by the pure functions in ``core.backend_load``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.backend_load import DEFAULT_MAX_GAP_NS, DEFAULT_MAX_SAMPLES, ReadsLoad
from ..core.profile import LoadSample


@dataclass
class LoadHistory(ReadsLoad):
    """The recent samples of every polled server, bounded, safe to add to from a polling thread.

    Args:
        max_samples: Samples kept per server; the oldest go first.
        max_gap_ns: How old a sample before a call may be and still describe it.
    """

    max_samples: int = DEFAULT_MAX_SAMPLES
    max_gap_ns: int = DEFAULT_MAX_GAP_NS
    _by_source: dict[str, deque[LoadSample]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, sample: LoadSample) -> None:
        """Keep ``sample``; samples of one server must arrive in time order (a poller's do)."""
        with self._lock:
            history = self._by_source.get(sample.source)
            if history is None:
                history = self._by_source[sample.source] = deque(maxlen=self.max_samples)
            if history and sample.time_ns < history[-1].time_ns:
                return  # a clock step back: keep the history sorted rather than guess
            history.append(sample)

    def sources(self) -> list[str]:
        """The servers with samples, in the order they were first seen."""
        with self._lock:
            return list(self._by_source)

    def samples(self, source: str) -> list[LoadSample]:
        """A copy of one server's samples, oldest first."""
        with self._lock:
            return list(self._by_source.get(source, ()))

    def histories(self) -> list[Sequence[LoadSample]]:
        """Every server's samples, oldest first; the list is a copy, each deque the live one (only ever appended to)."""
        with self._lock:
            return list(self._by_source.values())
