"""Children that outlive their parent, or start after it ended: anomalies, with where their time went.

Jaeger's rule, which self time and the critical path follow, clips a child to its parent's
interval: the part of the child after its parent's end belongs to neither. That time does not
vanish: it becomes the self time (and critical-path time) of the nearest ancestor still running
then. When an instrumentation ends an LLM span as the stream is handed over while another's
child span runs until the last chunk, the agent above gets the LLM's time as its own, and a
bottleneck verdict such as "the agent's own code holds 50%" is wrong. These anomalies say so,
naming the child, the parent, by how much, and which ancestors' self time took that time.
"""

from __future__ import annotations

from collections.abc import Iterable

from .intervals import union_length
from .profile import Anomaly, SpanProfile
from .records import SpanKind

#: A child still running after its parent ended (it started before that end).
CHILD_OUTLIVES_PARENT = "child_outlives_parent"
#: A child that started at or after its parent's end.
CHILD_STARTS_AFTER_PARENT = "child_starts_after_parent"
#: Overruns up to this long are clock granularity (and the order in which nested scopes close), not anomalies.
TOLERANCE_NS = 1_000_000

_Interval = tuple[int, int]


def _length(intervals: Iterable[_Interval]) -> int:
    return sum(end - start for start, end in intervals)


def _clip(intervals: list[_Interval], start: int, end: int) -> tuple[list[_Interval], list[_Interval]]:
    """The parts of ``intervals`` inside ``[start, end]``, and the parts outside it."""
    inside: list[_Interval] = []
    outside: list[_Interval] = []
    for a, b in intervals:
        if a < start:
            outside.append((a, min(b, start)))
        if b > end:
            outside.append((max(a, end), b))
        low, high = max(a, start), min(b, end)
        if low < high:
            inside.append((low, high))
    return inside, [(a, b) for a, b in outside if a < b]


def _covered(intervals: list[_Interval], span: SpanProfile) -> int:
    """How much of ``intervals`` (inside ``span``) the span's direct children cover, clipped to it."""
    children = [(max(c.start_ns, span.start_ns), min(c.end_ns, span.end_ns)) for c in span.children]
    total = 0
    for a, b in intervals:
        total += union_length((max(start, a), min(end, b)) for start, end in children)
    return total


def _where_it_went(child: SpanProfile, parent: SpanProfile) -> tuple[list[tuple[SpanProfile, int]], int, int]:
    """Where the child's time after its parent's end went: ``(ancestor, self time it took)`` pairs,
    the time other spans covered anyway, and the time after every ancestor ended."""
    remaining = [(max(child.start_ns, parent.end_ns), child.end_ns)]
    credited: list[tuple[SpanProfile, int]] = []
    overlapped = 0
    ancestor = parent.parent
    while ancestor is not None and remaining:
        inside, remaining = _clip(remaining, ancestor.start_ns, ancestor.end_ns)
        covered = _covered(inside, ancestor)
        overlapped += covered
        taken = _length(inside) - covered
        if taken > 0:
            credited.append((ancestor, taken))
        ancestor = ancestor.parent
    return credited, overlapped, _length(remaining)


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f} ms"


def _detail(child: SpanProfile, parent: SpanProfile, credited: list[tuple[SpanProfile, int]], after_roots: int) -> str:
    outside = child.end_ns - max(child.start_ns, parent.end_ns)
    if child.start_ns >= parent.end_ns:
        what = f"starts {_ms(child.start_ns - parent.end_ns)} after its parent '{parent.name}' ended"
    else:
        what = f"ends {_ms(child.end_ns - parent.end_ns)} after its parent '{parent.name}' ended"
    went = [f"{_ms(ns)} of the self time of '{span.name}' ({span.span_id})" for span, ns in credited]
    if after_roots:
        went.append(f"{_ms(after_roots)} after its root ended")
    where = f": counted as {', '.join(went)}" if went else ": other spans cover that time"
    return f"{what}; the {_ms(outside)} it ran after that are clipped off it and off the critical path{where}"


def find_overrunning_children(spans: Iterable[SpanProfile]) -> list[Anomaly]:
    """Anomalies for the children (among ``spans``) that run past their parent's end by more than ``TOLERANCE_NS``.

    Needs the self times and the tree. Spans that never ended, or ended before they started,
    are already anomalies and are left out; so is a CONSUMER child of a PRODUCER (messaging is
    asynchronous by design).
    """
    anomalies: list[Anomaly] = []
    for child in spans:
        parent = child.parent
        if parent is None or child.end_ns - parent.end_ns <= TOLERANCE_NS:
            continue
        if not (child.ended and parent.ended) or child.end_ns != child.record.end_ns:
            continue
        if parent.end_ns != parent.record.end_ns:
            continue
        if parent.record.kind is SpanKind.PRODUCER and child.record.kind is SpanKind.CONSUMER:
            continue
        credited, overlapped, after_roots = _where_it_went(child, parent)
        kind = CHILD_STARTS_AFTER_PARENT if child.start_ns >= parent.end_ns else CHILD_OUTLIVES_PARENT
        anomalies.append(
            Anomaly(
                kind,
                child.span_id,
                _detail(child, parent, credited, after_roots),
                parent_span_id=parent.span_id,
                overrun_ns=child.end_ns - parent.end_ns,
                outside_ns=child.end_ns - max(child.start_ns, parent.end_ns),
                self_time_of=tuple((span.span_id, ns) for span, ns in credited),
                overlapped_ns=overlapped,
                after_roots_ns=after_roots,
            )
        )
    return anomalies
