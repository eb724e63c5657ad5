"""Every finder together: ``FINDERS`` and ``find_all``, which runs them (and the configured what-ifs) on a trace."""

from __future__ import annotations

from typing import Protocol

from ..profile import TraceProfile
from ..projection import RecordedSchedule
from .base import DEFAULT_OPTIONS, Finding, FindingOptions
from .bottlenecks import find_bottlenecks, find_slow_tools
from .large_prompts import find_large_prompts
from .llm_chains import find_sequential_llm_chains
from .llm_phases import find_llm_phases
from .llm_timing import find_llm_gaps, find_llm_timing, find_prefix_cache
from .parallelization import find_parallelization
from .ranking import rank
from .repeated_tool_calls import find_repeated_tool_calls
from .tokens_and_budgets import find_budget_overruns, find_token_profile
from .what_ifs import what_if


class Finder(Protocol):
    """What every finder is: the findings of one kind (or two) on a trace.

    ``schedule`` is the trace's recorded schedule, which ``find_all`` builds once and hands to
    every finder so that those projecting savings share it; one called alone builds its own
    when it projects, and a finder that projects nothing ignores it.
    """

    def __call__(
        self, profile: TraceProfile, options: FindingOptions = ..., *, schedule: RecordedSchedule | None = None
    ) -> list[Finding]: ...


#: The finders ``find_all`` runs (``what_if`` runs once per ``FindingOptions.what_ifs`` entry).
FINDERS: tuple[Finder, ...] = (
    find_bottlenecks,
    find_slow_tools,
    find_large_prompts,
    find_repeated_tool_calls,
    find_sequential_llm_chains,
    find_parallelization,
    find_llm_timing,
    find_llm_gaps,
    find_llm_phases,
    find_prefix_cache,
    find_token_profile,
    find_budget_overruns,
)


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
    for selector, speedup in options.what_ifs:
        findings.append(what_if(profile, selector, speedup, schedule=schedule))
    return rank(profile, findings, options)
