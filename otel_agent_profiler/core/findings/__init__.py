"""From a profile to decisions: findings on one trace, each with its evidence and estimated saving.

A finding names something worth acting on (a bottleneck, a slow tool, calls that could run in
parallel, a budget overrun, ...), the spans it is about (``span_ids``, and ``where``: name,
model or tool, start offset of each), what to change (``suggestion``, one sentence), the numbers
behind it (``evidence``: plain JSON values) and ``saving_ns``: how much sooner the trace would
end if the change the finding suggests were made. ``find_all`` ranks them, folds findings about
the same spans into one (the others become its ``details``) and leaves the noise out;
``combined_projection`` is the trace's duration with every change made at once.

Savings are never sums of durations: each is recomputed on the
trace's own tree with :func:`projection.projected_duration_ns`, so work running in parallel
with something longer saves nothing and work on the critical path moves everything after it.

Which change each kind's ``saving_ns`` stands for:

* ``bottleneck``, ``slow_tool``: removing the span's (or operation's) own time, the most that
  optimising it can give; ``evidence["saving_if_2x_faster_ns"]`` is the same for 2x faster (a
  parent's critical-path time while one of its children ran is a gap, not own time: no saving);
* ``repeated_tool_call``: dropping every repeat of an identical call but the first;
* ``parallelizable``: starting independent sequential siblings together (if they are independent:
  ``rests_on`` says whether the trace shows it or the finding assumes it);
* ``what_if``: the selection made N times faster;
* ``llm_queue``: removing the inference server's queue time from every call (``llm_phases``).

Kinds that suggest no single change (``sequential_llm_chain``, ``large_prompt``, ``llm_timing``,
``llm_gaps``, ``llm_prefill``, ``llm_decode``, ``prefix_cache``, ``token_profile``, ``budget_exceeded``) have
``saving_ns == 0`` and carry their numbers (tokens, USD, nanoseconds) in ``evidence``.

Each kind has a ``FindingKind`` record (``kinds``): its finder, how its findings fold, what
their change does in the combined projection, how the report of many traces groups them and says
what they found. ``registry.REGISTRY`` is the table of them all; a new kind is a finder module
and a record there.

Every finding says what it rests on (``Finding.rests_on``, the vocabulary of ``rests_on``):
the measured times, evidence that calls are independent, an assumption, or times an adapter
estimated. ``combined_projection`` makes only the changes the trace shows to be possible.

Like the projection, this needs the span tree: use it before ``TraceProfile.release()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .all_findings import find_all
    from .base import (
        CATEGORY_BUDGET_MEASURES,
        DEFAULT_CONTEXT_WINDOWS,
        DEFAULT_OPTIONS,
        Evidence,
        Finding,
        FindingOptions,
        JSONValue,
        describe_location,
        describe_where,
        format_duration,
        where,
    )
    from .bottlenecks import BOTTLENECK, SLOW_TOOL, find_bottlenecks, find_slow_tools
    from .kinds import Change, Finder, FindingKind, Grouping
    from .large_prompts import LARGE_PROMPT, context_window, find_large_prompts
    from .llm_chains import SEQUENTIAL_LLM_CHAIN, find_sequential_llm_chains
    from .llm_phases import LLM_DECODE, LLM_PREFILL, LLM_QUEUE, find_llm_phases
    from .llm_timing import LLM_GAPS, LLM_TIMING, PREFIX_CACHE, find_llm_gaps, find_llm_timing, find_prefix_cache
    from .parallelization import (
        PARALLELIZABLE,
        dependency,
        find_parallelization,
        recorded_input,
        recorded_output,
        tool_call_id,
    )
    from .ranking import CombinedProjection, combined_projection, rank
    from .registry import BY_KIND, FINDERS, KINDS, REGISTRY
    from .repeated_tool_calls import REPEATED_TOOL_CALL, find_repeated_tool_calls, tool_arguments
    from .tokens_and_budgets import BUDGET_EXCEEDED, TOKEN_PROFILE, find_budget_overruns, find_token_profile
    from .what_ifs import WHAT_IF, WhatIfProjection, find_what_ifs, select, what_if, what_ifs_together

# Each name is imported from its module on first use: a module that needs one
# constant (the default context windows, a kind's name) does not load every finder.
_EXPORTED_FROM = {
    "find_all": "all_findings",
    "CATEGORY_BUDGET_MEASURES": "base",
    "DEFAULT_CONTEXT_WINDOWS": "base",
    "DEFAULT_OPTIONS": "base",
    "Evidence": "base",
    "Finding": "base",
    "FindingOptions": "base",
    "JSONValue": "base",
    "describe_location": "base",
    "describe_where": "base",
    "format_duration": "base",
    "where": "base",
    "BOTTLENECK": "bottlenecks",
    "SLOW_TOOL": "bottlenecks",
    "find_bottlenecks": "bottlenecks",
    "find_slow_tools": "bottlenecks",
    "Change": "kinds",
    "Finder": "kinds",
    "FindingKind": "kinds",
    "Grouping": "kinds",
    "LARGE_PROMPT": "large_prompts",
    "context_window": "large_prompts",
    "find_large_prompts": "large_prompts",
    "SEQUENTIAL_LLM_CHAIN": "llm_chains",
    "find_sequential_llm_chains": "llm_chains",
    "LLM_DECODE": "llm_phases",
    "LLM_PREFILL": "llm_phases",
    "LLM_QUEUE": "llm_phases",
    "find_llm_phases": "llm_phases",
    "LLM_GAPS": "llm_timing",
    "LLM_TIMING": "llm_timing",
    "PREFIX_CACHE": "llm_timing",
    "find_llm_gaps": "llm_timing",
    "find_llm_timing": "llm_timing",
    "find_prefix_cache": "llm_timing",
    "PARALLELIZABLE": "parallelization",
    "dependency": "parallelization",
    "find_parallelization": "parallelization",
    "recorded_input": "parallelization",
    "recorded_output": "parallelization",
    "tool_call_id": "parallelization",
    "CombinedProjection": "ranking",
    "combined_projection": "ranking",
    "rank": "ranking",
    "BY_KIND": "registry",
    "FINDERS": "registry",
    "KINDS": "registry",
    "REGISTRY": "registry",
    "REPEATED_TOOL_CALL": "repeated_tool_calls",
    "find_repeated_tool_calls": "repeated_tool_calls",
    "tool_arguments": "repeated_tool_calls",
    "BUDGET_EXCEEDED": "tokens_and_budgets",
    "TOKEN_PROFILE": "tokens_and_budgets",
    "find_budget_overruns": "tokens_and_budgets",
    "find_token_profile": "tokens_and_budgets",
    "WHAT_IF": "what_ifs",
    "WhatIfProjection": "what_ifs",
    "find_what_ifs": "what_ifs",
    "select": "what_ifs",
    "what_if": "what_ifs",
    "what_ifs_together": "what_ifs",
}


__getattr__, __dir__ = _lazy_attributes(__name__, _EXPORTED_FROM, globals())


__all__ = [
    "BOTTLENECK",
    "BUDGET_EXCEEDED",
    "BY_KIND",
    "CATEGORY_BUDGET_MEASURES",
    "DEFAULT_CONTEXT_WINDOWS",
    "DEFAULT_OPTIONS",
    "FINDERS",
    "KINDS",
    "LARGE_PROMPT",
    "LLM_DECODE",
    "LLM_GAPS",
    "LLM_PREFILL",
    "LLM_QUEUE",
    "LLM_TIMING",
    "PARALLELIZABLE",
    "PREFIX_CACHE",
    "REGISTRY",
    "REPEATED_TOOL_CALL",
    "SEQUENTIAL_LLM_CHAIN",
    "SLOW_TOOL",
    "TOKEN_PROFILE",
    "WHAT_IF",
    "Change",
    "CombinedProjection",
    "Evidence",
    "Finder",
    "Finding",
    "FindingKind",
    "FindingOptions",
    "Grouping",
    "JSONValue",
    "WhatIfProjection",
    "combined_projection",
    "context_window",
    "dependency",
    "describe_location",
    "describe_where",
    "find_all",
    "find_bottlenecks",
    "find_budget_overruns",
    "find_large_prompts",
    "find_llm_gaps",
    "find_llm_phases",
    "find_llm_timing",
    "find_parallelization",
    "find_prefix_cache",
    "find_repeated_tool_calls",
    "find_sequential_llm_chains",
    "find_slow_tools",
    "find_token_profile",
    "find_what_ifs",
    "format_duration",
    "rank",
    "recorded_input",
    "recorded_output",
    "select",
    "tool_arguments",
    "tool_call_id",
    "what_if",
    "what_ifs_together",
    "where",
]
