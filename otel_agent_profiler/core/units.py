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
    """A duration as a person reads it, with about three significant digits: "850 ns", "41.2 µs",
    "805 ms", "1.71 s", "99.9 s"; from 100 s on in minutes and hours: "2 min 16 s", "12.3 min",
    "1 h 5 min", "33.4 h" (never "120219 s").

    At most 10 characters, so the reports' columns hold it.
    """
    if not math.isfinite(ns):
        return "-"
    magnitude = abs(ns)
    if magnitude >= _LONG_NS:
        return ("-" if ns < 0 else "") + _long_duration(magnitude / 1e9)
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


#: From this duration on (what "99.9 s" rounds up from), minutes and hours: "100 s" reads slower than "1 min 40 s".
_LONG_NS = 99.95e9


def _long_duration(seconds: float) -> str:
    # Below ten of a unit, the unit and the next smaller one ("2 min 16 s"); from ten on, the unit with
    # a decimal ("12.3 min"): three significant digits either way, and never wider than 10 characters.
    if round(seconds) < 600:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest} s"
    if round(seconds / 60, 1) < 60:
        return f"{seconds / 60:.1f} min"
    if round(seconds / 60) < 600:
        hours, rest = divmod(round(seconds / 60), 60)
        return f"{hours} h {rest} min"
    hours_f = seconds / 3600
    return f"{hours_f:.1f} h" if round(hours_f, 1) < 100 else f"{hours_f:.0f} h"


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
