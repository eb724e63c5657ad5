"""``find_all``: every registered finder (``registry.FINDERS``) on a trace, the findings ranked."""

from __future__ import annotations

from ..profile import TraceProfile
from ..projection import RecordedSchedule
from .base import DEFAULT_OPTIONS, Finding, FindingOptions
from .ranking import rank
from .registry import FINDERS


def find_all(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """The findings on the trace worth acting on: budget overruns, then the largest saving first (then by kind,
    then title).

    Findings about the same spans are folded into one (see ``ranking.rank``), and the noise is
    left out: savings under ``options.min_saving`` of the trace, and findings that save no time
    and suggest nothing. Each finder on its own returns everything it found.

    Every projection of the trace starts from one ``RecordedSchedule``: ``schedule`` if given (a
    caller that projects the trace again, for ``combined_projection``, builds it and passes it to
    both), else one built here.
    """
    schedule = schedule if schedule is not None else RecordedSchedule(profile)
    findings: list[Finding] = []
    for finder in FINDERS:
        findings.extend(finder(profile, options, schedule=schedule))
    return rank(profile, findings, options)
