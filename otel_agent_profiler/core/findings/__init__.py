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
  optimising it can give; ``evidence["saving_if_2x_faster_ns"]`` is the same for 2x faster;
* ``repeated_tool_call``: dropping every repeat of an identical call but the first;
* ``parallelizable``: starting independent sequential siblings together;
* ``what_if``: the selection made N times faster;
* ``llm_queue``: removing the inference server's queue time from every call (``llm_phases``).

Kinds that suggest no single change (``sequential_llm_chain``, ``large_prompt``, ``llm_timing``,
``llm_gaps``, ``llm_prefill``, ``llm_decode``, ``prefix_cache``, ``token_profile``, ``budget_exceeded``) have
``saving_ns == 0`` and carry their numbers (tokens, USD, nanoseconds) in ``evidence``.

Like the projection, this needs the span tree: use it before ``TraceProfile.release()``.
"""

from __future__ import annotations

from .all_findings import FINDERS, find_all
from .base import (
    BOTTLENECK,
    BUDGET_EXCEEDED,
    CATEGORY_BUDGET_MEASURES,
    DEFAULT_CONTEXT_WINDOWS,
    DEFAULT_OPTIONS,
    KINDS,
    LARGE_PROMPT,
    LLM_DECODE,
    LLM_GAPS,
    LLM_PREFILL,
    LLM_QUEUE,
    LLM_TIMING,
    PARALLELIZABLE,
    PREFIX_CACHE,
    REPEATED_TOOL_CALL,
    SEQUENTIAL_LLM_CHAIN,
    SLOW_TOOL,
    TOKEN_PROFILE,
    WHAT_IF,
    Evidence,
    Finding,
    FindingOptions,
    JSONValue,
    describe_location,
    describe_where,
    format_duration,
    where,
)
from .bottlenecks import find_bottlenecks, find_slow_tools
from .large_prompts import context_window, find_large_prompts
from .llm_chains import find_sequential_llm_chains
from .llm_phases import find_llm_phases
from .llm_timing import find_llm_gaps, find_llm_timing, find_prefix_cache
from .parallelization import dependency, find_parallelization, recorded_input, recorded_output, tool_call_id
from .ranking import CombinedProjection, combined_projection, rank
from .repeated_tool_calls import find_repeated_tool_calls, tool_arguments
from .tokens_and_budgets import find_budget_overruns, find_token_profile
from .what_ifs import WhatIfProjection, select, what_if, what_ifs_together

__all__ = [
    "BOTTLENECK",
    "BUDGET_EXCEEDED",
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
    "REPEATED_TOOL_CALL",
    "SEQUENTIAL_LLM_CHAIN",
    "SLOW_TOOL",
    "TOKEN_PROFILE",
    "WHAT_IF",
    "CombinedProjection",
    "Evidence",
    "Finding",
    "FindingOptions",
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
