"""The ``a=b,c=d`` splitter shared by the trace stores' headers and the category overrides."""

from __future__ import annotations

import pytest

from otel_agent_profiler.core.key_value_text import split_pairs


@pytest.mark.parametrize(
    ("text", "split_at_last_equals", "pairs"),
    [
        ("", False, []),
        (" a = 1 , ,b=2=3 ", False, [("a", "1"), ("b", "2=3")]),
        ("a=b=c", True, [("a=b", "c")]),
        ("k=", False, [("k", "")]),
    ],
)
def test_pairs_are_stripped_and_blank_items_skipped(
    text: str, split_at_last_equals: bool, pairs: list[tuple[str, str]]
) -> None:
    assert split_pairs(text, "key=value pairs", split_at_last_equals=split_at_last_equals) == pairs


@pytest.mark.parametrize("text", ["a", "a=1,b", " =1"])
def test_an_item_without_equals_or_key_names_the_expected_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"^expected key=value pairs separated by commas, got '"):
        split_pairs(text, "key=value pairs")
