"""Export trace profiles in the Chrome Trace Event Format, for Perfetto and chrome://tracing.

The document is the format's "JSON Object Format": ``{"traceEvents": [...], "displayTimeUnit": "ms",
"otherData": {...}}``. Each trace is one process (``pid`` 1, 2, ... in the order given), named by a
``process_name`` metadata event; each span is one complete event (``ph: "X"``) whose ``args`` carry
the profile's numbers (category, operation, self time, critical-path time, ...).

**Lanes.** Viewers draw the complete events of one thread (``pid``, ``tid``) as a stack: an event
must lie entirely inside any event it overlaps (Perfetto: "events are only allowed to perfectly
nest"). Agent traces break that whenever children run in parallel, so spans are spread over lanes,
one ``tid`` per lane, by :func:`assign_lanes` (also used by the speedscope export):

- spans are placed in depth-first order, siblings by start time, the longer first (then by span id);
- a child goes on its parent's lane when it lies inside its parent's interval and starts at or after
  the end of every sibling already placed there (so siblings in sequence share the parent's lane);
  empty (zero-duration) spans follow the readers' rule that an event starting when another ends
  is not inside it: one at its parent's very end, or a span at the instant of an empty sibling,
  goes to another lane;
- otherwise (it runs in parallel with an earlier sibling, or overflows its parent) it goes on the
  lowest-numbered lane that is empty at the top level for its whole interval (a new lane if none),
  so it never appears nested under an unrelated span. Roots are placed the same way.

A child placed on another lane than its parent is linked to it by a flow event (an arrow in the
viewers): a flow start (``ph: "s"``) on the parent's lane and a flow end (``ph: "f"``, ``bp: "e"``)
on the child's, both at the child's start. By the format's binding rules, the arrow leaves the
innermost slice open on the parent's lane at that moment, which is the parent itself unless one of
its children on that lane is running then.

**Times.** ``ts`` and ``dur`` are microseconds, as the format requires, counted from the earliest
start among the exported traces (kept in ``otherData.time_origin_unix_nano``), so runs keep their
relative timing and values stay far below 2**53. They are not rounded to whole microseconds: each is
``nanoseconds / 1000`` (an int when whole), whose JSON text has at most three decimals, and a
reader that rounds to integer nanoseconds gets the profile's times back exactly: current Perfetto
does (``llround(ts * 1000.0)`` in src/trace_processor/importers/json/json_trace_tokenizer.cc);
older releases truncated, which can come out 1 ns short. An event's end is ``ts + dur``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any

from .._version import __version__
from ..core.profile import SpanProfile, TraceProfile

#: ``cat`` of the flow events linking a parent to a child on another lane.
FLOW_CATEGORY = "agent_profiler.flow"
_NS_PER_US = 1000
# An int, not core.units.NS_PER_MS (a float): int / int is exactly rounded, so a span longer than
# 2**53 ns keeps the last digit of its milliseconds as before.
_NS_PER_MS = 1_000_000


class Lanes:
    """The lanes of one trace's spans; see the module documentation for how they are assigned.

    ``lane[i]`` is the lane (0, 1, ...) of ``profile.spans[i]``; ``tops[k]`` lists the indexes of
    the spans at the top of lane ``k`` (those not nested in their parent there), in time order, and
    ``nested[i]`` the indexes of span ``i``'s children on its own lane, in time order.
    """

    __slots__ = ("count", "lane", "nested", "tops")

    def __init__(self, count: int, lane: list[int], tops: list[list[int]], nested: list[list[int]]) -> None:
        self.count = count
        self.lane = lane
        self.tops = tops
        self.nested = nested

    def walk(self, lane: int) -> Iterable[tuple[int, bool]]:
        """The spans of ``lane`` as a properly nested sequence of ``(index, True)`` (open) and
        ``(index, False)`` (close), in time order. Iterative, so deep traces do not recurse."""
        for top in self.tops[lane]:
            stack: list[tuple[int, int]] = [(top, 0)]
            yield top, True
            while stack:
                index, next_child = stack[-1]
                children = self.nested[index]
                if next_child < len(children):
                    stack[-1] = (index, next_child + 1)
                    child = children[next_child]
                    yield child, True
                    stack.append((child, 0))
                else:
                    stack.pop()
                    yield index, False


def assign_lanes(profile: TraceProfile) -> Lanes:
    """Spread ``profile``'s spans over lanes on which they nest properly (see the module docs)."""
    spans = profile.spans
    position = {id(span): i for i, span in enumerate(spans)}
    lane = [0] * len(spans)
    nested: list[list[int]] = [[] for _ in spans]
    # Per lane, the top-level intervals, sorted by (start, end): they never overlap each other.
    occupied: list[list[tuple[int, int, int]]] = []
    # Per span, the end of the last of its children placed on its own lane, and whether that child
    # was empty (a span starting at that instant would then be ambiguous: see _fits_in_parent).
    nested_end = [span.start_ns for span in spans]
    nested_empty = [False] * len(spans)

    def place_on_free_lane(i: int, span: SpanProfile) -> None:
        start, end = span.start_ns, span.end_ns
        for k, intervals in enumerate(occupied):
            # Top-level intervals never overlap, so only the neighbours in (start, end) order can.
            at = bisect.bisect_left(intervals, (start, end, -1))
            if at > 0 and _overlaps(intervals[at - 1], start, end):
                continue
            if at < len(intervals) and _overlaps(intervals[at], start, end):
                continue
            intervals.insert(at, (start, end, i))
            lane[i] = k
            return
        occupied.append([(start, end, i)])
        lane[i] = len(occupied) - 1

    for i in _placement_order(profile, position):
        span = spans[i]
        parent = span.parent
        parent_index = position.get(id(parent)) if parent is not None else None
        if parent is None or parent_index is None:
            place_on_free_lane(i, span)
            continue
        if _fits_in_parent(span, parent, nested_end[parent_index], nested_empty[parent_index]):
            # Spans are visited in depth-first order with children by start time, so the
            # parent's children on its lane are appended in time order.
            lane[i] = lane[parent_index]
            nested[parent_index].append(i)
            nested_end[parent_index] = span.end_ns
            nested_empty[parent_index] = span.start_ns == span.end_ns
        else:
            place_on_free_lane(i, span)
    tops = [[i for (_, _, i) in intervals] for intervals in occupied]
    return Lanes(len(occupied), lane, tops, nested)


def _placement_order(profile: TraceProfile, position: dict[int, int]) -> list[int]:
    """Indexes of the spans in depth-first order, siblings by start, longer first, then span id."""

    def key(span: SpanProfile) -> tuple[int, int, str]:
        return (span.start_ns, -span.duration_ns, span.span_id)

    roots = [span for span in profile.spans if span.parent is None or id(span.parent) not in position]
    order: list[int] = []
    stack = sorted(roots, key=key, reverse=True)
    while stack:
        span = stack.pop()
        order.append(position[id(span)])
        stack.extend(sorted((c for c in span.children if id(c) in position), key=key, reverse=True))
    return order


def _fits_in_parent(span: SpanProfile, parent: SpanProfile, last_end: int, last_empty: bool) -> bool:
    """Whether ``span`` can nest in ``parent`` on its lane, after the children already there.

    Readers nest complete events by time alone (one that starts when another has ended is not
    inside it), so an empty span may not sit at its parent's very end, and no span may start at the
    instant of an empty sibling before it.
    """
    start, end = span.start_ns, span.end_ns
    if start < parent.start_ns or end > parent.end_ns:
        return False
    if start == end and start == parent.end_ns:
        return False
    return last_end < start or (last_end == start and not last_empty)


def _overlaps(interval: tuple[int, int, int], start: int, end: int) -> bool:
    """Whether two top-level spans cannot share a lane: they overlap, or an empty one lies at the
    start of the other (a reader would nest it there) or at the same instant as another empty one."""
    other_start, other_end, _ = interval
    if start == end:
        return other_start <= start < other_end or other_start == other_end == start
    if other_start == other_end:
        return start <= other_start < end
    return start < other_end and other_start < end


def _us(ns: int) -> float | int:
    """Nanoseconds as microseconds: an int when whole, else a float with at most three decimals."""
    whole, rest = divmod(ns, _NS_PER_US)
    return whole if rest == 0 else ns / _NS_PER_US


def span_args(span: SpanProfile) -> dict[str, Any]:
    """The ``args`` of a span's complete event."""
    parent = span.parent
    return {
        "span_id": span.span_id,
        "parent_span_id": parent.span_id if parent is not None else span.record.parent_span_id,
        "category": span.category,
        "operation": span.operation,
        "kind": span.record.kind.value,
        "duration_ms": span.duration_ns / _NS_PER_MS,
        "self_time_ms": span.self_time_ns / _NS_PER_MS,
        "critical_path_ms": span.critical_path_ns / _NS_PER_MS,
        "on_critical_path": span.on_critical_path,
    }


def to_chrome_trace(profiles: Sequence[TraceProfile], *, flows: bool = True) -> dict[str, Any]:
    """The Trace Event Format document (JSON Object Format) of ``profiles``; see the module docs."""
    origin = min((p.start_ns for p in profiles), default=0)
    metadata: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    arrows: list[dict[str, Any]] = []
    flow_id = 0
    for number, profile in enumerate(profiles):
        pid = number + 1
        lanes = assign_lanes(profile)
        metadata.append(_metadata("process_name", pid, 0, {"name": f"trace {profile.trace_id}"}))
        metadata.append(_metadata("process_sort_index", pid, 0, {"sort_index": number}))
        spans = profile.spans
        for k in range(lanes.count):
            tid = k + 1
            metadata.append(_metadata("thread_name", pid, tid, {"name": f"lane {k}"}))
            metadata.append(_metadata("thread_sort_index", pid, tid, {"sort_index": k}))
            for index, opening in lanes.walk(k):
                if not opening:
                    continue
                span = spans[index]
                slices.append(
                    {
                        "name": span.name,
                        "cat": span.category,
                        "ph": "X",
                        "ts": _us(span.start_ns - origin),
                        "dur": _us(span.duration_ns),
                        "pid": pid,
                        "tid": tid,
                        "args": {"trace_id": profile.trace_id, **span_args(span)},
                    }
                )
        if not flows:
            continue
        position = {id(span): i for i, span in enumerate(spans)}
        for i, span in enumerate(spans):
            parent = span.parent
            if parent is None:
                continue
            parent_index = position.get(id(parent))
            if parent_index is None or lanes.lane[parent_index] == lanes.lane[i]:
                continue
            if not parent.start_ns <= span.start_ns <= parent.end_ns:
                continue  # the parent is not running when the child starts: no arrow to draw from
            flow_id += 1
            ts = _us(span.start_ns - origin)
            common = {"name": "child span", "cat": FLOW_CATEGORY, "id": flow_id, "ts": ts, "pid": pid}
            arrows.append({**common, "ph": "s", "tid": lanes.lane[parent_index] + 1})
            arrows.append({**common, "ph": "f", "bp": "e", "tid": lanes.lane[i] + 1})
    return {
        # Flow events come last: at equal timestamps their slices are then already open.
        "traceEvents": metadata + slices + arrows,
        "displayTimeUnit": "ms",
        "otherData": {
            "exporter": f"otel-agent-profiler {__version__}",
            "time_origin_unix_nano": str(origin),
        },
    }


def _metadata(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}
