"""What-if projections: a trace's end-to-end duration recomputed on its own tree after spans change.

Sums of durations cannot answer "what if this tool were twice as fast": a span running in
parallel with a longer one saves nothing, one on the critical path saves its whole speed-up,
and the work after it moves earlier. So the trace is replayed as a schedule instead.

The model
---------
Each span has *children* and *own time*: before its first child, between children, after its
last child. Among the children of one span:

* child C **depends on** sibling S when S ended at or before C started in the recorded trace
  (they ran one after another); siblings that overlapped ran in parallel and do not;
* C's projected start is ``max(projected start of the parent, projected end of every sibling
  C depends on) + the gap before C``, scaled by the parent's factor. The gap is the recorded
  time from the latest of those ends (or the parent's start) to C's start: the parent's own
  time before C, as the critical path counts it (a sibling still running across C's start
  does not take it over: C did not wait for it);
* a leaf's projected end is its projected start plus its duration times its factor; a parent's
  is the latest projected end of its children plus its own time after the last child ends
  (the tail), times its factor.

Children lying entirely outside their parent's interval and the CONSUMER children of a
PRODUCER do not hold their parent up, exactly as for the critical path: they are left out with
their subtrees. So is an LLM call's HTTP request written beside the call rather than below it
(``core.call_parts``): its time is the call's, scheduled where the call is, and kept it would hold
its parent at its recorded end however the call changed. Children that *overflow* their parent
are clipped to it (again as for the critical path), and so are their own children, recursively.
The trace's roots are the children of one virtual span from the trace's earliest start to its
latest end whose own time is never scaled; its tail keeps the time the trace runs past its last
root (overflowing spans).

Followed backwards from a span's end, the chain of the latest-ending child, its latest-ending
dependency, and so on, is the span's critical path, and the own time along it is the span's
``critical_path_ns``. Consequences, all tested:

* with every factor 1 the projection reproduces the recorded duration exactly, for every trace:
  each clipped interval is rebuilt exactly. For well-nested traces this is the plain recorded
  schedule. For overflowing children it is the clipped schedule: a change to an overflowing
  child is projected as if the parent had waited for the part of it inside the parent, and the
  part outside (and anything in a left-out subtree) neither changes nor moves;
* factors at most 1 never lengthen the projection (at least 1, never shorten it); starting a
  group of siblings together never lengthens it;
* removing one span's own time (factor 0) saves at most its ``critical_path_ns``: nothing for a
  span off the critical path, less than its share when another chain becomes the longest.

Integer nanoseconds throughout; times are relative to each span's projected start, so epoch
timestamps never go through floating point. Iterative (one pass down, one pass up), so the
depth of the tree does not matter. It needs the span tree: project before
``TraceProfile.release()``.

Every projection starts from the trace's clipped schedule as recorded (``RecordedSchedule``).
A caller projecting one trace several times builds it once and passes it as ``schedule=``;
without one, each projection builds its own. Nothing is kept between calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence

from .call_parts import is_http_client_span
from .profile import SpanProfile, TraceProfile
from .records import SpanKind

#: Scales a span's own time (a leaf's whole duration): 1 leaves it, 0.5 halves it ("2x faster"),
#: 0 removes it. Results are rounded to the nearest nanosecond per span.
Factor = Callable[[SpanProfile], float]

# A child kept in its parent's schedule: clipped start, clipped end, span id, the span. Sorted
# by plain tuple order; span ids are unique, so the span itself is never compared.
_Child = tuple[int, int, str, SpanProfile]


def unchanged(span: SpanProfile) -> float:
    """The identity factor: every span as recorded."""
    return 1.0


def projected_duration_ns(
    profile: TraceProfile,
    factor: Factor = unchanged,
    independent: Collection[frozenset[str]] | None = None,
    *,
    schedule: RecordedSchedule | None = None,
) -> int:
    """The trace's end-to-end duration (latest end minus earliest start) with its spans changed.

    ``factor`` scales each span's own time (for a leaf, its whole duration); it must be finite
    and not negative. ``independent`` lists groups of sibling span ids whose dependencies on
    each other are removed: every member starts where the group's earliest member started (same
    dependencies, same gap), as if the group had been launched at once. Ids of one group that
    have different parents form one group per parent; a span listed in several groups belongs
    to the first; unknown ids are ignored. ``schedule``: the trace's, if already built.
    """
    return _project(profile, _recorded(profile, schedule), factor, independent, None)


def projected_duration_scaled_ns(
    profile: TraceProfile,
    scales: Mapping[SpanProfile, float],
    independent: Collection[frozenset[str]] | None = None,
    *,
    schedule: RecordedSchedule | None = None,
) -> int:
    """As :func:`projected_duration_ns`, with the changed spans given as a mapping to their factors.

    Every span not in ``scales`` keeps its own time. Only the changed spans and their ancestors
    are visited, where a ``factor`` function is asked about every span of the trace: the findings
    project each trace dozens of times, mostly changing one span or a few.
    """
    return _project(profile, _recorded(profile, schedule), None, independent, None, scales)


#: A span on a projected critical path, its projected start (from the trace's projected start) and
#: its projected duration.
PathStep = tuple[SpanProfile, int, int]


def projected_critical_path(
    profile: TraceProfile,
    factor: Factor = unchanged,
    independent: Collection[frozenset[str]] | None = None,
    *,
    schedule: RecordedSchedule | None = None,
) -> tuple[int, list[PathStep]]:
    """The projected duration (as ``projected_duration_ns``) and the critical path of the projected schedule.

    The path is the chain described in the module's docstring, followed from the trace's end:
    every span on it, parents before their children, each with its projected start offset and
    duration. Every span is scheduled again, so it costs more than ``projected_duration_ns``.
    """
    trail: _Trail = {}
    duration = _project(profile, _recorded(profile, schedule), factor, independent, trail)
    steps: list[PathStep] = []
    # Depth first from the virtual root: a span, then its chain of children, each followed by its own.
    stack: list[tuple[SpanProfile | None, int, int]] = [(None, 0, duration)]
    while stack:
        span, offset, length = stack.pop()
        if span is not None:
            steps.append((span, offset, length))
        for child, start, child_length in reversed(trail.get(span, [])):
            stack.append((child, offset + start, child_length))
    return duration, steps


# What ``_length`` records when asked: per span (None: the virtual root), the children on its
# critical path in projected order, each with its projected start relative to the span's and its
# projected length.
_Trail = dict[SpanProfile | None, list[tuple[SpanProfile, int, int]]]


def _project(
    profile: TraceProfile,
    tree: RecordedSchedule,
    factor: Factor | None,
    independent: Collection[frozenset[str]] | None,
    trail: _Trail | None,
    given: Mapping[SpanProfile, float] | None = None,
) -> int:
    group_of = _group_index(independent)
    # A subtree with no changed span and no regrouped child projects to exactly its recorded
    # (clipped) length, so only the changed spans and their ancestors are scheduled again.
    scales: dict[SpanProfile, float] = {}
    affected: set[SpanProfile] = set()
    if factor is not None:
        changed = [(span, factor(span)) for span in profile.spans]
    else:
        # Regrouped spans are scheduled again too; their ids name them.
        changed = list((given or {}).items())
        if group_of:
            changed += [(span, 1.0) for span in profile.spans if span.record.span_id in group_of]
    for span, scale in changed:
        if scale == 1.0 and span.record.span_id not in group_of:
            continue
        if span in scales:
            continue
        scales[span] = _checked(scale, span)
        _add_with_ancestors(span, affected)
    # Recording a trail schedules every span: the chain through an unchanged subtree is wanted too.
    spans = profile.spans if trail is not None else sorted(affected, key=tree.position.__getitem__)
    return _schedule(profile, tree, scales, spans, group_of, trail)


def projected_durations_scaled_ns(
    profile: TraceProfile,
    selected: Collection[SpanProfile],
    scales: Sequence[float],
    *,
    schedule: RecordedSchedule | None = None,
) -> list[int]:
    """``projected_duration_scaled_ns`` with every span of ``selected`` at each factor of ``scales``
    in turn: one projected duration per factor. The spans to schedule again are found once."""
    tree = _recorded(profile, schedule)
    affected: set[SpanProfile] = set()
    for span in selected:
        _add_with_ancestors(span, affected)
    spans = sorted(affected, key=tree.position.__getitem__)
    durations = []
    for scale in scales:
        changed = {span: _checked(scale, span) for span in selected} if scale != 1.0 else {}
        durations.append(_schedule(profile, tree, changed, spans if changed else [], {}, None))
    return durations


def _add_with_ancestors(span: SpanProfile, affected: set[SpanProfile]) -> None:
    ancestor: SpanProfile | None = span
    while ancestor is not None and ancestor not in affected:
        affected.add(ancestor)
        ancestor = ancestor.parent


def _schedule(
    profile: TraceProfile,
    tree: RecordedSchedule,
    scales: Mapping[SpanProfile, float],
    spans: list[SpanProfile],
    group_of: dict[str, int],
    trail: _Trail | None,
) -> int:
    """The trace's projected duration, scheduling ``spans`` (depth-first order) again with their ``scales``."""
    lengths = tree.lengths
    if spans:
        lengths = dict(lengths)
        # Depth-first order lists every parent before its children, so walking it backwards
        # finishes every child before its parent needs its length.
        for span in reversed(spans):
            start, end = tree.intervals[span]
            children = tree.held.get(span, _NO_CHILDREN)
            lengths[span] = _length(
                start,
                end,
                children,
                tree.by_end(span, children),
                lengths,
                scales.get(span, 1.0),
                group_of,
                trail,
                span,
            )
    return _length(
        profile.start_ns,
        profile.end_ns,
        tree.roots,
        tree.by_end(None, tree.roots),
        lengths,
        1.0,
        group_of,
        trail,
        None,
    )


class RecordedSchedule:
    """What every projection of one trace shares: its clipped schedule as recorded.

    The findings project one trace a dozen times and more in a row; building this once per
    trace instead of once per projection halves their cost. It refers to the trace's spans, so
    it lives as long as the caller keeps it (``find_all`` keeps it for one trace). Build it on
    the finished profile: changing the trace's spans afterwards leaves it stale.
    """

    __slots__ = ("_by_end", "held", "intervals", "lengths", "position", "roots", "roots_key", "spans")

    def __init__(self, profile: TraceProfile) -> None:
        self.spans = profile.spans
        self.roots_key = profile.roots
        self.intervals, self.held = _clipped_tree(profile)
        self.lengths = {span: end - start for span, (start, end) in self.intervals.items()}
        self.position = {span: index for index, span in enumerate(profile.spans)}
        self.roots: list[_Child] = sorted(
            (root.start_ns, root.end_ns, root.record.span_id, root) for root in profile.roots
        )
        self._by_end: dict[SpanProfile | None, list[int]] = {}

    def by_end(self, span: SpanProfile | None, children: list[_Child]) -> list[int]:
        """Positions of ``span``'s held children (None: the roots) in order of recorded end."""
        order = self._by_end.get(span)
        if order is None:
            order = self._by_end[span] = sorted(range(len(children)), key=lambda i: (children[i][1], i))
        return order


def _recorded(profile: TraceProfile, schedule: RecordedSchedule | None) -> RecordedSchedule:
    """``schedule``, or the trace's built now; a schedule of another trace is a caller's mistake."""
    if schedule is None:
        return RecordedSchedule(profile)
    # The same lists (held by the schedule, so never another trace's lists at a reused address).
    if schedule.spans is not profile.spans or schedule.roots_key is not profile.roots:
        raise ValueError(f"schedule is not the recorded schedule of trace {profile.trace_id}")
    return schedule


_NO_CHILDREN: list[_Child] = []


def _group_index(independent: Collection[frozenset[str]] | None) -> dict[str, int]:
    group_of: dict[str, int] = {}
    for index, group in enumerate(independent or ()):
        for span_id in group:
            group_of.setdefault(span_id, index)
    return group_of


def _checked(scale: float, span: SpanProfile) -> float:
    if not (scale >= 0.0 and math.isfinite(scale)):
        raise ValueError(f"factor of span {span.record.span_id} must be finite and >= 0, got {scale!r}")
    return scale


def _clipped_tree(profile: TraceProfile) -> tuple[dict[SpanProfile, tuple[int, int]], dict[SpanProfile, list[_Child]]]:
    """Every span's interval clipped to its parent's, and the children that hold each span up."""
    intervals: dict[SpanProfile, tuple[int, int]] = {root: (root.start_ns, root.end_ns) for root in profile.roots}
    held: dict[SpanProfile, list[_Child]] = {}
    for span in profile.spans:
        if not span.children:
            continue
        start, end = intervals[span]
        producer = span.record.kind is SpanKind.PRODUCER
        kept: list[_Child] = []
        for child in span.children:
            child_start, child_end = child.start_ns, child.end_ns
            # Left out as by the critical path: entirely outside the parent, or a producer's
            # consumer. The subtree is still given an interval (its own) but no schedule slot.
            # Left out too: a call's request written beside it (``core.call_parts``). Its time is the
            # call's, which the schedule holds where the call is; kept, it would hold its parent at its
            # recorded end when the call is removed or shortened, and the saving would collapse.
            if (
                child_start >= end
                or child_end <= start
                or (producer and child.record.kind is SpanKind.CONSUMER)
                or _is_request_beside_its_call(child)
            ):
                intervals[child] = (child_start, child_end)
                continue
            child_start = child_start if child_start > start else start
            child_end = child_end if child_end < end else end
            intervals[child] = (child_start, child_end)
            kept.append((child_start, child_end, child.record.span_id, child))
        kept.sort()
        held[span] = kept
    return intervals, held


def _is_request_beside_its_call(span: SpanProfile) -> bool:
    """Whether ``span`` is a call's HTTP request recorded outside the call's subtree, within its time."""
    call = span.same_call_as
    if call is None or span.children or not is_http_client_span(span):
        return False
    if not (call.start_ns <= span.start_ns and span.end_ns <= call.end_ns):
        return False
    # A request below its call (the nested shape) is the call's child and is scheduled as such.
    ancestor = span.parent
    while ancestor is not None:
        if ancestor is call or ancestor.same_call_as is call:
            return False
        ancestor = ancestor.parent
    return True


def _scaled(duration: int, scale: float) -> int:
    # Exact when unchanged: the common case must reproduce the recording to the nanosecond.
    return duration if scale == 1.0 else round(duration * scale)


def _length(
    start: int,
    end: int,
    children: list[_Child],
    by_end: list[int],
    lengths: dict[SpanProfile, int],
    scale: float,
    group_of: dict[str, int],
    trail: _Trail | None = None,
    owner: SpanProfile | None = None,
) -> int:
    """Projected length of one span (from its projected start to its projected end); with ``trail``,
    records the children on the span's (``owner``'s) projected critical path there."""
    if not children:
        return _scaled(end - start, scale)
    count = len(children)
    # ``by_end``: siblings in order of recorded end (ties by position); the pointer admits them as
    # dependencies once they ended at or before the current child's start. Ties go by position, so
    # a dependency is always a sibling placed before, already scheduled (two zero-length siblings
    # at one instant would otherwise depend on each other).
    admitted = 0
    dependency_end = start  # latest recorded end among the dependencies (or the parent's start)
    dependency_projected = 0  # latest projected end among them, relative to the parent's start
    projected_ends = [0] * count
    # For the trail: each child's latest-ending dependency (the one it waited for), if any.
    dependency_index: int | None = None
    waited_for: list[int | None] = [None] * count
    group_waited_for: dict[int, int | None] = {}
    group_starts: dict[int, int] = {}
    latest_projected = 0
    latest_recorded = start
    # Comparisons written out rather than max() and tuple order: this loop is most of the
    # findings' time.
    for index, (child_start, child_end, span_id, child) in enumerate(children):
        while admitted < count:
            candidate = by_end[admitted]
            candidate_end = children[candidate][1]
            # Admitted when (candidate_end, candidate) < (child_start, index).
            if candidate_end > child_start or (candidate_end == child_start and candidate >= index):
                break
            admitted += 1
            if candidate_end > dependency_end:
                dependency_end = candidate_end
            candidate_projected = projected_ends[candidate]
            # Ties go to the sibling admitted first (earlier end, then earlier start), as the critical
            # path's walk breaks them; a sibling ending at the parent's start held nothing up.
            if candidate_projected > dependency_projected:
                dependency_projected = candidate_projected
                dependency_index = candidate
        group = group_of.get(span_id) if group_of else None
        projected_start = group_starts.get(group) if group is not None else None
        if projected_start is None:
            gap = child_start - dependency_end
            projected_start = dependency_projected + (gap if scale == 1.0 else round(gap * scale))
            waited_for[index] = dependency_index
            if group is not None:
                # The group's first member (earliest start) fixes where every member starts.
                group_starts[group] = projected_start
                group_waited_for[group] = dependency_index
        else:
            waited_for[index] = group_waited_for[group] if group is not None else None
        projected_end = projected_ends[index] = projected_start + lengths[child]
        if projected_end > latest_projected:
            latest_projected = projected_end
        if child_end > latest_recorded:
            latest_recorded = child_end
    if trail is not None:
        _record_chain(children, projected_ends, waited_for, lengths, trail, owner)
    return latest_projected + _scaled(end - latest_recorded, scale)


def _record_chain(
    children: list[_Child],
    projected_ends: list[int],
    waited_for: list[int | None],
    lengths: dict[SpanProfile, int],
    trail: _Trail,
    owner: SpanProfile | None,
) -> None:
    """The latest-ending child, the sibling it waited for, and so on: ``owner``'s critical children."""
    # The latest end; on a tie the earliest start (the first in order), as the critical path's walk.
    last = max(range(len(children)), key=lambda i: (projected_ends[i], -i))
    chain: list[tuple[SpanProfile, int, int]] = []
    index: int | None = last
    while index is not None:
        child = children[index][3]
        chain.append((child, projected_ends[index] - lengths[child], lengths[child]))
        index = waited_for[index]
    chain.reverse()
    trail[owner] = chain
