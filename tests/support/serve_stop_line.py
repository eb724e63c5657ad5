"""Reading ``serve``'s stop line (a sentence) back into its counts, for the tests that check them."""

from __future__ import annotations

import re

STOP_LINE = re.compile(
    r"received ([\d,]+) spans? .*?; forwarded ([\d,]+), ([\d,]+) not delivered(?:.*?, ([\d,]+) rejected)?"
)


def stop_counts(match: re.Match[str]) -> tuple[int | None, ...]:
    """The stop line's counts as numbers (None for a count it leaves out)."""
    return tuple(int(group.replace(",", "")) if group is not None else None for group in match.groups())
