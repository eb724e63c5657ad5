"""Turning loose span records into trees.

Trees are built from parent ids only, never from timestamps: clocks lie, ids don't. Bad data
(duplicate ids, cycles, spans that never ended) is repaired in a deterministic way and
reported, so the same spans give the same tree whatever order they arrive in.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from .profile import Anomaly, SpanProfile
from .records import SpanRecord


def group_by_trace(records: Iterable[SpanRecord]) -> dict[str, list[SpanRecord]]:
    """Records grouped by trace id, in order of first appearance."""
    traces: dict[str, list[SpanRecord]] = {}
    for record in records:
        spans = traces.get(record.trace_id)
        if spans is None:
            traces[record.trace_id] = [record]
        else:
            spans.append(record)
    return traces


def _preference(record: SpanRecord) -> tuple[object, ...]:
    # Among records sharing a span id keep the most complete one: ended, then longest. The
    # rest of the key orders any two different records, so the choice never depends on
    # the order they arrived in.
    ended = record.end_ns is not None
    duration = (record.end_ns - record.start_ns) if record.end_ns is not None else 0
    return (
        ended,
        duration,
        record.name,
        -record.start_ns,
        record.parent_span_id or "",
        record.kind.value,
        record.status.value,
        repr(sorted(record.attributes.items(), key=lambda item: item[0])),
        repr(record.events),
    )


def _dedupe(records: list[SpanRecord], anomalies: list[Anomaly]) -> dict[str, SpanRecord]:
    by_id: dict[str, SpanRecord] = {}
    duplicated: dict[str, int] = {}
    for record in records:
        kept = by_id.get(record.span_id)
        if kept is None:
            by_id[record.span_id] = record
            continue
        duplicated[record.span_id] = duplicated.get(record.span_id, 1) + 1
        if _preference(record) > _preference(kept):
            by_id[record.span_id] = record
    for span_id in sorted(duplicated):
        anomalies.append(
            Anomaly(
                "duplicate_span_id",
                span_id,
                f"span id appears {duplicated[span_id]} times; the longest ended copy is analysed",
            )
        )
    return by_id


def _break_cycles(by_id: dict[str, SpanRecord], parent_of: dict[str, str | None], anomalies: list[Anomaly]) -> None:
    # Parent links form a functional graph: every cycle is found by walking up from some
    # span. Each cycle is cut at its earliest span (then lowest id), which becomes a root.
    done: set[str] = set()
    for first in by_id:
        if first in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        current: str | None = first
        while current is not None and current not in done and current not in on_path:
            path.append(current)
            on_path.add(current)
            current = parent_of[current]
        if current is not None and current in on_path:
            cycle = path[path.index(current) :]
            cut = min(cycle, key=lambda span_id: (by_id[span_id].start_ns, span_id))
            parent_of[cut] = None
            anomalies.append(
                Anomaly(
                    "cycle",
                    cut,
                    f"parent links form a cycle of {len(cycle)} spans ({', '.join(sorted(cycle))}); "
                    "cut here and treated as a root",
                )
            )
        done.update(path)


def _sort_key(node: SpanProfile) -> tuple[int, str]:
    return (node.start_ns, node.record.span_id)


_start_of = attrgetter("start_ns")


def _sort_by_start(spans: list[SpanProfile]) -> None:
    """Sort ``spans`` by start time, then span id."""
    # By the start alone first: comparing ints is several times cheaper than comparing tuples, and while no
    # two of the spans start together the order is the same. When some do (rarely), sorted again by both.
    spans.sort(key=_start_of)
    previous = None
    for span in spans:
        if span.start_ns == previous:
            spans.sort(key=_sort_key)
            return
        previous = span.start_ns


def build_tree(records: list[SpanRecord]) -> tuple[list[SpanProfile], list[SpanProfile], list[Anomaly]]:
    """Build one trace's span tree.

    Returns the spans in depth-first order, the roots, and the anomalies found. Spans whose
    parent is missing become roots, so a trace may have several.
    """
    anomalies: list[Anomaly] = []
    by_id = {record.span_id: record for record in records}
    if len(by_id) != len(records):
        by_id = _dedupe(records, anomalies)

    nodes: dict[str, SpanProfile] = {}
    unended: list[SpanRecord] = []
    for span_id, record in by_id.items():
        start, end = record.start_ns, record.end_ns
        if end is None:
            unended.append(record)
            continue
        if end < start:
            detail = f"ends {(start - end) / 1e6:.3f} ms before it starts; duration set to 0"
            anomalies.append(Anomaly("negative_duration", span_id, detail))
            end = start
        nodes[span_id] = SpanProfile(record, start, end)
    if unended:
        latest_end = max((r.end_ns for r in by_id.values() if r.end_ns is not None), default=0)
        for record in unended:
            # Still open when observation stopped: it lasted at least until the last thing we saw.
            start = record.start_ns
            nodes[record.span_id] = SpanProfile(record, start, max(start, latest_end), ended=False)
            anomalies.append(
                Anomaly("unended_span", record.span_id, "span never ended; assumed open until the trace's last end")
            )

    for node in nodes.values():
        parent_id = node.record.parent_span_id
        if parent_id is None:
            continue
        parent = nodes.get(parent_id)
        if parent is None:
            anomalies.append(
                Anomaly(
                    "missing_parent",
                    node.record.span_id,
                    f"parent {parent_id} is not in the data (remote or lost); treated as a root",
                )
            )
        elif parent is node:
            anomalies.append(Anomaly("cycle", parent_id, "span is its own parent; treated as a root"))
        else:
            node.parent = parent
            parent.children.append(node)

    ordered = _order(nodes)
    if len(ordered) < len(nodes):
        # Some spans are unreachable from any root: their parent links form cycles. This is
        # rare, so it is only looked for when it has happened.
        parent_of = {
            span_id: node.parent.record.span_id if node.parent is not None else None for span_id, node in nodes.items()
        }
        _break_cycles(by_id, parent_of, anomalies)
        for node in nodes.values():
            node.children.clear()
        for span_id, node in nodes.items():
            new_parent_id = parent_of[span_id]
            node.parent = nodes[new_parent_id] if new_parent_id is not None else None
            if node.parent is not None:
                node.parent.children.append(node)
        ordered = _order(nodes)
    roots = [node for node in ordered if node.parent is None]
    if anomalies:
        anomalies.sort(key=lambda anomaly: (anomaly.kind, anomaly.span_id))
    return ordered, roots, anomalies


def depth_first(spans: Iterable[SpanProfile]) -> list[SpanProfile]:
    """``spans`` (a whole tree) in depth-first order, children by start time; sets each span's depth.

    For a tree changed after ``build_tree`` (``core.call_parts`` moves a call under its wrapper).
    """
    return _order({span.record.span_id: span for span in spans})


def _order(nodes: dict[str, SpanProfile]) -> list[SpanProfile]:
    """The spans reachable from a root, depth first; sets each span's depth."""
    roots = [node for node in nodes.values() if node.parent is None]
    _sort_by_start(roots)
    ordered: list[SpanProfile] = []
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        ordered.append(node)
        children = node.children
        if not children:
            continue
        depth = node.depth + 1
        # An only child (a call's request, a tool's query) is common enough to skip the sort and the loop.
        if len(children) == 1:
            child = children[0]
            child.depth = depth
            stack.append(child)
            continue
        _sort_by_start(children)
        for child in children:
            child.depth = depth
        stack.extend(reversed(children))
    return ordered
