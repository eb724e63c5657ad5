"""How the reports write numbers: durations a person reads at a glance, whatever their length."""

from __future__ import annotations

import pytest

from otel_agent_profiler.core.units import format_duration

S = 1_000_000_000


@pytest.mark.parametrize(
    ("seconds", "written"),
    [
        (35.1, "35.1 s"),
        (99.94, "99.9 s"),
        # "100 s" and up read slower than minutes and seconds.
        (99.96, "1 min 40 s"),
        (136, "2 min 16 s"),
        (599.4, "9 min 59 s"),
        # From ten minutes on, minutes with a decimal: three significant digits, as below a minute.
        (599.6, "10.0 min"),
        (738, "12.3 min"),
        # 59.95 min rounds up to the hour, not to "60.0 min".
        (3597, "1 h 0 min"),
        (3900, "1 h 5 min"),
        (35_999, "10.0 h"),
        # The summary of a folder of runs once said "120219 s".
        (120_219, "33.4 h"),
        (3_600_000, "1000 h"),
    ],
)
def test_long_durations_are_written_in_minutes_and_hours(seconds: float, written: str) -> None:
    assert format_duration(seconds * S) == written


@pytest.mark.parametrize("seconds", [0.5, 42, 136, 738, 3900, 120_219, 10**7])
def test_a_duration_fits_a_ten_character_column(seconds: float) -> None:
    assert len(format_duration(seconds * S)) <= 10


def test_a_negative_long_duration_keeps_its_sign() -> None:
    assert format_duration(-136 * S) == "-2 min 16 s"
