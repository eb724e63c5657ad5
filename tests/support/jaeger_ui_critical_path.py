"""The critical path the Jaeger UI draws, computed from a trace in Jaeger JSON, to hold ours against it.

Written from the algorithm Jaeger UI documents and implements (github.com/jaegertracing/jaeger-ui,
packages/jaeger-ui/src/components/TracePage/CriticalPath/: ``index.ts`` at commit 17f082d1d63a,
``utils/findLastFinishingChildSpan.ts`` at 0af7073d6855, ``utils/sanitizeOverFlowingChildren.ts`` at
20ab1e45c809, ``utils/cpspan.ts`` at 0629884bd149), not from our code, so that a test comparing the two
compares two independent computations:

* per root (a span whose first reference is to no span of the trace): children lying entirely outside their
  parent are dropped with their subtree; children overflowing it are clipped to it; a span whose first
  reference is FOLLOWS_FROM is dropped with its subtree (not waited for);
* walking back from the span's end: the child ending last takes the path (after the first, the child ending
  last *strictly before* the cursor); the gap from its end to the cursor is the span's own section; the child's path is
  walked the same way; then the cursor moves to the child's start. With no such child, the rest back to the
  span's start is the span's.

Times are Jaeger's microseconds. The result maps span id to the microseconds of its sections.

``back_to_back_on_path=True`` is not Jaeger UI's: it lets the child that ends exactly at the cursor take
the path (``<=`` instead of ``<``), which is the one rule ours adds, so that a test can show that this
rule is where the two part.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any


def _first_reference(span: Mapping[str, Any]) -> tuple[str, str] | None:
    """(refType, spanID) of the span's first reference: Jaeger UI takes that one as the parent."""
    refs = span.get("references") or []
    return (str(refs[0]["refType"]), str(refs[0]["spanID"])) if refs else None


def jaeger_ui_critical_path_us(trace: Mapping[str, Any], *, back_to_back_on_path: bool = False) -> dict[str, int]:
    """Microseconds on the critical path per span id, as Jaeger UI computes them for ``trace`` (Jaeger JSON)."""
    spans = {str(s["spanID"]): s for s in trace["spans"]}
    start = {sid: int(s["startTime"]) for sid, s in spans.items()}
    end = {sid: int(s["startTime"]) + int(s["duration"]) for sid, s in spans.items()}
    children: dict[str, list[str]] = defaultdict(list)
    roots = []
    for sid in sorted(spans, key=lambda i: (start[i], i)):
        ref = _first_reference(spans[sid])
        if ref is None or ref[1] not in spans:
            roots.append(sid)
        elif ref[0] != "FOLLOWS_FROM":  # a FOLLOWS_FROM child is reached from no root: dropped with its subtree
            children[ref[1]].append(sid)

    # Drop children outside their parent (with their subtree) and clip the overflowing ones, top down.
    kept: set[str] = set()
    stack = list(roots)
    kept.update(roots)
    while stack:
        sid = stack.pop()
        for child in children[sid]:
            if end[child] <= start[sid] or start[child] >= end[sid]:
                continue
            start[child] = max(start[child], start[sid])
            end[child] = min(end[child], end[sid])
            kept.add(child)
            stack.append(child)

    on_path: dict[str, int] = defaultdict(int)
    taken: set[str] = set()
    for root in roots:
        # (span, cursor, returning) frames: the walk of Jaeger UI's recursion, made iterative. Entering a
        # span, every child may take the path (Jaeger UI passes no cursor then); returning to it from a
        # child, only those ending strictly before that child's start.
        frames = [(root, end[root], False)]
        while frames:
            sid, cursor, returning = frames.pop()
            eligible = [
                c
                for c in children[sid]
                if c in kept
                and c not in taken
                and (not returning or end[c] < cursor or (back_to_back_on_path and end[c] == cursor))
            ]
            if eligible:
                last = max(eligible, key=lambda c: end[c])  # the first of equal ends, as Jaeger UI's strict `>`
                taken.add(last)  # only the variant could take it again (a zero-length child ending at the cursor)
                on_path[sid] += cursor - end[last]
                frames.append((sid, start[last], True))  # back to the parent from the child's start, after it
                frames.append((last, end[last], False))
            else:
                on_path[sid] += cursor - start[sid]
    return {sid: us for sid, us in on_path.items() if us > 0}
