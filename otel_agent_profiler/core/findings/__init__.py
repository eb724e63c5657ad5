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

from ..lazy_exports import exported_names as _exported_names, lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .all_findings import find_all as find_all
    from .base import (
        CATEGORY_BUDGET_MEASURES as CATEGORY_BUDGET_MEASURES,
        DEFAULT_CONTEXT_WINDOWS as DEFAULT_CONTEXT_WINDOWS,
        DEFAULT_OPTIONS as DEFAULT_OPTIONS,
        Evidence as Evidence,
        Finding as Finding,
        FindingOptions as FindingOptions,
        JSONValue as JSONValue,
        describe_location as describe_location,
        describe_where as describe_where,
        format_duration as format_duration,
        where as where,
    )
    from .bottlenecks import (
        BOTTLENECK as BOTTLENECK,
        SLOW_TOOL as SLOW_TOOL,
        find_bottlenecks as find_bottlenecks,
        find_slow_tools as find_slow_tools,
    )
    from .kinds import Change as Change, Finder as Finder, FindingKind as FindingKind, Grouping as Grouping
    from .large_prompts import (
        LARGE_PROMPT as LARGE_PROMPT,
        context_window as context_window,
        find_large_prompts as find_large_prompts,
    )
    from .llm_chains import (
        SEQUENTIAL_LLM_CHAIN as SEQUENTIAL_LLM_CHAIN,
        find_sequential_llm_chains as find_sequential_llm_chains,
    )
    from .llm_phases import (
        LLM_DECODE as LLM_DECODE,
        LLM_PREFILL as LLM_PREFILL,
        LLM_QUEUE as LLM_QUEUE,
        find_llm_phases as find_llm_phases,
    )
    from .llm_timing import (
        LLM_GAPS as LLM_GAPS,
        LLM_TIMING as LLM_TIMING,
        PREFIX_CACHE as PREFIX_CACHE,
        find_llm_gaps as find_llm_gaps,
        find_llm_timing as find_llm_timing,
        find_prefix_cache as find_prefix_cache,
    )
    from .parallelization import (
        PARALLELIZABLE as PARALLELIZABLE,
        dependency as dependency,
        find_parallelization as find_parallelization,
        recorded_input as recorded_input,
        recorded_output as recorded_output,
        tool_call_id as tool_call_id,
    )
    from .ranking import (
        CombinedProjection as CombinedProjection,
        combined_projection as combined_projection,
        rank as rank,
    )
    from .registry import BY_KIND as BY_KIND, FINDERS as FINDERS, KINDS as KINDS, REGISTRY as REGISTRY
    from .repeated_tool_calls import (
        REPEATED_TOOL_CALL as REPEATED_TOOL_CALL,
        find_repeated_tool_calls as find_repeated_tool_calls,
        tool_arguments as tool_arguments,
    )
    from .tokens_and_budgets import (
        BUDGET_EXCEEDED as BUDGET_EXCEEDED,
        TOKEN_PROFILE as TOKEN_PROFILE,
        find_budget_overruns as find_budget_overruns,
        find_token_profile as find_token_profile,
    )
    from .what_ifs import (
        WHAT_IF as WHAT_IF,
        WhatIfProjection as WhatIfProjection,
        find_what_ifs as find_what_ifs,
        select as select,
        what_if as what_if,
        what_ifs_together as what_ifs_together,
    )

# Each name is imported from its module on first use: a module that needs one
# constant (the default context windows, a kind's name) does not load every finder.
_EXPORTED_FROM = {
    "all_findings": ("find_all",),
    "base": (
        "CATEGORY_BUDGET_MEASURES",
        "DEFAULT_CONTEXT_WINDOWS",
        "DEFAULT_OPTIONS",
        "Evidence",
        "Finding",
        "FindingOptions",
        "JSONValue",
        "describe_location",
        "describe_where",
        "format_duration",
        "where",
    ),
    "bottlenecks": ("BOTTLENECK", "SLOW_TOOL", "find_bottlenecks", "find_slow_tools"),
    "kinds": ("Change", "Finder", "FindingKind", "Grouping"),
    "large_prompts": ("LARGE_PROMPT", "context_window", "find_large_prompts"),
    "llm_chains": ("SEQUENTIAL_LLM_CHAIN", "find_sequential_llm_chains"),
    "llm_phases": ("LLM_DECODE", "LLM_PREFILL", "LLM_QUEUE", "find_llm_phases"),
    "llm_timing": ("LLM_GAPS", "LLM_TIMING", "PREFIX_CACHE", "find_llm_gaps", "find_llm_timing", "find_prefix_cache"),
    "parallelization": (
        "PARALLELIZABLE",
        "dependency",
        "find_parallelization",
        "recorded_input",
        "recorded_output",
        "tool_call_id",
    ),
    "ranking": ("CombinedProjection", "combined_projection", "rank"),
    "registry": ("BY_KIND", "FINDERS", "KINDS", "REGISTRY"),
    "repeated_tool_calls": ("REPEATED_TOOL_CALL", "find_repeated_tool_calls", "tool_arguments"),
    "tokens_and_budgets": ("BUDGET_EXCEEDED", "TOKEN_PROFILE", "find_budget_overruns", "find_token_profile"),
    "what_ifs": ("WHAT_IF", "WhatIfProjection", "find_what_ifs", "select", "what_if", "what_ifs_together"),
}


__getattr__, __dir__ = _lazy_attributes(__name__, _EXPORTED_FROM, globals())


__all__ = _exported_names(_EXPORTED_FROM)
