"""The reference the end-to-end tests hold our critical path against: Jaeger UI's algorithm on Jaeger JSON.

Cases from Jaeger UI's own tests (CriticalPath/testCases) and its documented behaviour; times in µs.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.jaeger_ui_critical_path import jaeger_ui_critical_path_us


def trace(*spans: tuple[str, str | None, int, int]) -> dict[str, Any]:
    """Spans as (id, parent id, start µs, end µs)."""
    return {
        "spans": [
            {
                "spanID": sid,
                "startTime": start,
                "duration": end - start,
                "references": [{"refType": "CHILD_OF", "spanID": parent}] if parent else [],
            }
            for sid, parent, start, end in spans
        ]
    }


@pytest.mark.parametrize(
    ("spans", "expected"),
    [
        pytest.param(
            [("p", None, 0, 100), ("a", "p", 10, 40), ("b", "p", 50, 90)],
            {"p": 30, "a": 30, "b": 40},
            id="sequential-children",
        ),
        pytest.param(
            [("p", None, 0, 100), ("a", "p", 10, 80), ("b", "p", 20, 90)],
            {"p": 30, "b": 70},
            id="overlapping-children-never-share-the-path",
        ),
        pytest.param(
            [("p", None, 0, 100), ("a", "p", 0, 50), ("b", "p", 50, 100)],
            {"p": 50, "b": 50},
            id="back-to-back-child-missed-by-the-strict-comparison",
        ),
        pytest.param(
            [("p", None, 0, 100), ("a", "p", 150, 200), ("c", "a", 160, 170), ("b", "p", 20, 60)],
            {"p": 60, "b": 40},
            id="child-after-parent-dropped-with-its-subtree",
        ),
        pytest.param(
            [("p", None, 10, 100), ("a", "p", 0, 40), ("b", "p", 80, 130)],
            {"p": 40, "a": 30, "b": 20},
            id="overflowing-children-clipped",
        ),
        pytest.param(
            [("p", None, 0, 100), ("a", "p", 10, 90), ("c", "a", 20, 50), ("d", "a", 60, 80)],
            {"p": 20, "a": 30, "c": 30, "d": 20},
            id="nested",
        ),
    ],
)
def test_jaeger_ui_critical_path(spans: list[tuple[str, str | None, int, int]], expected: dict[str, int]) -> None:
    got = jaeger_ui_critical_path_us(trace(*spans))
    assert got == expected
    root_duration = spans[0][3] - spans[0][2]
    assert sum(got.values()) == root_duration


def test_follows_from_children_are_dropped_with_their_subtree() -> None:
    data = trace(("p", None, 0, 100), ("a", "p", 10, 90), ("c", "a", 20, 95), ("b", "p", 20, 60))
    data["spans"][1]["references"] = [{"refType": "FOLLOWS_FROM", "spanID": "p"}]
    assert jaeger_ui_critical_path_us(data) == {"p": 60, "b": 40}
