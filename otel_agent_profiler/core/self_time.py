"""Self time: the part of a span's duration not covered by any of its direct children."""

from __future__ import annotations

from collections.abc import Iterable

from .intervals import union_length
from .profile import SpanProfile


def self_time_ns(span: SpanProfile) -> int:
    """Duration minus the union of the direct children's intervals clipped to the span.

    Concurrent children are counted once, so the result is never negative.
    """
    start, end = span.start_ns, span.end_ns
    children = span.children
    if not children:
        return end - start
    if len(children) == 1:
        # A call's request below it, a tool's query: common enough to skip the sweep.
        child = children[0]
        child_start = child.start_ns if child.start_ns > start else start
        child_end = child.end_ns if child.end_ns < end else end
        return end - start - (child_end - child_start) if child_end > child_start else end - start
    # Children usually come sorted by start (build_tree sorts them), which allows one sweep
    # without sorting; otherwise fall back to the general union.
    covered = 0
    cover_start = cover_end = start
    for child in children:
        child_start = child.start_ns if child.start_ns > start else start
        child_end = child.end_ns if child.end_ns < end else end
        if child_end <= child_start:
            continue
        if child_start < cover_start:
            covered = union_length((max(c.start_ns, start), min(c.end_ns, end)) for c in children)
            break
        if child_start > cover_end:
            covered += cover_end - cover_start
            cover_start, cover_end = child_start, child_end
        elif child_end > cover_end:
            cover_end = child_end
    else:
        covered += cover_end - cover_start
    return max(0, (end - start) - covered)


def assign_self_times(spans: Iterable[SpanProfile]) -> None:
    for span in spans:
        # Most spans are leaves; skipping the call for them is a measurable share of the analysis.
        span.self_time_ns = self_time_ns(span) if span.children else span.end_ns - span.start_ns
