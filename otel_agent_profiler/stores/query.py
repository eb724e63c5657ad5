"""What to fetch from a trace store: the store, its address, and a search or a list of trace ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .store_names import (
    DEFAULT_LIMIT as DEFAULT_LIMIT,
    JAEGER as JAEGER,
    PHOENIX as PHOENIX,
    STORES as STORES,
    TEMPO as TEMPO,
)

#: The window a Jaeger or Tempo search covers when no time is given, as in their own UIs.
DEFAULT_WINDOW_NS = 3600 * 10**9


@dataclass(frozen=True)
class StoreQuery:
    """One fetch: either the traces ``trace_ids`` or a search with the store's own filters.

    Times are ns since the epoch; ``None`` leaves the bound to the store (see
    :data:`DEFAULT_WINDOW_NS`).
    """

    store: str
    url: str
    trace_ids: tuple[str, ...] = ()
    #: Jaeger: the service, operation and ``key=value`` tags searched for.
    service: str | None = None
    operation: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    #: Tempo: the TraceQL query.
    traceql: str | None = None
    #: Phoenix: the project.
    project: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    limit: int = DEFAULT_LIMIT

    def window_ns(self, now_ns: int) -> tuple[int, int]:
        """The search's start and end: where not given, the end is ``now_ns`` and the start
        :data:`DEFAULT_WINDOW_NS` before the end (Jaeger's and Tempo's searches want both)."""
        end_ns = self.end_ns if self.end_ns is not None else now_ns
        return (self.start_ns if self.start_ns is not None else end_ns - DEFAULT_WINDOW_NS), end_ns

    def describe(self) -> str:
        """What was asked for, for messages: ``service=agent``, ``trace 4bf9...``."""
        if self.trace_ids:
            return ("trace " if len(self.trace_ids) == 1 else "traces ") + ", ".join(self.trace_ids)
        if self.store == JAEGER:
            parts = [f"service={self.service}"]
            if self.operation:
                parts.append(f"operation={self.operation}")
            parts += [f"{key}={value}" for key, value in self.tags]
            return " ".join(parts)
        if self.store == TEMPO:
            return f"query {self.traceql}"
        return f"project {self.project}"


@dataclass
class Fetched:
    """One trace as a store answered it."""

    #: Where it came from, as a path names a file: ``jaeger trace 4bf9...``.
    name: str
    #: A trace document the adapters read (Jaeger JSON or OTLP JSON); None: the store has no such trace.
    document: Any
    #: What could not be turned into that document (Phoenix spans of a shape it does not give).
    problems: list[str] = field(default_factory=list)
