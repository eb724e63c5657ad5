"""How reports write numbers for people: durations, counts of things, dollars.

One function per kind, shared by the text, console and HTML reports, so one report never
says "1.71s" in one place and "1.71 s" in another, nor "1 traces".
"""

from __future__ import annotations

import math

#: Nanoseconds in a millisecond, for the ``*_ms`` numbers of the JSON outputs, span attributes and
#: metrics (a float: their values are floats).
NS_PER_MS = 1e6

# (nanoseconds per unit, unit), largest first.
_UNITS = ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs"), (1, "ns"))


def format_duration(ns: float) -> str:
    """A duration in SI form with three significant digits: "850 ns", "41.2 µs", "805 ms", "1.71 s", "136 s".

    Seconds are the largest unit: an hour is "3600 s".
    """
    if not math.isfinite(ns):
        return "-"
    magnitude = abs(ns)
    for size, unit in _UNITS:
        if magnitude >= size or size == 1:
            value = ns / size
            # Three significant digits, rounded before the unit is chosen: 999.6 ms is "1.00 s".
            digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
            if unit == "ns":
                digits = 0
            text = f"{value:.{digits}f}"
            if float(text) and abs(float(text)) >= 1000 and unit != "s":
                return format_duration(math.copysign(size * 1000, ns))
            return f"{text} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``count`` and the noun, in the plural unless there is one: "1 trace", "3 traces", "2,000 spans"."""
    return f"{count:,} {noun if count == 1 else plural_form or noun + 's'}"


def format_usd(amount: float) -> str:
    """US dollars: "$1.25" from one dollar, "$0.0123" below it, "<$0.0001" for a non-zero trifle."""
    if amount >= 1:
        return f"${amount:,.2f}"
    if 0 < amount < 0.00005:
        return "<$0.0001"
    return f"${amount:.4f}"
