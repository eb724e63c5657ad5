"""Export trace profiles in speedscope's file format (https://www.speedscope.app/file-format-schema.json).

The document holds one frame per distinct (span name, category), shared by all profiles: the frame's
``name`` is the span name and its ``file`` the category (speedscope shows it where it would show a
function's source file).

Per trace, in the order given:

- one **evented** profile per lane, ``"<trace id> lane <k>"``: the spans as open/close events in
  time order. An evented profile is a single call stack, so spans running in parallel cannot share
  one; they are spread over lanes exactly as in the Chrome export (see
  :func:`otel_agent_profiler.report.chrome_trace.assign_lanes`): siblings that run one after
  another stay nested under their parent, a span that runs in parallel with an earlier sibling (or
  overflows its parent) starts at the top of another lane. Every span appears in exactly one lane.
- one evented profile ``"<trace id> critical path"``: the spans on the critical path (and their
  ancestors), nested as in the trace, each with a self time equal to its own share of the critical
  path (``critical_path_ns``), so the profile's total is the trace's critical-path time exactly and
  speedscope's left-heavy and sandwich views show where the run's time went. Its axis is
  critical-path time, not wall-clock time: a span's share is laid out in one piece when it opens,
  then its children on the path follow in start order.

Values are integer nanoseconds (``unit: "nanoseconds"``) from the trace's start (``startValue`` 0;
absolute epoch nanoseconds would not survive JavaScript's doubles), so they are the profile's times
exactly. The output grows linearly with the spans, even for very deep traces (a sampled profile
would repeat each span's whole stack).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .._version import __version__
from ..core.profile import SpanProfile, TraceProfile
from .chrome_trace import assign_lanes

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"
UNIT = "nanoseconds"


def to_speedscope(profiles: Sequence[TraceProfile], name: str = "otel-agent-profiler") -> dict[str, Any]:
    """The speedscope document of ``profiles``; see the module documentation."""
    document = speedscope_document(profiles, name)
    document["profiles"] = list(document["profiles"])
    return document


def speedscope_document(profiles: Iterable[TraceProfile], name: str = "otel-agent-profiler") -> dict[str, Any]:
    """The speedscope document of ``profiles`` with ``profiles`` an iterator that builds them one
    at a time, for ``json_stream.write_compact_document``: the shared frames come after them in
    the document, and are complete once the iterator is."""
    frames: list[dict[str, Any]] = []
    return {
        "$schema": SCHEMA_URL,
        "name": name,
        "exporter": f"otel-agent-profiler {__version__}",
        "activeProfileIndex": 0,
        "profiles": _profiles(profiles, frames),
        "shared": {"frames": frames},
    }


def _profiles(profiles: Iterable[TraceProfile], frames: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Each trace's lanes and critical path as speedscope profiles; ``frames`` gets their frames."""
    frame_index: dict[tuple[str, str], int] = {}

    def frame_of(span: SpanProfile) -> int:
        key = (span.name, span.category)
        index = frame_index.get(key)
        if index is None:
            index = frame_index[key] = len(frames)
            frames.append({"name": span.name, "file": span.category})
        return index

    for profile in profiles:
        spans = profile.spans
        frame = [frame_of(span) for span in spans]
        origin = profile.start_ns
        lanes = assign_lanes(profile)
        for k in range(lanes.count):
            events: list[dict[str, Any]] = []
            for index, opening in lanes.walk(k):
                span = spans[index]
                at = (span.start_ns if opening else span.end_ns) - origin
                events.append({"type": "O" if opening else "C", "frame": frame[index], "at": at})
            yield {
                "type": "evented",
                "name": f"{profile.trace_id} lane {k}",
                "unit": UNIT,
                "startValue": 0,
                "endValue": profile.duration_ns,
                "events": events,
            }
        yield _critical_path_profile(profile, frame)


def _critical_path_profile(profile: TraceProfile, frame: list[int]) -> dict[str, Any]:
    spans = profile.spans
    position = {id(span): i for i, span in enumerate(spans)}
    # The spans on the critical path, and their ancestors (which are on it too, unless the
    # data is odd): in depth-first order a parent comes before its children, so walking the
    # spans backwards marks every ancestor of a marked span.
    keep = [span.on_critical_path or span.critical_path_ns > 0 for span in spans]
    for i in range(len(spans) - 1, -1, -1):
        parent = spans[i].parent
        if keep[i] and parent is not None and id(parent) in position:
            keep[position[id(parent)]] = True

    def key(index: int) -> tuple[int, str]:
        return (spans[index].start_ns, spans[index].span_id)

    roots = [i for i, span in enumerate(spans) if keep[i] and (span.parent is None or id(span.parent) not in position)]
    events: list[dict[str, Any]] = []
    cursor = 0
    # Iterative depth-first walk: (index, True) opens a span and spends its critical-path time,
    # (index, False) closes it once its children on the path have been laid out.
    stack: list[tuple[int, bool]] = [(i, True) for i in sorted(roots, key=key, reverse=True)]
    while stack:
        index, opening = stack.pop()
        if not opening:
            events.append({"type": "C", "frame": frame[index], "at": cursor})
            continue
        span = spans[index]
        events.append({"type": "O", "frame": frame[index], "at": cursor})
        cursor += span.critical_path_ns
        stack.append((index, False))
        children = [position[id(c)] for c in span.children if id(c) in position and keep[position[id(c)]]]
        stack.extend((c, True) for c in sorted(children, key=key, reverse=True))
    return {
        "type": "evented",
        "name": f"{profile.trace_id} critical path",
        "unit": UNIT,
        "startValue": 0,
        "endValue": cursor,
        "events": events,
    }
