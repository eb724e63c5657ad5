"""Projection: a trace's end-to-end duration recomputed on its tree when spans change.

Table-driven cases with exact nanoseconds, then properties over random trees: the projection
reproduces the recorded duration with nothing changed, speeding spans up never lengthens the
trace (slowing them down never shortens it), starting siblings together never lengthens it, and
removing a span's own time never saves more than its critical-path time.
"""

from __future__ import annotations

import dataclasses
import math
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from otel_agent_profiler.core import TraceProfile
from otel_agent_profiler.core.projection import (
    RecordedSchedule,
    projected_critical_path,
    projected_duration_ns,
    projected_duration_scaled_ns,
    projected_durations_scaled_ns,
)
from tests.support.span_builders import CONSUMER, INTERNAL, PRODUCER, profile, sid, span

PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    database=None,  # do not write a .hypothesis directory into the project
    suppress_health_check=[HealthCheck.too_slow],
)

# Epoch-sized timestamps: projections must stay exact where floats would lose nanoseconds.
EPOCH = 1_700_000_000_000_000_000


def factors(**by_span_name: float):
    return lambda node: by_span_name.get(node.name, 1.0)


def groups(*names: tuple[str, ...]) -> list[frozenset[str]]:
    return [frozenset(sid(name) for name in group) for group in names]


SEQUENTIAL = [span("P", None, 0, 100), span("A", "P", 10, 30), span("B", "P", 40, 70)]
PARALLEL = [span("P", None, 0, 100), span("A", "P", 10, 60), span("B", "P", 20, 90)]
# Root R: agent G (LLM call, tool, LLM call), then a final step F.
NESTED = [
    span("R", None, 0, 200),
    span("G", "R", 10, 150),
    span("L1", "G", 20, 60),
    span("T", "G", 60, 100),
    span("L2", "G", 100, 140),
    span("F", "R", 160, 190),
]
# An LLM call L, then tools A and B one after another, then the next step C.
FAN = [
    span("P", None, 0, 100),
    span("L", "P", 0, 20),
    span("A", "P", 20, 50),
    span("B", "P", 55, 70),
    span("C", "P", 70, 90),
]

CASES = [
    # Sequential children: own time 10 + 10 + 30 around A (20) and B (30).
    pytest.param(SEQUENTIAL, factors(), None, 100, id="sequential-unchanged"),
    pytest.param(SEQUENTIAL, factors(A=0.5), None, 90, id="sequential-child-2x-faster"),
    pytest.param(SEQUENTIAL, factors(B=0.0), None, 70, id="sequential-child-removed"),
    pytest.param(SEQUENTIAL, factors(P=0.0), None, 50, id="sequential-parent-own-time-removed"),
    # 5 (gap) + 10 (A) + 5 (gap) + 30 (B) + 15 (tail)
    pytest.param(SEQUENTIAL, factors(P=0.5, A=0.5), None, 65, id="sequential-parent-and-child-2x"),
    pytest.param(SEQUENTIAL, factors(A=2.0), None, 120, id="sequential-child-2x-slower"),
    # Parallel children: A [10, 60] is hidden by B [20, 90].
    pytest.param(PARALLEL, factors(), None, 100, id="parallel-unchanged"),
    pytest.param(PARALLEL, factors(A=0.5), None, 100, id="parallel-off-critical-path-2x-saves-nothing"),
    # B ends at 55, A (ending at 60) becomes critical: 60 + tail 10.
    pytest.param(PARALLEL, factors(B=0.5), None, 70, id="parallel-on-critical-path-2x"),
    pytest.param(PARALLEL, factors(A=0.5, B=0.5), None, 65, id="parallel-both-2x"),
    # Nested: T 2x faster moves L2, G's end and F (which depends on G) 20 earlier.
    pytest.param(NESTED, factors(), None, 200, id="nested-unchanged"),
    pytest.param(NESTED, factors(T=0.5), None, 180, id="nested-grandchild-2x"),
    # G's own time: 10 before L1, 10 after L2; scaled to 5 + 5.
    pytest.param(NESTED, factors(G=0.5), None, 190, id="nested-middle-own-time-2x"),
    pytest.param(NESTED, factors(F=0.0), None, 170, id="nested-last-step-removed"),
    # Independent A and B both start at 20 (B's own 5 ms gap goes with it); C follows the later.
    pytest.param(FAN, factors(), groups(("A", "B")), 80, id="independent-pair"),
    pytest.param(FAN, factors(), groups(("A", "B", "C")), 60, id="independent-three"),
    pytest.param(FAN, factors(), groups(("A",)), 100, id="independent-singleton-changes-nothing"),
    pytest.param(FAN, factors(), groups(("A", "nothere")), 100, id="independent-unknown-ids-ignored"),
    pytest.param(FAN, factors(A=0.5), groups(("A", "B")), 65, id="independent-and-faster"),
    pytest.param(NESTED, factors(), groups(("L1", "F")), 200, id="independent-ids-of-different-parents-do-not-group"),
    # C [40, 100] depends on A [0, 30] only: B [20, 50] was still running when C started. The
    # 10 ns from A's end to C's start are P's, as on the critical path (P: 10, A: 30, C: 60).
    pytest.param(
        [span("P", None, 0, 100), span("A", "P", 0, 30), span("B", "P", 20, 50), span("C", "P", 40, 100)],
        factors(P=0.0),
        None,
        90,
        id="gap-during-an-overlapping-sibling-is-the-parents",
    ),
    # Producer P [0, 50] with its consumer C [40, 200]: C does not hold P up; the trace's time
    # past its last root stays as a fixed tail.
    pytest.param(
        [span("P", None, 0, 50, PRODUCER), span("C", "P", 40, 200, CONSUMER)],
        factors(),
        None,
        200,
        id="producer-consumer-unchanged",
    ),
    pytest.param(
        [span("P", None, 0, 50, PRODUCER), span("C", "P", 40, 200, CONSUMER)],
        factors(C=0.5),
        None,
        200,
        id="producer-consumer-consumer-left-out",
    ),
    pytest.param(
        [span("P", None, 0, 50, PRODUCER), span("C", "P", 40, 200, CONSUMER)],
        factors(P=0.5),
        None,
        175,
        id="producer-consumer-producer-2x",
    ),
    pytest.param(
        [span("P", None, 0, 50, PRODUCER), span("C", "P", 10, 40, INTERNAL)],
        factors(C=0.5),
        None,
        35,
        id="producer-internal-child-holds-it",
    ),
    # Overflowing child A [50, 150] of P [0, 100]: clipped to [50, 100]; 2x faster gives 25 ms
    # inside P; the 50 past P stay.
    pytest.param([span("P", None, 0, 100), span("A", "P", 50, 150)], factors(), None, 150, id="overflow-unchanged"),
    pytest.param(
        [span("P", None, 0, 100), span("A", "P", 50, 150)], factors(A=0.5), None, 125, id="overflow-clipped-2x"
    ),
    pytest.param(
        [span("P", None, 0, 100), span("A", "P", 120, 150)], factors(A=0.5), None, 150, id="outside-child-left-out"
    ),
    # Two roots one after another (R2's parent is not in the data): R2 depends on R1.
    pytest.param(
        [span("R1", None, 0, 50), span("R2", "lost", 60, 100)], factors(R1=0.5), None, 75, id="sequential-roots"
    ),
    pytest.param(
        [span("R1", None, 0, 50), span("R2", "lost", 60, 100)],
        factors(),
        groups(("R1", "R2")),
        50,
        id="independent-roots",
    ),
    pytest.param(
        [span("P", None, 0, 10), span("A", "P", 5, 5), span("B", "P", 5, 5)],
        factors(),
        None,
        10,
        id="zero-length-siblings-at-one-instant",
    ),
    pytest.param([span("P", None, 0, 100)], factors(P=0.0), None, 0, id="single-span-removed"),
    pytest.param([span("P", None, 0, 3)], factors(P=0.5), None, 2, id="rounded-to-nearest-ns"),
]


@pytest.mark.parametrize(("records", "factor", "independent", "expected"), CASES)
def test_projection(records, factor, independent, expected) -> None:
    assert projected_duration_ns(profile(records), factor, independent) == expected


@pytest.mark.parametrize(("records", "factor", "independent", "expected"), CASES)
def test_projection_is_independent_of_the_epoch(records, factor, independent, expected) -> None:
    shifted = [dataclasses.replace(r, start_ns=r.start_ns + EPOCH, end_ns=r.end_ns + EPOCH) for r in records]
    assert projected_duration_ns(profile(shifted), factor, independent) == expected


def test_groups_of_one_parent_are_independent_of_each_other() -> None:
    trace = profile(FAN)
    assert projected_duration_ns(trace, independent=groups(("A", "B"), ("B", "C"))) == 80  # B stays in the first


@pytest.mark.parametrize("bad", [-0.5, math.nan, math.inf])
def test_factor_must_be_finite_and_not_negative(bad: float) -> None:
    with pytest.raises(ValueError, match="must be finite"):
        projected_duration_ns(profile(SEQUENTIAL), factors(A=bad))


def test_10000_deep_chain() -> None:
    # Span i covers [2i, 40000 - 2i]: 2 ns of own time at each end, the deepest a 4 ns leaf.
    depth = 10_000
    records = [span(i, i - 1 if i else None, 2 * i, 40_000 - 2 * i) for i in range(depth)]
    trace = profile(records)
    assert sys.getrecursionlimit() < depth
    assert projected_duration_ns(trace) == 40_000
    assert projected_duration_ns(trace, lambda node: 0.5) == 20_000
    assert projected_duration_ns(trace, lambda node: 1.0 if node.name != "9999" else 0.0) == 40_000 - 4


def test_10000_sequential_siblings() -> None:
    records = [span("root", None, 0, 30_000)]
    records += [span(i, "root", 3 * i, 3 * i + 2) for i in range(10_000)]
    trace = profile(records)
    assert projected_duration_ns(trace) == 30_000
    # Every child 2 ns -> 1 ns; own time (1 ns between children, 2 ns tail) unchanged.
    assert projected_duration_ns(trace, lambda node: 0.5 if node.name != "root" else 1.0) == 20_000
    everything = [frozenset(sid(i) for i in range(10_000))]
    assert projected_duration_ns(trace, independent=everything) == 2 + (30_000 - 29_999)


def test_projection_does_not_change_the_profile() -> None:
    trace = profile(NESTED)
    before = [(n.start_ns, n.end_ns, n.critical_path_ns, n.self_time_ns) for n in trace.spans]
    projected_duration_ns(trace, factors(T=0.0), groups(("L1", "T")))
    assert [(n.start_ns, n.end_ns, n.critical_path_ns, n.self_time_ns) for n in trace.spans] == before


def test_a_schedule_of_another_trace_is_refused() -> None:
    nested, fan = profile(NESTED), profile(FAN)
    with pytest.raises(ValueError, match="recorded schedule"):
        projected_duration_ns(nested, schedule=RecordedSchedule(fan))


# ------------------------------------------------------------------------------------------------
# Properties


@st.composite
def span_trees(draw, max_spans: int = 30, messy: bool = False) -> list:
    """Records of one trace. Well-nested: every child inside its parent. Messy: some children
    overflow their parent or lie outside it, and PRODUCER/CONSUMER kinds occur."""
    count = draw(st.integers(min_value=1, max_value=max_spans))
    intervals: list[tuple[int, int]] = []
    records = []
    for i in range(count):
        parent = None if i == 0 or draw(st.integers(0, 9)) == 0 else draw(st.integers(0, i - 1))
        if parent is None:
            start = draw(st.integers(0, 100))
            end = start + draw(st.integers(0, 100))
        else:
            parent_start, parent_end = intervals[parent]
            start = draw(st.integers(parent_start, parent_end))
            end = draw(st.integers(start, parent_end))
            if messy and draw(st.integers(0, 3)) == 0:
                start = draw(st.integers(parent_start - 20, parent_end + 20))
                end = start + draw(st.integers(0, 60))
        kind = draw(st.sampled_from([INTERNAL, INTERNAL, PRODUCER, CONSUMER])) if messy else INTERNAL
        intervals.append((start, end))
        records.append(span(i, parent, EPOCH + start, EPOCH + end, kind))
    return records


def own_time_factors(data: st.DataObject, trace: TraceProfile, choices: list[float]) -> dict[str, float]:
    return {node.span_id: data.draw(st.sampled_from(choices)) for node in trace.spans}


def random_sibling_groups(data: st.DataObject, trace: TraceProfile) -> list[frozenset[str]]:
    result = []
    for node in [*trace.spans, None]:
        children = trace.roots if node is None else node.children
        if len(children) > 1 and data.draw(st.booleans()):
            chosen = data.draw(st.lists(st.sampled_from(children), min_size=2, unique_by=lambda c: c.span_id))
            result.append(frozenset(c.span_id for c in chosen))
    return result


@PROPERTY_SETTINGS
@given(span_trees())
def test_unchanged_projection_reproduces_well_nested_traces(records) -> None:
    trace = profile(records)
    assert projected_duration_ns(trace) == trace.duration_ns


@PROPERTY_SETTINGS
@given(span_trees(messy=True))
def test_unchanged_projection_reproduces_any_trace(records) -> None:
    # Overflowing children are clipped, left-out subtrees and overflow past the roots stay as
    # recorded: the identity holds for every trace, not just well-nested ones.
    trace = profile(records)
    assert projected_duration_ns(trace) == trace.duration_ns


@PROPERTY_SETTINGS
@given(span_trees(messy=True), st.data())
def test_faster_never_lengthens_slower_never_shortens(records, data) -> None:
    trace = profile(records)
    faster = own_time_factors(data, trace, [0.0, 0.25, 0.5, 1.0])
    slower = own_time_factors(data, trace, [1.0, 1.5, 3.0])
    assert projected_duration_ns(trace, lambda n: faster[n.span_id]) <= trace.duration_ns
    assert projected_duration_ns(trace, lambda n: slower[n.span_id]) >= trace.duration_ns


@PROPERTY_SETTINGS
@given(span_trees(messy=True), st.data())
def test_starting_siblings_together_never_lengthens(records, data) -> None:
    trace = profile(records)
    assert projected_duration_ns(trace, independent=random_sibling_groups(data, trace)) <= trace.duration_ns


@PROPERTY_SETTINGS
@given(span_trees(messy=True))
def test_removing_own_time_saves_at_most_its_critical_path_time(records) -> None:
    trace = profile(records)
    for node in trace.spans:
        saving = trace.duration_ns - projected_duration_ns(trace, lambda n, node=node: 0.0 if n is node else 1.0)
        assert 0 <= saving <= node.critical_path_ns, node


@PROPERTY_SETTINGS
@given(span_trees(messy=True), st.data())
def test_several_factors_at_once_project_as_each_alone(records, data) -> None:
    trace = profile(records)
    selected = data.draw(st.lists(st.sampled_from(trace.spans), unique_by=lambda n: n.span_id, max_size=4))
    factors = data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=1, max_size=3))
    assert projected_durations_scaled_ns(trace, selected, factors) == [
        projected_duration_scaled_ns(trace, dict.fromkeys(selected, factor)) for factor in factors
    ]


@PROPERTY_SETTINGS
@given(span_trees())
def test_removing_everything_leaves_the_gaps_between_roots(records) -> None:
    trace = profile(records)
    # With every span's own time removed, only the virtual root's time remains: the stretches
    # before, between and after the roots that no root covers and no dependency explains.
    projected = projected_duration_ns(trace, lambda n: 0.0)
    assert 0 <= projected <= trace.duration_ns
    if len(trace.roots) == 1:
        assert projected == 0


@PROPERTY_SETTINGS
@given(span_trees(messy=True), st.data())
def test_projected_critical_path_agrees_with_the_projected_duration(records, data) -> None:
    trace = profile(records)
    factors = own_time_factors(data, trace, [0.0, 0.5, 1.0, 2.0])
    independent = random_sibling_groups(data, trace)
    factor = lambda n: factors[n.span_id]  # noqa: E731
    duration, steps = projected_critical_path(trace, factor, independent)
    assert duration == projected_duration_ns(trace, factor, independent)
    # Every step lies inside the projected trace, and a span's children on the path follow it.
    assert all(offset >= 0 and offset + length <= duration for _, offset, length in steps)
    seen: set[str] = set()
    for node, _, _ in steps:
        assert node.parent is None or node.parent.span_id in seen
        seen.add(node.span_id)


@PROPERTY_SETTINGS
@given(span_trees())
def test_unchanged_projected_critical_path_is_the_recorded_one(records) -> None:
    trace = profile(records)
    duration, steps = projected_critical_path(trace)
    assert duration == trace.duration_ns
    assert all(node.on_critical_path for node, _, _ in steps)
    assert all(offset == node.start_ns - trace.start_ns for node, offset, _ in steps)


@PROPERTY_SETTINGS
@given(span_trees(messy=True), st.data())
def test_one_schedule_serves_every_projection_of_a_trace(records, data) -> None:
    trace = profile(records)
    schedule = RecordedSchedule(trace)
    for _ in range(3):
        factors = own_time_factors(data, trace, [0.0, 0.5, 1.0, 2.0])
        independent = random_sibling_groups(data, trace)
        scales = {node: factors[node.span_id] for node in trace.spans}
        factor = scales.__getitem__
        selected = [node for node in trace.spans if factors[node.span_id] != 1.0]
        assert projected_duration_ns(trace, factor, independent, schedule=schedule) == projected_duration_ns(
            trace, factor, independent
        )
        assert projected_duration_scaled_ns(
            trace, scales, independent, schedule=schedule
        ) == projected_duration_scaled_ns(trace, scales, independent)
        assert projected_durations_scaled_ns(
            trace, selected, [0.0, 0.5], schedule=schedule
        ) == projected_durations_scaled_ns(trace, selected, [0.0, 0.5])
        assert projected_critical_path(trace, factor, independent, schedule=schedule) == projected_critical_path(
            trace, factor, independent
        )


@PROPERTY_SETTINGS
@given(span_trees(messy=True), st.data())
def test_rescheduling_only_what_changed_agrees_with_scheduling_every_span(records, data) -> None:
    # Without regrouped siblings a projection places again only the changed spans' ancestors, each
    # from its first changed child on, with what one schedule worked out for earlier projections;
    # the projected critical path places every span. Both must give one duration.
    trace = profile(records)
    schedule = RecordedSchedule(trace)
    for _ in range(4):
        factors = own_time_factors(data, trace, [0.0, 0.5, 1.0, 2.0, 0.3])
        factor = lambda n, factors=factors: factors[n.span_id]  # noqa: E731
        everything, _ = projected_critical_path(trace, factor)
        assert projected_duration_ns(trace, factor, schedule=schedule) == everything
        selected = [node for node in trace.spans if factors[node.span_id] != 1.0]
        scale = data.draw(st.sampled_from([0.0, 0.5, 3.0]))
        alike = {node.span_id: scale for node in selected}
        everything_alike, _ = projected_critical_path(trace, lambda n, alike=alike: alike.get(n.span_id, 1.0))
        assert projected_durations_scaled_ns(trace, selected, [scale, 1.0], schedule=schedule) == [
            everything_alike,
            trace.duration_ns,
        ]
