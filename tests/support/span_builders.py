"""Small helpers for building ``SpanRecord`` inputs and reading profiles back by span name.

Spans are named by short strings ("root", "A", ...). Their span ids are 16 lowercase hex
characters derived from the name (see :func:`sid`), and every record shares one trace id.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping

from otel_agent_profiler.adapters.recorded_attributes import RECORDED_ATTRIBUTES
from otel_agent_profiler.core import SpanEvent, SpanKind, SpanProfile, SpanRecord, TraceProfile, profile_trace

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"

INTERNAL = SpanKind.INTERNAL
SERVER = SpanKind.SERVER
CLIENT = SpanKind.CLIENT
PRODUCER = SpanKind.PRODUCER
CONSUMER = SpanKind.CONSUMER


def sid(name: str | int) -> str:
    """The 16-hex span id of a short span name (or of an integer).

    Names of up to 8 ASCII characters are hex-encoded and left-padded with zeros, so for
    names of equal length the id order is the name order ("A" < "B"). Longer names are
    hashed; integers are formatted as 16 hex digits (so their order is kept as well).
    """
    if isinstance(name, int):
        return f"{name:016x}"
    raw = name.encode()
    if len(raw) <= 8:
        return raw.hex().rjust(16, "0")
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


def span(
    name: str | int,
    parent: str | int | None,
    start: int,
    end: int | None,
    kind: SpanKind = INTERNAL,
    *,
    trace_id: str = TRACE_ID,
    attributes: Mapping[str, object] | None = None,
    scope: str = "",
    **attrs: object,
) -> SpanRecord:
    """A ``SpanRecord`` named ``name`` whose parent is the span named ``parent`` (or none).

    ``attributes`` takes keys that are not Python identifiers (``gen_ai.operation.name``);
    other keyword arguments are added as attributes too. ``scope`` names the instrumentation
    scope that wrote the span.
    """
    merged: dict[str, object] = dict(attributes or {})
    merged.update(attrs)
    return SpanRecord(
        trace_id=trace_id,
        span_id=sid(name),
        parent_span_id=None if parent is None else sid(parent),
        name=str(name),
        start_ns=start,
        end_ns=end,
        kind=kind,
        attributes=merged,
        scope=scope,
    )


def with_events(record: SpanRecord, *events: tuple[str, int]) -> SpanRecord:
    """A copy of ``record`` carrying ``events``, given as ``(name, time_ns)`` pairs in order."""
    return dataclasses.replace(record, events=tuple(SpanEvent(name, time_ns) for name, time_ns in events))


def profile(records: Iterable[SpanRecord]) -> TraceProfile:
    """Profile the records of one trace as the package does: reading what was recorded on them."""
    return profile_trace(list(records), recorded=RECORDED_ATTRIBUTES)


def by_name(trace: TraceProfile) -> dict[str, SpanProfile]:
    """The trace's span profiles keyed by span name (names must be unique)."""
    result: dict[str, SpanProfile] = {}
    for node in trace.spans:
        assert node.name not in result, f"span name {node.name!r} is not unique"
        result[node.name] = node
    return result


def by_id(trace: TraceProfile) -> dict[str, SpanProfile]:
    """The trace's span profiles keyed by span id."""
    return {node.span_id: node for node in trace.spans}


def critical_path_of(trace: TraceProfile) -> dict[str, tuple[int, bool]]:
    """``{name: (critical_path_ns, on_critical_path)}`` for every span of the trace."""
    return {name: (node.critical_path_ns, node.on_critical_path) for name, node in by_name(trace).items()}


def self_times_of(trace: TraceProfile) -> dict[str, int]:
    """``{name: self_time_ns}`` for every span of the trace."""
    return {name: node.self_time_ns for name, node in by_name(trace).items()}


def subtree(node: SpanProfile) -> list[SpanProfile]:
    """``node`` and all its descendants, without recursion."""
    result: list[SpanProfile] = []
    stack = [node]
    while stack:
        current = stack.pop()
        result.append(current)
        stack.extend(current.children)
    return result


def anomaly_kinds(trace: TraceProfile) -> set[tuple[str, str]]:
    """The set of ``(kind, span_id)`` pairs of the trace's anomalies."""
    return {(anomaly.kind, anomaly.span_id) for anomaly in trace.anomalies}
