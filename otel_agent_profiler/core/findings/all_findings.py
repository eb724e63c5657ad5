"""Every finder together: ``FINDERS`` and ``find_all``, which runs them (and the configured what-ifs) on a trace."""

from __future__ import annotations

from collections.abc import Callable

from ..profile import TraceProfile
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

#: The finders ``find_all`` runs (``what_if`` runs once per ``FindingOptions.what_ifs`` entry).
FINDERS: tuple[Callable[[TraceProfile, FindingOptions], list[Finding]], ...] = (
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


def find_all(profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS) -> list[Finding]:
    """The findings on the trace worth acting on: budget overruns, then the largest saving first (then by kind,
    then title).

    Findings about the same spans are folded into one (see ``ranking.rank``), and the noise is
    left out: savings under ``options.min_saving`` of the trace, and findings that save no time
    and suggest nothing. Each finder on its own returns everything it found.
    """
    findings: list[Finding] = []
    for finder in FINDERS:
        findings.extend(finder(profile, options))
    for selector, speedup in options.what_ifs:
        findings.append(what_if(profile, selector, speedup))
    return rank(profile, findings, options)
