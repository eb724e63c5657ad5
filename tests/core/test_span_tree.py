"""Span trees from records: parent ids only, and bad data repaired, reported and still analysed."""

from __future__ import annotations

import pytest

from otel_agent_profiler.core import SpanKind, profile_records
from tests.support.span_builders import (
    TRACE_ID,
    anomaly_kinds,
    by_name,
    critical_path_of,
    profile,
    self_times_of,
    sid,
    span,
    subtree,
)


def parent_names(trace) -> dict[str, str | None]:
    return {node.name: (node.parent.name if node.parent is not None else None) for node in trace.spans}


def assert_tree_consistent(trace) -> None:
    """Every span reachable from exactly one root; parent/children links agree; tiling holds."""
    reached = [node for root in trace.roots for node in subtree(root)]
    assert sorted(node.span_id for node in reached) == sorted(node.span_id for node in trace.spans)
    assert len({node.span_id for node in trace.spans}) == len(trace.spans)
    for node in trace.spans:
        for child in node.children:
            assert child.parent is node
            assert child.depth == node.depth + 1
    for root in trace.roots:
        assert root.parent is None and root.depth == 0
        assert sum(node.critical_path_ns for node in subtree(root)) == root.duration_ns


# --- trees come from parent ids -------------------------------------------------------------


def test_child_starting_before_its_parent_is_still_its_child():
    # C starts 50 ns before its parent and ends inside it; clocks lie, ids don't.
    trace = profile([span("P", None, 100, 200), span("C", "P", 50, 150)])
    assert parent_names(trace) == {"P": None, "C": "P"}
    assert [root.name for root in trace.roots] == ["P"]
    assert trace.anomalies == []
    assert by_name(trace)["C"].depth == 1


def test_child_entirely_outside_its_parent_is_still_its_child():
    trace = profile([span("P", None, 100, 200), span("C", "P", 300, 400)])
    assert parent_names(trace) == {"P": None, "C": "P"}
    assert trace.anomalies == []


def test_span_inside_another_in_time_without_parent_id_is_not_its_child():
    trace = profile([span("R1", None, 0, 100), span("R2", None, 10, 20)])
    assert parent_names(trace) == {"R1": None, "R2": None}
    assert [root.name for root in trace.roots] == ["R1", "R2"]
    assert trace.anomalies == []


def test_spans_are_in_depth_first_order_by_start_then_id():
    records = [
        span("Z", None, 500, 600),
        span("b2", "R", 20, 30),
        span("a1", "R", 10, 90),
        span("x", "a1", 15, 20),
        span("B", "R", 20, 40),  # same start as b2: the lower id ("B" < "b2" as hex) first
        span("R", None, 0, 100),
    ]
    trace = profile(records)
    assert sid("B") < sid("b2")
    assert [node.name for node in trace.spans] == ["R", "a1", "x", "B", "b2", "Z"]
    assert [node.depth for node in trace.spans] == [0, 1, 2, 1, 1, 0]
    assert [root.name for root in trace.roots] == ["R", "Z"]


# --- missing parents and several roots ------------------------------------------------------


def test_missing_parent_makes_a_root_and_is_reported():
    trace = profile([span("A", None, 0, 100), span("B", "ghost", 10, 50), span("C", "B", 20, 30)])
    assert parent_names(trace) == {"A": None, "B": None, "C": "B"}
    assert [root.name for root in trace.roots] == ["A", "B"]
    assert anomaly_kinds(trace) == {("missing_parent", sid("B"))}
    assert by_name(trace)["B"].depth == 0
    assert critical_path_of(trace) == {"A": (100, True), "B": (30, True), "C": (10, True)}
    assert_tree_consistent(trace)


def test_several_roots_without_anomalies():
    trace = profile([span("C", None, 30, 40), span("A", None, 10, 20), span("B", None, 10, 25)])
    assert [root.name for root in trace.roots] == ["A", "B", "C"]
    assert trace.anomalies == []
    assert trace.start_ns == 10 and trace.end_ns == 40
    assert trace.duration_ns == 30
    assert trace.critical_path_ns == 10 + 15 + 10


def test_records_of_several_traces_are_profiled_separately():
    other = "11111111111111111111111111111111"
    records = [
        span("A", None, 50, 100),
        span("X", None, 0, 10, trace_id=other),
        span("B", "A", 60, 70),
        span("Y", "X", 2, 4, trace_id=other),
    ]
    first, second = profile_records(records)
    assert (first.trace_id, second.trace_id) == (other, TRACE_ID)
    assert [node.name for node in first.spans] == ["X", "Y"]
    assert [node.name for node in second.spans] == ["A", "B"]


def test_empty_trace_is_rejected():
    from otel_agent_profiler.core import profile_trace

    with pytest.raises(ValueError):
        profile_trace([])


# --- duplicate span ids ---------------------------------------------------------------------


@pytest.mark.parametrize("reverse", [False, True], ids=["given-order", "reversed"])
def test_duplicate_span_id_reported_and_longest_ended_copy_kept(reverse):
    records = [
        span("R", None, 0, 100),
        span("X", "R", 10, None),  # never ended
        span("X", "R", 10, 30),
        span("X", "R", 10, 60),
    ]
    trace = profile(reversed(records) if reverse else records)
    assert [node.name for node in trace.spans] == ["R", "X"]
    kept = by_name(trace)["X"]
    assert (kept.start_ns, kept.end_ns, kept.ended) == (10, 60, True)
    assert [(a.kind, a.span_id) for a in trace.anomalies] == [("duplicate_span_id", sid("X"))]
    assert "3 times" in trace.anomalies[0].detail
    assert self_times_of(trace) == {"R": 50, "X": 50}
    assert_tree_consistent(trace)


def test_duplicate_root_span_id():
    records = [span("R", None, 0, 100), span("R", None, 0, 100), span("A", "R", 10, 20)]
    trace = profile(records)
    assert [node.name for node in trace.spans] == ["R", "A"]
    assert anomaly_kinds(trace) == {("duplicate_span_id", sid("R"))}
    assert trace.critical_path_ns == 100
    assert_tree_consistent(trace)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(span("X", "R", 10, 20), span("X", "B", 10, 20), id="copies-differ-in-parent"),
        pytest.param(
            span("X", "R", 10, 20, SpanKind.CLIENT, attributes={"gen_ai.operation.name": "chat"}),
            span("X", "R", 10, 20, SpanKind.INTERNAL, attributes={"gen_ai.operation.name": "execute_tool"}),
            id="copies-differ-in-kind-and-attributes",
        ),
    ],
)
def test_duplicate_copies_tied_on_preference_give_same_result_in_any_order(first, second):
    # Two copies of X, both ended, same start, end and name. Whichever copy is kept, the
    # result must not depend on which of them arrived first ("the same spans give the same
    # tree whatever order they arrive in").
    base = [span("R", None, 0, 100), span("B", None, 0, 100)]
    forward = profile([*base, first, second])
    backward = profile([*base, second, first])
    assert parent_names(forward) == parent_names(backward)
    assert {n.name: n.category for n in forward.spans} == {n.name: n.category for n in backward.spans}
    assert {n.name: n.record.kind for n in forward.spans} == {n.name: n.record.kind for n in backward.spans}
    assert critical_path_of(forward) == critical_path_of(backward)


# --- cycles ---------------------------------------------------------------------------------


@pytest.mark.parametrize("reverse", [False, True], ids=["given-order", "reversed"])
def test_two_cycle_is_cut_at_earliest_span(reverse):
    records = [span("A", "B", 10, 50), span("B", "A", 20, 40), span("R", None, 0, 100)]
    trace = profile(reversed(records) if reverse else records)
    assert sorted(node.name for node in trace.spans) == ["A", "B", "R"]
    assert parent_names(trace) == {"R": None, "A": None, "B": "A"}
    assert anomaly_kinds(trace) == {("cycle", sid("A"))}
    assert critical_path_of(trace) == {"R": (100, True), "A": (20, True), "B": (20, True)}
    assert self_times_of(trace) == {"R": 100, "A": 20, "B": 20}
    assert_tree_consistent(trace)


@pytest.mark.parametrize("reverse", [False, True], ids=["given-order", "reversed"])
def test_three_cycle_is_cut_at_earliest_span(reverse):
    # Parent links A -> B -> C -> A. B starts first, so B's link is cut: B -> A -> C.
    records = [span("A", "B", 30, 60), span("B", "C", 10, 90), span("C", "A", 20, 80)]
    trace = profile(reversed(records) if reverse else records)
    assert sorted(node.name for node in trace.spans) == ["A", "B", "C"]
    assert parent_names(trace) == {"B": None, "A": "B", "C": "A"}
    assert anomaly_kinds(trace) == {("cycle", sid("B"))}
    # C [20, 80] is clipped to A's [30, 60] and covers it: A is on the path with 0 ns.
    assert critical_path_of(trace) == {"B": (30 + 20, True), "A": (0, True), "C": (30, True)}
    assert_tree_consistent(trace)


def test_cycle_with_equal_starts_is_cut_at_lowest_span_id():
    records = [span("B", "A", 10, 20), span("A", "B", 10, 20)]
    trace = profile(records)
    assert parent_names(trace) == {"A": None, "B": "A"}
    assert anomaly_kinds(trace) == {("cycle", sid("A"))}
    assert_tree_consistent(trace)


def test_cycle_with_a_tail_hanging_off_it():
    # T hangs off the 2-cycle A <-> B; only the cycle is cut.
    records = [span("T", "A", 40, 45), span("A", "B", 10, 50), span("B", "A", 20, 48)]
    trace = profile(records)
    assert parent_names(trace) == {"A": None, "B": "A", "T": "A"}
    assert anomaly_kinds(trace) == {("cycle", sid("A"))}
    assert_tree_consistent(trace)


def test_self_parent_is_reported_as_cycle_and_becomes_root():
    trace = profile([span("S", "S", 0, 10), span("C", "S", 2, 4)])
    assert parent_names(trace) == {"S": None, "C": "S"}
    assert anomaly_kinds(trace) == {("cycle", sid("S"))}
    assert critical_path_of(trace) == {"S": (8, True), "C": (2, True)}
    assert_tree_consistent(trace)


def test_several_cycles_and_a_self_parent_in_one_trace():
    records = [
        span("S", "S", 0, 10),
        span("A", "B", 0, 10),
        span("B", "A", 1, 9),
        span("C", "E", 5, 10),
        span("D", "C", 6, 9),
        span("E", "D", 4, 11),
    ]
    trace = profile(records)
    assert len(trace.spans) == 6
    assert anomaly_kinds(trace) == {("cycle", sid("S")), ("cycle", sid("A")), ("cycle", sid("E"))}
    assert [root.name for root in trace.roots] == ["A", "S", "E"]
    assert_tree_consistent(trace)


# --- unended spans and negative durations ---------------------------------------------------


def test_unended_span_is_reported_and_analysed_until_trace_end():
    records = [span("R", None, 0, 100), span("A", "R", 10, 60), span("U", "R", 50, None)]
    trace = profile(records)
    u = by_name(trace)["U"]
    assert u.ended is False
    assert u.record.end_ns is None
    assert (u.start_ns, u.end_ns, u.duration_ns) == (50, 100, 50)
    assert anomaly_kinds(trace) == {("unended_span", sid("U"))}
    assert self_times_of(trace) == {"R": 10, "A": 50, "U": 50}
    assert critical_path_of(trace) == {"R": (50, True), "A": (0, False), "U": (50, True)}
    assert trace.end_ns == 100
    assert_tree_consistent(trace)


def test_unended_root_lasts_until_last_end_seen():
    trace = profile([span("R", None, 0, None), span("A", "R", 10, 40), span("B", "R", 50, 70)])
    root = by_name(trace)["R"]
    assert (root.end_ns, root.ended) == (70, False)
    assert anomaly_kinds(trace) == {("unended_span", sid("R"))}
    assert critical_path_of(trace) == {"R": (10 + 10 + 0, True), "A": (30, True), "B": (20, True)}
    assert trace.duration_ns == 70


def test_only_unended_spans_get_zero_duration():
    trace = profile([span("U", None, 10, None), span("V", "U", 20, None)])
    assert {n.name: (n.start_ns, n.end_ns) for n in trace.spans} == {"U": (10, 10), "V": (20, 20)}
    assert anomaly_kinds(trace) == {("unended_span", sid("U")), ("unended_span", sid("V"))}
    assert trace.critical_path_ns == 0


def test_end_before_start_is_negative_duration_set_to_zero():
    trace = profile([span("R", None, 0, 100), span("N", "R", 50, 40)])
    n = by_name(trace)["N"]
    assert (n.start_ns, n.end_ns, n.duration_ns) == (50, 50, 0)
    assert n.ended is True
    assert anomaly_kinds(trace) == {("negative_duration", sid("N"))}
    assert self_times_of(trace) == {"R": 100, "N": 0}
    assert critical_path_of(trace) == {"R": (100, True), "N": (0, True)}
    assert_tree_consistent(trace)


def test_negative_duration_root():
    trace = profile([span("R", None, 100, 0)])
    assert (trace.spans[0].duration_ns, trace.duration_ns, trace.critical_path_ns) == (0, 0, 0)
    assert anomaly_kinds(trace) == {("negative_duration", sid("R"))}


def test_all_anomaly_kinds_together():
    records = [
        span("R", None, 0, 100),
        span("R", None, 0, 90),
        span("M", "ghost", 10, 20),
        span("A", "B", 30, 40),
        span("B", "A", 31, 39),
        span("U", "R", 50, None),
        span("N", "R", 70, 60),
    ]
    trace = profile(records)
    assert anomaly_kinds(trace) == {
        ("duplicate_span_id", sid("R")),
        ("missing_parent", sid("M")),
        ("cycle", sid("A")),
        ("unended_span", sid("U")),
        ("negative_duration", sid("N")),
    }
    assert sorted(node.name for node in trace.spans) == ["A", "B", "M", "N", "R", "U"]
    assert_tree_consistent(trace)
