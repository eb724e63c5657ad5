"""Self time: duration minus the union of the direct children's intervals, clipped to the span."""

from __future__ import annotations

import pytest

from tests.support.span_builders import CONSUMER, PRODUCER, profile, self_times_of, span

CASES = [
    pytest.param([span("L", None, 10, 35)], {"L": 25}, id="leaf"),
    pytest.param([span("L", None, 0, 0)], {"L": 0}, id="zero-length-leaf"),
    pytest.param(
        [span("P", None, 0, 100), span("A", "P", 10, 30), span("B", "P", 40, 70)],
        {"P": 100 - 20 - 30, "A": 20, "B": 30},
        id="sequential-children",
    ),
    pytest.param(
        [span("P", None, 0, 100), span("A", "P", 10, 50), span("B", "P", 50, 90)],
        {"P": 20, "A": 40, "B": 40},
        id="back-to-back-children",
    ),
    pytest.param(
        # Union of [10, 60] and [40, 90] is [10, 90]: 80, not 50 + 50.
        [span("P", None, 0, 100), span("A", "P", 10, 60), span("B", "P", 40, 90)],
        {"P": 20, "A": 50, "B": 50},
        id="overlapping-children-not-double-counted",
    ),
    pytest.param(
        # Three concurrent children over [20, 50]: covered once.
        [span("P", None, 0, 100), span("A", "P", 20, 50), span("B", "P", 20, 50), span("C", "P", 30, 40)],
        {"P": 70, "A": 30, "B": 30, "C": 10},
        id="concurrent-children-not-double-counted",
    ),
    pytest.param(
        # Concurrent children whose summed durations exceed the parent: never negative.
        [span("P", None, 0, 100)] + [span(f"C{i}", "P", 0, 100) for i in range(5)],
        {"P": 0, **{f"C{i}": 100 for i in range(5)}},
        id="many-concurrent-children-exceeding-parent",
    ),
    pytest.param(
        # Two disjoint overlapping groups: [10, 40] and [60, 80].
        [
            span("P", None, 0, 100),
            span("A", "P", 10, 30),
            span("B", "P", 20, 40),
            span("C", "P", 60, 80),
            span("D", "P", 65, 70),
        ],
        {"P": 100 - 30 - 20, "A": 20, "B": 20, "C": 20, "D": 5},
        id="two-overlap-groups",
    ),
    pytest.param(
        # A [60, 150] overflows P [0, 100]: only [60, 100] counts against P.
        [span("P", None, 0, 100), span("A", "P", 60, 150)],
        {"P": 60, "A": 90},
        id="child-overflowing-end-clipped",
    ),
    pytest.param(
        [span("P", None, 50, 100), span("A", "P", 20, 70)],
        {"P": 30, "A": 50},
        id="child-overflowing-start-clipped",
    ),
    pytest.param(
        [span("P", None, 10, 30), span("B", "P", 5, 35)],
        {"P": 0, "B": 30},
        id="child-overflowing-both-sides",
    ),
    pytest.param(
        [span("P", None, 0, 100), span("A", "P", 150, 200), span("B", "P", -50, -10)],
        {"P": 100, "A": 50, "B": 40},
        id="children-entirely-outside-parent",
    ),
    pytest.param(
        # Touching the parent's edges from outside covers nothing.
        [span("P", None, 50, 100), span("A", "P", 10, 50), span("B", "P", 100, 120)],
        {"P": 50, "A": 40, "B": 20},
        id="children-touching-parent-edges-from-outside",
    ),
    pytest.param(
        [span("P", None, 0, 100), span("A", "P", 0, 100)],
        {"P": 0, "A": 100},
        id="fully-covered-parent",
    ),
    pytest.param(
        [span("P", None, 0, 100), span("A", "P", 0, 60), span("B", "P", 40, 100)],
        {"P": 0, "A": 60, "B": 60},
        id="fully-covered-by-two-overlapping-children",
    ),
    pytest.param(
        [span("P", None, 0, 100), span("A", "P", 0, 50), span("B", "P", 50, 100)],
        {"P": 0, "A": 50, "B": 50},
        id="fully-covered-by-two-back-to-back-children",
    ),
    pytest.param(
        # G [20, 80] sticks out of its parent A [10, 40] into P's own time: P is unaffected
        # by its grandchild, A counts G only over [20, 40].
        [span("P", None, 0, 100), span("A", "P", 10, 40), span("G", "A", 20, 80)],
        {"P": 70, "A": 10, "G": 60},
        id="grandchild-does-not-affect-grandparent",
    ),
    pytest.param(
        [
            span("P", None, 0, 100),
            span("A", "P", 10, 90),
            span("G1", "A", 20, 30),
            span("G2", "A", 25, 50),
            span("GG", "G2", 30, 40),
        ],
        {"P": 20, "A": 80 - 30, "G1": 10, "G2": 15, "GG": 10},
        id="nested-grandchildren",
    ),
    pytest.param(
        [span("P", None, 0, 100), span("Z", "P", 50, 50)],
        {"P": 100, "Z": 0},
        id="zero-length-child-covers-nothing",
    ),
    pytest.param(
        # Self time does not care about span kinds (unlike the critical path).
        [span("P", None, 0, 100, PRODUCER), span("C", "P", 20, 60, CONSUMER)],
        {"P": 60, "C": 40},
        id="consumer-child-of-producer-still-covers",
    ),
    pytest.param(
        # Large real-world nanosecond timestamps stay exact integers.
        [
            span("P", None, 1_700_000_000_000_000_000, 1_700_000_000_123_456_789),
            span("A", "P", 1_700_000_000_000_000_001, 1_700_000_000_100_000_000),
        ],
        {"P": 123_456_789 - 99_999_999, "A": 99_999_999},
        id="epoch-nanoseconds-exact",
    ),
]


@pytest.mark.parametrize(("records", "expected"), CASES)
def test_self_time(records, expected):
    trace = profile(records)
    assert self_times_of(trace) == expected
    for node in trace.spans:
        assert isinstance(node.self_time_ns, int)
        assert 0 <= node.self_time_ns <= node.duration_ns


@pytest.mark.parametrize(("records", "expected"), CASES)
def test_self_time_does_not_depend_on_arrival_order(records, expected):
    assert self_times_of(profile(list(reversed(records)))) == expected
