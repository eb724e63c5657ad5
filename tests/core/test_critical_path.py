"""Critical path: table-driven cases with exact nanoseconds for every span.

Each case lists the span records and, for *every* span, ``(critical_path_ns, on_critical_path)``.
The first group re-expresses the cases Jaeger UI publishes for its critical path
(packages/jaeger-ui/src/components/TracePage/CriticalPath/testCases/) with our records;
Jaeger's ``startTime``/``duration`` become ``start``/``start + duration``. The second group
covers the cases where Jaeger's algorithm goes wrong (strict ``<``, falsy start time 0,
order-dependent ties) and ours must not.
"""

from __future__ import annotations

import random
import sys

import pytest

from otel_agent_profiler.core import profile_records
from tests.support.span_builders import (
    CLIENT,
    CONSUMER,
    PRODUCER,
    SERVER,
    by_name,
    critical_path_of,
    profile,
    sid,
    span,
    subtree,
)


def assert_tiles(trace) -> None:
    """Per root, the critical-path sections of its subtree add up to its duration exactly."""
    for root in trace.roots:
        assert sum(node.critical_path_ns for node in subtree(root)) == root.duration_ns, root.name
    assert trace.critical_path_ns == sum(root.duration_ns for root in trace.roots)


JAEGER_CASES = [
    pytest.param(
        # test1: C [1, 101] with sequential children D [20, 40] and E [50, 60].
        [span("C", None, 1, 101), span("E", "C", 50, 60), span("D", "C", 20, 40)],
        {"C": (41 + 10 + 19, True), "D": (20, True), "E": (10, True)},
        id="jaeger1-sequential-children",
    ),
    pytest.param(
        # test2: X [1, 101], overlapping children A [10, 50] and C [20, 60]: C hides A.
        [span("X", None, 1, 101), span("A", "X", 10, 50), span("C", "X", 20, 60)],
        {"X": (41 + 19, True), "A": (0, False), "C": (40, True)},
        id="jaeger2-overlapping-children",
    ),
    pytest.param(
        # test3: producer A [100, 140], its CLIENT child B [200, 500] starts after A ended.
        [span("A", None, 100, 140, PRODUCER), span("B", "A", 200, 500, CLIENT)],
        {"A": (40, True), "B": (0, False)},
        id="jaeger3-child-starts-after-parent-ends",
    ),
    pytest.param(
        # test4: B [40, 80] starts after A [1, 31] ends; B's child C [50, 60] is dropped with it.
        [span("A", None, 1, 31), span("B", "A", 40, 80), span("C", "B", 50, 60)],
        {"A": (30, True), "B": (0, False), "C": (0, False)},
        id="jaeger4-child-after-parent-ends-with-subtree",
    ),
    pytest.param(
        # test5: async messaging. B is a CONSUMER child of the PRODUCER A, so A does not wait
        # for it; B's own child C goes with it.
        [span("A", None, 1, 31, PRODUCER), span("B", "A", 10, 20, CONSUMER), span("C", "B", 12, 14)],
        {"A": (30, True), "B": (0, False), "C": (0, False)},
        id="jaeger5-producer-consumer-async",
    ),
    pytest.param(
        # test6: B [15, 35] overflows A [1, 30] -> [15, 30]; B's child C [10, 25] starts before
        # B, so it is clipped to [15, 25].
        [span("A", None, 1, 30), span("B", "A", 15, 35), span("C", "B", 10, 25)],
        {"A": (14, True), "B": (5, True), "C": (10, True)},
        id="jaeger6-child-start-clipped",
    ),
    pytest.param(
        # test7: B [15, 35] -> [15, 30]; its child C [20, 40] ends after both: clipped to [20, 30].
        [span("A", None, 1, 30), span("B", "A", 15, 35), span("C", "B", 20, 40)],
        {"A": (14, True), "B": (5, True), "C": (10, True)},
        id="jaeger7-child-end-clipped",
    ),
    pytest.param(
        # test8: B [5, 35] encloses its parent A [10, 30] on both sides: clipped to all of A.
        [span("A", None, 10, 30), span("B", "A", 5, 35)],
        {"A": (0, True), "B": (20, True)},
        id="jaeger8-child-overflows-parent-both-sides",
    ),
    pytest.param(
        # test9: B [1, 5] ends before its parent A [10, 30] starts.
        [span("A", None, 10, 30), span("B", "A", 1, 5)],
        {"A": (20, True), "B": (0, False)},
        id="jaeger9-child-ends-before-parent-starts",
    ),
    pytest.param(
        # happyTrace.json: X [1, 10]; A [2, 6] (child B [4, 5]), C [3, 7], D [8, 9].
        # Walk: X 9-10, D, X 7-8, C 3-7; A ends after 3, so X 1-3.
        [
            span("X", None, 1, 10, SERVER),
            span("A", "X", 2, 6, CLIENT),
            span("B", "A", 4, 5, CLIENT),
            span("C", "X", 3, 7, CLIENT),
            span("D", "X", 8, 9, SERVER),
        ],
        {"X": (1 + 1 + 2, True), "A": (0, False), "B": (0, False), "C": (4, True), "D": (1, True)},
        id="jaeger-happy-trace",
    ),
]


EXACTNESS_CASES = [
    pytest.param(
        # Jaeger requires child.end < cursor, so A (ending exactly when B starts) is lost and
        # its 40 ns are credited to P.
        [span("P", None, 0, 100), span("A", "P", 10, 50), span("B", "P", 50, 90)],
        {"P": (10 + 10, True), "A": (40, True), "B": (40, True)},
        id="back-to-back-children-both-on-path",
    ),
    pytest.param(
        # Three children chained end to start, the last ending with the parent.
        [span("P", None, 0, 90), span("A", "P", 0, 30), span("B", "P", 30, 60), span("C", "P", 60, 90)],
        {"P": (0, True), "A": (30, True), "B": (30, True), "C": (30, True)},
        id="back-to-back-chain-covers-parent",
    ),
    pytest.param(
        # Jaeger treats a returning start time of 0 as "no start time" (falsy).
        [span("P", None, 0, 100), span("A", "P", 0, 40), span("B", "P", 60, 100), span("G", "A", 0, 10)],
        {"P": (20, True), "A": (30, True), "B": (40, True), "G": (10, True)},
        id="trace-starting-at-time-zero",
    ),
    pytest.param(
        # Same end: the child that started first (the longer one) wins; B then ends after the cursor.
        [span("P", None, 0, 100), span("B", "P", 40, 80), span("A", "P", 20, 80)],
        {"P": (20 + 20, True), "A": (60, True), "B": (0, False)},
        id="tie-on-end-earlier-start-wins",
    ),
    pytest.param(
        # Same end and start: the lowest span id wins, whatever the arrival order (B first here).
        [span("P", None, 0, 100), span("B", "P", 30, 80), span("A", "P", 30, 80)],
        {"P": (20 + 30, True), "A": (50, True), "B": (0, False)},
        id="tie-on-end-and-start-lowest-id-wins",
    ),
    pytest.param(
        [span("P", None, 0, 100), span("A", "P", 30, 80), span("B", "P", 30, 80)],
        {"P": (20 + 30, True), "A": (50, True), "B": (0, False)},
        id="tie-on-end-and-start-lowest-id-wins-other-order",
    ),
    pytest.param(
        # A zero-length child strictly inside its parent is entered (0 ns of its own).
        [span("P", None, 0, 100), span("Z", "P", 50, 50)],
        {"P": (100, True), "Z": (0, True)},
        id="zero-length-child-inside-parent",
    ),
    pytest.param(
        # A zero-length child at the instant the next child starts is still reached (<=).
        [span("P", None, 0, 100), span("A", "P", 60, 90), span("Z", "P", 60, 60)],
        {"P": (10 + 60, True), "A": (30, True), "Z": (0, True)},
        id="zero-length-child-back-to-back",
    ),
    pytest.param(
        # Same end as A, but A started first; then the cursor is at 20, before Z.
        [span("P", None, 0, 100), span("Z", "P", 60, 60), span("A", "P", 20, 60)],
        {"P": (40 + 20, True), "A": (40, True), "Z": (0, False)},
        id="zero-length-child-loses-end-tie",
    ),
    pytest.param(
        # Zero-length children at the parent's start/end lie outside its interval.
        [span("P", None, 0, 100), span("S", "P", 0, 0), span("E", "P", 100, 100)],
        {"P": (100, True), "S": (0, False), "E": (0, False)},
        id="zero-length-children-at-parent-edges-left-out",
    ),
    pytest.param(
        # A wrapper fully covered by its only child is on the path with 0 ns of its own.
        [span("P", None, 0, 100), span("W", "P", 0, 100), span("L", "W", 10, 90)],
        {"P": (0, True), "W": (20, True), "L": (80, True)},
        id="wrapper-fully-covered-on-path-with-zero",
    ),
    pytest.param(
        [span("P", None, 0, 100), span("W", "P", 10, 90), span("L", "W", 10, 90)],
        {"P": (20, True), "W": (0, True), "L": (80, True)},
        id="inner-wrapper-fully-covered-on-path-with-zero",
    ),
]


CLIPPING_AND_KIND_CASES = [
    pytest.param(
        # A [50, 150] -> [50, 100]; its child G [90, 140] -> [90, 100].
        [span("P", None, 0, 100), span("A", "P", 50, 150), span("G", "A", 90, 140)],
        {"P": (50, True), "A": (40, True), "G": (10, True)},
        id="grandchild-clipped-to-clipped-child",
    ),
    pytest.param(
        # G [120, 140] lies inside A's own interval but after A's clipped end (100): left out.
        [span("P", None, 0, 100), span("A", "P", 50, 150), span("G", "A", 120, 140)],
        {"P": (50, True), "A": (50, True), "G": (0, False)},
        id="grandchild-outside-clipped-child-left-out",
    ),
    pytest.param(
        # Ends exactly at the parent's start / starts exactly at the parent's end: outside.
        [span("P", None, 50, 100), span("B", "P", 20, 50), span("F", "P", 100, 130)],
        {"P": (50, True), "B": (0, False), "F": (0, False)},
        id="children-touching-parent-edges-left-out",
    ),
    pytest.param(
        # A CONSUMER child blocks a parent that is not a PRODUCER.
        [span("P", None, 0, 100), span("C", "P", 20, 80, CONSUMER)],
        {"P": (40, True), "C": (60, True)},
        id="consumer-under-internal-parent-blocks",
    ),
    pytest.param(
        # A PRODUCER still waits for its non-CONSUMER children.
        [
            span("P", None, 0, 100, PRODUCER),
            span("K", "P", 10, 50, CLIENT),
            span("C", "P", 30, 95, CONSUMER),
            span("D", "C", 40, 60),
        ],
        {"P": (50 + 10, True), "K": (40, True), "C": (0, False), "D": (0, False)},
        id="producer-skips-consumer-but-waits-for-client",
    ),
    pytest.param(
        # Only a CONSUMER *directly* under the PRODUCER is left out: deeper ones block.
        [
            span("P", None, 0, 100, PRODUCER),
            span("S", "P", 10, 90, SERVER),
            span("C", "S", 20, 70, CONSUMER),
        ],
        {"P": (20, True), "S": (30, True), "C": (50, True)},
        id="consumer-under-grandparent-producer-blocks",
    ),
    pytest.param(
        # An agent turn: LLM call, a tool back to back with a concurrent tool, a second LLM
        # call wrapping its HTTP request.
        [
            span("agent", None, 0, 1000),
            span("llm1", "agent", 10, 300),
            span("tool1", "agent", 300, 500),
            span("tool2", "agent", 320, 450),
            span("llm2", "agent", 500, 990),
            span("http", "llm2", 510, 980, CLIENT),
        ],
        {
            "agent": (10 + 10, True),
            "llm1": (290, True),
            "tool1": (200, True),
            "tool2": (0, False),
            "llm2": (10 + 10, True),
            "http": (470, True),
        },
        id="agent-turn",
    ),
]


@pytest.mark.parametrize(("records", "expected"), JAEGER_CASES + EXACTNESS_CASES + CLIPPING_AND_KIND_CASES)
def test_critical_path(records, expected):
    trace = profile(records)
    assert critical_path_of(trace) == expected
    assert_tiles(trace)


@pytest.mark.parametrize(("records", "expected"), JAEGER_CASES + EXACTNESS_CASES + CLIPPING_AND_KIND_CASES)
def test_critical_path_does_not_depend_on_arrival_order(records, expected):
    assert critical_path_of(profile(list(reversed(records)))) == expected


def test_lowest_span_id_tie_break_uses_span_ids():
    # Guard for the tie-break cases above: the builder's id order is the name order.
    assert sid("A") < sid("B")


# --- several roots ------------------------------------------------------------------------


def test_span_with_missing_parent_is_its_own_root_with_its_own_path():
    records = [
        span("R", None, 0, 100),
        span("A", "R", 10, 50),
        # O lies inside R's time but its parent is not in the data: it is a separate root.
        span("O", "ghost", 20, 80),
        span("Q", "O", 30, 40),
    ]
    trace = profile(records)
    assert [root.name for root in trace.roots] == ["R", "O"]
    assert critical_path_of(trace) == {"R": (60, True), "A": (40, True), "O": (50, True), "Q": (10, True)}
    assert trace.critical_path_ns == 100 + 60
    assert_tiles(trace)


def test_several_roots_each_tile_their_own_duration():
    records = [
        span("R1", None, 0, 100),
        span("A", "R1", 0, 100),
        span("R2", None, 50, 250),
        span("B", "R2", 60, 100),
        span("C", "R2", 100, 240),
        span("R3", None, 300, 300),
    ]
    trace = profile(records)
    assert critical_path_of(trace) == {
        "R1": (0, True),
        "A": (100, True),
        "R2": (10 + 10, True),
        "B": (40, True),
        "C": (140, True),
        "R3": (0, True),
    }
    assert trace.critical_path_ns == 100 + 200 + 0
    # The trace's wall-clock duration is not the sum of the roots' durations.
    assert trace.duration_ns == 300
    assert_tiles(trace)


def test_trace_critical_path_is_sum_of_root_durations():
    records = [
        span("R", None, 1_000, 5_000),
        span("A", "R", 1_500, 2_500),
        span("B", "R", 2_000, 4_000),
        span("O1", "lost", 4_500, 9_000),
        span("O2", "lost", 10_000, 10_250),
        span("C", "O1", 5_000, 12_000),
    ]
    trace = profile(records)
    assert trace.critical_path_ns == 4_000 + 4_500 + 250
    assert trace.critical_path_ns == sum(root.duration_ns for root in trace.roots)
    assert critical_path_of(trace) == {
        "R": (1_000 + 1_000, True),
        "A": (0, False),
        "B": (2_000, True),
        "O1": (500, True),
        "C": (4_000, True),
        "O2": (250, True),
    }


# --- scale: no recursion limits -----------------------------------------------------------


def test_chain_ten_thousand_deep():
    depth = 10_000
    assert depth > sys.getrecursionlimit()
    # Span i covers [i, 2 * depth - i]: each one sticks out of its child by 1 ns at each end.
    records = [span(0, None, 0, 2 * depth)] + [span(i, i - 1, i, 2 * depth - i) for i in range(1, depth)]
    for ordering in (records, list(reversed(records))):
        trace = profile(ordering)
        assert len(trace.spans) == depth
        assert len(trace.roots) == 1
        assert trace.spans[-1].depth == depth - 1
        assert all(node.critical_path_ns == 2 for node in trace.spans)
        assert all(node.on_critical_path for node in trace.spans)
        assert all(node.self_time_ns == 2 for node in trace.spans)
        assert trace.critical_path_ns == 2 * depth
        assert_tiles(trace)


def test_hundred_thousand_back_to_back_children():
    count = 100_000
    records = [span(0, None, 0, 10 * (count - 1))]
    records += [span(i, 0, 10 * (i - 1), 10 * i) for i in range(1, count)]
    random.Random(7).shuffle(records)
    trace = profile(records)
    assert len(trace.spans) == count
    nodes = by_name(trace)
    assert nodes["0"].critical_path_ns == 0
    assert nodes["0"].on_critical_path
    assert nodes["0"].self_time_ns == 0
    for i in range(1, count):
        assert (nodes[str(i)].critical_path_ns, nodes[str(i)].on_critical_path) == (10, True)
    assert_tiles(trace)


def test_hundred_thousand_random_spans_tile():
    count = 100_000
    rng = random.Random(20240601)
    intervals = [(0, 10**9)]
    records = [span(0, None, 0, 10**9)]
    for i in range(1, count):
        # Parents among the last few spans make a deep tree (thousands of levels).
        parent = i - 1 - rng.randrange(min(i, 3))
        p_start, p_end = intervals[parent]
        if rng.random() < 0.9:
            start = rng.randint(p_start, p_end)
            end = rng.randint(start, p_end)
        else:  # overflowing, outside, or zero-length
            start = p_start + rng.randint(-1_000, 1_000)
            end = start + rng.randint(0, 2_000)
        intervals.append((start, end))
        records.append(span(i, parent, start, end, CONSUMER if rng.random() < 0.05 else PRODUCER))
    rng.shuffle(records)
    (trace,) = profile_records(records)
    assert len(trace.spans) == count
    assert [root.name for root in trace.roots] == ["0"]
    assert max(node.depth for node in trace.spans) > sys.getrecursionlimit()
    assert trace.critical_path_ns == 10**9
    assert_tiles(trace)
    assert all(node.on_critical_path for node in trace.spans if node.critical_path_ns > 0)
    assert all(0 <= node.self_time_ns <= node.duration_ns for node in trace.spans)


# --- time a parent holds while a child runs -------------------------------------------------


@pytest.mark.parametrize(
    ("records", "waiting"),
    [
        pytest.param(
            # B starts at 400 while A (0-500) still runs: the walk credits 0-400 to X, but A ran then.
            [span("X", None, 0, 1000), span("A", "X", 0, 500), span("B", "X", 400, 1000)],
            {"X": 400, "A": 0, "B": 0},
            id="overlapping-children-from-the-start",
        ),
        pytest.param(
            # X runs its own code 0-100, then A (100-500) and B from 400: 300 of X's 400 are A's time.
            [span("X", None, 0, 1000), span("A", "X", 100, 500), span("B", "X", 400, 1000)],
            {"X": 300, "A": 0, "B": 0},
            id="own-code-then-overlapping-children",
        ),
        pytest.param(
            # One after another with gaps: the gaps are X's own code, no child ran in them.
            [span("X", None, 0, 100), span("A", "X", 10, 40), span("B", "X", 50, 90)],
            {"X": 0, "A": 0, "B": 0},
            id="sequential-children",
        ),
        pytest.param(
            # A runs past X's last child C: from C's end back to B's start is covered by A, then
            # X's own gap 20-40 before B is not (A started at 40 only).
            [
                span("X", None, 0, 100),
                span("B", "X", 20, 30),
                span("A", "X", 40, 95),
                span("C", "X", 50, 100),
            ],
            {"X": 10, "A": 0, "B": 0, "C": 0},
            id="long-child-skipped-twice",
        ),
    ],
)
def test_critical_path_time_a_parent_holds_while_a_child_runs(records, waiting):
    trace = profile(records)
    assert {node.name: node.critical_path_waiting_ns for node in trace.spans} == waiting
    assert_tiles(trace)
