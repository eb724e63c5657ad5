"""What-if projections: the saving if selected spans were N times faster (one selector, or several
together with the new critical path), and the selectors that pick them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..categories import CATEGORIES, EMBEDDING, LLM
from ..genai import strip_snapshot
from ..profile import SpanProfile, TraceProfile
from ..projection import RecordedSchedule, projected_critical_path
from .base import (
    DEFAULT_OPTIONS,
    Evidence,
    Finding,
    FindingOptions,
    JSONValue,
    _by_start,
    _percent,
    _projected,
    _share,
    _with_descendants,
    format_duration,
    where,
)

WHAT_IF = "what_if"


def select(profile: TraceProfile, selector: str) -> list[SpanProfile]:
    """Spans matching a selector: ``"category:operation"`` (``"tool:search_kb"``, ``"llm:gpt-4o"``,
    a model also matching its snapshots), ``"category"`` (``"llm"``), ``"span:<span id>"``, or an
    operation name in any category."""
    head, colon, tail = selector.partition(":")
    if colon and head == "span":
        return [s for s in profile.spans if s.record.span_id == tail]
    if colon:
        if head not in CATEGORIES:
            raise ValueError(f"unknown category {head!r} in selector {selector!r}; one of {', '.join(CATEGORIES)}")
        return [s for s in profile.spans if s.category == head and _operation_is(s, tail)]
    if selector in CATEGORIES:
        return [s for s in profile.spans if s.category == selector]
    return [s for s in profile.spans if _operation_is(s, selector)]


def _operation_is(span: SpanProfile, operation: str) -> bool:
    return span.operation == operation or (
        span.category in (LLM, EMBEDDING) and strip_snapshot(span.operation) == operation
    )


def _selector_label(selector: str) -> str:
    head, colon, tail = selector.partition(":")
    if colon:
        return f"span {tail}" if head == "span" else f"{head} {tail}"
    return f"all {selector} spans" if selector in CATEGORIES else selector


def what_if(
    profile: TraceProfile, selector: str, speedup: float, *, schedule: RecordedSchedule | None = None
) -> Finding:
    """The trace's end-to-end saving if the selected spans (with everything they called) were
    ``speedup`` times faster (``math.inf``: instant), recomputed on the tree (``schedule``: the
    trace's recorded schedule, if already built)."""
    if not (speedup > 0):
        raise ValueError(f"speedup must be > 0, got {speedup!r}")
    selected = select(profile, selector)
    chosen = _with_descendants(selected)
    tops = [s for s in selected if not any(a in chosen for a in _ancestors(s))]
    projected, saving = _projected(profile, chosen, 0.0 if math.isinf(speedup) else 1.0 / speedup, schedule=schedule)
    label = _selector_label(selector)
    faster = "instant" if math.isinf(speedup) else f"{speedup:g}x faster"
    title = (
        f"With {label} {faster}, the trace would end {format_duration(saving)} sooner "
        f"({_percent(_share(saving, profile.duration_ns))} of its {format_duration(profile.duration_ns)})."
        if selected
        else f"No span matches {label}."
    )
    categories = {s.category for s in selected}
    operations = {s.operation for s in selected}
    return Finding(
        kind=WHAT_IF,
        title=title,
        saving_ns=saving,
        span_ids=tuple(s.record.span_id for s in _by_start(selected)),
        where=where(profile, selected),
        operation=next(iter(operations)) if len(operations) == 1 else None,
        category=next(iter(categories)) if len(categories) == 1 else None,
        evidence={
            "selector": selector,
            "speedup": speedup if math.isfinite(speedup) else None,
            "matched_spans": len(selected),
            "selected_duration_ns": sum(s.duration_ns for s in tops),
            "selected_critical_path_ns": sum(s.critical_path_ns for s in chosen),
            "duration_ns": profile.duration_ns,
            "projected_duration_ns": projected,
        },
    )


def _ancestors(span: SpanProfile) -> Iterable[SpanProfile]:
    parent = span.parent
    while parent is not None:
        yield parent
        parent = parent.parent


@dataclass(frozen=True, slots=True)
class WhatIfProjection:
    """The trace with several what-ifs applied together: its projected duration and critical path."""

    #: The what-ifs, in the order given: ``selector``, ``speedup`` and ``matched_spans`` each.
    changes: list[Evidence]
    duration_ns: int
    projected_duration_ns: int
    #: The spans on the projected critical path, parents before their children, each with its
    #: ``span_id``, ``name``, ``category``, ``operation``, projected ``start_offset_ns`` (from the
    #: trace's projected start) and projected ``duration_ns``.
    critical_path: list[Evidence]

    @property
    def saving_ns(self) -> int:
        """How much sooner the trace ends (negative: later)."""
        return self.duration_ns - self.projected_duration_ns

    def to_dict(self) -> Evidence:
        return {
            "changes": list[JSONValue](self.changes),
            "duration_ns": self.duration_ns,
            "projected_duration_ns": self.projected_duration_ns,
            "saving_ns": self.saving_ns,
            "critical_path": list[JSONValue](self.critical_path),
        }


def what_ifs_together(
    profile: TraceProfile, changes: Sequence[tuple[str, float]], *, schedule: RecordedSchedule | None = None
) -> WhatIfProjection:
    """The trace recomputed on its tree with every ``(selector, speedup)`` applied at once.

    Each selector picks spans as ``select`` does; they (with everything they called) become
    ``speedup`` times faster: 2 is twice as fast, 0.5 twice as slow. A span several selectors pick
    takes the speedup of the last one, so a later, narrower selector can make an exception
    (``llm`` 2x, then ``llm:gpt-4o`` 1x). Needs the span tree.
    """
    factors: dict[SpanProfile, float] = {}
    applied: list[Evidence] = []
    for selector, speedup in changes:
        if not (speedup > 0 and math.isfinite(speedup)):
            raise ValueError(f"speedup must be finite and > 0, got {speedup!r}")
        selected = select(profile, selector)
        for span in _with_descendants(selected):
            factors[span] = 1.0 / speedup
        applied.append({"selector": selector, "speedup": speedup, "matched_spans": len(selected)})
    projected, steps = projected_critical_path(profile, lambda span: factors.get(span, 1.0), schedule=schedule)
    path: list[Evidence] = [
        {
            "span_id": span.record.span_id,
            "name": span.name,
            "category": span.category,
            "operation": span.operation,
            "start_offset_ns": offset,
            "duration_ns": length,
        }
        for span, offset, length in steps
    ]
    return WhatIfProjection(applied, profile.duration_ns, projected, path)


def find_what_ifs(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """``what_if`` for each ``options.what_ifs`` entry, in their order."""
    return [what_if(profile, selector, speedup, schedule=schedule) for selector, speedup in options.what_ifs]
